"""The cost of a token: what a chip-hour costs, and how it is shared among the tokens served in it.

A chip-hour's price comes from one of three **bases** (:data:`BASES`):

* ``rental``: InferenceX's price per GPU-hour (data/hourly_prices.csv). A cloud price covers the
  chip's electricity, so the electricity is a part of the price, not added to it.
* ``custom``: the reader's own price per chip-hour, read the same way.
* ``owned``: the purchase price written off over a lifetime, plus the electricity the chip's power
  draws through the facility (power × PUE × price), plus an operations overhead per chip-hour.
  Purchase prices are analysts' or press figures (data/purchase_prices.csv); the lifetime and the
  overhead are labelled assumptions (data/assumptions.csv).

On every basis the chip-hour is split into **electricity** (what its power costs at the given price
of electricity and PUE) and **hardware**, the rest; for a rental that rest is everything the rent pays
for besides electricity (the chip, the host, the building, the margin).

Tokens per second per chip come from the serving model's per-kW frontier (:mod:`perwatt.crosschip`),
read at both ends of the interactivity curve: its busiest point (``peak``) and the most tokens per kW
at :data:`INTERACTIVE_TARGET` tokens/s per user or faster (``interactive``), as :func:`crosschip.best_at`
reads it.

**How a chip-hour is shared between input and output tokens** is a choice, and this module makes
it by **the serving model's time**: the share of each decode step's time that the model spends on
prefill work (``(tpot − t_decode) ÷ tpot``, the prefill passes each step carries) is charged to the
input tokens, the rest to the output tokens. Sharing by token counts instead would give every token
the same price, which is the "total tokens" column.

Whether tokens per watt ranks two chips as cost per token does is answered in closed form by
:func:`rankings` (any hourly prices) and :func:`owned_flip` (owning: the price of electricity and
the lifetime at which the two rankings swap).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from perwatt import bands, catalog, checks, crosschip, data

#: Where a chip-hour's price comes from.
BASES = ("rental", "custom", "owned")
#: The two ends of the interactivity curve a cost is read at.
ENDS = ("peak", "interactive")
#: The interactive end: tokens/s per user, the target the frontier chapter reads its curves at.
INTERACTIVE_TARGET = 50.0
#: The model the cost section reads, as the frontier chapter's readings do.
MODEL = "deepseek-r1"
#: The frontier chapter's chips with a published power and an InferenceX price per GPU-hour.
CHIPS = ("gb200", "b200", "h200", "h100")
HOURS_PER_YEAR = 8760.0
SECONDS_PER_HOUR = 3600.0

USD_PER_HOUR = checks.usd_per_chip_hour
YEARS = checks.rule(checks.number, minimum=0.1, maximum=100.0)
PURCHASE = checks.rule(checks.nonnegative, maximum=1e9)
POSITIVE = checks.positive
SHARE = checks.fraction
ONE_YEAR = checks.rule(checks.scalar, minimum=0.1, maximum=100.0)


@data.cached
def _purchase_prices() -> dict[str, tuple[float, float]]:
    """data/purchase_prices.csv by chip (its key): the low and high quote, US$."""
    table = data.load("purchase_prices")
    return {str(a): (lo, hi) for a, lo, hi in zip(table["accelerator"], table["usd_low"], table["usd_high"])}


@checks.validated(accelerator=checks.TEXT)
def rental_usd_per_hour(accelerator: str) -> float | None:
    """InferenceX's price per GPU-hour for ``accelerator``; None where it publishes none (GB300's
    placeholder is not adopted) or the chip is not listed."""
    return catalog.rental_usd_per_hour(accelerator)


@checks.validated(accelerator=checks.TEXT)
def purchase_usd(accelerator: str) -> float | None:
    """The middle of the quoted purchase price range per chip (derived from data/purchase_prices.csv,
    whose figures are estimates or press reports, not list prices); None where no price is found."""
    prices = _purchase_prices()  # looked up hundreds of times a figure: a dict, not the table each time
    if accelerator not in prices or not np.isfinite(prices[accelerator][0]):
        return None
    low, high = prices[accelerator]
    return float((low + high) / 2)


@checks.validated(power_w=checks.power_w, pue=checks.pue, price_usd_per_kwh=checks.price_usd_per_kwh)
def electricity_usd_per_hour(power_w, pue, price_usd_per_kwh):
    """What a chip drawing ``power_w`` watts costs in electricity per hour: kW × PUE × US$/kWh."""
    return power_w / 1000.0 * pue * price_usd_per_kwh


@checks.validated(purchase_usd=PURCHASE, lifetime_years=YEARS, power_w=checks.power_w, pue=checks.pue,
                  price_usd_per_kwh=checks.price_usd_per_kwh, overhead_usd_per_hour=USD_PER_HOUR)
def owned_usd_per_hour(purchase_usd, lifetime_years, power_w, pue, price_usd_per_kwh, overhead_usd_per_hour) -> dict:
    """An owned chip-hour (US$): the purchase price written off evenly over the lifetime
    (``capital``), the electricity (``electricity``), the operations overhead, and their ``total``."""
    capital = purchase_usd / (lifetime_years * HOURS_PER_YEAR)
    energy = electricity_usd_per_hour.unchecked(power_w, pue, price_usd_per_kwh)
    return {"capital": capital, "electricity": energy, "overhead": overhead_usd_per_hour,
            "total": capital + energy + overhead_usd_per_hour}


@checks.validated(usd_per_hour=USD_PER_HOUR, tokens_per_s=checks.RATE, prefill_share=SHARE,
                  input_fraction=checks.rule(checks.fraction, zero=False, one=False))
def per_million(usd_per_hour, tokens_per_s, prefill_share, input_fraction) -> dict:
    """US$ per million tokens from a chip-hour's price and the chip's total (input + output)
    tokens/s: over all tokens (``total``), and per input and per output token, the chip-hour shared
    by time (``prefill_share`` of it to the input tokens, the rest to the output tokens)."""
    with np.errstate(over="ignore"):  # an overflow is refused below, by name, not warned about
        per_token = usd_per_hour / SECONDS_PER_HOUR / tokens_per_s
        out = {"total": per_token * 1e6,
               "input": prefill_share * per_token / input_fraction * 1e6,
               "output": (1 - prefill_share) * per_token / (1 - input_fraction) * 1e6}
    for key, value in out.items():
        if not np.all(np.isfinite(value)):  # a rate or a share so close to 0 (or 1) that a float overflows
            raise ValueError(f"tokens_per_s and input_fraction: the cost per {key} token overflows a float "
                             f"(tokens_per_s {np.min(tokens_per_s):g}, input_fraction {np.min(input_fraction):g} "
                             f"to {np.max(input_fraction):g})")
    return out


@checks.validated(usd_per_million_tokens=checks.positive)
def tokens_per_usd(usd_per_million_tokens):
    """Tokens one US dollar buys: a million over the price of a million."""
    return 1e6 / usd_per_million_tokens


def _read_end(curve: pd.DataFrame, end: str) -> pd.Series:
    if end == "peak":
        return curve.loc[curve["y"].idxmax()]
    fast = curve[curve["x"] >= INTERACTIVE_TARGET]
    if fast.empty:
        return pd.Series(dtype=float)
    row = fast.loc[fast["y"].idxmax()]
    # The same point best_at reads: the most tokens per kW at the target or faster.
    assert np.isclose(row["y"], crosschip.best_at.unchecked(curve, INTERACTIVE_TARGET)[0])
    return row


@data.stored
def _points(model: str, systems: tuple) -> pd.DataFrame:
    rows = []
    for system in systems:
        curve = crosschip.frontier(model, bands.system_chip(system))
        for end in ENDS:
            row = _read_end(curve, end)
            if row.empty:
                continue
            rows.append({"system": system, "end": end, "tokens_per_s_per_user": float(row["x"]),
                         "tps_per_kw": float(row["y"]), "power_w": float(row["watts"]),
                         "tokens_per_s": float(row["total_per_chip"]),
                         "prefill_share": float((row["tpot_s"] - row["t_decode"]) / row["tpot_s"])})
    return pd.DataFrame(rows)


@checks.validated(model=checks.TEXT, systems=bands._systems)
def operating_points(model: str = MODEL, systems: list = list(CHIPS)) -> pd.DataFrame:
    """Per system and end of the curve (:data:`ENDS`): tokens/s per user, total tokens/s per kW and
    per chip, the chip's power and the prefill share of its time, from the serving model's frontier
    (central case, rated power). An end a chip does not reach is left out."""
    if any(s == crosschip.READER for s in systems):
        raise ValueError("systems: the reader's chip has no price; name accelerators of data/accelerators.csv")
    return _points(model, tuple(dict.fromkeys(systems)))


def _hourly(basis: str, rental_usd: float | None, purchase: float | None, power_w: float, custom_usd_per_hour: float,
            price_usd_per_kwh: float, pue: float, lifetime_years: float, overhead_usd_per_hour: float) -> float | None:
    """A chip-hour's price on ``basis``, from the chip's rent and purchase price (None: not found)."""
    if basis == "rental":
        return rental_usd
    if basis == "custom":
        return custom_usd_per_hour
    return None if purchase is None else owned_usd_per_hour.unchecked(
        purchase, lifetime_years, power_w, pue, price_usd_per_kwh, overhead_usd_per_hour)["total"]


@data.cached
def _priced_points(model: str, systems: tuple) -> tuple[tuple, ...]:
    """:func:`operating_points`' rows as Python values, each with its chip's label, rent and purchase
    price: what every setting of a cost asks for, looked up once."""
    points = operating_points.unchecked(model, list(systems))
    return tuple((system, catalog.accelerator_label(system), end, power_w, tokens_per_s, prefill_share,
                  rental_usd_per_hour.unchecked(system), purchase_usd.unchecked(system))
                 for system, end, power_w, tokens_per_s, prefill_share in zip(
                     points["system"], points["end"],
                     *(points[c].tolist() for c in ("power_w", "tokens_per_s", "prefill_share"))))


#: The columns of :func:`token_costs`.
COST_COLUMNS = ("system", "system_label", "end", "usd_per_chip_hour", "electricity_usd_per_chip_hour",
                "usd_per_million_tokens", "usd_per_million_input", "usd_per_million_output", "tokens_per_usd",
                "electricity_share")


@checks.validated(basis=checks.rule(checks.choice, BASES), custom_usd_per_hour=checks.rule(
    checks.scalar, minimum=0.0, maximum=checks.MAX_USD_PER_CHIP_HOUR), price_usd_per_kwh=checks.PRICE,
    lifetime_years=ONE_YEAR, overhead_usd_per_hour=checks.rule(checks.scalar, minimum=0.0, maximum=1e4),
    pue=checks.PUE, model=checks.TEXT, systems=bands._systems)
def token_costs(basis: str, custom_usd_per_hour: float, price_usd_per_kwh: float, lifetime_years: float,
                overhead_usd_per_hour: float, pue: float | None = None, model: str = MODEL,
                systems: list = list(CHIPS)) -> pd.DataFrame:
    """Per system and end of the curve: the chip-hour on ``basis`` and its electricity (US$), and
    US$ per million total, input and output tokens, tokens per dollar and electricity's share of the
    cost. ``pue`` (by default the ``owned_pue`` assumption) multiplies the electricity on every basis.
    A system without a price on that basis is left out, never estimated."""
    pue = catalog.assumption("owned_pue") if pue is None else pue
    drawn = catalog.lengths()
    input_fraction = drawn.isl_mean / (drawn.isl_mean + drawn.osl_mean)
    rows = []
    for system, label, end, power_w, tokens_per_s, prefill_share, rental_usd, purchase in _priced_points(
            model, tuple(systems)):
        hourly = _hourly(basis, rental_usd, purchase, power_w, custom_usd_per_hour, price_usd_per_kwh, pue,
                         lifetime_years, overhead_usd_per_hour)
        if hourly is None or hourly <= 0:
            continue
        energy = electricity_usd_per_hour.unchecked(power_w, pue, price_usd_per_kwh)
        costs = per_million.unchecked(hourly, tokens_per_s, prefill_share, input_fraction)
        rows.append({"system": system, "system_label": label,
                     "end": end, "usd_per_chip_hour": hourly, "electricity_usd_per_chip_hour": energy,
                     "usd_per_million_tokens": costs["total"], "usd_per_million_input": costs["input"],
                     "usd_per_million_output": costs["output"],
                     "tokens_per_usd": tokens_per_usd.unchecked(costs["total"]),
                     "electricity_share": min(energy / hourly, 1.0)})
    return pd.DataFrame(rows, columns=list(COST_COLUMNS))


# --- Per watt as a proxy for cost ---------------------------------------------------------------

@checks.validated(tps_per_kw_a=checks.RATE, power_w_a=checks.power_w, usd_per_hour_a=POSITIVE,
                  tps_per_kw_b=checks.RATE, power_w_b=checks.power_w, usd_per_hour_b=POSITIVE)
def rankings(tps_per_kw_a, power_w_a, usd_per_hour_a, tps_per_kw_b, power_w_b, usd_per_hour_b) -> dict:
    """Chip a against chip b, per watt and per dollar, at any hourly prices.

    ``per_watt_ratio`` w is a's tokens/s per kW over b's; ``price_per_watt_ratio`` q is a's price
    per watt-hour over b's; ``cost_ratio`` is a's cost per token over b's, which equals q ÷ w, since
    a chip's tokens per hour are its tokens per kW times its kW. So the two rankings swap exactly
    where q = w (``flip_price_per_watt_ratio``): they ``agree`` while q lies on the same side of w as
    1 does, and disagree beyond. Per watt ranks chips as cost does whenever hourly prices are
    proportional to power (q = 1)."""
    w = tps_per_kw_a / tps_per_kw_b
    q = (usd_per_hour_a / power_w_a) / (usd_per_hour_b / power_w_b)
    cost_a = usd_per_hour_a / (tps_per_kw_a * power_w_a / 1000.0)
    cost_b = usd_per_hour_b / (tps_per_kw_b * power_w_b / 1000.0)
    cost_ratio = cost_a / cost_b
    return {"per_watt_ratio": w, "price_per_watt_ratio": q, "cost_ratio": cost_ratio,
            "flip_price_per_watt_ratio": w, "agree": (w > 1) == (cost_ratio < 1)}


#: One number each (a pair of chips has one tie, or none).
ONE_RATE = checks.rule(checks.scalar, minimum=checks.MIN_RATE, maximum=checks.MAX_RATE)
ONE_POWER = checks.rule(checks.scalar, minimum=checks.MIN_PLAUSIBLE_POWER_W, maximum=checks.MAX_PLAUSIBLE_POWER_W)
ONE_PURCHASE = checks.rule(checks.scalar, minimum=0.0, maximum=1e9)


@checks.validated(tps_per_kw_a=ONE_RATE, power_w_a=ONE_POWER, purchase_usd_a=ONE_PURCHASE,
                  tps_per_kw_b=ONE_RATE, power_w_b=ONE_POWER, purchase_usd_b=ONE_PURCHASE,
                  lifetime_years=ONE_YEAR, pue=checks.PUE, price_usd_per_kwh=checks.PRICE,
                  overhead_usd_per_hour=checks.rule(checks.scalar, minimum=0.0, maximum=1e4))
def owned_flip(tps_per_kw_a: float, power_w_a: float, purchase_usd_a: float, tps_per_kw_b: float, power_w_b: float,
               purchase_usd_b: float, lifetime_years: float, pue: float, price_usd_per_kwh: float,
               overhead_usd_per_hour: float) -> dict:
    """Where owning chips a and b, their cost per token ties (closed forms; each owned chip-hour is
    linear in the price of electricity and in one over the lifetime).

    ``flip_price_usd_per_kwh``: the electricity price at which they tie, the other inputs as given;
    above it the cost ranking is the per-watt ranking (at a high enough price electricity is all
    that counts), below it they disagree. ``flip_lifetime_years``: the lifetime at which they tie at
    the given price; ``agree_longer`` says whether they agree above it. Each is None where no
    positive value makes them tie (they agree, or disagree, at every value)."""
    s_a, s_b = tps_per_kw_a * power_w_a / 1000.0, tps_per_kw_b * power_w_b / 1000.0
    e_a, e_b = power_w_a * pue / 1000.0, power_w_b * pue / 1000.0  # US$ per hour per US$/kWh
    fixed_a = purchase_usd_a / (lifetime_years * HOURS_PER_YEAR) + overhead_usd_per_hour
    fixed_b = purchase_usd_b / (lifetime_years * HOURS_PER_YEAR) + overhead_usd_per_hour
    running_a = overhead_usd_per_hour + e_a * price_usd_per_kwh
    running_b = overhead_usd_per_hour + e_b * price_usd_per_kwh
    price = _positive_root((fixed_b * s_a, fixed_a * s_b), (e_a * s_b, e_b * s_a))
    per_hour = _positive_root((running_b * s_a, running_a * s_b), (purchase_usd_a * s_b, purchase_usd_b * s_a))
    w = tps_per_kw_a / tps_per_kw_b
    # Long lives leave the running costs: a's running cost per token against b's, against per watt.
    longer = (w > 1) == (running_a * s_b < running_b * s_a)
    return {"per_watt_ratio": w, "flip_price_usd_per_kwh": price,
            "flip_lifetime_years": None if per_hour is None else 1.0 / (per_hour * HOURS_PER_YEAR),
            "agree_longer": bool(longer)}


def _positive_root(numerator: tuple[float, float], denominator: tuple[float, float]) -> float | None:
    """(n₁ − n₂) ÷ (d₁ − d₂) where that is a positive finite number, else None.

    A difference within rounding of zero is zero: two chips whose costs tie exactly at a zero
    price (equal fixed costs per token, say), or whose costs move in step as the input varies,
    tie at no positive value, and a residue of 1e-17 must not be reported as a flip at a price of
    1e-17 US$/kWh or a lifetime of 1e-14 years."""
    top, bottom = _difference(*numerator), _difference(*denominator)
    if top == 0 or bottom == 0:
        return None
    root = top / bottom
    return root if np.isfinite(root) and root > 0 else None


def _difference(a: float, b: float) -> float:
    """a − b, or 0 where it is within rounding of both."""
    return 0.0 if abs(a - b) <= 1e-12 * max(abs(a), abs(b)) else a - b


def _or_nan(value: float | None) -> float:
    return np.nan if value is None else float(value)


def _pairs(points: pd.DataFrame):
    for (_, a), (_, b) in itertools.combinations(points.iterrows(), 2):
        yield a, b


@checks.validated(price_usd_per_kwh=checks.PRICE, lifetime_years=ONE_YEAR,
                  overhead_usd_per_hour=checks.rule(checks.scalar, minimum=0.0, maximum=1e4), pue=checks.PUE)
def proxy_table(price_usd_per_kwh: float, lifetime_years: float, overhead_usd_per_hour: float,
                pue: float | None = None) -> pd.DataFrame:
    """For each pair of :data:`CHIPS` at each end of the curve: the per-watt ratio, the rental price
    per watt-hour ratio at InferenceX's prices, whether per watt ranks them as rental cost does, and
    the hourly price of ``a`` at which the rankings would swap, ``b``'s price held (``flip_usd_per_hour_a``,
    from :func:`rankings`' q = w); and, where both have a purchase price, the electricity price and
    the lifetime at which owning them ties (:func:`owned_flip`; NaN where nothing positive does,
    or a chip has no purchase price)."""
    pue = catalog.assumption("owned_pue") if pue is None else pue
    rows = []
    points = operating_points()
    for end in ENDS:
        for a, b in _pairs(points[points["end"] == end]):
            rent_a, rent_b = rental_usd_per_hour.unchecked(a["system"]), rental_usd_per_hour.unchecked(b["system"])
            rent = rankings.unchecked(a["tps_per_kw"], a["power_w"], rent_a, b["tps_per_kw"], b["power_w"], rent_b)
            buy_a, buy_b = purchase_usd.unchecked(a["system"]), purchase_usd.unchecked(b["system"])
            owned = (owned_flip.unchecked(a["tps_per_kw"], a["power_w"], buy_a, b["tps_per_kw"], b["power_w"], buy_b,
                                          lifetime_years, pue, price_usd_per_kwh, overhead_usd_per_hour)
                     if buy_a is not None and buy_b is not None else {})
            rows.append({"end": end, "a": a["system"], "b": b["system"], "per_watt_ratio": rent["per_watt_ratio"],
                         "price_per_watt_ratio": rent["price_per_watt_ratio"], "cost_ratio": rent["cost_ratio"],
                         "agree": bool(rent["agree"]), "usd_per_hour_a": rent_a,
                         "flip_usd_per_hour_a": rent["per_watt_ratio"] * a["power_w"] / b["power_w"] * rent_b,
                         "owned_flip_price_usd_per_kwh": _or_nan(owned.get("flip_price_usd_per_kwh")),
                         "owned_flip_lifetime_years": _or_nan(owned.get("flip_lifetime_years"))})
    return pd.DataFrame(rows)
