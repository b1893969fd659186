"""One serving instance under load: continuous batching, queues and tail latency.

:func:`simulate_serving` runs one instance with continuous batching: Poisson arrivals, every
iteration admits waiting requests up to ``max_batch``, prefills the admitted prompts (stalling the
running requests meanwhile), then advances every running request by one decode step. It is
deterministic for a given seed. :func:`md1_mean_latency` is the queueing-theory answer it is
checked against where one exists.

:func:`load_curve` prices both passes with the serving model (:func:`perwatt.parallel.pass_time`):
a decode step at the current batch size, and one prefill pass over all the prompts admitted
together. Each pass pays the model's fixed cost per layer once, however many sequences it carries,
so at small batches that cost, not memory bandwidth, sets most of a step's time.
"""

from __future__ import annotations

import bisect
from collections import deque

import numpy as np
import pandas as pd

from perwatt import catalog, checks, parallel, roofline


def simulate_serving(arrival_rate: float, *, prefill_s, step_time_s, output_tokens: int,
                     max_batch: int, requests: int = 2000, warmup: int = 200, seed: int = 0) -> dict:
    """Continuous batching on one instance (see the module docstring). Deterministic per seed.

    ``step_time_s`` is a callable or array giving the decode step time at batch ``b`` (index b).
    ``prefill_s`` is either one number, the seconds to prefill each prompt (prompts admitted
    together are prefilled one after another), or a callable or array giving the seconds to
    prefill ``k`` prompts together in one pass (index k, from 0 to ``max_batch``).
    Returns throughput (output tokens/s), p50 and p99 latency (s) over requests after the
    warm-up, mean latency, and the busy fraction.
    """
    arrival_rate = checks.scalar("arrival_rate", arrival_rate, minimum=checks.MIN_RATE, maximum=checks.MAX_RATE)
    output_tokens = checks.integer("output_tokens", output_tokens, maximum=checks.MAX_SIMULATED_TOKENS)
    max_batch = checks.integer("max_batch", max_batch, maximum=MAX_SIMULATED_BATCH)
    requests = checks.integer("requests", requests, maximum=checks.MAX_SIMULATED_TOKENS)
    warmup = checks.integer("warmup", warmup, minimum=0)
    if warmup >= requests:
        raise ValueError(f"warmup must be fewer than requests ({requests}), got {warmup}")
    seed = checks.integer("seed", seed, minimum=0)
    if requests * output_tokens > checks.MAX_SIMULATED_TOKENS:
        raise ValueError(f"requests × output_tokens must be at most {checks.MAX_SIMULATED_TOKENS:,} decode steps to "
                         f"simulate, got {requests * output_tokens:,}")
    step = _step_times(step_time_s, max_batch)
    prefill = _prefill_times(prefill_s, max_batch)
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / arrival_rate, requests))
    done_at, clock, busy = _continuous_batching(arrivals, prefill, step, output_tokens, max_batch)
    latency = (done_at - arrivals)[warmup:]
    span = done_at[-1] - arrivals[warmup]
    return {
        "arrival_rate": arrival_rate,
        "throughput_tokens_per_s": (requests - warmup) * output_tokens / span,
        "p50_s": float(np.percentile(latency, 50)),
        "p99_s": float(np.percentile(latency, 99)),
        "mean_s": float(latency.mean()),
        "busy_fraction": np.float64(busy) / np.float64(clock),
    }


#: Iterations of a stretch (see :func:`_continuous_batching`) above which one NumPy call sums them
#: faster than a Python loop adds them one by one (a few µs a call against 65 ns an iteration).
_SUMMED = 80
#: The next arrival's time when none can be admitted.
_NEVER = float("inf")


def _continuous_batching(arrivals: np.ndarray, prefill: np.ndarray, step: np.ndarray, output_tokens: int,
                         max_batch: int) -> tuple[np.ndarray, float, float]:
    """When each request finishes, the clock at the end, and the seconds busy, for
    :func:`simulate_serving` (its inputs checked). An iteration idles until the next arrival if
    nothing runs, admits waiting requests up to ``max_batch``, prefills them together and advances
    every running request by one decode step.

    Every request writes ``output_tokens`` tokens, so one admitted at iteration t finishes at the end
    of iteration t + output_tokens − 1: the batch changes only at admissions and at those known
    retirements, and between them each iteration adds the same duration. Such stretches are added
    one iteration at a time (by a sequential ``np.add.accumulate`` when long), in the same order as
    a loop over every iteration, so the result is bit-identical to it (tests/test_load_fast.py keeps
    that loop); the work is per request, not per request and token.
    """
    requests = len(arrivals)
    arrival, pre, stp = arrivals.tolist(), prefill.tolist(), step.tolist()
    done_at = np.full(requests, np.nan)
    buffer = np.empty((2, output_tokens))  # a stretch is shorter than a request's iterations
    retiring: deque[tuple[int, int, int]] = deque()  # (iteration it finishes in, first request, end), in order
    admit, retire = bisect.bisect_right, retiring.popleft
    running = next_arrival = iteration = 0
    clock = busy = 0.0
    while next_arrival < requests or running:
        if not running and arrival[next_arrival] > clock:
            clock = arrival[next_arrival]  # idle until the next request
        # Arrivals are sorted: admit those that have come, as far as the batch has room.
        end = admit(arrival, clock, next_arrival, min(requests, next_arrival + max_batch - running))
        admitted, next_arrival = end - next_arrival, end
        if admitted:
            retiring.append((iteration + output_tokens - 1, end - admitted, end))
            running += admitted
        duration = pre[admitted] + stp[running]
        clock += duration
        busy += duration
        if retiring[0][0] == iteration:
            _, first, last = retire()
            done_at[first:last] = clock
            running -= last - first
        iteration += 1
        if not running:
            continue
        # A stretch of alike iterations, up to and including the next retirement's: none admits
        # while the clock is before the next arrival (or ever, while the batch is full or nobody
        # is left to come), so each adds the same duration.
        stretch = retiring[0][0] - iteration + 1
        duration = pre[0] + stp[running]
        until = arrival[next_arrival] if next_arrival < requests and running < max_batch else _NEVER
        if (stretch if until == _NEVER else min(stretch, (until - clock) / duration)) <= _SUMMED:
            stepped = 0
            while stepped < stretch and clock < until:
                clock += duration
                busy += duration
                stepped += 1
        else:
            path = buffer[:, :stretch + 1]
            path.fill(duration)
            path[0, 0] = clock
            path[1, 0] = busy
            np.add.accumulate(path, axis=1, out=path)  # sequential: the same additions as the loop above
            # Up to the first clock at or past the arrival, if one comes.
            stepped = stretch if until == _NEVER else min(int(path[0].searchsorted(until)), stretch)
            clock, busy = path[:, stepped].tolist()
        iteration += stepped
        if stepped == stretch:  # the stretch ran to its end: its last iteration retires the oldest requests
            _, first, last = retire()
            done_at[first:last] = clock
            running -= last - first
    return done_at, clock, busy


#: The largest batch the queue simulation runs (its step times are one per batch size).
MAX_SIMULATED_BATCH = 65_536


def _per_count(name: str, value, max_batch: int, needs: str) -> np.ndarray:
    """One time per count from 0 to ``max_batch``, from a callable or a sequence: finite and ≥ 0."""
    if callable(value):
        value = [value(k) for k in range(max_batch + 1)]
    times = checks.array(name, value, minimum=0.0, maximum=checks.MAX_SECONDS)
    if times.ndim != 1 or len(times) < max_batch + 1:
        raise ValueError(f"{name} must {needs} from 0 to max_batch ({max_batch + 1} values), got shape {times.shape}")
    return times


def _step_times(step_time_s, max_batch: int) -> np.ndarray:
    """Decode step times for batches 0..max_batch, checked: finite, ≥ 0, and > 0 from batch 1 up."""
    step = _per_count("step_time_s", step_time_s, max_batch, "give one time per batch size")
    checks.array("step_time_s", step[1:max_batch + 1], minimum=checks.MIN_MAGNITUDE)
    return step


def _prefill_times(prefill_s, max_batch: int) -> np.ndarray:
    """Seconds to prefill 0..max_batch prompts admitted together: ``k × prefill_s`` for one number,
    else the times given (finite, ≥ 0, 0 for no prompt, never falling as prompts are added)."""
    if not callable(prefill_s) and np.ndim(prefill_s) == 0 and not isinstance(prefill_s, (list, tuple)):
        return np.arange(max_batch + 1) * checks.scalar("prefill_s", prefill_s, minimum=0.0,
                                                         maximum=checks.MAX_SECONDS)
    times = _per_count("prefill_s", prefill_s, max_batch, "be one number or one time per count of prompts")
    times = times[:max_batch + 1]
    if times[0] != 0 or np.any(np.diff(times) < 0):
        raise ValueError("prefill_s must be 0 for no prompt and must not fall as prompts are added")
    return times


def md1_mean_latency(arrival_rate: float, service_s: float) -> float:
    """Mean time in system of an M/D/1 queue (Pollaczek–Khinchine): service + ρ·S / (2(1 − ρ))."""
    arrival_rate = checks.scalar("arrival_rate", arrival_rate, minimum=0.0, maximum=checks.MAX_RATE)
    service_s = checks.scalar("service_s", service_s, exclusive_minimum=0.0, maximum=checks.MAX_SECONDS)
    rho = arrival_rate * service_s
    if rho >= 1:
        raise ValueError(f"arrival_rate × service_s must be below 1: the queue is unstable at utilisation {rho:.2f}")
    return service_s + rho * service_s / (2 * (1 - rho))


#: The instance the chapter simulates.
LOAD_MODEL, LOAD_ACCELERATOR = "gpt-oss-120b", "gb200"
#: Output tokens per request in the load simulation: an agent step's answer, not an essay.
LOAD_OSL = 256


@checks.validated(max_batch=checks.rule(checks.integer, maximum=MAX_SIMULATED_BATCH),
                  isl=checks.rule(checks.optional, checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS)),
                  osl=checks.rule(checks.integer, maximum=checks.MAX_SIMULATED_TOKENS),
                  requests=checks.rule(checks.integer, minimum=10, maximum=checks.MAX_SIMULATED_TOKENS),
                  seed=checks.rule(checks.integer, minimum=0))
def load_curve(max_batch: int, rates, *, isl: float | None = None, osl: int = LOAD_OSL, requests: int = 1500,
               seed: int = 0) -> pd.DataFrame:
    """Throughput, p50/p99 latency and the busy fraction across arrival rates for one instance of
    :data:`LOAD_MODEL` on the fewest :data:`LOAD_ACCELERATOR` chips that hold it and ``max_batch``
    caches, tensor parallel (see the module docstring for how its passes are priced)."""
    rates = checks.array("rates", rates, minimum=checks.MIN_RATE, maximum=checks.MAX_RATE)
    if rates.ndim != 1 or not 0 < len(rates) <= 1000:
        raise ValueError(f"rates must be a list of 1 to 1,000 arrival rates, got {rates!r}")
    isl = float(catalog.workload()["isl_tokens"]) if isl is None else isl
    spec, device = roofline.model_spec(LOAD_MODEL), roofline.chip(LOAD_ACCELERATOR)
    chips = float(roofline.chips_needed(spec, device, max_batch, isl + osl))
    context = isl + osl / 2
    batches = np.arange(max_batch + 1, dtype=float)
    steps = roofline.decode_time(spec, device, np.maximum(batches, 1), context, chips)
    prefill = parallel.pass_time(spec, device, np.maximum(batches, 1), 0.0, chips, 1, False, isl, "prefill")["total"]
    prefill = np.where(batches > 0, prefill, 0.0)
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
    idle_power_fraction = checks.fraction("idle_power_fraction", idle_power_fraction)
    busy = checks.fraction("busy_fraction", busy_fraction)
    rated_power_w = checks.power_w("rated_power_w", rated_power_w)
    chips = checks.CHIPS("chips", chips)
    throughput_tokens_per_s = checks.rate("throughput_tokens_per_s", throughput_tokens_per_s)
    checks.broadcastable(rated_power_w=rated_power_w, chips=chips, busy_fraction=busy,
                         throughput_tokens_per_s=throughput_tokens_per_s, idle_power_fraction=idle_power_fraction)
    draw_w = rated_power_w * chips * (busy + idle_power_fraction * (1 - busy))
    return draw_w / throughput_tokens_per_s
