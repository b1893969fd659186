"""Figures of the benchmark-tables chapter: the latency audit and users per chip."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perwatt import benchmark, catalog, data
from perwatt.figures.kit import (VERDICT_COLOURS, colour, figure, framed, log_scale, points_with_labels, reference_line,
                                 tooltips)
from perwatt.interactive import Control, InteractiveFigure


def _labelled(frame: pd.DataFrame) -> pd.DataFrame:
    out = catalog.label(frame)
    out["row_label"] = out["model_label"] + " · " + out["system_label"]
    return out


def _row_order(grid: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(grid["row_label"]))


def latency_audit_frame(osl_tokens: float) -> pd.DataFrame:
    """The audit of every table row at one (mean) output length, with the least time its output takes:
    one step per token, the first token's included."""
    table = _audit_table()  # what no output length changes, read once for the 81 lengths the slider offers
    columns = {**table["wide"], **benchmark._audit_columns(table["wide"], osl_tokens), **table["labels"],
               "min_output_s": osl_tokens / table["wide"]["interactivity"]}
    return pd.DataFrame(columns, columns=pd.Index(list(columns), dtype=object))  # labels as the wide table's: objects


@data.cached
def _audit_table() -> dict:
    """:func:`perwatt.benchmark.latency_audit`'s wide table of the book's results and the labels
    :func:`_labelled` adds, as columns (read them, never write them: every caller shares them)."""
    wide = catalog.wide(benchmark.book_results())
    labelled = _labelled(wide)
    return {"wide": {c: wide[c] for c in wide.columns},
            "labels": {c: labelled[c] for c in ("model_label", "system_label", "row_label")}}


def _draw_latency_audit(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x_scale = alt.Scale(domain=[0, float(max(grid["min_output_s"].max(), grid["e2e_latency_s"].max())) * 1.05],
                        nice=False)
    y = alt.Y("row_label:N", title=None, sort=_row_order(grid))
    tooltip = tooltips(("row_label:N", "Row"), ("e2e_latency_s:Q", "Reported latency, s", ".2f"),
                       ("interactivity:Q", "Reported tokens/s per user", ",.0f"),
                       ("min_output_s:Q", "Output tokens × time per token, s", ".3f"),
                       ("implied_ttft_s:Q", "Implied time to first token, s", ".3f"),
                       ("max_consistent_osl:Q", "Longest output the row allows, tokens", ",.0f"),
                       ("verdict:N", "Verdict"))
    bars = base.mark_bar(height=16).encode(
        x=alt.X("min_output_s:Q", title="Seconds", scale=x_scale), y=y,
        color=colour("verdict", "One operating point?", VERDICT_COLOURS), tooltip=tooltip)
    reported = base.mark_tick(color="black", thickness=3, size=24).encode(
        x=alt.X("e2e_latency_s:Q", scale=x_scale), y=y, tooltip=tooltip)
    ttft = base.mark_text(align="left", dx=6, fontSize=12).encode(
        x=alt.X("label_x:Q", scale=x_scale), y=y, text="ttft_label:N")
    chart = alt.layer(bars, reported, ttft).transform_calculate(
        label_x="max(datum.min_output_s, datum.e2e_latency_s)",
        ttft_label="'TTFT ' + format(datum.implied_ttft_s, '.2f') + ' s'")
    return framed(chart, "Do latency and tokens/s per user fit one request?",
                  ["Bar: output tokens ÷ tokens/s per user. Tick: reported latency.",
                   "A bar past its tick leaves less than one step for the first token."], 400, alt.Step(26))


#: Slider stops either side of the mean output length in the latency audit, and their spacing.
AUDIT_STOPS, AUDIT_STEP = 40, 8


@figure
def latency_audit() -> InteractiveFigure:
    """Bar chart, one bar per model and system: the least time needed to generate the chosen number of
    output tokens at the reported tokens per second per user, beside a tick at the reported end-to-end
    latency. Bars longer than the latency are impossible for one request."""
    mean = catalog.lengths().osl_mean
    return InteractiveFigure(
        controls=(Control.slider("osl_tokens", "Output tokens per request (mean):", mean - AUDIT_STOPS * AUDIT_STEP,
                                 mean + AUDIT_STOPS * AUDIT_STEP, AUDIT_STEP, mean),),
        compute=latency_audit_frame, draw=_draw_latency_audit,
        keys=("model", "system"), values=("implied_ttft_s", "min_output_s", "max_consistent_osl"),
        ships=("row_label", "verdict", "e2e_latency_s", "interactivity"))


def users_per_chip_frame(basis: str, counted: str) -> pd.DataFrame:
    """Users per chip on one power basis and one reading of the per-kW figure's tokens."""
    drawn = catalog.lengths()
    results = benchmark.book_results()
    watts = pd.Series({s: catalog.power_w(s, basis) for s in results["system"].unique()})
    return _labelled(benchmark.users_per_chip(results, watts, drawn.isl_mean, drawn.osl_mean, counted))


def _draw_users_per_chip(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    x_scale = log_scale(grid["users_per_chip"], 2)
    y = alt.Y("row_label:N", title=None, sort=_row_order(grid))
    tooltip = tooltips(("row_label:N", "Row"), ("users_per_chip:Q", "Users per chip", ".3~g"),
                       ("chip_output_tokens_per_s:Q", "Output tokens/s per chip", ",.0f"),
                       ("interactivity:Q", "Tokens/s per user", ",.0f"), ("power_w:Q", "Watts per chip", ",.0f"))
    x = alt.X("users_per_chip:Q", title="Concurrent users per chip (log scale)", scale=x_scale)
    text = alt.Text("users_per_chip:Q", format=".2~f")
    return framed(alt.layer(reference_line(1.0, x_scale), *points_with_labels(base, x, y, text, tooltip)),
                  "Users per chip, if both figures describe one operating point",
                  "Left of the dashed line, one user's stream would need more than one chip.", 400, alt.Step(26))


@figure
def users_per_chip() -> InteractiveFigure:
    """Dot plot on a logarithmic axis: for each model and system, the output tokens per second per chip
    implied by the reported tokens per second per kilowatt on the chosen power basis and reading of its
    tokens, divided by the reported tokens per second per user. Systems with no known power on a basis
    are left out."""
    return InteractiveFigure(
        controls=(
            Control("basis", "Tokens/s/kW divided by:", catalog.BASES, "chip_rated", "radio",
                    tuple(catalog.BASIS_LABELS[b] for b in catalog.BASES)),
            Control("counted", "Tokens in the per-kW figure:", ("all", "output"), "all", "radio",
                    ("input + output (the book's reading of “mixed”)", "output only")),
        ),
        compute=users_per_chip_frame, draw=_draw_users_per_chip, keys=("model", "system"), values=("users_per_chip",),
        ships=("row_label", "system_label", "chip_output_tokens_per_s", "interactivity", "power_w"))
