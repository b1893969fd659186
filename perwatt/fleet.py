"""Fleet choices, the solver: which hardware serves which workload, at least cost, in whole instances.

Each workload has a model, a token mix (input and output lengths), a latency target (a minimum number
of tokens per second per user) and a volume (output tokens per second). Each hardware profile has,
for each workload, a capacity (output tokens/s per chip at its best operating point that meets the
target), the chips one serving instance takes there, and the average watts a chip draws there; and,
for the hardware, a rated power (its peak draw), a price per hour and a supply. Profiles are built in
:mod:`perwatt.fleet_profiles`; the book's scenario is :mod:`perwatt.fleet_scenario`.

The cheapest assignment is a mixed-integer linear programme: choose how many instances of each kind
serve each workload, to minimise the hourly cost of chips and electricity, subject to serving every
workload's volume, to the chips of each kind that exist and, optionally, to a site power budget on
the fleet's peak draw (every chip at its rating, times the PUE). The optimum is exact: a solver
for this structure (:mod:`perwatt.fleet_search`) proves it, and SciPy's HiGHS, with no relative gap
allowed, settles what that solver does not take on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import Bounds, LinearConstraint, milp

from perwatt import checks, data, fleet_search, specs


@dataclass(frozen=True)
class Workload:
    name: str
    isl_tokens: float
    osl_tokens: float
    min_tokens_per_s_per_user: float
    output_tokens_per_s: float
    model: str = "gpt-oss-120b"

    def __post_init__(self) -> None:
        checks.instance("name", self.name, str)
        checks.scalar("isl_tokens", self.isl_tokens, minimum=1.0, maximum=checks.MAX_TOKENS)
        checks.scalar("osl_tokens", self.osl_tokens, minimum=1.0, maximum=checks.MAX_TOKENS)
        checks.scalar("min_tokens_per_s_per_user", self.min_tokens_per_s_per_user, minimum=0.0, maximum=checks.MAX_RATE)
        checks.scalar("output_tokens_per_s", self.output_tokens_per_s, minimum=0.0, maximum=checks.MAX_RATE)
        checks.choice("model", self.model, specs.known_models())


def _supply(name: str, value) -> float:
    """A number of chips that exist: whole or not (it is floored), ≥ 0, or infinite (no limit); never NaN."""
    if isinstance(value, (int, float, np.floating)) and not isinstance(value, bool) and value == np.inf:
        return float(value)
    return checks.scalar(name, value, minimum=0.0, maximum=checks.MAX_CHIPS)


def _per_workload(name: str, value: dict, check) -> None:
    checks.instance(name, value, dict)
    for key, item in value.items():
        checks.instance(f"{name} (its keys)", key, str)
        check(f"{name}[{key!r}]", item)


@dataclass(frozen=True)
class Hardware:
    name: str
    label: str
    usd_per_hour: float
    power_w: float  # rated: the most one chip draws, what a site budget must provision
    capacity: dict  # workload name -> output tokens/s per chip meeting its target (0 if none)
    supply: float = np.inf
    assumed: bool = False  # True where the profile rests on the reader's assumptions
    # workload name -> chips in one instance at that capacity; a workload left out is counted in whole chips
    instance_chips: dict = field(default_factory=dict)
    # workload name -> average watts per chip at that operating point; a workload left out draws power_w
    watts: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        checks.instance("name", self.name, str)
        checks.instance("label", self.label, str)
        # One chip's price and power: single numbers. An array passes the range checks element by
        # element (an empty one, with no elements, passes them all), and power_w bounds the watts below.
        checks.usd_per_chip_hour("usd_per_hour", checks.scalar("usd_per_hour", self.usd_per_hour))
        checks.power_w("power_w", checks.scalar("power_w", self.power_w))
        _per_workload("capacity", self.capacity,
                      lambda n, v: checks.scalar(n, v, minimum=0.0, maximum=checks.MAX_RATE))
        _supply("supply", self.supply)
        checks.flag("assumed", self.assumed)
        _per_workload("instance_chips", self.instance_chips,
                      lambda n, v: checks.integer(n, v, maximum=checks.MAX_CHIPS))
        _per_workload("watts", self.watts, lambda n, v: checks.scalar(n, v, minimum=0.0, maximum=self.power_w))

    def chips_per_instance(self, workload: str) -> int:
        """Chips one instance serving ``workload`` takes (1 where the profile gives none)."""
        return int(self.instance_chips.get(workload, 1))

    def average_w(self, workload: str) -> float:
        """Average watts per chip serving ``workload`` (the rating where the profile gives none)."""
        return float(self.watts.get(workload, self.power_w))


@checks.validated(hardware=checks.kind(Hardware), workload=checks.TEXT, price_usd_per_kwh=checks.PRICE,
                  pue=checks.PUE)
def hourly_cost(hardware: Hardware, workload: str, price_usd_per_kwh: float, pue: float) -> float:
    """US$ per chip-hour serving ``workload``: the rental price plus the electricity it draws on
    average there, times the PUE."""
    return hardware.usd_per_hour + hardware.average_w(workload) / 1000 * pue * price_usd_per_kwh


WORKLOADS = checks.rule(checks.instances, Workload)
SITE_MW = checks.rule(checks.optional, checks.rule(checks.scalar, exclusive_minimum=0.0, maximum=1e5))


@checks.validated(workloads=WORKLOADS, hardware=checks.rule(checks.instances, Hardware),
                  price_usd_per_kwh=checks.PRICE, pue=checks.PUE, integral=checks.FLAG, site_mw=SITE_MW)
def assign(workloads: list[Workload], hardware: list[Hardware], price_usd_per_kwh: float, pue: float,
           integral: bool = True, site_mw: float | None = None) -> pd.DataFrame:
    """The cheapest assignment of chips to workloads: one row per workload and hardware.

    Variables: whole numbers of instances of each hardware serving each workload, each instance
    :meth:`Hardware.chips_per_instance` chips (a mixed-integer programme), or, with
    ``integral=False``, fractions of them (the linear-programme relaxation, a lower bound on the
    cost). With ``site_mw``, the fleet's peak draw (chips × rated power × PUE) may not exceed that
    many megawatts. Raises ValueError if some workload cannot be served (no hardware meets its
    target, supply runs out, or the budget is too small), and RuntimeError if the solver stops at
    its time limit, which says nothing about whether a plan exists.
    """
    nw, nh = len(workloads), len(hardware)
    names = [w.name for w in workloads]
    if len(set(names)) < nw or nw * nh > 10_000:
        raise ValueError(f"workloads must have distinct names, and workloads × hardware at most 10,000, got {names!r}")
    for h in hardware:
        if set(names) - set(h.capacity):
            raise ValueError(f"hardware {h.name!r} has no capacity for workloads {sorted(set(names) - set(h.capacity))}")
    # Variable w * nh + h counts instances of hardware h on workload w, each of size[w, h] chips.
    size = np.array([[h.chips_per_instance(w.name) for h in hardware] for w in workloads], dtype=float)
    cost = np.array([[hourly_cost.unchecked(h, w.name, price_usd_per_kwh, pue) for h in hardware] for w in workloads])
    cap = np.array([[h.capacity[w.name] for h in hardware] for w in workloads], dtype=float)
    peak_kw = np.array([h.power_w for h in hardware]) / 1000 * pue
    c = (size * cost).ravel()
    rows, lower, upper = [], [], []
    for i, w in enumerate(workloads):  # serve each workload's volume: Σ_h size·cap·x ≥ volume
        row = np.zeros((nw, nh))
        row[i] = size[i] * cap[i]
        rows.append(row.ravel()), lower.append(w.output_tokens_per_s), upper.append(np.inf)
    for j, h in enumerate(hardware):  # limited supply of a kind of chip: Σ_w size·x ≤ supply
        if np.isfinite(h.supply):
            row = np.zeros((nw, nh))
            row[:, j] = size[:, j]
            rows.append(row.ravel()), lower.append(0.0), upper.append(np.floor(h.supply))
    if site_mw is not None:  # the site's power: Σ size·x·rated·PUE ≤ budget
        rows.append((size * peak_kw[None, :]).ravel()), lower.append(0.0), upper.append(site_mw * 1000)
    matrix = np.array(rows, dtype=float)
    status, message, x = _solve(c.tobytes(), matrix.tobytes(), matrix.shape, tuple(lower), tuple(upper), integral)
    if status == 1:  # HiGHS's time or iteration limit: not a proof that no plan exists
        raise RuntimeError(f"the solver stopped before proving the cheapest plan: {message}")
    if status != 0:
        raise ValueError(f"no assignment serves every workload within the hardware's supply and site_mw: {message}")
    # Integral up to the solver's tolerance: round so that a plan never shows 291.9999 instances.
    instances = (np.round(x) if integral else x).reshape(nw, nh)
    chips = instances * size
    frame = pd.DataFrame({
        "workload": np.repeat(names, nh), "model": np.repeat([w.model for w in workloads], nh),
        "hardware": [h.name for h in hardware] * nw, "hardware_label": [h.label for h in hardware] * nw,
        "assumed": [int(h.assumed) for h in hardware] * nw, "chips_per_instance": size.ravel(),
        "instances": instances.ravel(), "chips": chips.ravel(), "output_tokens_per_s": (chips * cap).ravel(),
        "usd_per_hour": (chips * cost).ravel(), "peak_kw": (chips * peak_kw[None, :]).ravel(),
        "kw": (chips * np.array([[h.average_w(w.name) for h in hardware] for w in workloads]) / 1000 * pue).ravel(),
    })
    per_workload = frame.groupby("workload")[["usd_per_hour", "kw", "output_tokens_per_s"]].transform("sum")
    million_per_hour = per_workload["output_tokens_per_s"] * 3600 / 1e6
    frame["workload_usd_per_million_tokens"] = per_workload["usd_per_hour"] / million_per_hour
    frame["workload_kwh_per_million_tokens"] = per_workload["kw"] / million_per_hour
    frame["total_usd_per_hour"] = float(frame["usd_per_hour"].sum())
    frame["total_peak_mw"] = float(frame["peak_kw"].sum()) / 1000
    frame["total_average_mw"] = float(frame["kw"].sum()) / 1000
    return frame


#: Seconds HiGHS may spend on one programme before the plan is reported as unproven (only where
#: the exact search of :mod:`perwatt.fleet_search` hands a programme over: none of the fleet figure's
#: or the sensitivity table's, but a site too small for any plan, for one). HiGHS took about 4 s and 14,000
#: branch-and-bound nodes on the book's hardest (its fleet figure at a 36 MW site, the assumed
#: chips at half power, a 50 tokens/s agent target) on a shared 2-core machine, the exact search
#: a few tenths of a second; a limit of 20 s was reached when the test suite, a book build and a
#: kernel ran at once.
SOLVER_TIME_LIMIT_S = 120.0


@data.cached
def _solve(costs: bytes, matrix: bytes, shape: tuple[int, int], lower: tuple, upper: tuple,
           integral: bool) -> tuple[int, str, np.ndarray]:
    """The cheapest plan of one programme, given as the bytes of its float64 arrays so that a chapter
    asking the same question twice (a figure's default setting and the prose's plan) solves it once.
    Whole instances: :func:`perwatt.fleet_search.cheapest_plan` where the programme has the fleet's
    structure and the search stays small, else HiGHS. Returns the solver's status, message and solution (read-only:
    every caller shares it)."""
    x = None
    if integral:
        try:
            x = fleet_search.cheapest_plan(np.frombuffer(costs, dtype=float),
                                           np.frombuffer(matrix, dtype=float).reshape(shape),
                                           np.array(lower, dtype=float), np.array(upper, dtype=float))
            status, message = 0, "Optimal (whole instances, proven by the fleet's exact search)."
        except fleet_search.Unsolved:
            x = None
    if x is None:
        try:
            status, message, x = _highs(costs, matrix, shape, lower, upper, integral)
        except _TimedOut as stopped:
            status, message, x = 1, str(stopped), np.zeros(shape[1])
    x = x.copy()
    x.setflags(write=False)
    return status, message, x


class _TimedOut(Exception):
    """HiGHS stopped at its time limit: raised, not returned, so that the store never keeps an
    answer that depends on how busy the machine was."""


@data.stored
def _highs(costs: bytes, matrix: bytes, shape: tuple[int, int], lower: tuple, upper: tuple,
           integral: bool) -> tuple[int, str, np.ndarray]:
    c = np.frombuffer(costs, dtype=float)
    a = np.frombuffer(matrix, dtype=float).reshape(shape)
    # No relative gap: HiGHS's default (0.01 %) lets it stop at a plan a few dollars an hour dearer
    # than the cheapest, and which near-tie it stops at would then decide the plan's composition.
    result = milp(c, constraints=LinearConstraint(a, lower, upper), integrality=np.full(c.size, 1 if integral else 0),
                  bounds=Bounds(0, np.inf), options={"time_limit": SOLVER_TIME_LIMIT_S, "mip_rel_gap": 0.0})
    if result.status == 1:
        raise _TimedOut(str(result.message))
    x = np.zeros(c.size) if result.x is None else np.array(result.x)
    return int(result.status), str(result.message), x
