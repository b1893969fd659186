"""Whole-instance covers: every way to serve a volume in whole instances of a few kinds, within a
cost, enumerated exactly (an integer covering knapsack, all of its near-optimal solutions).

:mod:`perwatt.fleet_search` builds the fleet's cheapest plans from them. Everything is vectorized:
a partial cover is a row, and each kind in turn multiplies the rows by its possible counts, those
that cannot finish within the limit dropped at once.
"""

from __future__ import annotations

import numpy as np

#: Most rows (partial plans, or partial covers) held at once before the programme is handed to
#: HiGHS: a few hundred megabytes at most.
MAX_ROWS = 3_000_000


class Unsolved(Exception):
    """The exact search does not take this programme on; HiGHS solves it."""


class TooMany(Unsolved):
    """An enumeration would pass the number of rows it was given."""


def expand(counts: np.ndarray, most: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each parent i, counts[i] children: each child's parent and its number 0..counts[i]-1."""
    total = int(counts.sum())
    if total > (MAX_ROWS if most is None else min(most, MAX_ROWS)):
        raise (TooMany if most is not None and total <= MAX_ROWS else Unsolved)(
            f"the search would hold {total:,} rows")
    parent = np.repeat(np.arange(counts.size), counts)
    return parent, np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def smallest_cover(cap: np.ndarray, a: float, d: np.ndarray) -> np.ndarray:
    """The fewest instances t ≥ 0 (of capacity a) with cap + t·a ≥ d, as computed in float64
    (the quotient's ceiling can be one off either way)."""
    t = np.ceil(np.maximum(d - cap, 0.0) / a)
    t -= (t > 0) & (cap + (t - 1) * a >= d)
    t += cap + t * a < d
    return t


def covers(a: np.ndarray, c: np.ndarray, d: np.ndarray, limit: np.ndarray, *, usage: np.ndarray | None = None,
            penalty: np.ndarray | None = None, top: float = np.inf,
            most_rows: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every minimal whole-instance cover of each demand d[i] (one per root i) costing at most limit[i].

    A cover is x ≥ 0, integer, with a·x ≥ d[i]; minimal: no item with x > 0 could lose an instance
    and the rest still cover. Items are chosen worst cost per capacity first, the best last (its count
    follows: the fewest that cover), and a partial cover is dropped as soon as its cost plus the rest
    of the demand at the best remaining ratio exceeds the limit, or (given ``usage``, the items' use
    of a row, and ``penalty``, the least to add to a cover's cost for each use 0..len(penalty)-1 of
    it or more) when that plus the penalty at its use so far exceeds ``top``. Returns each cover's
    root, the covers (one row each, items in the given order), their capacities and costs (summed
    item by item, in the order chosen). Items with a = 0 are never used; more than ``most_rows`` rows
    at a step raise TooMany.
    """
    n = a.size
    usable = np.flatnonzero(a > 0)
    root = np.arange(d.size)
    cost, cap, used = np.zeros(d.size), np.zeros(d.size), np.zeros(d.size)
    bounded = penalty is not None

    def allowed(lower: np.ndarray, use: np.ndarray) -> np.ndarray:
        return lower + penalty[np.minimum(use, penalty.size - 1).astype(np.int64)] <= top
    if usable.size == 0:
        keep = d <= 0
        return root[keep], np.zeros((int(keep.sum()), n)), cap[keep], cost[keep]
    order = usable[np.argsort(-(c[usable] / a[usable]), kind="stable")]
    best_after = np.minimum.accumulate((c[order] / a[order])[::-1])[::-1]
    levels = []  # (parent, count) of each item but the last, to read the covers back at the end
    for k, h in enumerate(order):
        need, lim = d[root], limit[root]
        full = smallest_cover(cap, a[h], need)  # instances of h that finish the cover alone
        if k == order.size - 1:
            cost, cap = cost + full * c[h], cap + full * a[h]
            ok = cost <= lim
            if bounded:
                ok &= allowed(cost, used + full * usage[h])
            keep = np.flatnonzero(ok)
            last, root, cap, cost = full[keep], root[keep], cap[keep], cost[keep]
            break
        ratio = best_after[k + 1]
        # cost of t instances of h, then the rest at the best remaining ratio: base + t·slope (t < full)
        base = cost + np.maximum(need - cap, 0.0) * ratio
        slope = c[h] - a[h] * ratio
        most = np.floor((lim - base) / slope) if slope > 0 else np.full(cost.size, np.inf)
        partial = np.maximum(np.minimum(np.where(base <= lim, most, -1.0) + 1, full), 0.0)
        finish = cost + full * c[h] <= lim  # full = 0: already covered, h stays unused
        counts = (partial + finish).astype(np.int64)
        parent, t = expand(counts, most_rows)
        t = t.astype(float)
        t[(np.cumsum(counts) - 1)[finish]] = full[finish]
        if bounded:
            cost, cap, used = cost[parent] + t * c[h], cap[parent] + t * a[h], used[parent] + t * usage[h]
            ok = np.flatnonzero(allowed(cost + np.maximum(need[parent] - cap, 0.0) * ratio, used))
            parent, t, cost, cap, used = parent[ok], t[ok], cost[ok], cap[ok], used[ok]
            root = root[parent]
        else:
            cost, cap, root = cost[parent] + t * c[h], cap[parent] + t * a[h], root[parent]
        levels.append((parent, t))
    # Each item's counts, read back level by level; a cover is minimal when its smallest item used
    # is too big to drop (float64 subtraction is monotone, so no other item could be dropped).
    columns, at = [(order[-1], last)], keep
    smallest = np.where(last > 0, a[order[-1]], np.inf)
    for h, (parent, t) in zip(order[-2::-1], levels[::-1]):
        count = t[at]
        columns.append((h, count))
        smallest = np.where(count > 0, np.minimum(smallest, a[h]), smallest)
        at = parent[at]
    minimal = np.flatnonzero(cap - smallest < d[root])
    x = np.zeros((minimal.size, n))
    for h, count in columns:
        x[:, h] = count[minimal]
    return root[minimal], x, cap[minimal], cost[minimal]


def least_cover(a: np.ndarray, c: np.ndarray, d: float, tol: float,
                 reach: float) -> tuple[float, np.ndarray, np.ndarray, float]:
    """The least cost of a whole-instance cover of d, and every minimal cover within ``reach`` of
    the linear bound (or more): every cover within a limit is enumerated, so the first limit
    (rising from the linear bound) that admits one gives the least cost exactly. Returns the least
    cost, the covers found, their costs and the limit they were enumerated to."""
    if d <= 0:
        return 0.0, np.zeros((1, a.size)), np.zeros(1), np.inf
    usable = a > 0
    floor = d * float(np.min(c[usable] / a[usable]))
    alone = np.array([smallest_cover(np.zeros(1), ai, np.array([d]))[0] for ai in a[usable]])
    ceiling = float(np.min(c[usable] * alone)) + tol  # one kind alone covers it
    step = max(reach, float(np.min(c[usable])) / 4, tol)
    while True:
        limit = min(floor + step, ceiling)
        _, x, _, value = covers(a, c, np.array([d]), np.array([limit]))
        if x.shape[0]:
            return float(np.min(value)), x, value, limit
        if limit >= ceiling:
            raise Unsolved("no cover within a single kind's cost")  # float64 rounding; never seen
        step *= 2


def undominated(cost: np.ndarray, use: np.ndarray, tol: float) -> np.ndarray:
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
