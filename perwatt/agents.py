"""Beyond one round: agent tasks of many model calls, and one serving instance under load.

**Agent tasks.** A task is ``steps`` model calls. Call *i* (from 0) sees a context of
``initial_context + i × context_growth`` tokens, of which a share ``cache_hit`` is served from a
prefix cache and needs no prefill; it then generates ``output_tokens``; a tool runs for
``tool_s`` seconds before the next call. With a system's prefill time per uncached token, its
time per output token (TPOT) and its energy per processed token:

* task latency = Σ (uncached prompt tokens × prefill s/token + output tokens × TPOT) + tool time;
* task energy = (uncached prompt tokens + output tokens) summed over calls × J/token.

**Serving under load.** :func:`simulate_serving` runs one instance with continuous batching:
Poisson arrivals, every iteration admits waiting requests up to ``max_batch``, prefills the
admitted prompts, then advances every running request by one decode step whose time comes
from the roofline model at the current batch size. It is deterministic for a given seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from perwatt import benchmark, comparisons, metrics, roofline


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


@cache
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
    drawn = comparisons.lengths("8k/1k")
    isl, osl = drawn.isl_mean, drawn.osl_mean
    audit = benchmark.latency_audit(benchmark.book_results(), osl)
    rows = audit[audit["model"] == model].set_index("system")
    if rows.empty:
        raise ValueError(f"model must be one of {list(audit['model'].unique())}, got {model!r}")
    out = {}
    for system, row in rows.iterrows():
        if system == comparisons.CANDIDATE:
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
    drawn = comparisons.lengths("8k/1k")
    initial_context = drawn.isl_mean if initial_context is None else initial_context
    output_tokens = drawn.osl_mean if output_tokens is None else output_tokens
    rows = []
    for system, profile in profiles(model).items():
        result = task(profile, steps, initial_context, context_growth, cache_hit, tool_s, output_tokens)
        rows.append({"system": system, **{k: float(v) for k, v in result.items()}})
    frame = comparisons.label(pd.DataFrame(rows).assign(model=model))
    candidate = frame[frame["system"] == comparisons.CANDIDATE].iloc[0]
    baseline = frame[frame["system"] != comparisons.CANDIDATE].iloc[0]
    frame["latency_advantage"] = baseline["latency_s"] / candidate["latency_s"]
    frame["model_time_advantage"] = baseline["model_s"] / candidate["model_s"]
    return frame


# --- Serving under load -------------------------------------------------------------------

def simulate_serving(arrival_rate: float, *, prefill_s: float, step_time_s, output_tokens: int,
                     max_batch: int, requests: int = 2000, warmup: int = 200, seed: int = 0) -> dict:
    """Continuous batching on one instance (see the module docstring). Deterministic per seed.

    ``step_time_s`` is a callable or array giving the decode step time at batch ``b`` (index b).
    Returns throughput (output tokens/s), p50 and p99 latency (s) over requests after the
    warm-up, mean latency, and the busy fraction.
    """
    if arrival_rate <= 0:
        raise ValueError(f"arrival_rate must be positive, got {arrival_rate}")
    if max_batch < 1 or output_tokens < 1:
        raise ValueError("max_batch and output_tokens must be at least 1")
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / arrival_rate, requests))
    step = np.asarray([step_time_s(b) for b in range(max_batch + 1)] if callable(step_time_s) else step_time_s)
    remaining = np.zeros(requests, dtype=int)
    done_at = np.full(requests, np.nan)
    running: list[int] = []
    next_arrival = 0
    clock = 0.0
    busy = 0.0
    while next_arrival < requests or running:
        if not running and next_arrival < requests and arrivals[next_arrival] > clock:
            clock = arrivals[next_arrival]  # idle until the next request
        admitted = 0
        while next_arrival < requests and arrivals[next_arrival] <= clock and len(running) < max_batch:
            running.append(next_arrival)
            remaining[next_arrival] = output_tokens
            next_arrival += 1
            admitted += 1
        duration = admitted * prefill_s + step[len(running)]
        clock += duration
        busy += duration
        still = []
        for r in running:
            remaining[r] -= 1
            if remaining[r] == 0:
                done_at[r] = clock
            else:
                still.append(r)
        running = still
    latency = (done_at - arrivals)[warmup:]
    span = done_at[-1] - arrivals[warmup]
    return {
        "arrival_rate": arrival_rate,
        "throughput_tokens_per_s": (requests - warmup) * output_tokens / span,
        "p50_s": float(np.percentile(latency, 50)),
        "p99_s": float(np.percentile(latency, 99)),
        "mean_s": float(latency.mean()),
        "busy_fraction": busy / clock,
    }


def md1_mean_latency(arrival_rate: float, service_s: float) -> float:
    """Mean time in system of an M/D/1 queue (Pollaczek–Khinchine): service + ρ·S / (2(1 − ρ))."""
    rho = arrival_rate * service_s
    if rho >= 1:
        raise ValueError(f"the queue is unstable: utilisation {rho:.2f} ≥ 1")
    return service_s + rho * service_s / (2 * (1 - rho))


LOAD_MODEL, LOAD_ACCELERATOR = "gpt-oss-120b", "gb200"
#: Output tokens per request in the load simulation: an agent step's answer, not an essay.
LOAD_OSL = 256


def load_curve(max_batch: int, rates, *, isl: float = 8192, osl: int = LOAD_OSL, requests: int = 1500,
               seed: int = 0) -> pd.DataFrame:
    """Throughput, p50/p99 latency and energy per output token across arrival rates for one instance."""
    spec, device = roofline.model_spec(LOAD_MODEL), roofline.chip(LOAD_ACCELERATOR)
    chips = float(roofline.chips_needed(spec, device, max_batch, isl + osl))
    context = isl + osl / 2
    batches = np.arange(max_batch + 1, dtype=float)
    steps = roofline.decode_time(spec, device, np.maximum(batches, 1), context, chips)
    prefill = float(roofline.prefill_time(spec, device, isl, chips))
    rows = [simulate_serving(float(rate), prefill_s=prefill, step_time_s=steps, output_tokens=osl,
                             max_batch=max_batch, requests=requests, warmup=requests // 10, seed=seed)
            for rate in rates]
    frame = pd.DataFrame(rows)
    frame["max_batch"] = max_batch
    frame["chips"] = chips
    frame["rated_power_w"] = device.power_w
    return frame


def joules_per_output_token(rated_power_w, chips, busy_fraction, throughput_tokens_per_s, idle_power_fraction):
    """Energy per output token of an instance whose chips draw their rating while busy and
    ``idle_power_fraction`` of it while idle (both labelled assumptions: decode usually draws
    less than the rating, so the busy figure is an upper bound)."""
    metrics._checked("idle_power_fraction", idle_power_fraction, minimum=0.0, maximum=1.0)
    busy = np.asarray(busy_fraction, dtype=float)
    draw_w = rated_power_w * chips * (busy + idle_power_fraction * (1 - busy))
    return draw_w / throughput_tokens_per_s
