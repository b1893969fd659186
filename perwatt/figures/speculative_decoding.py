"""Figures of the speculative-decoding chapter: the speed-up surface and speculation against batch size."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from perwatt import speculative
from perwatt.figures.kit import SPECULATION_COLOUR, figure, framed, reference_line, tooltips
from perwatt.interactive import Control, InteractiveFigure


def _draw_speedup_surface(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("gamma:O", title="Draft length γ (tokens)")
    y = alt.Y("alpha:O", title="Acceptance rate α", sort="descending", axis=alt.Axis(format=".2f"))
    colour = alt.Color("speedup:Q", title="Speed-up",
                       scale=alt.Scale(scheme="blueorange", domainMid=1,
                                       domain=[float(grid["speedup"].min()), float(grid["speedup"].max())]))
    tooltip = tooltips(("alpha:Q", "α", ".2f"), ("gamma:Q", "γ"),
                       ("expected_tokens:Q", "Tokens per target pass", ".2f"), ("speedup:Q", "Speed-up", ".2f"))
    cells = base.mark_rect().encode(x=x, y=y, color=colour, tooltip=tooltip)
    text = base.mark_text(fontSize=10).encode(x=x, y=y, text=alt.Text("speedup:Q", format=".1f"))
    best = base.transform_filter("datum.is_best").mark_rect(filled=False, stroke="black", strokeWidth=2.5).encode(
        x=x, y=y)
    return framed(alt.layer(cells, text, best), "Speed-up from speculative decoding (memory-bound decode)",
                  "Black outline: the best draft length for each acceptance rate.", 420, 300)


@figure
def speedup_surface() -> InteractiveFigure:
    """Figure: the closed-form speed-up over acceptance rate and draft length (described below,
    with the ranges the grid spans)."""
    alphas, gammas = speculative.SURFACE_ALPHAS, speculative.SURFACE_GAMMAS
    return InteractiveFigure(
        description=(
            f"Heat map of the closed-form speed-up of speculative decoding over acceptance rates {alphas[0]:g} to "
            f"{alphas[-1]:g} and draft lengths {gammas[0]} to {gammas[-1]}, for the chosen draft cost ratio, with "
            "the best draft length for each acceptance rate outlined."
        ),
        controls=(Control.slider("c", "Draft cost c (draft pass ÷ target pass):", 0.0, 0.5, 0.05, 0.05, decimals=2),),
        compute=speculative.speedup_surface, draw=_draw_speedup_surface,
        keys=("alpha", "gamma"), values=("speedup",), ships=("expected_tokens", "is_best"))


#: The model and chip the batch figure prices speculation on.
SPEC_MODEL, SPEC_ACCELERATOR = "llama-3.1-8b", "h100"


def speculation_batch_frame(alpha: float, gamma: int, c: float, context: int) -> pd.DataFrame:
    """Speed-up per user across batch sizes, priced with the roofline model, with the crossover."""
    frame = speculative.batch_frame(SPEC_MODEL, SPEC_ACCELERATOR, alpha, int(gamma), c, float(context))
    crossover = frame["crossover_batch"].iloc[0]
    frame["crossover_label"] = (f"stops paying at batch {crossover:.0f}" if np.isfinite(crossover)
                                else "still pays at batch 4096")
    return frame


def _draw_speculation_batch(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("batch:Q", title="Batch size (log)", scale=alt.Scale(type="log", base=2, domain=[1, 1024], nice=False))
    y_scale = alt.Scale(domain=[0, float(grid["speedup"].max()) * 1.1], nice=False)
    tooltip = tooltips(("batch:Q", "Batch"), ("speedup:Q", "Speed-up per user", ".2f"),
                       ("energy_ratio:Q", "Energy per token, with ÷ without", ".2f"))
    line = base.mark_line(point=alt.OverlayMarkDef(filled=True, size=50), color=SPECULATION_COLOUR).encode(
        x=x, y=alt.Y("speedup:Q", title="Speed-up per user (with ÷ without speculation)", scale=y_scale),
        order="batch:Q", tooltip=tooltip)
    label = base.transform_filter("datum.batch == 1").mark_text(
        align="left", dx=6, dy=-14, fontSize=13, fontWeight="bold").encode(
        x=x, y=alt.Y("speedup:Q", scale=y_scale), text="crossover_label:N")
    return framed(alt.layer(reference_line(1.0, y_scale, "y"), line, label),
                  "Does speculation still pay at this batch size?",
                  ["Llama 3.1 8B on as many H100s as each batch's KV cache needs, assumed to",
                   "scale ideally across them (roofline model). Dashed line: no gain."], 440, 260)


@figure
def speculation_batch() -> InteractiveFigure:
    """Line chart: the per-user speed-up from speculative decoding against batch size from 1 to 1,024
    for Llama 3.1 8B on as many H100s as the batch's KV cache needs, priced with the book's roofline
    model with ideal scaling across GPUs, for the chosen acceptance rate, draft length, draft cost and
    context length, with the batch at which speculation stops paying."""
    return InteractiveFigure(
        controls=(
            Control.slider("alpha", "Acceptance rate α:", 0.5, 0.9, 0.1, 0.7, decimals=1),
            Control.slider("gamma", "Draft length γ:", 1, 4, 1, 3, decimals=0),
            Control.slider("c", "Draft cost c:", 0.0, 0.3, 0.1, 0.1, decimals=1),
            Control("context", "Context per sequence, tokens:", (128, 512, 2048), 512, "select"),
        ),
        compute=speculation_batch_frame, draw=_draw_speculation_batch,
        keys=("batch",), values=("speedup", "energy_ratio", "crossover_batch"), ships=("crossover_label",))
