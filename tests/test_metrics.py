"""The per-watt formulas: known values, identities, monotonicity and bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perwatt import metrics

tps = st.floats(min_value=1.0, max_value=1e7, allow_nan=False, allow_infinity=False)
power = st.floats(min_value=20.0, max_value=20_000.0, allow_nan=False, allow_infinity=False)
price = st.floats(min_value=0.0, max_value=5.0, allow_nan=False, allow_infinity=False)
pue = st.floats(min_value=1.0, max_value=3.0, allow_nan=False, allow_infinity=False)
tokens = st.integers(min_value=1, max_value=1_000_000)


# Known values, worked by hand.
def test_joules_per_token_of_published_figure():
    # 85,448 tokens per kJ: 1000 / 85448 J each.
    assert metrics.joules_per_token(85_448.0) == pytest.approx(0.011703024, rel=1e-8)


def test_three_point_six_joules_per_token_is_one_kwh_per_million():
    assert metrics.kwh_per_million_tokens(3.6) == pytest.approx(1.0, rel=1e-12)


def test_energy_cost_known_value():
    # 1 kWh per million tokens, at $0.10/kWh and PUE 1.5: $0.15.
    assert metrics.energy_cost_per_million_tokens(3.6, 0.10, 1.5) == pytest.approx(0.15, rel=1e-12)


def test_chip_throughput_known_value():
    assert metrics.chip_throughput(44_960.0, 1_200.0) == pytest.approx(53_952.0, rel=1e-12)


def test_rebasing_from_measured_to_rated_scales_by_power_ratio():
    # 85,448 tokens/s/kW on 550 W is 46,996.4 tokens/s; on 700 W that is 67,137.7 tokens/s/kW.
    tokens = metrics.chip_throughput(85_448.0, 550.0)
    assert tokens == pytest.approx(46_996.4, rel=1e-12)
    assert metrics.tps_per_kw_at(tokens, 700.0) == pytest.approx(46_996.4 / 0.7, rel=1e-12)


def test_eight_k_one_k_output_factor_is_nine():
    assert metrics.output_token_fraction(8192, 1024) == pytest.approx(1 / 9, rel=1e-12)
    assert metrics.per_output_token(1.0, 8192, 1024) == pytest.approx(9.0, rel=1e-12)


def test_hardware_cost_known_value():
    # $3.60/hour at 1,000 tokens/s: 3.6 million tokens an hour, so $1 per million.
    assert metrics.hardware_cost_per_million_tokens(3.6, 1_000.0) == pytest.approx(1.0, rel=1e-12)


# Identities and round trips.
@given(tps)
def test_joules_times_tps_per_kw_is_one_thousand(x):
    assert metrics.joules_per_token(x) * x == pytest.approx(1000.0, rel=1e-12)


def _rebase(x, p_from, p_to):
    return metrics.tps_per_kw_at(metrics.chip_throughput(x, p_from), p_to)


@given(tps, power, power)
def test_rebase_round_trip(x, p1, p2):
    assert _rebase(_rebase(x, p1, p2), p2, p1) == pytest.approx(x, rel=1e-12)


@given(tps, power)
def test_chip_throughput_round_trip(x, p):
    assert metrics.tps_per_kw_at(metrics.chip_throughput(x, p), p) == pytest.approx(x, rel=1e-12)


@given(tps, tps, power, power)
def test_same_power_basis_change_leaves_ratio_unchanged(a, b, p_from, p_to):
    # Re-expressing both sides on the same new basis cannot move their ratio.
    before = metrics.ratio(a, b)
    after = metrics.ratio(_rebase(a, p_from, p_to), _rebase(b, p_from, p_to))
    assert after == pytest.approx(before, rel=1e-12)


# Monotonicity.
@given(tps, st.floats(min_value=1.001, max_value=1e3))
def test_more_tokens_per_kw_means_fewer_joules(a, factor):
    assert metrics.joules_per_token(a) > metrics.joules_per_token(a * factor)


@given(st.floats(min_value=1e-6, max_value=100.0), price, price, pue)
def test_cost_rises_with_price(j, p1, p2, u):
    lo, hi = sorted((p1, p2))
    assert metrics.energy_cost_per_million_tokens(j, lo, u) <= metrics.energy_cost_per_million_tokens(j, hi, u)


@given(st.floats(min_value=1e-6, max_value=100.0), price, pue, pue)
def test_cost_rises_with_pue(j, p, u1, u2):
    lo, hi = sorted((u1, u2))
    assert metrics.energy_cost_per_million_tokens(j, p, lo) <= metrics.energy_cost_per_million_tokens(j, p, hi)


@given(tokens, tokens, tokens)
def test_longer_prompts_raise_energy_per_output_token(isl1, isl2, osl):
    lo, hi = sorted((isl1, isl2))
    assert metrics.per_output_token(1.0, lo, osl) <= metrics.per_output_token(1.0, hi, osl)


# Vectorization.
def test_arrays_and_series_broadcast_and_keep_their_index():
    series = pd.Series([85_448.0, 44_960.0], index=["jalapeno", "gb200"])
    out = metrics.chip_throughput(series, np.array([700.0, 1_200.0]))
    assert isinstance(out, pd.Series)
    assert list(out.index) == ["jalapeno", "gb200"]
    assert out.to_list() == pytest.approx([59_813.6, 53_952.0], rel=1e-12)
    array = metrics.joules_per_token(np.array([1000.0, 500.0]))
    assert isinstance(array, np.ndarray) and array.tolist() == pytest.approx([1.0, 2.0])


# Bad input: ValueError naming the parameter.
@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: metrics.chip_throughput(1000.0, -700.0), "power_w"),
        (lambda: metrics.chip_throughput(1000.0, 0.0), "power_w"),
        (lambda: metrics.chip_throughput(1000.0, float("nan")), "power_w"),
        (lambda: metrics.chip_throughput(float("nan"), 700.0), "tps_per_kw"),
        (lambda: metrics.chip_throughput(0.0, 700.0), "tps_per_kw"),
        (lambda: metrics.joules_per_token(-5.0), "tps_per_kw"),
        (lambda: metrics.joules_per_token(float("inf")), "tps_per_kw"),
        (lambda: metrics.joules_per_token("85448"), "tps_per_kw"),
        (lambda: metrics.joules_per_token(True), "tps_per_kw"),
        (lambda: metrics.kwh_per_million_tokens(-1.0), "joules_per_token"),
        (lambda: metrics.energy_cost_per_million_tokens(0.01, -0.1), "price_usd_per_kwh"),
        (lambda: metrics.energy_cost_per_million_tokens(0.01, 0.1, 0.9), "pue"),
        (lambda: metrics.hardware_cost_per_million_tokens(-1.0, 1000.0), "price_usd_per_hour"),
        (lambda: metrics.per_output_token(1.0, 0, 1024), "isl_tokens"),
        (lambda: metrics.per_output_token(1.0, 8192, -1), "osl_tokens"),
        (lambda: metrics.chip_throughput(np.array([1.0, np.nan]), 700.0), "tps_per_kw"),
    ],
)
def test_bad_input_names_the_parameter(call, parameter):
    with pytest.raises(ValueError, match=parameter):
        call()


@pytest.mark.parametrize(
    ("call", "parameter", "hint"),
    [
        (lambda: metrics.chip_throughput(1000.0, 0.7), "power_w", "kilowatts"),
        (lambda: metrics.tps_per_kw_at(1000.0, 1.4), "power_w", "kilowatts"),
        (lambda: metrics.energy_cost_per_million_tokens(0.01, 0.1, 130.0), "pue", "percentage"),
        (lambda: metrics.energy_cost_per_million_tokens(0.01, 80.0), "price_usd_per_kwh", "MWh"),
    ],
)
def test_wrong_units_are_caught_with_a_hint(call, parameter, hint):
    with pytest.raises(ValueError, match=parameter) as info:
        call()
    assert hint in str(info.value)


def test_nan_position_is_reported_for_arrays():
    with pytest.raises(ValueError, match="position 2"):
        metrics.joules_per_token(np.array([1.0, 2.0, math.nan]))


def test_lists_work_as_arrays_and_asymmetric_known_values():
    # [1,000, 2,000] tokens/s/kW: 1 and 0.5 J/token. 0.5 J/token at US$0.20/kWh and PUE 1.25:
    # 0.5 × 10⁶ / 3.6 × 10⁶ = 0.138889 kWh per million, × 1.25 × 0.20 = US$0.034722.
    assert metrics.joules_per_token([1000, 2000]).tolist() == pytest.approx([1.0, 0.5])
    assert metrics.energy_cost_per_million_tokens(0.5, 0.20, 1.25) == pytest.approx(0.5 / 3.6 * 1.25 * 0.20)
    # 1,000 in and 3,000 out: 3/4 of the tokens are output; 2 J/token overall is 2.6667 J/output token.
    assert metrics.output_token_fraction(1000, 3000) == pytest.approx(0.75)
    assert metrics.per_output_token(2.0, 1000, 3000) == pytest.approx(8 / 3)
    assert metrics.ratio(3.0, 4.0) == pytest.approx(0.75)
    assert metrics.tps_per_kw_at(350.0, 700.0) == pytest.approx(500.0)
    with pytest.raises(ValueError, match="tps_per_kw and power_w must have shapes that broadcast"):
        metrics.chip_throughput([1.0, 2.0], [700.0, 800.0, 900.0])
