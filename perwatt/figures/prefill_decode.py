"""Figures of the prefill-and-decode chapter: the roofline, the frontier and the implied bandwidth."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from perwatt import calibration, catalog, serving
from perwatt import roofline as roofline_model
from perwatt.figures.kit import (PHASE_COLOURS, ROOF_COLOUR, SYSTEM_COLOURS, accelerator_control, colour, figure, framed,
                                 log_scale, model_control, model_order, precision_control, tooltips)
from perwatt.interactive import Control, InteractiveFigure


#: Batch sizes the roofline figure offers: one to 1,024, where decode climbs towards the ridge.
ROOFLINE_BATCHES = tuple(2 ** i for i in range(11))


def roofline_frame(model: str, accelerator: str, batch: int) -> pd.DataFrame:
    """The roof of one chip and the two phases on it, labelled."""
    workload = catalog.workload()  # the table's, which roofline_points takes by default: read once for both
    columns = roofline_model._roofline_columns(model, accelerator, batch, float(workload["isl_tokens"]),
                                               float(workload["osl_tokens"]))
    isl = int(workload["isl_tokens"])
    labels = {"prefill": f"prefill ({isl:,}-token prompt)", "decode": f"decode (batch {batch})"}
    # roofline_points' frame with the labels Series.map would give, made in one go (363 settings).
    return pd.DataFrame({**columns, "label": [labels.get(point, np.nan) for point in columns["point"]]})


def _draw_roofline(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("intensity:Q", title="Arithmetic intensity, FLOP per byte (log)",
              scale=alt.Scale(type="log", domain=[1, 1e5], nice=False))
    y_scale = alt.Scale(type="log", domain=[1, float(grid["tflops"].max()) * 1.5], nice=False)
    roof = base.transform_filter("datum.series == 'roof'").mark_line(color=ROOF_COLOUR, strokeWidth=2).encode(
        x=x, y=alt.Y("tflops:Q", title="Attainable TFLOP/s (log)", scale=y_scale), order="intensity:Q")
    phases = base.transform_filter("datum.series == 'phase'")
    tooltip = tooltips(("label:N", "Phase"), ("intensity:Q", "FLOP/byte", ",.1f"),
                       ("tflops:Q", "Attainable TFLOP/s", ",.0f"), ("bound:N", "Bound"))
    points = phases.mark_point(filled=True, size=160).encode(
        x=x, y=alt.Y("tflops:Q", scale=y_scale),
        color=colour("point", "Phase", {k: PHASE_COLOURS[k] for k in ("prefill", "decode")}), tooltip=tooltip)
    labels = phases.mark_text(align="left", dx=10, dy=-8, fontSize=12).encode(
        x=x, y=alt.Y("tflops:Q", scale=y_scale), text="label:N")
    return framed(alt.layer(roof, points, labels), "Roofline: where prefill and decode sit",
                  "Left of the bend, memory bandwidth limits; right of it, compute.", 460, 280)


@figure
def roofline() -> InteractiveFigure:
    """Log-log roofline: attainable TFLOP/s against arithmetic intensity for the chosen accelerator,
    with the prefill of one prompt of the table's workload and one decode step at the chosen batch size
    placed on it."""
    return InteractiveFigure(
        controls=(model_control(), accelerator_control(),
                  Control("batch", "Decode batch size:", ROOFLINE_BATCHES, 1, "select")),
        compute=roofline_frame, draw=_draw_roofline,
        keys=("series", "point"), values=("intensity", "tflops"), ships=("label", "bound"))


def frontier_frame(model: str, accelerator: str, precision: str, workload: str) -> pd.DataFrame:
    """The frontier of one model on one chip: the layouts and batch sizes no other beats on both axes."""
    drawn = catalog.lengths(workload)
    # serving.frontier's columns, read before they become a frame: the grid asks for 120 of these.
    columns = serving._frontier(model, accelerator, precision, drawn.isl_mean, drawn.osl_mean, serving.DEFAULTS,
                                serving.BATCHES, 0, 1.0)
    layout = [f"{int(c)} chips, EP{int(e)}, {'DP' if d else 'TP'} attention"
              for c, e, d in zip(columns["chips"], columns["ep"], columns["dp_attention"])]
    return pd.DataFrame({**{k: v for k, v in columns.items() if k not in ("dp_attention", "efficient")},
                         "layout": layout})


def _draw_frontier(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("tokens_per_s_per_user:Q", title="Interactivity: tokens/s per user (log)",
              scale=log_scale(grid["tokens_per_s_per_user"], 1.3))
    y = alt.Y("output_tokens_per_s_per_chip:Q", title="Output tokens/s per chip (log)",
              scale=log_scale(grid["output_tokens_per_s_per_chip"], 1.3))
    tooltip = tooltips(("layout:N", "Instance"), ("batch:Q", "Sequences per instance"),
                       ("tokens_per_s_per_user:Q", "Tokens/s per user", ",.0f"),
                       ("output_tokens_per_s_per_chip:Q", "Output tokens/s per chip", ",.0f"),
                       ("joules_per_output_token:Q", "J per output token", ".3f"))
    line = base.mark_line(point=alt.OverlayMarkDef(filled=True, size=60), color=SYSTEM_COLOURS["GB200"]).encode(
        x=x, y=y, order="tokens_per_s_per_user:Q", tooltip=tooltip)
    labels = base.transform_filter("indexof([1, 8, 64, 512, 4096], datum.batch) >= 0").mark_text(
        align="left", dx=7, dy=-7, fontSize=11).encode(x=x, y=y, text="chips_label:N")
    chart = alt.layer(line, labels).transform_calculate(chips_label="format(datum.chips, 'd') + ' chips'")
    return framed(chart, "Throughput against interactivity across layouts and batch sizes",
                  ["Each point is an instance layout and a batch (some labelled by chips). Up and right is better.",
                   "Points beaten on both axes by another layout or batch are left out."], 460, 280)


#: The chips the frontier figure offers: one per generation and form (HGX node or NVL72 rack) and
#: AMD's newest, so that a page carrying every setting's frontier stays light.
FRONTIER_CHIPS = ("h100", "b200", "gb200", "gb300", "mi355x")
#: The table's workload and the one the chapter sets against it (long outputs from short prompts).
FRONTIER_WORKLOADS = ("8k/1k", "1k/8k")


@figure
def frontier() -> InteractiveFigure:
    """Line chart on log-log axes: output tokens per second per chip against tokens per second per user,
    one point per instance layout and batch size that no other beats on both, for the chosen model,
    accelerator, weight precision and workload."""
    return InteractiveFigure(
        controls=(model_control(), accelerator_control(names=FRONTIER_CHIPS), precision_control(),
                  Control("workload", "Workload (input/output):", FRONTIER_WORKLOADS, catalog.table_workload(),
                          "select")),
        compute=frontier_frame, draw=_draw_frontier, keys=("layout", "batch"),
        values=("tokens_per_s_per_user", "output_tokens_per_s_per_chip"),
        ships=("chips", "joules_per_output_token"),
        frontier=("tokens_per_s_per_user", "output_tokens_per_s_per_chip"))


def implied_bandwidth_frame(precision: str, kv: str) -> pd.DataFrame:
    return serving.implied_bandwidth(precision, include_kv=kv == "with_kv")


def _draw_implied_bandwidth(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x_scale = alt.Scale(type="log", domain=[1, float(grid["required_tb_s"].max()) * 2], nice=False)
    y = alt.Y("model_label:N", title=None, sort=model_order())
    tooltip = tooltips(("model_label:N", "Model"), ("interactivity:Q", "Reported tokens/s per user", ",.0f"),
                       ("required_tb_s:Q", "Bandwidth needed, TB/s", ",.0f"),
                       ("hbm_equivalents:Q", "GB300s' worth of HBM bandwidth", ",.1f"))
    bars = base.mark_bar(color=SYSTEM_COLOURS["Jalapeño"], height=24).encode(
        x=alt.X("required_tb_s:Q", title="Memory bandwidth one user's stream needs, TB/s (log)", scale=x_scale),
        x2=alt.datum(1),  # a log axis has no zero: bars start at the axis's left end
        y=y, tooltip=tooltip)
    labels = base.mark_text(align="left", dx=4, fontSize=12).encode(
        x=alt.X("required_tb_s:Q", scale=x_scale), y=y, text="label:N")
    reference = base.mark_rule().encode(x=alt.X("reference_tb_s:Q", scale=x_scale))
    chart = alt.layer(bars, labels, reference).transform_calculate(
        label="format(datum.required_tb_s, ',.0f') + ' TB/s = ' + format(datum.hbm_equivalents, '.0f') + ' GB300s'")
    return framed(chart, "Bandwidth implied by Jalapeño's tokens/s per user",
                  "Batch 1, no speculative decoding. Dashed line: one GB300's HBM.", 420, 140)


@figure
def implied_bandwidth() -> InteractiveFigure:
    """Bar chart on a log axis: for each model, the memory bandwidth one user's stream would need to
    reach Jalapeño's reported tokens per second per user at batch 1 without speculative decoding, beside
    one GB300's HBM bandwidth."""
    return InteractiveFigure(
        controls=(precision_control(),
                  Control("kv", "Count:", ("weights_only", "with_kv"), "with_kv", "radio",
                          ("weights only", "weights and the KV cache of a mean 8k/1k request"))),
        compute=implied_bandwidth_frame, draw=_draw_implied_bandwidth,
        keys=("model",), values=("required_tb_s", "hbm_equivalents"), ships=("model_label", "interactivity", "reference_tb_s"))


def calibration_frame(target: str) -> pd.DataFrame:
    """Each measured InferenceX point's error for one target, with its chip and whether the fit saw it."""
    frame = calibration.measured_errors()
    frame = frame[frame["target"] == calibration.TARGETS[target]].reset_index(drop=True)
    frame["set"] = frame["held_out"].map({True: "held out", False: "fitted on"})
    frame["ratio"] = frame["modelled"] / frame["measured"]
    return frame[["point_id", "chip", "set", "spec_method", "concurrency", "ratio", "error_pct"]]


def _draw_calibration(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("ratio:Q", title="Modelled ÷ measured (log)", scale=log_scale(grid["ratio"], 1.2))
    y = alt.Y("chip:N", title=None, sort=sorted(grid["chip"].unique()))
    tooltip = tooltips(("point_id:N", "Point"), ("chip:N", "Chip"), ("spec_method:N", "Speculation"),
                       ("concurrency:Q", "Concurrency"),
                       ("error_pct:Q", "Error, %", "+.0f"))
    points = base.mark_tick(thickness=2, size=14, opacity=0.7).encode(
        x=x, y=y, color=colour("set", "Points", {"fitted on": "#64748b", "held out": "#c2410c"}), tooltip=tooltip)
    within = calibration.TARGET_PCT / 100
    band = base.transform_aggregate(points="count()").mark_rect(opacity=0.12, color="#15803d", aria=False).encode(
        x=alt.datum(1 - within, scale=log_scale(grid["ratio"], 1.2)), x2=alt.datum(1 + within))
    return framed(alt.layer(band, points), f"The serving model against {grid['point_id'].nunique()} measured InferenceX points",
                  [f"One tick per point: modelled ÷ measured. Shaded: within {calibration.TARGET_PCT} %.",
                   "Fitted on B200 and H200; every other chip is held out."], 460, alt.Step(22))


@figure
def calibration_errors() -> InteractiveFigure:
    """Strip chart: for each accelerator, one tick per measured InferenceX DeepSeek-R1 point at the
    ratio of the serving model's prediction to the measurement, on a log axis, with the band within
    25 % shaded and the points the fit saw told apart from the held-out ones, for the chosen target."""
    return InteractiveFigure(
        controls=(Control("target", "Compare:", tuple(calibration.TARGETS), "total_tokens_per_s_per_gpu", "radio",
                          tuple(calibration.TARGETS.values())),),
        compute=calibration_frame, draw=_draw_calibration, keys=("point_id",), values=("ratio", "error_pct"),
        ships=("chip", "set", "spec_method", "concurrency"))
