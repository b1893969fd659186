"""Figure of the prefill-and-decode chapter's kernel section: Amdahl's law over the reported kernel gains."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from perwatt import amdahl
from perwatt.figures.kit import colour, figure, framed, tooltips
from perwatt.interactive import Control, InteractiveFigure

#: The kernels' share of the time, on the curve (the slider moves along the same points).
SHARES = tuple(float(round(i / 20, 2)) for i in range(21))
#: The reported kernel gains' ends, coloured apart.
END_COLOURS = {"low": "#0f766e", "high": "#c2410c"}


def gain_frame(kernel_share: float) -> pd.DataFrame:
    """The whole model's gain against the kernels' share of its time, for the reported low and high
    kernel gains (``kind`` "curve"), and the two gains at ``kernel_share`` (``kind`` "chosen")."""
    low, high = amdahl.reported_speedups()
    rows = []
    for end, speedup in (("low", low), ("high", high)):
        shares = np.asarray(SHARES)
        rows.append(pd.DataFrame({"kind": "curve", "end": end, "kernel_speedup": speedup, "share": shares,
                                  "whole_gain": amdahl.whole_gain(shares, speedup)}))
        rows.append(pd.DataFrame({"kind": ["chosen"], "end": [end], "kernel_speedup": [speedup],
                                  "share": [kernel_share], "whole_gain": [float(amdahl.whole_gain(kernel_share, speedup))]}))
    return pd.concat(rows, ignore_index=True)


def _draw(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("share:Q", title="Kernels' share of the model's time", axis=alt.Axis(format="%"),
              scale=alt.Scale(domain=[0, 1]))
    y = alt.Y("whole_gain:Q", title="Whole model's gain, ×", scale=alt.Scale(domain=[1, float(grid["whole_gain"].max())]))
    ends = colour("end", "Reported kernel gain", END_COLOURS, labelExpr="datum.label == 'low' ? 'low end' : 'high end'")
    tip = tooltips(("kernel_speedup:Q", "Kernel gain, ×", ".1f"), ("share:Q", "Kernels' share", ".0%"),
                   ("whole_gain:Q", "Whole model's gain, ×", ".3f"))
    curves = base.transform_filter("datum.kind == 'curve'").mark_line().encode(x=x, y=y, color=ends, tooltip=tip)
    chosen = base.transform_filter("datum.kind == 'chosen'")
    points = chosen.mark_point(filled=True, size=70).encode(x=x, y=y, color=ends, tooltip=tip)
    labels = chosen.mark_text(align="right", dx=-8, dy=-8, fontSize=12).encode(
        x=x, y=y, color=ends, text=alt.Text("whole_gain:Q", format=".2f"))
    return framed(alt.layer(curves, points, labels),
                  "What a faster kernel does for the whole model",
                  ["Kernel gains as the first-results article reports them;",
                   "the kernels' share of the time is yours to set:", "no source the book found gives it."], 320, 220)


@figure
def kernel_gains() -> InteractiveFigure:
    """Two lines, for the low and the high end of the reported kernel speed-ups: the whole model's
    gain by Amdahl's law against the share of its time the faster kernels take, from none to all,
    with the two gains marked and printed at the chosen share."""
    return InteractiveFigure(
        controls=(Control.slider("kernel_share", "Kernels' share of the time:", 0.0, 1.0, 0.05, 0.5, decimals=2),),
        compute=gain_frame, draw=_draw,
        keys=("kind", "end", "share"), values=("whole_gain",), ships=("kernel_speedup",))
