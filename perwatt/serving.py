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

from perwatt import catalog, checks, data
from perwatt.roofline import (ASSUMED, DEFAULTS, DEVICE, OPTIONAL_LENGTH, PRECISIONS, SPEC, TERA, Assumptions, Chip, ModelSpec, chip,
                              chips_needed, decode_bytes, decode_time, model_spec, prefill_time)
from perwatt.roofline import known_chips as roofline_chips

PRECISION = checks.rule(checks.choice, PRECISIONS)


@checks.validated(spec=SPEC, device=DEVICE, batch=checks.BATCH, isl=checks.LENGTH, osl=checks.LENGTH,
                  assumptions=ASSUMED)
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
    both): no other point is at least as good on both and strictly better on one. ``x`` and ``y``
    are one-dimensional, of one length (at most 100,000 points: the comparison is all pairs)."""
    x = checks.array("x", x, minimum=-checks.MAX_MAGNITUDE)
    y = checks.array("y", y, minimum=-checks.MAX_MAGNITUDE)
    if x.ndim != 1 or y.shape != x.shape or len(x) > 100_000:
        raise ValueError(f"x and y must be one-dimensional and of one length (≤ 100,000), got shapes {x.shape} "
                         f"and {y.shape}")
    at_least = (x[None, :] >= x[:, None]) & (y[None, :] >= y[:, None])
    strictly = (x[None, :] > x[:, None]) | (y[None, :] > y[:, None])
    return ~(at_least & strictly).any(axis=1)


def batch_list(batches) -> np.ndarray:
    """Batch sizes to sweep: 1 to 10,000 whole numbers, each in 1..1,000,000, as floats."""
    batch = checks.array("batches", batches, minimum=1, maximum=checks.MAX_BATCH, whole=True)
    if batch.ndim != 1 or not len(batch) or len(batch) > 10_000:
        raise ValueError(f"batches must be a list of 1 to 10,000 whole numbers, got {batches!r}")
    return batch


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, precision=PRECISION, isl=OPTIONAL_LENGTH,
                  osl=OPTIONAL_LENGTH, assumptions=ASSUMED)
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
    batch = batch_list(batches)
    point = serve(spec, device, batch, isl, osl, assumptions)
    frame = pd.DataFrame({"batch": batch.astype(int), **{k: np.asarray(v, dtype=float) for k, v in point.items()}})
    frame["efficient"] = pareto_efficient(frame["output_tokens_per_s_per_chip"], frame["tokens_per_s_per_user"])
    return frame


@checks.validated(model=checks.TEXT, tokens_per_s_per_user=checks.RATE, context=checks.CONTEXT, precision=PRECISION,
                  kv_bits=checks.KV_BITS)
def required_bandwidth(model: str, tokens_per_s_per_user, context, precision: str = "as_released",
                       kv_bits: float = DEFAULTS.kv_bits):
    """Memory bandwidth (bytes/s) one sequence at batch 1 needs to reach a per-user rate, with no
    speculative decoding: every step reads the active weights and the whole KV cache."""
    spec = model_spec(model).with_precision(precision)
    per_token = decode_bytes(spec, 1, context, kv_bits)
    return per_token * tokens_per_s_per_user


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, chips=checks.rule(checks.integer, maximum=checks.MAX_CHIPS),
                  precision=PRECISION, batch=checks.rule(checks.integer, maximum=checks.MAX_BATCH),
                  context=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS), assumptions=ASSUMED)
def decode_time_on(model: str, accelerator: str, chips: int, precision: str, batch: int, context: float,
                   assumptions: Assumptions = DEFAULTS) -> float:
    """Seconds per decode step on a given number of chips (as a measurement was run)."""
    spec = model_spec(model).with_precision(precision)
    return float(decode_time(spec, chip(accelerator), batch, context, chips, assumptions))


@checks.validated(assumptions=ASSUMED, unknown_context=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS))
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


@checks.validated(precision=PRECISION, include_kv=checks.FLAG, reference=checks.TEXT)
def implied_bandwidth(precision: str, include_kv: bool, reference: str = "gb300") -> pd.DataFrame:
    """The memory bandwidth one stream needs for the candidate's reported tokens/s per user.

    Batch 1, no speculative decoding: every token reads the active weights and, with
    ``include_kv``, the whole KV cache at the table workload's mean context. One row per model,
    with the bandwidth in TB/s and as a multiple of ``reference``'s HBM bandwidth.
    """
    if reference not in roofline_chips():
        raise ValueError(f"reference must be one of {roofline_chips()}, got {reference!r}")
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
