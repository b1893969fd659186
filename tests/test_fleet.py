"""Fleet assignment: a known optimum, agreement with brute force, and the labelled assumptions."""

from __future__ import annotations


import numpy as np
import pytest

from perwatt import catalog, figures, fleet


def _toy():
    workloads = [fleet.Workload("w1", 1, 1, 0, 100.0), fleet.Workload("w2", 1, 1, 0, 400.0)]
    a = fleet.Hardware("a", "A", 1.0, 1000.0, {"w1": 10.0, "w2": 10.0})
    b = fleet.Hardware("b", "B", 1.0, 1000.0, {"w1": 20.0, "w2": 40.0}, supply=10.0)
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


def test_every_workload_is_served_with_whole_instances():
    frame = fleet.scenario(0.25, 100.0, 0.08)
    assert (frame["instances"] == frame["instances"].round()).all()
    assert (frame["chips"] == frame["instances"] * frame["chips_per_instance"]).all()
    served = frame.groupby("workload")["output_tokens_per_s"].sum()
    # Whole instances overshoot the demand by less than the largest instance's capacity.
    overshoot = frame.groupby("workload").apply(lambda g: (g["output_tokens_per_s"] / g["instances"]).max(),
                                                include_groups=False)
    for workload, share in (("chat", 0.75), ("agent", 0.25)):
        demand = catalog.assumption("fleet_output_tokens_per_s") * share
        assert demand <= served[workload] < demand + overshoot[workload]


def test_integrality_changes_the_choice_of_chip():
    # 15 tokens/s to serve. A: 10 per chip at US$1/h; B: 15 per chip at US$1.6/h. Fractions of a
    # chip: 1.5 A for US$1.5 (A is cheaper per token). Whole chips: 2 A cost US$2, 1 B US$1.6.
    workloads = [fleet.Workload("w", 1, 1, 0, 15.0)]
    hardware = [fleet.Hardware("a", "A", 1.0, 1000.0, {"w": 10.0}), fleet.Hardware("b", "B", 1.6, 1000.0, {"w": 15.0})]
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
    hardware = [fleet.Hardware("a", "A", 1.0, 1000.0, {"w": 0.0})]
    with pytest.raises(ValueError, match="no assignment"):
        fleet.assign(workloads, hardware, 0.08, 1.0)


def test_figure_plan_is_the_brute_force_optimum_and_its_costs_add_up():
    # Share 0.75, agents at ≥ 200 tokens/s per user, US$0.20/kWh, PUE 1.1 (direct liquid): the
    # figure's plan checked against a search that never calls the solver (every split of the Jalapeño
    # supply, the rest filled with whole instances of one NVIDIA kind: a set of feasible plans, so the
    # optimum can be no dearer than its cheapest), and its costs recomputed from the chips' profiles.
    frame = figures.fleet().frame(agent_share=0.75, agent_min_rate=200, price_usd_per_kwh=0.2)
    workloads = fleet.scenario_workloads(0.75, 200.0)
    jalapeno = fleet.jalapeno_profile(fleet.MODEL, workloads, fleet.JalapenoAssumptions())
    nvidia = fleet.nvidia_profiles(fleet.MODEL, workloads)
    # A chip-hour costs its rent plus its rated kW × PUE × price: B200 1.95 + 1.0 × 1.1 × 0.2 = US$2.17.
    hourly = {h.name: h.usd_per_hour + h.power_w / 1000 * 1.1 * 0.2 for h in [*nvidia, jalapeno]}
    assert hourly["b200"] == pytest.approx(2.17)
    demand = {"chat": 0.25 * 20e6, "agent": 0.75 * 20e6}  # 20 M output tokens/s in all (assumptions.csv)
    supply = int(jalapeno.supply)

    def cheapest(workload: str) -> np.ndarray:
        # k Jalapeño chips (k = 0 … supply) on this workload, the rest in whole instances of the
        # cheapest single NVIDIA kind for what is left.
        k = np.arange(supply + 1)
        rest = np.maximum(demand[workload] - k * jalapeno.capacity[workload], 0)
        fill = np.min([np.ceil(rest / (h.capacity[workload] * h.chips_per_instance(workload)) - 1e-9)
                       * h.chips_per_instance(workload) * hourly[h.name] for h in nvidia], axis=0)
        return fill + k * hourly["jalapeno"]

    chat, agent = cheapest("chat"), cheapest("agent")
    agent_best = np.minimum.accumulate(agent)  # the cheapest agent plan with at most j Jalapeño chips
    best = min(chat[k] + agent_best[supply - k] for k in range(supply + 1))
    assert frame["total_usd_per_hour"].iloc[0] == pytest.approx(best, rel=1e-9)
    # The plan itself: whole instances, every workload served, Jalapeño within its supply, and the
    # cost it states is the cost of those chips.
    assert (frame["instances"] == frame["instances"].round()).all()
    capacity = {h.name: h.capacity for h in [*nvidia, jalapeno]}
    watts = {h.name: h.power_w for h in [*nvidia, jalapeno]}
    for workload, rows in frame.groupby("workload"):
        served = sum(n * capacity[h][workload] for h, n in zip(rows["hardware"], rows["chips"]))
        assert served >= demand[workload]
        usd = sum(n * hourly[h] for h, n in zip(rows["hardware"], rows["chips"]))
        kw = sum(n * watts[h] / 1000 * 1.1 for h, n in zip(rows["hardware"], rows["chips"]))
        assert rows["workload_usd_per_million_tokens"].iloc[0] == pytest.approx(usd / (served * 3600 / 1e6), rel=1e-9)
        assert rows["workload_kwh_per_million_tokens"].iloc[0] == pytest.approx(kw / (served * 3600 / 1e6), rel=1e-9)
    assert frame.loc[frame["hardware"] == "jalapeno", "chips"].sum() <= supply
    assert float((frame["chips"] * frame["hardware"].map(hourly)).sum()) == pytest.approx(best, rel=1e-9)


def test_whole_instances_known_optimum_and_supply_in_chips():
    # 100 tokens/s to serve. A: 10 per chip in instances of 8 chips, US$1 a chip-hour; B: 9 per chip,
    # one chip each, US$1.05. Fractions: 1.25 A instances, US$10. Whole instances: two A instances
    # (16 chips) cost US$16 and twelve B chips US$12.60, but one A instance (80 tokens/s) and three
    # B chips (27) cost 8 + 3.15 = US$11.15; two B chips (98 in all) fall short.
    workloads = [fleet.Workload("w", 1, 1, 0, 100.0)]
    a = fleet.Hardware("a", "A", 1.0, 1000.0, {"w": 10.0}, instance_chips={"w": 8})
    b = fleet.Hardware("b", "B", 1.05, 1000.0, {"w": 9.0})
    plan = fleet.assign(workloads, [a, b], 0.0, 1.0).set_index("hardware")
    assert plan["instances"].to_dict() == {"a": 1.0, "b": 3.0}
    assert plan["chips"].to_dict() == {"a": 8.0, "b": 3.0}
    assert plan["total_usd_per_hour"].iloc[0] == pytest.approx(11.15)
    relaxed = fleet.assign(workloads, [a, b], 0.0, 1.0, integral=False).set_index("hardware")
    assert relaxed["chips"].to_dict() == pytest.approx({"a": 10.0, "b": 0.0})
    assert relaxed["total_usd_per_hour"].iloc[0] == pytest.approx(10.0)
    # Supply counts chips: seven A chips cannot make one 8-chip instance, so B serves it all (12 chips).
    short = fleet.Hardware("a", "A", 1.0, 1000.0, {"w": 10.0}, supply=7.0, instance_chips={"w": 8})
    plan = fleet.assign(workloads, [short, b], 0.0, 1.0).set_index("hardware")
    assert plan["chips"].to_dict() == {"a": 0.0, "b": 12.0}
    assert plan["total_usd_per_hour"].iloc[0] == pytest.approx(12.6)


def test_profiles_carry_the_instance_of_their_operating_point():
    # Each NVIDIA profile's capacity is a frontier row's output per chip, and its instance size that
    # row's chips; Jalapeño's instance size is unpublished, so it is counted in whole chips.
    workloads = fleet.scenario_workloads(0.5, 100.0)
    for h in fleet.nvidia_profiles(fleet.MODEL, workloads):
        for w in workloads:
            frontier = fleet.serving.frontier(fleet.MODEL, h.name, isl=w.isl_tokens, osl=w.osl_tokens)
            row = frontier[np.isclose(frontier["output_tokens_per_s_per_chip"], h.capacity[w.name])]
            assert len(row) >= 1 and row["tokens_per_s_per_user"].min() >= w.min_tokens_per_s_per_user
            assert h.chips_per_instance(w.name) == int(row["chips"].min())
    jalapeno = fleet.jalapeno_profile(fleet.MODEL, workloads, fleet.JalapenoAssumptions())
    assert [jalapeno.chips_per_instance(w.name) for w in workloads] == [1, 1]


def test_scenario_workloads_split_the_demand_by_the_agent_share():
    # Share 0.25: chat gets 75 % of the fleet's output tokens/s, agents 25 %.
    total = catalog.assumption("fleet_output_tokens_per_s")
    chat, agent = fleet.scenario_workloads(0.25, 150.0)
    assert (chat.name, chat.output_tokens_per_s) == ("chat", pytest.approx(0.75 * total))
    assert (agent.name, agent.output_tokens_per_s, agent.min_tokens_per_s_per_user) == (
        "agent", pytest.approx(0.25 * total), 150.0)
    assert (agent.isl_tokens, agent.osl_tokens) == (8192, 1024) and (chat.isl_tokens, chat.osl_tokens) == (1024, 1024)


def test_electricity_and_pue_enter_the_cost_and_the_kw():
    # A: US$1.00/h at 1,000 W; B: US$1.05/h at 100 W; both 10 tokens/s. At US$1/kWh and PUE 1.5,
    # A costs 1 + 1.0 × 1.5 × 1 = US$2.50/h and B 1.05 + 0.1 × 1.5 = US$1.20/h: B wins, though its rent is higher.
    workloads = [fleet.Workload("w", 1, 1, 0, 10.0)]
    hardware = [fleet.Hardware("a", "A", 1.0, 1000.0, {"w": 10.0}), fleet.Hardware("b", "B", 1.05, 100.0, {"w": 10.0})]
    assert fleet.hourly_cost(hardware[0], 1.0, 1.5) == pytest.approx(2.5)
    plan = fleet.assign(workloads, hardware, 1.0, 1.5).set_index("hardware")
    assert plan["chips"].to_dict() == {"a": 0.0, "b": 1.0}
    assert plan.loc["b", "usd_per_hour"] == pytest.approx(1.2)
    assert plan.loc["b", "kw"] == pytest.approx(0.15)
    # 10 tokens/s is 0.036 million tokens an hour: 0.15 kWh ÷ 0.036 and US$1.20 ÷ 0.036.
    assert plan.loc["b", "workload_kwh_per_million_tokens"] == pytest.approx(0.15 / 0.036)
    assert plan.loc["b", "workload_usd_per_million_tokens"] == pytest.approx(1.2 / 0.036)
    # Free electricity: A's lower rent wins.
    assert fleet.assign(workloads, hardware, 0.0, 1.5).set_index("hardware")["chips"].to_dict() == {"a": 1.0, "b": 0.0}


@pytest.mark.parametrize(("call", "name"), [
    (lambda: fleet.JalapenoAssumptions(usd_per_watt_hour_vs_gb200=-1.0), "usd_per_watt_hour_vs_gb200"),
    (lambda: fleet.JalapenoAssumptions(supply_chips=float("nan")), "supply_chips"),
    (lambda: fleet.scenario(0.5, 100.0, 80.0), "price_usd_per_kwh"),
    (lambda: fleet.scenario(0.5, 100.0, -10), "price_usd_per_kwh"),
    (lambda: fleet.scenario(0.5, 1e9, 0.08), "agent_min_rate"),
])
def test_issue_16_bad_fleet_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_capacity_includes_a_point_exactly_at_the_target():
    frontier = fleet.serving.frontier(fleet.MODEL, "gb200", isl=1024.0, osl=1024.0)
    row = frontier.iloc[3]
    work = fleet.Workload("w", 1024.0, 1024.0, float(row["tokens_per_s_per_user"]), 1.0)
    ok = frontier[frontier["tokens_per_s_per_user"] >= row["tokens_per_s_per_user"]]
    assert fleet.capacity(fleet.MODEL, "gb200", work) == pytest.approx(ok["output_tokens_per_s_per_chip"].max())
    assert fleet.capacity(fleet.MODEL, "gb200", work) >= row["output_tokens_per_s_per_chip"]


def test_the_chapters_reading_of_the_default_plan_holds():
    # The fleet chapter says, at the figure's defaults (half agent calls at ≥ 100 tokens/s per user,
    # US$0.08/kWh): chat's NVIDIA chips are B200s, with about a GB200's chat capacity; agent calls'
    # are GB200s; Jalapeño is the cheapest per token for both workloads; and each scarce Jalapeño chip
    # saves more on agent calls than on chat, which is where the plan puts nearly all of them.
    plan = fleet.scenario(0.5, 100.0, 0.08)
    used = plan[plan["chips"] > 0]
    nvidia_on = {w: set(g.loc[g["hardware"] != "jalapeno", "hardware"]) for w, g in used.groupby("workload")}
    assert nvidia_on == {"chat": {"b200"}, "agent": {"gb200"}}
    workloads = fleet.scenario_workloads(0.5, 100.0)
    profiles = {h.name: h for h in fleet.nvidia_profiles(fleet.MODEL, workloads)}
    assert profiles["b200"].capacity["chat"] == pytest.approx(profiles["gb200"].capacity["chat"], rel=0.1)
    jalapeno = fleet.jalapeno_profile(fleet.MODEL, workloads, fleet.JalapenoAssumptions())

    def usd_per_token(h, w):
        return fleet.hourly_cost(h, 0.08, catalog.facility_pue()) / h.capacity[w]

    saving = {}
    for w in ("chat", "agent"):
        cheapest_nvidia = min(usd_per_token(h, w) for h in profiles.values() if h.capacity[w] > 0)
        assert usd_per_token(jalapeno, w) < cheapest_nvidia
        saving[w] = jalapeno.capacity[w] * cheapest_nvidia - fleet.hourly_cost(jalapeno, 0.08, catalog.facility_pue())
    assert saving["agent"] > saving["chat"] > 0
    on_agent = used.query("hardware == 'jalapeno' and workload == 'agent'")["chips"].sum()
    assert on_agent > 0.95 * jalapeno.supply
    # The few on chat are there only because NVIDIA chips come in whole instances: allowed fractions,
    # the programme puts every Jalapeño chip on agent calls.
    relaxed = fleet.scenario(0.5, 100.0, 0.08, integral=False)
    assert relaxed.query("hardware == 'jalapeno' and workload == 'chat'")["chips"].sum() == pytest.approx(0, abs=1e-6)
