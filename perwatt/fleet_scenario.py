"""The book's fleet scenario: two models, four workloads, NVIDIA, Google, AWS and an assumed Jalapeño.

Every number of the scenario is a labelled row of ``data/assumptions.csv`` or a sourced figure in
``data/``: the fleet's output, its split by model and workload, each workload's lengths and speed
target, Jalapeño's supply, and the power and price of the chips with none published. The reader's
levers are arguments: the agent calls' speed target, the electricity price, a site power budget,
the assumed power of TPU7x and Trainium2, supply limits and :class:`JalapenoAssumptions`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from perwatt import catalog, checks, data, fleet_profiles
from perwatt.fleet import SITE_MW, Workload, _supply, assign
from perwatt.fleet_profiles import JALAPENO, SCALE, JalapenoAssumptions

#: The models the fleet serves.
MODELS = ("gpt-oss-120b", "deepseek-r1")
#: The scenario's workloads: their lengths' source and their speed target's assumption.
KINDS = ("chat", "agent", "batch", "long")
KIND_LABELS = {"chat": "chat (1k/1k)", "agent": "agent calls (8k/1k)", "batch": "batch (1k/8k)",
               "long": "long context (32k/1k)"}
RATE_ARG = checks.rule(checks.scalar, minimum=checks.MIN_RATE, maximum=checks.MAX_RATE)


def _per_chip(check):
    """An optional dict from chip names to numbers, each checked by ``check``."""
    def checked(name: str, value):
        if value is None:
            return None
        value = checks.instance(name, value, dict)
        for key, item in value.items():
            checks.instance(f"{name} (its keys)", key, str)
            check(f"{name}[{key!r}]", item)
        return value
    return checked


_SUPPLY = _per_chip(_supply)
_SCALES = _per_chip(SCALE)


def _lengths(kind: str) -> tuple[float, float]:
    if kind == "long":
        return catalog.assumption("long_context_isl_tokens"), float(catalog.workload("1k/1k")["osl_tokens"])
    row = catalog.workload({"chat": "1k/1k", "agent": "8k/1k", "batch": "1k/8k"}[kind])
    return float(row["isl_tokens"]), float(row["osl_tokens"])


def _shares() -> dict[str, float]:
    a = catalog.assumption
    rest = {"agent": a("fleet_agent_share"), "batch": a("fleet_batch_share"), "long": a("fleet_long_context_share")}
    return {"chat": 1.0 - sum(rest.values()), **rest}


@checks.validated(agent_min_rate=RATE_ARG)
def scenario_workloads(agent_min_rate: float) -> list[Workload]:
    """Each model's four workloads, named ``"<model> <kind>"``, with volumes from the assumed split
    of the fleet's output and targets from the assumptions (agent calls at ``agent_min_rate``)."""
    return list(_workloads(float(agent_min_rate)))


@data.cached
def _workloads(agent_min_rate: float) -> tuple[Workload, ...]:
    # built once per target: every scenario, profile and table of the chapter asks for them
    a = catalog.assumption
    total, r1 = a("fleet_output_tokens_per_s"), a("fleet_deepseek_r1_share")
    targets = {"chat": a("chat_min_tokens_per_s_per_user"), "agent": agent_min_rate,
               "batch": a("batch_min_tokens_per_s_per_user"), "long": a("long_context_min_tokens_per_s_per_user")}
    out = []
    for model, share in zip(MODELS, (1 - r1, r1)):
        for kind, part in _shares().items():
            isl, osl = _lengths(kind)
            out.append(Workload(f"{model} {kind}", isl, osl, targets[kind], total * share * part, model))
    return tuple(out)


@checks.validated(workload=checks.TEXT)
def kind_of(workload: str) -> str:
    """The kind (chat, agent, batch, long) of a scenario workload's name."""
    kind = workload.rsplit(" ", 1)[-1]
    if kind not in KINDS:
        raise ValueError(f"workload must end in one of {KINDS}, got {workload!r}")
    return kind


@checks.validated(agent_min_rate=RATE_ARG, power_scale=SCALE, assumptions=checks.rule(checks.optional, JALAPENO),
                  supply=_SUPPLY)
def hardware(agent_min_rate: float, power_scale: float = 1.0, assumptions: JalapenoAssumptions | None = None,
             supply: dict | None = None) -> list:
    """The scenario's hardware profiles (sourced and assumed) for its workloads (shared between
    calls with the same arguments: the profiles are frozen, not to be changed in place)."""
    assumptions = JalapenoAssumptions() if assumptions is None else assumptions
    return list(_kit(float(agent_min_rate), float(power_scale), assumptions,
                     None if supply is None else tuple(sorted(supply.items()))))


@data.cached
def _kit(agent_min_rate: float, power_scale: float, assumptions: JalapenoAssumptions,
         supply: tuple | None) -> tuple:
    # built once per set of arguments: the chapter's figure and table ask for each kit many times
    workloads = scenario_workloads(agent_min_rate)
    return tuple(fleet_profiles.sourced_profiles(workloads, power_scale, None if supply is None else dict(supply))
                 + [fleet_profiles.jalapeno_profile(workloads, assumptions)])


@checks.validated(agent_min_rate=RATE_ARG, price_usd_per_kwh=checks.PRICE, site_mw=SITE_MW, power_scale=SCALE,
                  assumptions=checks.rule(checks.optional, JALAPENO), integral=checks.FLAG,
                  supply=_SUPPLY, price_scale=_SCALES)
def scenario(agent_min_rate: float, price_usd_per_kwh: float, site_mw: float | None = None, power_scale: float = 1.0,
             assumptions: JalapenoAssumptions | None = None, integral: bool = True, supply: dict | None = None,
             price_scale: dict | None = None) -> pd.DataFrame:
    """The cheapest plan for the scenario in liquid-cooled racks (InferenceX's direct-liquid PUE);
    ``price_scale`` multiplies named chips' hourly prices (for the sensitivity table)."""
    workloads = scenario_workloads(agent_min_rate)
    kit = hardware(agent_min_rate, power_scale, assumptions, supply)
    if price_scale:
        kit = [dataclasses.replace(h, usd_per_hour=h.usd_per_hour * float(price_scale.get(h.name, 1.0))) for h in kit]
    for w in workloads:
        if w.output_tokens_per_s > 0 and not any(h.capacity[w.name] > 0 for h in kit):
            raise ValueError(f"agent_min_rate must be a speed some chip reaches: no chip serves {w.name} at "
                             f"{w.min_tokens_per_s_per_user:g} tokens/s per user")
    frame = assign(workloads, kit, price_usd_per_kwh, catalog.facility_pue(), integral=integral, site_mw=site_mw)
    frame["kind"] = frame["workload"].map(kind_of)
    return frame


@checks.validated(agent_min_rate=RATE_ARG)
def domain_effect(agent_min_rate: float) -> pd.DataFrame:
    """B200 (NVLink domain of 8) beside GB200 (72) for each scenario workload: capacity per chip,
    chips per instance, and the ratios of their capacity and of their US$ per million output tokens
    (NaN where either chip reaches no point at the target: the ratio is unknown)."""
    workloads = scenario_workloads(agent_min_rate)
    rows = []
    prices = {n: catalog.rental_usd_per_hour(n) for n in ("b200", "gb200")}
    for w in workloads:
        b, g = (fleet_profiles.operating_point(n, w) for n in ("b200", "gb200"))
        rows.append({"workload": w.name, "model": w.model, "kind": kind_of(w.name),
                     "b200_capacity": b["capacity"], "gb200_capacity": g["capacity"],
                     "b200_chips": b["chips"], "gb200_chips": g["chips"],
                     "capacity_ratio": g["capacity"] / b["capacity"] if b["capacity"] > 0 else np.nan,
                     "cost_ratio": (prices["gb200"] / g["capacity"]) / (prices["b200"] / b["capacity"])
                     if b["capacity"] > 0 and g["capacity"] > 0 else np.nan})
    return pd.DataFrame(rows)


def _summary(frame: pd.DataFrame) -> dict:
    used = frame.groupby("hardware")["chips"].sum()
    return {"usd_per_hour": float(frame["total_usd_per_hour"].iloc[0]), "jalapeno_chips": float(used.get("jalapeno", 0)),
            "largest": str(used.idxmax()), "peak_mw": float(frame["total_peak_mw"].iloc[0])}


@checks.validated(agent_min_rate=RATE_ARG, price_usd_per_kwh=checks.PRICE, site_mw=SITE_MW)
def sensitivity(agent_min_rate: float, price_usd_per_kwh: float, site_mw: float | None = None) -> pd.DataFrame:
    """A tornado table: each assumption moved to a low and a high value, the rest at the base
    case, with the plan's cost per hour at each, its change from the base, the Jalapeño chips and
    the chip with the most chips in the plan (None at an end where no plan serves every workload).
    Rows sorted by the widest swing first, an end with no plan first of all (``swing_pct`` infinite)."""
    base = scenario(agent_min_rate, price_usd_per_kwh, site_mw)
    jal = JalapenoAssumptions()
    peak = float(base["total_peak_mw"].iloc[0])
    gb200_used = float(base.query("hardware == 'gb200'")["chips"].sum())
    cases = [
        ("electricity price, US$/kWh", price_usd_per_kwh / 2, price_usd_per_kwh * 2,
         lambda v: scenario(agent_min_rate, v, site_mw)),
        ("NVIDIA rental prices, × sourced", 0.75, 1.25,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, site_mw, price_scale=dict.fromkeys(
             fleet_profiles.NVIDIA, v))),
        ("Jalapeño price per watt, × GB200's", 0.5, 2.0,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, site_mw,
                            assumptions=dataclasses.replace(jal, usd_per_watt_hour_vs_gb200=v))),
        ("Jalapeño supply, chips", jal.supply_chips / 2, jal.supply_chips * 2,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, site_mw,
                            assumptions=dataclasses.replace(jal, supply_chips=v))),
        ("GB200 supply, × the base plan's GB200s", 0.5, 1.0,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, site_mw, supply={"gb200": np.floor(gb200_used * v)})),
        ("agent calls' target, tokens/s per user", agent_min_rate * 0.6, agent_min_rate * 1.4,
         lambda v: scenario(v, price_usd_per_kwh, site_mw)),
        ("site power budget, × the base plan's peak", 0.9, 2.0,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, peak * v)),
        ("Jalapeño per watt, × the solved chip's", 0.5, 1.5,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, site_mw,
                            assumptions=dataclasses.replace(jal, capacity_scale=v))),
        ("TPU7x and Trainium2 power, × assumed", 0.5, 2.0,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, site_mw, power_scale=v)),
        ("TPU7x and Trainium2 price, × assumed", 0.8, 1.25,
         lambda v: scenario(agent_min_rate, price_usd_per_kwh, site_mw, price_scale=dict.fromkeys(fleet_profiles.OTHERS, v))),
    ]
    b = _summary(base)
    rows = []
    for name, low, high, run in cases:
        row = {"assumption": name, "low": float(low), "high": float(high), "base_usd_per_hour": b["usd_per_hour"]}
        for end, value in (("low", low), ("high", high)):
            try:
                s = _summary(run(value))
            except ValueError:  # the change makes the scenario infeasible: say so, do not guess
                # (a solver time-out is a RuntimeError and propagates: it proves nothing)
                s = {"usd_per_hour": None, "jalapeno_chips": None, "largest": None, "peak_mw": None}
            row.update({f"{end}_{k}": v for k, v in s.items()})
            row[f"{end}_change_pct"] = (None if s["usd_per_hour"] is None
                                        else (s["usd_per_hour"] / b["usd_per_hour"] - 1) * 100)
        rows.append(row)
    out = pd.DataFrame(rows)
    changes = out[["low_change_pct", "high_change_pct"]].astype(float)
    # A change that leaves no plan at all changes the answer most: it sorts first.
    swing = changes.abs().max(axis=1).where(changes.notna().all(axis=1), np.inf)
    return out.assign(swing_pct=swing).sort_values("swing_pct", ascending=False, kind="stable").reset_index(drop=True)
