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

from perwatt import catalog, checks, data, parallel
from perwatt.roofline import (ASSUMED, DEFAULTS, DEVICE, OPTIONAL_LENGTH, PRECISIONS, SPEC, TERA, Assumptions, Chip, ModelSpec, chip,
                              chips_needed, decode_bytes, decode_time, model_spec)
from perwatt.roofline import known_chips as roofline_chips

PRECISION = checks.rule(checks.choice, PRECISIONS)


DRAFTS = checks.rule(checks.count, minimum=0, maximum=checks.MAX_GAMMA)
ACCEPTED = checks.rule(checks.number, minimum=1.0, maximum=checks.MAX_GAMMA + 1)
#: A sweep takes one draft length, one yield per pass and one of each length for all its points.
ONE_DRAFTS = checks.rule(checks.integer, minimum=0, maximum=checks.MAX_GAMMA)
ONE_ACCEPTED = checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_GAMMA + 1)
ONE_LENGTH = checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS)
#: How :func:`sweep` and :func:`frontier` (which reads the sweep) check what they are given.
SWEPT = dict(model=checks.TEXT, accelerator=checks.TEXT, precision=PRECISION, isl=OPTIONAL_LENGTH, osl=OPTIONAL_LENGTH,
             assumptions=ASSUMED, drafts=ONE_DRAFTS, tokens_per_pass=ONE_ACCEPTED)


@checks.validated(spec=SPEC, device=DEVICE, isl=checks.LENGTH, chips=checks.CHIPS, ep=checks.CHIPS, dp=checks.flags,
                  assumptions=ASSUMED)
def prefill_per_prompt(spec: ModelSpec, device: Chip, isl, chips, ep=1, dp=False, assumptions: Assumptions = DEFAULTS):
    """Seconds of an instance's time per prompt prefilled: under data-parallel attention each chip
    takes its own prompt, so a pass prefills ``chips`` prompts at once."""
    together = np.where(np.asarray(dp, dtype=bool), np.asarray(chips, dtype=float), 1.0)
    passed = parallel.pass_time.unchecked(spec, device, together, 0.0, chips, ep, dp, isl, "prefill", assumptions)
    return passed["total"] / together


@checks.validated(spec=SPEC, device=DEVICE, batch=checks.BATCH, context=checks.CONTEXT, chips=checks.CHIPS, ep=checks.CHIPS,
                  dp=checks.flags, drafts=DRAFTS, assumptions=ASSUMED)
def decode_pass(spec: ModelSpec, device: Chip, batch, context, chips, ep=1, dp=False, drafts=0,
                assumptions: Assumptions = DEFAULTS):
    """Seconds per decode pass: the target verifies ``drafts + 1`` tokens per sequence, after
    ``drafts`` sequential draft steps, each priced as one more layer (an MTP module is one layer)."""
    drafts = np.asarray(drafts, dtype=float)
    verify = parallel.pass_time.unchecked(spec, device, batch, context, chips, ep, dp, drafts + 1, "decode",
                                          assumptions)["total"]
    if not drafts.any():  # no drafting anywhere: skip pricing a draft step nobody takes
        return verify
    one = parallel.pass_time.unchecked(spec, device, batch, context, chips, ep, dp, 1, "decode", assumptions)["total"]
    return verify + drafts * one / spec.layers


@checks.validated(spec=SPEC, device=DEVICE, batch=checks.BATCH, isl=checks.LENGTH, osl=checks.LENGTH,
                  assumptions=ASSUMED, chips=checks.rule(checks.optional, checks.CHIPS), ep=checks.CHIPS,
                  dp_attention=checks.flags, drafts=DRAFTS, tokens_per_pass=ACCEPTED)
def serve(spec: ModelSpec, device: Chip, batch, isl, osl, assumptions: Assumptions = DEFAULTS, chips=None, ep=1,
          dp_attention=False, drafts=0, tokens_per_pass=1.0) -> dict:
    """One operating point of a single pool that prefills and decodes (arrays broadcast).

    ``batch`` sequences are in flight on an instance of ``chips`` chips (by default the fewest that
    hold the model and the caches, tensor parallel) laid out as in :mod:`perwatt.parallel`. Each
    decode pass emits ``tokens_per_pass`` tokens per sequence (more than 1 when ``drafts`` drafted
    tokens are verified). While the batch decodes, the pool also prefills the prompts that replace
    finished requests: ``batch`` prompts per ``osl`` tokens, which stretch every token's time, as
    InferenceX's TPOT includes. Returns a dict of arrays: chips, TTFT (s), TPOT (s), tokens/s per
    user (1 ÷ TPOT), output and total tokens/s per chip, end-to-end latency (s), joules per output
    token at the chip's rated power, and ``fits`` (weights and caches fit in memory).
    """
    batch, isl, osl = (np.asarray(v, dtype=float) for v in (batch, isl, osl))
    context = isl + osl / 2
    if chips is None:
        chips = chips_needed(spec, device, batch, isl + osl, assumptions)
    chips, dp_attention = np.asarray(chips, dtype=float), np.asarray(dp_attention, dtype=bool)
    memory = parallel.memory_per_chip.unchecked(spec, chips, ep, dp_attention, batch, isl + osl, assumptions)
    fits = memory <= device.hbm_bytes * assumptions.usable_hbm_fraction
    t_prefill = prefill_per_prompt.unchecked(spec, device, isl, chips, ep, dp_attention, assumptions)
    t_pass = decode_pass.unchecked(spec, device, batch, context, chips, ep, dp_attention, drafts, assumptions)
    accepted = np.asarray(tokens_per_pass, dtype=float)
    tpot = (t_pass + batch * t_prefill * accepted / osl) / accepted
    # A prompt waits for its whole prefill pass; under data-parallel attention that pass prefills
    # one prompt per chip, so the per-prompt share above understates the wait by the chips.
    ttft = t_prefill * np.where(dp_attention, chips, 1.0)
    e2e = ttft + osl * tpot
    output_per_chip = batch * osl / e2e / chips
    shape = np.broadcast(batch, chips, tpot).shape
    return {
        "chips": np.broadcast_to(chips, shape).astype(float),
        "ttft_s": np.broadcast_to(ttft, shape).astype(float),
        "tpot_s": tpot,
        "tokens_per_s_per_user": 1.0 / tpot,
        "output_tokens_per_s_per_chip": output_per_chip,
        "total_tokens_per_s_per_chip": output_per_chip * (isl + osl) / osl,
        "e2e_latency_s": e2e,
        "joules_per_output_token": device.power_w / output_per_chip,
        "fits": np.broadcast_to(fits, shape),
    }


@checks.validated(spec=SPEC, device=DEVICE, concurrency=checks.BATCH, isl=checks.LENGTH, osl=checks.LENGTH,
                  prefill_chips=checks.CHIPS, decode_chips=checks.CHIPS, prefill_workers=checks.CHIPS,
                  decode_workers=checks.CHIPS, prefill_ep=checks.CHIPS, decode_ep=checks.CHIPS,
                  prefill_dp_attention=checks.flags, decode_dp_attention=checks.flags, drafts=DRAFTS,
                  tokens_per_pass=ACCEPTED, assumptions=ASSUMED)
def serve_disaggregated(spec: ModelSpec, device: Chip, concurrency, isl, osl, prefill_chips, decode_chips,
                        prefill_workers=1, decode_workers=1, prefill_ep=1, decode_ep=1, prefill_dp_attention=False,
                        decode_dp_attention=False, drafts=0, tokens_per_pass=1.0,
                        assumptions: Assumptions = DEFAULTS) -> dict:
    """Separate prefill and decode pools, counted as InferenceX counts them (arrays broadcast).

    ``prefill_workers`` instances of ``prefill_chips`` chips prefill; ``decode_workers`` instances
    of ``decode_chips`` chips decode, ``concurrency`` requests shared among them. Requests flow at
    the slower of the two pools' rates. Returns tokens/s per user, TTFT and end-to-end latency (s),
    input tokens/s per prefill chip, output tokens/s per decode chip and total tokens/s per chip of
    both pools, and which pool limits (``prefill_bound``).
    """
    concurrency, isl, osl = (np.asarray(v, dtype=float) for v in (concurrency, isl, osl))
    n_prefill = np.asarray(prefill_chips, dtype=float) * prefill_workers
    n_decode = np.asarray(decode_chips, dtype=float) * decode_workers
    for pool, (chips, ep) in {"prefill": (prefill_chips, prefill_ep), "decode": (decode_chips, decode_ep)}.items():
        if np.any(np.fmod(np.asarray(chips, dtype=float), np.asarray(ep, dtype=float)) != 0):
            raise ValueError(f"{pool}_ep must divide {pool}_chips in every layout")
    t_prefill = prefill_per_prompt.unchecked(spec, device, isl, prefill_chips, prefill_ep, prefill_dp_attention,
                                             assumptions)
    per_worker = np.maximum(1.0, np.ceil(concurrency / decode_workers))
    t_pass = decode_pass.unchecked(spec, device, per_worker, isl + osl / 2, decode_chips, decode_ep, decode_dp_attention,
                          drafts, assumptions)
    tpot = t_pass / np.asarray(tokens_per_pass, dtype=float)
    flowing = concurrency / (t_prefill + osl * tpot)
    capacity = np.asarray(prefill_workers, dtype=float) / t_prefill
    rate = np.minimum(flowing, capacity)
    e2e = concurrency / rate
    return {
        "tokens_per_s_per_user": 1.0 / tpot,
        "tpot_s": tpot,
        "ttft_s": e2e - osl * tpot,
        "e2e_latency_s": e2e,
        "input_tokens_per_s_per_prefill_chip": rate * isl / n_prefill,
        "output_tokens_per_s_per_decode_chip": rate * osl / n_decode,
        "total_tokens_per_s_per_chip": rate * (isl + osl) / (n_prefill + n_decode),
        "prefill_bound": flowing > capacity,
    }


#: Sequences per instance swept by :func:`frontier`.
BATCHES = tuple(2 ** i for i in range(15))


def _layout_rows(spec: ModelSpec, device: Chip) -> list[tuple[int, int, bool]]:
    limit = device.scale_up_domain * (4 if np.isfinite(device.scale_out_bytes_s) else 1)
    sizes = sorted({2 ** i for i in range(20) if 2 ** i <= limit} | {device.scale_up_domain})
    return [(c, e, d) for c in sizes for e in sorted({1, c}) for d in ((False, True) if c > 1 else (False,))
            if spec.is_moe or e == 1]


@checks.validated(spec=SPEC, device=DEVICE)
def layouts(spec: ModelSpec, device: Chip) -> pd.DataFrame:
    """Candidate layouts for one chip: powers of two up to four scale-up domains (only the domain
    where the scale-out bandwidth is unpublished), the domain's own size, and for each, experts
    split or not and attention tensor- or data-parallel. One row per layout: chips, ep, dp_attention."""
    return pd.DataFrame(_layout_rows(spec, device), columns=["chips", "ep", "dp_attention"])


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


def _swept(spec: ModelSpec, device: Chip, isl: float, osl: float, assumptions: Assumptions, batches, drafts: int,
           tokens_per_pass: float) -> dict[str, np.ndarray]:
    """:func:`sweep_chip`'s columns as arrays: every layout (in :func:`layouts`' order) at every
    batch (in the order given), the points that fit."""
    layout = np.array(_layout_rows(spec, device), dtype=object).reshape(-1, 3)
    batch = batch_list(batches).astype(int)
    # Layout by layout, each at every batch (a cross join's order), as plain arrays: a sweep is
    # asked for hundreds of times a build, and frames per step cost more than the model.
    grid = {"chips": np.repeat(layout[:, 0].astype(np.int64), len(batch)),
            "ep": np.repeat(layout[:, 1].astype(np.int64), len(batch)),
            "dp_attention": np.repeat(layout[:, 2].astype(bool), len(batch)),
            "batch": np.tile(batch, len(layout))}
    point = serve(spec, device, grid["batch"].astype(float), isl, osl, assumptions, grid["chips"].astype(float),
                  grid["ep"].astype(float), grid["dp_attention"], drafts, tokens_per_pass)
    fits = np.asarray(point.pop("fits"))
    columns = {**grid, **{k: np.asarray(v) for k, v in point.items() if k != "chips"}}
    return {k: v[fits] for k, v in columns.items()}


@checks.validated(spec=SPEC, device=DEVICE, isl=ONE_LENGTH, osl=ONE_LENGTH, assumptions=ASSUMED,
                  drafts=ONE_DRAFTS, tokens_per_pass=ONE_ACCEPTED)
def sweep_chip(spec: ModelSpec, device: Chip, isl: float, osl: float, assumptions: Assumptions = DEFAULTS,
               batches=BATCHES, drafts: int = 0, tokens_per_pass: float = 1.0) -> pd.DataFrame:
    """:func:`sweep` for a model and chip given as records (a reader's or a solved chip, which
    no name in data/ describes): every layout at every batch that fits in memory, with the layout,
    the batch and the :func:`serve` results; empty if nothing fits. No ``efficient`` column."""
    return pd.DataFrame(_swept(spec, device, isl, osl, assumptions, batches, drafts, tokens_per_pass))


def _sweep(model: str, accelerator: str, precision: str, isl: float | None, osl: float | None,
           assumptions: Assumptions, batches, drafts: int, tokens_per_pass: float) -> dict[str, np.ndarray]:
    """:func:`sweep`'s columns as arrays."""
    drawn = catalog.lengths()  # the table's workload at its mean drawn lengths, as InferenceX runs it
    isl = drawn.isl_mean if isl is None else isl
    osl = drawn.osl_mean if osl is None else osl
    out = _swept(model_spec(model).with_precision(precision), chip(accelerator), isl, osl, assumptions, batches,
                 drafts, tokens_per_pass)
    if not len(out["batch"]):
        raise ValueError(f"model {model!r} does not fit on {accelerator!r} in any layout the sweep tries at isl "
                         f"{isl:,.0f} and osl {osl:,.0f} tokens (batches {batches!r}): give shorter lengths or smaller "
                         "batches")
    out["efficient"] = pareto_efficient(out["output_tokens_per_s_per_chip"], out["tokens_per_s_per_user"])
    return out


@checks.validated(**SWEPT)
def sweep(model: str, accelerator: str, precision: str = "as_released", isl: float | None = None,
          osl: float | None = None, assumptions: Assumptions = DEFAULTS, batches=BATCHES, drafts: int = 0,
          tokens_per_pass: float = 1.0) -> pd.DataFrame:
    """Every layout (:func:`layouts`) at every batch that fits in memory: one row per pair, with
    the layout (chips, ep, dp_attention), the batch, the :func:`serve` results, and ``efficient``,
    true where no other row beats it on both output tokens/s per chip and tokens/s per user.
    Lengths default to the table workload's mean drawn lengths."""
    return pd.DataFrame(_sweep(model, accelerator, precision, isl, osl, assumptions, batches, drafts, tokens_per_pass))


@checks.validated(**SWEPT)
def frontier(model: str, accelerator: str, precision: str = "as_released", isl: float | None = None,
             osl: float | None = None, assumptions: Assumptions = DEFAULTS, batches=BATCHES, drafts: int = 0,
             tokens_per_pass: float = 1.0) -> pd.DataFrame:
    """The best the model allows: the rows of :func:`sweep` that no other layout and batch beats
    on both output tokens/s per chip and tokens/s per user, fastest per user first. Each row is
    the configuration (layout and batch) that reaches its operating point."""
    return pd.DataFrame(_frontier(model, accelerator, precision, isl, osl, assumptions, batches, drafts,
                                  tokens_per_pass))


def _frontier(model: str, accelerator: str, precision: str, isl: float | None, osl: float | None,
              assumptions: Assumptions, batches, drafts: int, tokens_per_pass: float) -> dict[str, np.ndarray]:
    """:func:`frontier`'s columns as arrays."""
    out = _sweep(model, accelerator, precision, isl, osl, assumptions, batches, drafts, tokens_per_pass)
    per_chip, per_user = out["output_tokens_per_s_per_chip"], out["tokens_per_s_per_user"]
    seen: set = set()
    # One row per operating point (the first, as pandas' drop_duplicates keeps), then the fastest
    # first: two efficient points at one speed per user would be one point, so there are no ties.
    kept = [i for i in np.flatnonzero(out["efficient"])
            if not ((per_chip[i], per_user[i]) in seen or seen.add((per_chip[i], per_user[i])))]
    kept = np.asarray(kept, dtype=np.intp)[np.argsort(-per_user[kept], kind="stable")]
    return {name: values[kept] for name, values in out.items()}


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
