"""The benchmark table: as published, recomputed, derived and audited.

Every function takes the table in its long form (the columns of ``data/benchmark_results.csv``:
model, system, metric, value, decimals, ...) so that the same code serves the articles' table
and a reader's own file (:func:`analyze`). ``candidate`` names the system being compared
(Jalapeño in the book); every other system in a model's rows is that model's baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from perwatt import catalog, data, metrics


@dataclass(frozen=True)
class Metric:
    """How a benchmark metric reads: its label, unit, and which direction is better."""

    label: str
    unit: str
    higher_is_better: bool


METRICS = {
    "tps_per_kw": Metric("Throughput per power", "tokens/s/kW", True),
    "e2e_latency_s": Metric("End-to-end latency", "s", False),
    "interactivity": Metric("Tokens/s per user", "tokens/s/user", True),
}


def book_results() -> pd.DataFrame:
    """The articles' table in long form, validated."""
    return data.load("benchmark_results")


def advantage(candidate: pd.Series | float, baseline: pd.Series | float, metric: str):
    """The candidate's advantage as a multiple: candidate ÷ baseline, or baseline ÷ candidate
    where lower is better (latency), so that a value above 1 always favours the candidate."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
    if METRICS[metric].higher_is_better:
        return metrics.ratio(candidate, baseline)
    return metrics.ratio(baseline, candidate)


def paired(results: pd.DataFrame, candidate: str = catalog.CANDIDATE) -> pd.DataFrame:
    """One row per model and metric: the candidate's value beside its baseline's.

    Raises ValueError naming the model when a model lacks the candidate, has no baseline,
    or has more than one baseline.
    """
    rows = []
    for model, group in results.groupby("model", sort=False):
        systems = list(dict.fromkeys(group["system"]))
        baselines = [s for s in systems if s != candidate]
        if candidate not in systems:
            raise ValueError(f"model {model!r}: no rows for the candidate system {candidate!r}")
        if len(baselines) != 1:
            raise ValueError(f"model {model!r}: expected exactly one baseline system, found {baselines}")
        baseline = baselines[0]
        for metric, rows_for_metric in group.groupby("metric", sort=False):
            by_system = rows_for_metric.set_index("system")
            if candidate not in by_system.index or baseline not in by_system.index:
                raise ValueError(f"model {model!r}, metric {metric!r}: needs a row for {candidate!r} and {baseline!r}")
            rows.append({
                "model": model, "metric": metric, "baseline": baseline,
                "candidate_value": float(by_system.loc[candidate, "value"]),
                "baseline_value": float(by_system.loc[baseline, "value"]),
                "candidate_decimals": int(by_system.loc[candidate, "decimals"]),
                "baseline_decimals": int(by_system.loc[baseline, "decimals"]),
            })
    return pd.DataFrame(rows)


def _round_half_up(value: float, decimals: int) -> float:
    """Round as people print numbers (0.25 → 0.3), not to even."""
    scale = 10.0 ** decimals
    return math.floor(value * scale + 0.5 + 1e-9) / scale


def ratio_checks(results: pd.DataFrame, reported: pd.DataFrame, candidate: str = catalog.CANDIDATE) -> pd.DataFrame:
    """Recompute every ratio from the raw figures and check it against the printed "≈" ratio.

    ``verdict`` is ``"matches"`` when the recomputed ratio rounds to the printed one;
    ``"within input rounding"`` when it does not, but some inputs within the printed
    precision of the two figures (for example 117.5 for a printed 118) give a ratio that
    does; otherwise ``"inconsistent"``. ``input_low``/``input_high`` bound the ratio the
    printed inputs allow.
    """
    table = paired(results, candidate).merge(
        reported[["model", "metric", "reported_ratio", "decimals"]], on=["model", "metric"], how="left"
    )
    if table["reported_ratio"].isna().any():
        missing = table.loc[table["reported_ratio"].isna(), ["model", "metric"]].to_records(index=False)
        raise ValueError(f"no reported ratio for {list(map(tuple, missing))}")
    out = table.copy()
    out["recomputed_ratio"] = [
        advantage(c, b, m) for c, b, m in zip(table["candidate_value"], table["baseline_value"], table["metric"])
    ]
    lows, highs, rounded, verdicts = [], [], [], []
    for row in out.itertuples():
        half_c = 0.5 * 10.0 ** -row.candidate_decimals
        half_b = 0.5 * 10.0 ** -row.baseline_decimals
        corners = [advantage(row.candidate_value + dc, row.baseline_value + db, row.metric)
                   for dc in (-half_c, half_c) for db in (-half_b, half_b)]
        low, high = min(corners), max(corners)
        shown = _round_half_up(row.recomputed_ratio, int(row.decimals))
        half_r = 0.5 * 10.0 ** -int(row.decimals)
        if math.isclose(shown, row.reported_ratio, abs_tol=1e-9):
            verdict = "matches"
        elif low <= row.reported_ratio + half_r and high >= row.reported_ratio - half_r:
            verdict = "within input rounding"
        else:
            verdict = "inconsistent"
        lows.append(low)
        highs.append(high)
        rounded.append(shown)
        verdicts.append(verdict)
    out["recomputed_rounded"] = rounded
    out["input_low"] = lows
    out["input_high"] = highs
    out["verdict"] = verdicts
    return out


def per_user(results: pd.DataFrame, osl_tokens: float) -> pd.DataFrame:
    """What each tokens/s/user figure implies: time per output token and decode time.

    Interactivity is 1000 ÷ TPOT in ms (InferenceX's definition), so TPOT = 1000 ÷ rate ms
    and generating ``osl_tokens`` takes ``osl_tokens`` ÷ rate seconds.
    """
    wide = catalog.wide(results)
    rate = wide["interactivity"]
    metrics._positive("interactivity", rate)
    metrics._positive("osl_tokens", osl_tokens)
    wide["tpot_ms"] = 1000.0 / rate
    wide["decode_s"] = osl_tokens / rate
    return wide


def consistency(latency_s, tokens_per_s_per_user, osl_tokens) -> dict[str, np.ndarray]:
    """Could a request of ``osl_tokens`` output tokens have this latency at this per-user rate?

    InferenceX defines a request's time per output token as (latency − TTFT) ÷ (output tokens − 1),
    so latency = TTFT + (output tokens − 1) × TPOT exactly. The first token needs a forward pass
    over the whole prompt, which takes at least as long as one decode step: TTFT ≥ TPOT, so
    latency ≥ output tokens × TPOT = output tokens ÷ rate. Arrays broadcast. Returns
    ``decode_s`` (the time after the first token), ``implied_ttft_s``, ``max_consistent_osl``
    (the longest whole number of output tokens the latency allows) and ``consistent``.
    """
    metrics._positive("latency_s", latency_s)
    metrics._positive("tokens_per_s_per_user", tokens_per_s_per_user)
    metrics._positive("osl_tokens", osl_tokens)
    latency = np.asarray(latency_s, dtype=float)
    rate = np.asarray(tokens_per_s_per_user, dtype=float)
    decode = (np.asarray(osl_tokens, dtype=float) - 1) / rate
    # Output tokens the latency has room for at one step each; the slack absorbs float error.
    budget = latency * rate * (1 + 1e-12)
    return {
        "decode_s": decode,
        "implied_ttft_s": latency - decode,
        "max_consistent_osl": np.floor(budget),
        "consistent": np.asarray(osl_tokens, dtype=float) <= budget,
    }


def latency_audit(results: pd.DataFrame, osl_tokens: float) -> pd.DataFrame:
    """:func:`consistency` for every row of a benchmark table, with a verdict per row.

    ``decode_s`` is the time after the first token, (``osl_tokens`` − 1) ÷ rate, and
    ``implied_ttft_s`` what the latency leaves for the first token.
    """
    wide = per_user(results, osl_tokens)
    wide["osl_tokens"] = float(osl_tokens)
    for column, values in consistency(wide["e2e_latency_s"], wide["interactivity"], osl_tokens).items():
        wide[column] = values
    wide["verdict"] = np.where(wide["consistent"], "possible", "impossible: TTFT shorter than one step")
    return wide


def users_per_chip(results: pd.DataFrame, power_w: pd.Series, isl_tokens: float, osl_tokens: float,
                   counted: str = "all") -> pd.DataFrame:
    """Concurrent users per chip if throughput and tokens/s/user came from one operating point.

    Output tokens/s per chip (the tokens/s/kW × the watts it was divided by, times the output
    share of the tokens it counts) ÷ tokens/s per user. ``counted="all"`` reads the per-kW figure
    as input plus output tokens (the book's reading of "mixed"), so the output share is
    ``osl ÷ (isl + osl)`` at mean lengths ``isl_tokens`` and ``osl_tokens``; ``counted="output"``
    reads it as output tokens only. ``power_w`` maps system → watts; rows whose system has no
    known power are dropped, not estimated.
    """
    if counted not in ("all", "output"):
        raise ValueError(f"counted must be 'all' or 'output', got {counted!r}")
    table = catalog.wide(results)
    table["power_w"] = table["system"].map(power_w)
    table = table[table["power_w"].notna()].reset_index(drop=True)
    share = metrics.output_token_fraction(isl_tokens, osl_tokens) if counted == "all" else 1.0
    table["chip_tokens_per_s"] = metrics.chip_throughput(table["tps_per_kw"], table["power_w"])
    table["chip_output_tokens_per_s"] = table["chip_tokens_per_s"] * share
    table["users_per_chip"] = table["chip_output_tokens_per_s"] / table["interactivity"]
    return table


def derived(results: pd.DataFrame, isl_tokens: float, osl_tokens: float) -> pd.DataFrame:
    """Energy per token (all and output tokens), TPOT and decode time, per model and system."""
    wide = per_user(results, osl_tokens)
    wide["joules_per_token"] = metrics.joules_per_token(wide["tps_per_kw"])
    wide["joules_per_output_token"] = metrics.per_output_token(wide["joules_per_token"], isl_tokens, osl_tokens)
    return wide


def range_of(checks: pd.DataFrame, metric: str) -> tuple[float, float]:
    """Lowest and highest recomputed advantage for one metric across models."""
    values = checks.loc[checks["metric"] == metric, "recomputed_ratio"]
    return float(values.min()), float(values.max())


def reconcile_claims(checks: pd.DataFrame, claims: pd.DataFrame) -> pd.DataFrame:
    """Set each range claim beside what the table supports.

    For claims about a metric in the table, ``table_low``/``table_high`` are the recomputed
    range; ``reproduced`` says whether rounding the table's range to the claim's precision
    gives the claim. Other claims (another operating point, another metric, no numbers)
    cannot be checked against the table: ``reproduced`` is empty and ``finding`` says why.
    """
    out = claims.copy()
    out["table_low"] = np.nan
    out["table_high"] = np.nan
    out["reproduced"] = pd.Series([None] * len(out), dtype="object")
    findings = []
    for i, claim in out.iterrows():
        metric = claim["metric"]
        if metric in METRICS and not math.isnan(claim["low"]):
            subset = checks[checks["metric"] == metric]
            if claim["low"] == claim["high"]:
                # A single figure names one model (Kimi K2.5 in the articles): compare with that row.
                match = subset[[_round_half_up(v, 1) == claim["low"] for v in subset["recomputed_ratio"]]]
                low = high = float(match["recomputed_ratio"].iloc[0]) if len(match) else np.nan
            else:
                low, high = float(subset["recomputed_ratio"].min()), float(subset["recomputed_ratio"].max())
            decimals = _decimals(claim["low"], claim["high"])
            ok = (not math.isnan(low)) and _round_half_up(low, decimals) == claim["low"] \
                and _round_half_up(high, decimals) == claim["high"]
            out.at[i, "table_low"], out.at[i, "table_high"], out.at[i, "reproduced"] = low, high, ok
            findings.append("the table's own figures, rounded" if ok else "does not follow from the table")
        elif metric == "workload":
            findings.append("names the workload behind the table; token counts are in workloads.csv")
        elif metric in ("roadmap", "capability", "caveat", "context"):
            findings.append("contradicted by a cited source (see its note)" if claim["status"] == "contradicted"
                            else "a statement, not a benchmark figure: no published data can test it")
        elif math.isnan(claim["low"]):
            findings.append("no number published")
        elif metric in ("performance_per_watt", "unspecified"):
            findings.append("not derivable from the table: another operating point or set of comparisons")
        else:
            findings.append("not a benchmark figure: nothing in the table to check it against")
    out["finding"] = findings
    return out


def _decimals(*values: float) -> int:
    """Decimal places a printed number carries (1.5 → 1, 4 → 0)."""
    places = 0
    for value in values:
        text = f"{value:.6f}".rstrip("0").rstrip(".")
        places = max(places, len(text.split(".")[1]) if "." in text else 0)
    return places


@dataclass(frozen=True)
class Report:
    """Everything the chapter shows for one benchmark table."""

    results: pd.DataFrame
    checks: pd.DataFrame | None
    derived: pd.DataFrame
    audit: pd.DataFrame


def analyze(path: str | Path, *, candidate: str, workload: str | None = None, isl_tokens: float | None = None,
            osl_tokens: float | None = None, reported: str | Path | None = None) -> Report:
    """Bring your own numbers: the chapter's tables and audit flags for a reader's CSV.

    ``path`` is a CSV with the columns of ``data/benchmark_results.csv`` (model, system,
    metric, value, decimals, source_id, note), validated against the same schema, except
    that models, systems and sources may be the reader's own. ``candidate`` names the system
    being compared; each model needs exactly one other system. Token lengths are the mean
    lengths ``workload`` draws (the articles' 8k/1k unless named; see :func:`perwatt.catalog.lengths`)
    unless ``isl_tokens`` or ``osl_tokens`` give them. ``reported`` optionally names a CSV of printed ratios with the
    columns of ``data/reported_ratios.csv``. A bad file raises :class:`perwatt.data.DataError`
    naming the file, row and column.
    """
    drawn = catalog.lengths(workload)
    isl_tokens = drawn.isl_mean if isl_tokens is None else isl_tokens
    osl_tokens = drawn.osl_mean if osl_tokens is None else osl_tokens
    results = data.validate_file(path, "benchmark_results", check_foreign_keys=False)
    needed = set(METRICS)
    for model, group in results.groupby("model", sort=False):
        missing = needed - set(group["metric"])
        if missing:
            raise data.DataError(f"{path}: model {model!r} has no row for metric(s) {sorted(missing)}")
    try:
        paired(results, candidate)
    except ValueError as err:
        raise data.DataError(f"{path}: {err}") from None
    checks = None
    if reported is not None:
        printed = data.validate_file(reported, "reported_ratios", check_foreign_keys=False)
        checks = ratio_checks(results, printed, candidate)
    return Report(
        results=results,
        checks=checks,
        derived=derived(results, isl_tokens, osl_tokens),
        audit=latency_audit(results, osl_tokens),
    )
