"""The serving model against measured InferenceX points: predictions, the fit, the errors.

Each row of ``data/inferencex_dsr1.csv`` is one measured DeepSeek-R1 run: a chip, a precision, a
parallel layout, a concurrency and a workload. :func:`predict` runs the serving model on exactly
that configuration (:func:`perwatt.serving.serve` for a single pool,
:func:`perwatt.serving.serve_disaggregated` for separate pools) and returns what it predicts for
the two numbers InferenceX plots: total tokens/s per GPU and median tokens/s per user.

:func:`fit` chooses the model's few free parameters (bandwidth and compute efficiency, the fixed
cost per layer and per collective, and the tokens an MTP pass yields) to minimise the squared log
errors on a training set of rows; :func:`errors` reports the errors on any rows, and
:func:`error_summary` summarises them by chip and by concurrency.

Two facts the snapshot does not give are assumptions, labelled here: an MTP run drafts
:data:`MTP_DRAFTS` tokens per pass, and lengths are the workload's mean drawn lengths. Rows whose
layout the snapshot leaves unclear (disaggregated, but with no workers listed) are not predicted;
:func:`usable` says which and why.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from scipy.optimize import least_squares, minimize_scalar

from perwatt import catalog, checks, data, serving
from perwatt.specs import DEFAULTS, Assumptions, chip, model_spec

#: Drafted tokens per MTP pass assumed for every MTP run (the snapshot does not record it; three
#: is TensorRT-LLM's published minimum-latency setting for DeepSeek R1).
MTP_DRAFTS = 3
#: Tokens an MTP pass yields in the fitted model (see :func:`fit`); TensorRT-LLM measured 2.82 at
#: three drafts on its own prompts.
MTP_TOKENS_PER_PASS = 2.15
#: The parameters :func:`fit` chooses, with their bounds.
FREE = {
    "bandwidth_efficiency": (0.2, 1.0),
    "compute_efficiency": (0.1, 1.0),
    "layer_latency_us": (0.0, 200.0),
    "collective_latency_us": (0.0, 500.0),
    "mtp_tokens_per_pass": (1.0, MTP_DRAFTS + 1.0),
}
TARGETS = {"total_tokens_per_s_per_gpu": "throughput per GPU", "median_interactivity": "tokens/s per user"}
#: The book's target for the median absolute error on held-out points, per cent.
TARGET_PCT = 25
#: Chips whose rows train the fit by default; every other chip's rows are held out.
TRAINING_CHIPS = ("b200", "h200")


#: Columns of data/inferencex_dsr1.csv the model reads.
NEEDED = ("point_id", "workload", "hardware", "framework", "precision", "spec_method", "disagg", "concurrency",
          "prefill_gpus", "decode_gpus", "prefill_ep", "prefill_dp_attention", "prefill_workers", "decode_tp",
          "decode_ep", "decode_dp_attention", "decode_workers", *TARGETS)


def _table(table) -> pd.DataFrame:
    checks.instance("table", table, pd.DataFrame)
    missing = [c for c in NEEDED if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the columns {missing} of data/inferencex_dsr1.csv")
    return table


def usable(table: pd.DataFrame) -> pd.Series:
    """The reason the model cannot be run on each row ("" where it can)."""
    table = _table(table)
    reason = pd.Series("", index=table.index)
    unclear = table["disagg"] & ((table["prefill_workers"] < 1) | (table["decode_workers"] < 1))
    reason[unclear] = "disaggregated, but the snapshot lists no workers, so the pools' sizes are unclear"
    return reason


def _precision(value: str) -> str:
    return {"fp4": "fp4", "fp8": "as_released"}[value]


def _pools(table: pd.DataFrame) -> list[tuple]:
    """What :func:`predict` runs for ``table``, read from the frame once: per chip and precision
    among the usable rows, the model and the chip, and for its single-pool rows and its
    disaggregated rows, their positions and arguments (lengths included: each row's workload's).

    A fit predicts the same rows hundreds of times: reading them out of the frame cost far more
    than the arithmetic, and so did one call of the serving model per workload. The serving model
    works element by element, so rows of several workloads in one call get the numbers they get
    alone; a pass without drafts adds a draft step of zero, which leaves its time as it was."""
    ok = np.flatnonzero((usable(table) == "").to_numpy())
    rows = table.iloc[ok]
    disagg, mtp = rows["disagg"].to_numpy(bool), (rows["spec_method"] == "mtp").to_numpy()
    drawn = {w: catalog.lengths(w) for w in dict.fromkeys(rows["workload"])}
    isl = np.array([drawn[w].isl_mean for w in rows["workload"]], dtype=float)
    osl = np.array([drawn[w].osl_mean for w in rows["workload"]], dtype=float)
    single = (rows["concurrency"].to_numpy(float), isl, osl, rows["decode_tp"].to_numpy(float),
              rows["decode_ep"].to_numpy(float), rows["decode_dp_attention"].to_numpy(bool))
    split_rows = rows[disagg]
    p_chips = (split_rows["prefill_gpus"] / split_rows["prefill_workers"]).to_numpy(float)
    d_chips = (split_rows["decode_gpus"] / split_rows["decode_workers"]).to_numpy(float)
    split = (split_rows["concurrency"].to_numpy(float), isl[disagg], osl[disagg], p_chips, d_chips,
             split_rows["prefill_workers"].to_numpy(float), split_rows["decode_workers"].to_numpy(float),
             np.gcd(split_rows["prefill_ep"].to_numpy(int), p_chips.astype(int)),
             np.gcd(split_rows["decode_ep"].to_numpy(int), d_chips.astype(int)),
             split_rows["prefill_dp_attention"].to_numpy(bool), split_rows["decode_dp_attention"].to_numpy(bool))
    # Where each usable row sits among the disaggregated ones (for a group's share of ``split``).
    among_split = np.cumsum(disagg) - 1
    pools = []
    for (hardware, precision), where in rows.groupby(["hardware", "precision"]).indices.items():
        alone, apart = where[~disagg[where]], where[disagg[where]]
        pools.append((model_spec("deepseek-r1").with_precision(_precision(precision)), chip(hardware),
                      mtp[alone], ok[alone], tuple(a[alone] for a in single),
                      mtp[apart], ok[apart], tuple(a[among_split[apart]] for a in split)))
    return pools


def _modelled(pools: list[tuple], n: int, assumptions: Assumptions, mtp_tokens_per_pass: float) -> np.ndarray:
    """:func:`predict`'s values as an (n, 2) array, in :data:`TARGETS`' order, from :func:`_pools`."""
    out = np.full((n, len(TARGETS)), np.nan)
    for spec, device, single_mtp, single_at, single, split_mtp, split_at, split in pools:
        if len(single_at):
            concurrency, isl, osl, *layout = single
            r = serving.serve(spec, device, concurrency, isl, osl, assumptions, *layout,
                              np.where(single_mtp, MTP_DRAFTS, 0), np.where(single_mtp, mtp_tokens_per_pass, 1.0))
            out[single_at, 0] = r["total_tokens_per_s_per_chip"]
            out[single_at, 1] = r["tokens_per_s_per_user"]
        if len(split_at):
            r = serving.serve_disaggregated(spec, device, *split, np.where(split_mtp, MTP_DRAFTS, 0),
                                            np.where(split_mtp, mtp_tokens_per_pass, 1.0), assumptions)
            out[split_at, 0] = r["total_tokens_per_s_per_chip"]
            out[split_at, 1] = r["tokens_per_s_per_user"]
    return out


def predict(table: pd.DataFrame, assumptions: Assumptions = DEFAULTS,
            mtp_tokens_per_pass: float = MTP_TOKENS_PER_PASS) -> pd.DataFrame:
    """The model's total tokens/s per GPU and tokens/s per user for each usable row, in a frame
    indexed like ``table`` (rows that cannot be predicted are NaN in both; see :func:`usable`)."""
    table = _table(table)
    checks.instance("assumptions", assumptions, Assumptions)
    checks.scalar("mtp_tokens_per_pass", mtp_tokens_per_pass, minimum=1.0, maximum=MTP_DRAFTS + 1.0)
    values = _modelled(_pools(table), len(table), assumptions, mtp_tokens_per_pass)
    return pd.DataFrame(values, index=table.index, columns=list(TARGETS))


def _apply(values, base: Assumptions) -> tuple[Assumptions, float]:
    named = dict(zip(FREE, np.asarray(values, dtype=float)))
    accepted = named.pop("mtp_tokens_per_pass")
    return replace(base, **named), accepted


def fit(table: pd.DataFrame, base: Assumptions = DEFAULTS) -> tuple[Assumptions, float]:
    """The assumptions and MTP tokens per pass that minimise the squared log errors of both
    targets over the usable rows of ``table``; everything not in :data:`FREE` stays as in ``base``."""
    checks.instance("base", base, Assumptions)
    rows = table[usable(table) == ""]
    if len(rows) < len(FREE):
        raise ValueError(f"table: at least {len(FREE)} usable rows are needed to fit, got {len(rows)}")
    measured = np.log(rows[list(TARGETS)].to_numpy(float))
    pools = _pools(rows)

    def residuals(values):
        assumptions, accepted = _apply(values, base)
        return (np.log(_modelled(pools, len(rows), assumptions, accepted)) - measured).ravel()

    start = [getattr(base, k) if k != "mtp_tokens_per_pass" else MTP_TOKENS_PER_PASS for k in FREE]
    lower, upper = zip(*FREE.values())
    start = np.clip(start, lower, upper)
    solution = least_squares(residuals, start, bounds=(lower, upper), x_scale="jac")
    return _apply(solution.x, base)


def errors(table: pd.DataFrame, assumptions: Assumptions = DEFAULTS,
           mtp_tokens_per_pass: float = MTP_TOKENS_PER_PASS) -> pd.DataFrame:
    """One row per usable measured point and target: the measured and modelled values and the
    error in per cent (modelled ÷ measured − 1), with the row's chip, layout and concurrency."""
    rows = table[usable(table) == ""]
    modelled = predict(rows, assumptions, mtp_tokens_per_pass)
    keep = ["point_id", "workload", "hardware", "framework", "precision", "spec_method", "disagg", "concurrency"]
    parts = []
    for target, label in TARGETS.items():
        part = rows[keep].assign(target=label, measured=rows[target], modelled=modelled[target])
        parts.append(part)
    out = pd.concat(parts, ignore_index=True)
    out["error_pct"] = (out["modelled"] / out["measured"] - 1) * 100
    out["held_out"] = ~out["hardware"].isin(TRAINING_CHIPS)
    out["chip"] = out["hardware"].map({h: catalog.accelerator_label(h) for h in dict.fromkeys(out["hardware"])})
    return out


@data.stored
def measured_errors() -> pd.DataFrame:
    """:func:`errors` on every measured point at the calibrated defaults (computed once per data folder)."""
    return errors(catalog.measured())


CONCURRENCY_BANDS = (0, 8, 64, 512, np.inf)


def error_summary(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Median and worst absolute error (%) and the count of points, per target and per ``by``
    (a column of :func:`errors`, or ``"concurrency band"``; ``"target"`` for one row per target)."""
    checks.instance("frame", frame, pd.DataFrame)
    for column in ("target", "error_pct", "concurrency"):
        if column not in frame.columns:
            raise ValueError(f"frame must be a frame of calibration.errors, which has a {column!r} column")
    checks.instance("by", by, str)
    frame = frame.copy()
    if by == "concurrency band":
        frame[by] = pd.cut(frame["concurrency"], CONCURRENCY_BANDS, right=True,
                           labels=["1–8", "9–64", "65–512", "over 512"])
    elif by not in frame.columns:
        raise ValueError(f"by must be a column of the errors frame or 'concurrency band', got {by!r}")
    frame["abs_error_pct"] = frame["error_pct"].abs()
    grouped = frame.groupby(["target"] if by == "target" else ["target", by], sort=False, observed=True)
    out = grouped["abs_error_pct"].agg(points="size", median_abs_error_pct="median", worst_abs_error_pct="max")
    out = out.reset_index()
    if by == "concurrency band":  # bands in their own order, the labels as text
        out = out.sort_values(["target", by], key=lambda c: c if c.name == by else c.map(list(TARGETS.values()).index))
        out[by] = out[by].astype(str)
    return out.reset_index(drop=True)


def split(table: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The training rows (chips in :data:`TRAINING_CHIPS`) and the held-out rows (every other chip)."""
    table = catalog.measured() if table is None else table
    checks.instance("table", table, pd.DataFrame)
    training = table["hardware"].isin(TRAINING_CHIPS)
    return table[training], table[~training]


def published_throughput(assumptions: Assumptions = DEFAULTS) -> pd.DataFrame:
    """The serving model against published decode-pool throughput (data/published_throughput.csv):
    each row's decode pass at its layout, batch and context (input plus half the output, where given),
    output tokens/s per GPU modelled beside measured."""
    checks.instance("assumptions", assumptions, Assumptions)
    table = data.load("published_throughput")
    modelled = []
    for _, row in table.iterrows():
        spec = model_spec(row["model"]).with_precision("fp4" if row["precision"] == "fp4" else "as_released")
        context = row["isl_tokens"] + (row["osl_tokens"] / 2 if pd.notna(row["osl_tokens"]) else 0.0)
        batch = row["batch_per_chip"] * row["chips"]
        seconds = serving.decode_time(spec, chip(row["accelerator"]), batch, context, row["chips"],
                                      replace(assumptions, kv_bits=float(row["kv_bits"])), 1, row["ep"],
                                      bool(row["dp_attention"]))
        modelled.append(float(batch / seconds / row["chips"]))
    out = table.assign(modelled=modelled)
    out["error_pct"] = (out["modelled"] / out["value"] - 1) * 100
    return out


#: The settings :func:`refit_by_chip` may refit to one chip's points, with their bounds.
REFITTABLE = {"bandwidth_efficiency": FREE["bandwidth_efficiency"], "layer_latency_us": FREE["layer_latency_us"]}


@checks.validated(parameter=checks.rule(checks.choice, tuple(REFITTABLE)))
def refit_by_chip(parameter: str) -> pd.DataFrame:
    """Per measured chip: the value of one setting (``bandwidth_efficiency`` or ``layer_latency_us``)
    that best fits that chip's own usable points, every other setting as fitted (the same squared log
    errors as :func:`fit`), with the count of points. The spread says how far one value for all chips
    is from each chip's software."""
    return _refit_by_chip(parameter).copy()


@data.stored
def _refit_by_chip(parameter: str) -> pd.DataFrame:
    table = catalog.measured()
    table = table[usable(table) == ""]
    rows = []
    for hardware, points in table.groupby("hardware", sort=True):
        measured = np.log(points[list(TARGETS)].to_numpy(float))
        pools = _pools(points)

        def loss(value: float) -> float:
            modelled = _modelled(pools, len(points), replace(DEFAULTS, **{parameter: float(value)}),
                                 MTP_TOKENS_PER_PASS)
            return float(((np.log(modelled) - measured) ** 2).sum())

        best = minimize_scalar(loss, bounds=REFITTABLE[parameter], method="bounded",
                               options={"xatol": 1e-4 * REFITTABLE[parameter][1]})
        rows.append((hardware, len(points), float(best.x), hardware in TRAINING_CHIPS))
    return pd.DataFrame(rows, columns=["accelerator", "points", parameter, "training_chip"])


def bandwidth_efficiency_by_chip() -> pd.DataFrame:
    """:func:`refit_by_chip` for the bandwidth efficiency."""
    return refit_by_chip("bandwidth_efficiency")
