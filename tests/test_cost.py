"""The cost of a token (perwatt.cost) against cases worked by hand, and its per-watt proxy test."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from perwatt import cost, crosschip, figures
from perwatt.specs import chip

RATE = st.floats(10.0, 1e5)
POWER = st.floats(100.0, 3000.0)
HOURLY = st.floats(0.1, 20.0)
PURCHASE = st.floats(1000.0, 100_000.0)


def test_owned_chip_hour_by_hand():
    # US$35,000 over 5 years of 8,760 hours; 1 kW × PUE 1.3 × US$0.08/kWh; US$0.30 of overhead.
    hour = cost.owned_usd_per_hour(35_000.0, 5.0, 1000.0, 1.3, 0.08, 0.3)
    assert hour["capital"] == pytest.approx(35_000 / 43_800, rel=1e-12)
    assert hour["electricity"] == pytest.approx(0.104, rel=1e-12)
    assert hour["total"] == pytest.approx(35_000 / 43_800 + 0.104 + 0.3, rel=1e-12)


def test_per_million_by_hand():
    # US$3.60 an hour at 1,000 tokens/s is US$1e-6 a token, US$1 a million. A quarter of the time is
    # prefill for the 80 % of tokens that are input: 0.25 / 0.8 and 0.75 / 0.2 dollars per million.
    costs = cost.per_million(3.6, 1000.0, 0.25, 0.8)
    assert costs["total"] == pytest.approx(1.0, rel=1e-12)
    assert costs["input"] == pytest.approx(0.3125, rel=1e-12)
    assert costs["output"] == pytest.approx(3.75, rel=1e-12)


def test_a_cost_too_large_for_a_float_is_refused_by_name_without_a_numpy_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered" would be raised here
        with pytest.raises(ValueError, match="tokens_per_s and input_fraction: the cost per input token overflows"):
            cost.per_million(2.21, np.array([1e-6, 1.0]), 0.3, 1e-305)


@given(usd=HOURLY, tokens=RATE, share=st.floats(0.0, 1.0), fraction=st.floats(0.01, 0.99))
def test_input_and_output_costs_add_up_to_the_chip_hour(usd, tokens, share, fraction):
    costs = cost.per_million(usd, tokens, share, fraction)
    # Each token class paid at its price: the whole chip-hour, shared out and nothing left over.
    assert fraction * costs["input"] + (1 - fraction) * costs["output"] == pytest.approx(costs["total"], rel=1e-9)
    assert cost.tokens_per_usd(costs["total"]) == pytest.approx(1e6 / costs["total"], rel=1e-12)


def test_rental_cost_of_a_gb200_by_hand():
    curve = crosschip.frontier(cost.MODEL, chip("gb200"))
    busiest = curve.loc[curve["y"].idxmax()]
    table = cost.token_costs("rental", 2.0, 0.08, 5.0, 0.3, pue=1.0).set_index(["system", "end"])
    row = table.loc[("gb200", "peak")]
    # Tokens/s per chip = tokens/s/kW × 1.2 kW; US$2.21 an hour over 3,600 s of them, per million.
    assert row["usd_per_million_tokens"] == pytest.approx(2.21 / (3600 * busiest["y"] * 1.2) * 1e6, rel=1e-9)
    assert row["tokens_per_usd"] == pytest.approx(1e6 / row["usd_per_million_tokens"], rel=1e-12)
    # The rent is 2.21 / (1.2 kW × US$0.08) = 23 times the electricity at PUE 1, at any operating point.
    assert 1 / row["electricity_share"] == pytest.approx(2.21 / (1.2 * 0.08), rel=1e-12)
    assert round(1 / row["electricity_share"]) == 23


def test_the_interactive_end_is_the_frontier_chapters_reading():
    points = cost.operating_points().set_index(["system", "end"])
    for system in cost.CHIPS:
        curve = crosschip.frontier(cost.MODEL, chip(system))
        best = crosschip.best_at(curve, cost.INTERACTIVE_TARGET)[0]
        assert points.loc[(system, "interactive"), "tps_per_kw"] == pytest.approx(best, rel=1e-12)
        assert points.loc[(system, "interactive"), "tokens_per_s_per_user"] >= cost.INTERACTIVE_TARGET
        assert points.loc[(system, "peak"), "tps_per_kw"] == pytest.approx(curve["y"].max(), rel=1e-12)
        # The busy end spends a larger share of its time on prefill than the fast end here.
        assert 0 < points.loc[(system, "interactive"), "prefill_share"] < points.loc[(system, "peak"), "prefill_share"] < 1


def test_owned_basis_by_hand_and_chips_without_a_price_stay_out():
    table = cost.token_costs("owned", 2.0, 0.08, 5.0, 0.3, pue=1.3)
    assert set(table["system"]) == {"b200", "h100"}  # the only chips with a purchase price
    point = cost.operating_points().set_index(["system", "end"]).loc[("b200", "peak")]
    # B200: the middle of US$30,000–40,000 over five years, 1 kW × 1.3 × US$0.08, US$0.30 overhead.
    hour = 35_000 / (5 * 8760) + 1.0 * 1.3 * 0.08 + 0.3
    row = table.set_index(["system", "end"]).loc[("b200", "peak")]
    assert row["usd_per_chip_hour"] == pytest.approx(hour, rel=1e-12)
    assert row["usd_per_million_tokens"] == pytest.approx(hour / 3600 / point["tokens_per_s"] * 1e6, rel=1e-12)
    assert cost.rental_usd_per_hour("gb300") is None and cost.purchase_usd("gb200") is None


def test_custom_basis_charges_every_chip_the_same_hour():
    table = cost.token_costs("custom", 3.0, 0.08, 5.0, 0.3)
    points = cost.operating_points().set_index(["system", "end"])
    for row in table.itertuples():
        assert row.usd_per_million_tokens == pytest.approx(
            3.0 / 3600 / points.loc[(row.system, row.end), "tokens_per_s"] * 1e6, rel=1e-12)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="basis"):
        cost.token_costs("lease", 2.0, 0.08, 5.0, 0.3)
    with pytest.raises(ValueError, match="lifetime_years"):
        cost.owned_usd_per_hour(30_000.0, 0.0, 1000.0, 1.3, 0.08, 0.3)
    with pytest.raises(ValueError, match="price_usd_per_kwh"):
        cost.token_costs("owned", 2.0, 80.0, 5.0, 0.3)


def _cost(tps_per_kw, power_w, usd_per_hour):
    return cost.per_million.unchecked(usd_per_hour, tps_per_kw * power_w / 1000.0, 0.5, 0.5)["total"]


def test_rankings_by_hand():
    # a: 2,000 tokens/s/kW at 1 kW for US$2 an hour; b: 1,000 at 0.5 kW for US$1. Same price per
    # watt (q = 1), twice the tokens per watt (w = 2): a costs half as much per token.
    r = cost.rankings(2000.0, 1000.0, 2.0, 1000.0, 500.0, 1.0)
    assert (r["per_watt_ratio"], r["price_per_watt_ratio"]) == (2.0, 1.0)
    assert r["cost_ratio"] == pytest.approx(0.5, rel=1e-12) and r["agree"]
    # Price a's watt-hour at three times b's and per watt still favours a, cost no longer does.
    assert not cost.rankings(2000.0, 1000.0, 6.0, 1000.0, 500.0, 1.0)["agree"]


@settings(max_examples=200)
@given(ya=RATE, pa=POWER, yb=RATE, pb=POWER, hb=HOURLY, factor=st.floats(0.2, 5.0))
def test_rankings_flip_exactly_where_price_per_watt_ratio_meets_per_watt_ratio(ya, pa, yb, pb, hb, factor):
    w = ya / yb
    assume(abs(np.log(w)) > 1e-3 and abs(np.log(factor)) > 1e-3)
    at_flip = w * pa / pb * hb  # a's hourly price at which q = w
    assert _cost(ya, pa, at_flip) == pytest.approx(_cost(yb, pb, hb), rel=1e-9)
    ha = at_flip * factor
    r = cost.rankings(ya, pa, ha, yb, pb, hb)
    per_watt_a, cost_a = ya > yb, _cost(ya, pa, ha) < _cost(yb, pb, hb)
    assert r["agree"] == (per_watt_a == cost_a)
    # The stated rule: they agree exactly when q and 1 lie on the same side of w.
    assert r["agree"] == ((r["price_per_watt_ratio"] < w) == (1 < w))


def _owned_cost(y, p, k, life, pue, price, overhead):
    hour = cost.owned_usd_per_hour.unchecked(k, life, p, pue, price, overhead)["total"]
    return hour / 3600 / (y * p / 1000.0)


@settings(max_examples=200)
# Equal fixed costs per token: they tie at a price of zero, so at no positive price (a rounding
# residue once reported a flip at 1e-17 US$/kWh).
@example(ya=100.0, pa=1000.0, ka=1000.0, yb=1376.0, pb=100.0, kb=1376.0, life=1.0, overhead=0.0, price=1.0)
# Equal purchase costs per token: no lifetime ties them (a residue once gave 9e-15 years).
@example(ya=12533.0, pa=100.0, ka=12533.0, yb=19141.0, pb=100.0, kb=19141.0, life=1.0, overhead=0.0, price=1.0)
@given(ya=RATE, pa=POWER, ka=PURCHASE, yb=RATE, pb=POWER, kb=PURCHASE, life=st.floats(1.0, 10.0),
       overhead=st.floats(0.0, 1.0), price=st.floats(0.01, 1.0))
def test_owned_flip_ties_at_its_price_and_lifetime_and_agrees_as_stated(ya, pa, ka, yb, pb, kb, life, overhead, price):
    assume(abs(np.log(ya / yb)) > 1e-3)
    pue = 1.2
    flip = cost.owned_flip.unchecked(ya, pa, ka, yb, pb, kb, life, pue, price, overhead)
    per_watt_a = ya > yb

    def agree(p, years):
        return per_watt_a == (_owned_cost(ya, pa, ka, years, pue, p, overhead)
                              < _owned_cost(yb, pb, kb, years, pue, p, overhead))

    p_star = flip["flip_price_usd_per_kwh"]
    if p_star is not None:
        assert _owned_cost(ya, pa, ka, life, pue, p_star, overhead) == pytest.approx(
            _owned_cost(yb, pb, kb, life, pue, p_star, overhead), rel=1e-6)
        assert agree(p_star * 1.01, life) and not agree(p_star * 0.99, life)
    else:  # no positive price ties them: they agree at every price, as at a very high one
        assert agree(0.01, life) and agree(1.0, life)
    l_star = flip["flip_lifetime_years"]
    if l_star is not None:
        assert _owned_cost(ya, pa, ka, l_star, pue, price, overhead) == pytest.approx(
            _owned_cost(yb, pb, kb, l_star, pue, price, overhead), rel=1e-6)
        assert agree(price, l_star * 1.01) == bool(flip["agree_longer"])
        assert agree(price, l_star * 0.99) != bool(flip["agree_longer"])


def test_proxy_table_with_the_books_numbers():
    table = cost.proxy_table(0.08, 5.0, 0.3)
    points = cost.operating_points().set_index(["system", "end"])
    row = table.set_index(["end", "a", "b"]).loc[("peak", "gb200", "b200")]
    w = points.loc[("gb200", "peak"), "tps_per_kw"] / points.loc[("b200", "peak"), "tps_per_kw"]
    assert row["per_watt_ratio"] == pytest.approx(w, rel=1e-12)
    assert row["price_per_watt_ratio"] == pytest.approx((2.21 / 1200) / (1.95 / 1000), rel=1e-12)
    assert row["flip_usd_per_hour_a"] == pytest.approx(w * 1.2 * 1.95, rel=1e-12)
    assert _cost(points.loc[("gb200", "peak"), "tps_per_kw"], 1200, row["flip_usd_per_hour_a"]) == pytest.approx(
        _cost(points.loc[("b200", "peak"), "tps_per_kw"], 1000, 1.95), rel=1e-9)
    assert len(table) == 2 * 6  # four chips, six pairs, two ends


def test_the_figure_shows_the_model_rounded():
    fig = figures.token_cost()
    frame = fig.frame(basis="owned", price_usd_per_kwh=0.16)
    model = cost.token_costs("owned", fig.control("custom_usd_per_hour").default, 0.16, 5.0, 0.3)
    assert np.allclose(frame["usd_per_million_tokens"], model["usd_per_million_tokens"], rtol=1e-3)
    # Tooltip-only columns travel at three significant digits, tokens per dollar in millions.
    assert np.allclose(frame["usd_per_million_output"], model["usd_per_million_output"], rtol=5e-3)
    assert np.allclose(frame["million_tokens_per_usd"], model["tokens_per_usd"] / 1e6, rtol=5e-3)
    assert not np.allclose(frame["usd_per_million_output"], model["usd_per_million_output"], rtol=1e-9, atol=0)
    assert len(fig.grid) <= 1700  # the page budget: every setting of five controls, 3 × 3 × 3 × 3 × 3
