"""Figure of the prefill-and-decode chapter's disaggregation section: cost per request, split by pool."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perwatt import catalog, disagg
from perwatt.figures.kit import PHASE_COLOURS, colour, figure, framed, price_control, tooltips
from perwatt.interactive import Control, InteractiveFigure


#: The request mixes the figure offers: the table's, a decode-heavy one and the long prompt.
WORKLOADS = ("8k/1k", "1k/8k", disagg.LONG)


def _label(kind: str, prefill_chip: str, decode_chip: str) -> str:
    # Short names keep the shipped grid small: the chips' full labels are in the prose's table.
    if kind == "single":
        return f"{prefill_chip.upper()} alone"
    return f"{prefill_chip.upper()} → {decode_chip.upper()}"


def configurations() -> list[str]:
    """Every configuration's label, one pool of each chip first, then each prefill → decode pair."""
    chips = disagg.priced_chips()
    return [_label("single", c, c) for c in chips] + [_label("split", p, d) for p in chips for d in chips]


def split_frame(workload: str, min_rate: int, price_usd_per_kwh: float) -> pd.DataFrame:
    """Two rows per configuration (prefill pool, decode pool): US$ and joules per thousand requests."""
    frame = disagg.comparison(disagg.MODEL, workload, float(min_rate), price_usd_per_kwh)
    frame["configuration"] = [_label(*r) for r in frame[["kind", "prefill_chip", "decode_chip"]].itertuples(index=False)]
    rows = [pd.DataFrame({"configuration": frame["configuration"], "pool": pool,
                          "usd_per_k": frame[f"{pool}_usd"] * 1000,
                          "kwh_per_k": frame[f"{pool}_j"] * 1000 / disagg.JOULES_PER_KWH}) for pool in ("prefill", "decode")]
    return pd.concat(rows, ignore_index=True)


def _draw(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    totals = grid.groupby(["workload", "min_rate", "price_usd_per_kwh", "configuration"])["usd_per_k"].sum()
    x = alt.X("usd_per_k:Q", title="US$ per thousand requests (rental + electricity)", stack="zero",
              scale=alt.Scale(domain=[0, float(totals.max()) * 1.05], nice=False))
    y = alt.Y("configuration:N", title="Prefill chip → decode chip", sort=configurations(),
              axis=alt.Axis(labelLimit=140))
    bars = base.mark_bar(height=12).encode(
        x=x, y=y, color=colour("pool", "Pool", {k: PHASE_COLOURS[k] for k in ("prefill", "decode")}),
        order=alt.Order("pool:N", sort="descending"),
        tooltip=tooltips(("configuration:N", "Configuration"), ("pool:N", "Pool"),
                         ("usd_per_k:Q", "US$ per 1,000 requests, this pool", ".4f"),
                         ("kwh_per_k:Q", "kWh per 1,000 requests, this pool", ".3f")))
    return framed(bars, f"Cost per request of {disagg.MODEL}, by pool",
                  ["Each pool at its cheapest layout and batch for the target.",
                   "Rental at InferenceX's prices; electricity at the control's."], 380, alt.Step(16))


@figure
def disaggregated_cost() -> InteractiveFigure:
    """Stacked horizontal bars: the cost of a thousand gpt-oss-120b requests on one pool of each chip
    with a sourced price, and on every pairing of a prefill pool with a decode pool, split into the
    prefill pool's and the decode pool's share, for the chosen request mix, per-user speed target and
    electricity price."""
    return InteractiveFigure(
        controls=(Control("workload", "Request mix:", WORKLOADS, catalog.table_workload(), "select"),
                  Control("min_rate", "Target, tokens/s per user:", disagg.TARGETS, disagg.TARGETS[1], "select"),
                  price_control(0.04, 0.12, 0.04)),
        compute=split_frame, draw=_draw,
        keys=("configuration", "pool"), values=("usd_per_k",), ships=("kwh_per_k",))
