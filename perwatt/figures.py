"""The book's interactive figures, each a model function plus a drawing.

Chapters call these factories; tests import the same objects and compare what the
browser and the widget panels show with ``figure.frame(**setting)``.
"""

from __future__ import annotations

from functools import cache

import altair as alt
import numpy as np
import pandas as pd

from perwatt import agents, benchmark, comparisons, data, fleet, roofline, speculative
from perwatt.interactive import Control, InteractiveFigure
from perwatt.render import SYSTEM_COLOURS


def _system_colour(field: str = "system_label", title: str = "System") -> alt.Color:
    return alt.Color(
        f"{field}:N",
        title=title,
        scale=alt.Scale(domain=list(SYSTEM_COLOURS), range=list(SYSTEM_COLOURS.values())),
        legend=alt.Legend(orient="top"),
    )


def _model_order() -> list[str]:
    return list(comparisons.results()["model_label"].drop_duplicates())


def _points_with_labels(base: alt.Chart, x: alt.X, y: alt.Y, text: alt.Text, tooltip: list,
                        offset: alt.YOffset | None = None) -> list[alt.Chart]:
    """A dot per row, coloured by system, with its value written beside it."""
    extra = {"yOffset": offset} if offset is not None else {}
    points = base.mark_point(filled=True, size=140).encode(x=x, y=y, color=_system_colour(), tooltip=tooltip, **extra)
    labels = base.mark_text(align="left", dx=9, fontSize=12).encode(x=x, y=y, text=text, **extra)
    return [points, labels]


def _reference_line(value: float, x_scale: alt.Scale) -> alt.Chart:
    """A dashed vertical line at ``value`` (parity, one user per chip)."""
    return alt.Chart(pd.DataFrame({"reference": [value]})).mark_rule(strokeDash=[4, 3]).encode(
        x=alt.X("reference:Q", scale=x_scale)
    )


def _draw_power_basis(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    # A fixed axis over the whole grid keeps the bars' movement visible as controls change.
    x_scale = alt.Scale(domain=[0, float(grid["ratio"].max()) * 1.08], nice=False)
    y = alt.Y("model_label:N", title=None, sort=_model_order())
    tooltip = [
        alt.Tooltip("model_label:N", title="Model"),
        alt.Tooltip("baseline_label:N", title="Baseline"),
        alt.Tooltip("ratio:Q", title="Ratio", format=".2f"),
        alt.Tooltip("published_ratio:Q", title="Published ratio", format=".1f"),
        alt.Tooltip("jalapeno_tps_per_kw:Q", title="Jalapeño tokens/s/kW", format=",.0f"),
        alt.Tooltip("baseline_tps_per_kw:Q", title="Baseline tokens/s/kW", format=",.0f"),
        alt.Tooltip("jalapeno_tokens_per_s:Q", title="Jalapeño tokens/s per chip", format=",.0f"),
        alt.Tooltip("baseline_tokens_per_s:Q", title="Baseline tokens/s per GPU", format=",.0f"),
    ]
    bars = base.mark_bar(color=SYSTEM_COLOURS["Jalapeño"], height=26).encode(
        x=alt.X("ratio:Q", title="Jalapeño ÷ baseline, tokens/s/kW", scale=x_scale),
        y=y,
        tooltip=tooltip,
    )
    labels = base.mark_text(align="left", dx=4, fontSize=13).encode(
        x=alt.X("ratio:Q", scale=x_scale), y=y, text=alt.Text("ratio:Q", format=".2f")
    )
    published = base.mark_tick(color="black", thickness=3, size=34).encode(
        x=alt.X("published_ratio:Q", scale=x_scale),
        y=y,
        tooltip=[alt.Tooltip("published_ratio:Q", title="Published ratio", format=".1f")],
    )
    return alt.layer(_reference_line(1.0, x_scale), bars, published, labels).properties(
        width=520,
        height=150,
        title=alt.TitleParams(
            "Per-watt ratio on the chosen power basis",
            subtitle="Black tick: the ratio as published. Dashed line: parity.",
        ),
    )


@cache
def power_basis() -> InteractiveFigure:
    """Figure: how the per-watt ratio moves when each side is charged different watts."""
    measured = comparisons.power_w("jalapeno", "chip_measured")
    rated = comparisons.power_w("jalapeno", "chip_rated")
    all_in = sorted({comparisons.power_w(s, "all_in_provisioned") for s in ("gb200", "gb300")})
    return InteractiveFigure(
        name="power-basis",
        description=(
            "Bar chart: Jalapeño's tokens per second per kilowatt divided by its NVIDIA "
            "baseline's, for each of the three models, when the same served tokens are "
            "divided by the chosen watts. A tick marks the ratio the articles published."
        ),
        controls=(
            Control(
                "published_basis", "Published TPS/kW divided by:",
                ("chip_rated", "jalapeno_measured"), "chip_rated", "radio",
                ("every chip's rating", f"Jalapeño's measured ≤{measured:,.0f} W, baselines rated"),
            ),
            Control.slider("jalapeno_power_w", "Watts charged to each Jalapeño chip:",
                           400, 2100, 50, rated, unit="W"),
            Control(
                "baseline_basis", "Watts charged to each NVIDIA GPU:",
                ("chip_rated", "all_in_provisioned"), "chip_rated", "radio",
                ("rated GPU power", "InferenceX all-in (" + " / ".join(f"{w:,.0f}" for w in all_in) + " W)"),
            ),
        ),
        compute=comparisons.basis_comparison,
        draw=_draw_power_basis,
        keys=("model",),
        values=("ratio", "jalapeno_tps_per_kw", "baseline_tps_per_kw"),
    )


def _draw_energy_cost(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    costs = grid["cost_usd_per_million_tokens"]
    # Price and PUE only scale every point; a fixed log axis shows that as a shift.
    x = alt.X(
        "cost_usd_per_million_tokens:Q",
        title="Electricity cost, US$ per million tokens (log scale)",
        scale=alt.Scale(type="log", domain=[float(costs.min()) / 1.5, float(costs.max()) * 1.5], nice=False),
        axis=alt.Axis(format="$.2~g"),
    )
    y = alt.Y("model_label:N", title=None, sort=_model_order())
    offset = alt.YOffset("system_label:N", sort=list(SYSTEM_COLOURS))
    tooltip = [
        alt.Tooltip("model_label:N", title="Model"),
        alt.Tooltip("system_label:N", title="System"),
        alt.Tooltip("cost_usd_per_million_tokens:Q", title="US$ per million tokens", format="$.3~g"),
        alt.Tooltip("kwh_per_million_tokens:Q", title="kWh per million tokens", format=".3~g"),
        alt.Tooltip("joules_per_token:Q", title="J per token", format=".3~g"),
    ]
    text = alt.Text("cost_usd_per_million_tokens:Q", format="$.2~g")
    return alt.layer(*_points_with_labels(base, x, y, text, tooltip, offset)).properties(
        width=520,
        height=alt.Step(22),
        title=alt.TitleParams(
            "Electricity cost per million tokens",
            subtitle="From the published TPS/kW, on whatever power basis it used.",
        ),
    )


@cache
def energy_cost() -> InteractiveFigure:
    """Figure: electricity cost per million tokens by price, PUE and token denominator."""
    return InteractiveFigure(
        name="energy-cost",
        description=(
            "Dot plot on a logarithmic axis: electricity cost in US dollars per million "
            "tokens for each model and system, from the published tokens per second per "
            "kilowatt, at the chosen electricity price, PUE and token count."
        ),
        controls=(
            Control.slider("price_usd_per_kwh", "Electricity price, $/kWh:", 0.02, 0.30, 0.02, 0.08,
                           unit="USD/kWh", decimals=2),
            Control.slider("pue", "PUE:", 1.0, 1.5, 0.1, 1.0, decimals=1),
            Control("tokens", "Count tokens:", ("all", "output"), "all", "radio",
                    ("input + output (as published)", "output only")),
        ),
        compute=comparisons.energy_costs,
        draw=_draw_energy_cost,
        keys=("model", "system"),
        values=("cost_usd_per_million_tokens", "joules_per_token"),
    )


def _row_label(frame: pd.DataFrame) -> pd.Series:
    return frame["model_label"] + " · " + frame["system_label"]


def _with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    out = comparisons.label(frame)
    out["row_label"] = _row_label(out)
    return out


def latency_audit_frame(osl_tokens: float) -> pd.DataFrame:
    """Model output for the latency-audit figure at one output length."""
    frame = _with_labels(benchmark.latency_audit(benchmark.book_results(), osl_tokens))
    # The least time the output can take: one step per token, the first token's included.
    frame["min_output_s"] = osl_tokens / frame["interactivity"]
    return frame


def _draw_latency_audit(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    top = float(max(grid["min_output_s"].max(), grid["e2e_latency_s"].max())) * 1.05
    x_scale = alt.Scale(domain=[0, top], nice=False)
    y = alt.Y("row_label:N", title=None, sort=list(dict.fromkeys(grid["row_label"])))
    tooltip = [
        alt.Tooltip("row_label:N", title="Row"),
        alt.Tooltip("e2e_latency_s:Q", title="Reported latency, s", format=".2f"),
        alt.Tooltip("interactivity:Q", title="Reported tokens/s per user", format=",.0f"),
        alt.Tooltip("min_output_s:Q", title="Output tokens × time per token, s", format=".3f"),
        alt.Tooltip("implied_ttft_s:Q", title="Implied time to first token, s", format=".3f"),
        alt.Tooltip("max_consistent_osl:Q", title="Longest output the row allows, tokens", format=",.0f"),
        alt.Tooltip("verdict:N", title="Verdict"),
    ]
    colour = alt.Color(
        "verdict:N", title="One operating point?",
        scale=alt.Scale(domain=["possible", "impossible: TTFT shorter than one step"], range=["#2563eb", "#dc2626"]),
        legend=alt.Legend(orient="top"),
    )
    bars = base.mark_bar(height=16).encode(
        x=alt.X("min_output_s:Q", title="Seconds", scale=x_scale), y=y, color=colour, tooltip=tooltip,
    )
    reported = base.mark_tick(color="black", thickness=3, size=24).encode(
        x=alt.X("e2e_latency_s:Q", scale=x_scale), y=y, tooltip=tooltip
    )
    ttft = base.mark_text(align="left", dx=6, fontSize=12).encode(
        x=alt.X("label_x:Q", scale=x_scale), y=y, text="ttft_label:N"
    )
    return alt.layer(bars, reported, ttft).transform_calculate(
        label_x="max(datum.min_output_s, datum.e2e_latency_s)",
        ttft_label="'TTFT ' + format(datum.implied_ttft_s, '.2f') + ' s'",
    ).properties(
        width=400, height=alt.Step(26),
        title=alt.TitleParams(
            "Do latency and tokens/s per user fit one request?",
            subtitle=["Bar: output tokens ÷ tokens/s per user. Tick: reported latency.",
                      "A bar past its tick leaves less than one step for the first token."],
        ),
    )


#: Slider stops either side of the default output length in the latency audit.
AUDIT_STOPS, AUDIT_STEP = 40, 8


@cache
def latency_audit() -> InteractiveFigure:
    """Figure: the latency decomposition, with the output length as the control."""
    # The mean length the workload draws, to the nearest whole token.
    default = round(comparisons.lengths("8k/1k").osl_mean)
    return InteractiveFigure(
        name="latency-audit",
        description=(
            "Bar chart, one bar per model and system: the least time needed to generate the chosen number "
            "of output tokens at the reported tokens per second per user, beside a tick at the "
            "reported end-to-end latency. Bars longer than the latency are impossible for one request."
        ),
        controls=(Control.slider("osl_tokens", "Output tokens per request:", default - AUDIT_STOPS * AUDIT_STEP,
                                 default + AUDIT_STOPS * AUDIT_STEP, AUDIT_STEP, default, unit="tokens"),),
        compute=latency_audit_frame,
        draw=_draw_latency_audit,
        keys=("model", "system"),
        values=("implied_ttft_s", "min_output_s", "max_consistent_osl"),
    )


def users_per_chip_frame(basis: str) -> pd.DataFrame:
    """Model output for the users-per-chip figure on one power basis (unknown powers dropped)."""
    drawn = comparisons.lengths("8k/1k")
    results = benchmark.book_results()
    watts = pd.Series({s: comparisons.power_w(s, basis) for s in results["system"].unique()})
    frame = benchmark.users_per_chip(results, watts, drawn.isl_mean, drawn.osl_mean)
    return _with_labels(frame)


def _draw_users_per_chip(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    values = grid["users_per_chip"]
    x_scale = alt.Scale(type="log", domain=[float(values.min()) / 2, float(values.max()) * 2], nice=False)
    y = alt.Y("row_label:N", title=None, sort=list(dict.fromkeys(grid["row_label"])))
    tooltip = [
        alt.Tooltip("row_label:N", title="Row"),
        alt.Tooltip("users_per_chip:Q", title="Users per chip", format=".3~g"),
        alt.Tooltip("chip_output_tokens_per_s:Q", title="Output tokens/s per chip", format=",.0f"),
        alt.Tooltip("interactivity:Q", title="Tokens/s per user", format=",.0f"),
        alt.Tooltip("power_w:Q", title="Watts per chip", format=",.0f"),
    ]
    x = alt.X("users_per_chip:Q", title="Concurrent users per chip (log scale)", scale=x_scale)
    text = alt.Text("users_per_chip:Q", format=".2~f")
    return alt.layer(_reference_line(1.0, x_scale), *_points_with_labels(base, x, y, text, tooltip)).properties(
        width=400, height=alt.Step(26),
        title=alt.TitleParams(
            "Users per chip, if both figures describe one operating point",
            subtitle="Left of the dashed line, one user's stream would need more than one chip.",
        ),
    )


@cache
def users_per_chip() -> InteractiveFigure:
    """Figure: concurrency implied by the table, by power basis."""
    return InteractiveFigure(
        name="users-per-chip",
        description=(
            "Dot plot on a logarithmic axis: for each model and system, the output tokens per second "
            "per chip implied by the reported tokens per second per kilowatt on the chosen power basis, "
            "divided by the reported tokens per second per user. Systems with no known power on a "
            "basis are left out."
        ),
        controls=(
            Control("basis", "Tokens/s/kW divided by:", comparisons.BASES, "chip_rated", "radio",
                    tuple(comparisons.BASIS_LABELS[b] for b in comparisons.BASES)),
        ),
        compute=users_per_chip_frame,
        draw=_draw_users_per_chip,
        keys=("model", "system"),
        values=("users_per_chip",),
    )




def _model_control() -> Control:
    # The articles' three models; the others in model_specs.csv are there to validate against.
    table = comparisons.results()[["model", "model_label"]].drop_duplicates()
    return Control("model", "Model:", tuple(table["model"]), table["model"].iloc[0], "select",
                   tuple(table["model_label"]))


def _accelerator_control(default: str = "gb200") -> Control:
    table = data.load("accelerators").set_index("accelerator")
    names = tuple(roofline.known_chips())
    return Control("accelerator", "Accelerator:", names, default, "select",
                   tuple(table.loc[n, "label"] for n in names))


def roofline_frame(model: str, accelerator: str, batch: int) -> pd.DataFrame:
    """Model output for the roofline figure: the roof and the two phases at one batch size."""
    frame = roofline.roofline_points(model, accelerator, batch)
    frame["label"] = frame["point"].map({"prefill": "prefill (8k prompt)", "decode": f"decode (batch {batch})"})
    return frame


def _draw_roofline(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("intensity:Q", title="Arithmetic intensity, FLOP per byte (log)",
              scale=alt.Scale(type="log", domain=[1, 1e5], nice=False))
    y_scale = alt.Scale(type="log", domain=[1, float(grid["tflops"].max()) * 1.5], nice=False)
    roof = base.transform_filter("datum.series == 'roof'").mark_line(color="#334155", strokeWidth=2).encode(
        x=x, y=alt.Y("tflops:Q", title="Attainable TFLOP/s (log)", scale=y_scale), order="intensity:Q",
    )
    phases = base.transform_filter("datum.series == 'phase'")
    tooltip = [alt.Tooltip("label:N", title="Phase"), alt.Tooltip("intensity:Q", title="FLOP/byte", format=",.1f"),
               alt.Tooltip("tflops:Q", title="Attainable TFLOP/s", format=",.0f"), alt.Tooltip("bound:N", title="Bound")]
    points = phases.mark_point(filled=True, size=160).encode(
        x=x, y=alt.Y("tflops:Q", scale=y_scale),
        color=alt.Color("point:N", title="Phase", scale=alt.Scale(domain=["prefill", "decode"], range=["#7c3aed", "#c2410c"]),
                        legend=alt.Legend(orient="top")),
        tooltip=tooltip,
    )
    labels = phases.mark_text(align="left", dx=10, dy=-8, fontSize=12).encode(
        x=x, y=alt.Y("tflops:Q", scale=y_scale), text="label:N"
    )
    return alt.layer(roof, points, labels).properties(
        width=460, height=280,
        title=alt.TitleParams("Roofline: where prefill and decode sit",
                              subtitle="Left of the bend, memory bandwidth limits; right of it, compute."),
    )


@cache
def roofline_figure() -> InteractiveFigure:
    """Figure: the roofline of one chip with prefill and decode placed on it."""
    return InteractiveFigure(
        name="roofline",
        description=(
            "Log-log roofline: attainable TFLOP/s against arithmetic intensity for the chosen "
            "accelerator, with the prefill of an 8k-token prompt and one decode step at the chosen "
            "batch size placed on it."
        ),
        controls=(_model_control(), _accelerator_control(),
                  Control("batch", "Decode batch size:", roofline.BATCHES, 1, "select")),
        compute=roofline_frame,
        draw=_draw_roofline,
        keys=("series", "point"),
        values=("intensity", "tflops"),
    )


def frontier_frame(model: str, accelerator: str, precision: str, workload: str) -> pd.DataFrame:
    """Model output for the frontier figure: one row per batch size."""
    w = comparisons.workload(workload)
    frame = roofline.frontier(model, accelerator, precision, float(w["isl_tokens"]), float(w["osl_tokens"]))
    # Only the batch sizes no other batch beats on both axes make up the frontier.
    return frame[frame["efficient"] == 1].reset_index(drop=True)


def _draw_frontier(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("tokens_per_s_per_user:Q", title="Interactivity: tokens/s per user (log)",
              scale=alt.Scale(type="log", domain=[float(grid["tokens_per_s_per_user"].min()) / 1.3,
                                                  float(grid["tokens_per_s_per_user"].max()) * 1.3], nice=False))
    y = alt.Y("output_tokens_per_s_per_chip:Q", title="Output tokens/s per chip (log)",
              scale=alt.Scale(type="log", domain=[float(grid["output_tokens_per_s_per_chip"].min()) / 1.3,
                                                  float(grid["output_tokens_per_s_per_chip"].max()) * 1.3], nice=False))
    tooltip = [alt.Tooltip("batch:Q", title="Batch"), alt.Tooltip("chips:Q", title="Chips per instance"),
               alt.Tooltip("tokens_per_s_per_user:Q", title="Tokens/s per user", format=",.0f"),
               alt.Tooltip("output_tokens_per_s_per_chip:Q", title="Output tokens/s per chip", format=",.0f"),
               alt.Tooltip("ttft_s:Q", title="Mean TTFT, s", format=".2f"),
               alt.Tooltip("joules_per_output_token:Q", title="J per output token", format=".3f")]
    line = base.mark_line(point=alt.OverlayMarkDef(filled=True, size=60), color=SYSTEM_COLOURS["GB200"]).encode(
        x=x, y=y, order="batch:Q", tooltip=tooltip)
    labels = base.transform_filter("indexof([1, 8, 64, 512], datum.batch) >= 0").mark_text(
        align="left", dx=7, dy=-7, fontSize=11).encode(x=x, y=y, text=alt.Text("batch:Q", format="d"))
    return alt.layer(line, labels).properties(
        width=460, height=280,
        title=alt.TitleParams("Throughput against interactivity across batch sizes",
                              subtitle=["Each point is a batch size (some labelled). Up and right is better.",
                                        "Batch sizes beaten on both axes by another are left out."]),
    )


@cache
def frontier_figure() -> InteractiveFigure:
    """Figure: the throughput–interactivity frontier of one model on one chip."""
    return InteractiveFigure(
        name="frontier",
        description=(
            "Line chart on log-log axes: output tokens per second per chip against tokens per second "
            "per user, one point per batch size from 1 to 1,024 that no other batch size beats on both, "
            "for the chosen model, accelerator, weight precision and workload."
        ),
        controls=(_model_control(), _accelerator_control(),
                  Control("precision", "Weights:", roofline.PRECISIONS, "as_released", "radio",
                          tuple(roofline.PRECISION_LABELS[p] for p in roofline.PRECISIONS)),
                  Control("workload", "Workload (input/output):", tuple(data.load("workloads")["workload"]),
                          "8k/1k", "select")),
        compute=frontier_frame,
        draw=_draw_frontier,
        keys=("batch",),
        values=("tokens_per_s_per_user", "output_tokens_per_s_per_chip"),
        frontier=("tokens_per_s_per_user", "output_tokens_per_s_per_chip"),
    )


def implied_bandwidth_frame(precision: str, kv: str) -> pd.DataFrame:
    """Model output for the implied-bandwidth figure: one row per model."""
    drawn = comparisons.lengths("8k/1k")
    context = drawn.isl_mean + drawn.osl_mean / 2 if kv == "with_kv" else 0.0
    table = benchmark.per_user(benchmark.book_results(), drawn.osl_mean)
    table = table[table["system"] == comparisons.CANDIDATE].reset_index(drop=True)
    table["required_tb_s"] = [
        float(roofline.required_bandwidth(m, rate, context, precision)) / roofline.TERA
        for m, rate in zip(table["model"], table["interactivity"])
    ]
    reference = roofline.chip("gb300")
    table["hbm_equivalents"] = table["required_tb_s"] * roofline.TERA / reference.bandwidth_bytes_s
    table["reference_tb_s"] = reference.bandwidth_bytes_s / roofline.TERA
    return comparisons.label(table)


def _draw_implied_bandwidth(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x_scale = alt.Scale(type="log", domain=[1, float(grid["required_tb_s"].max()) * 2], nice=False)
    y = alt.Y("model_label:N", title=None, sort=_model_order())
    tooltip = [alt.Tooltip("model_label:N", title="Model"),
               alt.Tooltip("interactivity:Q", title="Reported tokens/s per user", format=",.0f"),
               alt.Tooltip("required_tb_s:Q", title="Bandwidth needed, TB/s", format=",.0f"),
               alt.Tooltip("hbm_equivalents:Q", title="GB300s' worth of HBM bandwidth", format=",.1f")]
    bars = base.mark_bar(color=SYSTEM_COLOURS["Jalapeño"], height=24).encode(
        x=alt.X("required_tb_s:Q", title="Memory bandwidth one user's stream needs, TB/s (log)", scale=x_scale),
        x2=alt.datum(1),  # a log axis has no zero: bars start at the axis's left end
        y=y, tooltip=tooltip)
    labels = base.mark_text(align="left", dx=4, fontSize=12).encode(
        x=alt.X("required_tb_s:Q", scale=x_scale), y=y, text="label:N")
    reference = base.mark_rule(strokeDash=[4, 3]).encode(x=alt.X("reference_tb_s:Q", scale=x_scale))
    return alt.layer(bars, labels, reference).transform_calculate(
        label="format(datum.required_tb_s, ',.0f') + ' TB/s = ' + format(datum.hbm_equivalents, '.0f') + ' GB300s'"
    ).properties(
        width=420, height=140,
        title=alt.TitleParams("Bandwidth implied by Jalapeño's tokens/s per user",
                              subtitle="Batch 1, no speculative decoding. Dashed line: one GB300's HBM."),
    )


@cache
def implied_bandwidth() -> InteractiveFigure:
    """Figure: the memory bandwidth the reported per-user rates would need at batch 1."""
    return InteractiveFigure(
        name="implied-bandwidth",
        description=(
            "Bar chart on a log axis: for each model, the memory bandwidth one user's stream would need "
            "to reach Jalapeño's reported tokens per second per user at batch 1 without speculative "
            "decoding, beside one GB300's HBM bandwidth."
        ),
        controls=(Control("precision", "Weights:", roofline.PRECISIONS, "as_released", "radio",
                          tuple(roofline.PRECISION_LABELS[p] for p in roofline.PRECISIONS)),
                  Control("kv", "Count:", ("weights_only", "with_kv"), "with_kv", "radio",
                          ("weights only", "weights and the KV cache of an 8k/1k request"))),
        compute=implied_bandwidth_frame,
        draw=_draw_implied_bandwidth,
        keys=("model",),
        values=("required_tb_s", "hbm_equivalents"),
    )


def speedup_surface_frame(c: float) -> pd.DataFrame:
    """Closed-form speed-up over a grid of acceptance rates and draft lengths, best draft length marked."""
    alphas = np.round(np.arange(0.5, 0.951, 0.05), 2)
    gammas = np.arange(1, 11)
    a, g = np.meshgrid(alphas, gammas, indexing="ij")
    frame = pd.DataFrame({"alpha": a.ravel(), "gamma": g.ravel()})
    frame["speedup"] = speculative.speedup(frame["alpha"].to_numpy(), frame["gamma"].to_numpy(), c)
    frame["expected_tokens"] = speculative.expected_tokens(frame["alpha"].to_numpy(), frame["gamma"].to_numpy())
    best = speculative.best_gamma(alphas, c, max_gamma=10)
    # 1 or 0 rather than a boolean, so the chart's CSV carries a number.
    frame["is_best"] = (frame["gamma"].to_numpy() == np.repeat(best, len(gammas))).astype(int)
    return frame


def _draw_speedup_surface(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("gamma:O", title="Draft length γ (tokens)")
    y = alt.Y("alpha:O", title="Acceptance rate α", sort="descending", axis=alt.Axis(format=".2f"))
    colour = alt.Color("speedup:Q", title="Speed-up",
                       scale=alt.Scale(scheme="blueorange", domainMid=1,
                                       domain=[float(grid["speedup"].min()), float(grid["speedup"].max())]))
    tooltip = [alt.Tooltip("alpha:Q", title="α", format=".2f"), alt.Tooltip("gamma:Q", title="γ"),
               alt.Tooltip("expected_tokens:Q", title="Tokens per target pass", format=".2f"),
               alt.Tooltip("speedup:Q", title="Speed-up", format=".2f")]
    cells = base.mark_rect().encode(x=x, y=y, color=colour, tooltip=tooltip)
    text = base.mark_text(fontSize=10).encode(x=x, y=y, text=alt.Text("speedup:Q", format=".1f"))
    best = base.transform_filter("datum.is_best == 1").mark_rect(filled=False, stroke="black", strokeWidth=2.5).encode(x=x, y=y)
    return alt.layer(cells, text, best).properties(
        width=420, height=300,
        title=alt.TitleParams("Speed-up from speculative decoding (memory-bound decode)",
                              subtitle="Black outline: the best draft length for each acceptance rate."),
    )


@cache
def speedup_surface() -> InteractiveFigure:
    """Figure: Leviathan et al.'s speed-up over acceptance rate and draft length, for a draft cost."""
    return InteractiveFigure(
        name="speedup-surface",
        description=(
            "Heat map of the closed-form speed-up of speculative decoding over acceptance rates 0.5 to "
            "0.95 and draft lengths 1 to 10, for the chosen draft cost ratio, with the best draft length "
            "for each acceptance rate outlined."
        ),
        controls=(Control.slider("c", "Draft cost c (draft pass ÷ target pass):", 0.0, 0.5, 0.05, 0.05, decimals=2),),
        compute=speedup_surface_frame,
        draw=_draw_speedup_surface,
        keys=("alpha", "gamma"),
        values=("speedup",),
    )


SPEC_MODEL, SPEC_ACCELERATOR = "llama-3.1-8b", "h100"


def speculation_batch_frame(alpha: float, gamma: int, c: float, context: int) -> pd.DataFrame:
    """Speed-up per user across batch sizes, priced with the roofline model, with the crossover."""
    frame = speculative.batch_frame(SPEC_MODEL, SPEC_ACCELERATOR, alpha, int(gamma), c, float(context))
    frame["crossover_label"] = (
        f"stops paying at batch {frame['crossover_batch'].iloc[0]:.0f}"
        if np.isfinite(frame["crossover_batch"].iloc[0]) else "still pays at batch 4096"
    )
    return frame


def _draw_speculation_batch(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("batch:Q", title="Batch size (log)", scale=alt.Scale(type="log", base=2, domain=[1, 1024], nice=False))
    y_scale = alt.Scale(domain=[0, float(grid["speedup"].max()) * 1.1], nice=False)
    tooltip = [alt.Tooltip("batch:Q", title="Batch"), alt.Tooltip("speedup:Q", title="Speed-up per user", format=".2f"),
               alt.Tooltip("energy_ratio:Q", title="Energy per token, with ÷ without", format=".2f")]
    line = base.mark_line(point=alt.OverlayMarkDef(filled=True, size=50), color="#7c3aed").encode(
        x=x, y=alt.Y("speedup:Q", title="Speed-up per user (with ÷ without speculation)", scale=y_scale),
        order="batch:Q", tooltip=tooltip)
    parity = alt.Chart(pd.DataFrame({"reference": [1.0]})).mark_rule(strokeDash=[4, 3]).encode(
        y=alt.Y("reference:Q", scale=y_scale))
    label = base.transform_filter("datum.batch == 1").mark_text(align="left", dx=6, dy=-14, fontSize=13,
                                                                fontWeight="bold").encode(
        x=x, y=alt.Y("speedup:Q", scale=y_scale), text="crossover_label:N")
    return alt.layer(parity, line, label).properties(
        width=440, height=260,
        title=alt.TitleParams("Does speculation still pay at this batch size?",
                              subtitle=["Llama 3.1 8B on as many H100s as each batch's KV cache needs, assumed to",
                                        "scale ideally across them (roofline model). Dashed line: no gain."]),
    )


@cache
def speculation_batch() -> InteractiveFigure:
    """Figure: speculative speed-up against batch size, and the batch where it stops paying."""
    return InteractiveFigure(
        name="speculation-batch",
        description=(
            "Line chart: the per-user speed-up from speculative decoding against batch size from 1 to "
            "1,024 for Llama 3.1 8B on as many H100s as the batch's KV cache needs, priced with the book's "
            "roofline model with ideal scaling across GPUs, for the chosen "
            "acceptance rate, draft length, draft cost and context length, with the batch at which "
            "speculation stops paying."
        ),
        controls=(
            Control.slider("alpha", "Acceptance rate α:", 0.5, 0.9, 0.1, 0.7, decimals=1),
            Control.slider("gamma", "Draft length γ:", 1, 4, 1, 3, decimals=0),
            Control.slider("c", "Draft cost c:", 0.0, 0.3, 0.1, 0.1, decimals=1),
            Control("context", "Context per sequence, tokens:", (128, 512, 2048), 512, "select"),
        ),
        compute=speculation_batch_frame,
        draw=_draw_speculation_batch,
        keys=("batch",),
        values=("speedup", "energy_ratio", "crossover_batch"),
    )


AGENT_MODEL = "deepseek-r1"


def agent_task_frame(steps: int, context_growth: float, cache_hit: float, tool_s: float) -> pd.DataFrame:
    """Model output for the agent-task figure: each system's task time split into its parts."""
    wide = agents.task_comparison(AGENT_MODEL, int(steps), context_growth, cache_hit, tool_s)
    long = wide.melt(id_vars=["system", "system_label", "latency_s", "energy_j", "latency_advantage"],
                     value_vars=["prefill_s", "decode_s", "tool_total_s"], var_name="component", value_name="seconds")
    long["component"] = long["component"].map({"prefill_s": "prefill", "decode_s": "decode", "tool_total_s": "tools"})
    long["energy_kj"] = long["energy_j"] / 1000
    return long


def _draw_agent_task(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x_scale = alt.Scale(domain=[0, float(grid["latency_s"].max()) * 1.25], nice=False)
    y = alt.Y("system_label:N", title=None, sort=list(SYSTEM_COLOURS))
    colour = alt.Color("component:N", title="Time spent in",
                       scale=alt.Scale(domain=["prefill", "decode", "tools"], range=["#7c3aed", "#c2410c", "#94a3b8"]),
                       legend=alt.Legend(orient="top"))
    bars = base.mark_bar(height=28).encode(
        x=alt.X("seconds:Q", title="Task latency, s", scale=x_scale, stack="zero"), y=y, color=colour,
        order=alt.Order("component:N", sort="descending"),
        tooltip=[alt.Tooltip("system_label:N", title="System"), alt.Tooltip("component:N", title="Part"),
                 alt.Tooltip("seconds:Q", title="Seconds", format=",.1f")])
    totals = base.transform_filter("datum.component == 'decode'").mark_text(align="left", dx=6, fontSize=12).encode(
        x=alt.X("latency_s:Q", scale=x_scale), y=y, text="summary:N")
    return alt.layer(bars, totals).transform_calculate(
        summary="format(datum.latency_s, ',.1f') + ' s, ' + format(datum.energy_kj, ',.2f') + ' kJ'"
    ).properties(
        width=420, height=alt.Step(40),
        title=alt.TitleParams("One agent task: where the time goes",
                              subtitle="DeepSeek R1: prefill of uncached context, decode of outputs, tool time."),
    )


@cache
def agent_task() -> InteractiveFigure:
    """Figure: task latency and energy for a multi-step agent task on Jalapeño and its baseline."""
    return InteractiveFigure(
        name="agent-task",
        description=(
            "Stacked bars: the latency of one agent task on Jalapeño and on its NVIDIA baseline, split into "
            "prefill, decode and tool time, with the task's energy, for DeepSeek R1 and the chosen number of "
            "calls, context growth per call, prefix-cache hit rate and tool time."
        ),
        controls=(
            Control("steps", "Model calls per task:", (1, 5, 10, 25, 50), 10, "select"),
            Control.slider("context_growth", "Context added per call, tokens:", 0, 4000, 1000, 1000, decimals=0),
            Control.slider("cache_hit", "Prefix-cache hit rate:", 0.0, 0.9, 0.3, 0.6, decimals=1),
            Control.slider("tool_s", "Tool time between calls, s:", 0, 10, 5, 5, decimals=0),
        ),
        compute=agent_task_frame,
        draw=_draw_agent_task,
        keys=("system", "component"),
        values=("seconds", "latency_s", "energy_j"),
    )


LOAD_RATES = (0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0)
#: Idle draw the load figure offers, as a share of the rating (the default comes from assumptions.csv).
IDLE_SHARES = (0.1, 0.2, 0.5, 1.0)


@cache
def _load_curve(max_batch: int) -> pd.DataFrame:
    return agents.load_curve(max_batch, LOAD_RATES)


def serving_load_frame(max_batch: int, arrival_rate: float, idle_power_fraction: float) -> pd.DataFrame:
    """Model output for the load figure: the whole curve for one batch cap, the chosen rate marked."""
    frame = _load_curve(int(max_batch)).rename(columns={"arrival_rate": "rate_rps"})
    frame["joules_per_output_token"] = agents.joules_per_output_token(
        frame["rated_power_w"], frame["chips"], frame["busy_fraction"], frame["throughput_tokens_per_s"],
        idle_power_fraction)
    frame["selected"] = (np.isclose(frame["rate_rps"], arrival_rate)).astype(int)
    return frame


def _draw_serving_load(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("rate_rps:Q", title="Arrival rate, requests/s (log)",
              scale=alt.Scale(type="log", domain=[LOAD_RATES[0], LOAD_RATES[-1]], nice=False))
    y_scale = alt.Scale(type="log", domain=[float(grid["p50_s"].min()) / 1.5, float(grid["p99_s"].max()) * 1.5], nice=False)
    lines = base.transform_fold(["p50_s", "p99_s"], as_=["statistic", "latency"]).mark_line(point=True).encode(
        x=x, y=alt.Y("latency:Q", title="Request latency, s (log)", scale=y_scale),
        color=alt.Color("statistic:N", title="Latency", scale=alt.Scale(domain=["p50_s", "p99_s"], range=["#2563eb", "#dc2626"]),
                        legend=alt.Legend(orient="top", labelExpr="datum.label == 'p50_s' ? 'median' : '99th percentile'")),
    )
    chosen = base.transform_filter("datum.selected == 1")
    rule = chosen.mark_rule(strokeDash=[4, 3]).encode(x=x)
    text = chosen.mark_text(align="left", dx=6, y=12, fontSize=12).encode(x=x, text="summary:N")
    return alt.layer(lines, rule, text).transform_calculate(
        summary="format(datum.throughput_tokens_per_s, ',.0f') + ' tok/s, p99 ' + format(datum.p99_s, '.2f') "
                "+ ' s, ' + format(datum.joules_per_output_token, '.2f') + ' J/token'"
    ).properties(
        width=440, height=260,
        title=alt.TitleParams("One serving instance under rising load",
                              subtitle="gpt-oss-120b on GB200, continuous batching, 8k prompts, 256-token outputs."),
    )


@cache
def serving_load() -> InteractiveFigure:
    """Figure: latency percentiles, throughput and energy per token as arrivals rise."""
    return InteractiveFigure(
        name="serving-load",
        description=(
            "Line chart on log axes: median and 99th-percentile request latency of one simulated serving "
            "instance against the arrival rate, for the chosen cap on the batch size, with the throughput, "
            "tail latency and energy per output token at the chosen arrival rate; busy chips are charged "
            "their rated power and idle chips the chosen share of it."
        ),
        controls=(
            Control("max_batch", "Largest batch:", (1, 16, 128), 16, "select"),
            Control("arrival_rate", "Arrival rate, requests/s:", LOAD_RATES, 4.0, "select"),
            Control("idle_power_fraction", "Idle draw, share of rated power (assumed):", IDLE_SHARES,
                    comparisons.assumption("idle_power_fraction"), "select"),
        ),
        compute=serving_load_frame,
        draw=_draw_serving_load,
        keys=("rate_rps",),
        values=("p50_s", "p99_s", "throughput_tokens_per_s", "joules_per_output_token"),
    )


def fleet_frame(agent_share: float, agent_min_rate: int, price_usd_per_kwh: float) -> pd.DataFrame:
    """Model output for the fleet figure: chips of each kind per workload in the cheapest plan."""
    frame = fleet.scenario(agent_share, float(agent_min_rate), price_usd_per_kwh)
    frame["workload_label"] = frame["workload"].map({"chat": "chat (1k/1k)", "agent": "agent calls (8k/1k)"})
    return frame


def _draw_fleet(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    totals = grid.groupby(["agent_share", "agent_min_rate", "price_usd_per_kwh", "workload"])["chips"].sum()
    x_scale = alt.Scale(domain=[0, float(totals.max()) * 1.35], nice=False)
    y = alt.Y("workload_label:N", title=None, sort=["chat (1k/1k)", "agent calls (8k/1k)"])
    hardware = ["jalapeno", "b200", "gb200", "h200", "h100"]
    colour = alt.Color("hardware:N", title="Chip", legend=alt.Legend(orient="top", labelExpr=(
        "datum.label == 'jalapeno' ? 'Jalapeño (assumed)' : upper(datum.label)")),
        scale=alt.Scale(domain=hardware, range=["#c2410c", "#1d4ed8", "#15803d", "#7c3aed", "#64748b"]))
    bars = base.mark_bar(height=26).encode(
        x=alt.X("chips:Q", title="Chips in the cheapest plan", scale=x_scale, stack="zero"), y=y, color=colour,
        order=alt.Order("hardware:N"),
        tooltip=[alt.Tooltip("workload_label:N", title="Workload"), alt.Tooltip("hardware_label:N", title="Chip"),
                 alt.Tooltip("chips:Q", title="Chips", format=",.0f"),
                 alt.Tooltip("workload_usd_per_million_tokens:Q", title="US$ per million output tokens", format=".4f"),
                 alt.Tooltip("workload_kwh_per_million_tokens:Q", title="kWh per million output tokens", format=".3f")])
    label = base.transform_filter("datum.hardware == 'jalapeno'").mark_text(align="left", x="width", dx=-150,
                                                                             fontSize=12).encode(
        y=y, text="cost_label:N")
    return alt.layer(bars, label).transform_calculate(
        cost_label="'$' + format(datum.workload_usd_per_million_tokens, '.3f') + ' per M tokens'"
    ).properties(
        width=440, height=alt.Step(44),
        title=alt.TitleParams("The cheapest fleet for the chosen mix",
                              subtitle="gpt-oss-120b, 20M output tokens/s. Jalapeño's profile is assumed."),
    )


@cache
def fleet_figure() -> InteractiveFigure:
    """Figure: the cheapest assignment of chips to chat and agent work."""
    return InteractiveFigure(
        name="fleet",
        description=(
            "Stacked bars: the number of chips of each kind that the cheapest plan assigns to chat and to "
            "agent calls, for the chosen share of agent work, per-user speed target for agent calls and "
            "electricity price, with each workload's cost per million output tokens. Jalapeño's profile "
            "rests on stated assumptions."
        ),
        controls=(
            Control.slider("agent_share", "Share of output that is agent calls:", 0.0, 1.0, 0.25, 0.5, decimals=2),
            Control("agent_min_rate", "Agent target, tokens/s per user:", (50, 100, 200), 100, "select"),
            Control.slider("price_usd_per_kwh", "Electricity price, $/kWh:", 0.04, 0.28, 0.04, 0.08, decimals=2),
        ),
        compute=fleet_frame,
        draw=_draw_fleet,
        keys=("workload", "hardware"),
        values=("chips", "workload_usd_per_million_tokens"),
    )


def all_figures() -> list[InteractiveFigure]:
    """Every interactive figure in the book, for tests and benchmarks."""
    return [power_basis(), energy_cost(), latency_audit(), users_per_chip(),
            roofline_figure(), frontier_figure(), implied_bandwidth(),
            speedup_surface(), speculation_batch(), agent_task(), serving_load(), fleet_figure()]


def by_name(name: str) -> InteractiveFigure:
    """The interactive figure called ``name`` (its ``data-figure`` in the site)."""
    for figure in all_figures():
        if figure.name == name:
            return figure
    raise ValueError(f"no figure named {name!r}; figures: {[f.name for f in all_figures()]}")
