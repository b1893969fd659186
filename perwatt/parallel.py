"""One forward pass on a parallel instance: a roofline per operator, a fixed cost per layer, and the
collectives that join the chips.

An instance is ``chips`` chips serving ``sequences`` sequences together. Its layout has two choices:

* **Attention** either splits its heads across the chips (tensor parallel, ``dp_attention=False``)
  or gives each chip its own sequences (``dp_attention=True``, data-parallel attention). Under
  tensor parallelism an MLA latent cache is not split: every head reads all of it, so each chip
  reads every sequence's cache. Under data-parallel attention each chip holds the attention
  weights whole and reads only its own sequences' caches, and the busiest chip has
  ``ceil(sequences / chips)`` of them.
* **Routed experts** are split into ``ep`` expert-parallel groups of ``chips / ep`` chips, each
  group holding ``E / ep`` experts and splitting each of them across its chips. A pass waits for
  the busiest group: under uniform routing the number of its experts touched is a binomial
  count, and the model takes the expected largest of ``ep`` of them (a normal approximation with
  Blom's plotting position), times ``routing_skew``, capped at what the group holds.

Every other shared weight (embeddings, dense layers, shared experts) is split across the chips.

Each operator (attention projections, attention over the cache, the other shared weights, the
routed experts) takes the longer of its compute and memory times (``_roof``); the operators
run one after another, so their times add. Each layer also costs ``layer_latency_us``, and each
collective ``collective_latency_us`` plus its bytes over the link (scale-up within
``scale_up_domain`` chips, scale-out beyond). Tensor parallelism all-reduces activations twice a
layer; data-parallel attention dispatches tokens to their experts and combines them back in each
MoE layer (FP8 out, BF16 back).

Units: bytes, FLOPs and seconds. Arguments broadcast over NumPy arrays, layouts included, so one
call evaluates a whole sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from perwatt import checks
from perwatt.specs import DEFAULTS, Assumptions, Chip, ModelSpec

SPEC, DEVICE, ASSUMED = checks.kind(ModelSpec), checks.kind(Chip), checks.kind(Assumptions)
#: Bytes per activation element exchanged by tensor-parallel all-reduces (BF16).
ACTIVATION_BYTES = 2.0
#: Bytes per element a token carries to its experts (FP8) and back from them (BF16).
DISPATCH_BYTES, COMBINE_BYTES = 1.0, 2.0
OPERATORS = ("attention_weights", "attention", "shared", "experts")
PHASES = ("decode", "prefill")


@dataclass(frozen=True)
class Layout:
    """How one instance spreads a model over its chips (see the module docstring)."""

    chips: int = 1
    ep: int = 1
    dp_attention: bool = False

    def __post_init__(self) -> None:
        checks.integer("chips", self.chips, maximum=checks.MAX_CHIPS)
        checks.integer("ep", self.ep, maximum=checks.MAX_CHIPS)
        checks.flag("dp_attention", self.dp_attention)
        if self.chips % self.ep:
            raise ValueError(f"ep must divide chips: {self.ep} expert groups cannot split {self.chips} chips")

    @property
    def label(self) -> str:
        attention = "DP attention" if self.dp_attention else "TP attention"
        return f"{self.chips} chips, EP{self.ep}, {attention}"


LAYOUT = {"chips": checks.CHIPS, "ep": checks.CHIPS, "dp_attention": checks.flags}


def _layout_arrays(chips, ep, dp_attention):
    """The layout as arrays of one shape; ``chips`` and ``ep`` are already checked whole numbers that
    broadcast together (see :data:`LAYOUT`). Broadcast here, because not every formula reads every
    part: weights per chip do not depend on ``ep``, yet three values of ``ep`` are three layouts."""
    chips, ep, dp = np.broadcast_arrays(np.asarray(chips, dtype=float), np.asarray(ep, dtype=float),
                                        np.asarray(dp_attention, dtype=bool))
    if np.any(np.fmod(chips, ep) != 0):
        raise ValueError("ep must divide chips in every layout")
    return chips, ep, dp


def expected_max_z(groups) -> np.ndarray:
    """The expected largest of ``groups`` standard normal draws, by Blom's approximation
    Φ⁻¹((n − 0.375) / (n + 0.25)); 0 for one group."""
    return _expected_max_z(checks.array("groups", groups, minimum=1, maximum=checks.MAX_CHIPS, whole=True))


def _expected_max_z(n: np.ndarray) -> np.ndarray:
    return np.where(n > 1, ndtri((n - 0.375) / (n + 0.25)), 0.0)


@checks.validated(spec=SPEC, tokens=checks.CONTEXT, ep=checks.CHIPS,
                  skew=checks.rule(checks.scalar, minimum=1.0, maximum=100.0))
def busiest_group_experts(spec: ModelSpec, tokens, ep, skew: float = 1.0) -> np.ndarray:
    """Distinct routed experts the busiest of ``ep`` expert groups reads, per MoE layer, when
    ``tokens`` tokens each pick ``active_experts`` of ``routed_experts`` uniformly."""
    tokens = np.asarray(tokens, dtype=float)
    ep = np.asarray(ep, dtype=float)
    if not spec.is_moe:
        return np.zeros(np.broadcast(tokens, ep).shape)
    held = spec.routed_experts / ep
    p = 1.0 - (1.0 - spec.active_experts / spec.routed_experts) ** tokens
    mean = held * p
    spread = np.sqrt(held * p * (1.0 - p))
    return np.minimum(held, (mean + _expected_max_z(ep) * spread) * skew)  # ep: whole numbers ≥ 1, checked


def _roof(flops, nbytes, peak_flops_s: float, bandwidth_bytes_s: float, assumptions: Assumptions):
    """Seconds for one operator: the longer of its compute and memory times, plus ``1 − overlap``
    of the shorter."""
    compute = flops / (peak_flops_s * assumptions.compute_efficiency)
    memory = nbytes / (bandwidth_bytes_s * assumptions.bandwidth_efficiency)
    return np.maximum(compute, memory) + (1.0 - assumptions.overlap) * np.minimum(compute, memory)


def _kv_layer_bytes(spec: ModelSpec, context, kv_bits: float):
    """KV-cache bytes one sequence holds per layer at ``context`` tokens."""
    context = np.asarray(context, dtype=float)
    per = kv_bits / 8
    if spec.attention == "mla":
        return (spec.kv_lora_rank + spec.qk_rope_head_dim) * per * context
    heads = spec.kv_heads if spec.attention == "gqa" else spec.query_heads
    kept = (1 - spec.window_layer_fraction) * context + spec.window_layer_fraction * np.minimum(
        context, spec.window_tokens if spec.window_layer_fraction else context)
    return 2 * heads * spec.head_dim * per * kept


def _attention_flops(spec: ModelSpec, context, phase: str):
    """Attention FLOPs per layer for one token attending to ``context`` tokens. Decode runs MLA
    absorbed (scores and values over the latent); prefill runs it expanded, with per-head keys
    and values, as prefill kernels do."""
    context = np.asarray(context, dtype=float)
    if spec.attention == "mla":
        width = (2 * spec.kv_lora_rank + spec.qk_rope_head_dim if phase == "decode"
                 else 2 * spec.head_dim + spec.qk_rope_head_dim)
        return 2 * spec.query_heads * width * context
    seen = (1 - spec.window_layer_fraction) * context + spec.window_layer_fraction * np.minimum(
        context, spec.window_tokens if spec.window_layer_fraction else context)
    return 4 * spec.query_heads * spec.head_dim * seen


def _kv_split(spec: ModelSpec, chips, dp):
    """How many ways tensor-parallel attention splits one sequence's cache."""
    if spec.attention == "mla":
        return np.ones_like(chips)
    heads = spec.kv_heads if spec.attention == "gqa" else spec.query_heads
    return np.where(dp, 1.0, np.minimum(chips, heads))


@checks.validated(spec=SPEC, **LAYOUT)
def weight_bytes_per_chip(spec: ModelSpec, chips, ep, dp_attention):
    """Bytes of weights each chip holds under a layout."""
    chips, ep, dp = _layout_arrays(chips, ep, dp_attention)
    other = spec.other_weight_bits / 8
    attention = spec.attention_params * other / np.where(dp, 1.0, chips)
    shared = (spec.shared_params - spec.attention_params) * other / chips
    experts = spec.per_expert_params * spec.routed_experts * spec.expert_weight_bits / 8 / chips
    return attention + shared + experts


@checks.validated(spec=SPEC, sequences=checks.BATCH, context=checks.CONTEXT, assumptions=ASSUMED, **LAYOUT)
def memory_per_chip(spec: ModelSpec, chips, ep, dp_attention, sequences, context,
                    assumptions: Assumptions = DEFAULTS):
    """Bytes each chip needs: its weights plus the caches it holds at ``context`` tokens."""
    chips, ep, dp = _layout_arrays(chips, ep, dp_attention)
    cache = spec.layers * _kv_layer_bytes(spec, context, assumptions.kv_bits)
    held = np.where(dp, np.ceil(sequences / chips), sequences / _kv_split(spec, chips, dp))
    return weight_bytes_per_chip.unchecked(spec, chips, ep, dp) + held * cache


@checks.validated(device=DEVICE, chips=checks.CHIPS)
def link_bytes_s(device: Chip, chips) -> np.ndarray:
    """Per-chip collective bandwidth: scale-up inside the domain, scale-out beyond it (NaN where
    the scale-out bandwidth is unpublished)."""
    chips = np.asarray(chips, dtype=float)
    return np.where(chips <= device.scale_up_domain, device.scale_up_bytes_s, device.scale_out_bytes_s)


def _operators(spec: ModelSpec, b, context, chips, ep, dp, q, phase: str, assumptions: Assumptions):
    """Per operator: (FLOPs per chip per layer, bytes per chip per layer, bits of its matmul format, layers it runs in)."""
    tokens = b * q
    mine = np.where(dp, np.ceil(b / chips), b)  # sequences whose attention one chip computes
    token_share = np.where(dp, mine * q, tokens / chips)
    layers, moe_layers = spec.layers, spec.moe_layers if spec.is_moe else 0
    other_format = max(spec.other_weight_bits, 8.0)
    other_bytes = spec.other_weight_bits / 8
    attended = context + (q / 2 if phase == "prefill" else 0.0)
    kv_read = _kv_layer_bytes(spec, context + (q if phase == "prefill" else 0.0), assumptions.kv_bits)
    cache_share = np.where(dp, mine, b / _kv_split(spec, chips, dp))
    shared_params = spec.shared_params - spec.attention_params
    ops = {
        "attention_weights": (2 * spec.attention_params / layers * token_share,
                              spec.attention_params / layers * other_bytes / np.where(dp, 1.0, chips), other_format, layers),
        "attention": (_attention_flops(spec, attended, phase) * token_share, cache_share * kv_read,
                      16.0, layers),
        "shared": (2 * shared_params / layers * tokens / chips, shared_params / layers * other_bytes / chips,
                   other_format, layers),
    }
    if moe_layers:
        per_expert = spec.per_expert_params / moe_layers
        touched = busiest_group_experts.unchecked(spec, tokens, ep, assumptions.routing_skew)
        ops["experts"] = (2 * per_expert * tokens * spec.active_experts / chips,
                          touched * per_expert * spec.expert_weight_bits / 8 / (chips / ep),
                          spec.expert_compute_bits, moe_layers)
    else:
        ops["experts"] = (0.0, 0.0, other_format, 0)
    return ops, tokens, mine


def _collectives(spec: ModelSpec, chips, ep, dp, tokens, mine, q):
    """Bytes one chip sends over its links in a pass, and how many collectives it waits for.

    Tensor parallelism all-reduces the activations twice a layer (a ring moves 2 (n − 1) / n of
    them per chip); data-parallel attention with split experts instead dispatches each token to its
    experts and combines it back, once each per MoE layer."""
    layers, moe_layers = spec.layers, spec.moe_layers if spec.is_moe else 0
    hidden = spec.hidden_size
    all_reduce = 2 * (chips - 1) / chips * tokens * hidden * ACTIVATION_BYTES
    exchange = mine * q * spec.active_experts * hidden * (DISPATCH_BYTES + COMBINE_BYTES) * (ep - 1) / ep
    expert_exchange = dp & (ep > 1)
    nbytes = np.where(expert_exchange, moe_layers * exchange, layers * 2 * all_reduce)
    count = np.where(expert_exchange, moe_layers * 2.0, layers * 2.0)
    alone = chips <= 1
    return np.where(alone, 0.0, nbytes), np.where(alone, 0.0, count)


@checks.validated(spec=SPEC, device=DEVICE, sequences=checks.BATCH, context=checks.CONTEXT,
                  tokens_per_sequence=checks.rule(checks.tokens, minimum=1.0),
                  phase=checks.rule(checks.choice, PHASES), assumptions=ASSUMED, **LAYOUT)
def pass_time(spec: ModelSpec, device: Chip, sequences, context, chips=1, ep=1, dp_attention=False,
              tokens_per_sequence=1, phase: str = "decode", assumptions: Assumptions = DEFAULTS) -> dict:
    """Seconds for one forward pass, by part: a dict of arrays with one entry per operator in
    :data:`OPERATORS`, ``"fixed"`` (per-layer latency), ``"collectives"`` and ``"total"``.

    Decode: each of ``sequences`` sequences adds ``tokens_per_sequence`` tokens (more than one
    when a pass verifies drafted tokens) attending to ``context`` cached tokens. Prefill: each
    sequence is a prompt of ``tokens_per_sequence`` tokens, attending causally (mean context half
    the prompt, plus ``context`` tokens cached before it) and writing its cache.
    """
    chips, ep, dp = _layout_arrays(chips, ep, dp_attention)
    b = np.asarray(sequences, dtype=float)
    q = np.asarray(tokens_per_sequence, dtype=float)
    context = np.asarray(context, dtype=float)
    ops, tokens, mine = _operators(spec, b, context, chips, ep, dp, q, phase, assumptions)
    bw = device.bandwidth_bytes_s
    timed = {name: count * _roof(flops, nbytes, device.peak_for_bits(bits), bw, assumptions)
             for name, (flops, nbytes, bits, count) in ops.items()}
    layers = spec.layers

    link = link_bytes_s.unchecked(device, chips) * assumptions.link_efficiency
    exchanged, how_many = _collectives(spec, chips, ep, dp, tokens, mine, q)
    with np.errstate(invalid="ignore"):  # no collective (0 bytes) over an unpublished link (NaN) costs nothing
        over_link = np.where(exchanged > 0, exchanged / link, 0.0)
    collectives = how_many * assumptions.collective_latency_us * 1e-6 + over_link
    if np.any(np.isnan(collectives)):
        raise ValueError(f"chips: {device.label}'s bandwidth beyond its {device.scale_up_domain}-chip domain "
                         "is not published, so an instance cannot span more chips than that")

    parts = {**timed, "fixed": np.asarray(layers * assumptions.layer_latency_us * 1e-6), "collectives": collectives}
    # Views, not copies: at a million configurations a copy of each part would cost more than the arithmetic.
    # A part already of the shape is its own (fresh) array, made read-only as the views are.
    shape = np.broadcast(*parts.values()).shape
    parts = {k: _read_only(v) if np.shape(v) == shape and np.asarray(v).dtype == float
             else np.broadcast_to(np.asarray(v, dtype=float), shape) for k, v in parts.items()}
    parts["total"] = sum(parts.values())
    return parts


def _read_only(values) -> np.ndarray:
    values = np.asarray(values)
    values.flags.writeable = False
    return values


@checks.validated(spec=SPEC, device=DEVICE, sequences=checks.BATCH, context=checks.CONTEXT,
                  tokens_per_sequence=checks.rule(checks.tokens, minimum=1.0),
                  phase=checks.rule(checks.choice, PHASES), assumptions=ASSUMED, **LAYOUT)
def pass_work(spec: ModelSpec, device: Chip, sequences, context, chips=1, ep=1, dp_attention=False,
              tokens_per_sequence=1, phase: str = "decode", assumptions: Assumptions = DEFAULTS) -> dict:
    """FLOPs and HBM bytes one chip does in the pass :func:`pass_time` times (the busiest chip's,
    where the chips' shares differ): a dict with ``"flops"`` and ``"bytes"``."""
    chips, ep, dp = _layout_arrays(chips, ep, dp_attention)
    ops, _, _ = _operators(spec, np.asarray(sequences, dtype=float), np.asarray(context, dtype=float),
                           chips, ep, dp, np.asarray(tokens_per_sequence, dtype=float), phase, assumptions)
    return {"flops": sum(count * np.asarray(f) for f, _, _, count in ops.values()),
            "bytes": sum(count * np.asarray(n) for _, n, _, count in ops.values())}


@checks.validated(spec=SPEC, sequences=checks.BATCH, context=checks.CONTEXT,
                  tokens_per_sequence=checks.rule(checks.tokens, minimum=1.0),
                  phase=checks.rule(checks.choice, PHASES), assumptions=ASSUMED, **LAYOUT)
def pass_terms(spec: ModelSpec, sequences, context, chips=1, ep=1, dp_attention=False, tokens_per_sequence=1,
               phase: str = "decode", assumptions: Assumptions = DEFAULTS) -> dict:
    """What :func:`pass_time` charges a chip for, before any chip's speed enters: per operator of
    :data:`OPERATORS`, its FLOPs and HBM bytes summed over the layers it runs in (``"<op>_flops"``,
    ``"<op>_bytes"``) and the bits of its matmul format (``"<op>_bits"``, a number); the bytes sent
    over links (``"link_bytes"``) and the collectives waited for (``"collectives"``). A chip's pass
    time is then Σ roof(FLOPs ÷ η_c F(bits), bytes ÷ η_m B) + layers λ + collectives α + link bytes ÷
    link bandwidth, which :mod:`perwatt.crosschip` evaluates for chips the book has no row for."""
    chips, ep, dp = _layout_arrays(chips, ep, dp_attention)
    b, q = np.asarray(sequences, dtype=float), np.asarray(tokens_per_sequence, dtype=float)
    ops, tokens, mine = _operators(spec, b, np.asarray(context, dtype=float), chips, ep, dp, q, phase, assumptions)
    out: dict = {}
    for name, (flops, nbytes, bits, count) in ops.items():
        out[f"{name}_flops"] = count * np.asarray(flops, dtype=float)
        out[f"{name}_bytes"] = count * np.asarray(nbytes, dtype=float)
        out[f"{name}_bits"] = float(bits)
    out["link_bytes"], out["collectives"] = _collectives(spec, chips, ep, dp, tokens, mine, q)
    return out
