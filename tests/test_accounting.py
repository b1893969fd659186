"""The per-watt chapter's model, checked against values worked by hand from the articles' table."""

from __future__ import annotations

import pytest

from perwatt import accounting


def test_per_chip_comparison_pairs_each_model_with_its_own_baseline():
    # TPS/kW × rated kW: Jalapeño 700 W, GB200 1,200 W, GB300 1,400 W.
    table = accounting.per_chip_comparison("chip_rated").set_index("model")
    assert table.loc["gpt-oss-120b", "baseline"] == "gb200"
    assert table.loc["gpt-oss-120b", "ratio"] == pytest.approx(85448 * 0.7 / (44960 * 1.2), rel=1e-12)
    assert table.loc["deepseek-r1", "ratio"] == pytest.approx(19641 * 0.7 / (11781 * 1.4), rel=1e-12)
    assert table.loc["kimi-k2.5", "ratio"] == pytest.approx(18195 * 0.7 / (11862 * 1.4), rel=1e-12)
    # 13,748.7 tokens/s against 16,493.4: 20.0 % more Jalapeño chips for the same throughput.
    assert table.loc["deepseek-r1", "more_chips_pct"] == pytest.approx((11781 * 1.4 / (19641 * 0.7) - 1) * 100)
    assert table.loc["deepseek-r1", "jalapeno_tokens_per_s"] == pytest.approx(13748.7)


def test_per_chip_on_an_unknown_basis_stays_empty_not_guessed():
    # Nobody published an all-in figure for Jalapeño: the ratio on that basis is unknown.
    table = accounting.per_chip_comparison("all_in_provisioned")
    assert table["jalapeno_tokens_per_s"].isna().all() and table["ratio"].isna().all()
    assert table["baseline_tokens_per_s"].notna().all()


def test_rent_against_electricity_on_each_power_basis():
    # Rent over electricity is the hourly price over the kWh an hour uses: US$2.21 / (1.2 kW × US$0.08).
    rated = accounting.hardware_and_energy_cost(0.08, 1.0).set_index("system")
    all_in = accounting.hardware_and_energy_cost(0.08, 1.0, "all_in_provisioned").set_index("system")
    assert rated.loc["gb200", "hardware_to_energy"] == pytest.approx(2.21 / (1.2 * 0.08), rel=1e-9)
    assert all_in.loc["gb200", "hardware_to_energy"] == pytest.approx(2.21 / (2.1 * 0.08), rel=1e-9)
    # The basis changes only the electricity, never the rent.
    assert (all_in["hardware_usd_per_million_tokens"] == rated["hardware_usd_per_million_tokens"]).all()


def test_energy_cost_per_output_token_and_pue_known_value():
    # gpt-oss-120b on Jalapeño: 85,448 tokens/s/kW is 1000 / 85,448 = 0.0117030 J/token over all tokens.
    # Charged to output tokens at the workload's mean drawn lengths, × (isl + osl) / osl; at PUE 1.25 and
    # US$0.10/kWh the facility pays 1.25 × the IT energy.
    from perwatt import catalog
    drawn = catalog.lengths()
    out = accounting.energy_costs(0.10, 1.25, "output").set_index(["model", "system"])
    joules = 1000 / 85_448 * (drawn.isl_mean + drawn.osl_mean) / drawn.osl_mean
    row = out.loc[("gpt-oss-120b", "jalapeno")]
    assert row["joules_per_token"] == pytest.approx(joules, rel=1e-12)
    assert row["kwh_per_million_tokens"] == pytest.approx(joules / 3.6 * 1.25, rel=1e-12)
    assert row["cost_usd_per_million_tokens"] == pytest.approx(joules / 3.6 * 1.25 * 0.10, rel=1e-12)


def test_basis_comparison_known_value():
    # Published on every chip's rating: Jalapeño served 85,448 × 0.7 tokens/s, GB200 44,960 × 1.2.
    # Charged 550 W against GB200's all-in 2,100 W: (85,448 × 0.7 / 0.55) / (44,960 × 1.2 / 2.1).
    table = accounting.basis_comparison("chip_rated", 550.0, "all_in_provisioned").set_index("model")
    assert table.loc["gpt-oss-120b", "ratio"] == pytest.approx((85_448 * 0.7 / 0.55) / (44_960 * 1.2 / 2.1), rel=1e-12)
    with pytest.raises(ValueError, match="jalapeno_power_w"):
        accounting.basis_comparison("chip_rated", 0.55, "chip_rated")


def test_pairs_and_same_overhead_known_values():
    # The published TPS/kW ratio (not another metric's), and the same-overhead comparison: GB200's
    # all-in 2,100 W is its 1,200 W rating plus 900 W, so Jalapeño is charged 700 + 900 = 1,600 W:
    # (85,448 × 0.7 / 1.6) / (44,960 × 1.2 / 2.1) = 1.45510.
    assert accounting.pairs().set_index("model").loc["gpt-oss-120b", "published_ratio"] == 1.9
    table = accounting.same_overhead_comparison("chip_rated").set_index("model")
    assert table.loc["gpt-oss-120b", "assumed_overhead_w"] == 900.0
    assert table.loc["gpt-oss-120b", "ratio"] == pytest.approx((85_448 * 0.7 / 1.6) / (44_960 * 1.2 / 2.1), rel=1e-12)
