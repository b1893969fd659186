"""Fleet assignment: a known optimum, agreement with brute force, and the labelled assumptions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from perwatt import figures, fleet


def _toy():
    workloads = [fleet.Workload("w1", 1, 1, 0, 100.0), fleet.Workload("w2", 1, 1, 0, 400.0)]
    a = fleet.Hardware("a", "A", 1.0, 0.0, {"w1": 10.0, "w2": 10.0})
    b = fleet.Hardware("b", "B", 1.0, 0.0, {"w1": 20.0, "w2": 40.0}, supply=10.0)
    return workloads, [a, b]


def test_known_optimum_puts_the_scarce_chip_where_its_advantage_is_largest():
    # B is 2× better on w1 but 4× on w2; with 10 B chips the optimum serves all of w2 on B
    # (400 / 40 = 10 chips) and all of w1 on A (100 / 10 = 10 chips): 20 chip-hours, US$20.
    workloads, hardware = _toy()
    plan = fleet.assign(workloads, hardware, price_usd_per_kwh=0.0).set_index(["workload", "hardware"])["chips"]
    assert plan[("w2", "b")] == pytest.approx(10.0)
    assert plan[("w1", "a")] == pytest.approx(10.0)
    assert plan[("w1", "b")] == pytest.approx(0.0, abs=1e-9)
    assert plan[("w2", "a")] == pytest.approx(0.0, abs=1e-9)
    assert fleet.assign(workloads, hardware, 0.0)["total_usd_per_hour"].iloc[0] == pytest.approx(20.0)


def test_linear_programme_matches_a_brute_force_search():
    workloads, hardware = _toy()
    best = np.inf
    # Split B's ten chips between the workloads in steps of 0.5 and fill the rest with A.
    for b1 in np.arange(0, 10.5, 0.5):
        for b2 in np.arange(0, 10.5 - b1, 0.5):
            a1 = max(0.0, (100 - 20 * b1) / 10)
            a2 = max(0.0, (400 - 40 * b2) / 10)
            best = min(best, a1 + a2 + b1 + b2)
    assert fleet.assign(workloads, hardware, 0.0)["total_usd_per_hour"].iloc[0] == pytest.approx(best)


def test_every_workload_is_served():
    frame = fleet.scenario(0.5, 100.0, 0.08)
    served = frame.groupby("workload")["output_tokens_per_s"].sum()
    assert served["chat"] == pytest.approx(fleet.TOTAL_OUTPUT_TOKENS_PER_S * 0.5, rel=1e-6)
    assert served["agent"] == pytest.approx(fleet.TOTAL_OUTPUT_TOKENS_PER_S * 0.5, rel=1e-6)


def test_only_jalapeno_rests_on_assumptions_and_says_so():
    frame = fleet.scenario(0.5, 100.0, 0.08)
    assumed = set(frame.loc[frame["assumed"] == 1, "hardware"])
    assert assumed == {"jalapeno"}
    assert "assumed" in frame.loc[frame["hardware"] == "jalapeno", "hardware_label"].iloc[0]


def test_supply_limit_holds_and_tighter_targets_cost_more():
    frame = fleet.scenario(0.5, 100.0, 0.08)
    assert frame.loc[frame["hardware"] == "jalapeno", "chips"].sum() <= fleet.JalapenoAssumptions().supply_chips + 1e-6
    costs = [fleet.scenario(0.5, rate, 0.08)["total_usd_per_hour"].iloc[0] for rate in (50.0, 100.0, 200.0)]
    assert costs == sorted(costs)


def test_unservable_workload_is_an_error():
    workloads = [fleet.Workload("w", 1, 1, 0, 100.0)]
    hardware = [fleet.Hardware("a", "A", 1.0, 0.0, {"w": 0.0})]
    with pytest.raises(ValueError, match="no assignment"):
        fleet.assign(workloads, hardware)


def test_figure_rows_are_the_model_plan():
    frame = figures.fleet_figure().frame(agent_share=0.75, agent_min_rate=200, price_usd_per_kwh=0.2)
    plan = fleet.scenario(0.75, 200.0, 0.2)
    assert frame["chips"].to_list() == pytest.approx(plan["chips"].to_list())
