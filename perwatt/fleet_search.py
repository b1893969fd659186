"""The fleet's cheapest plans in whole instances, proven optimal by a search that uses the
structure of the programmes :func:`perwatt.fleet.assign` builds.

The programme: whole instances x[w, h] ≥ 0 of hardware h serving workload w, at least cost c·x,
each workload's volume covered (a[w]·x[w] ≥ d[w]), and a few coupling rows R[k]·x ≤ b[k] (chips of
one kind that exist, the site's power). HiGHS proves such a programme optimal by branch and bound
on its linear relaxation, whose bound is weak here: rounding every workload up to whole instances
costs tens of dollars an hour above it, and proving that no other rounding is cheaper took it up
to 4.6 s. The search here uses the structure instead:

1. The linear relaxation's duals λ price the coupling rows. With them, the cost of any plan is
   L + Σ_w excess_w + λ·(b - R·x), where L = Σ_w K_w - λ·b, K_w is workload w's least cost alone
   at the priced costs c + λ·R (an integer knapsack, solved exactly), and excess_w ≥ 0 is how much
   dearer workload w's part of the plan is than K_w. So a plan costing at most C = L + g has every
   excess_w ≤ g: each workload's candidates are the (few) whole-instance covers within g of its
   least cost, enumerated exactly.
2. One coupling row of whole chips (the supply of the most contended kind) is kept exact: tables
   over its chips give, for any workloads, the least cost of serving them within a number of those
   chips (the other rows still priced by λ). A candidate whose cost plus the least cost of the
   other workloads within the chips it leaves exceeds C is dropped, and the same tables bound every
   partial plan of the search.
3. A search over the workloads combines candidates, checking every coupling row exactly and
   dropping a partial plan when another costs less (beyond rounding) and uses no more of any row.
4. If the cheapest plan found costs at most C, no plan outside the search is cheaper: it is the
   optimum. Otherwise g grows and the search repeats. Once C is above what every plan in which
   each instance is needed could cost and nothing was found, there is no plan.
A coupling row slack in the relaxation (no price) is left out until a plan breaks it: a plan
optimal without a row and within it is optimal with it.

Feasibility is exact in float64, as assign computes its rows: a plan short of a workload's volume
by any amount is no plan. (HiGHS accepts rows missed by up to its tolerance, 1e-6; the book's
plans have tokens per second to spare, and are the same either way.)

Ties: costs are compared exactly (as the rationals the float64 costs are) among plans within
rounding of the cheapest, and of plans of exactly equal cost the one first in lexicographic order
of x (workload by workload, hardware in the order given) is returned; every instance in it is
needed (no plan with an instance that could be dropped is ever returned). HiGHS breaks such ties
however its search happens to meet them.

Where the programme lacks the structure, its linear relaxation is infeasible or unbounded (no plan:
HiGHS says so in its own words), or the search would grow past :data:`perwatt.covers.MAX_ROWS`
rows, :class:`perwatt.covers.Unsolved` hands it to HiGHS.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from scipy.optimize import linprog

from perwatt.covers import TooMany, Unsolved, covers, expand, least_cover, smallest_cover, undominated

#: Most chips of the exactly-handled coupling row (its tables have one entry per chip).
_MAX_TABLE_CHIPS = 100_000


#: Rows past which a workload's covers wait for the other workloads' tables, which bound them
#: as they are enumerated (a workload with two kinds of chip at nearly the same price per token
#: has hundreds of thousands of covers within reach, nearly all of them useless).
_DEFER_ROWS = 50_000


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


def _weak_steps(usage: np.ndarray, a: np.ndarray, d: float, least: float, price: float,
                chips: int) -> tuple[np.ndarray, np.ndarray]:
    """Uses of a whole-chip row a workload's minimal covers may make (multiples of the items'
    common divisor, up to every item at its most) and a lower bound on the partly priced cost at
    each: the least fully priced cost, less the row's price for the chips used."""
    items = (usage > 0) & (a > 0)
    if d <= 0 or not items.any():
        return np.zeros(1, np.int64), np.array([least])
    step = int(np.gcd.reduce(usage[items].astype(np.int64)))
    most = int(usage[items] @ smallest_cover(np.zeros(int(items.sum())), a[items], d))
    use = np.arange(0, min(most, chips) + 1, step)
    return use, least - price * use


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
    """The programme as :func:`perwatt.fleet.assign` builds it, or Unsolved: covering rows first (upper bound
    infinite), each over its own workload's block of variables, then rows R·x ≤ b of non-negative
    coefficients; costs non-negative. Returns c, a (workloads × hardware), d, R (rows × workloads ×
    hardware) and b."""
    nw = int(np.argmin(np.isinf(upper))) if not np.all(np.isinf(upper)) else upper.size
    if nw == 0 or c.size % nw or not (np.all(np.isfinite(c)) and np.all(c >= 0) and np.all(np.isfinite(matrix))):
        raise Unsolved("not the fleet's structure")
    nh = c.size // nw
    blocks = matrix[:nw].reshape(nw, nw, nh)
    a = blocks[np.arange(nw), np.arange(nw)]
    coupling = matrix[nw:]
    if (np.any(blocks != a[:, None, :] * np.eye(nw)[:, :, None]) or np.any(a < 0) or np.any(coupling < 0)
            or np.any(np.isinf(upper[nw:])) or np.any(lower[nw:] > 0) or np.any(upper[nw:] < 0)
            or not np.all(np.isfinite(lower[:nw]))):
        raise Unsolved("not the fleet's structure")
    return c.reshape(nw, nh), a, lower[:nw], coupling.reshape(-1, nw, nh), upper[nw:]


def cheapest_plan(costs: np.ndarray, matrix: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The optimal whole-instance plan x (flat, workload by workload) of a programme built by
    :func:`perwatt.fleet.assign` (see the module's notes), with the tie rule stated there; Unsolved
    where HiGHS must decide."""
    c, a, d, R, b = _structure(costs, matrix, lower, upper)
    nw, nh = c.shape
    if np.any((d > 0) & ~np.any(a > 0, axis=1)):
        raise Unsolved("a workload no hardware serves")
    lp = linprog(costs, A_ub=np.vstack([-matrix[:nw], matrix[nw:]]), b_ub=np.concatenate([-d, b]), bounds=(0, None),
                 method="highs")
    if lp.status != 0:
        raise Unsolved("the linear relaxation is not optimal")
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
        raise Unsolved("the plan is not feasible as assign computes it")
    return plan


def _search(c, a, d, R, b, prices, scale: float, tol: float) -> np.ndarray:
    """Steps 1-4 of the module's notes, for the coupling rows given (all of them checked exactly)."""
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
    offset = float(prices[other] @ b[other]) if k else 0.0
    gap = max(1e-4 * scale, tol)
    seeds = [least_cover(a[w], priced[w], d[w], tol, gap) for w in range(nw)]
    least = np.array([s[0] for s in seeds])
    found: list = [(s[1], s[2]) for s in seeds]  # each workload's covers, and their priced costs
    limit = np.array([s[3] for s in seeds])  # ... enumerated up to this priced cost
    # No minimal plan costs more than every kind at its most (each alone covering its workload).
    dearest = sum(float(c[w][a[w] > 0] @ smallest_cover(np.zeros(int(np.sum(a[w] > 0))), a[w][a[w] > 0], d[w]))
                  for w in range(nw)) + tol
    bound = least.sum() - (prices @ b if k else 0.0)
    while True:
        most = bound + gap  # the search finds every plan costing at most this
        top = most + offset + tol
        deferred = []
        for w in range(nw):
            if least[w] + gap + tol > limit[w]:
                try:
                    _, x, _, value = covers(a[w], priced[w], np.array([d[w]]), np.array([least[w] + gap + tol]),
                                             most_rows=_DEFER_ROWS if exact is not None else None)
                except TooMany:
                    deferred.append(w)
                    continue
                limit[w] = least[w] + gap + tol
                found[w] = (x, value)

        def candidates(w: int) -> tuple:
            # each cover, its partly priced cost and its chips of the exact row (the other rows later,
            # for the few that pass the tables)
            x, value = found[w]
            keep = value <= least[w] + gap + tol
            x, value = x[keep], value[keep]
            if exact is None:
                return x, value, np.zeros(x.shape[0], np.int64)
            chip_use = x @ R[0, w]
            return x, value - prices[0] * chip_use, chip_use.astype(np.int64)

        cands = [None if w in deferred else candidates(w) for w in range(nw)]
        steps = [None if w in deferred else _least_by_use(cands[w][2], cands[w][1]) for w in range(nw)]
        for w in deferred:
            # A lower bound meanwhile: no cover costs less than the least, less the exact row's price
            # for each chip it may use.
            steps[w] = _weak_steps(R[0, w], a[w], d[w], least[w], prices[0], chips)
        for w in deferred:
            # The others' least cost within the chips w leaves bounds w's covers as they are enumerated.
            others = np.zeros(chips + 1)
            for v in range(nw):
                if v != w:
                    others = _combine(*steps[v], others)
            use = np.arange(chips + 1)
            penalty = np.append(np.minimum.accumulate((others[chips - use] - prices[0] * use)[::-1])[::-1], np.inf)
            _, x, _, value = covers(a[w], priced[w], np.array([d[w]]), np.array([least[w] + gap + tol]),
                                     usage=R[0, w], penalty=penalty, top=top)
            found[w] = (x, value)
            limit[w] = -np.inf  # bounded by this round's tables: enumerated afresh the next round
            cands[w] = candidates(w)
            steps[w] = _least_by_use(cands[w][2], cands[w][1])
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
            x, value, chip_use = cands[w]
            u, _ = steps[w]
            room = chips - u
            if i == 0:
                others = np.where(room >= 0, after[1][np.clip(room, 0, chips)], np.inf)
            else:
                others = _split_least(before[i], after[i + 1], room)
            keep = value + others[np.searchsorted(u, chip_use)] <= top
            x, value = x[keep], value[keep]
            use = x @ R[:, w, :].T if k else np.zeros((x.shape[0], 0))
            keep = undominated(x @ c[w], use, tol)
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
            raise Unsolved("no plan at all")  # every minimal plan was within reach: HiGHS says so
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
        parent, j = expand(np.searchsorted(c_value, top - value - after[i + 1][left], side="right"))
        n_use, n_value = use[parent] + c_use[j], value[parent] + c_value[j]
        left = np.clip(chips - n_use[:, 0], 0, chips).astype(np.int64) if has_exact else np.zeros(parent.size, np.int64)
        ok = np.all(n_use + later_use[i] <= b, axis=1) & (n_value + after[i + 1][left] <= top)
        parent, j, n_use, n_value = parent[ok], j[ok], n_use[ok], n_value[ok]
        if parent.size == 0:
            return None
        n_cost = cost[parent] + c_cost[j]
        keep = undominated(n_cost, n_use, tol)
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
