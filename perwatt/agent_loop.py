"""Agents that wait: a closed loop of sessions, each cycling call → tool → call, on one instance.

InferenceX and agent frameworks run a fixed number of concurrent sessions, not open arrivals:
a session sends its next call when its tool returns. A task is ``steps`` calls; call *i* (from 0)
reads a context of ``initial_context + i × context_growth`` tokens and writes ``output_tokens``;
a tool runs for ``tool_s`` seconds between calls. Every pass is priced by the serving model
(:func:`perwatt.parallel.pass_time`) at the batch and context in use, so a call's time per token
grows with its context and with the number of sessions decoding beside it.

**The loop** (a mean-value model). Of ``N`` resident sessions, ``b`` are in a call on average.
A call takes ``R(b)`` = its prefill + ``output_tokens`` × TPOT(b), where TPOT is the decode pass
at batch ``max(b, 1)`` plus the prefills of the batch's next calls that stall it, as
:func:`perwatt.serving.serve` accounts them. A session's mean cycle per call is ``C = R + tool``
(a task has one tool gap fewer than calls), and by Little's law ``b = N × R / C``, solved by
bisection. The instance is busy when at least one session is in a call: ``1 − (1 − R/C)^N``,
treating sessions as independent.

**Holding the cache.** With ``hold`` a session keeps its KV cache on the chip while its tool runs,
so the next call prefills only the new tokens, and the memory left after the weights caps how
many sessions are resident at once (requested sessions beyond the cap are not served by this
instance). Without it the cache is dropped at every tool call and the whole context is prefilled
again; only the sessions in a call hold memory.

**Accounting rule (a choice).** The instance's energy and rent, idle or busy, are divided equally
among the tasks it completes, whether sessions hold their caches or drop them: the instance runs,
or sits idle, through the tool waits, so they are paid for. ``N`` served sessions complete ``N``
tasks every ``steps × C``, so a task is charged ``instance watts × steps × C ÷ N``. A busy chip draws ``active_fraction`` of its rating, an idle
one ``idle_fraction`` (both rows of ``data/assumptions.csv``).
"""

from __future__ import annotations

import numpy as np

from perwatt import catalog, checks, data, parallel
from perwatt.roofline import DEFAULTS, Assumptions, chip, chips_needed, model_spec

#: Bisection steps for the batch in a call: the bracket [0, N] halves each time (to N × 2⁻³² sessions).
BISECTIONS = 32
STEPS = checks.rule(checks.integer, maximum=10_000)
LENGTH = checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS)
HELD = checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS)  # tokens a session's cache holds
SHARE = checks.rule(checks.optional, checks.fraction)
#: A busy instance draws some power: with none, every energy (and the ratio of two) would be 0 or 0/0.
BUSY_SHARE = checks.rule(checks.optional, checks.rule(checks.fraction, zero=False))
LOOP = dict(model=checks.TEXT, accelerator=checks.TEXT, sessions=checks.BATCH, steps=STEPS, tool_s=checks.SECONDS,
            initial_context=checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS),
            context_growth=LENGTH, output_tokens=checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS),
            hold=checks.FLAG, chips=checks.rule(checks.optional, checks.rule(checks.integer, maximum=checks.MAX_CHIPS)),
            idle_fraction=SHARE, active_fraction=BUSY_SHARE, assumptions=checks.kind(Assumptions))


def _final_context(initial_context: float, steps: int, context_growth: float, output_tokens: float) -> float:
    """Tokens a session's cache holds at the end of its last call; raise ValueError naming
    ``context_growth`` if the task's lengths add up to more than any cache the book models."""
    final = float(initial_context + (steps - 1) * context_growth + output_tokens)
    if final > checks.MAX_TOKENS:
        raise ValueError(f"context_growth: initial_context + (steps - 1) × context_growth + output_tokens is "
                         f"{final:.6g} tokens, more than the {checks.MAX_TOKENS:g} any cache can hold")
    return final


@data.cached
def _price_per_chip_hour(accelerator: str) -> float:
    price = catalog.rental_usd_per_hour(accelerator)
    return np.nan if price is None else price


#: Sessions the default instance is sized to hold (an assumption of this module, not a measurement).
SIZED_FOR = 32


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, context=HELD)
def instance_chips(model: str, accelerator: str, context: float) -> int:
    """The smallest power of two of chips that holds the weights and :data:`SIZED_FOR` sessions at
    ``context`` tokens, tensor parallel: the instance the loop runs on unless told otherwise."""
    need = float(chips_needed(model_spec(model), chip(accelerator), SIZED_FOR, context))
    return int(2 ** np.ceil(np.log2(need)))


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, chips=checks.rule(checks.integer, maximum=checks.MAX_CHIPS),
                  context=HELD, assumptions=checks.kind(Assumptions))
def session_capacity(model: str, accelerator: str, chips: int, context: float,
                     assumptions: Assumptions = DEFAULTS) -> int:
    """How many sessions' caches at ``context`` tokens fit beside the weights on the instance."""
    spec, device = model_spec(model), chip(accelerator)
    one, two = (float(parallel.memory_per_chip(spec, chips, 1, False, n, context, assumptions)) for n in (1, 2))
    room = device.hbm_bytes * assumptions.usable_hbm_fraction
    return int(max(0.0, np.floor((room - one) / (two - one)) + 1)) if room >= one else 0


@checks.validated(**LOOP)
def closed_loop(model: str, accelerator: str, sessions, steps: int, tool_s, initial_context: float,
                context_growth: float, output_tokens: float, hold: bool = True, chips: int | None = None,
                idle_fraction: float | None = None, active_fraction: float | None = None,
                assumptions: Assumptions = DEFAULTS) -> dict:
    """One instance serving ``sessions`` closed-loop agent sessions (see the module docstring);
    ``sessions``, ``tool_s`` and the power fractions broadcast. Returns a dict of arrays: ``sessions_served``,
    ``capacity`` (sessions whose caches fit), ``batch`` (mean sessions in a call), ``tpot_s`` (mean),
    ``call_s``, ``cycle_s`` (per call, tool included), ``task_s``, ``calls_per_s``, ``busy_fraction``,
    ``instance_w``, ``energy_j``, ``rent_usd``, ``electricity_usd`` and ``cost_usd`` per task, and
    ``output_tokens`` per task. Fractions default to ``data/assumptions.csv``; the rent is the
    accelerator's price in ``data/hourly_prices.csv`` (NaN where none is published)."""
    idle = catalog.assumption("idle_power_fraction") if idle_fraction is None else idle_fraction
    active = catalog.assumption("active_power_fraction") if active_fraction is None else active_fraction
    idle, active = (np.asarray(v, dtype=float)[..., None] for v in (idle, active))
    if np.any(idle > active):
        raise ValueError(f"idle_fraction ({idle}) must not exceed active_fraction ({active})")
    spec, device = model_spec(model), chip(accelerator)
    calls = np.arange(steps, dtype=float)
    context = initial_context + calls * context_growth
    final = _final_context(initial_context, steps, context_growth, output_tokens)
    chips = instance_chips(model, accelerator, final) if chips is None else chips
    capacity = session_capacity(model, accelerator, chips, final, assumptions)
    if capacity < 1:
        raise ValueError(f"chips: {chips} {accelerator} chips cannot hold {model} and one {final:,.0f}-token session "
                         "(initial_context + (steps - 1) × context_growth + output_tokens): give more chips or "
                         "shorter lengths")
    tool = np.asarray(tool_s, dtype=float)[..., None]
    wanted = np.asarray(sessions, dtype=float)[..., None]
    n = np.minimum(wanted, capacity) if hold else wanted
    # Prefill per call: held caches leave only the new tokens to prefill, on top of the cached ones.
    new = np.where(hold & (calls > 0), context_growth, context)
    cached = context - new
    prefill = np.where(new > 0, parallel.pass_time(spec, device, 1, cached, chips, 1, False, np.maximum(new, 1.0),
                                                   "prefill", assumptions)["total"], 0.0)
    mean_prefill = prefill.mean()
    gaps = (steps - 1) / steps * tool  # a task's tool time per call

    def call_time(batch):
        # Decode passes at each call's mean context, averaged over the task's calls, plus the stalls
        # of the batch's next prefills (batch prompts per output_tokens tokens, as serving.serve counts).
        passes = parallel.pass_time.unchecked(spec, device, np.maximum(batch, 1.0), context + output_tokens / 2,
                                              chips, 1, False, 1, "decode", assumptions)["total"]
        tpot = passes.mean(axis=-1, keepdims=True) + batch * mean_prefill / output_tokens
        return mean_prefill + output_tokens * tpot, tpot

    low, high = np.zeros_like(n * gaps), np.broadcast_to(n, (n * gaps).shape).copy()
    for _ in range(BISECTIONS):
        mid = (low + high) / 2
        r, _ = call_time(mid)
        above = n * r / (r + gaps) > mid  # Little's law asks for more sessions in calls than mid
        low, high = np.where(above, mid, low), np.where(above, high, mid)
    batch = (low + high) / 2
    r, tpot = call_time(batch)
    cycle = r + gaps
    busy = 1 - (1 - r / cycle) ** n
    watts = chips * device.power_w * (idle + (active - idle) * busy)
    task_s = steps * cycle
    energy = watts * task_s / n
    rent = chips * _price_per_chip_hour(accelerator) * task_s / n / 3600
    electricity = energy / 3.6e6 * catalog.assumption("electricity_price_usd_per_kwh")
    out = {"sessions_served": n, "capacity": np.full_like(n, capacity), "batch": batch, "tpot_s": tpot, "call_s": r,
           "cycle_s": cycle, "task_s": task_s, "calls_per_s": n / cycle, "busy_fraction": busy, "instance_w": watts,
           "energy_j": energy, "rent_usd": rent, "electricity_usd": electricity, "cost_usd": rent + electricity,
           "output_tokens": np.full_like(n, steps * output_tokens)}
    shape = np.broadcast(*(v[..., 0] for v in out.values())).shape
    return {k: np.broadcast_to(v[..., 0], shape).astype(float) for k, v in out.items()}


@checks.validated(**LOOP)
def per_watt_error(model: str, accelerator: str, sessions, steps: int, tool_s, initial_context: float,
                   context_growth: float, output_tokens: float, hold: bool = True, chips: int | None = None,
                   idle_fraction: float | None = None, active_fraction: float | None = None,
                   assumptions: Assumptions = DEFAULTS) -> dict:
    """How far a per-watt figure from single-round requests misstates an agent task.

    The single-round figure is the same instance and loop at the same sessions with one call of
    the table workload's mean drawn lengths and no tool time (how InferenceX runs 8k/1k): its
    energy and cost per output token, times the task's output tokens, is the per-watt estimate of
    the task. Returns the task's :func:`closed_loop` dict plus ``estimate_energy_j``,
    ``estimate_cost_usd``, ``energy_ratio`` and ``cost_ratio`` (task ÷ estimate; above 1 the
    per-watt figure understates the task)."""
    drawn = catalog.lengths()
    final = _final_context(initial_context, steps, context_growth, output_tokens)
    task = closed_loop.unchecked(model, accelerator, sessions, steps, tool_s, initial_context, context_growth,
                                 output_tokens, hold, chips, idle_fraction, active_fraction, assumptions)
    chips = instance_chips(model, accelerator, final) if chips is None else chips
    bench = closed_loop.unchecked(model, accelerator, sessions, 1, 0.0, drawn.isl_mean, 0.0, drawn.osl_mean, True,
                                  chips, idle_fraction, active_fraction, assumptions)
    per_token_j = bench["energy_j"] / drawn.osl_mean
    per_token_usd = bench["cost_usd"] / drawn.osl_mean
    estimate_j = per_token_j * task["output_tokens"]
    estimate_usd = per_token_usd * task["output_tokens"]
    return {**task, "estimate_energy_j": estimate_j, "estimate_cost_usd": estimate_usd,
            "energy_ratio": task["energy_j"] / estimate_j, "cost_ratio": task["cost_usd"] / estimate_usd}


def simulate_closed_loop(sessions: int, *, step_time_s, prefill_s: float, output_tokens: int, tool_s: float,
                         calls: int = 4000, warmup: int = 400, seed: int = 0) -> dict:
    """A closed loop run call by call, to check :func:`closed_loop`'s mean-value solution against.

    ``sessions`` sessions each alternate a call (prefilled in ``prefill_s`` seconds, which stalls the
    running batch, then ``output_tokens`` decode steps of ``step_time_s[b]`` seconds at batch ``b``)
    and a tool of exponentially distributed length, mean ``tool_s``. Deterministic per seed. Returns
    calls completed per second and the mean cycle (s, from one call's start to the next's) after
    the warm-up calls, and the mean batch decoding (weighted by time). ``step_time_s[0]`` is never
    read (no batch decodes empty); the other steps must take time. ValueError where the calls
    measured after the warm-up cannot give a rate: fewer than two, or all ending at one instant."""
    sessions = checks.integer("sessions", sessions, maximum=4096)
    output_tokens = checks.integer("output_tokens", output_tokens, maximum=100_000)
    prefill_s = checks.scalar("prefill_s", prefill_s, minimum=0.0, maximum=checks.MAX_SECONDS)
    tool_s = checks.scalar("tool_s", tool_s, minimum=0.0, maximum=checks.MAX_SECONDS)
    calls, warmup = checks.integer("calls", calls, minimum=2, maximum=1_000_000), checks.integer("warmup", warmup, minimum=0)
    if warmup > calls - 2:  # a rate needs two calls measured after the warm-up
        raise ValueError(f"warmup must be at most calls − 2 ({calls - 2}), got {warmup}")
    if calls * output_tokens > checks.MAX_SIMULATED_TOKENS:
        raise ValueError(f"calls × output_tokens must be at most {checks.MAX_SIMULATED_TOKENS:,} decode steps to "
                         f"simulate, got {calls * output_tokens:,}")
    step = checks.array("step_time_s", step_time_s, minimum=0.0, maximum=checks.MAX_SECONDS)
    if step.shape != (sessions + 1,):
        raise ValueError(f"step_time_s must give one time per batch from 0 to sessions ({sessions}), got shape {step.shape}")
    stalled = np.flatnonzero(step[1:] <= 0)  # a step that takes no time leaves the clock and the batch's mean undefined
    if stalled.size:
        raise ValueError(f"step_time_s must be greater than 0 at every batch from 1 to sessions, got 0 at batch {1 + int(stalled[0])}")
    rng = np.random.default_rng(checks.integer("seed", seed, minimum=0))
    draw = (lambda size=None: rng.exponential(tool_s, size)) if tool_s > 0 else (lambda size=None: np.zeros(() if size is None else size))
    ready = np.asarray(draw(sessions), dtype=float)  # when each session's tool returns
    in_call = np.zeros(sessions, dtype=bool)
    remaining = np.zeros(sessions, dtype=int)
    last_start = np.full(sessions, np.nan)
    cycles, ends, clock, batch_time, decode_time = [], [], 0.0, 0.0, 0.0
    while len(ends) < calls:
        joining = ~in_call & (ready <= clock)
        if not joining.any() and not in_call.any():
            clock = float(ready.min())  # every session is in a tool: idle until the first returns
            continue
        for s in np.flatnonzero(joining):
            if len(ends) >= warmup and not np.isnan(last_start[s]):
                cycles.append(ready[s] - last_start[s])
            last_start[s], remaining[s], in_call[s] = ready[s], output_tokens, True
        running = int(in_call.sum())
        clock += joining.sum() * prefill_s + step[running]
        batch_time, decode_time = batch_time + running * step[running], decode_time + step[running]
        remaining[in_call] -= 1
        for s in np.flatnonzero(in_call & (remaining == 0)):
            ends.append(clock)
            ready[s], in_call[s] = clock + float(draw()), False
    times = np.array(ends[warmup:])
    if times[-1] <= times[0] or not cycles:
        raise ValueError(f"the {len(times)} calls measured after the warm-up (calls − warmup) ended at one instant, or "
                         f"no session of {sessions} started a second call: raise calls, or lower warmup or sessions")
    return {"calls_per_s": (len(times) - 1) / (times[-1] - times[0]), "cycle_s": float(np.mean(cycles)),
            "batch": batch_time / decode_time}
