"""Figures and tables of the speculative-decoding chapter: the speed-up surface, speculation against batch
size, drafters compared, and the model against TensorRT-LLM's measured MTP speed-ups."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from perwatt import checks, data, roofline, serving, speculative
from perwatt.figures.kit import SPECULATION_COLOUR, figure, framed, reference_line, tooltips
from perwatt.figures.kit import colour as nominal_colour
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
    # Each number in black or white, whichever stands out more from its cell (Vega's own contrast(), on
    # the colour the cell is drawn in): black on every cell fell to 2.37:1 at c = 0.5 in vl-convert's
    # drawing, on the darkest cells presumably. Black unless white is better, so that a colour Vega
    # cannot look up (NaN) leaves the numbers black, as they were.
    ink = alt.expr("contrast('white', scale('color', datum.speedup)) > contrast('black', scale('color', datum.speedup))"
                   " ? 'white' : 'black'")
    text = base.mark_text(fontSize=10, color=ink).encode(x=x, y=y, text=alt.Text("speedup:Q", format=".1f"))
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
    """Speed-up per user across batch sizes for a draft at a fixed cost ``c`` per drafted token,
    the target's passes priced by the serving model, with the crossover."""
    frame = speculative.batch_frame(SPEC_MODEL, SPEC_ACCELERATOR, alpha, int(gamma), c, float(context),
                                    drafter=speculative.FIXED_COST)
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
                  ["Llama 3.1 8B on as many H100s as each batch's KV cache needs, tensor parallel",
                   "(serving model; drafts at c target passes each). Dashed line: no gain."], 440, 260)


@figure
def speculation_batch() -> InteractiveFigure:
    """Line chart: the per-user speed-up from speculative decoding against batch size from 1 to 1,024
    for Llama 3.1 8B on as many H100s as the batch's KV cache needs, tensor parallel, its passes priced
    by the book's serving model and each drafted token at the chosen fixed cost, for the chosen
    acceptance rate, draft length and context length, with the batch at which speculation stops paying."""
    return InteractiveFigure(
        controls=(
            Control.slider("alpha", "Acceptance rate α:", 0.5, 0.9, 0.1, 0.7, decimals=1),
            Control.slider("gamma", "Draft length γ:", 1, 4, 1, 3, decimals=0),
            Control.slider("c", "Draft cost c:", 0.0, 0.3, 0.1, 0.1, decimals=1),
            Control("context", "Context per sequence, tokens:", (128, 512, 2048), 128, "select"),
        ),
        compute=speculation_batch_frame, draw=_draw_speculation_batch,
        keys=("batch",), values=("speedup", "energy_ratio", "crossover_batch"), ships=("crossover_label",))


# --- Tables and the figure of the drafters and the MTP measurements ------------------------------

#: The drafters the book compares on one dense target, each as (drafter, branches, label).
DRAFTER_CASES = (
    (speculative.MTP, 1, "MTP-style head (one more target layer per draft)"),
    ("llama-3.1-8b", 1, "separate draft model (Llama 3.1 8B)"),
    ("llama-3.1-8b", 4, "tree: best of 4 independent Llama 3.1 8B chains (assumed)"),
)


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, alpha=speculative.ALPHA,
                  gamma=checks.rule(checks.integer, minimum=1, maximum=checks.MAX_GAMMA),
                  context=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS))
def drafter_comparison(model: str, accelerator: str, alpha: float, gamma: int, context: float,
                       batches=(1, 16, 64, 256)) -> pd.DataFrame:
    """Each drafter of :data:`DRAFTER_CASES` on one target at the same independent acceptance:
    per batch, tokens per pass, the draft's time as a share of a plain pass (the ``c`` the
    serving model implies), the verification pass against a plain one, and the speed-up; with
    each drafter's crossover batch."""
    batches = serving.batch_list(batches)
    spec, device = roofline.model_spec(model), roofline.chip(accelerator)
    rows = []
    for drafter, branches, label in DRAFTER_CASES:
        chips = roofline.chips_needed(spec, device, batches, context)
        choice = {"drafter": drafter, "branches": branches}
        parts = speculative.round_time(spec, device, batches, context, gamma, chips, **choice)
        gain = speculative.batch_speedup(model, accelerator, alpha, gamma, batches, context, **choice)["speedup"]
        cross = speculative.crossover_batch(model, accelerator, alpha, gamma, context=context, **choice)
        rows.append(pd.DataFrame({
            "drafter": drafter, "branches": branches, "label": label, "batch": batches.astype(int), "chips": chips,
            "tokens_per_pass": float(speculative.expected_tokens(alpha, gamma, branches)),
            "draft_cost": parts["draft"] / parts["plain"] / gamma, "verify_ratio": parts["verify"] / parts["plain"],
            "speedup": gain, "crossover_batch": cross}))
    return pd.concat(rows, ignore_index=True)


# --- Measured MTP against the model ------------------------------------------------------------

#: Expert-parallel groups assumed for TensorRT-LLM's MTP table, which does not state its layout:
#: the blog's best layout for that scenario splits the experts into two groups of four GPUs.
MTP_EP = 2


@checks.validated(ep=checks.rule(checks.integer, maximum=8), assumptions=roofline.ASSUMED)
def mtp_comparison(ep: int = MTP_EP, assumptions: roofline.Assumptions = roofline.DEFAULTS) -> pd.DataFrame:
    """TensorRT-LLM's measured MTP table (data/mtp_acceptance.csv) beside the serving model.

    One row per number of MTP layers, with the measured columns and, derived: the measured
    speed-up over no MTP; ``all_accepted``, P(the first i drafts are all accepted)
    (:func:`perwatt.speculative.prefix_acceptance`) and ``position_rate``, the rate at position i
    given the earlier ones; ``independent_tokens``, the closed form at α fitted to one draft; each pass's time
    relative to a pass without MTP, measured (tokens per pass ÷ tokens/s) and modelled; and the
    modelled tokens/s per user and speed-up, from :func:`perwatt.serving.serve` on the run's
    chips and lengths with ``ep`` expert groups (tensor-parallel attention), given the measured
    tokens per pass (the per-position profile) or the independent-α ones.
    """
    table = data.load("mtp_acceptance").sort_values("mtp_layers").reset_index(drop=True)
    setup = ["model", "accelerator", "chips", "batch", "isl_tokens", "osl_tokens", "precision"]
    # Speed-ups are read against the row without MTP, so every row must be the same run at 0, 1, 2, … layers.
    if list(table["mtp_layers"]) != list(range(len(table))) or len(table[setup].drop_duplicates()) != 1:
        raise ValueError("data/mtp_acceptance.csv must hold one run's rows at 0, 1, 2, … MTP layers")
    run = table.iloc[0]
    if run["chips"] % ep:
        raise ValueError(f"ep must divide the run's {run['chips']} chips, got {ep}")
    spec = roofline.model_spec(run["model"]).with_precision(run["precision"])
    device = roofline.chip(run["accelerator"])
    drafts = table["mtp_layers"].to_numpy(float)
    measured = table["tokens_per_pass"].to_numpy(float)
    alpha = speculative.fitted_alpha(measured[1])
    independent = speculative.expected_tokens(alpha, drafts)

    def modelled(tokens):
        return serving.serve(spec, device, float(run["batch"]), float(run["isl_tokens"]), float(run["osl_tokens"]),
                             assumptions, float(run["chips"]), ep, False, drafts, tokens)

    profiled, assumed = modelled(measured), modelled(independent)
    rate = profiled["tokens_per_s_per_user"]
    out = table.drop(columns=["note"]).assign(
        measured_speedup=table["tokens_per_s_per_user"] / table["tokens_per_s_per_user"].iloc[0],
        all_accepted=np.concatenate([[np.nan], speculative.prefix_acceptance(measured[1:])]),
        independent_tokens=independent,
        measured_pass_ratio=measured * table["tokens_per_s_per_user"].iloc[0] / table["tokens_per_s_per_user"],
        modelled_pass_ratio=measured * rate[0] / rate,
        modelled_tokens_per_s_per_user=rate,
        modelled_speedup=rate / rate[0],
        independent_speedup=assumed["tokens_per_s_per_user"] / rate[0],
    )
    out["position_rate"] = np.concatenate([[np.nan], speculative.position_rates(out["all_accepted"].to_numpy()[1:])])
    out["speedup_error_pct"] = (out["modelled_speedup"] / out["measured_speedup"] - 1) * 100
    out["alpha"] = alpha
    out["ep"] = ep
    return out


#: How each line of the MTP figure is drawn: measured points, modelled lines.
MTP_SERIES = {"measured": "TensorRT-LLM, measured",
              "profile": "model, measured tokens per pass",
              "independent": "model, independent α fitted to one draft"}
MTP_COLOURS = {"TensorRT-LLM, measured": "#111827", "model, measured tokens per pass": SPECULATION_COLOUR,
               "model, independent α fitted to one draft": "#f59e0b"}


def mtp_speedup_frame(ep: int) -> pd.DataFrame:
    """Speed-up per user against MTP layers: measured, and modelled with either acceptance."""
    table = mtp_comparison(int(ep))
    columns = {"measured": "measured_speedup", "profile": "modelled_speedup", "independent": "independent_speedup"}
    return pd.concat([pd.DataFrame({"mtp_layers": table["mtp_layers"], "series": MTP_SERIES[key],
                                    "speedup": table[column], "measured": key == "measured"})
                      for key, column in columns.items()], ignore_index=True)


def _draw_mtp_speedup(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("mtp_layers:O", title="MTP layers (drafted tokens per pass)", axis=alt.Axis(labelAngle=0))
    y = alt.Y("speedup:Q", title="Speed-up per user over no MTP",
              scale=alt.Scale(domain=[0, float(grid["speedup"].max()) * 1.08], nice=False))
    series = nominal_colour("series", "Speed-up", MTP_COLOURS, orient="bottom", direction="vertical", labelLimit=400)
    tooltip = tooltips(("series:N", "Series"), ("mtp_layers:O", "MTP layers"), ("speedup:Q", "Speed-up", ".2f"))
    lines = base.transform_filter("!datum.measured").mark_line(point=True, strokeDash=[6, 3]).encode(
        x=x, y=y, color=series, tooltip=tooltip)
    points = base.transform_filter("datum.measured").mark_point(filled=True, size=110).encode(
        x=x, y=y, color=series, tooltip=tooltip)
    return framed(alt.layer(lines, points), "DeepSeek R1 at batch 1 on 8 × B200: measured against modelled",
                  ["TensorRT-LLM's MTP table, 1k input and 2k output tokens; the model on the run's",
                   "chips and lengths, FP4 experts, tensor-parallel attention."], 440, 260)


@figure
def mtp_speedup() -> InteractiveFigure:
    """Line chart: DeepSeek R1's speed-up per user at batch 1 on eight B200s for 0 to 5 MTP layers:
    TensorRT-LLM's measured speed-ups as points; the serving model's as dashed lines, given the
    measured tokens per pass or independent acceptance fitted to one draft, for the chosen number of
    expert-parallel groups (the measurement does not state its own)."""
    return InteractiveFigure(
        controls=(Control("ep", "Expert-parallel groups (unstated by the run):", (1, 2, 4, 8),
                          MTP_EP, "select"),),
        compute=mtp_speedup_frame, draw=_draw_mtp_speedup,
        keys=("mtp_layers", "series"), values=("speedup",), ships=("measured",))
