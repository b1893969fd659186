"""Beyond one round: agent tasks of many model calls.

A task is ``steps`` model calls. Call *i* (from 0) sees a context of
``initial_context + i × context_growth`` tokens, of which a share ``cache_hit`` is served from a
prefix cache and needs no prefill; it then generates ``output_tokens``; a tool runs for
``tool_s`` seconds before the next call. With a system's prefill time per uncached token, its
time per output token (TPOT) and its energy per processed token:

* task latency = Σ (uncached prompt tokens × prefill s/token + output tokens × TPOT) + tool time;
* task energy = (uncached prompt tokens + output tokens) summed over calls × J/token.

One serving instance under load is :mod:`perwatt.load`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perwatt import benchmark, catalog, data, metrics, roofline


@dataclass(frozen=True)
class SystemProfile:
    """What the agent model needs of a system: prefill s per uncached token, TPOT (s), J per token."""

    prefill_s_per_token: float
    tpot_s: float
    joules_per_token: float


def task(profile: SystemProfile, steps, initial_context, context_growth, cache_hit, tool_s, output_tokens):
    """Latency (s) and energy (J) of one agent task; arguments broadcast as NumPy arrays.

    Returns a dict with ``latency_s``, ``model_s`` (time in model calls), ``tool_total_s``,
    ``decode_s``, ``prefill_s``, ``energy_j`` and ``uncached_tokens``.
    """
    steps = np.asarray(steps, dtype=float)
    if (steps < 1).any() or (steps != np.round(steps)).any():
        raise ValueError(f"steps must be a whole number ≥ 1, got {steps!r}")
    hit = np.asarray(cache_hit, dtype=float)
    if ((hit < 0) | (hit > 1)).any():
        raise ValueError(f"cache_hit must be in [0, 1], got {cache_hit!r}")
    for name, value in (("initial_context", initial_context), ("context_growth", context_growth),
                        ("tool_s", tool_s), ("output_tokens", output_tokens)):
        if (np.asarray(value, dtype=float) < 0).any():
            raise ValueError(f"{name} must be ≥ 0, got {value!r}")
    # Σ_{i<N} (c0 + i·g) = N·c0 + g·N(N−1)/2 prompt tokens over the task.
    prompt_tokens = steps * initial_context + context_growth * steps * (steps - 1) / 2
    uncached = prompt_tokens * (1 - hit)
    outputs = steps * output_tokens
    prefill = uncached * profile.prefill_s_per_token
    decode = outputs * profile.tpot_s
    tools = (steps - 1) * tool_s
    return {
        "latency_s": prefill + decode + tools,
        "model_s": prefill + decode,
        "prefill_s": prefill,
        "decode_s": decode,
        "tool_total_s": tools,
        "uncached_tokens": uncached,
        "energy_j": (uncached + outputs) * profile.joules_per_token,
    }


@data.cached
def profiles(model: str) -> dict[str, SystemProfile]:
    """Jalapeño and its baseline for one model, from the published table and the serving model.

    TPOT comes from the reported tokens/s per user, and J/token from the reported tokens/s/kW
    (on its unstated power basis, reading "mixed" as input plus output tokens). Prefill time per
    token is Jalapeño's implied TTFT at the workload's mean lengths (reported latency minus decode
    time) ÷ mean prompt length; the baselines' figures leave no time for a first token (see the
    consistency audit), so theirs comes from the roofline model's prefill on their hardware
    instead. The two prefill figures rest on different evidence, so they are not a like-for-like
    comparison of the chips' prefill speed.
    """
    drawn = catalog.lengths()
    isl, osl = drawn.isl_mean, drawn.osl_mean
    audit = benchmark.latency_audit(benchmark.book_results(), osl)
    rows = audit[audit["model"] == model].set_index("system")
    if rows.empty:
        raise ValueError(f"model must be one of {list(audit['model'].unique())}, got {model!r}")
    out = {}
    for system, row in rows.iterrows():
        if system == catalog.CANDIDATE:
            prefill = row["implied_ttft_s"] / isl
        else:
            spec, device = roofline.model_spec(model), roofline.chip(system)
            chips = roofline.chips_needed(spec, device, 1, isl)
            prefill = float(roofline.prefill_time(spec, device, isl, chips)) / isl
        out[system] = SystemProfile(
            prefill_s_per_token=float(prefill),
            tpot_s=float(row["tpot_ms"]) / 1000,
            joules_per_token=float(metrics.joules_per_token(row["tps_per_kw"])),
        )
    return out


def task_comparison(model: str, steps: int, context_growth: float, cache_hit: float, tool_s: float,
                    initial_context: float | None = None, output_tokens: float | None = None) -> pd.DataFrame:
    """One agent task on Jalapeño and on its baseline: latency, its parts, energy, and the ratios.

    The first call's context and every call's output default to the 8k/1k workload's mean drawn
    lengths, so a one-call task is one request of the benchmark.
    """
    drawn = catalog.lengths()
    initial_context = drawn.isl_mean if initial_context is None else initial_context
    output_tokens = drawn.osl_mean if output_tokens is None else output_tokens
    rows = []
    for system, profile in profiles(model).items():
        result = task(profile, steps, initial_context, context_growth, cache_hit, tool_s, output_tokens)
        rows.append({"system": system, **{k: float(v) for k, v in result.items()}})
    frame = catalog.label(pd.DataFrame(rows).assign(model=model))
    candidate = frame[frame["system"] == catalog.CANDIDATE].iloc[0]
    baseline = frame[frame["system"] != catalog.CANDIDATE].iloc[0]
    frame["latency_advantage"] = baseline["latency_s"] / candidate["latency_s"]
    frame["model_time_advantage"] = baseline["model_s"] / candidate["model_s"]
    return frame
