"""Every exercise's inputs and worked answers, computed from the model.

One function per exercise, named after its label in the chapter. Each returns a dict of named
numbers (and, where an answer is a choice, the chosen name): the chapters glue them into the
exercise statements and the hidden solutions, and ``tests/test_exercises.py`` checks each
against a value worked out by hand. No answer is typed into a chapter.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from perwatt import (accounting, bands, benchmark, calibration, catalog, data, figures, fleet_profiles,
                     fleet_scenario, inverse, metrics, roofline, serving, speculative)
from perwatt import amdahl, disagg
from perwatt.exercises_agents import (agents_ex_cache, agents_ex_hold, agents_ex_minute,  # noqa: F401
                                      agents_ex_sessions, agents_ex_tail, agents_ex_tools, agents_ex_wait)


def per_watt_ex_predict(jalapeno_power_w: float = 1000.0) -> dict:
    """gpt-oss-120b's ratio with Jalapeño charged ``jalapeno_power_w`` and the GPU its all-in watts."""
    frame = figures.power_basis().frame(jalapeno_power_w=jalapeno_power_w,
                                        baseline_basis="all_in_provisioned").set_index("model")
    row = frame.loc["gpt-oss-120b"]
    return {"w": jalapeno_power_w, "ratio": row["ratio"], "published": row["published_ratio"]}


def per_watt_ex_convert(tps_per_kw: float = 20_000.0, price_usd_per_kwh: float = 0.10, pue: float = 1.2) -> dict:
    """Energy per token, per output token (the table workload's mean lengths) and cost per million output tokens."""
    drawn = catalog.lengths()
    j = metrics.joules_per_token(tps_per_kw)
    j_out = metrics.per_output_token(j, drawn.isl_mean, drawn.osl_mean)
    return {"tps": tps_per_kw, "price": price_usd_per_kwh, "pue": pue, "isl": drawn.isl_mean,
            "osl": drawn.osl_mean, "j": j, "j_out": j_out,
            "cost": metrics.energy_cost_per_million_tokens(j_out, price_usd_per_kwh, pue)}


def per_watt_ex_per_chip() -> dict:
    """Jalapeño's tokens/s per chip over its baseline's, both divided by chip ratings."""
    ratio = accounting.per_chip_comparison("chip_rated").set_index("model")["ratio"]
    return {"dsr1": ratio["deepseek-r1"], "kimi": ratio["kimi-k2.5"], "gpt": ratio["gpt-oss-120b"]}


def tables_ex_rounding() -> dict:
    """The unrounded GB300 DeepSeek R1 rates that round to the printed rate and give the printed ratio."""
    checks = benchmark.ratio_checks(benchmark.book_results(), data.load("reported_ratios"))
    row = checks.set_index(["model", "metric"]).loc[("deepseek-r1", "interactivity")]
    half_ratio = 0.5 * 10.0 ** -int(row["decimals"])
    half_rate = 0.5 * 10.0 ** -int(row["baseline_decimals"])
    # Ratio = Jalapeño ÷ baseline rounds to the printed ratio when the baseline lies in this range...
    by_ratio = (row["candidate_value"] / (row["reported_ratio"] + half_ratio),
                row["candidate_value"] / (row["reported_ratio"] - half_ratio))
    # ...and the baseline rounds to its printed figure in this one.
    by_rate = (row["baseline_value"] - half_rate, row["baseline_value"] + half_rate)
    return {"printed_base": row["baseline_value"], "printed_ratio": row["reported_ratio"],
            "ratio_low": by_ratio[0], "ratio_high": by_ratio[1], "rate_low": by_rate[0], "rate_high": by_rate[1],
            "low": max(by_ratio[0], by_rate[0]), "high": min(by_ratio[1], by_rate[1]),
            "narrower": bool(min(by_ratio[1], by_rate[1]) - max(by_ratio[0], by_rate[0]) < by_rate[1] - by_rate[0])}


def tables_ex_osl() -> dict:
    """The slowest speed per user at which the GB300's DeepSeek R1 latency fits the shortest output."""
    shortest = catalog.lengths().osl_min
    row = catalog.results().set_index(["model", "system"]).loc[("deepseek-r1", "gb300")]
    # latency ≥ output tokens ÷ speed, one step each, so speed ≥ output tokens ÷ latency.
    min_rate = shortest / row["e2e_latency_s"]
    return {"latency": row["e2e_latency_s"], "rate": row["interactivity"], "osl": shortest, "min_rate": min_rate,
            "shortfall": (1 - row["interactivity"] / min_rate) * 100}


def tables_ex_byon(new_latency_s: float = 2.60) -> dict:
    """The GB200 gpt-oss-120b row's implied TTFT once its latency is edited to ``new_latency_s``."""
    results = benchmark.book_results()
    edited = results.copy()
    mask = (edited["model"] == "gpt-oss-120b") & (edited["system"] == "gb200") & (edited["metric"] == "e2e_latency_s")
    edited.loc[mask, "value"] = new_latency_s
    osl = catalog.lengths().osl_mean
    row = benchmark.latency_audit(edited, osl).set_index(["model", "system"]).loc[("gpt-oss-120b", "gb200")]
    return {"latency": new_latency_s, "osl": osl, "ttft": row["implied_ttft_s"], "verdict": row["verdict"]}


def prefill_ex_predict() -> dict:
    """Decode intensity on a GB200: gpt-oss-120b at batch 1 and 2, DeepSeek R1 at batch 1, and why."""
    def decode_intensity(model: str, batch: int) -> float:
        points = roofline.roofline_points(model, "gb200", batch).set_index("point")
        return float(points.loc["decode", "intensity"])

    w = catalog.workload()
    context = float(w["isl_tokens"] + w["osl_tokens"] / 2)  # as roofline_points places decode
    dsr1 = roofline.model_spec("deepseek-r1")
    matmul = 2 * dsr1.active_params
    attention = float(roofline.decode_flops(dsr1, 1, context)) - matmul
    nbytes = float(roofline.decode_bytes(dsr1, 1, context))
    return {"gpt_b1": decode_intensity("gpt-oss-120b", 1), "gpt_b2": decode_intensity("gpt-oss-120b", 2),
            "dsr1_b1": decode_intensity("deepseek-r1", 1), "context": context,
            "dsr1_matmul_gflop": matmul / 1e9, "dsr1_attention_gflop": attention / 1e9,
            "dsr1_gb": nbytes / 1e9, "dsr1_matmul_only": matmul / nbytes}


def prefill_ex_kimi() -> dict:
    """The fastest point per user on Kimi K2.5's GB300 frontier (table workload): its chips per
    instance, layout and rate; and the rate at batch 1 on the fewest chips that hold the model."""
    best = serving.frontier("kimi-k2.5", "gb300").iloc[0]
    spec, device = roofline.model_spec("kimi-k2.5"), roofline.chip("gb300")
    drawn = catalog.lengths()
    fewest = serving.serve(spec, device, 1, drawn.isl_mean, drawn.osl_mean)
    return {"chips": best["chips"], "ep": best["ep"], "dp": bool(best["dp_attention"]), "batch": best["batch"],
            "rate": best["tokens_per_s_per_user"], "fewest_chips": float(fewest["chips"]),
            "fewest_rate": float(fewest["tokens_per_s_per_user"])}


def prefill_ex_calibrate(step: float = 0.1) -> dict:
    """The fixed cost per layer, in steps of ``step`` of the fitted value, that brings the median
    error of the dense-model measurements nearest zero, and what it does to the held-out InferenceX
    error (median absolute, %, both targets pooled)."""
    fitted = roofline.DEFAULTS.layer_latency_us
    scales = np.round(np.arange(step, 1.0 + step / 2, step), 2)
    dense = serving.validation()
    dense = dense["model"].str.startswith("llama")
    medians = []
    for scale in scales:
        assumed = roofline.Assumptions(layer_latency_us=fitted * scale)
        medians.append(float(serving.validation(assumed)["error_pct"][dense].median()))
    best = int(np.argmin(np.abs(medians)))
    assumed = roofline.Assumptions(layer_latency_us=fitted * scales[best])
    frame = calibration.errors(catalog.measured(), assumed)
    held = frame[frame["held_out"]]["error_pct"].abs().median()
    base = calibration.measured_errors()
    return {"fitted_us": fitted, "best_us": fitted * scales[best], "dense_err": medians[best],
            "held_out_before": float(base[base["held_out"]]["error_pct"].abs().median()), "held_out_after": float(held)}


def prefill_ex_perwatt_predict(target: float = 50.0) -> dict:
    """A GB300's tokens/s per kW over an H100's for DeepSeek R1 at rated power: at the
    low-interactivity end (the lowest target every point reaches) and at ``target`` tokens/s per user or faster."""
    read = bands.at_targets(bands.curves("deepseek-r1", ["gb300", "h100"]))
    ratio = bands.ratio_along(read, "gb300", "h100").set_index("t")["ratio"]
    return {"target": target, "end": float(ratio.iloc[0]), "at": float(ratio.loc[target]),
            "grows": bool(ratio.loc[target] > ratio.iloc[0])}


def _reported(model: str) -> pd.Series:
    return catalog.results().set_index(["model", "system"]).loc[(model, catalog.CANDIDATE)]


def prefill_ex_inverse(tflops: float = 5000.0, chips: int = 8, batch: int = 1) -> dict:
    """The inverse for DeepSeek R1 at Jalapeño's reported point with no fixed time per layer, on chips
    of ``tflops`` dense TFLOP/s: whether any bandwidth reaches it, and the ceiling bandwidth cannot pass."""
    row = _reported("deepseek-r1")
    free = replace(roofline.DEFAULTS, layer_latency_us=0.0)
    solved = inverse.inverse("deepseek-r1", row["interactivity"], row["tps_per_kw"], chips, batch,
                               assumptions=free, tflops=tflops)
    return {"tflops": tflops, "chips": chips, "rate": row["interactivity"], "solvable": solved["solvable"],
            "ceiling": solved["ceiling"], "share": solved["ceiling"] / row["interactivity"] * 100}


def prefill_ex_gap(target: float = 70.0) -> dict:
    """How many times a GB300's bandwidth, at its power, a chip needs for the interactive-end gaps
    (2.1 and 4.1 times its DeepSeek R1 tokens/s per kW at ``target`` tokens/s per user or faster)."""
    low, high = (data.load("claims").set_index("claim_id").loc["interactive-gap", c] for c in ("low", "high"))
    far = inverse.gap_conditions("deepseek-r1", "gb300", target, (low, high))
    return {"target": target, "low": low, "high": high, "k_low": float(far["bandwidth_multiple"].iloc[0]),
            "reached_low": float(far["gap_reached"].iloc[0]),
            "high_reachable": bool(np.isfinite(far["bandwidth_multiple"].iloc[1])),
            "most": float(far["most_from_bandwidth"].iloc[0]), "share_high": float(far["power_share"].iloc[1]),
            "share_high_pct": float(far["power_share"].iloc[1]) * 100}


def spec_ex_best(alpha: float = 0.8, cheap: float = 0.05, costly: float = 0.4) -> dict:
    """Best draft length at a cheap and a costly draft."""
    return {"alpha": alpha, "c_lo": cheap, "c_hi": costly,
            "best_lo": int(speculative.best_gamma(alpha, cheap)), "best_hi": int(speculative.best_gamma(alpha, costly))}


def spec_ex_ceiling(alpha: float = 0.6, within: float = 0.95) -> dict:
    """The most tokens per pass at ``alpha``, and the shortest draft reaching ``within`` of it."""
    limit = 1 / (1 - alpha)
    gamma = next(g for g in range(1, 200) if float(speculative.expected_tokens(alpha, g)) >= within * limit)
    return {"alpha": alpha, "limit": limit, "gamma": gamma, "within_pct": within * 100}


def spec_ex_crossover(gamma_to: int = 1) -> dict:
    """Speed-up at batch 1 and the crossover batch at the figure's draft length and a shorter one."""
    figure = figures.speculation_batch()
    gamma_from = int(figure.defaults()["gamma"])
    long, short = figure.frame(), figure.frame(gamma=float(gamma_to))
    return {"gamma_from": gamma_from, "gamma_to": gamma_to,
            "b1_long": float(long["speedup"].iloc[0]), "b1_short": float(short["speedup"].iloc[0]),
            "cross_long": float(long["crossover_batch"].iloc[0]), "cross_short": float(short["crossover_batch"].iloc[0])}


def spec_ex_profile(drafts: int = 3) -> dict:
    """From TensorRT-LLM's measured tokens per pass at one to ``drafts`` MTP layers: the chance
    that the first two drafts are both accepted, and the tokens per pass independent acceptance
    fitted to one draft predicts at ``drafts``, against the measured value."""
    table = data.load("mtp_acceptance").set_index("mtp_layers")["tokens_per_pass"]
    measured = table.loc[1:drafts].to_numpy(float)
    profile = speculative.prefix_acceptance(measured)
    alpha = speculative.fitted_alpha(measured[0])
    return {"drafts": drafts, "a1": float(measured[0]), "a2": float(measured[1]), "a_last": float(measured[-1]),
            "both": float(profile[1]), "third": float(profile[2]), "alpha": alpha,
            "independent": float(speculative.expected_tokens(alpha, drafts)),
            "independent_both": alpha ** 2}


def _fleet_defaults() -> tuple[float, float]:
    """The fleet figure's starting agent target, and the electricity price (an assumption)."""
    return float(figures.fleet().defaults()["agent_min_rate"]), catalog.assumption("electricity_price_usd_per_kwh")


def fleet_ex_budget(site_mw: float = 36.0, power_scale: float = 0.5) -> dict:
    """The plan within a ``site_mw`` budget when TPU7x and Trainium2 draw ``power_scale`` times their
    assumed power, against the same fleet with no budget: chips that move, cost, peak."""
    target, price = _fleet_defaults()
    free = fleet_scenario.scenario(target, price, None, power_scale)
    tight = fleet_scenario.scenario(target, price, site_mw, power_scale)
    chips = {name: frame.groupby("hardware")["chips"].sum() for name, frame in (("free", free), ("tight", tight))}
    return {"site_mw": site_mw, "scale": power_scale, "free_peak": free["total_peak_mw"].iloc[0],
            "tight_peak": tight["total_peak_mw"].iloc[0], "free_cost": free["total_usd_per_hour"].iloc[0],
            "tight_cost": tight["total_usd_per_hour"].iloc[0],
            "premium_pct": (tight["total_usd_per_hour"].iloc[0] / free["total_usd_per_hour"].iloc[0] - 1) * 100,
            "tpu_free": chips["free"]["tpu7x"], "tpu_tight": chips["tight"]["tpu7x"],
            "gb200_free": chips["free"]["gb200"], "gb200_tight": chips["tight"]["gb200"]}


def fleet_ex_without() -> dict:
    """What the assumed Jalapeño supply saves: the plan without any Jalapeño against the default."""
    target, price = _fleet_defaults()
    jal = fleet_profiles.JalapenoAssumptions()
    plan = fleet_scenario.scenario(target, price)
    none = fleet_scenario.scenario(target, price, assumptions=replace(jal, supply_chips=0))
    saving = none["total_usd_per_hour"].iloc[0] - plan["total_usd_per_hour"].iloc[0]
    used = plan.query("hardware == 'jalapeno'")["chips"].sum()
    return {"with": plan["total_usd_per_hour"].iloc[0], "without": none["total_usd_per_hour"].iloc[0],
            "saving": saving, "jal": used, "per_chip": saving / used, "jal_price": plan.query(
                "hardware == 'jalapeno'")["usd_per_hour"].sum() / used}


def fleet_ex_relax() -> dict:
    """The default plan against its linear-programme relaxation: cost, and the chips of each kind."""
    target, price = _fleet_defaults()
    whole = fleet_scenario.scenario(target, price)
    relaxed = fleet_scenario.scenario(target, price, integral=False)
    w, r = (f.groupby("hardware")["chips"].sum() for f in (whole, relaxed))
    return {"whole": whole["total_usd_per_hour"].iloc[0], "relaxed": relaxed["total_usd_per_hour"].iloc[0],
            "gap": whole["total_usd_per_hour"].iloc[0] - relaxed["total_usd_per_hour"].iloc[0],
            "gap_pct": (whole["total_usd_per_hour"].iloc[0] / relaxed["total_usd_per_hour"].iloc[0] - 1) * 100,
            # the chips that round out workloads in whole instances (B200's 8, TPU7x's 64, Trainium2's 16)
            "small_whole": w[["b200", "tpu7x", "trainium2"]].sum(),
            "small_relaxed": r[["b200", "tpu7x", "trainium2"]].sum(),
            "kinds_whole": int((w > 0).sum()), "kinds_relaxed": int((r > 1e-6).sum())}


def prefill_ex_pair(workload: str = "8k/1k", target: float = 50.0, decode: str = "h200") -> dict:
    """The prefill pool's US$ per thousand requests and J per request, H100 or H200, before ``decode``'s."""
    frame = disagg.comparison(disagg.MODEL, workload, target, catalog.assumption("electricity_price_usd_per_kwh"))
    split = frame[frame["kind"] == "split"].set_index(["prefill_chip", "decode_chip"])
    usd = {p: split.loc[(p, decode), "prefill_usd"] * 1000 for p in ("h100", "h200")}
    j = {p: split.loc[(p, decode), "prefill_j"] for p in ("h100", "h200")}
    return {"target": target, "h100_usd": usd["h100"], "h200_usd": usd["h200"], "h100_j": j["h100"],
            "h200_j": j["h200"], "cheaper": catalog.accelerator_label(min(usd, key=usd.get)),
            "h100_w": roofline.chip("h100").power_w, "h200_w": roofline.chip("h200").power_w,
            "saving_pct": (1 - min(usd.values()) / max(usd.values())) * 100}


def prefill_ex_amdahl(gain: float = 1.5, batches: tuple[int, int] = (1, 256)) -> dict:
    """The share 1.8× kernels must take for a whole-model ``gain``; the model's share at two batches."""
    low, high = amdahl.reported_speedups()
    isl, osl = disagg.lengths(catalog.table_workload())
    shares = [amdahl.kernel_fraction(disagg.MODEL, "gb200", b, isl + osl / 2) for b in batches]
    return {"gain": gain, "low": low, "high": high, "needed_pct": float(amdahl.fraction_needed(gain, high)) * 100,
            "b_small": batches[0], "b_large": batches[1], "share_small_pct": shares[0] * 100,
            "share_large_pct": shares[1] * 100, "gain_small_high": float(amdahl.whole_gain(shares[0], high)),
            "gain_large_low": float(amdahl.whole_gain(shares[1], low)),
            "gain_large_high": float(amdahl.whole_gain(shares[1], high))}


def prefill_ex_long(prefill: str = "b200", decode: str = "gb200", target: float = 50.0) -> dict:
    """The prefill pool's share of the chip time, and the cost, on 8k/1k and on the long prompt."""
    price = catalog.assumption("electricity_price_usd_per_kwh")
    short, long_ = (disagg.disaggregated(disagg.MODEL, prefill, decode, w, target, price)
                    for w in (catalog.table_workload(), disagg.LONG))
    # The cache per sequence grows with the prompt and limits the batch, so the decode instance changes too.
    return {"target": target, "isl": disagg.lengths(disagg.LONG)[0], "share_short_pct": short["prefill_share"] * 100,
            "share_long_pct": long_["prefill_share"] * 100, "usd_ratio": long_["usd"] / short["usd"],
            "chips_short": short["decode_chips"], "batch_short": short["decode_batch"],
            "chips_long": long_["decode_chips"], "batch_long": long_["decode_batch"]}


def per_watt_ex_owned_price(low: float = 0.08, high: float = 0.16) -> dict:
    """Owning a B200 at the busy end: how much doubling the electricity price raises its cost per token."""
    from perwatt import cost
    life, overhead = (catalog.assumption(n) for n in ("owned_lifetime_years", "owned_overhead_usd_per_chip_hour"))
    at = {p: cost.token_costs("owned", 2.5, p, life, overhead).set_index(["system", "end"]).loc[("b200", "peak")]
          for p in (low, high)}
    return {"low": low, "high": high, "share_pct": at[low]["electricity_share"] * 100,
            "rise_pct": (at[high]["usd_per_million_tokens"] / at[low]["usd_per_million_tokens"] - 1) * 100}


def per_watt_ex_break_even() -> dict:
    """The GB200 rent at which a B200 at its InferenceX price serves DeepSeek R1 as cheaply, at the interactive end."""
    from perwatt import cost
    row = cost.proxy_table(catalog.assumption("electricity_price_usd_per_kwh"), catalog.assumption(
        "owned_lifetime_years"), catalog.assumption("owned_overhead_usd_per_chip_hour")).set_index(
        ["end", "a", "b"]).loc[("interactive", "gb200", "b200")]
    return {"w": row["per_watt_ratio"], "rent": row["usd_per_hour_a"], "target": cost.INTERACTIVE_TARGET, "flip": row["flip_usd_per_hour_a"],
            "b200_rent": cost.rental_usd_per_hour("b200"), "margin_pct": (row["flip_usd_per_hour_a"] /
                                                                         row["usd_per_hour_a"] - 1) * 100}
