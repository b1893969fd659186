"""Power that depends on the work: the fit to measured InferenceX power, known values, bounds."""

from __future__ import annotations

import numpy as np
import pytest

from perwatt import catalog, instruments, parallel, power, roofline


def test_the_defaults_are_the_fit_to_the_measured_runs():
    fitted = power.fit()
    for name in ("idle_fraction", "pj_per_byte", "pj_per_flop"):
        assert getattr(fitted, name) == pytest.approx(getattr(power.FITTED, name), rel=0.01), name
    # Every run the fit sees is an MI355X, single-pool: the model is fitted on one chip and says so.
    rows = power.measured_rows()
    assert set(rows["hardware"]) == {"mi355x"} and not rows["disagg"].any() and len(rows) == 16


def test_the_fit_tracks_most_runs_and_names_the_one_it_cannot():
    errors = power.errors()
    assert errors["error_pct"].abs().median() < 15
    worst = errors.loc[errors["error_pct"].abs().idxmax()]
    # The run at 257 W is the one whose throughput is far below what its concurrency and per-user
    # rate imply (calibration's worst point too): a run that did not serve its load.
    assert worst["point_id"] == "ix-205" and worst["measured_w"] < 300


def test_phase_watts_known_value_and_the_rating_caps_it():
    device = roofline.chip("gb300")
    model = power.PowerModel(idle_fraction=0.25, pj_per_byte=50.0, pj_per_flop=0.5)
    work = {"bytes": 4e12 * 0.01, "flops": 1e15 * 0.01}  # 4 TB/s and 1 PFLOP/s for 10 ms
    assert float(power.phase_watts(device, work, 0.01, model)) == pytest.approx(0.25 * 1400 + 50 * 4 + 0.5 * 1000)
    flat_out = {"bytes": 8e12, "flops": 5e15}
    assert float(power.phase_watts(device, flat_out, 1.0, model)) == 1400


def test_pool_power_rises_with_load_and_stays_under_the_rating():
    spec, device, drawn = roofline.model_spec("deepseek-r1"), roofline.chip("gb300"), catalog.lengths()
    watts = power.pool_watts(spec, device, np.array([1.0, 64.0, 2048.0]), drawn.isl_mean, drawn.osl_mean, 72, 72, True)
    assert np.all(np.diff(watts) > 0) and np.all(watts <= 1400)
    assert watts[0] >= power.FITTED.idle_fraction * 1400


def test_pass_work_counts_every_weight_once_for_one_token_on_one_chip():
    # Llama 3.1 8B, one token, no context: 2 FLOPs and 2 bytes (BF16) per weight.
    spec, device = roofline.model_spec("llama-3.1-8b"), roofline.chip("h100")
    work = parallel.pass_work(spec, device, 1, 0.0)
    assert float(work["flops"]) == pytest.approx(2 * 8.03e9)
    assert float(work["bytes"]) == pytest.approx(2 * 8.03e9)


def test_bad_power_parameters_are_refused_by_name():
    with pytest.raises(ValueError, match="idle_fraction"):
        power.PowerModel(idle_fraction=1.5)
    with pytest.raises(ValueError, match="rows"):
        power.fit(power.measured_rows().head(2))


@pytest.mark.parametrize("accelerator", ["tpu7x", "trainium2"])
def test_the_power_model_refuses_a_chip_whose_power_is_unpublished(accelerator):
    spec, device, drawn = roofline.model_spec("gpt-oss-120b"), roofline.chip(accelerator), catalog.lengths()
    with pytest.raises(ValueError, match=f"{accelerator}.*power is not published"):
        power.pool_watts(spec, device, 64.0, drawn.isl_mean, drawn.osl_mean, 8)
    with pytest.raises(ValueError, match=f"{accelerator}.*power is not published"):
        power.phase_watts(device, {"bytes": 1e9, "flops": 1e12}, 0.01)
    with pytest.raises(ValueError, match=f"{accelerator}.*power is not published"):
        instruments.energy_split("gpt-oss-120b", accelerator)
    with pytest.raises(ValueError, match="rated_w"):
        power.FITTED.watts(device.power_w, 1e12, 1e15)


def test_bandwidth_per_kw_keeps_the_chips_of_unpublished_power_with_their_per_kw_figures_empty():
    table = instruments.bandwidth_per_kw().set_index("accelerator")
    pj_per_bit = 3.97e-12  # HBM2 access energy, data/hardware_reports.csv
    tpu = table.loc["tpu7x"]
    assert tpu["bandwidth_tb_s"] == 7.37 and tpu["hbm_w_at_full_bandwidth"] == pytest.approx(7.37e12 * 8 * pj_per_bit)
    for name in ("tpu7x", "trainium2"):
        row = table.loc[name]
        assert np.isnan(row["rated_kw"]) and np.isnan(row["tb_s_per_kw"]) and np.isnan(row["hbm_share_of_rating_pct"])
        assert "power not published" in row["evidence"]
    rest = table.drop(index=["tpu7x", "trainium2"])
    assert rest[["rated_kw", "tb_s_per_kw"]].notna().all().all() and (rest["evidence"] != "").all()
    assert table.loc["gb300", "tb_s_per_kw"] == pytest.approx(8 / 1.4)
