"""The serving model: static batches on the roofline, frontiers over batch size, validation.

Built on :mod:`perwatt.roofline`'s bytes, FLOPs and phase times:

* **Serving.** A static batch: ``B`` prompts are prefilled one after another, then decoded
  together for ``OSL`` steps at the mean context. Interactivity (tokens/s per user) is
  1 ÷ time per decode step, as InferenceX defines it.
* **Frontier.** Sweeping the batch traces throughput per chip against tokens/s per user; only
  the points no other point beats on both form the frontier.
* **Validation.** The model's time per output token beside public measurements.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import catalog, data
from perwatt.roofline import (DEFAULTS, TERA, Assumptions, Chip, ModelSpec, chip, chips_needed, decode_bytes,
                              decode_time, model_spec, prefill_time)


def serve(spec: ModelSpec, device: Chip, batch, isl, osl, assumptions: Assumptions = DEFAULTS) -> dict:
    """One static-batch operating point (arrays broadcast).

    Returns a dict of arrays: chips per instance, TTFT (s, mean over the batch), TPOT (s),
    tokens/s per user, output tokens/s per chip, total tokens/s per chip, end-to-end latency
    (s, mean) and joules per output token at the chip's rated power.
    """
    batch = np.asarray(batch, dtype=float)
    isl = np.asarray(isl, dtype=float)
    osl = np.asarray(osl, dtype=float)
    context = isl + osl / 2
    chips = chips_needed(spec, device, batch, isl + osl, assumptions)
    t_prefill = prefill_time(spec, device, isl, chips, assumptions)
    tpot = decode_time(spec, device, batch, context, chips, assumptions)
    cycle = batch * t_prefill + osl * tpot
    output_per_chip = batch * osl / cycle / chips
    ttft = (batch + 1) / 2 * t_prefill
    return {
        "chips": chips,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "tokens_per_s_per_user": 1.0 / tpot,
        "output_tokens_per_s_per_chip": output_per_chip,
        "total_tokens_per_s_per_chip": output_per_chip * (isl + osl) / osl,
        "e2e_latency_s": ttft + osl * tpot,
        "joules_per_output_token": device.power_w / output_per_chip,
    }


BATCHES = tuple(2 ** i for i in range(11))


def pareto_efficient(x, y) -> np.ndarray:
    """True for each point that no other point beats on both ``x`` and ``y`` (higher is better on
    both): no other point is at least as good on both and strictly better on one."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    at_least = (x[None, :] >= x[:, None]) & (y[None, :] >= y[:, None])
    strictly = (x[None, :] > x[:, None]) | (y[None, :] > y[:, None])
    return ~(at_least & strictly).any(axis=1)


def frontier(model: str, accelerator: str, precision: str = "as_released", isl: float | None = None,
             osl: float | None = None, assumptions: Assumptions = DEFAULTS, batches=BATCHES) -> pd.DataFrame:
    """Throughput per chip against tokens/s per user across batch sizes: one row per batch.

    ``efficient`` is true for the batch sizes no other batch beats on both output tokens/s per chip
    and tokens/s per user. Batches can be beaten because a larger batch's KV cache
    moves the instance onto more chips, which this model lets scale ideally: the larger batch
    then gains per-user speed without losing throughput per chip.
    """
    w = catalog.workload()
    isl = float(w["isl_tokens"]) if isl is None else isl
    osl = float(w["osl_tokens"]) if osl is None else osl
    spec = model_spec(model).with_precision(precision)
    device = chip(accelerator)
    batch = np.asarray(batches, dtype=float)
    if (batch != np.round(batch)).any() or (batch < 1).any():
        raise ValueError(f"batches must be whole numbers ≥ 1, got {list(batches)!r}")
    point = serve(spec, device, batch, isl, osl, assumptions)
    frame = pd.DataFrame({"batch": batch.astype(int), **{k: np.asarray(v, dtype=float) for k, v in point.items()}})
    frame["efficient"] = pareto_efficient(frame["output_tokens_per_s_per_chip"], frame["tokens_per_s_per_user"])
    return frame


def required_bandwidth(model: str, tokens_per_s_per_user, context, precision: str = "as_released",
                       kv_bits: float = DEFAULTS.kv_bits):
    """Memory bandwidth (bytes/s) one sequence at batch 1 needs to reach a per-user rate, with no
    speculative decoding: every step reads the active weights and the whole KV cache."""
    spec = model_spec(model).with_precision(precision)
    per_token = decode_bytes(spec, 1, context, kv_bits)
    return per_token * np.asarray(tokens_per_s_per_user, dtype=float)


def decode_time_on(model: str, accelerator: str, chips: int, precision: str, batch: int, context: float,
                   assumptions: Assumptions = DEFAULTS) -> float:
    """Seconds per decode step on a given number of chips (as a measurement was run)."""
    spec = model_spec(model).with_precision(precision)
    return float(decode_time(spec, chip(accelerator), batch, context, chips, assumptions))


def validation(assumptions: Assumptions = DEFAULTS, unknown_context: float = 1024) -> pd.DataFrame:
    """The model's time per output token beside public measurements (data/measurements.csv).

    Where a source gives no lengths, the context is ``unknown_context`` tokens; for these
    small dense models at batch 1 the weights dominate, so the choice moves little.
    """
    table = data.load("measurements")
    measured_ms = np.where(table["unit"] == "tokens_per_s", 1000.0 / table["value"], table["value"])
    context = np.where(table["isl_tokens"].notna(),
                       table["isl_tokens"].fillna(0) + table["osl_tokens"].fillna(0) / 2, unknown_context)
    modelled_ms = [
        1000.0 * decode_time_on(m, a, int(c), p, int(b), float(ctx), assumptions)
        for m, a, c, p, b, ctx in zip(table["model"], table["accelerator"], table["chips"],
                                      table["precision"], table["batch"], context)
    ]
    out = table.assign(measured_tpot_ms=measured_ms, modelled_tpot_ms=modelled_ms, context_tokens=context)
    out["error_pct"] = (out["modelled_tpot_ms"] / out["measured_tpot_ms"] - 1) * 100
    return out


def implied_bandwidth(precision: str, include_kv: bool, reference: str = "gb300") -> pd.DataFrame:
    """The memory bandwidth one stream needs for the candidate's reported tokens/s per user.

    Batch 1, no speculative decoding: every token reads the active weights and, with
    ``include_kv``, the whole KV cache at the table workload's mean context. One row per model,
    with the bandwidth in TB/s and as a multiple of ``reference``'s HBM bandwidth.
    """
    drawn = catalog.lengths()
    context = drawn.isl_mean + drawn.osl_mean / 2 if include_kv else 0.0
    table = catalog.results()
    table = table[table["system"] == catalog.CANDIDATE][["model", "model_label", "interactivity"]].reset_index(drop=True)
    table["required_tb_s"] = [float(required_bandwidth(m, rate, context, precision)) / TERA
                              for m, rate in zip(table["model"], table["interactivity"])]
    reference_chip = chip(reference)
    table["reference_tb_s"] = reference_chip.bandwidth_bytes_s / TERA
    table["hbm_equivalents"] = table["required_tb_s"] / table["reference_tb_s"]
    return table
