"""Beyond one round: agent tasks of many model calls.

A task is ``steps`` model calls. Call *i* (from 0) sees a context of
``initial_context + i × context_growth`` tokens, of which a share ``cache_hit`` is served from a
prefix cache and needs no prefill; it then generates ``output_tokens``; a tool runs for
``tool_s`` seconds before the next call. With a system's prefill time per uncached token, its
time per output token (TPOT) and its energy per processed token:

* task latency = Σ (uncached prompt tokens × prefill s/token + output tokens × TPOT) + tool time;
* task energy = (uncached prompt tokens + output tokens) summed over calls × J/token.

One serving instance under load is :mod:`perwatt.load`; sessions that wait for tools in a closed
loop, holding their caches, are :mod:`perwatt.agent_loop`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perwatt import benchmark, catalog, checks, data, metrics, roofline


@dataclass(frozen=True)
class SystemProfile:
    """What the agent model needs of a system: prefill s per uncached token, TPOT (s), J per token."""

    prefill_s_per_token: float
    tpot_s: float
    joules_per_token: float

    def __post_init__(self) -> None:
        checks.scalar("prefill_s_per_token", self.prefill_s_per_token, minimum=0.0, maximum=checks.MAX_SECONDS)
        checks.scalar("tpot_s", self.tpot_s, minimum=0.0, maximum=checks.MAX_SECONDS)
        checks.scalar("joules_per_token", self.joules_per_token, minimum=0.0)


#: Model calls in one task, at most.
MAX_STEPS = 1_000_000
STEPS = checks.rule(checks.count, minimum=1, maximum=MAX_STEPS)


@checks.validated(profile=checks.kind(SystemProfile), steps=STEPS, initial_context=checks.CONTEXT,
                  context_growth=checks.CONTEXT, cache_hit=checks.fraction, tool_s=checks.SECONDS,
                  output_tokens=checks.CONTEXT)
def task(profile: SystemProfile, steps, initial_context, context_growth, cache_hit, tool_s, output_tokens):
    """Latency (s) and energy (J) of one agent task; arguments broadcast as NumPy arrays.

    Returns a dict with ``latency_s``, ``model_s`` (time in model calls), ``tool_total_s``,
    ``decode_s``, ``prefill_s``, ``energy_j`` and ``uncached_tokens``.
    """
    hit = cache_hit
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


@checks.validated(model=checks.TEXT)
def profiles(model: str) -> dict[str, SystemProfile]:
    """Jalapeño and its baseline for one model, from the published table and the serving model.

    TPOT comes from the reported tokens/s per user, and J/token from the reported tokens/s/kW
    (on its unstated power basis, reading "mixed" as input plus output tokens). Prefill time per
    token is Jalapeño's implied TTFT at the workload's mean lengths (reported latency minus decode
    time) ÷ mean prompt length; the baselines' figures leave no time for a first token (see the
    consistency audit), so theirs comes from the serving model instead: one mean prompt prefilled
    on the fewest of their chips that hold the model, tensor parallel, fixed cost per layer
    included, ÷ its length. A call's uncached tokens are charged at that rate, as if the fixed cost
    scaled with them: it is a few per cent of a long prompt's prefill. The two prefill figures rest
    on different evidence, so they are not a like-for-like comparison of the chips' prefill speed.
    """
    return _profiles(model)


@data.stored
def _profiles(model: str) -> dict[str, SystemProfile]:
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


#: The checks of a comparison's arguments.
COMPARISON = dict(
    model=checks.TEXT, steps=checks.rule(checks.integer, maximum=MAX_STEPS),
    context_growth=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS),
    cache_hit=checks.rule(checks.scalar, minimum=0.0, maximum=1.0),
    tool_s=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_SECONDS),
    initial_context=checks.rule(checks.optional, checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS)),
    # A call writes at least one token: with none, and no context, a task takes no model time.
    output_tokens=checks.rule(checks.optional, checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS)))


@checks.validated(**COMPARISON)
def task_comparison(model: str, steps: int, context_growth: float, cache_hit: float, tool_s: float,
                    initial_context: float | None = None, output_tokens: float | None = None) -> pd.DataFrame:
    """One agent task on Jalapeño and on its baseline: latency, its parts, energy, and the ratios.

    The first call's context and every call's output default to the 8k/1k workload's mean drawn
    lengths, so a one-call task is one request of the benchmark.
    """
    return pd.DataFrame(_comparison_columns.unchecked(model, steps, context_growth, cache_hit, tool_s,
                                                      initial_context, output_tokens))


@checks.validated(**COMPARISON)
def _comparison_columns(model: str, steps: int, context_growth: float, cache_hit: float, tool_s: float,
                        initial_context: float | None = None, output_tokens: float | None = None) -> dict:
    """:func:`task_comparison`'s columns, before they are a frame: a list per column (one entry per
    system) or one value for every row. For a figure that reshapes them, hundreds of times a grid."""
    drawn = catalog.lengths()
    initial_context = drawn.isl_mean if initial_context is None else initial_context
    output_tokens = drawn.osl_mean if output_tokens is None else output_tokens
    systems = _profiles(model)
    # The arguments are checked above at least as strictly as task checks them, and task's checks
    # would only turn them into floats.
    shape = float(steps), float(initial_context), float(context_growth), float(cache_hit), float(tool_s)
    results = [task.unchecked(profile, *shape, float(output_tokens)) for profile in systems.values()]
    candidate = [r for system, r in zip(systems, results) if system == catalog.CANDIDATE][0]
    baseline = [r for system, r in zip(systems, results) if system != catalog.CANDIDATE][0]
    return {
        "system": list(systems), **{k: [float(r[k]) for r in results] for k in results[0]},
        "model": model, "model_label": catalog.model_label(model),
        "system_label": [catalog.system_label(system) for system in systems],
        "latency_advantage": baseline["latency_s"] / candidate["latency_s"],
        "model_time_advantage": baseline["model_s"] / candidate["model_s"],
    }
