"""The inverse questions of the per-watt frontier: what chip would pass through a reported point, and
what a chip needs for a given per-watt gap at an interactivity target.

Both run :data:`perwatt.crosschip.FORMULA` (the per-kW frontier's arithmetic) on chips they solve for,
by bisection on a logarithmic scale: per-user speed and tokens per kW rise with bandwidth.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from perwatt import checks
from perwatt.crosschip import (ASSUMED, FORMULA, PRECISION, READER, _best_at_bandwidths,
                               _check_assumptions_match_terms, _fields, _terms_of, parameters, reader_link_bytes_s)
from perwatt.specs import DEFAULTS, GIGA, TERA, Assumptions, Chip, chip, known_chips, model_spec

#: Search bounds for a solved bandwidth, bytes/s (1 GB/s to 1 EB/s), and for a bandwidth multiple.
BANDWIDTH_SEARCH = (1e9, 1e18)
MULTIPLE_SEARCH = (1.0, 1000.0)
#: Peak FLOP/s taken when the reader gives none: so large that compute never limits (bandwidth alone).
UNLIMITED_FLOPS = 1e21


def _bisect_log(f, low: float, high: float, steps: int = 200, depth: int = 6) -> float:
    """The x in [low, high] where the increasing f crosses zero, by bisection on log x.

    ``f`` takes an array of x and returns f at each. Each round evaluates, in one call, every
    midpoint the next ``depth`` steps may visit (2^depth − 1 of them, each computed as that step
    computes it), then takes those steps: the same points and comparisons as a bisection that asks
    for one point at a time, so the same answer, in a few calls rather than one per step. A step
    depends only on the bracket, so once a step leaves the bracket as it was (its ends adjacent
    doubles, some 55 steps in), every later step would too: the search stops there."""
    a, b = np.log(low), np.log(high)
    taken = 0
    while taken < steps:
        levels = min(depth, steps - taken)
        # Breadth first, node 0 the bracket: node i's children are 2i + 1, its upper half (taken
        # where f < 0 at its midpoint), and 2i + 2, its lower half.
        brackets, mids = [(a, b)], []
        for node in range(2 ** levels - 1):
            below, above = brackets[node]
            mid = (below + above) / 2
            mids.append(mid)
            brackets += [(mid, above), (below, mid)]
        values = np.asarray(f(np.array([float(np.exp(mid)) for mid in mids])), dtype=float)
        node, moved = 0, True
        for _ in range(levels):
            child = 2 * node + 1 if values[node] < 0 else 2 * node + 2
            moved = brackets[child] != brackets[node]
            if not moved:
                break
            node = child
        a, b = brackets[node]
        if not moved:
            break
        taken += levels
    return float(np.exp((a + b) / 2))


ONE_RATE = checks.rule(checks.scalar, minimum=checks.MIN_RATE, maximum=checks.MAX_RATE)
# One instance is solved at a time, so its size is one whole number, not an array of them.
ONE_COUNT = checks.rule(checks.integer, maximum=checks.MAX_CHIPS)


@checks.validated(model=checks.TEXT, tokens_per_s_per_user=ONE_RATE, tps_per_kw=ONE_RATE, chips=ONE_COUNT,
                  batch=checks.rule(checks.integer, maximum=checks.MAX_BATCH),
                  ep=checks.rule(checks.optional, ONE_COUNT), dp_attention=checks.FLAG,
                  precision=PRECISION, assumptions=ASSUMED,
                  tflops=checks.rule(checks.optional, checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=1e9)))
def inverse(model: str, tokens_per_s_per_user: float, tps_per_kw: float, chips: int = 8, batch: int = 1,
            ep: int | None = None, dp_attention: bool = False, precision: str = "as_released",
            assumptions: Assumptions = DEFAULTS, tflops: float | None = None) -> dict:
    """The HBM bandwidth and power per chip with which one instance (``chips`` chips, ``ep`` expert
    groups, by default one per chip for a mixture of experts, at ``batch`` sequences) reaches a point:
    ``tokens_per_s_per_user`` and total ``tps_per_kw`` at rated power, by :data:`FORMULA` on a chip of
    the reader's kind (one peak for every operator: ``tflops``, or unlimited; links as
    :func:`perwatt.crosschip.reader_link_bytes_s`; memory not a limit, and the memory needed reported).

    Per-user speed rises with bandwidth towards a ceiling that bandwidth cannot pass (the fixed
    time per layer, compute, links). Where the point is beyond it, ``solvable`` is false and the
    bandwidth and power are None: no chip of that kind reaches it. Returns a dict: ``solvable``,
    ``bandwidth_tb_s``, ``power_w``, ``ceiling`` (tokens/s per user with unlimited bandwidth) and
    ``memory_gb`` (each chip's weights and caches)."""
    spec = model_spec(model).with_precision(precision)
    chips = int(chips)
    ep = (chips if spec.is_moe else 1) if ep is None else int(ep)
    if chips % ep:
        raise ValueError(f"ep must divide chips: {ep} expert groups cannot split {chips} chips")
    _check_assumptions_match_terms(assumptions)
    row = _terms_of(spec, np.array([chips]), np.array([ep]), np.array([bool(dp_attention)]), np.array([float(batch)]))
    peak = UNLIMITED_FLOPS if tflops is None else tflops * TERA
    given = parameters(assumptions)
    device = Chip(name=READER, label="solved", hbm_bytes=float("inf"), bandwidth_bytes_s=BANDWIDTH_SEARCH[1],
                  peak_flops={f: peak for f in ("fp4", "fp8", "bf16")}, power_w=1000.0,
                  scale_up_bytes_s=reader_link_bytes_s(), scale_up_domain=chips)
    fields = {**_fields(device, device.power_w, spec), **given}  # all but the bandwidth, for every point asked

    def point(bandwidth) -> dict:
        return FORMULA.evaluate(row, {**fields, "bandwidth": bandwidth})

    ceiling = float(point(BANDWIDTH_SEARCH[1])["x"][0])
    memory_gb = float(row["memory"][0]) / GIGA
    if ceiling <= tokens_per_s_per_user:
        return {"solvable": False, "bandwidth_tb_s": None, "power_w": None, "ceiling": ceiling, "memory_gb": memory_gb}
    bandwidth = _bisect_log(lambda b: point(b)["x"] - tokens_per_s_per_user, *BANDWIDTH_SEARCH)
    per_chip = float(point(bandwidth)["total_per_chip"][0])
    return {"solvable": True, "bandwidth_tb_s": bandwidth / TERA, "power_w": per_chip / tps_per_kw * 1000,
            "ceiling": ceiling, "memory_gb": memory_gb}


@checks.validated(model=checks.TEXT, baseline=checks.TEXT, target=ONE_RATE,
                  gaps=checks.rule(checks.array, minimum=1.0, maximum=1000.0), precision=PRECISION, assumptions=ASSUMED)
def gap_conditions(model: str, baseline: str, target: float, gaps=(2.1, 4.1), precision: str = "as_released",
                   assumptions: Assumptions = DEFAULTS) -> pd.DataFrame:
    """What a chip needs, beside ``baseline``, for ``gaps`` times its tokens/s per kW at ``target``
    tokens/s per user or faster, one change at a time: the least multiple of the baseline's HBM
    bandwidth, at the same power, that reaches at least the gap (NaN where even 1,000 times does
    not: bandwidth is then not the limit), or the share of its power at the same bandwidth (1 ÷ gap:
    tokens per kW scale with 1 ÷ power). The batches are whole numbers, so the gain comes in steps
    and the least multiple may give more than the gap (``gap_reached``). One row per gap, with the
    baseline's tokens/s per kW at the target and the most that bandwidth alone gives."""
    gaps = np.asarray(gaps, dtype=float)
    if gaps.ndim > 1 or gaps.size == 0 or gaps.size > 100:
        raise ValueError(f"gaps must be one to 100 ratios, got {gaps.tolist()!r}")
    if baseline not in known_chips():
        raise ValueError(f"baseline must be one of {known_chips()}, got {baseline!r}")
    device = chip(baseline)
    if not np.isfinite(device.power_w):
        raise ValueError(f"baseline: {device.label}'s power is not published")

    def best(multiples) -> np.ndarray:
        """The most tokens/s per kW at the target or faster with the bandwidth times each multiple
        (0 where the target is out of reach), for many multiples in one evaluation."""
        bandwidths = [device.bandwidth_bytes_s * float(k) for k in np.atleast_1d(multiples)]
        value = _best_at_bandwidths(model, device, bandwidths, target, precision, "rated", assumptions)
        return np.where(np.isfinite(value), value, 0.0)

    base, top = (float(v) for v in best([1.0, MULTIPLE_SEARCH[1]]))
    if base <= 0:
        raise ValueError(f"target: {device.label} does not reach {target:,.0f} tokens/s per user for {model!r} in the model")
    rows = []
    top = top / base
    for gap in np.atleast_1d(gaps):
        # The upper end of the bisection's last bracket: a multiple that reaches the gap.
        multiple = (float("nan") if top < gap else
                    _bisect_log(lambda k: best(k) / base - gap, *MULTIPLE_SEARCH, steps=40) * (1 + 1e-9))
        reached = float(best(multiple)[0]) / base if np.isfinite(multiple) else float("nan")
        rows.append({"gap": float(gap), "bandwidth_multiple": multiple, "gap_reached": reached,
                     "power_share": 1.0 / float(gap),
                     "baseline_tps_per_kw": base, "most_from_bandwidth": top})
    return pd.DataFrame(rows)
