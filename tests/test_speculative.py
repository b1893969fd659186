"""Speculative decoding: closed form against simulation, the roofline-priced batch model, crossovers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perwatt import figures, speculative


def test_known_values():
    # α = 0.8, γ = 4: (1 − 0.8^5) / 0.2 = 3.3616 tokens per pass.
    assert speculative.expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert speculative.speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    assert speculative.expected_tokens(0.0, 5) == pytest.approx(1.0)
    assert speculative.expected_tokens(0.7, 0) == pytest.approx(1.0)


@settings(max_examples=20, deadline=None)
@given(st.floats(min_value=0.0, max_value=0.95), st.integers(min_value=0, max_value=8), st.integers(0, 2**31 - 1))
def test_simulation_agrees_with_the_closed_form_within_sampling_error(alpha, gamma, seed):
    result = speculative.simulate(alpha, gamma, 20_000, seed=seed)
    exact = float(speculative.expected_tokens(alpha, gamma))
    # Five standard errors (a false alarm about once in 1.7 million draws), plus the resolution of
    # the sample itself: a mean over n rounds moves in steps of 1/n, so a rare event (tiny α) that
    # never occurs shows a standard error of zero.
    assert abs(result["mean"] - exact) <= 5 * result["stderr"] + 5 / result["rounds"]


def test_simulation_is_deterministic_for_a_seed():
    assert speculative.simulate(0.7, 3, 5000, seed=11) == speculative.simulate(0.7, 3, 5000, seed=11)
    assert speculative.simulate(0.7, 3, 5000, seed=11) != speculative.simulate(0.7, 3, 5000, seed=12)


@given(st.floats(min_value=0.01, max_value=0.95), st.floats(min_value=0.0, max_value=1.0))
def test_best_gamma_is_the_argmax(alpha, c):
    best = int(speculative.best_gamma(alpha, c, max_gamma=16))
    values = [float(speculative.speedup(alpha, g, c)) for g in range(17)]
    assert values[best] == pytest.approx(max(values))


def test_costlier_drafts_shorten_the_best_draft():
    assert speculative.best_gamma(0.8, 0.02) > speculative.best_gamma(0.8, 0.3)


def test_batch_one_dense_model_reproduces_the_closed_form():
    # Memory-bound and dense: verifying γ+1 tokens costs the same bytes as one.
    measured = speculative.batch_speedup("llama-3.1-8b", "h100", 0.8, 4, 0.05, 1, 512)["speedup"]
    assert float(measured) == pytest.approx(float(speculative.speedup(0.8, 4, 0.05)), rel=1e-3)


def test_speculation_stops_paying_at_large_batch_for_short_contexts():
    frame = speculative.batch_frame("llama-3.1-8b", "h100", 0.7, 3, 0.1, 512)
    assert frame["speedup"].iloc[0] > 1.5
    assert frame["speedup"].iloc[-1] < 1.0
    assert 1 < frame["crossover_batch"].iloc[0] < 1024


def test_energy_per_token_moves_inversely_to_the_speedup():
    frame = speculative.batch_frame("llama-3.1-8b", "h100", 0.7, 3, 0.1, 512)
    assert np.allclose(frame["energy_ratio"], 1 / frame["speedup"])


@pytest.mark.parametrize(("change", "direction"), [
    ({"alpha": 0.9}, +1),   # better drafts pay longer
    ({"c": 0.3}, -1),       # costlier drafts stop paying sooner
    ({"gamma": 4}, -1),     # longer drafts add verification work
])
def test_crossover_moves_the_right_way(change, direction):
    base = {"model": "llama-3.1-8b", "accelerator": "h100", "alpha": 0.7, "gamma": 3, "c": 0.1, "context": 512}
    before = speculative.crossover_batch(**base)
    after = speculative.crossover_batch(**{**base, **change})
    assert math.isfinite(before) and math.isfinite(after)
    assert np.sign(after - before) == direction


def test_long_contexts_keep_speculation_paying():
    assert math.isnan(speculative.crossover_batch("llama-3.1-8b", "h100", 0.7, 3, 0.1, context=2048))


def test_moe_verification_reads_more_experts_at_small_batch():
    out = speculative.batch_speedup("deepseek-r1", "gb300", 0.7, 3, 0.1, np.array([1.0, 64.0]), 8704.0)
    assert out["speedup"][0] < out["speedup"][1]


def test_figure_crossover_known_value_from_the_roofline_passes():
    # With free drafts (c = 0) a round is one verification pass of γ + 1 = 3 tokens per sequence and
    # yields 1 + α + α² = 1 + 0.9 + 0.81 = 2.71 tokens, so the speed-up is 2.71 × plain ÷ verify, with
    # both passes priced by the roofline directly (not through speculative.*). It is 2.71 while both
    # passes are memory-bound, then falls as the 3-token pass turns compute-bound; the first batch
    # where it is ≤ 1 is 252 (on one H100: 128 tokens of context per sequence fit).
    from perwatt import roofline
    spec, device = roofline.model_spec("llama-3.1-8b"), roofline.chip("h100")
    batches = np.arange(1.0, 4097.0)
    chips = roofline.chips_needed(spec, device, batches, 128.0)
    plain = roofline.decode_time(spec, device, batches, 128.0, chips)
    verify = roofline.decode_time(spec, device, batches, 128.0, chips, tokens_per_sequence=3)
    gain = 2.71 * plain / verify
    assert gain[0] == pytest.approx(2.71, rel=1e-9)  # batch 1: both passes read the same weights
    first_losing = int(batches[np.flatnonzero(gain <= 1.0)[0]])
    assert first_losing == 252 and chips[251] == 1
    assert gain[250] > 1.0 >= gain[251]  # batch 251 still gains, 252 does not
    frame = figures.speculation_batch().frame(alpha=0.9, gamma=2, c=0.0, context=128)
    assert set(frame["crossover_batch"]) == {252.0}
    assert frame.loc[frame["batch"] <= 64, "speedup"].to_list() == pytest.approx([2.71] * 7, rel=1e-9)
    assert frame["crossover_label"].iloc[0] == "stops paying at batch 252"


@pytest.mark.parametrize(("call", "name"), [
    (lambda: speculative.expected_tokens(1.0, 3), "alpha"),
    (lambda: speculative.expected_tokens(-0.1, 3), "alpha"),
    (lambda: speculative.expected_tokens(0.5, 2.5), "gamma"),
    (lambda: speculative.speedup(0.5, 2, -0.1), "c"),
    (lambda: speculative.simulate(0.5, 2, 1), "rounds"),
])
def test_bad_input_names_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_unexplained_factor_known_value():
    # α = 0.9, γ = 8: (1 − 0.9⁹) / 0.1 = (1 − 0.387420489) / 0.1 = 6.12579511 tokens per pass.
    assert speculative.unexplained_factor(54.0) == pytest.approx(54.0 / 6.12579511)
    assert speculative.unexplained_factor(54.0) == pytest.approx(8.8152, abs=1e-4)
    assert speculative.unexplained_factor(10.0, alpha=0.5, gamma=1) == pytest.approx(10.0 / 1.5)
    with pytest.raises(ValueError):
        speculative.unexplained_factor(0.0)


def test_batch_speedup_prices_drafts_at_plain_steps_and_charges_every_chip():
    # A round: γ drafts at c plain steps each, then one verification pass of γ+1 tokens per sequence.
    # At batch 1,024 the verification pass costs more than a plain step (compute-bound), so pricing
    # the drafts at the verify pass, or forgetting the instance's chips, both move these numbers.
    from perwatt import roofline
    spec, device = roofline.model_spec("llama-3.1-8b"), roofline.chip("h100")
    batch, context, gamma, c, alpha = 1024.0, 512.0, 3, 0.1, 0.7
    chips = float(roofline.chips_needed(spec, device, batch, context))
    assert chips > 1
    plain = float(roofline.decode_time(spec, device, batch, context, chips))
    verify = float(roofline.decode_time(spec, device, batch, context, chips, tokens_per_sequence=gamma + 1))
    assert verify > 1.5 * plain
    tokens = (1 - alpha ** 4) / (1 - alpha)  # 2.533
    per_token = (gamma * c * plain + verify) / tokens
    out = speculative.batch_speedup("llama-3.1-8b", "h100", alpha, gamma, c, batch, context)
    assert float(out["speculative_s_per_token"]) == pytest.approx(per_token, rel=1e-12)
    assert float(out["speedup"]) == pytest.approx(plain / per_token, rel=1e-12)
    assert float(out["plain_j_per_token"]) == pytest.approx(700 * chips * plain / batch, rel=1e-12)
    assert float(out["speculative_j_per_token"]) == pytest.approx(700 * chips * per_token / batch, rel=1e-12)


def test_best_gamma_known_value_and_boundaries():
    # α = 0.8, c = 0.05: speed-ups (1 − 0.8^(γ+1)) / 0.2 / (1 + 0.05γ) peak at γ = 8 (3.8641 / 1.4 = 2.7601).
    assert int(speculative.best_gamma(0.8, 0.05)) == 8
    assert float(speculative.speedup(0.8, 8, 0.05)) == pytest.approx((1 - 0.8 ** 9) / 0.2 / 1.4)
    assert int(speculative.best_gamma(0.8, 0.05, max_gamma=3)) == 3  # capped
    assert int(speculative.best_gamma(0.0, 0.05)) == 0  # nothing is accepted: do not speculate
    with pytest.raises(ValueError, match="max_gamma"):
        speculative.best_gamma(0.8, 0.05, max_gamma=-1)
    with pytest.raises(ValueError, match="rounds"):
        speculative.simulate(0.8, 3, "10")


def test_simulation_standard_error_known_value():
    # α = 0.5, γ = 1: each pass keeps 1 or 2 tokens with equal odds, so the spread is 0.5 and the
    # standard error of a mean over 10,000 passes is 0.5 / √10,000 = 0.005.
    result = speculative.simulate(0.5, 1, 10_000, seed=3)
    assert result["mean"] == pytest.approx(1.5, abs=0.03)
    assert result["stderr"] == pytest.approx(0.005, rel=0.02)
