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
for this structure (:func:`_cheapest_plan`, below) proves it, and SciPy's HiGHS, with no relative gap
allowed, settles what that solver does not take on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import pandas as pd
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from perwatt import checks, data


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
        checks.choice("model", self.model, _models())


@data.cached
def _models() -> tuple[str, ...]:
    # read once per data folder, not once per workload (a chapter builds thousands)
    return tuple(data.load("model_specs")["model"])


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
        checks.usd_per_chip_hour("usd_per_hour", self.usd_per_hour)
        checks.power_w("power_w", self.power_w)
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
#: the exact search hands a programme over: none of the book's). HiGHS took about 4 s and 14,000
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
    Whole instances: :func:`_cheapest_plan` where the programme has the fleet's structure and the
    search stays small, else HiGHS. Returns the solver's status, message and solution (read-only:
    every caller shares it)."""
    x = None
    if integral:
        try:
            x = _cheapest_plan(np.frombuffer(costs, dtype=float), np.frombuffer(matrix, dtype=float).reshape(shape),
                               np.array(lower, dtype=float), np.array(upper, dtype=float))
            status, message = 0, "Optimal (whole instances, proven by the fleet's exact search)."
        except _Fallback:
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


# The exact solver for the fleet's programmes.
#
# The programme: whole instances x[w, h] ≥ 0 of hardware h serving workload w, at least cost c·x,
# each workload's volume covered (a[w]·x[w] ≥ d[w]), and a few coupling rows R[k]·x ≤ b[k] (chips of
# one kind that exist, the site's power). HiGHS proves such a programme optimal by branch and bound
# on its linear relaxation, whose bound is weak here: rounding every workload up to whole instances
# costs tens of dollars an hour above it, and proving that no other rounding is cheaper took it up
# to 4.6 s. The search below uses the structure instead:
#
# 1. The linear relaxation's duals λ price the coupling rows. With them, the cost of any plan is
#    L + Σ_w excess_w + λ·(b - R·x), where L = Σ_w K_w - λ·b, K_w is workload w's least cost alone
#    at the priced costs c + λ·R (an integer knapsack, solved exactly), and excess_w ≥ 0 is how much
#    dearer workload w's part of the plan is than K_w. So a plan costing at most C = L + g has every
#    excess_w ≤ g: each workload's candidates are the (few) whole-instance covers within g of its
#    least cost, enumerated exactly.
# 2. One coupling row of whole chips (the supply of the most contended kind) is kept exact: tables
#    over its chips give, for any workloads, the least cost of serving them within a number of those
#    chips (the other rows still priced by λ). A candidate whose cost plus the least cost of the
#    other workloads within the chips it leaves exceeds C is dropped, and the same tables bound every
#    partial plan of the search.
# 3. A search over the workloads combines candidates, checking every coupling row exactly and
#    dropping a partial plan when another costs less (beyond rounding) and uses no more of any row.
# 4. If the cheapest plan found costs at most C, no plan outside the search is cheaper: it is the
#    optimum. Otherwise g grows and the search repeats. Once C is above what every plan in which
#    each instance is needed could cost and nothing was found, there is no plan.
# A coupling row slack in the relaxation (no price) is left out until a plan breaks it: a plan
# optimal without a row and within it is optimal with it.
#
# Feasibility is exact in float64, as assign computes its rows: a plan short of a workload's volume
# by any amount is no plan. (HiGHS accepts rows missed by up to its tolerance, 1e-6; the book's
# plans have tokens per second to spare, and are the same either way.)
#
# Ties: costs are compared exactly (as the rationals the float64 costs are) among plans within
# rounding of the cheapest, and of plans of exactly equal cost the one first in lexicographic order
# of x (workload by workload, hardware in the order given) is returned; every instance in it is
# needed (no plan with an instance that could be dropped is ever returned). HiGHS breaks such ties
# however its search happens to meet them.
#
# Where the programme lacks the structure, its linear relaxation is infeasible or unbounded (no plan:
# HiGHS says so in its own words), or the search would grow past _MAX_ROWS rows, _Fallback hands it
# to HiGHS.

#: Most rows (partial plans, or partial covers) the search holds at once before it hands the
#: programme to HiGHS: a few hundred megabytes at most.
_MAX_ROWS = 3_000_000
#: Most chips of the exactly-handled coupling row (its tables have one entry per chip).
_MAX_TABLE_CHIPS = 100_000


class _Fallback(Exception):
    """The programme is not for the exact search; HiGHS solves it."""


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each parent i, counts[i] children: each child's parent and its number 0..counts[i]-1."""
    total = int(counts.sum())
    if total > _MAX_ROWS:
        raise _Fallback(f"the search would hold {total:,} rows")
    parent = np.repeat(np.arange(counts.size), counts)
    return parent, np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def _smallest_cover(cap: np.ndarray, a: float, d: np.ndarray) -> np.ndarray:
    """The fewest instances t ≥ 0 (of capacity a) with cap + t·a ≥ d, as computed in float64
    (the quotient's ceiling can be one off either way)."""
    t = np.where(d > cap, np.ceil(np.maximum(d - cap, 0.0) / a), 0.0)
    t = np.where((t > 0) & (cap + (t - 1) * a >= d), t - 1, t)
    return np.where(cap + t * a < d, t + 1, t)


def _covers(a: np.ndarray, c: np.ndarray, d: np.ndarray,
            limit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every minimal whole-instance cover of each demand d[i] (one per root i) costing at most limit[i].

    A cover is x ≥ 0, integer, with a·x ≥ d[i]; minimal: no item with x > 0 could lose an instance
    and the rest still cover. Items are chosen worst cost per capacity first, the best last (its count
    follows: the fewest that cover), and a partial cover is dropped as soon as its cost plus the rest
    of the demand at the best remaining ratio exceeds the limit. Returns each cover's root, the covers
    (one row each, items in the given order), their capacities and costs (summed item by item, in
    the order chosen). Items with a = 0 are never used.
    """
    n = a.size
    usable = np.flatnonzero(a > 0)
    root = np.arange(d.size)
    cost, cap = np.zeros(d.size), np.zeros(d.size)
    if usable.size == 0:
        keep = d <= 0
        return root[keep], np.zeros((int(keep.sum()), n)), cap[keep], cost[keep]
    order = usable[np.argsort(-(c[usable] / a[usable]), kind="stable")]
    best_after = np.minimum.accumulate((c[order] / a[order])[::-1])[::-1]
    levels = []  # (parent, count) of each item but the last, to read the covers back at the end
    for k, h in enumerate(order):
        need, lim = d[root], limit[root]
        full = _smallest_cover(cap, a[h], need)  # instances of h that finish the cover alone
        if k == order.size - 1:
            cost, cap = cost + full * c[h], cap + full * a[h]
            keep = np.flatnonzero(cost <= lim)
            last, root, cap, cost = full[keep], root[keep], cap[keep], cost[keep]
            break
        ratio = best_after[k + 1]
        # cost of t instances of h, then the rest at the best remaining ratio: base + t·slope (t < full)
        base = cost + np.maximum(need - cap, 0.0) * ratio
        slope = c[h] - a[h] * ratio
        most = np.floor((lim - base) / slope) if slope > 0 else np.full(cost.size, np.inf)
        partial = np.clip(np.minimum(np.where(base <= lim, most, -1.0) + 1, full), 0, None)
        finish = cost + full * c[h] <= lim  # full = 0: already covered, h stays unused
        counts = (partial + finish).astype(np.int64)
        parent, t = _expand(counts)
        t = t.astype(float)
        t[(np.cumsum(counts) - 1)[finish]] = full[finish]
        cost, cap, root = cost[parent] + t * c[h], cap[parent] + t * a[h], root[parent]
        levels.append((parent, t))
    x = np.zeros((root.size, n))
    x[:, order[-1]] = last
    at = keep
    for h, (parent, t) in zip(order[-2::-1], levels[::-1]):
        x[:, h] = t[at]
        at = parent[at]
    minimal = np.all((x == 0) | (cap[:, None] - a[None, :] < d[root][:, None]), axis=1)
    return root[minimal], x[minimal], cap[minimal], cost[minimal]


def _least_cover(a: np.ndarray, c: np.ndarray, d: float, tol: float,
                 reach: float) -> tuple[float, np.ndarray, np.ndarray, float]:
    """The least cost of a whole-instance cover of d, and every minimal cover within ``reach`` of
    the linear bound (or more): every cover within a limit is enumerated, so the first limit
    (rising from the linear bound) that admits one gives the least cost exactly. Returns the least
    cost, the covers found, their costs and the limit they were enumerated to."""
    if d <= 0:
        return 0.0, np.zeros((1, a.size)), np.zeros(1), np.inf
    usable = a > 0
    floor = d * float(np.min(c[usable] / a[usable]))
    alone = np.array([_smallest_cover(np.zeros(1), ai, np.array([d]))[0] for ai in a[usable]])
    ceiling = float(np.min(c[usable] * alone)) + tol  # one kind alone covers it
    step = max(reach, float(np.min(c[usable])) / 4, tol)
    while True:
        limit = min(floor + step, ceiling)
        _, x, _, value = _covers(a, c, np.array([d]), np.array([limit]))
        if x.shape[0]:
            return float(np.min(value)), x, value, limit
        if limit >= ceiling:
            raise _Fallback("no cover within a single kind's cost")  # float64 rounding; never seen
        step *= 2


def _undominated(cost: np.ndarray, use: np.ndarray, tol: float) -> np.ndarray:
    """Sorted indices of the rows to keep: a row goes when another of the same use in every column
    but the last costs less by more than tol and uses no more of the last. (Rows cheaper within tol
    stay: their order is settled exactly at the end.)"""
    n, k = use.shape
    if n == 0:
        return np.zeros(0, np.int64)
    if k == 0:
        return np.flatnonzero(cost <= cost.min() + tol)
    order = np.lexsort([cost] + [use[:, j] for j in range(k - 2, -1, -1)])
    c, last = cost[order], use[order, -1]
    new = np.ones(n, bool)
    if k > 1:
        groups = use[order, :-1]
        new[1:] = np.any(groups[1:] != groups[:-1], axis=1)
    else:
        new[1:] = False
    group = np.cumsum(new) - 1
    # running least use within each group: shift each group below the previous ones
    shifted = last - group * (2 * (float(np.max(last) - np.min(last)) + 1.0))
    least = np.minimum.accumulate(shifted)
    # the last row of the same group costing less than cost - tol (complex numbers sort by parts)
    cheaper = np.searchsorted(group + 1j * c, group + 1j * (c - tol), side="left") - 1
    first = np.flatnonzero(new)[group]
    dominated = (cheaper >= first) & (least[np.maximum(cheaper, 0)] <= shifted)
    return np.sort(order[~dominated])


def _least_by_use(use: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct use and the least value at it."""
    order = np.lexsort((value, use))
    use, value = use[order], value[order]
    first = np.ones(use.size, bool)
    first[1:] = use[1:] != use[:-1]
    return use[first], value[first]


def _combine(use: np.ndarray, value: np.ndarray, table: np.ndarray) -> np.ndarray:
    """out[r] = least value[i] + table[r - use[i]] over i with use[i] ≤ r, r = 0..len(table)-1."""
    size = table.size
    out = np.full(size, np.inf)
    chunk = max(1, 2_000_000 // size)
    for s in range(0, use.size, chunk):
        shift = np.arange(size)[None, :] - use[s:s + chunk, None]
        vals = np.where(shift >= 0, value[s:s + chunk, None] + table[np.clip(shift, 0, None)], np.inf)
        np.minimum(out, vals.min(axis=0), out=out)
    return out


def _split_least(prefix: np.ndarray, suffix: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Least prefix[r1] + suffix[r - r1] over 0 ≤ r1 ≤ r, for each r in room (r < 0: inf). Only the
    steps of the non-increasing prefix matter: past a step, more chips for the prefix leave fewer
    for the suffix at no gain."""
    top = prefix.size - 1
    steps = np.flatnonzero(np.r_[True, prefix[1:] < prefix[:-1]] & np.isfinite(prefix))
    out = np.full(room.size, np.inf)
    if steps.size == 0:
        return out
    chunk = max(1, 2_000_000 // max(steps.size, 1))
    for s in range(0, room.size, chunk):
        r = room[s:s + chunk, None]
        left = r - steps[None, :]
        vals = np.where(left >= 0, prefix[steps][None, :] + suffix[np.clip(left, 0, top)], np.inf)
        out[s:s + chunk] = vals.min(axis=1)
    return out


def _exact(c: np.ndarray, x: np.ndarray) -> Fraction:
    """c·x exactly, as the rational numbers the float64 costs are."""
    return sum((Fraction(float(ci)) * int(xi) for ci, xi in zip(c.ravel(), x.ravel()) if xi), Fraction(0))


def _structure(c: np.ndarray, matrix: np.ndarray, lower: np.ndarray, upper: np.ndarray):
    """The programme as :func:`assign` builds it, or _Fallback: covering rows first (upper bound
    infinite), each over its own workload's block of variables, then rows R·x ≤ b of non-negative
    coefficients; costs non-negative. Returns c, a (workloads × hardware), d, R (rows × workloads ×
    hardware) and b."""
    nw = int(np.argmin(np.isinf(upper))) if not np.all(np.isinf(upper)) else upper.size
    if nw == 0 or c.size % nw or not (np.all(np.isfinite(c)) and np.all(c >= 0) and np.all(np.isfinite(matrix))):
        raise _Fallback("not the fleet's structure")
    nh = c.size // nw
    blocks = matrix[:nw].reshape(nw, nw, nh)
    a = blocks[np.arange(nw), np.arange(nw)]
    coupling = matrix[nw:]
    if (np.any(blocks != a[:, None, :] * np.eye(nw)[:, :, None]) or np.any(a < 0) or np.any(coupling < 0)
            or np.any(np.isinf(upper[nw:])) or np.any(lower[nw:] > 0) or np.any(upper[nw:] < 0)
            or not np.all(np.isfinite(lower[:nw]))):
        raise _Fallback("not the fleet's structure")
    return c.reshape(nw, nh), a, lower[:nw], coupling.reshape(-1, nw, nh), upper[nw:]


def _cheapest_plan(costs: np.ndarray, matrix: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The optimal whole-instance plan x of a programme built by :func:`assign` (see the notes above),
    with the tie rule stated there; _Fallback where HiGHS must decide."""
    c, a, d, R, b = _structure(costs, matrix, lower, upper)
    nw, nh = c.shape
    if np.any((d > 0) & ~np.any(a > 0, axis=1)):
        raise _Fallback("a workload no hardware serves")
    lp = linprog(costs, A_ub=np.vstack([-matrix[:nw], matrix[nw:]]), b_ub=np.concatenate([-d, b]), bounds=(0, None),
                 method="highs")
    if lp.status != 0:
        raise _Fallback("the linear relaxation is not optimal")
    prices = np.maximum(-np.asarray(lp.ineqlin.marginals)[nw:], 0.0)
    scale = max(1.0, abs(float(lp.fun)))
    tol = 1e-9 * scale  # far above float64 rounding of sums of ~60 costs, far below any real difference
    # Rows slack in the relaxation (no price) are left out until a plan breaks one.
    relaxed_use = matrix[nw:] @ lp.x
    active = [k for k in range(len(b)) if prices[k] > 0 or relaxed_use[k] >= b[k] - 1e-9 * max(1.0, b[k])]
    while True:
        x = _search(c, a, d, R[active], b[active], prices[active], scale, tol)
        broken = [k for k in range(len(b)) if k not in active and np.sum(R[k] * x) > b[k]]
        if not broken:
            break
        active = sorted(active + broken)
    plan = x.ravel()
    if np.any(matrix @ plan < lower) or np.any(matrix @ plan > upper):  # float64 edge: let HiGHS judge
        raise _Fallback("the plan is not feasible as assign computes it")
    return plan


def _search(c, a, d, R, b, prices, scale: float, tol: float) -> np.ndarray:
    """Steps 1-4 of the notes above, for the coupling rows given (all of them checked exactly)."""
    nw, nh = c.shape
    k = len(b)
    whole = [j for j in range(k) if np.all(R[j] == np.round(R[j])) and b[j] == np.floor(b[j])
             and b[j] <= _MAX_TABLE_CHIPS]
    exact = max(whole, key=lambda j: prices[j]) if whole else None
    # usage columns: the exact row first, other whole-chip rows, then the rest (Pareto groups by all but the last)
    cols = ([exact] if exact is not None else []) + [j for j in range(k) if j != exact and j in whole] + \
           [j for j in range(k) if j not in whole]
    R, b, prices = R[cols], b[cols], prices[cols]
    chips = int(b[0]) if exact is not None else 0
    other = slice(1, None) if exact is not None else slice(0, None)
    priced = c + np.tensordot(prices, R, axes=1) if k else c.copy()  # every row priced
    partly = c + np.tensordot(prices[other], R[other], axes=1) if k else c.copy()  # all but the exact row
    offset = float(prices[other] @ b[other]) if k else 0.0
    gap = max(1e-4 * scale, tol)
    seeds = [_least_cover(a[w], priced[w], d[w], tol, gap) for w in range(nw)]
    least = np.array([s[0] for s in seeds])
    found: list = [(s[1], s[2]) for s in seeds]  # each workload's covers, and their priced costs
    limit = np.array([s[3] for s in seeds])  # ... enumerated up to this priced cost
    # No minimal plan costs more than every kind at its most (each alone covering its workload).
    dearest = sum(float(c[w][a[w] > 0] @ _smallest_cover(np.zeros(int(np.sum(a[w] > 0))), a[w][a[w] > 0], d[w]))
                  for w in range(nw)) + tol
    bound = least.sum() - (prices @ b if k else 0.0)
    while True:
        most = bound + gap  # the search finds every plan costing at most this
        top = most + offset + tol
        cands = []
        for w in range(nw):
            if least[w] + gap + tol > limit[w]:
                limit[w] = least[w] + gap + tol
                _, x, _, value = _covers(a[w], priced[w], np.array([d[w]]), np.array([limit[w]]))
                found[w] = (x, value)
            x, value = found[w]
            x = x[value <= least[w] + gap + tol]
            use = x @ R[:, w, :].T if k else np.zeros((x.shape[0], 0))
            cands.append((x, use, x @ partly[w], use[:, 0].astype(np.int64) if exact is not None else np.zeros(x.shape[0], np.int64)))
        steps = [_least_by_use(chip_use, value) for _, _, value, chip_use in cands]
        order = sorted(range(nw), key=lambda w: -steps[w][0].size)
        # after[i][r]: least partly-priced cost of workloads order[i:] within r chips of the exact row;
        # before[i][r]: of order[:i]
        after = [None] * nw + [np.zeros(chips + 1)]
        for i in range(nw - 1, 0, -1):
            after[i] = _combine(*steps[order[i]], after[i + 1])
        before = [np.zeros(chips + 1)]
        if nw > 1:
            u, v = steps[order[0]]
            alone = np.full(chips + 1, np.inf)
            np.minimum.at(alone, u[u <= chips], v[u <= chips])
            before.append(np.minimum.accumulate(alone))
        for i in range(1, nw - 1):
            before.append(_combine(*steps[order[i]], before[i]))
        ordered = []
        for i, w in enumerate(order):
            x, use, value, chip_use = cands[w]
            u, _ = steps[w]
            room = chips - u
            if i == 0:
                others = np.where(room >= 0, after[1][np.clip(room, 0, chips)], np.inf)
            else:
                others = _split_least(before[i], after[i + 1], room)
            keep = value + others[np.searchsorted(u, chip_use)] <= top
            x, use, value = x[keep], use[keep], value[keep]
            keep = _undominated(x @ c[w], use, tol)
            x, use, value = x[keep], use[keep], value[keep]
            by_value = np.argsort(value, kind="stable")
            ordered.append((x[by_value], use[by_value], value[by_value], x[by_value] @ c[w]))
        plan = _combine_workloads(ordered, order, after, b, chips, exact is not None, top, tol, c)
        if plan is not None:
            x, cost = plan
            if cost <= most:
                return x
            gap = min(cost - bound + tol, 2 * gap)  # at most what brings this plan in: the search grows fast with gap
        elif most >= dearest:
            raise _Fallback("no plan at all")  # every minimal plan was within reach: HiGHS says so
        else:
            gap = min(2 * gap, dearest - bound + tol)


def _combine_workloads(cands, order, after, b, chips, has_exact, top, tol, c):
    """Step 3: partial plans over order[:i], extended by workload order[i]'s candidates, keeping
    those that fit every row, whose cost with the least completion stays within top, and that no
    other partial plan dominates. Returns the cheapest complete plan (ties settled exactly) and its
    float cost, or None."""
    nw = len(cands)
    k = b.size
    if any(x.shape[0] == 0 for x, *_ in cands):
        return None
    least_use = np.array([use.min(axis=0) for _, use, _, _ in cands]).reshape(nw, k)
    later_use = np.vstack([np.cumsum(least_use[::-1], axis=0)[::-1][1:], np.zeros((1, k))])
    cost, use, value = np.zeros(1), np.zeros((1, k)), np.zeros(1)
    trace = []
    for i, (x, c_use, c_value, c_cost) in enumerate(cands):
        left = np.clip(chips - use[:, 0], 0, chips).astype(np.int64) if has_exact else np.zeros(cost.size, np.int64)
        parent, j = _expand(np.searchsorted(c_value, top - value - after[i + 1][left], side="right"))
        n_use, n_value = use[parent] + c_use[j], value[parent] + c_value[j]
        left = np.clip(chips - n_use[:, 0], 0, chips).astype(np.int64) if has_exact else np.zeros(parent.size, np.int64)
        ok = np.all(n_use + later_use[i] <= b, axis=1) & (n_value + after[i + 1][left] <= top)
        parent, j, n_use, n_value = parent[ok], j[ok], n_use[ok], n_value[ok]
        if parent.size == 0:
            return None
        n_cost = cost[parent] + c_cost[j]
        keep = _undominated(n_cost, n_use, tol)
        parent, j, cost, use, value = parent[keep], j[keep], n_cost[keep], n_use[keep], n_value[keep]
        trace.append((parent, j))
    plans = []
    for end in np.flatnonzero(cost <= cost.min() + tol):
        x = np.zeros((nw, cands[0][0].shape[1]))
        at = end
        for i in range(nw - 1, -1, -1):
            parent, j = trace[i]
            x[order[i]] = cands[i][0][j[at]]
            at = parent[at]
        plans.append(x)
    exact = [_exact(c, x) for x in plans]
    cheapest = min(exact)
    best = min((x for x, e in zip(plans, exact) if e == cheapest), key=lambda x: tuple(x.ravel()))
    return best, float(cost.min())
