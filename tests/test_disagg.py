"""Disaggregated prefill and decode (perwatt.disagg) and Amdahl's law (perwatt.amdahl)."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perwatt import amdahl, catalog, data, disagg, roofline, serving
from perwatt.specs import DEFAULTS, chip, model_spec

M = disagg.MODEL


@pytest.mark.parametrize("accelerator", ["h100", "b200", "gb200"])
@pytest.mark.parametrize("workload", ["8k/1k", "1k/8k", disagg.LONG])
def test_same_chip_split_agrees_with_one_pool_at_the_same_layout(accelerator, workload):
    # Both pools on the same chip, in the same layout and batch, with the transfer costing no chip
    # time: the split's energy and cost per request equal one pool's busy time priced the same way.
    # The two sides are computed independently: prefill_per_prompt and decode_pass for the split,
    # serve()'s TPOT (which adds the B prefills to the B requests' passes) for one pool. They agree to
    # float rounding (1e-12), not more, because the sums are taken in a different order.
    frame = disagg.phases(M, accelerator, workload)
    frame = frame[frame["single_fits"]]
    assert len(frame) > 20
    w, rent = chip(accelerator).power_w, disagg.usd_per_hour(accelerator)
    split = disagg.request_cost(frame["prefill_chip_s"], frame["decode_chip_s"], w, w, rent, rent, 0.08)
    one = disagg.request_cost(frame["single_chip_s"], 0.0, w, w, rent, rent, 0.08)
    np.testing.assert_allclose(split["joules"], one["joules"], rtol=1e-12)
    np.testing.assert_allclose(split["usd"], one["usd"], rtol=1e-12)


def test_serve_counts_each_request_its_own_prefill_wait_on_top_of_the_busy_time():
    # serve()'s energy per token divides by Little's-law throughput over the request's whole latency,
    # which holds the slot during its own prefill too: exactly chips × (that wait) ÷ B chip-seconds more.
    isl, osl = disagg.lengths("8k/1k")
    frame = disagg.phases(M, "h100", "8k/1k")
    extra = frame["chips"] * frame["prefill_wait_s"] / frame["batch"]  # the wait: one pass, all dp prompts
    np.testing.assert_allclose(frame["serve_chip_s"] - frame["single_chip_s"], extra, rtol=1e-9)
    row = frame.iloc[5]
    served = serving.serve(model_spec(M), chip("h100"), row["batch"], isl, osl, chips=row["chips"], ep=row["ep"],
                           dp_attention=row["dp_attention"])
    assert float(served["joules_per_output_token"]) * osl == pytest.approx(row["serve_chip_s"] * 700.0, rel=1e-12)


def test_request_cost_by_hand():
    # One chip-second of prefill at 1,000 W and US$3.60 an hour, two of decode at 500 W and US$1.80:
    # rent 0.001 + 0.001; energy 1,000 J + 1,000 J, each 1/3,600 kWh at US$0.36 per kWh = 0.0001.
    out = disagg.request_cost(1.0, 2.0, 1000.0, 500.0, 3.6, 1.8, 0.36)
    assert out["prefill_j"] == 1000.0 and out["decode_j"] == 1000.0 and out["joules"] == 2000.0
    assert out["prefill_usd"] == pytest.approx(0.0011) and out["decode_usd"] == pytest.approx(0.0011)
    assert out["usd"] == pytest.approx(0.0022)


def test_kv_transfer_over_the_slower_scale_out_link_and_unknown_where_unpublished():
    isl = 8192.0
    nbytes = float(roofline.kv_bytes(model_spec(M), isl, DEFAULTS.kv_bits))
    slow = min(chip("h100").scale_out_bytes_s, chip("b300").scale_out_bytes_s)
    assert disagg.kv_transfer_s(M, "b300", "h100", isl) == pytest.approx(nbytes / (slow * DEFAULTS.link_efficiency))
    assert slow == chip("h100").scale_out_bytes_s < chip("b300").scale_out_bytes_s
    assert np.isnan(disagg.kv_transfer_s(M, "h100", "gb200", isl))  # GB200's scale-out is unpublished
    got = disagg.disaggregated(M, "h100", "gb200", "8k/1k", 50.0, 0.08)
    assert np.isnan(got["transfer_s"]) and np.isnan(got["ttft_s"]) and np.isfinite(got["usd"])


@pytest.mark.parametrize("workload", ["8k/1k", "1k/8k", disagg.LONG])
@pytest.mark.parametrize("target", disagg.TARGETS)
def test_a_split_on_one_chip_never_costs_more_than_one_pool_of_it(workload, target):
    # The split may pick one pool's layout and batch for both phases, and its decode is not stretched
    # by prefills, so the cheapest split can only be as cheap or cheaper.
    for a in disagg.priced_chips():
        one = disagg.single_pool(M, a, workload, float(target), 0.08)
        split = disagg.disaggregated(M, a, a, workload, float(target), 0.08)
        if one["usd"] is not None:
            assert split["usd"] <= one["usd"] * (1 + 1e-12)
            assert split["tpot_s"] <= 1 / target and one["tpot_s"] <= 1 / target


def test_comparison_rows_add_up_and_are_relative_to_the_cheapest_single_pool():
    frame = disagg.comparison(M, "8k/1k", 50.0, 0.08)
    n = len(disagg.priced_chips())
    assert len(frame) == n + n * n
    assert frame.loc[frame["kind"] == "single", "vs_best_single"].min() == pytest.approx(1.0)
    np.testing.assert_allclose(frame["prefill_usd"] + frame["decode_usd"], frame["usd"])
    np.testing.assert_allclose(frame["prefill_j"] + frame["decode_j"], frame["joules"])
    assert ((frame["prefill_share"] > 0) & (frame["prefill_share"] < 1)).all()
    # Cost rises with the electricity price, by exactly the energy at the difference in price.
    dearer = disagg.comparison(M, "8k/1k", 50.0, 0.16)
    np.testing.assert_allclose(dearer["usd"] - frame["usd"], frame["joules"] / 3.6e6 * 0.08, rtol=1e-9)


@pytest.mark.parametrize("workload, target", [("8k/1k", 50.0), ("1k/8k", 20.0)])
def test_comparison_prices_every_pair_as_disaggregated_does(workload, target):
    """comparison finds each chip's cheapest pools once and pairs them; disaggregated, pair by pair."""
    frame = disagg.comparison(M, workload, target, 0.12).set_index(["kind", "prefill_chip", "decode_chip"])
    for p in disagg.priced_chips():
        for d in disagg.priced_chips():
            alone = disagg.disaggregated(M, p, d, workload, target, 0.12)
            if alone["usd"] is None:
                assert ("split", p, d) not in frame.index
                continue
            row = frame.loc[("split", p, d)]
            for key, value in alone.items():
                np.testing.assert_allclose(row[key], value, rtol=1e-12, err_msg=f"{p} → {d}: {key}")


def test_priced_chips_have_sourced_prices_and_power():
    prices = data.load("hourly_prices").dropna(subset=["price_usd_per_gpu_hour"]).set_index("system")
    for a in disagg.priced_chips():
        assert disagg.usd_per_hour(a) == prices.loc[a, "price_usd_per_gpu_hour"] and chip(a).power_known
    assert "gb300" not in disagg.priced_chips()  # InferenceX's placeholder price is not adopted
    with pytest.raises(ValueError, match="accelerator"):
        disagg.usd_per_hour("gb300")


def test_lengths_and_bad_names():
    assert disagg.lengths(disagg.LONG) == (catalog.assumption("long_context_isl_tokens"), catalog.lengths().osl_mean)
    assert disagg.lengths("8k/1k") == (catalog.lengths("8k/1k").isl_mean, catalog.lengths("8k/1k").osl_mean)
    with pytest.raises(ValueError, match="workload"):
        disagg.disaggregated(M, "h100", "h100", "2k/2k", 50.0, 0.08)
    with pytest.raises(ValueError, match="min_tokens_per_s_per_user"):
        disagg.comparison(M, "8k/1k", 1e5, 0.08)
    with pytest.raises(ValueError, match="price_usd_per_kwh"):
        disagg.comparison(M, "8k/1k", 50.0, -1.0)


# --- Amdahl --------------------------------------------------------------------------------------

def test_amdahl_by_hand_and_at_its_limits():
    assert amdahl.whole_gain(0.0, 1.8) == 1.0
    assert amdahl.whole_gain(1.0, 1.8) == pytest.approx(1.8)
    assert amdahl.whole_gain(0.5, 2.0) == pytest.approx(4 / 3)  # 1 / (0.5 + 0.25)
    assert amdahl.whole_gain(0.25, 1.5) == pytest.approx(1 / (0.75 + 0.25 / 1.5))
    assert amdahl.fraction_needed(1.5, 1.8) == pytest.approx(0.75)  # (1 − 1/1.5) ÷ (1 − 1/1.8)
    assert amdahl.fraction_needed(2.0, 1.8) > 1  # more than the kernel's own gain: no share can give it
    with pytest.raises(ValueError, match="fraction"):
        amdahl.whole_gain(1.2, 1.5)


@given(st.floats(0.0, 1.0), st.floats(1.01, 100.0))
def test_amdahl_inverse_and_bounds(f, s):
    g = amdahl.whole_gain(f, s)
    assert 1.0 - 1e-12 <= g <= s * (1 + 1e-12)
    assert amdahl.fraction_needed(g, s) == pytest.approx(f, abs=1e-9)


def test_reported_speedups_and_the_models_kernel_fraction():
    assert amdahl.reported_speedups() == (1.5, 1.8)
    assert amdahl.reported_speedups("ai-retune") == (1.5, 1.8)
    with pytest.raises(ValueError, match="claim_id"):
        amdahl.reported_speedups("table-tpw")
    one, many = (amdahl.kernel_fraction(M, "gb200", b, 8704.0) for b in (1, 256))
    # At one sequence the fixed time per layer and the shared weights dominate; a large batch reads
    # many experts and KV caches, so the kernels' share grows.
    assert 0 < one < many < 1


def test_the_figure_draws_the_models_costs():
    from perwatt.figures import disaggregated as view
    frame = view.split_frame("8k/1k", 50, 0.08)
    model = disagg.comparison(M, "8k/1k", 50.0, 0.08)
    totals = frame.groupby("configuration")["usd_per_k"].sum()
    assert sorted(totals.index) == sorted(view.configurations())
    b200 = model.set_index(["kind", "prefill_chip", "decode_chip"]).loc[("split", "b200", "gb200")]
    assert totals["B200 → GB200"] == pytest.approx(b200["usd"] * 1000, rel=1e-12)
    kwh = frame.groupby("configuration")["kwh_per_k"].sum()["B200 → GB200"]
    assert kwh == pytest.approx(b200["joules"] * 1000 / 3.6e6, rel=1e-12)


@pytest.mark.parametrize("share", [0.0, 0.35, 1.0])
def test_the_kernel_figure_marks_amdahls_gain_at_the_chosen_share(share):
    # The module, not the figure factory of the same name that perwatt.figures exports.
    kernel_gains = importlib.import_module("perwatt.figures.kernel_gains")
    low, high = amdahl.reported_speedups()
    frame = kernel_gains.gain_frame(share)
    chosen = frame[frame["kind"] == "chosen"].set_index("end")["whole_gain"]
    # By hand: 1 / ((1 - f) + f / s), which is 1 with no share and the kernel's own gain with all of it.
    for end, s in (("low", low), ("high", high)):
        assert chosen[end] == pytest.approx(1 / ((1 - share) + share / s), rel=1e-12)
    curve = frame[frame["kind"] == "curve"]
    assert curve.groupby("end")["whole_gain"].is_monotonic_increasing.all()
    assert curve.groupby("end")["whole_gain"].max().to_dict() == pytest.approx({"low": low, "high": high})


# --- The fast path against the code it replaced (kept here as the reference) ------------------------

def _comparison_as_it_was(model, workload, target, price):
    """disagg.comparison as it was: each pool's cheapest row by idxmin over a frame of phases, looked up
    chip by chip and pair by pair."""
    isl, osl = disagg.lengths(workload)

    def per_chip_s(c):
        return disagg.usd_per_hour(c) / 3600 + chip(c).power_w / disagg.JOULES_PER_KWH * price

    def cheapest(c, seconds, keep):
        frame = disagg.phases(model, c, workload)
        frame = frame[keep(frame)]
        return None if frame.empty else frame.loc[(frame[seconds] * per_chip_s(c)).idxmin()]

    def single(c):
        s = cheapest(c, "single_chip_s", lambda f: f["single_fits"] & (f["tpot_single_s"] <= 1 / target))
        if s is None:
            return dict.fromkeys(disagg.KEYS)
        w, rent, prefill_s = chip(c).power_w, disagg.usd_per_hour(c), s["prefill_chip_s"]
        cost = disagg.request_cost(prefill_s, s["single_chip_s"] - prefill_s, w, w, rent, rent, price)
        return {**{k: float(v) for k, v in cost.items()}, "prefill_chips": float(s["chips"]),
                "decode_chips": float(s["chips"]), "decode_batch": float(s["batch"]),
                "tpot_s": float(s["tpot_single_s"]), "ttft_s": float(s["ttft_single_s"]), "transfer_s": 0.0,
                "prefill_share": float(prefill_s / s["single_chip_s"])}

    def split(a, b):
        p = cheapest(a, "prefill_chip_s", lambda f: f["prefill_fits"])
        d = cheapest(b, "decode_chip_s", lambda f: f["decode_fits"] & (f["tpot_alone_s"] <= 1 / target))
        if p is None or d is None:
            return dict.fromkeys(disagg.KEYS)
        cost = disagg.request_cost(p["prefill_chip_s"], d["decode_chip_s"], chip(a).power_w, chip(b).power_w,
                                   disagg.usd_per_hour(a), disagg.usd_per_hour(b), price)
        transfer = disagg.kv_transfer_s(model, a, b, isl)
        return {**{k: float(v) for k, v in cost.items()}, "prefill_chips": float(p["chips"]),
                "decode_chips": float(d["chips"]), "decode_batch": float(d["batch"]),
                "tpot_s": float(d["tpot_alone_s"]), "ttft_s": float(p["prefill_wait_s"] + transfer),
                "transfer_s": transfer,
                "prefill_share": float(p["prefill_chip_s"] / (p["prefill_chip_s"] + d["decode_chip_s"]))}

    chips = disagg.priced_chips()
    singles = {a: single(a) for a in chips}
    pairs = {(a, b): split(a, b) for a in chips for b in chips}
    rows = [{"kind": "single", "prefill_chip": a, "decode_chip": a, **singles[a]} for a in chips]
    rows += [{"kind": "split", "prefill_chip": a, "decode_chip": b, **pairs[a, b]} for a in chips for b in chips]
    frame = pd.DataFrame(rows).dropna(subset=["usd"]).reset_index(drop=True)
    single_usd = frame.loc[frame["kind"] == "single", "usd"]
    frame["vs_best_single"] = frame["usd"] / (single_usd.min() if len(single_usd) else np.nan)
    return frame, pairs, singles


@pytest.mark.parametrize("workload", ["8k/1k", "1k/8k", disagg.LONG])
@pytest.mark.parametrize("target", [5.0, 50.0, 100.0])
@pytest.mark.parametrize("price", [0.0, 0.08])
def test_pools_priced_from_arrays_equal_the_frames_they_replaced(workload, target, price):
    frame, pairs, singles = _comparison_as_it_was(M, workload, target, price)
    pd.testing.assert_frame_equal(disagg.comparison(M, workload, target, price), frame, check_exact=True)
    for (a, b), expected in pairs.items():
        assert disagg.disaggregated(M, a, b, workload, target, price) == pytest.approx(expected, rel=0, abs=0,
                                                                                      nan_ok=True)
    for a, expected in singles.items():
        assert disagg.single_pool(M, a, workload, target, price) == pytest.approx(expected, rel=0, abs=0, nan_ok=True)
