"""Agent tasks and the serving simulation: known values, compounding, and the queueing limit."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perwatt import agents, load

PROFILE = agents.SystemProfile(prefill_s_per_token=1e-4, tpot_s=0.01, joules_per_token=0.05)


def test_task_known_values():
    # 3 calls with contexts of 1,000, 1,500 and 2,000 tokens: 4,500 prompt tokens.
    out = agents.task(PROFILE, 3, 1000, 500, 0.2, 2.0, 100)
    uncached = 4500 * 0.8
    assert float(out["uncached_tokens"]) == pytest.approx(uncached)
    assert float(out["latency_s"]) == pytest.approx(uncached * 1e-4 + 300 * 0.01 + 2 * 2.0)
    assert float(out["energy_j"]) == pytest.approx((uncached + 300) * 0.05)


@given(st.integers(1, 60), st.floats(0, 4000), st.floats(0, 0.95))
def test_closed_form_sum_equals_the_loop(steps, growth, hit):
    out = agents.task(PROFILE, steps, 8192, growth, hit, 0.0, 0)
    looped = sum((8192 + i * growth) * (1 - hit) for i in range(steps)) * 1e-4
    assert float(out["prefill_s"]) == pytest.approx(looped, rel=1e-9)


def test_per_token_gap_compounds_linearly_with_calls():
    slow = agents.SystemProfile(1e-4, 0.02, 0.05)
    gaps = [float(agents.task(slow, n, 1000, 0, 0, 0, 500)["decode_s"] - agents.task(PROFILE, n, 1000, 0, 0, 0, 500)["decode_s"])
            for n in (1, 10, 50)]
    assert gaps == pytest.approx([5.0, 50.0, 250.0])


def test_tool_time_dilutes_the_advantage():
    one = agents.task_comparison("deepseek-r1", 10, 1000, 0.6, 0)["latency_advantage"].iloc[0]
    slow_tools = agents.task_comparison("deepseek-r1", 10, 1000, 0.6, 10)["latency_advantage"].iloc[0]
    assert 1 < slow_tools < one


@pytest.mark.parametrize("rate", [20.0, 50.0, 80.0])
def test_simulation_matches_md1_in_its_limit(rate):
    # Batch of one, one output token, fixed service of 10 ms: an M/D/1 queue.
    result = load.simulate_serving(rate, prefill_s=0.004, step_time_s=np.array([0.0, 0.006]), output_tokens=1,
                                     max_batch=1, requests=60_000, warmup=3_000, seed=3)
    assert result["mean_s"] == pytest.approx(load.md1_mean_latency(rate, 0.01), rel=0.05)


def test_simulation_is_deterministic_per_seed():
    kwargs = dict(prefill_s=0.01, step_time_s=np.linspace(0.005, 0.02, 9), output_tokens=20, max_batch=8, requests=500)
    assert load.simulate_serving(5.0, seed=4, **kwargs) == load.simulate_serving(5.0, seed=4, **kwargs)
    assert load.simulate_serving(5.0, seed=4, **kwargs) != load.simulate_serving(5.0, seed=5, **kwargs)


def test_load_trades_latency_for_throughput():
    # Rates below where a cap of 16 saturates (about 4 requests/s): past it, the numbers measure how
    # long the simulation ran, not a trade-off.
    curve = load.load_curve(16, [0.5, 1.0, 3.0], requests=800)
    assert curve["throughput_tokens_per_s"].is_monotonic_increasing
    assert curve["p99_s"].is_monotonic_increasing
    energy = load.joules_per_output_token(curve["rated_power_w"], curve["chips"], curve["busy_fraction"],
                                            curve["throughput_tokens_per_s"], 0.2)
    assert energy.is_monotonic_decreasing
    assert (curve["p99_s"] >= curve["p50_s"]).all()


def test_idle_and_busy_power_known_value():
    # 2 chips of 1,000 W, busy 25 % of the time, idle at 10 % of the rating, serving 500 tokens/s:
    # draw = 2,000 W × (0.25 + 0.1 × 0.75) = 650 W, so 650 / 500 = 1.3 J per output token.
    assert load.joules_per_output_token(1000.0, 2, 0.25, 500.0, 0.1) == pytest.approx(1.3)
    # Charging idle chips their full rating gives the old, all-rated figure: 2,000 / 500.
    assert load.joules_per_output_token(1000.0, 2, 0.25, 500.0, 1.0) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="idle_power_fraction"):
        load.joules_per_output_token(1000.0, 2, 0.25, 500.0, 1.5)


def test_unstable_queue_is_refused():
    with pytest.raises(ValueError, match="unstable"):
        load.md1_mean_latency(120.0, 0.01)


@pytest.mark.parametrize(("kwargs", "name"), [({"steps": 0}, "steps"), ({"cache_hit": 1.5}, "cache_hit"),
                                              ({"tool_s": -1}, "tool_s"), ({"context_growth": -5}, "context_growth")])
def test_bad_task_input_names_the_parameter(kwargs, name):
    args = {"steps": 5, "initial_context": 1000, "context_growth": 100, "cache_hit": 0.5, "tool_s": 1, "output_tokens": 10}
    with pytest.raises(ValueError, match=name):
        agents.task(PROFILE, **{**args, **kwargs})


def test_profiles_prefill_per_token_is_ttft_over_the_prompt():
    # Jalapeño: its implied TTFT at the workload's mean lengths ÷ the mean prompt (not the output);
    # the baseline: the roofline's prefill of one mean prompt ÷ its length.
    from perwatt import benchmark, catalog, roofline
    drawn = catalog.lengths()
    audit = benchmark.latency_audit(benchmark.book_results(), drawn.osl_mean)
    row = audit[(audit["model"] == "deepseek-r1") & (audit["system"] == catalog.CANDIDATE)].iloc[0]
    got = agents.profiles("deepseek-r1")
    assert got[catalog.CANDIDATE].prefill_s_per_token == pytest.approx(row["implied_ttft_s"] / drawn.isl_mean)
    assert got[catalog.CANDIDATE].tpot_s == pytest.approx(row["tpot_ms"] / 1000)
    assert got[catalog.CANDIDATE].joules_per_token == pytest.approx(1000 / row["tps_per_kw"])
    baseline = next(s for s in got if s != catalog.CANDIDATE)
    spec, device = roofline.model_spec("deepseek-r1"), roofline.chip(baseline)
    chips = roofline.chips_needed(spec, device, 1, drawn.isl_mean)
    expected = float(roofline.prefill_time(spec, device, drawn.isl_mean, chips)) / drawn.isl_mean
    assert got[baseline].prefill_s_per_token == pytest.approx(expected)


def test_task_boundaries_one_call_and_a_full_cache():
    # One call, no tool time: latency = 1,000 × 1e-4 + 100 × 0.01 = 1.1 s. A full cache hit leaves only decode.
    one = agents.task(PROFILE, 1, 1000, 700, 0.0, 5.0, 100)
    assert float(one["latency_s"]) == pytest.approx(1.1) and float(one["tool_total_s"]) == 0.0
    cached = agents.task(PROFILE, 4, 1000, 250, 1.0, 0.5, 30)
    assert float(cached["prefill_s"]) == 0.0
    assert float(cached["latency_s"]) == pytest.approx(120 * 0.01 + 3 * 0.5)
    assert float(cached["energy_j"]) == pytest.approx(120 * 0.05)


@pytest.mark.parametrize(("call", "name"), [
    (lambda: load.simulate_serving(float("nan"), prefill_s=0.01, step_time_s=np.ones(3), output_tokens=2,
                                   max_batch=2), "arrival_rate"),
    (lambda: load.simulate_serving(1.0, prefill_s=-1, step_time_s=np.ones(3), output_tokens=2, max_batch=2),
     "prefill_s"),
    (lambda: load.simulate_serving(1.0, prefill_s=0.01, step_time_s=np.ones(3), output_tokens=2, max_batch=2,
                                   requests=0), "requests"),
    (lambda: load.md1_mean_latency(1, -1), "service_s"),
    (lambda: agents.task(PROFILE, 3, 1000, 500, float("nan"), 2.0, 100), "cache_hit"),
])
def test_issue_16_bad_calls_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_md1_known_value():
    # λ = 50/s, S = 10 ms: ρ = 0.5, W = 0.01 + 0.5 × 0.01 / (2 × 0.5) = 0.015 s.
    assert load.md1_mean_latency(50.0, 0.01) == pytest.approx(0.015)


def test_task_comparison_ratios_known_value():
    frame = agents.task_comparison("deepseek-r1", 5, 2000, 0.5, 3.0).set_index("system")
    candidate, baseline = frame.loc["jalapeno"], frame.drop(index="jalapeno").iloc[0]
    assert candidate["latency_advantage"] == pytest.approx(baseline["latency_s"] / candidate["latency_s"])
    assert candidate["model_time_advantage"] == pytest.approx(baseline["model_s"] / candidate["model_s"])
    assert candidate["tool_total_s"] == pytest.approx(4 * 3.0)


def test_an_idle_queue_known_values():
    # Arrivals about 1,000 s apart and 1 s of service each: nobody waits, so every latency is 1 s,
    # the server is busy n s of the clock, and throughput is the tokens after warm-up over their span.
    # Two output tokens each: a 0.25 s prefill with the first 0.25 s step, then a second 0.25 s step.
    n, warmup = 50, 5
    out = load.simulate_serving(0.001, prefill_s=0.25, step_time_s=np.array([0.0, 0.25]), output_tokens=2,
                                max_batch=1, requests=n, warmup=warmup, seed=7)
    arrivals = np.cumsum(np.random.default_rng(7).exponential(1000.0, n))
    assert out["p50_s"] == pytest.approx(0.75) and out["mean_s"] == pytest.approx(0.75)
    assert out["busy_fraction"] == pytest.approx(n * 0.75 / (arrivals[-1] + 0.75))
    assert out["throughput_tokens_per_s"] == pytest.approx(2 * (n - warmup) / (arrivals[-1] + 0.75 - arrivals[warmup]))


def test_prompts_admitted_together_share_one_prefill_pass():
    # Three requests a microsecond apart, one output token each, at most two in flight. The first is
    # admitted alone: prefill 0.25 + step 0.1. The other two arrive meanwhile and are admitted together:
    # one prefill pass for both (0.4) + a step at batch 2 (0.15). Done 0.9 s after the first arrival,
    # so 3 tokens over 0.9 s; prefilled one after another (0.25 each) it would take 1.0 s.
    kwargs = dict(step_time_s=np.array([0.0, 0.1, 0.15]), output_tokens=1, max_batch=2, requests=3, warmup=0, seed=2)
    together = load.simulate_serving(1e6, prefill_s=np.array([0.0, 0.25, 0.4]), **kwargs)
    assert together["throughput_tokens_per_s"] == pytest.approx(3 / 0.9, rel=1e-4)
    apart = load.simulate_serving(1e6, prefill_s=0.25, **kwargs)
    assert apart["throughput_tokens_per_s"] == pytest.approx(3 / 1.0, rel=1e-4)
    assert load.simulate_serving(1e6, prefill_s=lambda k: [0.0, 0.25, 0.4][k], **kwargs) == together


@pytest.mark.parametrize("prefill", [np.array([0.1, 0.2, 0.3]), np.array([0.0, 0.3, 0.2]), np.array([0.0, 0.1])])
def test_prefill_times_must_start_at_zero_grow_and_cover_the_cap(prefill):
    with pytest.raises(ValueError, match="prefill_s"):
        load.simulate_serving(1.0, prefill_s=prefill, step_time_s=np.ones(3), output_tokens=2, max_batch=2)


def test_a_lone_request_pays_the_fixed_cost_of_every_layer_of_every_pass():
    # At a load so light that the median request runs alone, its latency is one prefill pass and 256
    # decode steps at batch 1, as the serving model prices them. No bandwidth removes the fixed part:
    # gpt-oss-120b's 36 layers at 103 µs each, 3.708 ms a pass, 257 passes: at least 0.953 s.
    from perwatt import catalog, parallel, roofline
    spec, device = roofline.model_spec(load.LOAD_MODEL), roofline.chip(load.LOAD_ACCELERATOR)
    isl = float(catalog.workload()["isl_tokens"])
    prefill = float(parallel.pass_time(spec, device, 1, 0.0, 1, 1, False, isl, "prefill")["total"])
    step = float(roofline.decode_time(spec, device, 1, isl + load.LOAD_OSL / 2, 1))
    curve = load.load_curve(16, [0.01], requests=200)
    assert curve["chips"].iloc[0] == 1
    assert curve["p50_s"].iloc[0] == pytest.approx(prefill + load.LOAD_OSL * step, rel=1e-9)
    floor = 257 * 36 * 103e-6
    assert floor == pytest.approx(0.953, abs=1e-3) and curve["p50_s"].iloc[0] > floor


def test_the_simulated_instance_is_latency_bound_alone_and_memory_bound_batched():
    # The chapter's reading of the simulated instance: at a batch of one most of a decode step is the
    # fixed cost per layer (36 × 103 µs = 3.708 ms); at 128 the step is still memory-bound: full compute
    # efficiency would not shorten it, full bandwidth efficiency would.
    from perwatt import catalog, parallel, roofline, specs
    spec, device = roofline.model_spec(load.LOAD_MODEL), roofline.chip(load.LOAD_ACCELERATOR)
    context = float(catalog.workload()["isl_tokens"]) + load.LOAD_OSL / 2
    one = parallel.pass_time(spec, device, 1, context)
    assert float(one["fixed"]) == pytest.approx(36 * 103e-6)
    assert float(one["fixed"] / one["total"]) > 0.5

    def step(assumptions):
        return float(roofline.decode_time(spec, device, 128, context, 1, assumptions))

    assert step(specs.Assumptions(compute_efficiency=1.0)) == pytest.approx(step(specs.DEFAULTS), rel=1e-9)
    assert step(specs.Assumptions(bandwidth_efficiency=1.0)) < 0.8 * step(specs.DEFAULTS)


# --- Agents that wait: the closed loop (perwatt.agent_loop) -----------------------------------

from perwatt import agent_loop, catalog, parallel, roofline  # noqa: E402

LOOP_MODELS = ("gpt-oss-120b", "deepseek-r1")


@pytest.mark.parametrize("model", LOOP_MODELS)
def test_energy_per_task_matches_the_closed_form_without_tools(model):
    # With no tool time every session is always in a call (b = N) and the chip is always busy, so
    # one task's energy is the rated power × the busy share × the task's calls × one call's time ÷ N.
    n, c0, g, osl, chips = 4, 2000.0, 500.0, 100.0, 8
    spec, device = roofline.model_spec(model), roofline.chip("gb200")
    contexts = np.array([2000.0, 2500.0, 3000.0])
    prefills = [parallel.pass_time(spec, device, 1, 0.0, chips, 1, False, 2000.0, "prefill")["total"],
                parallel.pass_time(spec, device, 1, 2000.0, chips, 1, False, 500.0, "prefill")["total"],
                parallel.pass_time(spec, device, 1, 2500.0, chips, 1, False, 500.0, "prefill")["total"]]
    p_mean = float(np.mean(prefills))
    steps_s = [float(parallel.pass_time(spec, device, n, c + osl / 2, chips, 1, False, 1, "decode")["total"])
               for c in contexts]
    tpot = np.mean(steps_s) + n * p_mean / osl
    call = p_mean + osl * tpot
    energy = chips * 1200.0 * 0.5 * 3 * call / n
    rent = chips * 2.21 * 3 * call / n / 3600
    out = agent_loop.closed_loop(model, "gb200", n, 3, 0.0, c0, g, osl, True, chips, 0.2, 0.5)
    assert float(out["batch"]) == pytest.approx(n, rel=1e-6)
    assert float(out["busy_fraction"]) == pytest.approx(1.0)
    assert float(out["tpot_s"]) == pytest.approx(tpot, rel=1e-6)
    assert float(out["energy_j"]) == pytest.approx(energy, rel=1e-6)
    assert float(out["cost_usd"]) == pytest.approx(rent + energy / 3.6e6 * 0.08, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(LOOP_MODELS), st.integers(1, 64), st.integers(1, 20), st.booleans(),
       st.lists(st.floats(0, 120), min_size=2, max_size=6))
def test_energy_and_cost_per_task_never_fall_as_tools_take_longer(model, sessions, steps, hold, tools):
    tools = np.sort(np.array(tools))
    out = agent_loop.closed_loop(model, "gb200", sessions, steps, tools, 4000.0, 800.0, 500.0, hold)
    assert np.all(np.diff(out["energy_j"]) >= -1e-9 * out["energy_j"][:-1])
    assert np.all(np.diff(out["cost_usd"]) >= -1e-9 * out["cost_usd"][:-1])
    assert np.all(np.diff(out["calls_per_s"]) <= 1e-9 * out["calls_per_s"][:-1])  # a longer think time, fewer calls


@pytest.mark.parametrize("model", LOOP_MODELS)
def test_closed_loop_obeys_littles_law_and_agrees_with_a_simulation(model):
    n, c0, osl, tool, chips = 12, 2000.0, 48, 2.0, agent_loop.instance_chips(model, "gb200", 2048.0)
    # Two calls of one length, cache dropped: every call is alike, and the mean tool gap is tool.
    loop = agent_loop.closed_loop(model, "gb200", n, 2, 2 * tool, c0, 0.0, osl, False, chips)
    assert float(loop["calls_per_s"] * loop["cycle_s"]) == pytest.approx(n)
    spec, device = roofline.model_spec(model), roofline.chip("gb200")
    batch = np.maximum(np.arange(n + 1.0), 1.0)
    step = parallel.pass_time(spec, device, batch, c0 + osl / 2, chips, 1, False, 1, "decode")["total"]
    prefill = float(parallel.pass_time(spec, device, 1, 0.0, chips, 1, False, c0, "prefill")["total"])
    sim = agent_loop.simulate_closed_loop(n, step_time_s=step, prefill_s=prefill, output_tokens=osl, tool_s=tool,
                                          calls=1500, warmup=150, seed=3)
    assert sim["calls_per_s"] * sim["cycle_s"] == pytest.approx(n, rel=0.03)  # Little's law in the simulation
    assert float(loop["calls_per_s"]) == pytest.approx(sim["calls_per_s"], rel=0.06)


@pytest.mark.parametrize(("change", "named"), [
    (dict(step_time_s=[0.0, 0.0, 0.0]), "step_time_s must be greater than 0 at every batch from 1 to sessions, got 0 at batch 1"),
    (dict(step_time_s=[0.0, 0.01, 0.0]), "got 0 at batch 2"),
    (dict(calls=2, warmup=1), "warmup must be at most calls − 2 (0), got 1"),
    # Two sessions with no tool time start together and end together: both measured calls at one instant.
    (dict(tool_s=0.0, calls=2, warmup=0), "the 2 calls measured after the warm-up (calls − warmup) ended at one instant"),
])
def test_a_simulation_that_cannot_give_a_rate_says_which_input_to_change(change, named):
    # Found by the full fuzz tier: zero-time steps gave a batch of NaN, and these others a rate of 0/0 or x/0.
    good = dict(sessions=2, step_time_s=[0.0, 0.01, 0.012], prefill_s=0.0, output_tokens=4, tool_s=0.1, calls=40, warmup=4)
    kwargs = good | change
    with pytest.raises(ValueError, match=re.escape(named)):
        agent_loop.simulate_closed_loop(**kwargs)
    # The same call with its steps and call counts good again gives a rate (tool_s stays as changed).
    finite = agent_loop.simulate_closed_loop(**(kwargs | {k: good[k] for k in ("step_time_s", "calls", "warmup")}))
    assert all(np.isfinite(float(v)) and float(v) > 0 for v in finite.values())


@pytest.mark.parametrize("model", LOOP_MODELS)
def test_a_single_round_task_is_the_per_watt_estimate(model):
    drawn = catalog.lengths()
    out = agent_loop.per_watt_error(model, "gb200", np.array([1, 16, 64]), 1, 0.0, drawn.isl_mean, 0.0,
                                    drawn.osl_mean)
    assert out["energy_ratio"] == pytest.approx(1.0)
    assert out["cost_ratio"] == pytest.approx(1.0)
    waited = agent_loop.per_watt_error(model, "gb200", 8, 10, 30.0, drawn.isl_mean, 1000.0, drawn.osl_mean)
    assert float(waited["energy_ratio"]) > 1.5 and float(waited["cost_ratio"]) > float(waited["energy_ratio"])


def test_holding_caches_caps_the_sessions_an_instance_serves():
    held = agent_loop.closed_loop("deepseek-r1", "gb200", 512, 10, 5.0, 8000.0, 1000.0, 1000.0, True)
    dropped = agent_loop.closed_loop("deepseek-r1", "gb200", 512, 10, 5.0, 8000.0, 1000.0, 1000.0, False)
    assert float(held["sessions_served"]) == float(held["capacity"]) < 512
    assert float(dropped["sessions_served"]) == 512


def test_idle_draw_above_busy_draw_is_refused():
    with pytest.raises(ValueError, match="idle_fraction"):
        agent_loop.closed_loop("gpt-oss-120b", "gb200", 4, 2, 1.0, 1000.0, 100.0, 100.0, True, None, 0.6, 0.5)


# --- The agent task's comparison and figure frame, built directly, equal the pandas versions ------

def _reference_task_comparison(model, steps, context_growth, cache_hit, tool_s, initial_context=None,
                               output_tokens=None):
    """agents.task_comparison as it was: each system's task through the checked task, in a labelled frame."""
    drawn = catalog.lengths()
    initial_context = drawn.isl_mean if initial_context is None else initial_context
    output_tokens = drawn.osl_mean if output_tokens is None else output_tokens
    rows = []
    for system, profile in agents.profiles(model).items():
        result = agents.task(profile, steps, initial_context, context_growth, cache_hit, tool_s, output_tokens)
        rows.append({"system": system, **{k: float(v) for k, v in result.items()}})
    frame = catalog.label(pd.DataFrame(rows).assign(model=model))
    candidate = frame[frame["system"] == catalog.CANDIDATE].iloc[0]
    baseline = frame[frame["system"] != catalog.CANDIDATE].iloc[0]
    frame["latency_advantage"] = baseline["latency_s"] / candidate["latency_s"]
    frame["model_time_advantage"] = baseline["model_s"] / candidate["model_s"]
    return frame


def _reference_agent_task_frame(steps, context_growth, cache_hit, tool_s):
    """figures.agent_workloads.agent_task_frame as it was: the comparison melted and joined."""
    from perwatt.figures import agent_workloads
    wide = _reference_task_comparison(agent_workloads.AGENT_MODEL, int(steps), context_growth, cache_hit, tool_s)
    long = wide.melt(id_vars=["system", "system_label", "latency_s", "energy_j", "latency_advantage"],
                     value_vars=["prefill_s", "decode_s", "tool_total_s"], var_name="component", value_name="seconds")
    long["component"] = long["component"].map({"prefill_s": "prefill", "decode_s": "decode", "tool_total_s": "tools"})
    long["energy_kj"] = long["energy_j"] / 1000
    parts = wide.set_index("system")[["prefill_s", "decode_s", "tool_total_s"]]
    return long.join(parts, on="system")


def _identical(fast: pd.DataFrame, slow: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    assert list(fast.dtypes) == list(slow.dtypes) and fast.columns.dtype == slow.columns.dtype
    assert type(fast.index) is type(slow.index) and fast.index.equals(slow.index)
    for column in fast:  # bit for bit, not only within assert_frame_equal's notion of equal
        a, b = fast[column].to_numpy(), slow[column].to_numpy()
        assert a.tobytes() == b.tobytes() if a.dtype.kind == "f" else list(a) == list(b), column


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["deepseek-r1", "gpt-oss-120b", "kimi-k2.5"]), st.integers(1, 2000), st.floats(0, 1e5),
       st.floats(0, 1), st.floats(0, 1e4), st.one_of(st.none(), st.floats(0, 1e5)),
       st.one_of(st.none(), st.floats(1, 1e5)))
def test_task_comparison_equals_the_labelled_frame_it_was(model, steps, growth, hit, tool, context, outputs):
    _identical(agents.task_comparison(model, steps, growth, hit, tool, context, outputs),
               _reference_task_comparison(model, steps, growth, hit, tool, context, outputs))


def test_agent_task_frame_equals_the_melted_frame_it_was_across_the_grid():
    from perwatt.figures import agent_workloads
    # Every seventh setting of the figure's 300 (each control's every option among them): the reference
    # takes 15 ms a setting, and the whole grid is compared with the one taken before the change
    # outside the suite.
    for setting in list(agent_workloads.agent_task().settings())[::7]:
        _identical(agent_workloads.agent_task_frame(**setting), _reference_agent_task_frame(**setting))


def _reference_serving_load_frame(max_batch, arrival_rate, idle_power_fraction):
    """figures.agent_workloads.serving_load_frame as it was: the cached curve renamed, columns added to it."""
    from perwatt.figures import agent_workloads
    frame = agent_workloads._load_curve(int(max_batch)).rename(columns={"arrival_rate": "rate_rps"})
    frame["joules_per_output_token"] = load.joules_per_output_token(
        frame["rated_power_w"], frame["chips"], frame["busy_fraction"], frame["throughput_tokens_per_s"],
        idle_power_fraction)
    frame["selected"] = np.isclose(frame["rate_rps"], arrival_rate)
    return frame


def _reference_waiting_agents_frame(model, steps, cache, idle_fraction, active_fraction, measure):
    """figures.agent_workloads.waiting_agents_frame as it was: rows picked from the cached grid by .loc."""
    from perwatt.figures import agent_workloads
    grid = agent_workloads._loop_grid(model, int(steps), cache == "held")
    chosen = np.isclose(grid["idle"].to_numpy(), idle_fraction) & np.isclose(grid["active"].to_numpy(), active_fraction)
    frame = grid.loc[chosen, ["sessions", "session_label", "tool_s", "sessions_served"]].reset_index(drop=True)
    frame["ratio"] = grid.loc[chosen, f"{measure}_ratio"].to_numpy()
    return frame


@pytest.mark.parametrize(("figure", "reference"), [("serving_load", _reference_serving_load_frame),
                                                   ("waiting_agents", _reference_waiting_agents_frame)])
def test_load_and_waiting_frames_equal_the_frames_they_were_at_every_grid_setting(figure, reference):
    from perwatt.figures import agent_workloads
    fig = getattr(agent_workloads, figure)()
    for setting in fig.settings():
        _identical(fig.compute(**setting), reference(**setting))
