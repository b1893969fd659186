"""The fleet's hardware profiles: capacity per chip and workload from the calibrated serving model.

For each chip and workload, the capacity is the most output tokens/s per chip at any layout and batch
of the serving model (:func:`perwatt.serving.frontier`, at the book's calibrated assumptions) that
meets the workload's per-user target, with the chips one instance takes there and the average watts
a chip draws there (:func:`perwatt.power.pool_watts`). The serving frontier is used rather than
:func:`perwatt.crosschip.frontier` because it takes each workload's own lengths (the cross-chip
terms are computed at the table workload's only); at the table workload the two agree to the last
digit (a test checks it).

* **Sourced chips**: NVIDIA chips with an InferenceX price per GPU-hour and specifications in
  ``data/``. TPU7x and Trainium2 have specifications but no published power and no price found:
  they enter with the labelled assumptions of ``data/assumptions.csv`` (power and price each at
  GB200's per TB/s of HBM bandwidth), scaled by the reader's ``power_scale``.
* **Jalapeño**: nothing but its rating and its reported points is published. For each model, the
  profile is the chip of the reader's kind (:func:`perwatt.crosschip.reader_chip`) whose bandwidth
  and power :func:`perwatt.inverse.inverse` solves through Jalapeño's reported point (eight chips,
  one sequence, no fixed time per layer, the assumed peak FLOP/s); its capacity at each target
  then follows from the serving model on that chip, so it varies with the target. Every number
  of it is an assumption and labelled so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perwatt import catalog, checks, data, inverse, power, serving
from perwatt.crosschip import WATTS, reader_chip
from perwatt.fleet import Hardware, Workload, _supply
from perwatt.specs import DEFAULTS, Chip, chip, known_chips, model_spec

#: NVIDIA chips in the fleet: every one with a sourced InferenceX price (two generations).
NVIDIA = ("h100", "h200", "b200", "gb200")
#: Other vendors' chips, with specifications but no published power or price.
OTHERS = ("tpu7x", "trainium2")
#: The layout of Jalapeño's reported point, as the prefill-decode chapter solves it.
JALAPENO_CHIPS, JALAPENO_BATCH = 8, 1
#: Jalapeño's serving assumptions: the calibrated ones without the fixed time per layer, through
#: which no chip reaches the reported per-user speeds.
JALAPENO_SERVING = dataclasses.replace(DEFAULTS, layer_latency_us=0.0)


def _best(frame: pd.DataFrame, min_rate: float) -> pd.Series | None:
    """The row with the most output per chip at or above ``min_rate``; on a tie, the smaller
    instance, which rounds a fleet finer. None if no row is that fast."""
    ok = frame[frame["tokens_per_s_per_user"] >= min_rate]
    if ok.empty:
        return None
    return ok.sort_values(["output_tokens_per_s_per_chip", "chips"], ascending=[False, True]).iloc[0]


def _point(spec, device: Chip, best: pd.Series | None, isl: float, osl: float, assumptions) -> dict:
    if best is None:
        return {"capacity": 0.0, "chips": 1, "watts": float(device.power_w), "tokens_per_s_per_user": 0.0}
    watts = power.pool_watts(spec, device, best["batch"], isl, osl, best["chips"], best["ep"],
                             bool(best["dp_attention"]), assumptions=assumptions)
    return {"capacity": float(best["output_tokens_per_s_per_chip"]), "chips": int(best["chips"]),
            "watts": float(watts), "tokens_per_s_per_user": float(best["tokens_per_s_per_user"])}


@data.stored
def _sourced_point(model: str, accelerator: str, isl: float, osl: float, min_rate: float, power_w: float) -> dict:
    device = dataclasses.replace(chip(accelerator), power_w=power_w)
    frame = serving.frontier(model, accelerator, isl=isl, osl=osl)
    return _point(model_spec(model), device, _best(frame, min_rate), isl, osl, DEFAULTS)


ONE_RATE = checks.rule(checks.scalar, minimum=0.0, maximum=checks.MAX_RATE)
ACCELERATOR = checks.rule(checks.choice, tuple(known_chips()))


@checks.validated(accelerator=ACCELERATOR, workload=checks.kind(Workload),
                  power_w=checks.rule(checks.optional, WATTS))
def operating_point(accelerator: str, workload: Workload, power_w: float | None = None) -> dict:
    """A chip's best point for a workload: ``capacity`` (output tokens/s per chip), ``chips`` per
    instance, average ``watts`` per chip there and its ``tokens_per_s_per_user`` (capacity 0 where
    no point meets the target). ``power_w`` is the rating to count (required where unpublished)."""
    rated = _rating(accelerator, chip(accelerator).power_w if power_w is None else power_w)
    return dict(_sourced_point(workload.model, accelerator, workload.isl_tokens, workload.osl_tokens,
                               workload.min_tokens_per_s_per_user, rated))


def _rating(accelerator: str, power_w: float) -> float:
    """The rating to count, which must be known (a chip whose power is unpublished needs an assumed one)."""
    if not np.isfinite(power_w):
        raise ValueError(f"power_w: {chip(accelerator).label}'s power is not published; give an assumed power")
    return float(power_w)


@checks.validated(accelerator=checks.rule(checks.choice, OTHERS))
def assumed_power_w(accelerator: str) -> float:
    """The labelled power assumption for a chip whose power is unpublished (data/assumptions.csv)."""
    return catalog.assumption(f"{accelerator}_power_w")


@checks.validated(accelerator=checks.rule(checks.choice, OTHERS))
def assumed_price(accelerator: str) -> float:
    """The labelled price assumption, US$ per chip-hour, for a chip with no price found."""
    return catalog.assumption(f"{accelerator}_usd_per_chip_hour")


def _profile(name: str, workloads: list[Workload], price: float, rated: float, assumed: bool,
             supply: float = np.inf) -> Hardware:
    # operating_point's checks once for the chip, not once per workload (a chapter builds hundreds)
    counted = _rating(name, WATTS("power_w", rated))
    points = {w.name: _sourced_point(w.model, name, w.isl_tokens, w.osl_tokens, w.min_tokens_per_s_per_user, counted)
              for w in workloads}
    label = catalog.accelerator_label(name)
    return Hardware(name=name, label=label + (" (assumed power and price)" if assumed else ""), usd_per_hour=price,
                    power_w=rated, capacity={k: p["capacity"] for k, p in points.items()},
                    instance_chips={k: p["chips"] for k, p in points.items()},
                    watts={k: p["watts"] for k, p in points.items()}, supply=supply, assumed=assumed)


SCALE = checks.rule(checks.scalar, minimum=0.05, maximum=20.0)


@checks.validated(workloads=checks.rule(checks.instances, Workload), power_scale=SCALE,
                  supply=checks.rule(checks.optional, checks.kind(dict)))
def sourced_profiles(workloads: list[Workload], power_scale: float = 1.0, supply: dict | None = None) -> list[Hardware]:
    """NVIDIA's chips with sourced prices, then TPU7x and Trainium2 at their labelled power and price
    assumptions, the power times ``power_scale``; ``supply`` maps chip names to chips that exist."""
    supply = {} if supply is None else supply
    out = [_profile(n, workloads, float(catalog.rental_usd_per_hour(n)), chip(n).power_w, False, supply.get(n, np.inf)) for n in NVIDIA]
    out += [_profile(n, workloads, assumed_price(n), assumed_power_w(n) * power_scale, True, supply.get(n, np.inf))
            for n in OTHERS]
    return out


@dataclass(frozen=True)
class JalapenoAssumptions:
    """What the book does not know about Jalapeño, as explicit assumptions; the defaults are
    labelled rows of data/assumptions.csv.

    tflops: its dense peak FLOP/s (one figure for every format), in TFLOP/s.
    hbm_gb: its memory per chip, GB.
    capacity_scale: a multiple of the capacity the solved chip gives at every target (1: as solved),
        the reader's per-watt lever: at the same draw, tokens per watt scale with it.
    usd_per_watt_hour_vs_gb200: its price per watt of rating relative to GB200's.
    supply_chips: how many Jalapeño chips exist for this fleet.
    """

    tflops: float = field(default_factory=lambda: catalog.assumption("jalapeno_tflops"))
    hbm_gb: float = field(default_factory=lambda: catalog.assumption("jalapeno_hbm_gb"))
    capacity_scale: float = 1.0
    usd_per_watt_hour_vs_gb200: float = field(
        default_factory=lambda: catalog.assumption("jalapeno_usd_per_watt_hour_vs_gb200"))
    supply_chips: float = field(default_factory=lambda: catalog.assumption("jalapeno_supply_chips"))

    def __post_init__(self) -> None:
        checks.scalar("tflops", self.tflops, exclusive_minimum=0.0, maximum=1e6)
        checks.scalar("hbm_gb", self.hbm_gb, exclusive_minimum=0.0, maximum=1e5)
        checks.scalar("capacity_scale", self.capacity_scale, minimum=0.01, maximum=100.0)
        checks.scalar("usd_per_watt_hour_vs_gb200", self.usd_per_watt_hour_vs_gb200, minimum=0.0, maximum=1000.0)
        _supply("supply_chips", self.supply_chips)


JALAPENO = checks.kind(JalapenoAssumptions)


def reported_models() -> tuple[str, ...]:
    """The models with a reported Jalapeño point (data/benchmark_results.csv)."""
    return _reported_models()


@data.cached
def _reported_models() -> tuple[str, ...]:
    # read once per data folder: every Jalapeño profile checks its workloads' models against it
    results = catalog.results()
    return tuple(dict.fromkeys(results.loc[results["system"] == catalog.CANDIDATE, "model"]))


def _reported_workload(name: str, value) -> Workload:
    value = checks.instance(name, value, Workload)
    if value.model not in reported_models():
        raise ValueError(f"{name}: Jalapeño has a reported point only for {reported_models()}, not {value.model!r}")
    return value


@data.stored
def _solved(model: str, tflops: float, hbm_gb: float) -> tuple[Chip, dict]:
    point = catalog.results().set_index(["model", "system"]).loc[(model, catalog.CANDIDATE)]
    solved = inverse.inverse(model, float(point["interactivity"]), float(point["tps_per_kw"]), JALAPENO_CHIPS,
                             JALAPENO_BATCH, assumptions=JALAPENO_SERVING, tflops=tflops)
    if not solved["solvable"]:
        raise ValueError(f"tflops: at {tflops:,.0f} TFLOP/s no bandwidth reaches Jalapeño's reported "
                         f"{float(point['interactivity']):,.0f} tokens/s per user for {model!r}; give more")
    device = reader_chip(solved["bandwidth_tb_s"], tflops, hbm_gb, solved["power_w"], domain=JALAPENO_CHIPS)
    return device, {**solved, "interactivity": float(point["interactivity"]), "tps_per_kw": float(point["tps_per_kw"])}


@checks.validated(model=checks.rule(checks.choice, reported_models()), assumptions=JALAPENO)
def jalapeno_chip(model: str, assumptions: JalapenoAssumptions) -> tuple[Chip, dict]:
    """The assumed chip behind Jalapeño's reported point for ``model`` and the inverse's answer
    (bandwidth, power, and the reported point it passes through)."""
    device, solved = _solved(model, float(assumptions.tflops), float(assumptions.hbm_gb))
    return device, dict(solved)


@data.stored
def _jalapeno_point(model: str, tflops: float, hbm_gb: float, isl: float, osl: float, min_rate: float) -> dict:
    device, _ = _solved(model, tflops, hbm_gb)
    spec = model_spec(model)
    frame = serving.sweep_chip.unchecked(spec, device, isl, osl, JALAPENO_SERVING)
    return _point(spec, device, _best(frame, min_rate), isl, osl, JALAPENO_SERVING)


@checks.validated(workload=_reported_workload, assumptions=JALAPENO)
def jalapeno_point(workload: Workload, assumptions: JalapenoAssumptions) -> dict:
    """The assumed Jalapeño chip's best point for a workload, as :func:`operating_point` (before
    ``capacity_scale``)."""
    return dict(_jalapeno_point(workload.model, float(assumptions.tflops), float(assumptions.hbm_gb),
                                workload.isl_tokens, workload.osl_tokens, workload.min_tokens_per_s_per_user))


def _reported_workloads(name: str, value) -> list[Workload]:
    value = checks.instances(name, value, Workload)
    for w in value:
        _reported_workload(name, w)
    return value


@checks.validated(workloads=_reported_workloads, assumptions=JALAPENO)
def jalapeno_profile(workloads: list[Workload], assumptions: JalapenoAssumptions) -> Hardware:
    """Jalapeño under the reader's assumptions (labelled as such): capacity and average draw per
    workload from its assumed chip for that workload's model; rating 700 W (reported), the peak a
    site provisions; price per watt of rating relative to GB200's."""
    rated = catalog.power_w(catalog.CANDIDATE, "chip_rated")
    gb200_price = float(catalog.rental_usd_per_hour("gb200"))
    points = {w.name: jalapeno_point.unchecked(w, assumptions) for w in workloads}
    return Hardware(
        name="jalapeno", label="Jalapeño (assumed)",
        usd_per_hour=gb200_price / chip("gb200").power_w * rated * assumptions.usd_per_watt_hour_vs_gb200,
        power_w=rated, capacity={k: p["capacity"] * assumptions.capacity_scale for k, p in points.items()},
        instance_chips={k: p["chips"] for k, p in points.items()},
        watts={k: min(p["watts"], rated) for k, p in points.items()},
        supply=assumptions.supply_chips, assumed=True)
