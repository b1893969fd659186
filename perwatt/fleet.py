"""Fleet choices: which chip serves which workload, at what cost and energy.

Each workload has a token mix (input and output lengths), a latency target (a minimum number of
tokens per second per user) and a volume (output tokens per second). Each hardware profile has a
capacity for each workload (the most output tokens/s per chip it reaches at an operating point
that meets the workload's target, read off the serving model's frontier), the number of chips in
one serving instance at that operating point (the frontier's layouts span from one chip to a whole
NVLink domain, so an instance is the unit a fleet can add), a power and a price per hour. The
cheapest assignment is a mixed-integer linear programme: choose how many instances of each kind
serve each workload, to minimise the hourly cost of chips and electricity, subject to serving every
workload's volume and to any limit on how many chips of a kind exist. SciPy's HiGHS solver finds the
optimum, proved to the solver's tolerance (no relative gap allowed).

NVIDIA profiles come from data/ (sourced). Jalapeño's capacity, price and supply are not published:
:class:`JalapenoAssumptions` holds the reader's assumptions, and every output labels them. Its
instance size is not published either, so it is counted in whole chips.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import Bounds, LinearConstraint, milp

from perwatt import accounting, catalog, checks, data, roofline, serving


@dataclass(frozen=True)
class Workload:
    name: str
    isl_tokens: float
    osl_tokens: float
    min_tokens_per_s_per_user: float
    output_tokens_per_s: float

    def __post_init__(self) -> None:
        checks.instance("name", self.name, str)
        checks.scalar("isl_tokens", self.isl_tokens, minimum=1.0, maximum=checks.MAX_TOKENS)
        checks.scalar("osl_tokens", self.osl_tokens, minimum=1.0, maximum=checks.MAX_TOKENS)
        checks.scalar("min_tokens_per_s_per_user", self.min_tokens_per_s_per_user, minimum=0.0, maximum=checks.MAX_RATE)
        checks.scalar("output_tokens_per_s", self.output_tokens_per_s, minimum=0.0, maximum=checks.MAX_RATE)


def _supply(name: str, value) -> float:
    """A number of chips that exist: whole or not (it is floored), ≥ 0, or infinite (no limit); never NaN."""
    if isinstance(value, (int, float, np.floating)) and not isinstance(value, bool) and value == np.inf:
        return float(value)
    return checks.scalar(name, value, minimum=0.0, maximum=checks.MAX_CHIPS)


@dataclass(frozen=True)
class Hardware:
    name: str
    label: str
    usd_per_hour: float
    power_w: float
    capacity: dict  # workload name -> output tokens/s per chip meeting its target (0 if none)
    supply: float = np.inf
    assumed: bool = False  # True where the profile rests on the reader's assumptions
    # workload name -> chips in one instance at that capacity; a workload left out is counted in whole chips
    instance_chips: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        checks.instance("name", self.name, str)
        checks.instance("label", self.label, str)
        checks.usd_per_chip_hour("usd_per_hour", self.usd_per_hour)
        checks.power_w("power_w", self.power_w)
        checks.instance("capacity", self.capacity, dict)
        for workload, value in self.capacity.items():
            checks.instance("capacity (its keys)", workload, str)
            checks.scalar(f"capacity[{workload!r}]", value, minimum=0.0, maximum=checks.MAX_RATE)
        _supply("supply", self.supply)
        checks.flag("assumed", self.assumed)
        checks.instance("instance_chips", self.instance_chips, dict)
        for workload, value in self.instance_chips.items():
            checks.instance("instance_chips (its keys)", workload, str)
            checks.integer(f"instance_chips[{workload!r}]", value, maximum=checks.MAX_CHIPS)

    def chips_per_instance(self, workload: str) -> int:
        """Chips one instance serving ``workload`` takes (1 where the profile gives none)."""
        return int(self.instance_chips.get(workload, 1))


@dataclass(frozen=True)
class JalapenoAssumptions:
    """What the book does not know about Jalapeño, as explicit assumptions; the defaults are
    labelled rows of data/assumptions.csv.

    per_watt_vs_gb200: Jalapeño's output tokens per watt as a multiple of GB200's at every
        latency target (default: the published gpt-oss-120b ratio, if it held everywhere).
    usd_per_watt_hour_vs_gb200: its price per watt of rating relative to GB200's.
    supply_chips: how many Jalapeño chips exist for this fleet.
    """

    per_watt_vs_gb200: float | None = None
    usd_per_watt_hour_vs_gb200: float = field(
        default_factory=lambda: catalog.assumption("jalapeno_usd_per_watt_hour_vs_gb200"))
    supply_chips: float = field(default_factory=lambda: catalog.assumption("jalapeno_supply_chips"))

    def __post_init__(self) -> None:
        checks.optional("per_watt_vs_gb200", self.per_watt_vs_gb200,
                        checks.rule(checks.scalar, minimum=checks.MIN_MAGNITUDE, maximum=1000.0))
        checks.scalar("usd_per_watt_hour_vs_gb200", self.usd_per_watt_hour_vs_gb200, minimum=0.0, maximum=1000.0)
        _supply("supply_chips", self.supply_chips)


WORKLOAD, WORKLOADS = checks.kind(Workload), checks.rule(checks.instances, Workload)


@checks.validated(model=checks.TEXT, accelerator=checks.TEXT, workload=WORKLOAD)
def capacity(model: str, accelerator: str, workload: Workload) -> float:
    """Best output tokens/s per chip over the frontier among points meeting the workload's target."""
    return _best_point(model, accelerator, workload.isl_tokens, workload.osl_tokens,
                       workload.min_tokens_per_s_per_user)[0]


def _instance_chips(model: str, accelerator: str, workload: Workload) -> int:
    """Chips per instance at :func:`capacity`'s operating point (1 where no point meets the target)."""
    return _best_point(model, accelerator, workload.isl_tokens, workload.osl_tokens,
                       workload.min_tokens_per_s_per_user)[1]


@data.cached
def _best_point(model: str, accelerator: str, isl: float, osl: float, min_rate: float) -> tuple[float, int]:
    """Output tokens/s per chip and chips per instance at the frontier row with the most output
    per chip at or above ``min_rate`` (0 and 1 if none); on a tie in output per chip, the smaller
    instance, which rounds a fleet finer."""
    frontier = serving.frontier(model, accelerator, isl=isl, osl=osl)
    ok = frontier[frontier["tokens_per_s_per_user"] >= min_rate]
    if ok.empty:
        return 0.0, 1
    best = ok.sort_values(["output_tokens_per_s_per_chip", "chips"], ascending=[False, True]).iloc[0]
    return float(best["output_tokens_per_s_per_chip"]), int(best["chips"])


@checks.validated(model=checks.TEXT, workloads=WORKLOADS)
def nvidia_profiles(model: str, workloads: list[Workload]) -> list[Hardware]:
    """Every accelerator with a sourced price and known specifications."""
    prices = data.load("hourly_prices").dropna(subset=["price_usd_per_gpu_hour"]).set_index("system")
    chips = data.load("accelerators").set_index("accelerator")
    known = set(roofline.known_chips())
    profiles = []
    for name, row in prices.iterrows():
        if name not in known:
            continue
        profiles.append(Hardware(
            name=name, label=str(chips.loc[name, "label"]), usd_per_hour=float(row["price_usd_per_gpu_hour"]),
            power_w=float(chips.loc[name, "power_w"]),
            capacity={w.name: capacity(model, name, w) for w in workloads},
            instance_chips={w.name: _instance_chips(model, name, w) for w in workloads},
        ))
    return profiles


@checks.validated(model=checks.TEXT, workloads=WORKLOADS, assumptions=checks.kind(JalapenoAssumptions))
def jalapeno_profile(model: str, workloads: list[Workload], assumptions: JalapenoAssumptions) -> Hardware:
    """Jalapeño built from GB200's profile and the reader's assumptions (labelled as such). Its
    instance size is not published, so it is counted in whole chips (``instance_chips`` empty)."""
    ratio = assumptions.per_watt_vs_gb200
    if ratio is None:
        ratio = float(accounting.pairs().set_index("model").loc[MODEL, "recomputed_ratio"])
    gb200_w = catalog.power_w("gb200", "chip_rated")
    jal_w = catalog.power_w(catalog.CANDIDATE, "chip_rated")
    gb200_price = float(data.load("hourly_prices").set_index("system").loc["gb200", "price_usd_per_gpu_hour"])
    base = {w.name: capacity(model, "gb200", w) for w in workloads}
    return Hardware(
        name="jalapeno", label="Jalapeño (assumed)",
        usd_per_hour=gb200_price / gb200_w * jal_w * assumptions.usd_per_watt_hour_vs_gb200,
        power_w=jal_w,
        capacity={name: cap / gb200_w * ratio * jal_w for name, cap in base.items()},
        supply=assumptions.supply_chips, assumed=True,
    )


@checks.validated(hardware=checks.kind(Hardware), price_usd_per_kwh=checks.PRICE, pue=checks.PUE)
def hourly_cost(hardware: Hardware, price_usd_per_kwh: float, pue: float) -> float:
    """US$ per chip-hour: the rental price plus the electricity it draws at its rating."""
    return hardware.usd_per_hour + hardware.power_w / 1000 * pue * price_usd_per_kwh


@checks.validated(workloads=WORKLOADS, hardware=checks.rule(checks.instances, Hardware),
                  price_usd_per_kwh=checks.PRICE, pue=checks.PUE, integral=checks.FLAG)
def assign(workloads: list[Workload], hardware: list[Hardware], price_usd_per_kwh: float, pue: float,
           integral: bool = True) -> pd.DataFrame:
    """The cheapest assignment of chips to workloads: one row per workload and hardware.

    Variables: whole numbers of instances of each hardware serving each workload, each instance
    :meth:`Hardware.chips_per_instance` chips (a mixed-integer programme), or, with
    ``integral=False``, fractions of them (the linear-programme relaxation, a lower bound on the
    cost). Raises ValueError if some workload cannot be served (no hardware meets its target, or
    supply runs out).
    """
    nw, nh = len(workloads), len(hardware)
    names = [w.name for w in workloads]
    if len(set(names)) < nw or nw * nh > 10_000:
        raise ValueError(f"workloads must have distinct names, and workloads × hardware at most 10,000, got {names!r}")
    for h in hardware:
        if set(names) - set(h.capacity):
            raise ValueError(f"hardware {h.name!r} has no capacity for workloads {sorted(set(names) - set(h.capacity))}")
    cost = np.array([hourly_cost(h, price_usd_per_kwh, pue) for h in hardware])
    # Variable w * nh + h counts instances of hardware h on workload w, each of size[w, h] chips.
    size = np.array([[h.chips_per_instance(w.name) for h in hardware] for w in workloads], dtype=float)
    c = (size * cost).ravel()
    # Serve each workload's volume: Σ_h size·cap·x ≥ volume.
    rows, lower, upper = [], [], []
    for i, w in enumerate(workloads):
        row = np.zeros(nw * nh)
        row[i * nh:(i + 1) * nh] = size[i] * [h.capacity[w.name] for h in hardware]
        rows.append(row)
        lower.append(w.output_tokens_per_s)
        upper.append(np.inf)
    # Limited supply of a kind of chip: Σ_w size·x ≤ supply.
    for j, h in enumerate(hardware):
        if np.isfinite(h.supply):
            row = np.zeros(nw * nh)
            row[j::nh] = size[:, j]
            rows.append(row)
            lower.append(0.0)
            upper.append(np.floor(h.supply))
    # No relative gap: HiGHS's default (0.01 %) lets it stop at a plan a few dollars an hour dearer
    # than the cheapest, and which near-tie it stops at would then decide the plan's composition.
    result = milp(c, constraints=LinearConstraint(np.array(rows), lower, upper),
                  integrality=np.full(nw * nh, 1 if integral else 0), bounds=Bounds(0, np.inf),
                  options={"time_limit": 20, "mip_rel_gap": 0.0})
    if result.status != 0:
        raise ValueError(f"no assignment serves every workload: {result.message}")
    # Integral up to the solver's tolerance: round so that a plan never shows 291.9999 instances.
    instances = (np.round(result.x) if integral else result.x).reshape(nw, nh)
    rows = []
    for i, w in enumerate(workloads):
        for j, h in enumerate(hardware):
            n = float(instances[i, j] * size[i, j])
            rows.append({
                "workload": w.name, "hardware": h.name, "hardware_label": h.label, "assumed": int(h.assumed),
                "chips_per_instance": size[i, j], "instances": float(instances[i, j]),
                "chips": n, "output_tokens_per_s": n * h.capacity[w.name],
                "usd_per_hour": n * cost[j], "kw": n * h.power_w / 1000 * pue,
            })
    frame = pd.DataFrame(rows)
    per_workload = frame.groupby("workload")[["usd_per_hour", "kw", "output_tokens_per_s"]].transform("sum")
    million_per_hour = per_workload["output_tokens_per_s"] * 3600 / 1e6
    frame["workload_usd_per_million_tokens"] = per_workload["usd_per_hour"] / million_per_hour
    frame["workload_kwh_per_million_tokens"] = per_workload["kw"] / million_per_hour
    frame["total_usd_per_hour"] = float(frame["usd_per_hour"].sum())
    return frame


#: The model the fleet scenario serves.
MODEL = "gpt-oss-120b"
#: The workloads standing in for chat and for agent calls.
CHAT_WORKLOAD, AGENT_WORKLOAD = "1k/1k", "8k/1k"


def scenario_workloads(agent_share: float, agent_min_rate: float) -> list[Workload]:
    """Chat (1k/1k, at the chat speed floor of assumptions.csv) and agent calls (8k/1k, at the
    chosen target), splitting the fleet's demand (an assumption) by ``agent_share``."""
    agent_share = checks.scalar("agent_share", agent_share, minimum=0.0, maximum=1.0)
    agent_min_rate = checks.scalar("agent_min_rate", agent_min_rate, minimum=0.0, maximum=checks.MAX_RATE)
    total = catalog.assumption("fleet_output_tokens_per_s")
    chat, agent = catalog.workload(CHAT_WORKLOAD), catalog.workload(AGENT_WORKLOAD)
    return [
        Workload("chat", float(chat["isl_tokens"]), float(chat["osl_tokens"]),
                 catalog.assumption("chat_min_tokens_per_s_per_user"), total * (1 - agent_share)),
        Workload("agent", float(agent["isl_tokens"]), float(agent["osl_tokens"]), agent_min_rate,
                 total * agent_share),
    ]


@checks.validated(price_usd_per_kwh=checks.PRICE, assumptions=checks.rule(checks.optional, checks.kind(JalapenoAssumptions)), integral=checks.FLAG)
def scenario(agent_share: float, agent_min_rate: float, price_usd_per_kwh: float,
             assumptions: JalapenoAssumptions | None = None, integral: bool = True) -> pd.DataFrame:
    """The book's fleet scenario: gpt-oss-120b, chat plus agent work, NVIDIA plus assumed Jalapeño,
    in liquid-cooled racks (InferenceX's direct-liquid PUE)."""
    assumptions = JalapenoAssumptions() if assumptions is None else assumptions
    workloads = scenario_workloads(agent_share, agent_min_rate)
    hardware = nvidia_profiles(MODEL, workloads) + [jalapeno_profile(MODEL, workloads, assumptions)]
    if not any(h.capacity["agent"] > 0 for h in hardware) and workloads[1].output_tokens_per_s > 0:
        raise ValueError(f"agent_min_rate must be a speed some chip reaches: no chip serves {agent_min_rate:g} "
                         "tokens/s per user at any batch")
    return assign(workloads, hardware, price_usd_per_kwh, catalog.facility_pue(), integral=integral)
