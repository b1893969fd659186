"""Reading the per-kW frontiers of several chips at once: their bands, the best each reaches at a
per-user target, and the ratio of two chips along the targets.

A band is drawn from three cases of :mod:`perwatt.crosschip`'s frontier, which differ only in the
bandwidth efficiency (:func:`efficiency_band`): the lowest and highest that fit one measured chip's
own InferenceX points, and the fitted value.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from perwatt import calibration, catalog, checks, data, power
from perwatt.crosschip import (ASSUMED, POWER_BASES, POWERED, PRECISION, READER, best_at, frontier,
                               with_efficiency)
from perwatt.specs import DEFAULTS, Assumptions, Chip, chip, known_chips

#: The three cases a band is drawn from: the lowest and highest per-chip efficiency and the fit.
CASES = ("low", "central", "high")
#: The per-user targets a curve is read at (tokens/s per user), for bands and ratios.
TARGETS = (1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0, 70.0, 100.0, 150.0, 200.0, 300.0, 500.0, 700.0,
           1000.0, 1500.0, 2000.0, 3000.0, 5000.0, 7000.0, 10000.0, 20000.0)


def efficiency_band() -> dict[str, float]:
    """Bandwidth efficiency per case: the fitted value, and the lowest and highest that fit one
    measured chip's own points (:func:`perwatt.calibration.bandwidth_efficiency_by_chip`)."""
    by_chip = calibration.bandwidth_efficiency_by_chip()["bandwidth_efficiency"]
    return {"low": float(by_chip.min()), "central": DEFAULTS.bandwidth_efficiency, "high": float(by_chip.max())}


@checks.validated(system=checks.TEXT, reader=checks.rule(checks.optional, checks.kind(Chip)),
                  assumed_power_w=checks.rule(checks.optional, checks.rule(checks.nonnegative,
                                                                          maximum=checks.MAX_PLAUSIBLE_POWER_W)))
def system_chip(system: str, reader: Chip | None = None, assumed_power_w: float | None = None) -> Chip:
    """The chip behind a system name: the reader's (``"reader"``) or a row of data/accelerators.csv,
    with ``assumed_power_w`` where its power is unpublished (a ValueError if that is not given)."""
    if system == READER:
        if reader is None:
            raise ValueError("reader: the reader's chip was named but not given")
        return reader
    if system not in known_chips():
        raise ValueError(f"system must be {READER!r} or one of {known_chips()}, got {system!r}")
    device = chip(system)
    if not np.isfinite(device.power_w):
        if assumed_power_w is None or assumed_power_w <= 0:
            raise ValueError(f"assumed_power_w: {device.label}'s power is not published; give an assumed power")
        device = dataclasses.replace(device, power_w=float(assumed_power_w))
    return device


def _systems(name: str, value) -> list:
    """One or more system names: the reader's chip or accelerators with memory and bandwidth known."""
    value = checks.instances(name, value, str)
    unknown = [v for v in value if v != READER and v not in known_chips()]
    if unknown:
        raise ValueError(f"{name} must name {READER!r} or accelerators of {known_chips()}, got {unknown}")
    return value


@checks.validated(model=checks.TEXT, systems=_systems, precision=PRECISION,
                  power_basis=checks.rule(checks.choice, POWER_BASES), assumptions=ASSUMED, power_model=POWERED,
                  reader=checks.rule(checks.optional, checks.kind(Chip)),
                  assumed_power_w=checks.rule(checks.optional, checks.rule(checks.nonnegative,
                                                                          maximum=checks.MAX_PLAUSIBLE_POWER_W)))
def curves(model: str, systems: list, precision: str = "as_released", power_basis: str = "rated",
           assumptions: Assumptions = DEFAULTS, power_model: power.PowerModel = power.FITTED,
           reader: Chip | None = None, assumed_power_w: float | None = None) -> pd.DataFrame:
    """Each system's frontier in each case of :data:`CASES` (the bandwidth efficiency of
    :func:`efficiency_band`; every other assumption as given). Systems whose power is unpublished
    are left out unless ``assumed_power_w`` is given; a system that cannot hold the model is left out."""
    band = efficiency_band()
    parts = []
    for system in dict.fromkeys(systems):
        try:
            device = system_chip(system, reader, assumed_power_w)
        except ValueError as error:
            if "assumed_power_w" in str(error):
                continue
            raise
        for case in CASES:
            try:
                front = frontier(model, device, precision, power_basis, with_efficiency(assumptions, band[case]),
                                 power_model)
            except ValueError as error:
                if "does not fit" in str(error):
                    break
                raise
            parts.append(front.assign(system=system, case=case))
    if not parts:
        raise ValueError(f"systems: none of {systems} can be drawn for {model!r}")
    return pd.concat(parts, ignore_index=True)


def _frame_with(*columns: str):
    def check(name: str, value):
        checks.instance(name, value, pd.DataFrame)
        missing = [c for c in columns if c not in value.columns]
        if missing or value.empty:
            raise ValueError(f"{name} must be a non-empty frame with the columns {list(columns)}; it lacks {missing}")
        return value
    return check


@checks.validated(curve_frame=_frame_with("system", "case", "x", "y"), targets=checks.RATE)
def at_targets(curve_frame: pd.DataFrame, targets=TARGETS) -> pd.DataFrame:
    """Per system and target: the most tokens/s per kW at that per-user rate or faster at the fitted
    efficiency (``central``), and the least and most of it across :data:`CASES` (``low``, ``high``);
    a target the fitted case does not reach is left out."""
    targets = np.atleast_1d(np.asarray(targets, dtype=float))
    if targets.ndim != 1:
        raise ValueError(f"targets must be one-dimensional, got shape {targets.shape}")
    rows = []
    for system, part in curve_frame.groupby("system", sort=False):
        values = {case: best_at.unchecked(part[part["case"] == case], targets) for case in CASES}
        for i, t in enumerate(targets):
            if np.isfinite(values["central"][i]):
                # Under the load model a faster chip may draw more, so the ends of the band are the
                # least and most of the three cases, not always the low and high efficiency.
                reached = [values[c][i] for c in CASES if np.isfinite(values[c][i])]
                rows.append({"system": system, "t": float(t), "low": float(min(reached)),
                             "central": float(values["central"][i]), "high": float(max(reached))})
    if not rows:
        raise ValueError(f"targets: no curve reaches any of {list(targets)} tokens/s per user")
    return pd.DataFrame(rows, columns=["system", "t", *CASES])


@checks.validated(read=_frame_with("system", "t", *CASES), a=checks.TEXT, b=checks.TEXT)
def ratio_along(read: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """``a``'s tokens/s per kW ÷ ``b``'s at each target both reach (:func:`at_targets`), with an
    interval: the two chips' efficiencies are taken to vary independently across the band, so the
    ratio's low end is a low ``a`` over a high ``b``."""
    left, right = read[read["system"] == a], read[read["system"] == b]
    both = left.merge(right, on="t", suffixes=("_a", "_b"), how="inner")
    if both.empty:
        raise ValueError(f"a and b: {a!r} and {b!r} reach no target in common")
    out = pd.DataFrame({"t": both["t"].to_numpy(float), "ratio": (both["central_a"] / both["central_b"]).to_numpy(),
                        "ratio_low": (both["low_a"] / both["high_b"]).to_numpy(),
                        "ratio_high": (both["high_a"] / both["low_b"]).to_numpy()})
    return out.reset_index(drop=True)


#: The assumptions :func:`drivers` varies, one at a time, and how each is named in its table.
DRIVERS = {"bandwidth_efficiency": "bandwidth efficiency (per-chip refits)",
           "layer_latency_us": "fixed time per layer (per-chip refits)",
           "power_basis": "power: rated or the load model"}


@checks.validated(model=checks.TEXT, systems=_systems,
                  target=checks.rule(checks.scalar, minimum=checks.MIN_RATE, maximum=checks.MAX_RATE),
                  precision=PRECISION)
def drivers(model: str, systems: list, target: float, precision: str = "as_released") -> pd.DataFrame:
    """Per system with published power and per assumption: the most tokens/s per kW at ``target``
    tokens/s per user or faster at the defaults (rated power), and its low and high ends as that one
    assumption moves across its range (the lowest and highest per-chip refit of
    :func:`perwatt.calibration.refit_by_chip`; rated power and the load model), the rest at their
    defaults; and ``widest``, true for the assumption that moves it most (by high ÷ low). NaN
    where a setting (the defaults, for ``central``) does not reach the target."""
    ranges = {name: calibration.refit_by_chip(name)[name] for name in ("bandwidth_efficiency", "layer_latency_us")}
    rows = []
    for system in dict.fromkeys(systems):
        if system == READER or not chip(system).power_known:
            raise ValueError(f"systems: {system!r} has no published power to read per kW at")
        device = system_chip(system)
        central = float(best_at(frontier(model, device, precision), target)[0])
        for name in DRIVERS:
            if name == "power_basis":
                ends = [central, float(best_at(frontier(model, device, precision, "modelled"), target)[0])]
            else:
                ends = [float(best_at(frontier(model, device, precision, "rated",
                                               dataclasses.replace(DEFAULTS, **{name: float(v)})), target)[0])
                        for v in (ranges[name].min(), ranges[name].max())]
            rows.append({"system": system, "assumption": DRIVERS[name], "central": central,
                         "low": float(np.nanmin(ends)) if np.isfinite(ends).any() else np.nan,
                         "high": float(np.nanmax(ends)) if np.isfinite(ends).any() else np.nan,
                         "reached_by_all": bool(np.isfinite(ends).all())})
    out = pd.DataFrame(rows)
    spread = out["high"] / out["low"]
    out["widest"] = spread.eq(spread.groupby(out["system"]).transform("max")) & spread.notna()
    return out


def reported_intervals() -> pd.DataFrame:
    """The table's Jalapeño points with the intervals their printing allows: each figure ± half its
    last printed digit, and, if its TPS/kW was counted at the 700 W rating, the least it could be per
    kW actually drawn, given the reported draw of 550 W or less (an upper bound, so no most)."""
    long = data.load("benchmark_results")
    long = long[long["system"] == catalog.CANDIDATE].set_index(["model", "metric"])
    rated, drawn = catalog.power_w(catalog.CANDIDATE, "chip_rated"), catalog.power_w(catalog.CANDIDATE, "chip_measured")
    rows = []
    for model in dict.fromkeys(long.index.get_level_values("model")):
        rate, tpw = long.loc[(model, "interactivity")], long.loc[(model, "tps_per_kw")]
        half_rate, half_tpw = 0.5 * 10.0 ** -int(rate["decimals"]), 0.5 * 10.0 ** -int(tpw["decimals"])
        rows.append({"model": model, "rate": rate["value"], "rate_low": rate["value"] - half_rate,
                     "rate_high": rate["value"] + half_rate, "tps_per_kw": tpw["value"],
                     "tps_per_kw_low": tpw["value"] - half_tpw, "tps_per_kw_high": tpw["value"] + half_tpw,
                     "per_drawn_kw_at_least": (tpw["value"] - half_tpw) * rated / drawn})
    return pd.DataFrame(rows)
