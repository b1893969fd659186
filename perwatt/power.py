"""Power that depends on the work: idle, plus energy per byte read, plus energy per FLOP.

A chip serving a pool draws ``idle_fraction`` of its rating, plus ``pj_per_byte`` for every byte
it reads from HBM, plus ``pj_per_flop`` for every FLOP, averaged over a request's cycle (its share
of prefill and its decode passes), and never more than its rating. The bytes and FLOPs are the
serving model's (:func:`perwatt.parallel.pass_work`).

The three parameters are **fitted**, by non-negative least squares, to the measured average GPU
power of the single-pool InferenceX runs that record it (:func:`fit`). Those are all MI355X runs,
so on any other chip the model is an assumption: the same idle share and the same energy per byte
and per FLOP. The book uses it beside rated power, never instead of it.

The model draws a share of the chip's rating, so it has nothing to say about a chip whose power is
unpublished (TPU7x, Trainium2): :func:`pool_watts` and :func:`phase_watts` raise a ValueError
naming the chip rather than return NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from perwatt import calibration, catalog, checks, parallel, serving
from perwatt.specs import DEFAULTS, Assumptions, Chip, ModelSpec, chip, model_spec


@dataclass(frozen=True)
class PowerModel:
    """Idle share of the rating, and energy per HBM byte and per FLOP (see the module docstring).
    The defaults are :func:`fit`'s on the measured InferenceX runs; a test checks they match."""

    idle_fraction: float = 0.312
    pj_per_byte: float = 86.6
    pj_per_flop: float = 0.312

    def __post_init__(self) -> None:
        checks.scalar("idle_fraction", self.idle_fraction, minimum=0.0, maximum=1.0)
        checks.scalar("pj_per_byte", self.pj_per_byte, minimum=0.0, maximum=10_000.0)
        checks.scalar("pj_per_flop", self.pj_per_flop, minimum=0.0, maximum=1_000.0)

    def watts(self, rated_w, bytes_per_s, flops_per_s):
        """Watts of a chip rated ``rated_w`` reading ``bytes_per_s`` from HBM and doing ``flops_per_s``,
        never more than its rating. An unknown (NaN) rating is refused with a ValueError, as the
        result would be NaN."""
        rated_w = checks.power_w("rated_w", rated_w)
        drawn = (self.idle_fraction * rated_w + self.pj_per_byte * 1e-12 * bytes_per_s
                 + self.pj_per_flop * 1e-12 * flops_per_s)
        return np.minimum(drawn, rated_w)


FITTED = PowerModel()


def _activity(spec: ModelSpec, device: Chip, batch, isl, osl, chips, ep, dp, drafts, tokens_per_pass,
              assumptions: Assumptions):
    """Average HBM bytes/s and FLOP/s per chip over a single pool's request cycle."""
    context = isl + osl / 2
    together = np.where(dp, chips, 1.0)
    prefill_work = parallel.pass_work(spec, device, together, 0.0, chips, ep, dp, isl, "prefill", assumptions)
    decode_work = parallel.pass_work(spec, device, batch, context, chips, ep, dp, drafts + 1, "decode", assumptions)
    served = serving.serve(spec, device, batch, isl, osl, assumptions, chips, ep, dp, drafts, tokens_per_pass)
    passes = osl / tokens_per_pass
    cycle = osl * served["tpot_s"]  # the batch's decode passes plus the prefills that replace it
    nbytes = batch * prefill_work["bytes"] / together + passes * decode_work["bytes"]
    flops = batch * prefill_work["flops"] / together + passes * decode_work["flops"]
    return nbytes / cycle, flops / cycle


@checks.validated(spec=checks.kind(ModelSpec), device=checks.kind(Chip), batch=checks.BATCH, isl=checks.LENGTH,
                  osl=checks.LENGTH, chips=checks.CHIPS, ep=checks.CHIPS, dp_attention=checks.flags,
                  drafts=serving.DRAFTS, tokens_per_pass=serving.ACCEPTED, assumptions=checks.kind(Assumptions),
                  model=checks.kind(PowerModel))
def pool_watts(spec: ModelSpec, device: Chip, batch, isl, osl, chips, ep=1, dp_attention=False, drafts=0,
               tokens_per_pass=1.0, assumptions: Assumptions = DEFAULTS, model: PowerModel = FITTED):
    """Average watts per chip of a single pool at one operating point (arrays broadcast). Raises
    ValueError for a chip whose power is unpublished."""
    rated_w = device.rated_w("its modelled power draw")
    dp = np.asarray(dp_attention, dtype=bool)
    per_s_bytes, per_s_flops = _activity(spec, device, np.asarray(batch, dtype=float), np.asarray(isl, dtype=float),
                                         np.asarray(osl, dtype=float), np.asarray(chips, dtype=float),
                                         np.asarray(ep, dtype=float), dp, np.asarray(drafts, dtype=float),
                                         np.asarray(tokens_per_pass, dtype=float), assumptions)
    return model.watts(rated_w, per_s_bytes, per_s_flops)


def _work(name: str, value) -> dict:
    if not isinstance(value, dict) or set(value) != {"bytes", "flops"}:
        raise ValueError(f"{name} must be a dict of 'bytes' and 'flops', as perwatt.parallel.pass_work returns")
    return {k: checks.array(f"{name}[{k!r}]", v, minimum=0.0, maximum=checks.MAX_WORK) for k, v in value.items()}


@checks.validated(device=checks.kind(Chip), work=_work, seconds=checks.rule(checks.positive, maximum=checks.MAX_SECONDS),
                  model=checks.kind(PowerModel))
def phase_watts(device: Chip, work: dict, seconds, model: PowerModel = FITTED):
    """Watts per chip while it does ``work`` (:func:`perwatt.parallel.pass_work`) in ``seconds``.
    Raises ValueError for a chip whose power is unpublished."""
    rated_w = device.rated_w("its modelled power draw")
    return model.watts(rated_w, work["bytes"] / seconds, work["flops"] / seconds)


def measured_rows(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The usable single-pool InferenceX rows that record average GPU power."""
    table = catalog.measured() if table is None else checks.instance("table", table, pd.DataFrame)
    usable = calibration.usable(table) == ""
    return table[usable & ~table["disagg"] & table["avg_power_w"].notna()]


def _columns(rows: pd.DataFrame) -> np.ndarray:
    """Per row: rated W, modelled HBM bytes/s and FLOP/s per chip."""
    out = []
    for _, r in rows.iterrows():
        spec = model_spec("deepseek-r1").with_precision("fp4" if r["precision"] == "fp4" else "as_released")
        device, drawn = chip(r["hardware"]), catalog.lengths(r["workload"])
        mtp = r["spec_method"] == "mtp"
        nbytes, flops = _activity(spec, device, float(r["concurrency"]), drawn.isl_mean, drawn.osl_mean,
                                  float(r["decode_tp"]), float(r["decode_ep"]), bool(r["decode_dp_attention"]),
                                  float(calibration.MTP_DRAFTS if mtp else 0),
                                  calibration.MTP_TOKENS_PER_PASS if mtp else 1.0, DEFAULTS)
        out.append((device.rated_w("the power model's fit to measured draw"), float(nbytes), float(flops)))
    return np.array(out)


def fit(rows: pd.DataFrame | None = None) -> PowerModel:
    """The power model that best fits (non-negative least squares, in watts) the measured rows."""
    rows = measured_rows() if rows is None else rows
    if len(rows) < 3:
        raise ValueError(f"rows: at least 3 measured rows are needed to fit 3 parameters, got {len(rows)}")
    columns = _columns(rows)
    solution, _ = nnls(columns * np.array([1.0, 1e-12, 1e-12]), rows["avg_power_w"].to_numpy(float))
    return PowerModel(float(solution[0]), float(solution[1]), float(solution[2]))


def errors(model: PowerModel = FITTED) -> pd.DataFrame:
    """Modelled against measured average GPU power, per measured row (W and per cent)."""
    checks.instance("model", model, PowerModel)
    rows = measured_rows()
    columns = _columns(rows)
    modelled = model.watts(columns[:, 0], columns[:, 1], columns[:, 2])
    out = rows[["point_id", "hardware", "workload", "framework", "spec_method", "concurrency"]].assign(
        measured_w=rows["avg_power_w"].to_numpy(float), modelled_w=modelled)
    out["error_pct"] = (out["modelled_w"] / out["measured_w"] - 1) * 100
    return out.reset_index(drop=True)
