"""Figure of the fleet chapter: the cheapest assignment of chips to two models' four workloads."""

from __future__ import annotations

import altair as alt
import pandas as pd
from pandas.io.formats.style import Styler

from perwatt import catalog, data, tables
from perwatt import fleet_scenario as scenario_model
from perwatt.figures.kit import CHIP_COLOURS, colour, figure, framed, tooltips
from perwatt.interactive import Control, InteractiveFigure

#: The fleet's chips in a fixed order and colour (TPU7x and Trainium2 added to the kit's).
FLEET_COLOURS = {**{k: CHIP_COLOURS[k] for k in ("jalapeno", "gb200", "b200", "h200", "h100")},
                 "tpu7x": "#ca8a04", "trainium2": "#be185d"}
CHIP_NAMES = {"jalapeno": "Jalapeño (assumed)", "gb200": "GB200", "b200": "B200", "h200": "H200", "h100": "H100",
              "tpu7x": "TPU7x (assumed)", "trainium2": "Trainium2 (assumed)"}
#: "No limit" on the site's power in the control (a budget of 0 MW is not a budget).
NO_LIMIT = 0


def _label(workload: str) -> str:
    model, kind = workload.rsplit(" ", 1)
    return f"{model}: {scenario_model.KIND_LABELS[kind]}"


def fleet_frame(agent_min_rate: int, site_mw: int, power_scale: float) -> pd.DataFrame:
    """Chips of each kind per workload in the cheapest plan; every row zero and ``feasible`` 0
    where no plan serves every workload within the budget."""
    budget = None if site_mw == NO_LIMIT else float(site_mw)
    try:
        frame = scenario_model.scenario(float(agent_min_rate), catalog.assumption("electricity_price_usd_per_kwh"),
                                        budget, float(power_scale))
        frame["feasible"] = 1
    except ValueError:  # no plan fits: ship the same rows, empty, and say so
        frame = scenario_model.scenario(float(agent_min_rate), catalog.assumption("electricity_price_usd_per_kwh"),
                                        None, float(power_scale))
        numbers = ["chips", "workload_usd_per_million_tokens", "total_usd_per_hour", "total_peak_mw",
                   "total_average_mw"]
        frame[numbers] = 0.0
        frame["feasible"] = 0
    frame["workload_label"] = frame["workload"].map(_label)
    # Ship the chips a plan uses (the page carries every setting's rows); a plan that does not
    # exist keeps its first workload's rows, which carry the verdict.
    used = frame[frame["chips"] > 0] if frame["feasible"].iloc[0] else frame[frame["workload"] == frame["workload"].iloc[0]]
    return used.reset_index(drop=True)


def _draw_fleet(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    totals = grid.groupby(["agent_min_rate", "site_mw", "power_scale", "workload"])["chips"].sum()
    x_scale = alt.Scale(domain=[0, float(totals.max()) * 1.05], nice=False)
    order = [_label(w) for w in dict.fromkeys(grid["workload"])]
    # Model and workload on two lines, so that on a phone the labels leave the bars and the plan's
    # totals most of the width.
    y = alt.Y("workload_label:N", title=None, sort=order,
              axis=alt.Axis(labelLimit=160, labelExpr="split(datum.label, ': ')"))
    names = " : ".join(f"datum.label == '{k}' ? '{v}'" for k, v in CHIP_NAMES.items()) + " : datum.label"
    chips = colour("hardware", "Chip", FLEET_COLOURS, labelExpr=names, orient="bottom", columns=2, labelLimit=260)
    # Every shipped row is drawn: a plan uses only chips it has (the frame keeps no zero rows), and
    # a setting with no plan draws its verdict rows as zero-width bars, so the chart's marks still
    # carry the model's answer (and no mark group is empty).
    bars = base.mark_bar(height=18).encode(
        x=alt.X("chips:Q", title="Chips in the cheapest plan", scale=x_scale, stack="zero"), y=y, color=chips,
        order=alt.Order("hardware:N"),
        tooltip=tooltips(("workload_label:N", "Workload"), ("hardware_label:N", "Chip"), ("chips:Q", "Chips", ",.0f"),
                         ("chips_per_instance:Q", "Chips per instance", ",.0f"),
                         ("workload_usd_per_million_tokens:Q", "US$ per million output tokens", ".4f")))
    first = str(grid["workload"].iloc[0])
    summary = base.transform_filter(f"datum.workload == '{first}'").transform_aggregate(
        # One row per setting: the plan's totals, under the names of the columns they come from.
        total_usd_per_hour="max(total_usd_per_hour)", total_peak_mw="max(total_peak_mw)",
        total_average_mw="max(total_average_mw)", feasible="max(feasible)").transform_calculate(
        text="datum.feasible > 0 ? 'US$' + format(datum.total_usd_per_hour, ',.0f') + ' an hour;\\npeak '"
             " + format(datum.total_peak_mw, '.1f') + ' MW, average ' + format(datum.total_average_mw, '.1f')"
             " + ' MW' : 'No plan serves every workload\\nwithin this budget'").mark_text(
        align="left", baseline="bottom", x=0, y=-6, fontSize=12, lineBreak="\n").encode(text="text:N")
    chart = alt.layer(bars, summary)
    out = framed(chart, "The cheapest fleet for two models and four workloads",
                 [f"{catalog.assumption('fleet_output_tokens_per_s') / 1e6:g}M output tokens/s, PUE "
                  f"{catalog.facility_pue():g}; Jalapeño, TPU7x and Trainium2 rest on assumptions."],
                 340, alt.Step(26))
    out.title.offset = 34  # room for the two lines of totals above the bars
    return out


@figure
def fleet() -> InteractiveFigure:
    """Stacked bars, one per model and workload (chat, agent calls, batch, long context, for
    gpt-oss-120b and DeepSeek R1): the chips of each kind that the cheapest plan assigns to it, in
    whole serving instances, for the chosen per-user target of agent calls, site power budget and
    assumed power of TPU7x and Trainium2, with the plan's cost an hour and its peak and average
    draw written above. Jalapeño's profile, and TPU7x's and Trainium2's power and price, are
    assumptions."""
    return InteractiveFigure(
        controls=(
            Control("agent_min_rate", "Agent target, tokens/s per user:", (20, 35, 50), 35, "select"),
            Control("site_mw", "Site power budget, MW:", (NO_LIMIT, 38, 36), NO_LIMIT, "select",
                    option_labels=("no limit", "38", "36")),
            Control("power_scale", "TPU7x and Trainium2 power, × assumed:", (0.5, 1.0, 2.0), 1.0, "select"),
        ),
        compute=fleet_frame, draw=_draw_fleet,
        keys=("workload", "hardware"), values=("chips", "total_usd_per_hour", "total_peak_mw", "total_average_mw",
                                                 "feasible", "workload_usd_per_million_tokens"),
        ships=("workload_label", "hardware_label", "chips_per_instance"))


def sensitivity_table(sens: pd.DataFrame) -> Styler:
    """:func:`perwatt.fleet_scenario.sensitivity`'s rows as the chapter shows them: each end's value
    (a supply as a whole count, anything else to two decimals), the cost change at each end, the
    Jalapeño chips and the chip with the most chips at the high end."""
    labels = data.load("accelerators").set_index("accelerator")["label"]

    def ends(column: str) -> list[str]:
        return [f"{v:,.0f}" if "supply, chips" in a else f"{v:,.2f}" for a, v in zip(sens["assumption"], sens[column])]

    shown = sens.assign(low=ends("low"), high=ends("high"),
                        high_largest=sens["high_largest"].map(lambda n: None if n is None else labels[n]))
    return tables.styled(shown, {
        "assumption": tables.Column("Assumption"),
        "low": tables.Column("Low value"), "high": tables.Column("High value"),
        "low_change_pct": tables.Column("Cost change at low, %", "{:+.2f}", "derived"),
        "high_change_pct": tables.Column("Cost change at high, %", "{:+.2f}", "derived"),
        "low_jalapeno_chips": tables.Column("Jalapeño chips at low", "{:,.0f}"),
        "high_jalapeno_chips": tables.Column("Jalapeño chips at high", "{:,.0f}"),
        "high_largest": tables.Column("Most chips at high"),
    }, caption="Change in the plan's cost an hour with one assumption moved to each end: rows with no plan "
       "at an end first, then the widest swing first; an empty cell: no plan serves every workload at that "
       "end.", table_id="fleet-sensitivity")
