"""Figure of the fleet chapter: the cheapest assignment of chips to chat and agent work."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perwatt import catalog
from perwatt import fleet as fleet_model
from perwatt.figures.kit import CHIP_COLOURS, colour, figure, framed, price_control, tooltips
from perwatt.interactive import Control, InteractiveFigure

WORKLOAD_LABELS = {"chat": f"chat ({fleet_model.CHAT_WORKLOAD})", "agent": f"agent calls ({fleet_model.AGENT_WORKLOAD})"}


def fleet_frame(agent_share: float, agent_min_rate: int, price_usd_per_kwh: float) -> pd.DataFrame:
    """Chips of each kind per workload in the cheapest plan."""
    frame = fleet_model.scenario(agent_share, float(agent_min_rate), price_usd_per_kwh)
    frame["workload_label"] = frame["workload"].map(WORKLOAD_LABELS)
    return frame


def _draw_fleet(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    totals = grid.groupby(["agent_share", "agent_min_rate", "price_usd_per_kwh", "workload"])["chips"].sum()
    x_scale = alt.Scale(domain=[0, float(totals.max()) * 1.35], nice=False)
    y = alt.Y("workload_label:N", title=None, sort=list(WORKLOAD_LABELS.values()))
    chips = colour("hardware", "Chip", CHIP_COLOURS,
                   labelExpr="datum.label == 'jalapeno' ? 'Jalapeño (assumed)' : upper(datum.label)")
    bars = base.mark_bar(height=26).encode(
        x=alt.X("chips:Q", title="Chips in the cheapest plan", scale=x_scale, stack="zero"), y=y, color=chips,
        order=alt.Order("hardware:N"),
        tooltip=tooltips(("workload_label:N", "Workload"), ("hardware_label:N", "Chip"), ("chips:Q", "Chips", ",.0f"),
                         ("chips_per_instance:Q", "Chips per instance", ",.0f"),
                         ("workload_usd_per_million_tokens:Q", "US$ per million output tokens", ".4f"),
                         ("workload_kwh_per_million_tokens:Q", "kWh per million output tokens", ".3f")))
    label = base.transform_filter("datum.hardware == 'jalapeno'").mark_text(
        align="left", x="width", dx=-150, fontSize=12).encode(y=y, text="cost_label:N")
    demand = catalog.assumption("fleet_output_tokens_per_s") / 1e6
    chart = alt.layer(bars, label).transform_calculate(
        cost_label="'$' + format(datum.workload_usd_per_million_tokens, '.3f') + ' per M tokens'")
    return framed(chart, "The cheapest fleet for the chosen mix",
                  f"{fleet_model.MODEL}, {demand:g}M output tokens/s, PUE {catalog.facility_pue():g}. "
                  "Jalapeño's profile is assumed.", 440, alt.Step(44))


@figure
def fleet() -> InteractiveFigure:
    """Stacked bars: the number of chips of each kind that the cheapest plan assigns to chat and to
    agent calls, in whole serving instances, for the chosen share of agent work, per-user speed target
    for agent calls and electricity price, with each workload's cost per million output tokens.
    Jalapeño's profile rests on stated assumptions."""
    return InteractiveFigure(
        controls=(
            Control.slider("agent_share", "Share of output that is agent calls:", 0.0, 1.0, 0.25, 0.5, decimals=2),
            Control("agent_min_rate", "Agent target, tokens/s per user:", (50, 100, 200), 100, "select"),
            price_control(0.04, 0.28, 0.04),
        ),
        compute=fleet_frame, draw=_draw_fleet,
        keys=("workload", "hardware"), values=("chips", "workload_usd_per_million_tokens"),
        ships=("workload_label", "hardware_label", "workload_kwh_per_million_tokens", "chips_per_instance"))
