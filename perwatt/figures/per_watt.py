"""Figures of the per-watt chapter: the power basis and the token count."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perwatt import accounting, catalog, render, serving
from perwatt.figures.kit import (SYSTEM_COLOURS, figure, framed, log_scale, model_order, points_with_labels,
                                 price_control, reference_line, tooltips)
from perwatt.interactive import Control, InteractiveFigure


def _draw_power_basis(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    # A fixed axis over the whole grid keeps the bars' movement visible as controls change.
    x_scale = alt.Scale(domain=[0, float(grid["ratio"].max()) * 1.08], nice=False)
    y = alt.Y("model_label:N", title=None, sort=model_order())
    tooltip = tooltips(("model_label:N", "Model"), ("baseline_label:N", "Baseline"), ("ratio:Q", "Ratio", ".2f"),
                       ("published_ratio:Q", "Published ratio", ".1f"),
                       ("jalapeno_tps_per_kw:Q", "Jalapeño tokens/s/kW", ",.0f"),
                       ("baseline_tps_per_kw:Q", "Baseline tokens/s/kW", ",.0f"),
                       ("jalapeno_tokens_per_s:Q", "Jalapeño tokens/s per chip", ",.0f"),
                       ("baseline_tokens_per_s:Q", "Baseline tokens/s per GPU", ",.0f"))
    bars = base.mark_bar(color=SYSTEM_COLOURS["Jalapeño"], height=26).encode(
        x=alt.X("ratio:Q", title="Jalapeño ÷ baseline, tokens/s/kW", scale=x_scale), y=y, tooltip=tooltip)
    labels = base.mark_text(align="left", dx=4, fontSize=13).encode(
        x=alt.X("ratio:Q", scale=x_scale), y=y, text=alt.Text("ratio:Q", format=".2f"))
    published = base.mark_tick(color="black", thickness=3, size=34).encode(
        x=alt.X("published_ratio:Q", scale=x_scale), y=y,
        tooltip=[alt.Tooltip("published_ratio:Q", title="Published ratio", format=".1f")])
    return framed(alt.layer(reference_line(1.0, x_scale), bars, published, labels),
                  "Per-watt ratio on the chosen power basis",
                  "Black tick: the ratio as published. Dashed line: parity.", 520, 150)


@figure
def power_basis() -> InteractiveFigure:
    """Bar chart: Jalapeño's tokens per second per kilowatt divided by its NVIDIA baseline's, for each
    of the three models, when the same served tokens are divided by the chosen watts. A tick marks the
    ratio the articles published."""
    measured = catalog.power_w(catalog.CANDIDATE, "chip_measured")
    rated = catalog.power_w(catalog.CANDIDATE, "chip_rated")
    all_in = sorted({catalog.power_w(s, "all_in_provisioned") for s in catalog.baselines().values()})
    return InteractiveFigure(
        controls=(
            Control("published_basis", "Published TPS/kW divided by:", ("chip_rated", "jalapeno_measured"),
                    "chip_rated", "radio",
                    ("every chip's rating", f"Jalapeño's measured ≤{measured:,.0f} W, baselines rated")),
            Control.slider("jalapeno_power_w", "Watts charged to each Jalapeño chip:", 400, 2100, 50, rated),
            Control("baseline_basis", "Watts charged to each NVIDIA GPU:", ("chip_rated", "all_in_provisioned"),
                    "chip_rated", "radio",
                    ("rated GPU power", "InferenceX all-in (" + " / ".join(f"{w:,.0f}" for w in all_in) + " W)")),
        ),
        compute=accounting.basis_comparison, draw=_draw_power_basis,
        keys=("model",), values=("ratio", "jalapeno_tps_per_kw", "baseline_tps_per_kw"),
        ships=("model_label", "baseline_label", "published_ratio", "jalapeno_tokens_per_s", "baseline_tokens_per_s"))


def _draw_energy_cost(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    # Price and PUE only scale every point; a fixed log axis shows that as a shift.
    x = alt.X("cost_usd_per_million_tokens:Q", title="Electricity cost, US$ per million tokens (log scale)",
              scale=log_scale(grid["cost_usd_per_million_tokens"], 1.5), axis=alt.Axis(format="$.2~g"))
    y = alt.Y("model_label:N", title=None, sort=model_order())
    offset = alt.YOffset("system_label:N", sort=list(SYSTEM_COLOURS))
    tooltip = tooltips(("model_label:N", "Model"), ("system_label:N", "System"),
                       ("cost_usd_per_million_tokens:Q", "US$ per million tokens", "$.3~g"),
                       ("kwh_per_million_tokens:Q", "kWh per million tokens", ".3~g"),
                       ("joules_per_token:Q", "J per token", ".3~g"))
    text = alt.Text("cost_usd_per_million_tokens:Q", format="$.2~g")
    return framed(alt.layer(*points_with_labels(base, x, y, text, tooltip, offset)),
                  "Electricity cost per million tokens",
                  "From the published TPS/kW, on whatever power basis it used.", 520, alt.Step(22))


@figure
def energy_cost() -> InteractiveFigure:
    """Dot plot on a logarithmic axis: electricity cost in US dollars per million tokens for each model
    and system, from the published tokens per second per kilowatt, at the chosen electricity price, PUE
    and token count."""
    return InteractiveFigure(
        controls=(
            price_control(0.02, 0.30, 0.02),
            Control.slider("pue", "PUE:", 1.0, 1.5, 0.1, 1.0, decimals=1),
            Control("tokens", "Count tokens:", ("all", "output"), "all", "radio",
                    ("input + output (the book's reading of “mixed”)", "output only")),
        ),
        compute=accounting.energy_costs, draw=_draw_energy_cost,
        keys=("model", "system"), values=("cost_usd_per_million_tokens", "joules_per_token"),
        ships=("model_label", "system_label", "kwh_per_million_tokens"))


def sketch_points() -> pd.DataFrame:
    """The sketch's frontier (see :func:`perwatt.serving.frontier`) with three operating points
    named: the fastest per user, the middle of the curve, and the busiest per chip."""
    curve = serving.frontier(*SKETCH).sort_values("tokens_per_s_per_user", ascending=False).reset_index(drop=True)
    picks = {0: "few users, fast each", len(curve) // 2: "in between", len(curve) - 1: "many users, slow each"}
    return curve.assign(name=curve.index.map(picks))


def operating_points_sketch() -> alt.LayerChart:
    """A small static chart: one model on one chip traced over batch sizes and layouts, three operating
    points named, to show what "an operating point" means before the book measures anything at one."""
    curve = sketch_points()
    named = curve[curve["name"].notna()]
    x = alt.X("tokens_per_s_per_user:Q", title="Speed per user, tokens/s (log)", scale=alt.Scale(type="log"))
    y = alt.Y("output_tokens_per_s_per_chip:Q", title="Output tokens/s per chip (log)",
              scale=alt.Scale(type="log"))
    line = alt.Chart(curve.drop(columns=["name"])).mark_line(color=SYSTEM_COLOURS["GB200"]).encode(
        x=x, y=y, order="tokens_per_s_per_user:Q")
    points = alt.Chart(named).mark_point(filled=True, size=90, color="black").encode(x=x, y=y)
    labels = alt.Chart(named).mark_text(align="left", dx=8, dy=-8, fontSize=12).encode(x=x, y=y, text="name:N")
    chart = framed(alt.layer(line, points, labels), "Three operating points of one system",
                   f"{SKETCH[0]} on {SKETCH[1].upper()}s, per chip, modelled; each point is a batch and a layout.",
                   360, 200)
    table = named[["name", "chips", "batch", "tokens_per_s_per_user", "output_tokens_per_s_per_chip"]]
    return chart.properties(
        description="Line chart: throughput per chip against speed per user for one model on one kind of chip "
                    "as the batch grows and the instance's layout changes, with three operating points marked: few "
                    "users served fast, a middle point, and many users served slowly.",
        usermeta={"perwatt": {"table": render.table_meta(table)}})


#: The model and chip the operating-point sketch uses.
SKETCH = ("gpt-oss-120b", "gb200")
