"""Every exercise's answer, worked out by hand from the published figures and checked against
:mod:`perwatt.exercises` (the chapters glue their answers from it)."""

from __future__ import annotations

import numpy as np
import pytest

import dataclasses

from perwatt import (agents, benchmark, catalog, crosschip, exercises, exercises_agents, figures, fleet_profiles,
                     inverse, roofline, serving, speculative)


def test_per_watt_predict():
    # Ratings premise: Jalapeño served 85,448 × 0.7 tokens/s, now charged 1 kW; the GB200 served
    # 44,960 × 1.2 tokens/s, now charged its all-in 2.1 kW.
    answers = exercises.per_watt_ex_predict()
    assert answers["ratio"] == pytest.approx((85448 * 0.7 / 1.0) / (44960 * 1.2 / 2.1), rel=1e-12)
    assert answers["published"] == 1.9


def test_per_watt_convert():
    # 1000 / 20,000 = 0.05 J; × (7372.5 + 921.5) / 921.5 per output token; kWh = J / 3.6e6, × PUE × price.
    answers = exercises.per_watt_ex_convert()
    assert answers["j"] == pytest.approx(0.05)
    j_out = 0.05 * 8294 / 921.5
    assert answers["j_out"] == pytest.approx(j_out, rel=1e-12)
    assert answers["cost"] == pytest.approx(j_out * 1e6 / 3.6e6 * 1.2 * 0.10, rel=1e-12)


def test_per_watt_per_chip():
    answers = exercises.per_watt_ex_per_chip()
    assert answers["dsr1"] == pytest.approx(19641 * 700 / (11781 * 1400), rel=1e-12)
    assert answers["kimi"] == pytest.approx(18195 * 700 / (11862 * 1400), rel=1e-12)
    assert answers["gpt"] == pytest.approx(85448 * 700 / (44960 * 1200), rel=1e-12)
    assert answers["dsr1"] < 1 and answers["kimi"] < 1 < answers["gpt"]


def test_tables_rounding():
    # 12,258 / 104.35 = 117.470 and 12,258 / 104.25 = 117.583; a rate printed as 118 is at least 117.5.
    answers = exercises.tables_ex_rounding()
    assert answers["ratio_low"] == pytest.approx(12258 / 104.35, rel=1e-12)
    assert answers["ratio_high"] == pytest.approx(12258 / 104.25, rel=1e-12)
    assert answers["low"] == 117.5
    assert answers["high"] == pytest.approx(117.5827, abs=1e-4)
    # The rate alone allows 117.5 to 118.5, a width of 1; both together allow 0.083: narrower.
    assert (answers["rate_low"], answers["rate_high"]) == (117.5, 118.5)
    assert answers["narrower"] is True


def test_tables_osl():
    # 819 tokens in 5.99 s at one step each: at least 819 / 5.99 = 136.73 tokens/s; 118 is 13.7 % slower.
    answers = exercises.tables_ex_osl()
    assert answers["min_rate"] == pytest.approx(819 / 5.99, rel=1e-12)
    assert answers["shortfall"] == pytest.approx((1 - 118 / (819 / 5.99)) * 100, rel=1e-12)


def test_tables_byon():
    # 2.60 s − (921.5 − 1) / 427 tokens/s.
    answers = exercises.tables_ex_byon()
    assert answers["ttft"] == pytest.approx(2.60 - 920.5 / 427, rel=1e-12)
    assert answers["verdict"] == "possible"


def test_prefill_predict():
    # DeepSeek R1 at batch 1 over 8,192 + 1,024 / 2 tokens of context: absorbed MLA attention is
    # 61 layers × 2 × 128 heads × (2 × 512 + 64) × 8,704 FLOPs; matmuls 2 × 37e9; bytes 37e9 of FP8
    # weights plus 61 × 576 × 2 bytes × 8,704 of KV cache.
    answers = exercises.prefill_ex_predict()
    attention = 61 * 2 * 128 * (2 * 512 + 64) * 8704
    nbytes = 37e9 + 61 * 576 * 2 * 8704
    assert answers["dsr1_attention_gflop"] == pytest.approx(attention / 1e9, rel=1e-12)
    assert answers["dsr1_b1"] == pytest.approx((74e9 + attention) / nbytes, rel=1e-12)
    assert answers["dsr1_matmul_only"] == pytest.approx(74e9 / nbytes, rel=1e-12)
    assert answers["gpt_b1"] < answers["gpt_b2"] < answers["dsr1_b1"]


def test_prefill_kimi():
    # Kimi K2.5: 968B expert parameters over 376 inactive experts' worth give 2.5745B per expert;
    # shared 32B − 8 × that. Weights: shared at 2 bytes, 384 experts at 4.5 bits; KV of 9,216 tokens.
    per_expert = (1000 - 32) / (384 - 8) * 1e9
    shared = 32e9 - 8 * per_expert
    weights = shared * 2 + per_expert * 384 * 4.5 / 8
    need = weights + 61 * 576 * 2 * 9216
    answers = exercises.prefill_ex_kimi()
    assert answers["fewest_chips"] == np.ceil(need / (288e9 * 0.9)) == 3
    # The fastest point spreads one sequence over more chips, but no layout beats the fixed cost of
    # 61 layers: the rate stays under 1 / (61 × the fitted per-layer time).
    d = roofline.DEFAULTS
    assert answers["batch"] == 1 and answers["chips"] > answers["fewest_chips"]
    assert answers["fewest_rate"] < answers["rate"] < 1e6 / (61 * d.layer_latency_us)
    # On the fewest chips the rate is one over a decode pass plus the pool's prefill spread over 922 tokens.
    spec, device, drawn = roofline.model_spec("kimi-k2.5"), roofline.chip("gb300"), catalog.lengths()
    step = float(roofline.decode_time(spec, device, 1, drawn.isl_mean + drawn.osl_mean / 2, 3))
    prefill = float(roofline.prefill_time(spec, device, drawn.isl_mean, 3))
    assert answers["fewest_rate"] == pytest.approx(1 / (step + prefill / drawn.osl_mean), rel=1e-9)


def test_prefill_calibrate():
    # A tenth of the fitted fixed cost suits the dense Llama measurements and wrecks the held-out InferenceX fit.
    answers = exercises.prefill_ex_calibrate()
    assert answers["fitted_us"] == roofline.DEFAULTS.layer_latency_us
    assert answers["best_us"] < answers["fitted_us"] / 2
    assert abs(answers["dense_err"]) < 15
    assert answers["held_out_before"] <= 25 < answers["held_out_after"]


def test_spec_best():
    # Speed-up (1 − α^(γ+1)) / ((1 − α)(γc + 1)) at α = 0.8: for c = 0.4, γ = 1, 2, 3 give 1.286, 1.356,
    # 1.342; for c = 0.05, γ = 7, 8, 9 give 3.082, 3.092, 3.078.
    answers = exercises.spec_ex_best()
    assert (answers["best_lo"], answers["best_hi"]) == (8, 2)


def test_spec_ceiling():
    # 1 / (1 − 0.6) = 2.5; 0.6^(γ+1) ≤ 0.05 first holds at γ + 1 = 6.
    answers = exercises.spec_ex_ceiling()
    assert answers["limit"] == pytest.approx(2.5)
    assert answers["gamma"] == 5


def test_spec_crossover_is_where_the_speedup_first_stops_paying():
    answers = exercises.spec_ex_crossover()
    d = figures.speculation_batch().defaults()
    # At batch 1 the closed form holds (decode is memory-bound): (1 − α^(γ+1)) / ((1 − α)(γc + 1)).
    for gamma, key in ((answers["gamma_from"], "b1_long"), (answers["gamma_to"], "b1_short")):
        closed = (1 - d["alpha"] ** (gamma + 1)) / ((1 - d["alpha"]) * (gamma * d["c"] + 1))
        assert answers[key] == pytest.approx(closed, rel=1e-9)
    for gamma, key in ((answers["gamma_from"], "cross_long"), (answers["gamma_to"], "cross_short")):
        batch = answers[key]
        gain = speculative.batch_speedup(figures.SPEC_MODEL, figures.SPEC_ACCELERATOR, d["alpha"], gamma,
                                         np.array([batch - 1, batch]), float(d["context"]), drafter="cost",
                                         c=d["c"])["speedup"]
        assert gain[0] > 1 >= gain[1], key
    assert answers["b1_short"] < answers["b1_long"] and answers["cross_short"] > answers["cross_long"]


def test_spec_profile():
    # TensorRT-LLM: 1.92, 2.58, 2.82 tokens per pass. Both of the first two drafts accepted:
    # 2.58 − 1.92 = 0.66 (independence at α = 0.92 would say 0.92² = 0.8464); the third, 0.24.
    # Fitted to one draft, three drafts give 1 + 0.92 + 0.8464 + 0.778688 = 3.545088 tokens.
    answers = exercises.spec_ex_profile()
    assert (answers["a1"], answers["a2"], answers["a_last"]) == (1.92, 2.58, 2.82)
    assert answers["both"] == pytest.approx(0.66)
    assert answers["third"] == pytest.approx(0.24)
    assert answers["alpha"] == pytest.approx(0.92)
    assert answers["independent_both"] == pytest.approx(0.8464)
    assert answers["independent"] == pytest.approx(3.545088)


def test_agents_cache():
    # Ten calls, 7,372.5 tokens first and 1,000 more each: 10 × 7,372.5 + 1,000 × 45 prompt tokens;
    # raising the hit rate from 0 to 0.9 skips 90 % of them, each costing the system's prefill time.
    answers = exercises.agents_ex_cache()
    skipped = (10 * 7372.5 + 1000 * 45) * 0.9
    jalapeno_prefill = (1.65 - 920.5 / 12258) / 7372.5  # what the reported latency leaves, per prompt token
    assert answers["drop_jal"] == pytest.approx(skipped * jalapeno_prefill, rel=1e-9)
    assert answers["drop_base"] == pytest.approx(skipped * agents.profiles("deepseek-r1")["gb300"].prefill_s_per_token,
                                                 rel=1e-9)


def test_agents_tools_dilute_the_ratio_not_the_gap():
    # Ten calls and nine gaps: 90 s of tools at 10 s each, on both systems alike.
    answers = exercises.agents_ex_tools()
    assert answers["tools_total"] == 90
    zero = agents.task_comparison("deepseek-r1", 10, 1000, 0.6, 0).set_index("system")["latency_s"]
    assert answers["gap_s"] == pytest.approx(zero["gb300"] - zero["jalapeno"], rel=1e-12)
    assert answers["adv_lo"] == pytest.approx(zero["gb300"] / zero["jalapeno"], rel=1e-12)
    assert answers["adv_hi"] == pytest.approx((zero["gb300"] + 90) / (zero["jalapeno"] + 90), rel=1e-12)
    assert answers["adv_hi"] < answers["adv_lo"]


def test_agents_minute():
    # 1,024 × (1/118 − 1/12,258) = 8.594 s per call; 7 calls is the first count past 60 s.
    answers = exercises.agents_ex_minute()
    assert answers["per_call"] == pytest.approx(1024 * (1 / 118 - 1 / 12258), rel=1e-12)
    assert answers["calls"] == 7


def test_agents_tail_is_the_last_rate_under_the_limit():
    answers = exercises.agents_ex_tail()
    for cap, rate in ((answers["cap_lo"], answers["rate_lo"]), (answers["cap_hi"], answers["rate_hi"])):
        curve = figures.serving_load_frame(cap, 4.0, 0.2).set_index("rate_rps")["p99_s"]
        assert curve[rate] < answers["limit"]
        assert (curve[curve.index > rate] >= answers["limit"]).all()
    assert answers["rate_lo"] < answers["rate_hi"]
    # A cap of one holds the instance for a prefill pass and 256 decode steps per request, each pass at
    # least 36 layers × 103 µs: under 1 / (257 × 3.708 ms) ≈ 1.05 requests/s can ever be served.
    assert answers["rate_lo"] < 1 / (257 * 36 * 103e-6)


def test_fleet_answers_hang_together():
    budget = exercises.fleet_ex_budget()
    # The budget binds: the plan fits it, costs more than the free plan, and moves GB200 work to
    # TPU7x (at half its assumed power, better per watt than a GB200 for these workloads).
    assert budget["tight_peak"] <= budget["site_mw"] < budget["free_peak"]
    assert budget["tight_cost"] > budget["free_cost"] and budget["premium_pct"] > 0
    assert budget["tpu_tight"] > budget["tpu_free"] and budget["gb200_tight"] < budget["gb200_free"]
    without = exercises.fleet_ex_without()
    # Every assumed Jalapeño chip is used, and each saves more than its own price an hour.
    assert without["jal"] == fleet_profiles.JalapenoAssumptions().supply_chips
    assert without["saving"] == pytest.approx(without["without"] - without["with"])
    assert without["per_chip"] > without["jal_price"] > 0
    relax = exercises.fleet_ex_relax()
    # The relaxation is a lower bound that drops the B200, TPU7x and Trainium2 chips whole instances need.
    assert 0 < relax["gap"] and relax["relaxed"] < relax["whole"]
    assert relax["small_relaxed"] == pytest.approx(0, abs=1e-6) and relax["small_whole"] > 0
    assert relax["kinds_relaxed"] < relax["kinds_whole"]


def test_the_audit_answer_agrees_with_the_audit():
    audit = benchmark.latency_audit(benchmark.book_results(), 768).set_index(["model", "system"])
    assert audit.loc[("gpt-oss-120b", "gb200"), "consistent"]
    audit = benchmark.latency_audit(benchmark.book_results(), 769).set_index(["model", "system"])
    assert not audit.loc[("gpt-oss-120b", "gb200"), "consistent"]


def test_prefill_perwatt_predict():
    # At the low-interactivity end every frontier point counts, so the ratio is each chip's best total
    # tokens/s per chip over its rating: GB300's over 1.4 kW against H100's over 0.7 kW.
    answers = exercises.prefill_ex_perwatt_predict()
    best = {a: serving.frontier("deepseek-r1", a)["total_tokens_per_s_per_chip"].max() for a in ("gb300", "h100")}
    assert answers["end"] == pytest.approx((best["gb300"] / 1.4) / (best["h100"] / 0.7), rel=1e-12)
    # At 50 tokens/s per user or faster: the best of the points at least that fast.
    at = {a: (lambda f: f.loc[f["tokens_per_s_per_user"] >= 50, "total_tokens_per_s_per_chip"].max())(
        serving.frontier("deepseek-r1", a)) for a in ("gb300", "h100")}
    assert answers["at"] == pytest.approx((at["gb300"] / 1.4) / (at["h100"] / 0.7), rel=1e-12)
    assert answers["grows"] and answers["at"] > 2 * answers["end"]


def test_prefill_inverse():
    # With 5,000 TFLOP/s per chip, unlimited bandwidth still leaves each token its compute and its
    # share of the pool's 8k-token prefills, so 8 chips cannot reach the reported 12,258 tokens/s.
    answers = exercises.prefill_ex_inverse()
    assert not answers["solvable"] and answers["ceiling"] < 12258
    device = roofline.Chip("fast", "fast", float("inf"), 1e18, {f: 5000e12 for f in ("fp4", "fp8", "bf16")}, 700.0,
                           900e9, 8)
    drawn = catalog.lengths()
    served = serving.serve(roofline.model_spec("deepseek-r1"), device, 1, drawn.isl_mean, drawn.osl_mean,
                           roofline.Assumptions(layer_latency_us=0.0), 8, 8, False)
    assert answers["ceiling"] == pytest.approx(float(served["tokens_per_s_per_user"]), rel=1e-9)
    assert answers["share"] == pytest.approx(answers["ceiling"] / 12258 * 100)
    # Twice the compute and it is within reach.
    assert inverse.inverse("deepseek-r1", 12258, 19641, 8, 1, assumptions=roofline.Assumptions(layer_latency_us=0.0),
                             tflops=10_000)["solvable"]


def test_prefill_gap():
    # A GB300 with k times its bandwidth, same 1.4 kW, against the GB300 at 70 tokens/s per user or faster.
    answers = exercises.prefill_ex_gap()
    base = roofline.chip("gb300")

    def best(k):
        faster = dataclasses.replace(base, bandwidth_bytes_s=base.bandwidth_bytes_s * k)
        rows = crosschip.frontier("deepseek-r1", faster)
        return rows.loc[rows["x"] >= 70, "y"].max()

    # The least multiple that reaches the gap: a hair less falls short (the gain comes in steps, as a
    # larger batch becomes fast enough, so the gap reached may be larger than asked).
    k = answers["k_low"]
    assert best(k) / best(1.0) == pytest.approx(answers["reached_low"], rel=1e-12) and answers["reached_low"] >= 2.1
    assert best(k * (1 - 1e-6)) / best(1.0) < 2.1
    # 4.1 times is out of bandwidth's reach: even 1,000 times the bandwidth gives less.
    assert not answers["high_reachable"] and answers["most"] < 4.1
    assert best(1000.0) / best(1.0) == pytest.approx(answers["most"], rel=1e-12)
    assert answers["share_high"] == pytest.approx(1 / 4.1)


def test_prefill_pair():
    # H100 and H200 have the same FP8 FLOP/s and the same 700 W rating, so as prefill chips they take the
    # same time and the same energy per request; the H100 rents for less, so its pool costs less by the
    # ratio of the hourly prices plus electricity at US$0.08 per kWh.
    answers = exercises.prefill_ex_pair()
    h100, h200 = roofline.chip("h100"), roofline.chip("h200")
    assert h100.peak_flops["fp8"] == h200.peak_flops["fp8"] and h100.power_w == h200.power_w == 700
    assert answers["h100_j"] == pytest.approx(answers["h200_j"], rel=1e-12)
    chip_s = answers["h100_j"] / 700.0
    energy = answers["h100_j"] / 3.6e6 * 0.08
    assert answers["h100_usd"] == pytest.approx(1000 * (chip_s * 1.30 / 3600 + energy), rel=1e-12)
    assert answers["h200_usd"] == pytest.approx(1000 * (chip_s * 1.41 / 3600 + energy), rel=1e-12)
    assert answers["cheaper"] == "H100 SXM"
    assert answers["h100_w"] == answers["h200_w"] == 700


def test_prefill_amdahl():
    # 1 ÷ ((1 − f) + f ÷ 1.8) = 1.5 gives f = (1 − 1/1.5) ÷ (1 − 1/1.8) = 3/4.
    answers = exercises.prefill_ex_amdahl()
    assert (answers["low"], answers["high"]) == (1.5, 1.8)
    assert answers["needed_pct"] == pytest.approx(75.0)
    f1, f256 = answers["share_small_pct"] / 100, answers["share_large_pct"] / 100
    assert 0 < f1 < f256 < 1
    assert answers["gain_small_high"] == pytest.approx(1 / ((1 - f1) + f1 / 1.8))
    assert answers["gain_large_low"] == pytest.approx(1 / ((1 - f256) + f256 / 1.5))
    assert answers["gain_large_high"] == pytest.approx(1 / ((1 - f256) + f256 / 1.8))
    assert answers["gain_large_high"] < 1.8  # below the kernels' own gain while any time is elsewhere


def test_prefill_long():
    # Four times the prompt: prefill work grows at least fourfold (more with attention), decode only
    # through a longer cache, so the prefill pool's share of the chip time grows and the cost rises.
    answers = exercises.prefill_ex_long()
    assert answers["isl"] == catalog.assumption("long_context_isl_tokens")
    assert 0 < answers["share_short_pct"] < answers["share_long_pct"] < 100
    assert answers["usd_ratio"] > 1
    # A longer prompt's cache leaves room for fewer sequences per decode instance: the batch falls.
    assert answers["batch_long"] < answers["batch_short"]
    assert answers["batch_short"] in serving.BATCHES and answers["batch_long"] in serving.BATCHES
    assert answers["chips_long"] <= answers["chips_short"]


def test_per_watt_owned_price():
    # Owning a B200: US$35,000 over 5 × 8,760 h, 1 kW × PUE 1.3 × price, US$0.30 overhead. Doubling the
    # price from 0.08 adds 1.3 × 0.08 an hour to every token's hour, whatever the tokens per hour.
    answers = exercises.per_watt_ex_owned_price()
    hour = 35_000 / (5 * 8760) + 1.3 * 0.08 + 0.3
    assert answers["rise_pct"] == pytest.approx(1.3 * 0.08 / hour * 100, rel=1e-9)
    assert answers["share_pct"] == pytest.approx(1.3 * 0.08 / hour * 100, rel=1e-9)
    assert answers["rise_pct"] < 10  # the exercise's answer: less than a tenth


def test_per_watt_break_even():
    # q = w: the GB200's rent per watt would have to be w times the B200's, US$1.95 per 1 kW.
    answers = exercises.per_watt_ex_break_even()
    # At 50 tokens/s per user or faster: the most tokens per kW either chip's frontier reaches there.
    w = (crosschip.best_at(crosschip.frontier("deepseek-r1", roofline.chip("gb200")), 50.0)[0]
         / crosschip.best_at(crosschip.frontier("deepseek-r1", roofline.chip("b200")), 50.0)[0])
    assert answers["w"] == pytest.approx(w, rel=1e-12)
    assert answers["flip"] == pytest.approx(w * 1.2 / 1.0 * 1.95, rel=1e-12)
    assert answers["rent"] == 2.21 and answers["flip"] > answers["rent"]
def test_agents_waiting_ratios_come_from_the_closed_loop():
    from perwatt import agent_loop
    drawn = catalog.lengths()
    answers = exercises.agents_ex_wait()
    direct = agent_loop.per_watt_error("deepseek-r1", "gb200", 8, 10, np.array([0.0, 30.0]), drawn.isl_mean, 1000.0,
                                       drawn.osl_mean)
    assert answers["energy_0"] == pytest.approx(direct["energy_ratio"][0], rel=1e-9)
    assert answers["energy_t"] == pytest.approx(direct["energy_ratio"][1], rel=1e-9)
    assert answers["cost_t"] == pytest.approx(direct["cost_ratio"][1], rel=1e-9)
    assert abs(answers["energy_0"] - 1) < 0.05 < answers["energy_t"] - 1 < answers["cost_t"] - 1
    # Why: a small batch in a call, mostly busy; with no idle draw the gap stays most of its size.
    assert answers["batch_t"] == pytest.approx(direct["batch"][1], rel=1e-9) and answers["batch_t"] < 8 / 2
    assert answers["busy_t"] == pytest.approx(direct["busy_fraction"][1] * 100, rel=1e-9) and answers["busy_t"] > 50
    no_idle = agent_loop.per_watt_error("deepseek-r1", "gb200", 8, 10, 30.0, drawn.isl_mean, 1000.0, drawn.osl_mean,
                                        True, None, 0.0)
    assert answers["energy_t_no_idle"] == pytest.approx(float(no_idle["energy_ratio"]), rel=1e-9)
    assert 1 < answers["energy_t_no_idle"] < answers["energy_t"]
    assert answers["energy_t_no_idle"] - 1 > (answers["energy_t"] - 1) / 2


def test_agents_sessions_and_holding():
    sessions = exercises.agents_ex_sessions()
    ratios = exercises_agents._waiting()["ratio"].xs(30.0, level="tool_s")
    assert ratios[sessions["fewest"]] < 2 and (ratios[ratios.index < sessions["fewest"]] >= 2).all()
    assert sessions["most_served"] < sessions["most"]  # held caches cap the sessions one instance serves
    hold = exercises.agents_ex_hold()
    assert hold["served"] < hold["sessions"] and hold["dropped"] < hold["held"]
    # Both are busy all the time; dropping wins on a larger batch and more output tokens per second.
    assert hold["busy_held"] == pytest.approx(100) and hold["busy_dropped"] == pytest.approx(100)
    assert hold["batch_held"] < hold["served"] < hold["batch_dropped"] < hold["sessions"]
    assert hold["tokens_held"] < hold["tokens_dropped"]
    from perwatt import agent_loop
    drawn = catalog.lengths()
    for policy, hold_cache in (("held", True), ("dropped", False)):
        loop = agent_loop.closed_loop("deepseek-r1", "gb200", 128, 10, 10.0, drawn.isl_mean, 1000.0, drawn.osl_mean,
                                      hold_cache)
        assert hold[f"batch_{policy}"] == pytest.approx(float(loop["batch"]), rel=1e-9)
        assert hold[f"tokens_{policy}"] == pytest.approx(float(loop["calls_per_s"]) * drawn.osl_mean, rel=1e-9)
