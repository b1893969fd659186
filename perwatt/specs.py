"""What the roofline model runs on: model architectures, accelerators and the model's assumptions.

:class:`ModelSpec` and :class:`Chip` are records filled from the validated data files
(``data/model_specs.csv``, ``data/accelerators.csv``) by :func:`model_spec` and :func:`chip`;
:class:`Assumptions` holds every simplification of :mod:`perwatt.roofline` as a checked parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from perwatt import checks, data

TERA = 1e12
GIGA = 1e9
#: Weight formats a reader can choose; "as released" keeps each model's own.
PRECISIONS = ("as_released", "fp4", "fp8", "bf16")
PRECISION_LABELS = {"as_released": "as released", "fp4": "FP4 experts", "fp8": "FP8 everywhere",
                    "bf16": "BF16 everywhere"}
#: Per format: (routed-expert weight bits, other weight bits or None to keep them, matmul format bits).
#: FP4 is NVFP4's layout: 4-bit values with an 8-bit scale per 16, 4.5 bits each; as NVIDIA's and
#: InferenceX's FP4 DeepSeek runs serve it, only the experts are FP4 and the rest stays as released (≤ 8 bits).
_PRECISION_BITS = {"fp4": (4.5, None, 4.0), "fp8": (8.0, 8.0, 8.0), "bf16": (16.0, 16.0, 16.0)}


@dataclass(frozen=True)
class Assumptions:
    """The model's simplifications, as parameters.

    bandwidth_efficiency: achieved ÷ peak HBM bandwidth; in [0.01, 1], as is
    compute_efficiency: achieved ÷ peak dense tensor FLOP/s.
    overlap: 1 means compute and memory traffic overlap perfectly (time = max of the two);
        0 means they run one after the other (time = sum).
    kv_bits: bits per cached key/value element (default 16, BF16; at most 64). FP8 (8) is common.
    usable_hbm_fraction: share of HBM available for weights and KV cache (default 0.9).
    layer_latency_us: fixed time per layer per pass (µs): kernel launches and the synchronisation
        between them, which no amount of bandwidth removes.
    collective_latency_us: fixed time per collective (all-reduce, dispatch or combine), µs.
    link_efficiency: achieved ÷ peak scale-up or scale-out bandwidth in collectives (default 0.7).
    routing_skew: how much busier than uniform routing makes it the busiest expert group is
        (1 = uniform; 1.3 = 30 % more distinct experts on it, never more than it holds).

    bandwidth_efficiency, compute_efficiency, layer_latency_us and collective_latency_us default
    to the values :mod:`perwatt.calibration` fits to measured InferenceX points (chapter 3).
    """

    bandwidth_efficiency: float = 0.643
    compute_efficiency: float = 0.383
    overlap: float = 1.0
    kv_bits: float = 16.0
    usable_hbm_fraction: float = 0.9
    layer_latency_us: float = 103.0
    collective_latency_us: float = 0.0
    link_efficiency: float = 0.7
    routing_skew: float = 1.0

    def __post_init__(self) -> None:
        for name in ("bandwidth_efficiency", "compute_efficiency", "usable_hbm_fraction"):
            checks.scalar(name, getattr(self, name), minimum=0.01, maximum=1.0)
        checks.scalar("overlap", self.overlap, minimum=0.0, maximum=1.0)
        checks.scalar("kv_bits", self.kv_bits, exclusive_minimum=0.0, maximum=64.0)
        for name in ("layer_latency_us", "collective_latency_us"):
            checks.scalar(name, getattr(self, name), minimum=0.0, maximum=10_000.0)
        checks.scalar("link_efficiency", self.link_efficiency, minimum=0.01, maximum=1.0)
        checks.scalar("routing_skew", self.routing_skew, minimum=1.0, maximum=100.0)


DEFAULTS = Assumptions()


@dataclass(frozen=True)
class ModelSpec:
    """One model's architecture, from data/model_specs.csv."""

    name: str
    total_params: float
    active_params: float
    layers: int
    hidden_size: int
    attention: str
    query_heads: int
    kv_heads: float
    head_dim: float
    kv_lora_rank: float
    qk_rope_head_dim: float
    window_tokens: float
    window_layer_fraction: float
    attention_params: float
    routed_experts: int
    active_experts: int
    moe_layers: int
    expert_weight_bits: float
    other_weight_bits: float
    expert_compute_bits: float

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
        checks.choice("precision", precision, PRECISIONS)
        if precision == "as_released":
            return self
        experts, other, compute = _PRECISION_BITS[precision]
        return replace(self, expert_weight_bits=experts, expert_compute_bits=compute,
                       other_weight_bits=self.other_weight_bits if other is None else other)


@dataclass(frozen=True)
class Chip:
    """One accelerator, from data/accelerators.csv (per chip).

    ``power_w`` is the rated power, or NaN where the vendor publishes none (TPU7x, Trainium2):
    the data file leaves the cell empty and the NaN keeps it unknown, so a per-watt or energy
    figure computed from it is NaN too, which means "unknown, because the power is unpublished".
    A function that cannot give a meaningful answer without the watts calls :meth:`rated_w`,
    which raises instead. Times, throughput and memory never depend on ``power_w``.
    """

    name: str
    label: str
    hbm_bytes: float
    bandwidth_bytes_s: float
    peak_flops: dict
    power_w: float
    scale_up_bytes_s: float = float("nan")
    scale_up_domain: int = 1
    scale_out_bytes_s: float = float("nan")

    @property
    def power_known(self) -> bool:
        """Whether the vendor publishes this chip's rated power."""
        return bool(np.isfinite(self.power_w))

    def rated_w(self, needed_for: str) -> float:
        """The rated power in watts, or a ValueError naming the chip and saying its power is
        unpublished, so ``needed_for`` (what the caller computes) cannot be computed."""
        if not self.power_known:
            raise ValueError(f"accelerator {self.name!r} ({self.label}): its power is not published, so "
                             f"{needed_for} cannot be computed for it")
        return self.power_w

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
    if not isinstance(name, str) or name not in table.index:
        raise ValueError(f"{what} must be one of {list(table.index)}, got {name!r}")
    return table.loc[name]


def _name(name: object, what: str, article: str) -> str:
    # Checked before the cached lookup, whose cache key would fail on an unhashable argument.
    if not isinstance(name, str):
        raise ValueError(f"{what} must be {article} {what}'s name, got {name!r}")
    return name


def model_spec(name: str) -> ModelSpec:
    """One model's architecture by its name in data/model_specs.csv."""
    return _model_spec(_name(name, "model", "a"))


@data.cached
def _model_spec(name: str) -> ModelSpec:
    row = _row("model_specs", "model", name, "model")
    return ModelSpec(
        name=name,
        total_params=float(row["total_params_b"]) * GIGA,
        active_params=float(row["active_params_b"]) * GIGA,
        layers=int(row["layers"]),
        hidden_size=int(row["hidden_size"]),
        attention=str(row["attention"]),
        query_heads=int(row["query_heads"]),
        kv_heads=float(row["kv_heads"]),
        head_dim=float(row["head_dim"]),
        kv_lora_rank=float(row["kv_lora_rank"]),
        qk_rope_head_dim=float(row["qk_rope_head_dim"]),
        window_tokens=float(row["window_tokens"]),
        window_layer_fraction=float(row["window_layer_fraction"]) if pd.notna(row["window_layer_fraction"]) else 0.0,
        attention_params=float(row["attention_params_b"]) * GIGA,
        routed_experts=int(row["routed_experts"]),
        active_experts=int(row["active_experts"]),
        moe_layers=int(row["moe_layers"]),
        expert_weight_bits=float(row["expert_weight_bits"]),
        other_weight_bits=float(row["other_weight_bits"]),
        expert_compute_bits=float(row["expert_compute_bits"]),
    )


def chip(name: str) -> Chip:
    """One accelerator by its name in data/accelerators.csv (memory and bandwidth known)."""
    return _chip(_name(name, "accelerator", "an"))


@data.cached
def _chip(name: str) -> Chip:
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
        scale_up_bytes_s=float(row["scale_up_gb_s"]) * GIGA,
        scale_up_domain=int(row["scale_up_domain"]) if pd.notna(row["scale_up_domain"]) else 1,
        scale_out_bytes_s=float(row["scale_out_gb_s"]) * GIGA,
    )


@data.cached
def known_models() -> tuple[str, ...]:
    """The models of data/model_specs.csv, read once per data folder: every check of a model's name
    asks for them (a chapter builds thousands of workloads)."""
    return tuple(data.load("model_specs")["model"])


def known_chips() -> list[str]:
    """Accelerators whose memory and bandwidth are known (Jalapeño's are not), so the serving model
    runs on them; some of them have no published power (see :func:`chips_with_power`)."""
    return list(_known_chips())


@data.cached
def _known_chips() -> tuple[str, ...]:
    # Asked for by every check of a chip's name: read from the table once.
    table = data.load("accelerators")
    return tuple(table.loc[table["bandwidth_tb_s"].notna() & table["hbm_gb"].notna(), "accelerator"])


def chips_with_power() -> list[str]:
    """The :func:`known_chips` whose rated power is published too: the ones a per-watt or energy
    figure can be computed for (TPU7x's and Trainium2's power is unpublished)."""
    table = data.load("accelerators").set_index("accelerator")
    return [name for name in known_chips() if pd.notna(table.loc[name, "power_w"])]
