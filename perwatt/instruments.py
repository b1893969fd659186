"""Instruments for reading a claim the way an inference engineer would.

* :func:`layer_budget`: the time a reported per-user rate leaves for each layer of the model, per
  token, beside the fixed cost per layer the serving model was fitted to and a measured system.
* :func:`bandwidth_per_kw` and :func:`per_watt_against_bandwidth`: memory bandwidth per kW of
  rated power, chip by chip, and whether the reported per-watt gains ask more of Jalapeño's memory
  than its reported package could give under a stated hypothesis.
* :func:`identify_baselines`: which measured InferenceX point, if any, a baseline row of the
  articles' table matches.
* :func:`energy_split`: a request's energy in two parts, prefill's and decode's, across workloads.

Every result is **derived** from the book's data and the calibrated serving model; inputs that rest
on secondary sources or hypotheses say so in their columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import catalog, checks, data, parallel, power, serving
from perwatt.specs import DEFAULTS, TERA, Assumptions, chip, known_chips, model_spec

ASSUMED = checks.kind(Assumptions)


def _reports() -> pd.Series:
    return data.load("hardware_reports").set_index("report_id")["value"]


@checks.validated(assumptions=ASSUMED)
def layer_budget(assumptions: Assumptions = DEFAULTS) -> pd.DataFrame:
    """Per model and system of the table: the reported tokens/s per user, the model's layers, the
    µs each layer may take per token at that rate (1 ÷ (rate × layers)), and the tokens a pass would
    have to yield for the rate if each layer cost the serving model's fitted fixed time."""
    table = catalog.results()[["model", "model_label", "system", "system_label", "interactivity"]].copy()
    table["layers"] = [model_spec(m).layers for m in table["model"]]
    table["us_per_layer_per_token"] = 1e6 / (table["interactivity"] * table["layers"])
    table["fixed_us_per_layer"] = assumptions.layer_latency_us
    table["tokens_per_pass_needed"] = table["fixed_us_per_layer"] / table["us_per_layer_per_token"]
    active = [float(serving.decode_bytes(model_spec(m), 1, 0.0)) for m in table["model"]]
    table["weight_tb_s_per_user"] = table["interactivity"] * np.asarray(active) / TERA
    return table.reset_index(drop=True)


def measured_layer_time() -> pd.DataFrame:
    """The same budget for the public batch-1 measurements of data/measurements.csv: µs per layer
    per token as measured."""
    table = data.load("measurements")
    rate = np.where(table["unit"] == "tokens_per_s", table["value"], 1000.0 / table["value"])
    layers = np.array([model_spec(m).layers for m in table["model"]])
    return table[["measurement_id", "model", "accelerator", "chips", "engine"]].assign(
        tokens_per_s_per_user=rate, us_per_layer_per_token=1e6 / (rate * layers))


def bandwidth_per_kw() -> pd.DataFrame:
    """Per chip with published memory bandwidth: TB/s, rated kW, TB/s per kW, and what reading at
    full bandwidth would draw at HBM2's access energy (an order of magnitude, secondary). A last
    row puts Jalapeño under the hypothesis of :func:`jalapeno_bandwidth_hypothesis`.

    A chip whose power is unpublished (TPU7x, Trainium2) keeps its row, with its bandwidth and the
    HBM watts, but its rated kW, TB/s per kW and HBM share of the rating are NaN, meaning unknown,
    and its ``evidence`` says the power is not published."""
    energy = _reports()["hbm_access_energy_pj_per_bit"] * 1e-12
    rows = []
    for name in known_chips():
        device = chip(name)
        evidence = "published" if device.power_known else "published; power not published, so no per-kW figure"
        rows.append((name, device.label, device.bandwidth_bytes_s / TERA, device.power_w / 1000, evidence))
    hypothesis = jalapeno_bandwidth_hypothesis()
    rows.append(("jalapeno", "Jalapeño", hypothesis["tb_s"], catalog.power_w("jalapeno", "chip_rated") / 1000,
                 "hypothesis: " + hypothesis["label"]))
    frame = pd.DataFrame(rows, columns=["accelerator", "label", "bandwidth_tb_s", "rated_kw", "evidence"])
    frame["tb_s_per_kw"] = frame["bandwidth_tb_s"] / frame["rated_kw"]
    frame["hbm_w_at_full_bandwidth"] = frame["bandwidth_tb_s"] * TERA * 8 * energy
    frame["hbm_share_of_rating_pct"] = frame["hbm_w_at_full_bandwidth"] / (frame["rated_kw"] * 1000) * 100
    return frame


def jalapeno_bandwidth_hypothesis() -> dict:
    """Jalapeño's memory bandwidth if each of its reported HBM sites held an HBM4 stack at the
    standard's top speed: an upper bound under a hypothesis, not a specification."""
    reports = _reports()
    sites, per_stack = reports["jalapeno_hbm_sites"], reports["hbm4_stack_bandwidth"]
    return {"tb_s": float(sites * per_stack), "sites": float(sites), "per_stack_tb_s": float(per_stack),
            "label": f"{sites:.0f} HBM4 stacks at {per_stack:.0f} TB/s each"}


def per_watt_against_bandwidth() -> pd.DataFrame:
    """Per model: the reported per-watt ratio (Jalapeño's TPS/kW ÷ the baseline's), the per-user
    ratio, and the ratio of memory bandwidth per rated kW that the HBM4 hypothesis would give
    Jalapeño over the baseline's chip. Memory-bound decode scales with bandwidth, so a per-watt gain
    below the bandwidth-per-kW ratio needs nothing unusual; the per-user ratio is another matter."""
    table = catalog.results().set_index(["model", "system"])
    per_kw = bandwidth_per_kw().set_index("accelerator")["tb_s_per_kw"]
    rows = []
    for model, baseline in catalog.baselines().items():
        jal, base = table.loc[(model, catalog.CANDIDATE)], table.loc[(model, baseline)]
        rows.append((model, baseline, jal["tps_per_kw"] / base["tps_per_kw"],
                     jal["interactivity"] / base["interactivity"], per_kw[catalog.CANDIDATE] / per_kw[baseline]))
    return pd.DataFrame(rows, columns=["model", "baseline", "per_watt_ratio", "per_user_ratio",
                                       "bandwidth_per_kw_ratio"])


@checks.validated(relative_tolerance=checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=0.5))
def identify_baselines(relative_tolerance: float = 1e-4) -> pd.DataFrame:
    """For each baseline row of the table: the measured InferenceX 8k/1k points of that model on
    that chip whose total tokens/s per GPU ÷ the chip's rated kW equals the row's TPS/kW within
    ``relative_tolerance``, and the nearest measured per-user rate to the row's. One row per
    baseline; ``matched_point`` is empty where no point matches (or no data exists)."""
    measured = catalog.measured("8k/1k")
    table = catalog.results()
    rows = []
    for model, baseline in catalog.baselines().items():
        row = table[(table["model"] == model) & (table["system"] == baseline)].iloc[0]
        series = measured[(measured["hardware"] == baseline) & (model == "deepseek-r1")]
        kw = catalog.power_w(baseline, "chip_rated") / 1000
        out = {"model": model, "baseline": baseline, "reported_tps_per_kw": row["tps_per_kw"],
               "reported_interactivity": row["interactivity"], "measured_points": len(series)}
        if len(series):
            per_kw = series["total_tokens_per_s_per_gpu"] / kw
            hit = series[(per_kw / row["tps_per_kw"] - 1).abs() <= relative_tolerance]
            near = series.iloc[(series["median_interactivity"] - row["interactivity"]).abs().argmin()]
            out.update(nearest_interactivity=near["median_interactivity"], nearest_point=near["point_id"])
            if len(hit):
                h = hit.iloc[0]
                out.update(matched_point=h["point_id"], matched_tps_per_kw=h["total_tokens_per_s_per_gpu"] / kw,
                           matched_interactivity=h["median_interactivity"], matched_framework=h["framework"],
                           matched_precision=h["precision"], matched_spec_method=h["spec_method"],
                           matched_disagg=bool(h["disagg"]), matched_concurrency=int(h["concurrency"]),
                           matched_gpus=int(h["prefill_gpus"] + h["decode_gpus"]))
        rows.append(out)
    return pd.DataFrame(rows)


WORKLOADS = ("1k/1k", "8k/1k", "1k/8k")


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, assumptions=ASSUMED)
def energy_split(model: str, accelerator: str, assumptions: Assumptions = DEFAULTS) -> pd.DataFrame:
    """A request's energy in two parts, per workload, at the serving model's highest-throughput
    configuration for that workload: joules per input token (prefill), per output token (decode),
    per token of either kind, and prefill's share of a request's energy, at rated power; and the
    watts and joules per token of each phase under :mod:`perwatt.power`'s fitted model. Every
    column but the layout rests on the chip's rated power, so a chip whose power is unpublished
    (TPU7x, Trainium2) raises ValueError naming it."""
    device = chip(accelerator)
    device.rated_w("a request's energy")
    rows = []
    for name in WORKLOADS:
        drawn = catalog.lengths(name)
        best = serving.frontier(model, accelerator, isl=drawn.isl_mean, osl=drawn.osl_mean).iloc[-1]
        spec = model_spec(model)
        layout = (best["chips"], best["ep"], bool(best["dp_attention"]))
        prefill_s = float(serving.prefill_per_prompt(spec, device, drawn.isl_mean, *layout, assumptions))
        step_s = float(serving.decode_time(spec, device, best["batch"], drawn.isl_mean + drawn.osl_mean / 2,
                                           layout[0], assumptions, 1, layout[1], layout[2]))
        watts = device.power_w * layout[0]
        j_in = watts * prefill_s / drawn.isl_mean
        j_out = watts * step_s / best["batch"]
        together = layout[0] if layout[2] else 1.0
        prefill_w = float(power.phase_watts(device, parallel.pass_work(
            spec, device, together, 0.0, *layout, drawn.isl_mean, "prefill", assumptions), prefill_s * together))
        decode_w = float(power.phase_watts(device, parallel.pass_work(
            spec, device, best["batch"], drawn.isl_mean + drawn.osl_mean / 2, *layout, 1, "decode", assumptions),
            step_s))
        request_in, request_out = j_in * drawn.isl_mean, j_out * drawn.osl_mean
        rows.append({"workload": name, "isl_mean": drawn.isl_mean, "osl_mean": drawn.osl_mean,
                     "chips": int(best["chips"]), "batch": int(best["batch"]),
                     "j_per_input_token": j_in, "j_per_output_token": j_out,
                     "j_per_token": (request_in + request_out) / (drawn.isl_mean + drawn.osl_mean),
                     "prefill_share_pct": request_in / (request_in + request_out) * 100,
                     "prefill_w_modelled": prefill_w, "decode_w_modelled": decode_w,
                     "j_per_input_token_modelled": j_in * prefill_w / device.power_w,
                     "j_per_output_token_modelled": j_out * decode_w / device.power_w})
    return pd.DataFrame(rows)
