"""Agent tasks and the serving simulation: known values, compounding, and the queueing limit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
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
    curve = load.load_curve(16, [1.0, 4.0, 8.0], requests=800)
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
