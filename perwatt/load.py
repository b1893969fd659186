"""One serving instance under load: continuous batching, queues and tail latency.

:func:`simulate_serving` runs one instance with continuous batching: Poisson arrivals, every
iteration admits waiting requests up to ``max_batch``, prefills the admitted prompts, then
advances every running request by one decode step whose time comes from the roofline model at
the current batch size. It is deterministic for a given seed. :func:`md1_mean_latency` is the
queueing-theory answer it is checked against where one exists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import catalog, metrics, roofline


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


#: The instance the chapter simulates.
LOAD_MODEL, LOAD_ACCELERATOR = "gpt-oss-120b", "gb200"
#: Output tokens per request in the load simulation: an agent step's answer, not an essay.
LOAD_OSL = 256


def load_curve(max_batch: int, rates, *, isl: float | None = None, osl: int = LOAD_OSL, requests: int = 1500,
               seed: int = 0) -> pd.DataFrame:
    """Throughput, p50/p99 latency and energy per output token across arrival rates for one instance."""
    isl = float(catalog.workload()["isl_tokens"]) if isl is None else isl
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
