"""A roofline model of LLM serving: where the time and the watts go in prefill and decode.

Units: parameters and tokens are counts; bytes are bytes; FLOPs are floating-point
operations; times are seconds; bandwidth arguments in TB/s and throughput in TFLOP/s are
converted to bytes/s and FLOP/s inside. Functions broadcast over NumPy arrays (batch,
context, efficiencies), so one call evaluates many configurations.

The model, in brief:

* **Weights read per step.** A mixture-of-experts layer reads only the experts its tokens
  are routed to. With ``E`` routed experts, ``k`` active per token and routing assumed
  uniform, a step over ``n`` tokens touches ``E·(1 − (1 − k/E)^n)`` experts per layer.
  The weights split into a shared part (attention, embeddings, dense and shared-expert
  layers) and per-expert parts, solved from the total and active parameter counts.
* **KV cache read per step.** GQA stores keys and values per KV head; MLA stores one
  compressed latent plus a rotary part per token; sliding-window layers keep at most the
  window.
* **FLOPs.** 2 per active parameter per token, plus attention over the context.
* **Time.** Each phase takes ``max`` (or, with ``overlap < 1``, part of the sum) of its
  compute time at ``compute_efficiency`` × peak and its memory time at
  ``bandwidth_efficiency`` × bandwidth, on an instance of as many chips as it takes to
  hold the weights and the KV cache (ideal scaling across them).
The serving model built on these (batches, frontiers, validation) is :mod:`perwatt.serving`.

Every simplification is a parameter of :class:`Assumptions`, with its default documented.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import catalog, checks, parallel
from perwatt.specs import (DEFAULTS, GIGA, PRECISION_LABELS, PRECISIONS, TERA, Assumptions, Chip,  # noqa: F401
                           ModelSpec, chip, known_chips, model_spec)

#: How each argument that names a record or a step's size is checked (see :mod:`perwatt.checks`).
SPEC, DEVICE, ASSUMED = checks.kind(ModelSpec), checks.kind(Chip), checks.kind(Assumptions)
PER_SEQUENCE = checks.rule(checks.count, minimum=1, maximum=checks.MAX_GAMMA + 1)
OPTIONAL_LENGTH = checks.rule(checks.optional, checks.rule(checks.scalar, minimum=1.0, maximum=checks.MAX_TOKENS))


# --- Bytes and FLOPs -------------------------------------------------------------------

@checks.validated(spec=SPEC, tokens=checks.CONTEXT)
def experts_touched(spec: ModelSpec, tokens):
    """Expected distinct routed experts per layer that ``tokens`` tokens use (uniform routing)."""
    tokens = np.asarray(tokens, dtype=float)
    if not spec.is_moe:
        return np.full_like(tokens, float(spec.active_experts))
    e, k = spec.routed_experts, spec.active_experts
    return e * (1.0 - (1.0 - k / e) ** tokens)


@checks.validated(spec=SPEC, tokens=checks.CONTEXT)
def weight_bytes(spec: ModelSpec, tokens):
    """Bytes of weights read by one forward step over ``tokens`` tokens."""
    shared = spec.shared_params * spec.other_weight_bits / 8
    experts = spec.per_expert_params * experts_touched.unchecked(spec, tokens) * spec.expert_weight_bits / 8
    return shared + experts


@checks.validated(spec=SPEC)
def total_weight_bytes(spec: ModelSpec) -> float:
    """Bytes to hold every weight."""
    return float(spec.shared_params * spec.other_weight_bits / 8
                 + spec.per_expert_params * spec.routed_experts * spec.expert_weight_bits / 8)


@checks.validated(spec=SPEC, context=checks.CONTEXT, kv_bits=checks.KV_BITS)
def kv_bytes(spec: ModelSpec, context, kv_bits: float = DEFAULTS.kv_bits):
    """Bytes of KV cache one sequence holds (and one decode step reads) at ``context`` tokens."""
    context = np.asarray(context, dtype=float)
    per_element = kv_bits / 8
    if spec.attention == "mla":
        return spec.layers * (spec.kv_lora_rank + spec.qk_rope_head_dim) * per_element * context
    heads = spec.kv_heads if spec.attention == "gqa" else spec.query_heads
    windowed = spec.window_layer_fraction
    kept = (1 - windowed) * context
    if windowed:
        kept = kept + windowed * np.minimum(context, spec.window_tokens)
    return spec.layers * 2 * heads * spec.head_dim * per_element * kept


def _attention_flops_per_token(spec: ModelSpec, context):
    """Attention FLOPs for one new token attending to ``context`` cached tokens."""
    context = np.asarray(context, dtype=float)
    if spec.attention == "mla":
        # Absorbed MLA: scores over (latent + rotary), values over the latent.
        return spec.layers * 2 * spec.query_heads * (2 * spec.kv_lora_rank + spec.qk_rope_head_dim) * context
    windowed = spec.window_layer_fraction
    seen = (1 - windowed) * context + (windowed * np.minimum(context, spec.window_tokens) if windowed else 0)
    return spec.layers * 4 * spec.query_heads * spec.head_dim * seen


@checks.validated(spec=SPEC, batch=checks.BATCH, context=checks.CONTEXT, tokens_per_sequence=PER_SEQUENCE)
def decode_flops(spec: ModelSpec, batch, context, tokens_per_sequence=1):
    """FLOPs of one decode step: each of ``batch`` sequences adds ``tokens_per_sequence`` new tokens
    (more than one when a pass verifies drafted tokens), each attending to ``context`` tokens."""
    tokens = np.asarray(batch, dtype=float) * tokens_per_sequence
    return tokens * (2 * spec.active_params + _attention_flops_per_token(spec, context))


@checks.validated(spec=SPEC, batch=checks.BATCH, context=checks.CONTEXT, kv_bits=checks.KV_BITS,
                 tokens_per_sequence=PER_SEQUENCE)
def decode_bytes(spec: ModelSpec, batch, context, kv_bits: float = DEFAULTS.kv_bits, tokens_per_sequence=1):
    """Bytes one decode step reads: the weights its tokens touch, plus every sequence's KV cache once."""
    batch = np.asarray(batch, dtype=float)
    # Checked here already: the context and bits (as kv_bytes would check them); not the tokens,
    # which can pass the limit a batch and a draft length each keep.
    return weight_bytes(spec, batch * tokens_per_sequence) + batch * kv_bytes.unchecked(spec, context, kv_bits)


@checks.validated(spec=SPEC, prompt_tokens=checks.LENGTH)
def prefill_flops(spec: ModelSpec, prompt_tokens):
    """FLOPs to prefill one prompt: matmuls per token plus causal attention (mean context ISL/2)."""
    isl = np.asarray(prompt_tokens, dtype=float)
    return isl * (2 * spec.active_params + _attention_flops_per_token(spec, isl / 2))


@checks.validated(spec=SPEC, prompt_tokens=checks.LENGTH, kv_bits=checks.KV_BITS)
def prefill_bytes(spec: ModelSpec, prompt_tokens, kv_bits: float = DEFAULTS.kv_bits):
    """Bytes to prefill one prompt: the weights its tokens touch, plus writing its KV cache."""
    isl = np.asarray(prompt_tokens, dtype=float)
    return weight_bytes.unchecked(spec, isl) + kv_bytes.unchecked(spec, isl, kv_bits)  # checked as they would be


@checks.validated(flops=checks.WORK, nbytes=checks.rule(checks.positive, maximum=checks.MAX_WORK))
def arithmetic_intensity(flops, nbytes):
    """FLOPs per byte moved."""
    return np.asarray(flops, dtype=float) / np.asarray(nbytes, dtype=float)


@checks.validated(device=DEVICE, bits=checks.BITS)
def ridge_point(device: Chip, bits: float) -> float:
    """The intensity (FLOP/byte) above which a kernel is compute-bound on ``device``."""
    return device.peak_for_bits(bits) / device.bandwidth_bytes_s


# --- Time -------------------------------------------------------------------------------

@checks.validated(spec=SPEC, device=DEVICE, batch=checks.BATCH, context=checks.CONTEXT, assumptions=ASSUMED)
def chips_needed(spec: ModelSpec, device: Chip, batch, context, assumptions: Assumptions = DEFAULTS):
    """Chips one serving instance needs to hold the weights and ``batch`` sequences' KV cache."""
    need = total_weight_bytes(spec) + np.asarray(batch, dtype=float) * kv_bytes(spec, context, assumptions.kv_bits)
    chips = np.ceil(need / (device.hbm_bytes * assumptions.usable_hbm_fraction))
    if (chips > checks.MAX_CHIPS).any():
        raise ValueError(f"batch × context needs more than {checks.MAX_CHIPS:,} chips of {device.name} to hold "
                         "the KV cache: give a smaller batch or context")
    return chips


@checks.validated(flops=checks.WORK, nbytes=checks.WORK, device=DEVICE, bits=checks.BITS, chips=checks.CHIPS,
                 assumptions=ASSUMED)
def phase_time(flops, nbytes, device: Chip, bits: float, chips, assumptions: Assumptions = DEFAULTS):
    """Seconds for work of ``flops`` and ``nbytes`` on ``chips`` chips (ideal scaling)."""
    chips = np.asarray(chips, dtype=float)
    compute = flops / (device.peak_for_bits(bits) * assumptions.compute_efficiency * chips)
    memory = nbytes / (device.bandwidth_bytes_s * assumptions.bandwidth_efficiency * chips)
    longer, shorter = np.maximum(compute, memory), np.minimum(compute, memory)
    return longer + (1 - assumptions.overlap) * shorter


@checks.validated(spec=SPEC, device=DEVICE, prompt_tokens=checks.LENGTH, chips=checks.CHIPS, assumptions=ASSUMED)
def prefill_time(spec: ModelSpec, device: Chip, prompt_tokens, chips, assumptions: Assumptions = DEFAULTS, ep=1,
                 dp_attention=False):
    """Seconds to prefill one prompt of ``prompt_tokens`` tokens on ``chips`` chips (tensor parallel
    unless a layout is given; see :func:`perwatt.parallel.pass_time`)."""
    return parallel.pass_time(spec, device, 1, 0.0, chips, ep, dp_attention, prompt_tokens, "prefill",
                              assumptions)["total"]


@checks.validated(spec=SPEC, device=DEVICE, batch=checks.BATCH, context=checks.CONTEXT, chips=checks.CHIPS,
                 assumptions=ASSUMED, tokens_per_sequence=PER_SEQUENCE)
def decode_time(spec: ModelSpec, device: Chip, batch, context, chips, assumptions: Assumptions = DEFAULTS,
                tokens_per_sequence=1, ep=1, dp_attention=False):
    """Seconds for one decode (or verification) pass over ``batch`` sequences on ``chips`` chips
    (tensor parallel unless a layout is given; see :func:`perwatt.parallel.pass_time`)."""
    return parallel.pass_time(spec, device, batch, context, chips, ep, dp_attention, tokens_per_sequence,
                              "decode", assumptions)["total"]


#: How :func:`roofline_points` checks what it is given.
ROOFLINE = dict(model=checks.TEXT, accelerator=checks.TEXT, batch=checks.rule(checks.integer, maximum=checks.MAX_BATCH),
                isl=OPTIONAL_LENGTH, osl=OPTIONAL_LENGTH, precision=checks.rule(checks.choice, PRECISIONS))


@checks.validated(**ROOFLINE)
def roofline_points(model: str, accelerator: str, batch: int, isl: float | None = None, osl: float | None = None,
                    precision: str = "as_released") -> pd.DataFrame:
    """The roofline of one chip and the operating points of prefill and decode on it.

    Rows with ``series == "roof"`` trace attainable TFLOP/s against intensity; the two rows with
    ``series == "phase"`` place prefill (one prompt of ``isl`` tokens) and decode (a step at
    ``batch``, mean context) on it.
    """
    w = catalog.workload()
    isl = float(w["isl_tokens"]) if isl is None else isl
    osl = float(w["osl_tokens"]) if osl is None else osl
    return pd.DataFrame(_roofline_columns.unchecked(model, accelerator, batch, isl, osl, precision))


@checks.validated(**ROOFLINE)
def _roofline_columns(model: str, accelerator: str, batch: int, isl: float, osl: float,
                      precision: str = "as_released") -> dict:
    """:func:`roofline_points`' columns, for a caller that adds its own before making the frame (the
    lengths given)."""
    spec = model_spec(model).with_precision(precision)
    device = chip(accelerator)
    bits = spec.expert_weight_bits
    peak = device.peak_for_bits(bits)
    ridge = ridge_point.unchecked(device, bits)
    context = isl + osl / 2
    # The figure asks for hundreds of these, so the steps whose arguments are checked above run
    # unchecked; decode_bytes checks the context (isl + osl / 2), which nothing above bounds.
    flops = np.array([float(prefill_flops.unchecked(spec, isl)), float(decode_flops.unchecked(spec, batch, context))])
    nbytes = np.array([float(prefill_bytes.unchecked(spec, isl)), float(decode_bytes(spec, batch, context))])
    # The roof at three intensities, then prefill and decode on it.
    intensity = np.concatenate([[1.0, ridge, 1e5], arithmetic_intensity(flops, nbytes)])
    return {"series": ["roof"] * 3 + ["phase"] * 2, "point": ["low", "ridge", "high", "prefill", "decode"],
            "intensity": intensity, "tflops": np.minimum(peak, intensity * device.bandwidth_bytes_s) / TERA,
            "bound": np.where(intensity >= ridge, "compute-bound", "memory-bound"), "ridge": ridge}
