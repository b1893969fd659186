"""Styled tables for the chapters: labelled columns, units, evidence status, empty unknowns."""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd
from pandas.io.formats.style import Styler

from perwatt import accounting, benchmark, catalog, data, roofline


@dataclass(frozen=True)
class Column:
    """How one column is shown: its heading, number format and evidence status."""

    label: str
    fmt: str = "{}"
    status: str = ""  # "reported", "confirmed" or "derived"; shown in the heading


def styled(frame: pd.DataFrame, columns: dict[str, Column], *, caption: str, table_id: str) -> Styler:
    """A pandas Styler showing ``columns`` of ``frame`` in order.

    Unknown values (NaN) are shown as empty cells, never as a number; the caller gives
    the reason in a note beside the table. Cells, headings and the caption are HTML-escaped. ``table_id`` fixes the HTML ids so that two
    builds produce the same page.
    """
    missing = [c for c in columns if c not in frame]
    if missing:
        raise ValueError(f"table {table_id!r}: no column(s) {missing} in the frame")
    shown = frame[list(columns)].copy()
    headings = {
        name: f"{col.label} ({col.status})" if col.status else col.label for name, col in columns.items()
    }
    formats = {headings[name]: col.fmt for name, col in columns.items()}
    shown.columns = [headings[c] for c in shown.columns]
    # Every text is escaped: a label from a reader's own file is data, never markup.
    return (
        shown.style.set_uuid(table_id)
        .format(formats, na_rep="", escape="html")
        .format_index(escape="html", axis=1)
        .hide(axis="index")
        .set_caption(html.escape(caption))
        .set_table_attributes('class="perwatt-table"')
    )


def conversions(price_usd_per_kwh: float, pue: float = 1.0) -> Styler:
    """The reported tokens/s/kW and what it converts to: J/token, kWh and US$ per million tokens."""
    costs = accounting.energy_costs(price_usd_per_kwh=price_usd_per_kwh, pue=pue, tokens="all")
    return styled(
        costs,
        {
            "model_label": Column("Model"),
            "system_label": Column("System"),
            "tps_per_kw": Column("Tokens/s/kW", "{:,.0f}", "reported"),
            "joules_per_token": Column("J/token", "{:.4f}", "derived"),
            "kwh_per_million_tokens": Column("kWh per million tokens", "{:.4f}", "derived"),
            "cost_usd_per_million_tokens": Column("US$ per million tokens", "{:.5f}", "derived"),
        },
        caption=f"The reported throughput per kilowatt and what it converts to, at US${price_usd_per_kwh:.2f} "
        f"per kWh and a PUE of {pue:g}.",
        table_id="conversions",
    )


def power() -> Styler:
    """Watts per chip on each basis, with the kind of value, its evidence label and its note."""
    frame = data.load("power")
    frame["system_label"] = frame["system"].map(data.load("systems").set_index("system")["label"])
    frame["basis_label"] = frame["basis"].map(catalog.BASIS_LABELS)
    frame["status"] = frame["source_id"].map(data.load("sources").set_index("source_id")["status"])
    return styled(
        frame,
        {
            "system_label": Column("System"),
            "basis_label": Column("Basis"),
            "power_w": Column("Watts per chip", "{:,.0f}"),
            "bound": Column("Kind of value"),
            "status": Column("Evidence"),
            "note": Column("Note"),
        },
        caption="Power per chip on each basis. Empty cells are unknown; the note says why.",
        table_id="power",
    )


def implied_throughput() -> Styler:
    """Tokens/s per chip that each power basis implies for the reported tokens/s/kW."""
    implied = accounting.implied_chip_throughput()
    # A power that is an upper bound ("or under") makes tokens/s = TPS/kW × kW an upper bound too.
    implied["shown"] = [
        "" if pd.isna(v) else ("≤ " if bound == "upper" else "") + f"{v:,.0f}"
        for v, bound in zip(implied["tokens_per_s"], implied["bound"])
    ]
    # Only the pairs the articles benchmarked: no row for a model on a system it was not run on.
    wide = implied.pivot(index=["model", "system"], columns="basis", values="shown")
    order = implied[["model", "system"]].drop_duplicates()
    wide = catalog.label(wide.reindex(pd.MultiIndex.from_frame(order)).reset_index())
    return styled(
        wide,
        {
            "model_label": Column("Model"),
            "system_label": Column("System"),
            "chip_measured": Column("if divided by measured draw", status="derived"),
            "chip_rated": Column("if divided by rating", status="derived"),
            "all_in_provisioned": Column("if divided by all-in", status="derived"),
        },
        caption="Tokens/s per chip implied by the reported tokens/s/kW on each power basis, for the model and "
        "system pairs the articles benchmarked. Empty: that basis has no known power for the system. "
        "≤: Jalapeño's measured draw is published only as 550 W or under, so tokens/s on that basis is at most "
        "the figure shown.",
        table_id="implied-throughput",
    )


def published(results: pd.DataFrame | None = None) -> Styler:
    """The benchmark table as the article prints it: model, metric, Jalapeño, baseline, ≈ ratio."""
    results = benchmark.book_results() if results is None else results
    table = catalog.label(benchmark.paired(results).merge(
        data.load("reported_ratios")[["model", "metric", "reported_ratio"]], on=["model", "metric"], how="left"))
    table["metric_label"] = table["metric"].map(lambda m: f"{benchmark.METRICS[m].label} ({benchmark.METRICS[m].unit})")
    table["candidate_shown"] = [_printed(v, d) for v, d in zip(table["candidate_value"], table["candidate_decimals"])]
    table["baseline_shown"] = [_printed(v, d) for v, d in zip(table["baseline_value"], table["baseline_decimals"])]
    return styled(
        table,
        {
            "model_label": Column("Model"),
            "metric_label": Column("Metric"),
            "candidate_shown": Column("Jalapeño", status="reported"),
            "baseline_label": Column("Baseline"),
            "baseline_shown": Column("Baseline value", status="reported"),
            "reported_ratio": Column("Printed ratio", "≈{:.1f}×", "reported"),
        },
        caption="The benchmark table as published (InferenceX, 8k/1k workload). Reported by OpenAI, "
        "relayed by the articles, not independently verified.",
        table_id="published",
    )


def _printed(value: float, decimals: int) -> str:
    return f"{value:,.{int(decimals)}f}"


def ratio_checks(checks: pd.DataFrame, table_id: str = "ratio-checks") -> Styler:
    """Recomputed ratios beside the printed ones, with the rounding verdict."""
    table = catalog.label(checks)
    table["metric_label"] = table["metric"].map(lambda m: benchmark.METRICS[m].label)
    table["input_range"] = [f"{lo:.2f} – {hi:.2f}" for lo, hi in zip(table["input_low"], table["input_high"])]
    return styled(
        table,
        {
            "model_label": Column("Model"),
            "metric_label": Column("Metric"),
            "reported_ratio": Column("Printed", "≈{:.1f}×", "reported"),
            "recomputed_ratio": Column("Recomputed", "{:.3f}×", "derived"),
            "recomputed_rounded": Column("Recomputed, rounded", "{:.1f}×", "derived"),
            "input_range": Column("Range the printed inputs allow", status="derived"),
            "verdict": Column("Rounding check"),
        },
        caption="Each ratio recomputed from the two printed figures (latency: baseline ÷ Jalapeño, "
        "so above 1 favours Jalapeño), rounded as printed, and checked.",
        table_id=table_id,
    )


def derived(frame: pd.DataFrame) -> Styler:
    """Energy per token and what the tokens/s/user figures imply, per model and system."""
    return styled(
        catalog.label(frame),
        {
            "model_label": Column("Model"),
            "system_label": Column("System"),
            "joules_per_token": Column("J per token", "{:.4f}", "derived"),
            "joules_per_output_token": Column("J per output token", "{:.3f}", "derived"),
            "tpot_ms": Column("Time per output token, ms", "{:.3f}", "derived"),
            "decode_s": Column("Time to generate the output, s", "{:.3f}", "derived"),
        },
        caption="Derived per model and system: energy per token on the published (unstated) power "
        "basis, counted over all tokens and over output tokens (reading \"mixed\" as input plus output "
        "tokens, the book's interpretation); time per output token (1000 ÷ tokens/s per user); time to "
        "generate a mean-length output at that rate.",
        table_id="derived",
    )


def claims(reconciled: pd.DataFrame, table_id: str = "claims") -> Styler:
    """Every range claim beside what the table supports."""
    table = reconciled.copy()
    table["source"] = table["source_id"].map(data.load("sources").set_index("source_id")["title"])
    table["claimed"] = [_claimed(lo, hi, unit) for lo, hi, unit in zip(table["low"], table["high"], table["unit"])]
    table["from_table"] = [
        "" if pd.isna(lo) else f"{lo:.2f}" if lo == hi else f"{lo:.2f}–{hi:.2f}"
        for lo, hi in zip(table["table_low"], table["table_high"])
    ]
    return styled(
        table,
        {
            "topic": Column("Claim"),
            "claimed": Column("Figure", status="reported"),
            "condition": Column("Condition given"),
            "from_table": Column("From the table", status="derived"),
            "status": Column("Status"),
            "finding": Column("Finding"),
            "note": Column("Note"),
            "source": Column("Source"),
        },
        caption="Every range, headline figure and checkable statement in the three articles, beside "
        "the range the published table gives for the same metric. Status: checked against the table, "
        "not checkable with published data, or contradicted by a cited source.",
        table_id=table_id,
    )


def _claimed(low: float, high: float, unit: str) -> str:
    """A claim's figure as the article gives it: a multiple, months, or an ordinal generation."""
    if pd.isna(low):
        return ""
    span = f"{low:g}" if low == high else f"{low:g}–{high:g}"
    if unit == "generation":
        return f"generation {span}"
    return span + (" months" if unit == "months" else "×")


def dictionary(resource: str) -> Styler:
    """One file's columns, types, units and rules, from datapackage.json."""
    frame = data.dictionary()
    frame = frame[frame["resource"] == resource]
    return styled(
        frame,
        {"column": Column("Column"), "type": Column("Type"), "unit": Column("Unit"),
         "description": Column("Meaning"), "rules": Column("Rules")},
        caption=f"{frame['file'].iloc[0]}: {frame['title'].iloc[0]}",
        table_id=f"dictionary-{resource}",
    )


def sources() -> Styler:
    """Every source the data cites, with its evidence label."""
    return styled(
        data.load("sources"),
        {"source_id": Column("Id"), "title": Column("Title"), "kind": Column("Kind"),
         "status": Column("Evidence"), "note": Column("Note")},
        caption="Sources, with the evidence label of what the book takes from each.",
        table_id="sources",
    )


def model_sizes() -> Styler:
    """What each model reads per token: weights, KV cache, and the split the model derives."""
    rows = []
    for name in data.load("model_specs")["model"]:
        spec = roofline.model_spec(name)
        rows.append({
            "model": name,
            "total_gb": roofline.total_weight_bytes(spec) / roofline.GIGA,
            "active_gb": float(roofline.weight_bytes(spec, 1)) / roofline.GIGA,
            "kv_kb": float(roofline.kv_bytes(spec, 1)) / 1e3,
            "kv_8k_gb": float(roofline.kv_bytes(spec, 8192)) / roofline.GIGA,
            "flops_g": 2 * spec.active_params / roofline.GIGA,
        })
    return styled(
        catalog.label(pd.DataFrame(rows)),
        {
            "model_label": Column("Model"),
            "total_gb": Column("All weights, GB", "{:,.1f}", "derived"),
            "active_gb": Column("Weights one token reads, GB", "{:,.2f}", "derived"),
            "kv_kb": Column("KV cache per token, kB", "{:,.1f}", "derived"),
            "kv_8k_gb": Column("KV cache of an 8k context, GB", "{:,.2f}", "derived"),
            "flops_g": Column("Matmul GFLOP per token", "{:,.1f}", "derived"),
        },
        caption="Derived from each model's architecture (data/model_specs.csv) at the weight format it was "
        "released in, with a BF16 KV cache.",
        table_id="model-sizes",
    )


def validation(frame: pd.DataFrame) -> Styler:
    """The model's time per output token beside public measurements."""
    table = catalog.label(frame)
    table["source"] = table["source_id"].map(data.load("sources").set_index("source_id")["title"])
    table["setup"] = [f"{c} × {a.upper()}, {p.upper()}, batch {b}" for c, a, p, b in
                      zip(table["chips"], table["accelerator"], table["precision"], table["batch"])]
    return styled(
        table,
        {
            "model_label": Column("Model"),
            "setup": Column("Setup"),
            "engine": Column("Engine"),
            "measured_tpot_ms": Column("Measured ms per token", "{:.2f}"),
            "evidence": Column("Evidence for the measurement and its setup"),
            "modelled_tpot_ms": Column("Model ms per token", "{:.2f}", "derived"),
            "error_pct": Column("Error", "{:+.0f} %", "derived"),
            "source": Column("Source"),
        },
        caption="Time per output token: public measurements against the model at its default assumptions. "
        "Each measurement's evidence column says which parts of its setup the source states.",
        table_id="validation",
    )


def calibration(summary: pd.DataFrame, by: str, heading: str, table_id: str) -> Styler:
    """The serving model's errors on measured InferenceX points, one row per target and ``by`` group."""
    return styled(
        summary,
        {
            "target": Column("Compared"),
            by: Column(heading),
            "points": Column("Points", "{:,.0f}"),
            "median_abs_error_pct": Column("Median error", "{:.0f} %", "derived"),
            "worst_abs_error_pct": Column("Worst error", "{:,.0f} %", "derived"),
        },
        caption="Absolute error of the calibrated serving model against measured InferenceX DeepSeek-R1 points "
        "(|modelled ÷ measured − 1|), held-out chips only unless the table says otherwise.",
        table_id=table_id,
    )


def energy_split(frame: pd.DataFrame) -> Styler:
    """A request's energy in two parts per workload (see :func:`perwatt.instruments.energy_split`)."""
    return styled(
        frame,
        {
            "workload": Column("Workload"),
            "chips": Column("Chips per instance", "{:.0f}", "derived"),
            "batch": Column("Sequences per instance", "{:,.0f}", "derived"),
            "j_per_input_token": Column("J per input token", "{:.3f}", "derived"),
            "j_per_output_token": Column("J per output token", "{:.3f}", "derived"),
            "j_per_token": Column("J per token of either kind", "{:.3f}", "derived"),
            "prefill_share_pct": Column("Prefill's share of a request's energy", "{:.0f} %", "derived"),
            "prefill_w_modelled": Column("Prefill W per chip, modelled", "{:,.0f}", "derived"),
            "decode_w_modelled": Column("Decode W per chip, modelled", "{:,.0f}", "derived"),
        },
        caption="Energy at rated power per input (prefilled) and per output (decoded) token, DeepSeek R1 on GB300s, "
        "at the serving model's highest-throughput layout for each workload, and the watts each phase draws under "
        "the power model fitted to measured MI355X runs (an assumption on any other chip).",
        table_id="energy-split",
    )
