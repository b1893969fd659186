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

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from perwatt import catalog, data

TERA = 1e12
GIGA = 1e9
#: Weight formats a reader can choose; "as released" keeps each model's own.
PRECISIONS = ("as_released", "fp8", "bf16")
PRECISION_LABELS = {"as_released": "as released", "fp8": "FP8 everywhere", "bf16": "BF16 everywhere"}
_PRECISION_BITS = {"fp8": 8.0, "bf16": 16.0}


@dataclass(frozen=True)
class Assumptions:
    """The model's simplifications, as parameters.

    bandwidth_efficiency: achieved ÷ peak HBM bandwidth in decode (default 0.8, typical of
        well-tuned kernels streaming large weight matrices).
    compute_efficiency: achieved ÷ peak dense tensor FLOP/s (default 0.6).
    overlap: 1 means compute and memory traffic overlap perfectly (time = max of the two);
        0 means they run one after the other (time = sum).
    kv_bits: bits per cached key/value element (default 16, BF16).
    usable_hbm_fraction: share of HBM available for weights and KV cache (default 0.9).
    """

    bandwidth_efficiency: float = 0.8
    compute_efficiency: float = 0.6
    overlap: float = 1.0
    kv_bits: float = 16.0
    usable_hbm_fraction: float = 0.9

    def __post_init__(self) -> None:
        for name in ("bandwidth_efficiency", "compute_efficiency", "usable_hbm_fraction"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        if not 0 <= self.overlap <= 1:
            raise ValueError(f"overlap must be in [0, 1], got {self.overlap}")
        if self.kv_bits <= 0:
            raise ValueError(f"kv_bits must be positive, got {self.kv_bits}")


DEFAULTS = Assumptions()


@dataclass(frozen=True)
class ModelSpec:
    """One model's architecture, from data/model_specs.csv."""

    name: str
    total_params: float
    active_params: float
    layers: int
    attention: str
    query_heads: int
    kv_heads: float
    head_dim: float
    kv_lora_rank: float
    qk_rope_head_dim: float
    window_tokens: float
    window_layer_fraction: float
    routed_experts: int
    active_experts: int
    expert_weight_bits: float
    other_weight_bits: float

    @property
    def is_moe(self) -> bool:
        return self.routed_experts > self.active_experts

    @property
    def per_expert_params(self) -> float:
        """Parameters of one routed expert summed over all MoE layers."""
        if not self.is_moe:
            return 0.0
        return (self.total_params - self.active_params) / (self.routed_experts - self.active_experts)

    @property
    def shared_params(self) -> float:
        """Parameters every token uses: everything but the routed experts."""
        return self.active_params - self.active_experts * self.per_expert_params

    def with_precision(self, precision: str) -> "ModelSpec":
        """The same model with every weight stored at one precision (or as released)."""
        if precision == "as_released":
            return self
        if precision not in _PRECISION_BITS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        bits = _PRECISION_BITS[precision]
        return replace(self, expert_weight_bits=bits, other_weight_bits=bits)


@dataclass(frozen=True)
class Chip:
    """One accelerator, from data/accelerators.csv (per chip)."""

    name: str
    label: str
    hbm_bytes: float
    bandwidth_bytes_s: float
    peak_flops: dict
    power_w: float

    def peak_for_bits(self, bits: float) -> float:
        """Peak dense FLOP/s for weights of ``bits``: the narrowest tensor format that holds
        them and the chip supports (FP4 weights run in FP8 on a chip without FP4)."""
        formats = ["fp4", "fp8", "bf16"] if bits <= 4.5 else ["fp8", "bf16"] if bits <= 8 else ["bf16"]
        for fmt in formats:
            value = self.peak_flops.get(fmt)
            if value is not None and np.isfinite(value):
                return value
        raise ValueError(f"accelerator {self.name!r} has no known tensor throughput")


def _row(resource: str, key: str, name: str, what: str) -> pd.Series:
    """One row of a data file by its key, or a ValueError listing the names it knows."""
    table = data.load(resource).set_index(key)
    if name not in table.index:
        raise ValueError(f"{what} must be one of {list(table.index)}, got {name!r}")
    return table.loc[name]


@data.cached
def model_spec(name: str) -> ModelSpec:
    row = _row("model_specs", "model", name, "model")
    return ModelSpec(
        name=name,
        total_params=float(row["total_params_b"]) * GIGA,
        active_params=float(row["active_params_b"]) * GIGA,
        layers=int(row["layers"]),
        attention=str(row["attention"]),
        query_heads=int(row["query_heads"]),
        kv_heads=float(row["kv_heads"]),
        head_dim=float(row["head_dim"]),
        kv_lora_rank=float(row["kv_lora_rank"]),
        qk_rope_head_dim=float(row["qk_rope_head_dim"]),
        window_tokens=float(row["window_tokens"]),
        window_layer_fraction=float(row["window_layer_fraction"]) if pd.notna(row["window_layer_fraction"]) else 0.0,
        routed_experts=int(row["routed_experts"]),
        active_experts=int(row["active_experts"]),
        expert_weight_bits=float(row["expert_weight_bits"]),
        other_weight_bits=float(row["other_weight_bits"]),
    )


@data.cached
def chip(name: str) -> Chip:
    row = _row("accelerators", "accelerator", name, "accelerator")
    if pd.isna(row["bandwidth_tb_s"]) or pd.isna(row["hbm_gb"]):
        raise ValueError(f"accelerator {name!r}: memory and bandwidth are unknown, so the model cannot run on it")
    return Chip(
        name=name,
        label=str(row["label"]),
        hbm_bytes=float(row["hbm_gb"]) * GIGA,
        bandwidth_bytes_s=float(row["bandwidth_tb_s"]) * TERA,
        peak_flops={f: float(row[f"{f}_tflops"]) * TERA for f in ("fp4", "fp8", "bf16")},
        power_w=float(row["power_w"]),
    )


def known_chips() -> list[str]:
    """Accelerators whose memory and bandwidth are known (Jalapeño's are not)."""
    table = data.load("accelerators")
    return list(table.loc[table["bandwidth_tb_s"].notna() & table["hbm_gb"].notna(), "accelerator"])


# --- Bytes and FLOPs -------------------------------------------------------------------

def experts_touched(spec: ModelSpec, tokens):
    """Expected distinct routed experts per layer that ``tokens`` tokens use (uniform routing)."""
    tokens = np.asarray(tokens, dtype=float)
    if not spec.is_moe:
        return np.full_like(tokens, float(spec.active_experts))
    e, k = spec.routed_experts, spec.active_experts
    return e * (1.0 - (1.0 - k / e) ** tokens)


def weight_bytes(spec: ModelSpec, tokens):
    """Bytes of weights read by one forward step over ``tokens`` tokens."""
    shared = spec.shared_params * spec.other_weight_bits / 8
    experts = spec.per_expert_params * experts_touched(spec, tokens) * spec.expert_weight_bits / 8
    return shared + experts


def total_weight_bytes(spec: ModelSpec) -> float:
    """Bytes to hold every weight."""
    return float(spec.shared_params * spec.other_weight_bits / 8
                 + spec.per_expert_params * spec.routed_experts * spec.expert_weight_bits / 8)


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


def decode_flops(spec: ModelSpec, batch, context, tokens_per_sequence=1):
    """FLOPs of one decode step: each of ``batch`` sequences adds ``tokens_per_sequence`` new tokens
    (more than one when a pass verifies drafted tokens), each attending to ``context`` tokens."""
    tokens = np.asarray(batch, dtype=float) * tokens_per_sequence
    return tokens * (2 * spec.active_params + _attention_flops_per_token(spec, context))


def decode_bytes(spec: ModelSpec, batch, context, kv_bits: float = DEFAULTS.kv_bits, tokens_per_sequence=1):
    """Bytes one decode step reads: the weights its tokens touch, plus every sequence's KV cache once."""
    batch = np.asarray(batch, dtype=float)
    return weight_bytes(spec, batch * tokens_per_sequence) + batch * kv_bytes(spec, context, kv_bits)


def prefill_flops(spec: ModelSpec, prompt_tokens):
    """FLOPs to prefill one prompt: matmuls per token plus causal attention (mean context ISL/2)."""
    isl = np.asarray(prompt_tokens, dtype=float)
    return isl * (2 * spec.active_params + _attention_flops_per_token(spec, isl / 2))


def prefill_bytes(spec: ModelSpec, prompt_tokens, kv_bits: float = DEFAULTS.kv_bits):
    """Bytes to prefill one prompt: the weights its tokens touch, plus writing its KV cache."""
    isl = np.asarray(prompt_tokens, dtype=float)
    return weight_bytes(spec, isl) + kv_bytes(spec, isl, kv_bits)


def arithmetic_intensity(flops, nbytes):
    """FLOPs per byte moved."""
    return np.asarray(flops, dtype=float) / np.asarray(nbytes, dtype=float)


def ridge_point(device: Chip, bits: float) -> float:
    """The intensity (FLOP/byte) above which a kernel is compute-bound on ``device``."""
    return device.peak_for_bits(bits) / device.bandwidth_bytes_s


# --- Time -------------------------------------------------------------------------------

def chips_needed(spec: ModelSpec, device: Chip, batch, context, assumptions: Assumptions = DEFAULTS):
    """Chips one serving instance needs to hold the weights and ``batch`` sequences' KV cache."""
    need = total_weight_bytes(spec) + np.asarray(batch, dtype=float) * kv_bytes(spec, context, assumptions.kv_bits)
    return np.ceil(need / (device.hbm_bytes * assumptions.usable_hbm_fraction))


def phase_time(flops, nbytes, device: Chip, bits: float, chips, assumptions: Assumptions = DEFAULTS):
    """Seconds for work of ``flops`` and ``nbytes`` on ``chips`` chips (ideal scaling)."""
    chips = np.asarray(chips, dtype=float)
    compute = flops / (device.peak_for_bits(bits) * assumptions.compute_efficiency * chips)
    memory = nbytes / (device.bandwidth_bytes_s * assumptions.bandwidth_efficiency * chips)
    longer, shorter = np.maximum(compute, memory), np.minimum(compute, memory)
    return longer + (1 - assumptions.overlap) * shorter


def prefill_time(spec: ModelSpec, device: Chip, prompt_tokens, chips, assumptions: Assumptions = DEFAULTS):
    """Seconds to prefill one prompt of ``prompt_tokens`` tokens on ``chips`` chips."""
    return phase_time(prefill_flops(spec, prompt_tokens), prefill_bytes(spec, prompt_tokens, assumptions.kv_bits),
                      device, spec.expert_weight_bits, chips, assumptions)


def decode_time(spec: ModelSpec, device: Chip, batch, context, chips, assumptions: Assumptions = DEFAULTS,
                tokens_per_sequence=1):
    """Seconds for one decode (or verification) pass over ``batch`` sequences on ``chips`` chips."""
    flops = decode_flops(spec, batch, context, tokens_per_sequence)
    nbytes = decode_bytes(spec, batch, context, assumptions.kv_bits, tokens_per_sequence)
    return phase_time(flops, nbytes, device, spec.expert_weight_bits, chips, assumptions)


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
    spec = model_spec(model).with_precision(precision)
    device = chip(accelerator)
    bits = spec.expert_weight_bits
    peak = device.peak_for_bits(bits)
    ridge = ridge_point(device, bits)
    intensities = np.array([1.0, ridge, 1e5])
    roof = pd.DataFrame({
        "series": "roof", "point": ["low", "ridge", "high"], "intensity": intensities,
        "tflops": np.minimum(peak, intensities * device.bandwidth_bytes_s) / TERA,
    })
    context = isl + osl / 2
    flops = np.array([float(prefill_flops(spec, isl)), float(decode_flops(spec, batch, context))])
    nbytes = np.array([float(prefill_bytes(spec, isl)), float(decode_bytes(spec, batch, context))])
    intensity = arithmetic_intensity(flops, nbytes)
    phases = pd.DataFrame({
        "series": "phase", "point": ["prefill", "decode"], "intensity": intensity,
        "tflops": np.minimum(peak, intensity * device.bandwidth_bytes_s) / TERA,
    })
    out = pd.concat([roof, phases], ignore_index=True)
    out["bound"] = np.where(out["intensity"] >= ridge, "compute-bound", "memory-bound")
    out["ridge"] = ridge
    return out
