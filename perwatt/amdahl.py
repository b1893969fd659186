"""Kernel speed-ups in context: Amdahl's law over the serving model's decode pass.

A kernel that runs ``s`` times faster speeds the whole only in the share ``f`` of the time it
takes: the whole gains ``1 ÷ ((1 − f) + f ÷ s)``. The articles report the kernel gain (data/
claims.csv) but not the share, so the share is the reader's to set; :func:`kernel_fraction` gives
the share the book's own roofline model puts in an operator class, a derived figure about the
model, not about Jalapeño's software.
"""

from __future__ import annotations

from perwatt import checks, data, parallel
from perwatt.specs import DEFAULTS, chip, model_spec

SPEEDUP = checks.rule(checks.number, exclusive_minimum=0.0, maximum=1e6)
FRACTION = checks.fraction
#: The operators of :data:`perwatt.parallel.OPERATORS` the reported kernels belong to: attention and
#: the mixture-of-experts layers.
KERNELS = ("attention", "experts")


@checks.validated(fraction=FRACTION, speedup=SPEEDUP)
def whole_gain(fraction, speedup):
    """The whole run's speed-up when a share ``fraction`` of its time runs ``speedup`` times faster
    (arrays broadcast): 1 at ``fraction`` 0, ``speedup`` at 1."""
    return 1.0 / ((1.0 - fraction) + fraction / speedup)


@checks.validated(gain=checks.rule(checks.number, minimum=1.0, maximum=1e6),
                  speedup=checks.rule(checks.number, exclusive_minimum=1.0, maximum=1e6))
def fraction_needed(gain, speedup):
    """The share of the time a kernel ``speedup`` (> 1) times faster must cover for the whole to
    gain ``gain`` (the inverse of :func:`whole_gain`); above 1 where no share can (``gain`` > ``speedup``)."""
    return (1.0 - 1.0 / gain) / (1.0 - 1.0 / speedup)


@checks.validated(claim_id=checks.TEXT)
def reported_speedups(claim_id: str = "ai-kernels") -> tuple[float, float]:
    """The low and high kernel speed-ups a claim of data/claims.csv reports (the first-results
    article's AI-written gpt-oss kernels by default)."""
    claims = data.load("claims").set_index("claim_id")
    if claim_id not in claims.index or claims.loc[claim_id, "metric"] != "kernel_speedup":
        raise ValueError(f"claim_id must name a kernel_speedup claim of claims.csv, got {claim_id!r}")
    row = claims.loc[claim_id]
    return float(row["low"]), float(row["high"])


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, batch=checks.rule(checks.integer, maximum=checks.MAX_BATCH),
                  context=checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_TOKENS),
                  chips=checks.rule(checks.integer, maximum=checks.MAX_CHIPS))
def kernel_fraction(model: str, accelerator: str, batch: int, context: float, chips: int = 1) -> float:
    """The share of one decode pass that the serving model spends in :data:`KERNELS` (the rest is
    the attention projections, shared layers, fixed time per layer and collectives), tensor
    parallel over ``chips``. Derived from the model, not measured."""
    parts = parallel.pass_time(model_spec(model), chip(accelerator), batch, context, chips, 1, False, 1, "decode",
                               DEFAULTS)
    return float(sum(parts[k] for k in KERNELS) / parts["total"])
