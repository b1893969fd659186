"""The serving model: architecture arithmetic, roofline placement, frontier shape, validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perwatt import roofline, serving

MODELS = ("gpt-oss-120b", "deepseek-r1", "kimi-k2.5")


@pytest.mark.parametrize("name", MODELS)
def test_weight_split_reproduces_total_and_active_counts(name):
    spec = roofline.model_spec(name)
    assert spec.shared_params + spec.routed_experts * spec.per_expert_params == pytest.approx(spec.total_params)
    assert spec.shared_params + spec.active_experts * spec.per_expert_params == pytest.approx(spec.active_params)
    assert 0 < spec.shared_params < spec.active_params


def test_kv_cache_per_token_matches_the_architectures():
    # Elements per token over all layers, times 2 bytes (BF16): facts.md gives 36,864 and 35,136 elements.
    assert float(roofline.kv_bytes(roofline.model_spec("gpt-oss-120b"), 1)) == 36_864 * 2
    assert float(roofline.kv_bytes(roofline.model_spec("deepseek-r1"), 1)) == 35_136 * 2


def test_sliding_window_caps_half_the_layers():
    spec = roofline.model_spec("gpt-oss-120b")
    per_token_all_layers = 36_864 * 2
    expected = per_token_all_layers * (0.5 * 10_000 + 0.5 * 128)
    assert float(roofline.kv_bytes(spec, 10_000)) == pytest.approx(expected)


@pytest.mark.parametrize(("name", "gflop"), [("gpt-oss-120b", 10.2), ("deepseek-r1", 74.0), ("kimi-k2.5", 64.0)])
def test_decode_flops_per_token_without_context_are_twice_the_active_parameters(name, gflop):
    assert float(roofline.decode_flops(roofline.model_spec(name), 1, 0)) == pytest.approx(gflop * 1e9)


def test_one_token_touches_k_experts_and_many_touch_them_all():
    spec = roofline.model_spec("deepseek-r1")
    assert float(roofline.experts_touched(spec, 1)) == pytest.approx(spec.active_experts)
    assert float(roofline.experts_touched(spec, 100_000)) == pytest.approx(spec.routed_experts)
    assert float(roofline.weight_bytes(spec, 1)) == pytest.approx(spec.active_params * 1.0)  # FP8: 1 byte each


@pytest.mark.parametrize(("accelerator", "bits", "ridge"), [("gb200", 8, 625), ("gb200", 4.25, 1250), ("h100", 16, 295.2)])
def test_ridge_points(accelerator, bits, ridge):
    assert roofline.ridge_point(roofline.chip(accelerator), bits) == pytest.approx(ridge, rel=1e-3)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("accelerator", ["h100", "b200", "gb300"])
def test_decode_is_memory_bound_and_prefill_far_more_intense(name, accelerator):
    points = roofline.roofline_points(name, accelerator, 1).set_index("point")
    assert points.loc["decode", "bound"] == "memory-bound"
    # One 8k prompt touches nearly every expert, so on FP4 Blackwell parts a sparse model's
    # prefill can fall just short of the ridge; it is still two orders above decode.
    assert points.loc["prefill", "intensity"] > 50 * points.loc["decode", "intensity"]
    if accelerator == "h100":
        assert points.loc["prefill", "bound"] == "compute-bound"


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(["h100", "h200", "b200", "gb200", "b300", "gb300"]),
       st.sampled_from(["1k/1k", "8k/1k", "1k/8k"]))
def test_within_one_instance_size_batching_trades_interactivity_for_throughput(name, accelerator, workload):
    isl, osl = {"1k/1k": (1024, 1024), "8k/1k": (8192, 1024), "1k/8k": (1024, 8192)}[workload]
    frame = serving.frontier(name, accelerator, isl=isl, osl=osl)
    for _, group in frame.groupby("chips"):
        assert group["output_tokens_per_s_per_chip"].is_monotonic_increasing
        assert group["tokens_per_s_per_user"].is_monotonic_decreasing


def test_less_overlap_and_lower_efficiency_are_slower():
    spec, device = roofline.model_spec("deepseek-r1"), roofline.chip("gb300")
    base = serving.serve(spec, device, 64, 8192, 1024)["tpot_s"]
    serial = serving.serve(spec, device, 64, 8192, 1024, roofline.Assumptions(overlap=0.0))["tpot_s"]
    slow = serving.serve(spec, device, 64, 8192, 1024, roofline.Assumptions(bandwidth_efficiency=0.4))["tpot_s"]
    assert serial > base and slow > base


def test_serve_broadcasts_over_a_million_configurations():
    spec, device = roofline.model_spec("kimi-k2.5"), roofline.chip("b300")
    batch = np.tile(np.array(serving.BATCHES, dtype=float), 100_000)[:1_000_000]
    out = serving.serve(spec, device, batch, 8192.0, 1024.0)
    assert out["tpot_s"].shape == (1_000_000,)
    assert np.isfinite(out["output_tokens_per_s_per_chip"]).all()


def test_required_bandwidth_is_bytes_per_token_times_rate():
    spec = roofline.model_spec("gpt-oss-120b")
    need = float(serving.required_bandwidth("gpt-oss-120b", 22_935, 8704))
    assert need == pytest.approx(float(roofline.decode_bytes(spec, 1, 8704)) * 22_935)


def test_validation_errors_follow_from_the_formula():
    table = serving.validation().set_index("measurement_id")
    spec = roofline.model_spec("llama-3.1-8b")
    seconds = float(roofline.decode_bytes(spec, 1, 1024)) / (3.35e12 * roofline.DEFAULTS.bandwidth_efficiency)
    assert table.loc["vllm-8b-h100", "modelled_tpot_ms"] == pytest.approx(seconds * 1000, rel=1e-9)
    assert table.loc["vllm-8b-h100", "measured_tpot_ms"] == pytest.approx(1000 / 133)
    assert table.loc["vllm-8b-h100", "error_pct"] == pytest.approx((seconds * 1000 / (1000 / 133) - 1) * 100)
    assert (table["error_pct"].abs() < 50).all()


def test_jalapeno_cannot_be_modelled_and_says_why():
    with pytest.raises(ValueError, match="memory and bandwidth are unknown"):
        roofline.chip("jalapeno")
    assert "jalapeno" not in roofline.known_chips()


@pytest.mark.parametrize(("kwargs", "name"), [({"bandwidth_efficiency": 0}, "bandwidth_efficiency"),
                                              ({"compute_efficiency": 1.5}, "compute_efficiency"),
                                              ({"overlap": -0.1}, "overlap"), ({"kv_bits": 0}, "kv_bits")])
def test_bad_assumptions_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        roofline.Assumptions(**kwargs)


def test_unknown_model_and_precision_are_refused():
    with pytest.raises(ValueError, match="model must be one of"):
        roofline.model_spec("gpt-5")
    with pytest.raises(ValueError, match="precision must be one of"):
        roofline.model_spec("deepseek-r1").with_precision("int2")
