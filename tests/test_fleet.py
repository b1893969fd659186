"""Fleet assignment: a known optimum, agreement with brute force, and the labelled assumptions."""

from __future__ import annotations


import numpy as np
import pytest

from perwatt import catalog, figures, fleet


def _toy():
    workloads = [fleet.Workload("w1", 1, 1, 0, 100.0), fleet.Workload("w2", 1, 1, 0, 400.0)]
    a = fleet.Hardware("a", "A", 1.0, 0.0, {"w1": 10.0, "w2": 10.0})
    b = fleet.Hardware("b", "B", 1.0, 0.0, {"w1": 20.0, "w2": 40.0}, supply=10.0)
    return workloads, [a, b]


def test_known_optimum_puts_the_scarce_chip_where_its_advantage_is_largest():
    # B is 2× better on w1 but 4× on w2; with 10 B chips the optimum serves all of w2 on B
    # (400 / 40 = 10 chips) and all of w1 on A (100 / 10 = 10 chips): 20 chip-hours, US$20.
    workloads, hardware = _toy()
    plan = fleet.assign(workloads, hardware, price_usd_per_kwh=0.0, pue=1.0).set_index(["workload", "hardware"])["chips"]
    assert plan[("w2", "b")] == pytest.approx(10.0)
    assert plan[("w1", "a")] == pytest.approx(10.0)
    assert plan[("w1", "b")] == pytest.approx(0.0, abs=1e-9)
    assert plan[("w2", "a")] == pytest.approx(0.0, abs=1e-9)
    assert fleet.assign(workloads, hardware, 0.0, 1.0)["total_usd_per_hour"].iloc[0] == pytest.approx(20.0)


def test_the_programme_matches_a_brute_force_search():
    workloads, hardware = _toy()
    best = np.inf
    # Split B's ten chips between the workloads and fill the rest with whole A chips.
    for b1 in range(11):
        for b2 in range(11 - b1):
            a1 = max(0, int(np.ceil((100 - 20 * b1) / 10)))
            a2 = max(0, int(np.ceil((400 - 40 * b2) / 10)))
            best = min(best, a1 + a2 + b1 + b2)
    assert fleet.assign(workloads, hardware, 0.0, 1.0)["total_usd_per_hour"].iloc[0] == pytest.approx(best)


def test_every_workload_is_served_with_whole_chips():
    frame = fleet.scenario(0.5, 100.0, 0.08)
    assert (frame["chips"] == frame["chips"].round()).all()
    served = frame.groupby("workload")["output_tokens_per_s"].sum()
    # Whole chips overshoot the demand by less than the largest chip's capacity.
    overshoot = frame.groupby("workload").apply(lambda g: (g["output_tokens_per_s"] / g["chips"]).max(),
                                                include_groups=False)
    for workload in ("chat", "agent"):
        demand = catalog.assumption("fleet_output_tokens_per_s") * 0.5
        assert demand <= served[workload] < demand + overshoot[workload]


def test_integrality_changes_the_choice_of_chip():
    # 15 tokens/s to serve. A: 10 per chip at US$1/h; B: 15 per chip at US$1.6/h. Fractions of a
    # chip: 1.5 A for US$1.5 (A is cheaper per token). Whole chips: 2 A cost US$2, 1 B US$1.6.
    workloads = [fleet.Workload("w", 1, 1, 0, 15.0)]
    hardware = [fleet.Hardware("a", "A", 1.0, 0.0, {"w": 10.0}), fleet.Hardware("b", "B", 1.6, 0.0, {"w": 15.0})]
    whole = fleet.assign(workloads, hardware, 0.0, 1.0).set_index("hardware")
    assert whole["chips"].to_dict() == {"a": 0.0, "b": 1.0}
    assert whole["total_usd_per_hour"].iloc[0] == pytest.approx(1.6)
    relaxed = fleet.assign(workloads, hardware, 0.0, 1.0, integral=False).set_index("hardware")
    assert relaxed["chips"].to_dict() == pytest.approx({"a": 1.5, "b": 0.0})
    assert relaxed["total_usd_per_hour"].iloc[0] == pytest.approx(1.5)


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
        fleet.assign(workloads, hardware, 0.08, 1.0)


def test_figure_rows_are_the_model_plan():
    frame = figures.fleet().frame(agent_share=0.75, agent_min_rate=200, price_usd_per_kwh=0.2)
    plan = fleet.scenario(0.75, 200.0, 0.2)
    assert frame["chips"].to_list() == pytest.approx(plan["chips"].to_list())
