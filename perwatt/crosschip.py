"""Work per watt at the same interactivity, across chips: the serving model's per-kW frontier.

For one model, precision and the table's workload, every instance layout and batch of the serving
model (:mod:`perwatt.serving`) is priced on a chip from three kinds of input:

* **Terms** (:func:`terms`): each operator's FLOPs and bytes, the link bytes and the memory a chip
  holds, per layout and batch. They depend on the model and the layout, not on the chip.
* **A chip** (:func:`chip_fields`, :func:`reader_fields`): HBM bandwidth and capacity, peak
  FLOP/s per format, power, links and the scale-up domain.
* **Parameters** (:func:`parameters`): the serving model's efficiencies and fixed costs, the
  workload's lengths, and how power is counted (rated, or :mod:`perwatt.power`'s load model).

:data:`FORMULA` combines them, written once as :mod:`perwatt.expression` trees, so that the page
runs exactly this arithmetic when a reader moves a control (a chip of their own included), and
Python runs it for the tables and the tests. A test checks it against :func:`perwatt.serving.serve`
and :func:`perwatt.power.pool_watts` on every chip with data.

The result per row is tokens/s per user (``x``) and total tokens/s per kW (``y``). A chip's curve
is the rows no other row of that chip beats on both (:func:`frontier`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from perwatt import catalog, checks, data, parallel, power, serving
from perwatt.expression import Formula, field, maximum, minimum, param, total, where
from perwatt.specs import DEFAULTS, GIGA, TERA, Assumptions, Chip, chip, model_spec

OPS = parallel.OPERATORS
PHASES = ("d", "p")  # decode, prefill
#: Sequences per instance the curves sweep (as :data:`perwatt.serving.BATCHES`).
BATCHES = serving.BATCHES
#: How power is counted: the chip's rating, or the load model of :mod:`perwatt.power`.
POWER_BASES = ("rated", "modelled")
#: One chip's power in watts (a scalar: a chip has one rating).
WATTS = checks.rule(checks.scalar, minimum=checks.MIN_PLAUSIBLE_POWER_W, maximum=checks.MAX_PLAUSIBLE_POWER_W)
#: The name of the reader's chip among the systems.
READER = "reader"
PRECISION = serving.PRECISION
ASSUMED = checks.kind(Assumptions)
POWERED = checks.kind(power.PowerModel)


def _phase_time(p: str):
    """Seconds of one pass of phase ``p`` (``d`` decode, ``p`` prefill) on the row's chip."""
    eta_c, eta_m, overlap = param("eta_c"), field("eta_m"), param("overlap")
    parts = []
    for op in OPS:
        compute = field(f"{p}_{op}_flops") / (field(f"{op}_peak") * eta_c)
        memory = field(f"{p}_{op}_bytes") / (field("bandwidth") * eta_m)
        parts.append(maximum(compute, memory) + (1 - overlap) * minimum(compute, memory))
    link = where(field("chips") <= field("domain"), field("scale_up"), field("scale_out")) * param("eta_link")
    # No link bytes, no link time: a lone chip has no link, and an unpublished one must not turn 0 into NaN.
    over_link = where(field(f"{p}_link_bytes") > 0, field(f"{p}_link_bytes") / maximum(link, 1e-300), 0.0)
    return total(parts) + field("layers") * param("layer_s") + field(f"{p}_collectives") * param("collective_s") + over_link


def _admission() -> Formula:
    """Which rows a chip runs: the layouts it may try and has memory for (``valid``)."""
    chips = field("chips")
    return Formula((
        # Layouts the serving model tries on this chip (serving.layouts): powers of two up to four
        # domains where the network beyond one is published, one domain otherwise, and the domain itself.
        ("allowed", maximum(field("pow2") * (chips <= where(field("scale_out") > 0, 4 * field("domain"),
                                                                   field("domain"))),
                            chips.equals(field("domain")))),
        ("fits", field("memory") <= field("hbm") * param("usable")),
        ("valid", field("allowed") * field("fits")),
    ))


def _formula() -> Formula:
    batch, chips, osl, isl = field("batch"), field("chips"), param("osl"), param("isl")
    rated = field("power_w")
    steps = [
        ("t_decode", _phase_time("d")),
        ("t_prefill", _phase_time("p")),
        ("tpot_s", field("t_decode") + batch * field("t_prefill") / field("together") / osl),
        ("e2e_s", field("t_prefill") + osl * field("tpot_s")),
        ("x", 1 / field("tpot_s")),
        ("output_per_chip", batch * osl / field("e2e_s") / chips),
        ("total_per_chip", field("output_per_chip") * (isl + osl) / osl),
        # The load model averages a request's cycle: its share of the prefills, then its decode passes.
        ("cycle_bytes", batch * total([field(f"p_{op}_bytes") for op in OPS]) / field("together")
         + osl * total([field(f"d_{op}_bytes") for op in OPS])),
        ("cycle_flops", batch * total([field(f"p_{op}_flops") for op in OPS]) / field("together")
         + osl * total([field(f"d_{op}_flops") for op in OPS])),
        ("watts_modelled", minimum(param("idle") * rated + param("j_per_byte") * field("cycle_bytes")
                                   / (osl * field("tpot_s")) + param("j_per_flop") * field("cycle_flops")
                                   / (osl * field("tpot_s")), rated)),
        ("watts", where(param("modelled").equals(1), field("watts_modelled"), rated)),
        ("y", field("total_per_chip") / field("watts") * 1000),
    ]
    return Formula(tuple(steps))


#: The arithmetic every view of the per-kW frontier runs (see the module docstring): first which
#: rows a chip runs, then, on those, their speed and power.
ADMISSION, FORMULA = _admission(), _formula()


def _layouts(spec) -> pd.DataFrame:
    """Every layout any chip may run (the union of :func:`perwatt.serving.layouts` over the chips,
    and the reader's chip at a domain of 8 or 72)."""
    sizes = sorted({2 ** i for i in range(7)} | {72})
    rows = [(c, e, d) for c in sizes for e in sorted({1, c}) for d in ((False, True) if c > 1 else (False,))
            if spec.is_moe or e == 1]
    return pd.DataFrame(rows, columns=["chips", "ep", "dp_attention"])


@data.stored
def _terms(model: str, precision: str) -> dict[str, np.ndarray]:
    """:func:`terms`' columns as arrays (read them, never write them: every caller shares them)."""
    spec = model_spec(model).with_precision(precision)
    layouts = _layouts(spec)
    batches = np.asarray(BATCHES, dtype=float)
    # Layout by layout, each at every batch (as a cross join orders them).
    return _terms_of(spec, *(np.repeat(layouts[c].to_numpy(), len(batches)) for c in ("chips", "ep", "dp_attention")),
                     np.tile(batches, len(layouts)))


def _terms_of(spec, chips: np.ndarray, ep: np.ndarray, dp: np.ndarray, batch: np.ndarray) -> dict[str, np.ndarray]:
    """The terms of each layout and batch (arrays of one length) at the table workload, by column."""
    drawn = catalog.lengths()
    isl, osl = drawn.isl_mean, drawn.osl_mean
    batch = np.asarray(batch, dtype=float)
    together = np.where(dp, chips, 1).astype(float)
    decode = parallel.pass_terms(spec, batch, isl + osl / 2, chips, ep, dp, 1, "decode", DEFAULTS)
    prefill = parallel.pass_terms(spec, together, 0.0, chips, ep, dp, isl, "prefill", DEFAULTS)
    out = {"chips": chips, "ep": ep, "dp_attention": dp, "batch": batch, "together": together,
           "layers": np.full(batch.shape, float(spec.layers)),
           "pow2": ((chips.astype(np.int64) & (chips.astype(np.int64) - 1)) == 0).astype(float),
           "memory": np.asarray(parallel.memory_per_chip(spec, chips, ep, dp, batch, isl + osl, DEFAULTS), dtype=float)}
    for prefix, part in (("d", decode), ("p", prefill)):
        for key, value in part.items():
            if not key.endswith("_bits"):
                out[f"{prefix}_{key}"] = np.array(np.broadcast_to(value, batch.shape), dtype=float)
    return out


@checks.validated(model=checks.TEXT, precision=PRECISION)
def terms(model: str, precision: str = "as_released") -> pd.DataFrame:
    """One row per layout and batch: the layout, the chip-independent terms :data:`FORMULA` reads,
    at the table workload's mean drawn lengths (KV cache at the default assumptions' bits)."""
    return pd.DataFrame(_terms(model, precision)).assign(model=model, precision=precision)


def _fields(device: Chip, power_w: float, spec=None) -> dict:
    """A chip's fields; with ``spec``, the peak FLOP/s of each operator's format on it as well."""
    out = {"bandwidth": device.bandwidth_bytes_s, "hbm": device.hbm_bytes, "power_w": power_w,
           "scale_up": device.scale_up_bytes_s if np.isfinite(device.scale_up_bytes_s) else 0.0,
           "scale_out": device.scale_out_bytes_s if np.isfinite(device.scale_out_bytes_s) else 0.0,
           "domain": float(device.scale_up_domain)}
    if spec is not None:
        bits = parallel.pass_terms.unchecked(spec, 1.0, 0.0, 1, 1, False, 1, "decode", DEFAULTS)
        out.update({f"{op}_peak": device.peak_for_bits(bits[f"{op}_bits"]) for op in OPS})
    return out


@checks.validated(accelerator=checks.TEXT, model=checks.TEXT, precision=PRECISION,
                  power_w=checks.rule(checks.optional, WATTS))
def chip_fields(accelerator: str, model: str, precision: str = "as_released", power_w: float | None = None) -> dict:
    """A chip of data/accelerators.csv as :data:`FORMULA`'s chip fields (SI units; 0 for a format
    or link the chip lacks). ``power_w`` replaces the rating: it is required where the rating is
    unpublished, and then it is the reader's assumption, not the book's."""
    device = chip(accelerator)
    rated = device.power_w if power_w is None else power_w
    if not np.isfinite(rated):
        raise ValueError(f"power_w: {device.label}'s power is not published; give an assumed power to draw it")
    return _fields(device, float(rated), model_spec(model).with_precision(precision))


#: The chip whose scale-up links a reader's chip gets when the reader sets none (NVLink 5).
READER_LINKS_LIKE = "b200"


def reader_link_bytes_s() -> float:
    """The scale-up bandwidth (bytes/s, each way) a reader's chip gets by default: :data:`READER_LINKS_LIKE`'s."""
    return chip(READER_LINKS_LIKE).scale_up_bytes_s


@checks.validated(bandwidth_tb_s=checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=1e4),
                  tflops=checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=1e7),
                  hbm_gb=checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=1e6),
                  power_w=WATTS, domain=checks.rule(checks.integer, maximum=1024),
                  link_gb_s=checks.rule(checks.optional, checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=1e5)))
def reader_chip(bandwidth_tb_s: float, tflops: float, hbm_gb: float, power_w: float, domain: int = 8,
                link_gb_s: float | None = None) -> Chip:
    """A chip of the reader's own: one peak (``tflops``, dense, in the format in use) for every
    operator, scale-up links of ``link_gb_s`` each way (by default :func:`reader_link_bytes_s`'s),
    and no network beyond its scale-up domain."""
    link_gb_s = reader_link_bytes_s() / GIGA if link_gb_s is None else link_gb_s
    return Chip(name=READER, label="your chip", hbm_bytes=hbm_gb * GIGA, bandwidth_bytes_s=bandwidth_tb_s * TERA,
                peak_flops={f: tflops * TERA for f in ("fp4", "fp8", "bf16")}, power_w=power_w,
                scale_up_bytes_s=link_gb_s * GIGA, scale_up_domain=domain, scale_out_bytes_s=float("nan"))


@checks.validated(assumptions=ASSUMED, power_basis=checks.rule(checks.choice, POWER_BASES), power_model=POWERED)
def parameters(assumptions: Assumptions = DEFAULTS, power_basis: str = "rated",
               power_model: power.PowerModel = power.FITTED) -> dict:
    """:data:`FORMULA`'s parameters: the serving model's assumptions, the table workload's mean
    drawn lengths, and the power basis with the load model's settings (SI units)."""
    drawn = catalog.lengths()
    a = assumptions
    return {"eta_m": a.bandwidth_efficiency, "eta_c": a.compute_efficiency, "overlap": a.overlap,
            "layer_s": a.layer_latency_us * 1e-6, "collective_s": a.collective_latency_us * 1e-6,
            "eta_link": a.link_efficiency, "usable": a.usable_hbm_fraction, "isl": drawn.isl_mean,
            "osl": drawn.osl_mean, "modelled": float(power_basis == "modelled"), "idle": power_model.idle_fraction,
            "j_per_byte": power_model.pj_per_byte * 1e-12, "j_per_flop": power_model.pj_per_flop * 1e-12}


def _check_assumptions_match_terms(assumptions: Assumptions) -> None:
    # The terms are priced at the default KV bits and routing; other values need other terms.
    for name in ("kv_bits", "routing_skew"):
        if getattr(assumptions, name) != getattr(DEFAULTS, name):
            raise ValueError(f"assumptions: the cross-chip terms are computed at the default {name} "
                             f"({getattr(DEFAULTS, name)}); {getattr(assumptions, name)} is not supported here")


def _admitted(model: str, device: Chip, precision: str, power_basis: str, assumptions: Assumptions,
              power_model: power.PowerModel) -> tuple[dict[str, np.ndarray], dict]:
    """The terms of the rows ``device`` runs (:data:`ADMISSION`), and :data:`FORMULA`'s parameters
    and chip fields for it."""
    _check_assumptions_match_terms(assumptions)
    if not np.isfinite(device.power_w):
        raise ValueError(f"device: {device.label}'s power is not published; give the chip an assumed power_w")
    terms = _terms(model, precision)
    given = {**_fields(device, device.power_w, model_spec(model).with_precision(precision)),
             **parameters.unchecked(assumptions, power_basis, power_model)}
    valid = ADMISSION.evaluate(terms, given)["valid"] > 0
    if not valid.any():
        raise ValueError(f"model {model!r} does not fit on {device.label} in any layout the model tries")
    return {name: values[valid] for name, values in terms.items()}, given


def _priced(model: str, device: Chip, precision: str, power_basis: str, assumptions: Assumptions,
            power_model: power.PowerModel) -> dict[str, np.ndarray]:
    """:func:`rows`' columns as arrays, ``efficient`` included."""
    grid, given = _admitted(model, device, precision, power_basis, assumptions, power_model)
    out = {name: grid[name] for name in ("chips", "ep", "dp_attention", "batch")}
    out.update(FORMULA.evaluate(grid, given))
    out["efficient"] = serving.pareto_efficient(out["x"], out["y"])
    return out


def _best_at_bandwidths(model: str, device: Chip, bandwidths, target: float, precision: str = "as_released",
                        power_basis: str = "rated", assumptions: Assumptions = DEFAULTS,
                        power_model: power.PowerModel = power.FITTED) -> np.ndarray:
    """``best_at(frontier(model, device at each of bandwidths (bytes/s), ...), target)[0]``, for many
    bandwidths in one evaluation. Which rows a chip runs does not depend on its bandwidth, and the
    most ``y`` at ``x`` ≥ target over every row is the frontier's (a row beaten on both is matched
    or beaten by one that is not): the same numbers, from the same arithmetic, element by element."""
    grid, given = _admitted(model, device, precision, power_basis, assumptions, power_model)
    values = FORMULA.evaluate(grid, {**given, "bandwidth": np.asarray(bandwidths, dtype=float)[:, None]})
    reach = values["x"] >= target
    return np.where(reach.any(axis=1), np.where(reach, values["y"], -np.inf).max(axis=1), np.nan)


ROWS = dict(model=checks.TEXT, device=checks.kind(Chip), precision=PRECISION,
            power_basis=checks.rule(checks.choice, POWER_BASES), assumptions=ASSUMED, power_model=POWERED)


@checks.validated(**ROWS)
def rows(model: str, device: Chip, precision: str = "as_released", power_basis: str = "rated",
         assumptions: Assumptions = DEFAULTS, power_model: power.PowerModel = power.FITTED) -> pd.DataFrame:
    """Every layout and batch ``device`` may run and has memory for, with :data:`FORMULA`'s results:
    ``x`` tokens/s per user, ``y`` total tokens/s per kW, ``watts`` per chip, ``efficient`` (no
    other row of this chip beats it on both)."""
    return pd.DataFrame(_priced(model, device, precision, power_basis, assumptions, power_model))


@checks.validated(**ROWS)
def frontier(model: str, device: Chip, precision: str = "as_released", power_basis: str = "rated",
             assumptions: Assumptions = DEFAULTS, power_model: power.PowerModel = power.FITTED) -> pd.DataFrame:
    """The rows of :func:`rows` no other beats on both axes, one per operating point, fastest per
    user first (so ``y`` rises down the frame)."""
    out = _priced(model, device, precision, power_basis, assumptions, power_model)
    x, y = out["x"], out["y"]
    seen: set = set()
    # One row per operating point (the first, as pandas' drop_duplicates keeps), then the fastest
    # first: no two kept rows tie on both x and y, so this order is the only one.
    kept = [i for i in np.flatnonzero(out["efficient"]) if not ((x[i], y[i]) in seen or seen.add((x[i], y[i])))]
    kept = np.asarray(kept, dtype=np.intp)[np.lexsort((-y[kept], -x[kept]))]
    return pd.DataFrame({name: values[kept] for name, values in out.items()})


@checks.validated(curve=checks.rule(checks.instance, pd.DataFrame), targets=checks.RATE)
def best_at(curve: pd.DataFrame, targets) -> np.ndarray:
    """Per target tokens/s per user: the most tokens/s per kW any row of ``curve`` reaches at that
    rate or faster; NaN where no row is that fast (the chip cannot serve the target at all)."""
    if not {"x", "y"} <= set(curve.columns):
        raise ValueError("curve must have the columns x and y, as rows() and frontier() return")
    t = np.atleast_1d(np.asarray(targets, dtype=float))
    x, y = curve["x"].to_numpy(float), curve["y"].to_numpy(float)
    reach = x[None, :] >= t[:, None]
    return np.where(reach.any(axis=1), np.where(reach, y[None, :], -np.inf).max(axis=1), np.nan)


@checks.validated(assumptions=ASSUMED, bandwidth_efficiency=checks.rule(checks.scalar, minimum=0.01, maximum=1.0))
def with_efficiency(assumptions: Assumptions, bandwidth_efficiency: float) -> Assumptions:
    """The same assumptions at another bandwidth efficiency."""
    return dataclasses.replace(assumptions, bandwidth_efficiency=float(bandwidth_efficiency))
