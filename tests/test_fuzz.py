"""Every public function of every model module, fed any arguments, answers or refuses cleanly.

For each public callable (found by walking the modules, so a new function is fuzzed, or fails
:func:`test_every_public_model_callable_is_fuzzed` until it is listed in ``GOOD``), Hypothesis draws
each argument either from a known-good call or from a broad strategy: finite and non-finite
floats, negatives, zero, huge and tiny numbers, ints, strings, None, booleans, small lists and
arrays, and objects of the wrong kind. The call must, within a time limit, either

* return finite values of the documented shape (NaN only where the function documents an
  unknown, listed in ``MAY_BE_NAN``), or
* raise ValueError whose message names a parameter that was given a drawn (not known-good) value.

The fast tier runs a few examples per function; the ``slow`` tier runs 200 each.
"""

from __future__ import annotations

import functools
import inspect
import re
import signal
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from perwatt import (accounting, agent_loop, agents, bands, calibration, catalog, crosschip, fleet, instruments, inverse, load, metrics,
                     parallel, power, roofline, serving, specs, speculative)
from perwatt import amdahl, disagg, fleet_profiles, fleet_scenario
from perwatt import cost

MODULES = (metrics, accounting, specs, parallel, roofline, serving, calibration, instruments, power, speculative, agents,
           load, fleet, crosschip, bands, inverse, fleet_profiles, fleet_scenario, disagg, amdahl, cost,
           agent_loop)
#: Public callables left out, each with the reason.
SKIP = {
    "fleet_scenario.sensitivity": "runs eighteen scenarios (seconds a call); its arguments are "
                                  "fleet_scenario.scenario's, which is fuzzed, and tests/test_fleet.py runs it",
    "specs.ModelSpec": "a record that specs.model_spec fills from the validated data/model_specs.csv; fuzzed "
                       "through model_spec and every function that takes one",
    "specs.Chip": "a record that specs.chip fills from the validated data/accelerators.csv; fuzzed through chip",
    "power.fit": "a least-squares fit over the measured power rows; its bounds are checked in tests/test_power.py",
    "calibration.fit": "a least-squares fit taking seconds a call; its arguments are calibration.predict's, which "
                       "is fuzzed, and tests/test_calibration.py runs it on the real data",
}
#: Words an error may use for a parameter: a name given as ``name`` is a model's or an accelerator's.
ALIASES = {"name": ("model", "accelerator"), "workload_name": ("workload",)}

SPEC, DEVICE = roofline.model_spec("deepseek-r1"), roofline.chip("h100")
PROFILE = agents.SystemProfile(1e-4, 0.01, 0.05)
WORK = fleet.Workload("w", 1024, 1024, 10.0, 100.0)
CHIP = fleet.Hardware("a", "A", 1.0, 1000.0, {"w": 10.0})
LLAMA = ("llama-3.1-8b", "h100")
#: A few measured InferenceX rows, single-pool and disaggregated, with and without MTP.
MEASURED = catalog.measured().iloc[[0, 3, 150, 200, 300]].reset_index(drop=True)

#: One call of every public callable that must succeed: the values each parameter is drawn around.
GOOD = {
    "metrics.joules_per_token": dict(tps_per_kw=85_448.0),
    "metrics.kwh_per_million_tokens": dict(joules_per_token=3.6),
    "metrics.energy_cost_per_million_tokens": dict(joules_per_token=0.01, price_usd_per_kwh=0.1, pue=1.2),
    "metrics.chip_throughput": dict(tps_per_kw=44_960.0, power_w=1200.0),
    "metrics.tps_per_kw_at": dict(tokens_per_s=1000.0, power_w=700.0),
    "metrics.output_token_fraction": dict(isl_tokens=8192, osl_tokens=1024),
    "metrics.per_output_token": dict(per_total_token=1.0, isl_tokens=8192, osl_tokens=1024),
    "metrics.ratio": dict(candidate=2.0, baseline=1.5),
    "metrics.hardware_cost_per_million_tokens": dict(price_usd_per_hour=3.6, tokens_per_s=1000.0),
    "accounting.pairs": {},
    "accounting.implied_chip_throughput": {},
    "accounting.per_chip_comparison": dict(basis="chip_rated"),
    "accounting.basis_comparison": dict(published_basis="chip_rated", jalapeno_power_w=700.0,
                                        baseline_basis="all_in_provisioned"),
    "accounting.energy_costs": dict(price_usd_per_kwh=0.08, pue=1.1, tokens="output", workload_name=None),
    "accounting.same_overhead_comparison": dict(published_basis="jalapeno_measured"),
    "accounting.hardware_and_energy_cost": dict(price_usd_per_kwh=0.08, pue=1.0, energy_basis="chip_rated"),
    "specs.Assumptions": dict(bandwidth_efficiency=0.7, compute_efficiency=0.5, overlap=0.5, kv_bits=8.0,
                              usable_hbm_fraction=0.8, layer_latency_us=50.0, collective_latency_us=5.0,
                              link_efficiency=0.8, routing_skew=1.2),
    "specs.model_spec": dict(name="deepseek-r1"),
    "specs.chip": dict(name="h100"),
    "specs.known_chips": {},
    "specs.known_models": {},
    "specs.chips_with_power": {},
    "roofline.experts_touched": dict(spec=SPEC, tokens=8),
    "roofline.weight_bytes": dict(spec=SPEC, tokens=8),
    "roofline.total_weight_bytes": dict(spec=SPEC),
    "roofline.kv_bytes": dict(spec=SPEC, context=1024, kv_bits=16.0),
    "roofline.decode_flops": dict(spec=SPEC, batch=4, context=1024, tokens_per_sequence=2),
    "roofline.decode_bytes": dict(spec=SPEC, batch=4, context=1024, kv_bits=16.0, tokens_per_sequence=2),
    "roofline.prefill_flops": dict(spec=SPEC, prompt_tokens=1024),
    "roofline.prefill_bytes": dict(spec=SPEC, prompt_tokens=1024, kv_bits=16.0),
    "roofline.arithmetic_intensity": dict(flops=1e12, nbytes=1e9),
    "roofline.ridge_point": dict(device=DEVICE, bits=8.0),
    "roofline.chips_needed": dict(spec=SPEC, device=DEVICE, batch=4, context=1024, assumptions=roofline.DEFAULTS),
    "roofline.phase_time": dict(flops=1e12, nbytes=1e9, device=DEVICE, bits=8.0, chips=2,
                                assumptions=roofline.DEFAULTS),
    "roofline.prefill_time": dict(spec=SPEC, device=DEVICE, prompt_tokens=1024, chips=8,
                                  assumptions=roofline.DEFAULTS),
    "roofline.decode_time": dict(spec=SPEC, device=DEVICE, batch=4, context=1024, chips=8,
                                 assumptions=roofline.DEFAULTS, tokens_per_sequence=1),
    "roofline.roofline_points": dict(model="deepseek-r1", accelerator="h100", batch=4, isl=2048.0, osl=512.0,
                                     precision="fp8"),
    "serving.serve": dict(spec=SPEC, device=DEVICE, batch=4, isl=1024, osl=256, assumptions=roofline.DEFAULTS,
                          chips=8, ep=8, dp_attention=True, drafts=2, tokens_per_pass=2.0),
    "serving.serve_disaggregated": dict(spec=SPEC, device=DEVICE, concurrency=64, isl=1024, osl=256, prefill_chips=8,
                                        decode_chips=8, prefill_workers=1, decode_workers=2, prefill_ep=1,
                                        decode_ep=8, prefill_dp_attention=False, decode_dp_attention=True,
                                        drafts=1, tokens_per_pass=1.5, assumptions=roofline.DEFAULTS),
    "serving.layouts": dict(spec=SPEC, device=DEVICE),
    "serving.decode_pass": dict(spec=SPEC, device=DEVICE, batch=8, context=2048, chips=8, ep=8, dp=True, drafts=2,
                                assumptions=roofline.DEFAULTS),
    "serving.prefill_per_prompt": dict(spec=SPEC, device=DEVICE, isl=2048, chips=8, ep=8, dp=True,
                                       assumptions=roofline.DEFAULTS),
    "serving.sweep_chip": dict(spec=SPEC, device=DEVICE, isl=1024.0, osl=512.0, assumptions=roofline.DEFAULTS,
                               batches=(1, 64), drafts=1, tokens_per_pass=1.8),
    "serving.sweep": dict(model="deepseek-r1", accelerator="b200", precision="fp4", isl=1024.0, osl=512.0,
                          assumptions=roofline.DEFAULTS, batches=(1, 64), drafts=1, tokens_per_pass=1.8),
    "parallel.Layout": dict(chips=8, ep=4, dp_attention=True),
    "parallel.expected_max_z": dict(groups=8),
    "parallel.busiest_group_experts": dict(spec=SPEC, tokens=16, ep=8, skew=1.2),
    "parallel.weight_bytes_per_chip": dict(spec=SPEC, chips=8, ep=8, dp_attention=True),
    "parallel.memory_per_chip": dict(spec=SPEC, chips=8, ep=8, dp_attention=False, sequences=4, context=2048,
                                     assumptions=roofline.DEFAULTS),
    "parallel.link_bytes_s": dict(device=DEVICE, chips=16),
    "parallel.pass_time": dict(spec=SPEC, device=DEVICE, sequences=4, context=1024, chips=8, ep=8, dp_attention=True,
                               tokens_per_sequence=2, phase="decode", assumptions=roofline.DEFAULTS),
    "calibration.usable": dict(table=MEASURED),
    "calibration.predict": dict(table=MEASURED, assumptions=roofline.DEFAULTS, mtp_tokens_per_pass=2.0),
    "calibration.errors": dict(table=MEASURED, assumptions=roofline.DEFAULTS, mtp_tokens_per_pass=2.0),
    "calibration.error_summary": dict(frame=calibration.errors(MEASURED), by="hardware"),
    "calibration.split": dict(table=MEASURED),
    "calibration.measured_errors": {},
    "calibration.published_throughput": dict(assumptions=roofline.DEFAULTS),
    "parallel.pass_work": dict(spec=SPEC, device=DEVICE, sequences=4, context=1024, chips=8, ep=8, dp_attention=True,
                               tokens_per_sequence=2, phase="decode", assumptions=roofline.DEFAULTS),
    "instruments.layer_budget": dict(assumptions=roofline.DEFAULTS),
    "instruments.measured_layer_time": {},
    "instruments.bandwidth_per_kw": {},
    "instruments.jalapeno_bandwidth_hypothesis": {},
    "instruments.per_watt_against_bandwidth": {},
    "instruments.identify_baselines": dict(relative_tolerance=1e-4),
    "instruments.energy_split": dict(model="gpt-oss-120b", accelerator="gb200", assumptions=roofline.DEFAULTS),
    "power.PowerModel": dict(idle_fraction=0.3, pj_per_byte=80.0, pj_per_flop=0.3),
    "parallel.pass_terms": dict(spec=SPEC, sequences=16, context=1024.0, chips=8, ep=8, dp_attention=True,
                                tokens_per_sequence=1, phase="decode", assumptions=roofline.DEFAULTS),
    "calibration.bandwidth_efficiency_by_chip": dict(),
    "calibration.refit_by_chip": dict(parameter="layer_latency_us"),
    "crosschip.terms": dict(model="gpt-oss-120b", precision="as_released"),
    "crosschip.chip_fields": dict(accelerator="gb200", model="deepseek-r1", precision="as_released", power_w=None),
    "crosschip.reader_chip": dict(bandwidth_tb_s=16.0, tflops=5000.0, hbm_gb=288.0, power_w=700.0, domain=8,
                                  link_gb_s=900.0),
    "crosschip.reader_link_bytes_s": dict(),
    "crosschip.parameters": dict(assumptions=roofline.DEFAULTS, power_basis="rated", power_model=power.FITTED),
    "crosschip.rows": dict(model="gpt-oss-120b", device=roofline.chip("gb200"), precision="as_released",
                           power_basis="modelled", assumptions=roofline.DEFAULTS, power_model=power.FITTED),
    "crosschip.frontier": dict(model="gpt-oss-120b", device=roofline.chip("gb200"), precision="as_released",
                               power_basis="rated", assumptions=roofline.DEFAULTS, power_model=power.FITTED),
    "crosschip.best_at": dict(curve=pd.DataFrame({"x": [10.0, 20.0], "y": [2.0, 1.0]}), targets=[5.0, 15.0]),
    "crosschip.with_efficiency": dict(assumptions=roofline.DEFAULTS, bandwidth_efficiency=0.5),
    "bands.efficiency_band": dict(),
    "bands.system_chip": dict(system="gb200", reader=None, assumed_power_w=None),
    "bands.curves": dict(model="gpt-oss-120b", systems=["gb200", "h100"], precision="as_released",
                             power_basis="rated", assumptions=roofline.DEFAULTS, power_model=power.FITTED, reader=None,
                             assumed_power_w=None),
    "bands.at_targets": dict(curve_frame=pd.DataFrame({"system": ["a", "a", "a"], "case": ["low", "central", "high"],
                                                           "x": [10.0, 12.0, 14.0], "y": [1.0, 2.0, 3.0]}),
                                 targets=[5.0, 11.0]),
    "bands.ratio_along": dict(read=pd.DataFrame({"system": ["a", "b"], "t": [10.0, 10.0], "low": [1.0, 1.0],
                                                     "central": [2.0, 1.5], "high": [3.0, 2.0]}), a="a", b="b"),
    "bands.drivers": dict(model="gpt-oss-120b", systems=["h100"], target=20.0, precision="as_released"),
    "bands.reported_intervals": dict(),
    "inverse.inverse": dict(model="deepseek-r1", tokens_per_s_per_user=100.0, tps_per_kw=5000.0, chips=8, batch=1,
                              ep=None, dp_attention=False, precision="as_released", assumptions=roofline.DEFAULTS,
                              tflops=None),
    "inverse.gap_conditions": dict(model="deepseek-r1", baseline="gb300", target=100.0, gaps=[2.1],
                                     precision="as_released", assumptions=roofline.DEFAULTS),
    "power.pool_watts": dict(spec=SPEC, device=roofline.chip("b200"), batch=16, isl=1024, osl=512, chips=8, ep=8,
                             dp_attention=True, drafts=0, tokens_per_pass=1.0, assumptions=roofline.DEFAULTS,
                             model=power.FITTED),
    "power.phase_watts": dict(device=DEVICE, work={"bytes": 1e9, "flops": 1e12}, seconds=0.01, model=power.FITTED),
    "power.measured_rows": dict(table=MEASURED),
    "power.errors": dict(model=power.FITTED),
    "serving.pareto_efficient": dict(x=[1.0, 2.0, 3.0], y=[3.0, 1.0, 2.0]),
    "serving.batch_list": dict(batches=[1, 2, 4]),
    "serving.frontier": dict(model="gpt-oss-120b", accelerator="gb200", precision="as_released", isl=1024.0,
                             osl=512.0, assumptions=roofline.DEFAULTS, batches=(1, 8, 64), drafts=0,
                             tokens_per_pass=1.0),
    "serving.required_bandwidth": dict(model="gpt-oss-120b", tokens_per_s_per_user=100.0, context=8704,
                                       precision="bf16", kv_bits=16.0),
    "serving.decode_time_on": dict(model="llama-3.1-8b", accelerator="h100", chips=1, precision="bf16", batch=1,
                                   context=1024.0, assumptions=roofline.DEFAULTS),
    "serving.validation": dict(assumptions=roofline.DEFAULTS, unknown_context=1024),
    "serving.implied_bandwidth": dict(precision="as_released", include_kv=True, reference="gb300"),
    "speculative.expected_tokens": dict(alpha=0.8, gamma=4),
    "speculative.speedup": dict(alpha=0.8, gamma=4, c=0.05),
    "speculative.unexplained_factor": dict(per_user_ratio=54.0, alpha=0.9, gamma=8),
    "speculative.best_gamma": dict(alpha=0.8, c=0.05, max_gamma=16),
    "speculative.simulate": dict(alpha=0.8, gamma=3, rounds=100, seed=1),
    "speculative.batch_speedup": dict(model=LLAMA[0], accelerator=LLAMA[1], alpha=0.8, gamma=4, batch=8,
                                      context=512, assumptions=roofline.DEFAULTS, drafter="cost", c=0.05,
                                      branches=1, chips=None, precision="as_released"),
    "speculative.crossover_batch": dict(model=LLAMA[0], accelerator=LLAMA[1], alpha=0.7, gamma=3, c=None,
                                        max_batch=512),
    "speculative.batch_frame": dict(model=LLAMA[0], accelerator=LLAMA[1], alpha=0.7, gamma=3, c=0.1, context=512,
                                    batches=(1, 16, 256), drafter="cost", branches=1),
    "speculative.prefix_acceptance": dict(tokens_per_pass=[1.92, 2.58, 2.82]),
    "speculative.position_rates": dict(profile=[0.92, 0.66, 0.24]),
    "speculative.independent_profile": dict(alpha=0.9, positions=4),
    "speculative.tree_profile": dict(profile=[0.92, 0.66, 0.24], branches=2),
    "speculative.profile_tokens": dict(profile=[0.92, 0.66, 0.24], drafts=2),
    "speculative.fitted_alpha": dict(tokens_one_draft=1.92),
    "speculative.drafters": {},
    "speculative.round_time": dict(spec=SPEC, device=DEVICE, batch=4, context=1024, drafts=2, chips=8, ep=8,
                                   dp_attention=True, drafter="llama-3.1-8b", c=None, branches=2,
                                   assumptions=roofline.DEFAULTS),
    "speculative.speedup_surface": dict(c=0.05, alphas=(0.5, 0.9), gammas=(1, 4)),
    "agents.SystemProfile": dict(prefill_s_per_token=1e-4, tpot_s=0.01, joules_per_token=0.05),
    "agents.task": dict(profile=PROFILE, steps=3, initial_context=1000, context_growth=500, cache_hit=0.2, tool_s=2.0,
                        output_tokens=100),
    "agents.profiles": dict(model="deepseek-r1"),
    "agents.task_comparison": dict(model="deepseek-r1", steps=10, context_growth=1000, cache_hit=0.6, tool_s=1.0,
                                   initial_context=None, output_tokens=None),
    "load.simulate_serving": dict(arrival_rate=20.0, prefill_s=0.004, step_time_s=np.array([0.0, 0.006, 0.008]),
                                  output_tokens=4, max_batch=2, requests=200, warmup=20, seed=1),
    "load.md1_mean_latency": dict(arrival_rate=20.0, service_s=0.01),
    "load.load_curve": dict(max_batch=4, rates=[1.0, 2.0], isl=None, osl=64, requests=100, seed=0),
    "load.joules_per_output_token": dict(rated_power_w=1000.0, chips=2, busy_fraction=0.25,
                                         throughput_tokens_per_s=500.0, idle_power_fraction=0.1),
    "fleet.Workload": dict(name="w", isl_tokens=1024, osl_tokens=1024, min_tokens_per_s_per_user=10.0,
                           output_tokens_per_s=100.0, model="gpt-oss-120b"),
    "fleet.Hardware": dict(name="a", label="A", usd_per_hour=1.0, power_w=1000.0, capacity={"w": 10.0},
                           supply=10.0, assumed=False, instance_chips={"w": 2}, watts={"w": 500.0}),
    "fleet.hourly_cost": dict(hardware=CHIP, workload="w", price_usd_per_kwh=0.08, pue=1.2),
    "fleet.assign": dict(workloads=[WORK], hardware=[CHIP], price_usd_per_kwh=0.08, pue=1.2, integral=True,
                         site_mw=1.0),
    "fleet_profiles.operating_point": dict(accelerator="gb200", workload=WORK, power_w=None),
    "fleet_profiles.assumed_power_w": dict(accelerator="tpu7x"),
    "fleet_profiles.assumed_price": dict(accelerator="trainium2"),
    "fleet_profiles.sourced_profiles": dict(workloads=[WORK], power_scale=1.0, supply={"gb200": 100.0}),
    "fleet_profiles.JalapenoAssumptions": dict(tflops=10000.0, hbm_gb=192.0, capacity_scale=1.0,
                                               usd_per_watt_hour_vs_gb200=1.0, supply_chips=100.0),
    "fleet_profiles.reported_models": dict(),
    "fleet_profiles.jalapeno_chip": dict(model="gpt-oss-120b", assumptions=fleet_profiles.JalapenoAssumptions()),
    "fleet_profiles.jalapeno_point": dict(workload=WORK, assumptions=fleet_profiles.JalapenoAssumptions()),
    "fleet_profiles.jalapeno_profile": dict(workloads=[WORK], assumptions=fleet_profiles.JalapenoAssumptions()),
    "fleet_scenario.scenario_workloads": dict(agent_min_rate=35.0),
    "fleet_scenario.kind_of": dict(workload="gpt-oss-120b chat"),
    "fleet_scenario.hardware": dict(agent_min_rate=35.0, power_scale=1.0, assumptions=None, supply=None),
    "fleet_scenario.scenario": dict(agent_min_rate=35.0, price_usd_per_kwh=0.08, site_mw=None, power_scale=1.0,
                                    assumptions=None, integral=True, supply=None, price_scale=None),
    "fleet_scenario.domain_effect": dict(agent_min_rate=35.0),
    "disagg.priced_chips": dict(),
    "disagg.usd_per_hour": dict(accelerator="h100"),
    "disagg.workloads": dict(),
    "disagg.lengths": dict(workload="1k/1k"),
    "disagg.request_cost": dict(prefill_chip_s=1.0, decode_chip_s=2.0, prefill_w=700.0, decode_w=1000.0,
                                prefill_usd_per_hour=1.3, decode_usd_per_hour=1.95, price_usd_per_kwh=0.08),
    "disagg.phases": dict(model="gpt-oss-120b", accelerator="h100", workload="1k/1k"),
    "disagg.kv_transfer_s": dict(model="gpt-oss-120b", prefill_chip="h100", decode_chip="b200", isl=8192.0),
    "disagg.disaggregated": dict(model="gpt-oss-120b", prefill_chip="h100", decode_chip="b200", workload="1k/1k",
                                 min_tokens_per_s_per_user=50.0, price_usd_per_kwh=0.08),
    "disagg.single_pool": dict(model="gpt-oss-120b", accelerator="h100", workload="1k/1k",
                               min_tokens_per_s_per_user=50.0, price_usd_per_kwh=0.08),
    "disagg.comparison": dict(model="gpt-oss-120b", workload="1k/1k", min_tokens_per_s_per_user=50.0,
                              price_usd_per_kwh=0.08),
    "amdahl.whole_gain": dict(fraction=0.5, speedup=1.8),
    "amdahl.fraction_needed": dict(gain=1.2, speedup=1.8),
    "amdahl.reported_speedups": dict(claim_id="ai-kernels"),
    "amdahl.kernel_fraction": dict(model="gpt-oss-120b", accelerator="gb200", batch=64, context=8704.0, chips=1),
    "cost.rental_usd_per_hour": dict(accelerator="gb200"),
    "cost.purchase_usd": dict(accelerator="b200"),
    "cost.electricity_usd_per_hour": dict(power_w=1200.0, pue=1.3, price_usd_per_kwh=0.08),
    "cost.owned_usd_per_hour": dict(purchase_usd=35_000.0, lifetime_years=5.0, power_w=1000.0, pue=1.3,
                                    price_usd_per_kwh=0.08, overhead_usd_per_hour=0.3),
    "cost.per_million": dict(usd_per_hour=2.21, tokens_per_s=10_000.0, prefill_share=0.3, input_fraction=0.89),
    "cost.tokens_per_usd": dict(usd_per_million_tokens=0.05),
    "cost.operating_points": dict(model="deepseek-r1", systems=["h100"]),
    "cost.token_costs": dict(basis="owned", custom_usd_per_hour=2.0, price_usd_per_kwh=0.08, lifetime_years=5.0,
                             overhead_usd_per_hour=0.3, pue=1.3, model="deepseek-r1", systems=["h100", "b200"]),
    "cost.rankings": dict(tps_per_kw_a=9000.0, power_w_a=1200.0, usd_per_hour_a=2.21, tps_per_kw_b=7500.0,
                          power_w_b=1000.0, usd_per_hour_b=1.95),
    "cost.owned_flip": dict(tps_per_kw_a=7500.0, power_w_a=1000.0, purchase_usd_a=35_000.0, tps_per_kw_b=2900.0,
                            power_w_b=700.0, purchase_usd_b=27_500.0, lifetime_years=5.0, pue=1.3,
                            price_usd_per_kwh=0.08, overhead_usd_per_hour=0.3),
    "cost.proxy_table": dict(price_usd_per_kwh=0.08, lifetime_years=5.0, overhead_usd_per_hour=0.3, pue=1.3),
    "agent_loop.instance_chips": dict(model="deepseek-r1", accelerator="gb200", context=17000.0),
    "agent_loop.session_capacity": dict(model="gpt-oss-120b", accelerator="gb200", chips=1, context=17000.0),
    "agent_loop.closed_loop": dict(model="gpt-oss-120b", accelerator="gb200", sessions=8, steps=3, tool_s=2.0,
                                   initial_context=2000.0, context_growth=500.0, output_tokens=200.0),
    "agent_loop.per_watt_error": dict(model="gpt-oss-120b", accelerator="gb200", sessions=8, steps=3, tool_s=2.0,
                                      initial_context=2000.0, context_growth=500.0, output_tokens=200.0),
    "agent_loop.simulate_closed_loop": dict(sessions=2, step_time_s=np.array([0.0, 0.01, 0.012]), prefill_s=0.05,
                                            output_tokens=4, tool_s=0.1, calls=40, warmup=4),
}
#: Tables documented to be empty where nothing qualifies: the function, and the columns an empty
#: one must still have (a caller reads them; fleet_profiles._best does from sweep_chip's).
MAY_BE_EMPTY = {
    "serving.sweep_chip": {"chips", "ep", "dp_attention", "batch", "tokens_per_s_per_user",
                           "output_tokens_per_s_per_chip"},  # no layout fits at these lengths
}
#: Results documented to hold unknowns (NaN): the function, and the columns (or "result").
MAY_BE_NAN = {
    "crosschip.best_at": {"result"},  # NaN where no point is that fast, as documented
    "bands.drivers": {"central", "low", "high"},  # NaN where no setting reaches the target, as documented
    "bands.at_targets": {"low", "high"},
    "bands.ratio_along": {"ratio_low", "ratio_high"},
    "inverse.gap_conditions": {"bandwidth_multiple", "gap_reached"},  # NaN where bandwidth cannot reach the gap
    "accounting.implied_chip_throughput": {"power_w", "tokens_per_s"},
    "accounting.per_chip_comparison": {"jalapeno_tokens_per_s", "baseline_tokens_per_s", "ratio", "more_chips_pct"},
    "serving.validation": {"isl_tokens", "osl_tokens"},
    "calibration.predict": {"total_tokens_per_s_per_gpu", "median_interactivity"},
    "instruments.identify_baselines": {"nearest_interactivity", "matched_tps_per_kw", "matched_interactivity",
                                       "matched_concurrency", "matched_gpus"},
    "calibration.published_throughput": {"osl_tokens"},
    "calibration.split": {"avg_power_w", "joules_per_output_token", "joules_per_total_token",
                          "input_tokens_per_s_per_prefill_gpu", "output_tokens_per_s_per_decode_gpu"},
    "instruments.bandwidth_per_kw": {"rated_kw", "tb_s_per_kw", "hbm_share_of_rating_pct"},  # power unpublished
    "speculative.crossover_batch": {"result"},
    "speculative.batch_frame": {"crossover_batch"},
    "speculative.position_rates": {"result"},
    "fleet.assign": {"workload_usd_per_million_tokens", "workload_kwh_per_million_tokens"},
    "fleet_scenario.scenario": {"workload_usd_per_million_tokens", "workload_kwh_per_million_tokens"},
    "fleet_scenario.domain_effect": {"capacity_ratio", "cost_ratio"},  # NaN where a chip misses the target
    # The KV transfer is unknown (NaN) where a chip's scale-out bandwidth is unpublished, as documented.
    "disagg.kv_transfer_s": {"result"},
    "disagg.disaggregated": {"transfer_s", "ttft_s"},
    "disagg.comparison": {"transfer_s", "ttft_s"},
    "cost.proxy_table": {"owned_flip_price_usd_per_kwh", "owned_flip_lifetime_years"},  # no tie, or no purchase price
}
#: Functions that broadcast their numeric arguments elementwise: the result has their shape.
ELEMENTWISE = {name for name in GOOD if name.startswith("metrics.")} | {
    "roofline.experts_touched", "roofline.weight_bytes", "roofline.kv_bytes", "roofline.decode_flops",
    "roofline.decode_bytes", "roofline.prefill_flops", "roofline.prefill_bytes", "roofline.arithmetic_intensity",
    "roofline.chips_needed", "roofline.phase_time", "roofline.prefill_time", "roofline.decode_time",
    "serving.required_bandwidth", "speculative.expected_tokens", "speculative.speedup",
    "speculative.unexplained_factor", "speculative.best_gamma", "agents.task", "serving.serve",
    "speculative.batch_speedup", "speculative.round_time", "load.joules_per_output_token",
    "parallel.busiest_group_experts",
    "parallel.expected_max_z", "parallel.link_bytes_s", "parallel.weight_bytes_per_chip", "parallel.memory_per_chip",
    "parallel.pass_time", "serving.serve_disaggregated", "serving.prefill_per_prompt",
    "serving.decode_pass"}
TIME_LIMIT_S = 20
#: Functions whose first call fills a cache by refitting or re-solving the serving model across
#: chips (tens of seconds on a loaded 2-core machine, while the book builds beside the tests):
#: a longer limit, still far short of a hang.
SLOW_TIME_LIMIT_S = {name: 120 for name in (
    "bands.drivers", "bands.curves", "bands.efficiency_band", "bands.at_targets", "bands.ratio_along",
    "calibration.refit_by_chip", "calibration.bandwidth_efficiency_by_chip", "fleet_scenario.scenario",
    "fleet_scenario.hardware", "fleet_scenario.domain_effect")}


def public_callables() -> dict[str, object]:
    found = {}
    for module in MODULES:
        short = module.__name__.rsplit(".", 1)[1]
        for name, obj in vars(module).items():
            if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if getattr(obj, "__module__", None) == module.__name__:
                found[f"{short}.{name}"] = obj
    return found


CALLABLES = public_callables()
FUZZED = sorted(set(CALLABLES) - set(SKIP))


def test_every_public_model_callable_is_fuzzed():
    unlisted = set(FUZZED) - set(GOOD)
    assert not unlisted, f"add a known-good call to GOOD in tests/test_fuzz.py for {sorted(unlisted)}"
    assert not set(GOOD) - set(CALLABLES), f"GOOD lists callables that do not exist: {set(GOOD) - set(CALLABLES)}"
    assert len(FUZZED) >= 70


def _variants(good: object) -> list:
    """Values near a good one that often cross a boundary: its negative, zero, a fraction, huge."""
    if isinstance(good, (int, float)) and not isinstance(good, bool):
        return [-good, 0, good + 0.5, good * 1e6, good / 1e6, 1e300, -1e-300, good * 1.5]
    return []


WRONG_KIND = [roofline.DEFAULTS, SPEC, DEVICE, PROFILE, WORK, CHIP, fleet_profiles.JalapenoAssumptions(), {}, {"w": -1.0},
              object(), [WORK, WORK], [CHIP, WORK], (), "gb200", "deepseek-r1", "fp8", "all"]
BROAD = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, -1.0, 0.5, 1.0, 1e-320, 1e308, -1e308, float("nan"), float("inf")]),
    st.integers(-3, 20),
    st.sampled_from([10**12, -(10**12), 2**63, 2**100]),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
    st.lists(st.one_of(st.floats(allow_nan=True), st.integers(-5, 50), st.none(), st.text(max_size=2)), max_size=3),
    arrays(np.float64, st.integers(0, 3), elements=st.floats(allow_nan=True, allow_infinity=True, width=64)),
    arrays(np.float64, st.tuples(st.integers(1, 2), st.integers(1, 2)), elements=st.floats(0.5, 8.0)),
    st.sampled_from(WRONG_KIND),
)


@contextmanager
def time_limit(seconds: int):
    def expire(signum, frame):
        raise TimeoutError(f"the call took more than {seconds} s (a hang?)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _finite(value) -> bool:
    arr = np.asarray(value)
    return arr.dtype.kind not in "fc" or bool(np.isfinite(arr).all())


def _check_result(qualname: str, result, kwargs: dict) -> None:
    allowed = MAY_BE_NAN.get(qualname, set())
    if isinstance(result, pd.DataFrame):
        if qualname in MAY_BE_EMPTY and result.empty:
            assert MAY_BE_EMPTY[qualname] <= set(result.columns), f"{qualname}: an empty table without its columns"
            return
        assert len(result) > 0, f"{qualname} returned an empty table"
        for column in result.select_dtypes("number"):
            values = result[column].to_numpy(dtype=float)
            assert not np.isinf(values).any(), f"{qualname}: infinite {column}"
            assert column in allowed or not np.isnan(values).any(), f"{qualname}: NaN in {column}"
        return
    if isinstance(result, dict):
        for key, value in result.items():
            if isinstance(value, (int, float, np.ndarray, np.generic)) and not isinstance(value, bool):
                # NaN only where MAY_BE_NAN says the model leaves a value unknown; never infinite.
                assert (key in allowed and not np.isinf(value).any()) or _finite(value), \
                    f"{qualname}: {key} is not finite: {value!r}"
        return
    if isinstance(result, (float, int, np.ndarray, np.generic)) and not isinstance(result, bool):
        assert "result" in allowed or _finite(result), f"{qualname} returned {result!r}"
    if qualname in ELEMENTWISE:
        shapes = [np.shape(v) for v in kwargs.values()
                  if isinstance(v, (int, float, list, tuple, np.ndarray)) and not isinstance(v, bool)]
        expected = np.broadcast_shapes(*shapes) if shapes else ()
        outputs = result.values() if isinstance(result, dict) else [result]
        for out in outputs:
            assert np.shape(out) in (expected, ()), f"{qualname}: shape {np.shape(out)}, expected {expected}"


def _names(parameter: str) -> tuple[str, ...]:
    return (parameter, *ALIASES.get(parameter, ()))


@functools.cache
def _arguments(qualname: str) -> st.SearchStrategy:
    """A dict of every parameter's value, each with equal chances its good value, a broad one or (for
    a number) a variant of the good one, tagged "drawn" unless it is the good one.

    Made once per function, as one strategy: a fresh strategy per draw was validated and labelled
    anew every time, and with one draw per parameter that was three quarters of the fuzz tiers' time."""
    fields = {}
    for parameter in inspect.signature(CALLABLES[qualname]).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if parameter.name in GOOD[qualname]:
            base = GOOD[qualname][parameter.name]
        elif parameter.default is not parameter.empty:
            base = parameter.default
        else:  # pragma: no cover - GOOD lists every required parameter
            raise AssertionError(f"GOOD[{qualname!r}] lacks {parameter.name}")
        choices = [st.just(("good", base)), BROAD.map(lambda value: ("drawn", value))]
        if _variants(base):
            choices.append(st.sampled_from(_variants(base)).map(lambda value: ("drawn", value)))
        fields[parameter.name] = st.one_of(*choices)
    return st.fixed_dictionaries(fields)


def fuzz_once(qualname: str, data) -> None:
    function = CALLABLES[qualname]
    arguments = data.draw(_arguments(qualname), label="arguments")
    kwargs = {name: value for name, (_, value) in arguments.items()}
    drawn = {name for name, (how, _) in arguments.items() if how == "drawn"}
    try:
        with time_limit(SLOW_TIME_LIMIT_S.get(qualname, TIME_LIMIT_S)):
            result = function(**kwargs)
    except ValueError as err:
        message = str(err)
        named = [p for p in drawn if any(re.search(rf"(?<![\w.]){re.escape(n)}\b", message) for n in _names(p))]
        assert named, f"{qualname}: the error names none of the drawn parameters {sorted(drawn)}: {message}"
        return
    _check_result(qualname, result, kwargs)


def _fuzz_test(max_examples: int, derandomize: bool):
    # No Hypothesis deadline: a call that fills a cache is slow once and fast after, which it reads
    # as flaky; time_limit above is the check against hangs.
    @settings(max_examples=max_examples, deadline=None, derandomize=derandomize, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def run(qualname, data):
        fuzz_once(qualname, data)
    return run


# The quick tier draws the same examples every run; the full tier draws new ones each time.
test_quick_fuzz = pytest.mark.parametrize("qualname", FUZZED)(_fuzz_test(25, derandomize=True))
test_full_fuzz = pytest.mark.slow(pytest.mark.parametrize("qualname", FUZZED)(_fuzz_test(200, derandomize=False)))
