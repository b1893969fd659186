"""One pass on a parallel instance: known values per operator, per collective and per layout,
worked by hand from the architectures and the chips' data sheets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perwatt import parallel, roofline, serving

#: Round efficiencies, so each known value below can be checked with a pencil.
PLAIN = roofline.Assumptions(bandwidth_efficiency=0.5, compute_efficiency=0.5, layer_latency_us=10.0,
                             collective_latency_us=5.0, link_efficiency=0.5)
H100_BW, H100_BF16 = 3.35e12 * 0.5, 989e12 * 0.5


def test_each_memory_bound_operator_reads_its_weights_at_the_achieved_bandwidth():
    # Llama 3.1 8B, one sequence, no context, one H100: attention projections 1.342e9 BF16 weights,
    # the rest of the model 8.03e9 − 1.342e9; every operator memory-bound; 32 layers × 10 µs fixed.
    spec, device = roofline.model_spec("llama-3.1-8b"), roofline.chip("h100")
    parts = parallel.pass_time(spec, device, 1, 0.0, assumptions=PLAIN)
    assert parts["attention_weights"] == pytest.approx(1.342e9 * 2 / H100_BW)
    assert parts["shared"] == pytest.approx((8.03e9 - 1.342e9) * 2 / H100_BW)
    assert parts["attention"] == 0.0 and parts["experts"] == 0.0 and parts["collectives"] == 0.0
    assert parts["fixed"] == pytest.approx(32 * 10e-6)
    assert parts["total"] == pytest.approx(8.03e9 * 2 / H100_BW + 32 * 10e-6)


def test_attention_reads_each_sequences_cache():
    # 4 sequences at 3,000 tokens: 32 layers × 2 (K and V) × 8 heads × 128 × 2 bytes × 3,000 each.
    spec, device = roofline.model_spec("llama-3.1-8b"), roofline.chip("h100")
    parts = parallel.pass_time(spec, device, 4, 3000.0, assumptions=PLAIN)
    assert parts["attention"] == pytest.approx(4 * 32 * 2 * 8 * 128 * 2 * 3000 / H100_BW)


def test_a_long_prompt_is_compute_bound_in_its_matmuls():
    # Prefill of 4,096 tokens: the non-attention matmuls do 2 × 6.688e9 × 4,096 FLOPs at half of
    # 989 TFLOP/s (BF16), far longer than reading their 13.4 GB.
    spec, device = roofline.model_spec("llama-3.1-8b"), roofline.chip("h100")
    parts = parallel.pass_time(spec, device, 1, 0.0, tokens_per_sequence=4096, phase="prefill", assumptions=PLAIN)
    assert parts["shared"] == pytest.approx(2 * (8.03e9 - 1.342e9) * 4096 / H100_BF16)
    # Causal attention: 4 × 32 heads × 128 × (mean context 2,048) FLOPs per token per layer, all 4,096 tokens.
    assert parts["attention"] == pytest.approx(32 * 4 * 32 * 128 * 2048 * 4096 / H100_BF16)


def test_operators_are_summed_so_compute_and_memory_bound_work_cannot_hide_behind_each_other():
    # Llama 3.1 8B prefilling 512 tokens on one H100: the matmuls are compute-bound (512 tokens × 2 FLOPs per
    # weight at 494.5 TFLOP/s take longer than reading 2 bytes per weight at 1.675 TB/s), the cache write is
    # memory-bound. The pass costs the sum of the operators' times, not one max over the whole pass.
    spec, device = roofline.model_spec("llama-3.1-8b"), roofline.chip("h100")
    parts = parallel.pass_time(spec, device, 1, 0.0, tokens_per_sequence=512, phase="prefill", assumptions=PLAIN)
    matmuls = 2 * 8.03e9 * 512 / H100_BF16
    assert parts["attention_weights"] + parts["shared"] == pytest.approx(matmuls)
    assert 2 * 1.342e9 * 512 / H100_BF16 > 1.342e9 * 2 / H100_BW  # even the smaller matmuls are compute-bound
    operators = sum(parts[name] for name in parallel.OPERATORS)
    assert parts["total"] == pytest.approx(operators + parts["fixed"] + parts["collectives"])
    assert operators > matmuls  # attention's own time adds; it does not hide under the matmuls


def test_tensor_parallel_all_reduces_twice_a_layer():
    # Llama 3.3 70B on 8 H100s, 16 sequences: 2 all-reduces × 80 layers, each 5 µs + 2 × 7/8 × 16 tokens ×
    # 8,192 × 2 bytes over NVLink at 450 GB/s × 0.5.
    spec, device = roofline.model_spec("llama-3.3-70b"), roofline.chip("h100")
    parts = parallel.pass_time(spec, device, 16, 1000.0, chips=8, assumptions=PLAIN)
    one = 5e-6 + 2 * 7 / 8 * 16 * 8192 * 2 / (450e9 * 0.5)
    assert parts["collectives"] == pytest.approx(80 * 2 * one)


def test_beyond_the_scale_up_domain_collectives_use_the_network():
    spec, device = roofline.model_spec("llama-3.3-70b"), roofline.chip("h100")
    parts = parallel.pass_time(spec, device, 16, 1000.0, chips=16, assumptions=PLAIN)
    one = 5e-6 + 2 * 15 / 16 * 16 * 8192 * 2 / (50e9 * 0.5)
    assert parts["collectives"] == pytest.approx(80 * 2 * one)
    assert float(parallel.link_bytes_s(device, 8)) == 450e9 and float(parallel.link_bytes_s(device, 9)) == 50e9


def test_an_nvl72_instance_cannot_span_more_than_its_domain():
    spec, device = roofline.model_spec("deepseek-r1"), roofline.chip("gb200")
    with pytest.raises(ValueError, match="chips"):
        parallel.pass_time(spec, device, 64, 1000.0, chips=144, ep=144, dp_attention=True)


def test_data_parallel_attention_exchanges_tokens_with_their_experts_in_each_moe_layer():
    # DeepSeek-R1 on 8 B200s, EP8 and DP attention, 64 sequences: each chip sends its 8 tokens to
    # 8 experts each, 7/8 of them off-chip: 7,168 × (1 byte out + 2 back), in each of 58 MoE layers,
    # plus a dispatch and a combine latency.
    spec, device = roofline.model_spec("deepseek-r1"), roofline.chip("b200")
    parts = parallel.pass_time(spec, device, 64, 1000.0, chips=8, ep=8, dp_attention=True, assumptions=PLAIN)
    one = 2 * 5e-6 + 8 * 8 * 7168 * 3 * 7 / 8 / (900e9 * 0.5)
    assert parts["collectives"] == pytest.approx(58 * one)


def test_mla_cache_is_read_whole_under_tensor_parallel_attention_and_split_under_data_parallel():
    # 20 sequences at 2,000 tokens; MLA caches (512 + 64) × 2 bytes per token per layer.
    spec, device = roofline.model_spec("deepseek-r1"), roofline.chip("b200")
    per_sequence = 61 * 576 * 2 * 2000
    tp = parallel.pass_time(spec, device, 20, 2000.0, chips=8, assumptions=PLAIN)["attention"]
    dp = parallel.pass_time(spec, device, 20, 2000.0, chips=8, dp_attention=True, assumptions=PLAIN)["attention"]
    bw = 8e12 * 0.5
    assert tp == pytest.approx(20 * per_sequence / bw)  # every chip reads all 20 caches
    assert dp == pytest.approx(3 * per_sequence / bw)  # the busiest chip holds ceil(20 / 8) = 3
    weights = parallel.weight_bytes_per_chip(spec, 8, 8, True) - parallel.weight_bytes_per_chip(spec, 8, 8, False)
    assert float(weights) == pytest.approx(11.41e9 * 7 / 8)  # DP attention keeps the FP8 attention weights whole


def test_the_busiest_expert_group_matches_brute_force_routing():
    # One token picks 8 of 256 experts; 8 groups of 32. Brute force: the mean over 20,000 draws of the
    # largest group's count. The model's normal approximation should be within 15 % of it.
    spec = roofline.model_spec("deepseek-r1")
    rng = np.random.default_rng(7)
    picks = np.argsort(rng.random((20_000, 256)), axis=1)[:, :8] // 32
    counts = np.stack([(picks == g).sum(axis=1) for g in range(8)], axis=1)
    brute = counts.max(axis=1).mean()
    model = float(parallel.busiest_group_experts(spec, 1, 8))
    assert model == pytest.approx(brute, rel=0.15)
    assert model / (spec.active_experts / 8) > 2.0  # the busiest chip reads over twice the average
    # One group is all of them: the expectation E·(1 − (1 − k/E)^n) exactly.
    assert float(parallel.busiest_group_experts(spec, 50, 1)) == pytest.approx(float(roofline.experts_touched(spec, 50)))
    assert float(parallel.busiest_group_experts(spec, 1e6, 8)) == pytest.approx(32)
    assert float(parallel.busiest_group_experts(spec, 1, 8, skew=100.0)) == pytest.approx(32)  # capped


def test_blom_expected_maximum_of_normals():
    # Tabulated expected maxima of n standard normals: 2 → 0.564 (Blom within 5 %), 8 → 1.424, 72 → 2.37 (2 %).
    for n, exact, within in ((2, 0.5642, 0.05), (8, 1.4236, 0.02), (72, 2.37, 0.02)):
        assert float(parallel.expected_max_z(n)) == pytest.approx(exact, rel=within)
    assert float(parallel.expected_max_z(1)) == 0.0


def test_a_layout_whose_expert_groups_do_not_divide_its_chips_is_refused():
    with pytest.raises(ValueError, match="ep"):
        parallel.Layout(chips=8, ep=3)
    with pytest.raises(ValueError, match="ep"):
        parallel.pass_time(roofline.model_spec("deepseek-r1"), roofline.chip("b200"), 1, 0.0, chips=8, ep=3)
    assert parallel.Layout(72, 72, True).label == "72 chips, EP72, DP attention"


def test_memory_per_chip_known_value():
    # DeepSeek-R1, 8 B200s, EP8, TP attention, 10 sequences at 4,000 tokens: 1/8 of the weights
    # (671e9 × 1 byte) plus every sequence's whole MLA cache (61 × 576 × 2 bytes per token).
    spec = roofline.model_spec("deepseek-r1")
    got = float(parallel.memory_per_chip(spec, 8, 8, False, 10, 4000.0))
    assert got == pytest.approx(671e9 / 8 + 10 * 61 * 576 * 2 * 4000, rel=1e-3)


@pytest.mark.parametrize("function", [parallel.weight_bytes_per_chip, parallel.memory_per_chip])
def test_every_layout_gets_its_own_value_even_where_the_formula_ignores_part_of_it(function):
    # Weights per chip do not depend on ep; three values of ep are still three layouts, and none is
    # none (the full fuzz tier found memory_per_chip answering one value for ep=[]).
    spec = roofline.model_spec("deepseek-r1")
    args = (False, 10, 4000.0)[: 3 if function is parallel.memory_per_chip else 1]
    one = float(function(spec, 8, 8, *args))
    assert np.shape(function(spec, 8, [], *args)) == (0,)
    assert function(spec, 8, [1, 2, 8], *args).tolist() == [one] * 3


def test_serve_known_values_with_the_prefill_stall():
    # A single pool with 4 sequences: each token waits for its pass plus 4 prompts' prefill per 1,024 tokens.
    spec, device = roofline.model_spec("gpt-oss-120b"), roofline.chip("gb200")
    out = serving.serve(spec, device, 4, 8192, 1024, PLAIN, chips=1)
    prefill = float(roofline.prefill_time(spec, device, 8192, 1, PLAIN))
    step = float(roofline.decode_time(spec, device, 4, 8192 + 512, 1, PLAIN))
    tpot = step + 4 * prefill / 1024
    assert float(out["tpot_s"]) == pytest.approx(tpot)
    assert float(out["ttft_s"]) == pytest.approx(prefill)
    assert float(out["e2e_latency_s"]) == pytest.approx(prefill + 1024 * tpot)
    assert float(out["output_tokens_per_s_per_chip"]) == pytest.approx(4 * 1024 / (prefill + 1024 * tpot))
    assert float(out["total_tokens_per_s_per_chip"]) == pytest.approx(9 * float(out["output_tokens_per_s_per_chip"]))


def test_disaggregated_pools_flow_at_the_slower_rate_and_count_as_inferencex_does():
    spec, device = roofline.model_spec("deepseek-r1"), roofline.chip("b200")
    prefill = float(roofline.prefill_time(spec, device, 8192, 8, PLAIN))
    # One 8-chip prefill worker caps the flow at 1 / prefill requests/s; 4,096 requests in flight exceed it.
    busy = serving.serve_disaggregated(spec, device, 4096, 8192, 1024, 8, 8, 1, 2, assumptions=PLAIN)
    assert bool(busy["prefill_bound"])
    rate = 1 / prefill
    assert float(busy["input_tokens_per_s_per_prefill_chip"]) == pytest.approx(rate * 8192 / 8)
    assert float(busy["output_tokens_per_s_per_decode_chip"]) == pytest.approx(rate * 1024 / 16)
    assert float(busy["total_tokens_per_s_per_chip"]) == pytest.approx(rate * 9216 / 24)
    # One request in flight: the decode pool sets the pace; per-user speed is 1 ÷ one pass.
    calm = serving.serve_disaggregated(spec, device, 1, 8192, 1024, 8, 8, 1, 1, assumptions=PLAIN)
    step = float(roofline.decode_time(spec, device, 1, 8192 + 512, 8, PLAIN))
    assert not bool(calm["prefill_bound"])
    assert float(calm["tokens_per_s_per_user"]) == pytest.approx(1 / step)
    assert float(calm["e2e_latency_s"]) == pytest.approx(prefill + 1024 * step)


def test_mtp_drafts_cost_a_layer_each_and_yield_their_accepted_tokens():
    spec, device = roofline.model_spec("deepseek-r1"), roofline.chip("b200")
    mtp = serving.serve(spec, device, 1, 1024, 2048, PLAIN, chips=8, drafts=3, tokens_per_pass=2.82)
    verify = float(roofline.decode_time(spec, device, 1, 2048, 8, PLAIN, tokens_per_sequence=4))
    one = float(roofline.decode_time(spec, device, 1, 2048, 8, PLAIN))
    prefill = float(roofline.prefill_time(spec, device, 1024, 8, PLAIN))
    assert float(mtp["tpot_s"]) == pytest.approx((verify + 3 * one / 61 + prefill * 2.82 / 2048) / 2.82)
    # With the calibrated fixed cost per layer the batch-1 pass is latency-bound, so verifying 4 tokens costs
    # little more than 1: three drafts at 2.82 tokens a pass pay more than 2×, as TensorRT-LLM measured (2.28×).
    plain = serving.serve(spec, device, 1, 1024, 2048, chips=8)
    mtp = serving.serve(spec, device, 1, 1024, 2048, chips=8, drafts=3, tokens_per_pass=2.82)
    assert float(mtp["tokens_per_s_per_user"]) / float(plain["tokens_per_s_per_user"]) > 2.0


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["gpt-oss-120b", "deepseek-r1", "kimi-k2.5"]),
       st.sampled_from(["h100", "b200", "gb200", "gb300", "mi355x"]), st.sampled_from(["1k/1k", "8k/1k"]))
def test_the_sweep_never_returns_a_configuration_beaten_on_both_axes(model, accelerator, workload):
    isl, osl = {"1k/1k": (1024, 1024), "8k/1k": (8192, 1024)}[workload]
    every = serving.sweep(model, accelerator, isl=isl, osl=osl)
    best = serving.frontier(model, accelerator, isl=isl, osl=osl)
    x, y = every["output_tokens_per_s_per_chip"].to_numpy(), every["tokens_per_s_per_user"].to_numpy()
    for _, row in best.iterrows():
        beaten = (x >= row["output_tokens_per_s_per_chip"]) & (y >= row["tokens_per_s_per_user"]) & (
            (x > row["output_tokens_per_s_per_chip"]) | (y > row["tokens_per_s_per_user"]))
        assert not beaten.any()
    # And every sweep point is matched or beaten by some frontier point.
    bx, by = best["output_tokens_per_s_per_chip"].to_numpy(), best["tokens_per_s_per_user"].to_numpy()
    covered = (bx[None, :] >= x[:, None]) & (by[None, :] >= y[:, None])
    assert covered.any(axis=1).all()
    assert best["tokens_per_s_per_user"].is_monotonic_decreasing
    assert best["output_tokens_per_s_per_chip"].is_monotonic_increasing


def test_wide_expert_parallelism_wins_at_load_and_few_chips_at_the_interactive_end():
    best = serving.frontier("deepseek-r1", "gb200")
    loaded = best.iloc[-1]
    assert loaded["ep"] == loaded["chips"] >= 16 and bool(loaded["dp_attention"])
    assert not math.isclose(best["chips"].min(), best["chips"].max())


def test_instances_on_tpu7x_stop_at_its_cube_and_on_trainium2_span_instances_over_efa():
    spec = roofline.model_spec("deepseek-r1")
    tpu, trn = roofline.chip("tpu7x"), roofline.chip("trainium2")
    assert sorted(set(serving.layouts(spec, tpu)["chips"])) == [1, 2, 4, 8, 16, 32, 64]
    # Trainium2 publishes its network, so layouts reach four 16-chip instances, joined by EFA.
    assert sorted(set(serving.layouts(spec, trn)["chips"])) == [1, 2, 4, 8, 16, 32, 64]
    assert list(parallel.link_bytes_s(trn, np.array([16, 32]))) == [512e9, 25e9]
    with pytest.raises(ValueError, match="64-chip domain"):
        parallel.pass_time(spec, tpu, 128, 1024.0, chips=128, ep=128, dp_attention=True)


@pytest.mark.parametrize("accelerator", ["tpu7x", "trainium2"])
@pytest.mark.parametrize("model", ["deepseek-r1", "gpt-oss-120b"])
def test_the_frontier_runs_on_chips_of_unpublished_power(model, accelerator):
    best = serving.frontier(model, accelerator)
    assert len(best) >= 5 and best["chips"].max() <= 64
    assert best["tokens_per_s_per_user"].is_monotonic_decreasing
    assert best["output_tokens_per_s_per_chip"].is_monotonic_increasing
    assert np.isfinite(best[["tpot_s", "ttft_s", "output_tokens_per_s_per_chip"]].to_numpy()).all()
    # Energy is the one unknown: rated power is unpublished for both.
    assert best["joules_per_output_token"].isna().all()


def test_deepseek_r1_fits_on_eight_trainium2_chips_at_small_batches():
    # TP8 at FP8 as released: 671 GB of weights is 83.9 GB a chip of 0.9 × 103.1 GB usable, which
    # leaves room for 8 but not 16 of the 8k/1k caches (each ~0.58 GB, every chip holding them all
    # under tensor-parallel MLA); 4 chips cannot hold the weights. One 16-chip instance takes 1,024.
    every = serving.sweep("deepseek-r1", "trainium2")
    assert every["chips"].min() == 8
    assert every.loc[every["chips"] == 8, "batch"].max() == 8
    assert every.loc[every["chips"] == 16, "batch"].max() == 1024
    assert serving.frontier("deepseek-r1", "trainium2")["chips"].min() <= 16
