"""Per-watt metrics and their conversions.

Every formula the book uses for energy per token lives here, once. The functions are
pure and vectorized: each accepts a Python number, a NumPy array or a pandas Series
(arrays broadcast as NumPy does) and returns the same kind of object.

Units are in the parameter names:

* ``tps_per_kw``: tokens per second per kilowatt (tokens/s/kW), equivalently tokens per kJ;
* ``joules_per_token``: J/token;
* ``power_w``: watts; ``price_usd_per_kwh``: US dollars per kWh; ``pue``: dimensionless;
* ``isl_tokens`` / ``osl_tokens``: input / output sequence length in tokens.

Bad input raises :class:`ValueError` naming the parameter: NaN or infinite values,
non-numbers, values out of range, and values whose size betrays the wrong unit
(a power of 0.7 "watts" is almost certainly 0.7 kW). The checks and their limits are
:mod:`perwatt.checks`, shared with every model module. A list of numbers works as an array.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import pandas as pd

from perwatt import checks

Numeric = TypeVar("Numeric", float, np.ndarray, pd.Series)

#: Joules in one kilowatt-hour.
JOULES_PER_KWH = 3.6e6
#: Tokens in one million tokens.
MILLION = 1e6


def joules_per_token(tps_per_kw: Numeric) -> Numeric:
    """Energy per token in J/token from throughput per power in tokens/s/kW.

    One kW is 1,000 J/s, so ``tokens/s per kW`` tokens are served per 1,000 J.
    """
    return 1000.0 / checks.rate("tps_per_kw", tps_per_kw)


def kwh_per_million_tokens(joules_per_token: Numeric) -> Numeric:
    """Energy per million tokens in kWh from J/token."""
    return checks.nonnegative("joules_per_token", joules_per_token) * MILLION / JOULES_PER_KWH


def energy_cost_per_million_tokens(
    joules_per_token: Numeric, price_usd_per_kwh: Numeric, pue: Numeric = 1.0
) -> Numeric:
    """Electricity cost in US dollars per million tokens.

    ``joules_per_token`` is energy at the IT level (chip or all-in); the facility draws
    ``pue`` times that, paid at ``price_usd_per_kwh``.
    """
    # Checked first, so that a list becomes an array whose shape the broadcast check sees.
    joules = checks.nonnegative("joules_per_token", joules_per_token)
    price = checks.price_usd_per_kwh("price_usd_per_kwh", price_usd_per_kwh)
    facility = checks.pue("pue", pue)
    checks.broadcastable(joules_per_token=joules, price_usd_per_kwh=price, pue=facility)
    return kwh_per_million_tokens(joules) * facility * price


def chip_throughput(tps_per_kw: Numeric, power_w: Numeric) -> Numeric:
    """Tokens/s per chip implied by a per-kW figure and the power it was divided by (W)."""
    rate, power = checks.rate("tps_per_kw", tps_per_kw), checks.power_w("power_w", power_w)
    checks.broadcastable(tps_per_kw=rate, power_w=power)
    return rate * power / 1000.0


def tps_per_kw_at(tokens_per_s: Numeric, power_w: Numeric) -> Numeric:
    """Tokens/s/kW of a chip serving ``tokens_per_s`` while charged ``power_w`` watts."""
    rate, power = checks.rate("tokens_per_s", tokens_per_s), checks.power_w("power_w", power_w)
    checks.broadcastable(tokens_per_s=rate, power_w=power)
    return rate / (power / 1000.0)


def output_token_fraction(isl_tokens: Numeric, osl_tokens: Numeric) -> Numeric:
    """Share of all tokens in a request that are output tokens (dimensionless); lengths are at
    least one token (means of drawn lengths need not be whole)."""
    isl = checks.tokens("isl_tokens", isl_tokens, minimum=1.0)
    osl = checks.tokens("osl_tokens", osl_tokens, minimum=1.0)
    checks.broadcastable(isl_tokens=isl, osl_tokens=osl)
    return osl / (isl + osl)


def per_output_token(per_total_token: Numeric, isl_tokens: Numeric, osl_tokens: Numeric) -> Numeric:
    """Convert a per-token quantity counted over all tokens to one counted over output tokens only.

    With ``isl_tokens`` in and ``osl_tokens`` out per request, each output token carries
    ``(isl + osl) / osl`` tokens' worth of the total: J/output token = J/token × that factor.
    """
    per_total = checks.nonnegative("per_total_token", per_total_token)
    fraction = output_token_fraction(isl_tokens, osl_tokens)
    checks.broadcastable(per_total_token=per_total, **{"isl_tokens and osl_tokens": np.asarray(fraction)})
    return per_total / fraction


def ratio(candidate: Numeric, baseline: Numeric) -> Numeric:
    """Candidate ÷ baseline, for two figures in the same unit."""
    top, bottom = checks.positive("candidate", candidate), checks.positive("baseline", baseline)
    checks.broadcastable(candidate=top, baseline=bottom)
    return top / bottom


def hardware_cost_per_million_tokens(price_usd_per_hour: Numeric, tokens_per_s: Numeric) -> Numeric:
    """Rental cost in US dollars per million tokens for a chip rented at ``price_usd_per_hour``
    while serving ``tokens_per_s`` tokens/s."""
    price = checks.usd_per_chip_hour("price_usd_per_hour", price_usd_per_hour)
    rate = checks.rate("tokens_per_s", tokens_per_s)
    checks.broadcastable(price_usd_per_hour=price, tokens_per_s=rate)
    return price / (rate * 3600.0 / MILLION)
