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

from perwatt import catalog, checks, data, metrics, plausible


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
    pairs = results[["model", "system"]].drop_duplicates()
    is_candidate = (pairs["system"] == candidate).to_numpy()
    counts = pairs.loc[~is_candidate, "model"].value_counts()
    with_candidate = set(pairs.loc[is_candidate, "model"])
    models = pd.unique(results["model"])
    wrong = ~pd.Series(models).isin(with_candidate).to_numpy() | (pd.Series(models).map(counts).fillna(0) != 1).to_numpy()
    if wrong.any():
        model = models[np.flatnonzero(wrong)[0]]
        found = list(pairs.loc[~is_candidate & (pairs["model"] == model).to_numpy(), "system"])
        if model not in with_candidate:
            raise ValueError(f"model {model!r}: no rows for the candidate system {candidate!r}")
        raise ValueError(f"model {model!r}: expected exactly one baseline system, found {found}")
    # Models in order of appearance, each model's metrics in the order they appear in its rows.
    keys = results[["model", "metric"]].drop_duplicates()
    rank = {m: i for i, m in enumerate(pd.unique(results["model"]))}
    keys = keys.iloc[np.argsort(keys["model"].map(rank).to_numpy(), kind="stable")]
    columns = ["model", "metric", "value", "decimals"]
    mine = results.loc[results["system"] == candidate, columns]
    theirs = results.loc[results["system"] != candidate, columns + ["system"]].rename(columns={"system": "baseline"})
    table = keys.merge(mine, on=["model", "metric"], how="left").merge(
        theirs, on=["model", "metric"], how="left", suffixes=("_c", "_b"))
    gaps = table["value_c"].isna() | table["value_b"].isna()
    if gaps.any():
        model, metric = table.loc[gaps, ["model", "metric"]].iloc[0]
        baseline = pairs.loc[~is_candidate & (pairs["model"] == model).to_numpy(), "system"].iloc[0]
        raise ValueError(f"model {model!r}, metric {metric!r}: needs a row for {candidate!r} and {baseline!r}")
    return pd.DataFrame({
        "model": table["model"].to_numpy(), "metric": table["metric"].to_numpy(),
        "baseline": table["baseline"].to_numpy(),
        "candidate_value": table["value_c"].to_numpy(float), "baseline_value": table["value_b"].to_numpy(float),
        "candidate_decimals": table["decimals_c"].to_numpy("int64"),
        "baseline_decimals": table["decimals_b"].to_numpy("int64"),
    })


def _round_half_up(value, decimals):
    """Round as people print numbers (0.25 → 0.3), not to even. Arrays broadcast."""
    scale = 10.0 ** np.asarray(decimals, dtype=float)
    return np.floor(np.asarray(value, dtype=float) * scale + 0.5 + 1e-9) / scale


def _advantages(candidate, baseline, metric: pd.Series) -> np.ndarray:
    """:func:`advantage` row by row, for rows of different metrics."""
    candidate, baseline = np.asarray(candidate, dtype=float), np.asarray(baseline, dtype=float)
    out = np.full(len(metric), np.nan)
    for name in pd.unique(metric):
        rows = (metric == name).to_numpy()
        out[rows] = advantage(candidate[rows], baseline[rows], name)
    return out


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
        shown = list(map(tuple, missing[:5])) + (["..."] if len(missing) > 5 else [])
        raise ValueError(f"no reported ratio for {len(missing)} model and metric pair(s): {shown}")
    out = table.copy()
    out["decimals"] = out["decimals"].astype("int64")
    out["recomputed_ratio"] = _advantages(table["candidate_value"], table["baseline_value"], table["metric"])
    half_c = 0.5 * 10.0 ** -out["candidate_decimals"].to_numpy(float)
    half_b = 0.5 * 10.0 ** -out["baseline_decimals"].to_numpy(float)
    c, b = out["candidate_value"].to_numpy(), out["baseline_value"].to_numpy()
    tiny = np.finfo(float).tiny  # a printed 0 may stand for anything down to (not including) zero
    corners = np.stack([_advantages(np.maximum(c + dc, tiny), np.maximum(b + db, tiny), out["metric"])
                        for dc in (-half_c, half_c) for db in (-half_b, half_b)])
    low, high = corners.min(axis=0), corners.max(axis=0)
    printed = out["reported_ratio"].to_numpy()
    shown = _round_half_up(out["recomputed_ratio"], out["decimals"])
    half_r = 0.5 * 10.0 ** -out["decimals"].to_numpy(float)
    out["recomputed_rounded"] = shown
    out["input_low"] = low
    out["input_high"] = high
    out["verdict"] = np.where(np.isclose(shown, printed, rtol=0, atol=1e-9), "matches",
                              np.where((low <= printed + half_r) & (high >= printed - half_r),
                                       "within input rounding", "inconsistent"))
    return out


def per_user(results: pd.DataFrame, osl_tokens: float) -> pd.DataFrame:
    """What each tokens/s/user figure implies: time per output token and decode time.

    Interactivity is 1000 ÷ TPOT in ms (InferenceX's definition), so TPOT = 1000 ÷ rate ms
    and generating ``osl_tokens`` takes ``osl_tokens`` ÷ rate seconds.
    """
    wide = catalog.wide(results)
    return wide.assign(**_per_user(wide, osl_tokens))


def _per_user(wide, osl_tokens: float) -> dict:
    rate = wide["interactivity"]
    checks.positive("interactivity", rate)
    checks.positive("osl_tokens", osl_tokens)
    return {"tpot_ms": 1000.0 / rate, "decode_s": osl_tokens / rate}


def consistency(latency_s, tokens_per_s_per_user, osl_tokens) -> dict[str, np.ndarray]:
    """Could a request of ``osl_tokens`` output tokens have this latency at this per-user rate?

    InferenceX defines a request's time per output token as (latency − TTFT) ÷ (output tokens − 1),
    so latency = TTFT + (output tokens − 1) × TPOT exactly. The first token needs a forward pass
    over the whole prompt, which takes at least as long as one decode step: TTFT ≥ TPOT, so
    latency ≥ output tokens × TPOT = output tokens ÷ rate. Arrays broadcast. Returns
    ``decode_s`` (the time after the first token), ``implied_ttft_s``, ``max_consistent_osl``
    (the longest whole number of output tokens the latency allows) and ``consistent``.
    """
    checks.positive("latency_s", latency_s)
    checks.positive("tokens_per_s_per_user", tokens_per_s_per_user)
    checks.positive("osl_tokens", osl_tokens)
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
    wide = catalog.wide(results)
    return wide.assign(**_audit_columns(wide, osl_tokens))


def _audit_columns(wide, osl_tokens: float) -> dict:  # latency_audit's columns, in order, from a wide table's
    out = {**_per_user(wide, osl_tokens), "osl_tokens": float(osl_tokens)}
    out.update(consistency(wide["e2e_latency_s"], wide["interactivity"], osl_tokens))  # decode_s: after the first token
    out["verdict"] = np.where(out["consistent"], "possible", "impossible: TTFT shorter than one step")
    return out


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


#: The ledger's metrics that measure performance: throughput per watt, latency, speed per user,
#: performance per watt, a kernel's speed-up, and a performance ratio whose metric the article
#: leaves unnamed. The others (months, workload, roadmap, capability, caveat, context) do not.
PERFORMANCE_METRICS = ("tps_per_kw", "e2e_latency_s", "interactivity", "performance_per_watt", "kernel_speedup",
                       "unspecified")


def is_performance_figure(claims: pd.DataFrame) -> pd.Series:
    """True for each ledger entry (a row of ``claims.csv``) that puts a number on performance: its
    ``metric`` is one of :data:`PERFORMANCE_METRICS` and its ``low`` is published."""
    return claims["metric"].isin(PERFORMANCE_METRICS) & claims["low"].notna()


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
            ok = bool((not math.isnan(low)) and _round_half_up(low, decimals) == claim["low"]
                      and _round_half_up(high, decimals) == claim["high"])
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
    texts = [f"{value:.6f}".rstrip("0").rstrip(".") for value in values]
    return max((len(text.split(".")[1]) if "." in text else 0 for text in texts), default=0)


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
    being compared; each model needs exactly one other system and a row for every metric.
    Token lengths are the mean lengths ``workload`` draws (the articles' 8k/1k unless named; see
    :func:`perwatt.catalog.lengths`) unless ``isl_tokens`` or ``osl_tokens`` give them.
    ``reported`` optionally names a CSV of printed ratios with the columns of
    ``data/reported_ratios.csv``, one for each model and metric. The file may be UTF-8 (with or
    without a byte-order mark) or UTF-16 with one, separated by commas, semicolons or tabs;
    numbers take a decimal point. A bad file, or a figure outside :data:`perwatt.plausible.BOUNDS`, raises
    :class:`perwatt.data.DataError` naming the file, line and column.
    """
    drawn = catalog.lengths(workload)
    isl_tokens = drawn.isl_mean if isl_tokens is None else isl_tokens
    osl_tokens = drawn.osl_mean if osl_tokens is None else osl_tokens
    results, text = data.read_file(path, "benchmark_results", check_foreign_keys=False)
    try:
        paired(results, candidate)
    except ValueError as err:
        raise data.DataError(f"{path}: {err}") from None
    audit = latency_audit(results, osl_tokens)
    plausible.check(results, text, audit)
    del text  # the file's cells as text are needed only for error messages; on a large file they are most of the memory
    checks = None
    if reported is not None:
        printed = data.validate_file(reported, "reported_ratios", check_foreign_keys=False)
        try:
            checks = ratio_checks(results, printed, candidate)
        except ValueError as err:
            raise data.DataError(f"{reported}: {err}") from None
    return Report(results=results, checks=checks, derived=derived(results, isl_tokens, osl_tokens), audit=audit)
