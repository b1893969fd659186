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
(a power of 0.7 "watts" is almost certainly 0.7 kW).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import pandas as pd

Numeric = TypeVar("Numeric", float, np.ndarray, pd.Series)

#: Joules in one kilowatt-hour.
JOULES_PER_KWH = 3.6e6
#: Tokens in one million tokens.
MILLION = 1e6
#: Below this many watts a "power" is taken to have been given in kilowatts.
_MIN_PLAUSIBLE_POWER_W = 20.0
#: Above this PUE the value was probably given as a percentage.
_MAX_PLAUSIBLE_PUE = 3.0
#: Above this price per kWh the value was probably given per MWh.
_MAX_PLAUSIBLE_PRICE_USD_PER_KWH = 5.0


def _checked(
    name: str,
    value: object,
    *,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    unit_hint: str = "",
) -> np.ndarray:
    """Return ``value`` as a float array after checking it; raise ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or (
        isinstance(value, (np.ndarray, pd.Series)) and value.dtype == bool
    ):
        raise ValueError(f"{name} must be a number, got a boolean")
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if isinstance(value, (str, bytes)) or kind in ("O", "U", "S"):
        raise ValueError(f"{name} must be a number (or array of numbers), got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number (or array of numbers), got {value!r}"
        ) from None
    bad = ~np.isfinite(arr)
    if bad.any():
        where = "" if arr.ndim == 0 else f" at position {int(np.flatnonzero(bad.ravel())[0])}"
        raise ValueError(f"{name} must be finite, got NaN or infinity{where}")

    def fail(rule: str, offending: np.ndarray) -> None:
        first = float(offending.ravel()[0])
        hint = f" ({unit_hint})" if unit_hint else ""
        raise ValueError(f"{name} must be {rule}, got {first:g}{hint}")

    if exclusive_minimum is not None and (arr <= exclusive_minimum).any():
        fail(f"greater than {exclusive_minimum:g}", arr[arr <= exclusive_minimum])
    if minimum is not None and (arr < minimum).any():
        fail(f"at least {minimum:g}", arr[arr < minimum])
    if maximum is not None and (arr > maximum).any():
        fail(f"at most {maximum:g}", arr[arr > maximum])
    return arr


def _positive(name: str, value: object) -> None:
    _checked(name, value, exclusive_minimum=0.0)


def _power(name: str, value: object) -> None:
    arr = _checked(name, value, exclusive_minimum=0.0)
    if (arr < _MIN_PLAUSIBLE_POWER_W).any():
        first = float(arr[arr < _MIN_PLAUSIBLE_POWER_W].ravel()[0])
        raise ValueError(
            f"{name} must be in watts; {first:g} W is implausibly low for an accelerator "
            f"and looks like kilowatts (pass {first * 1000:g} for {first:g} kW)"
        )


#: Plausible ranges for quantities whose size betrays a wrong unit, with what to do instead.
_LIMITS = {
    "pue": (1.0, _MAX_PLAUSIBLE_PUE, "PUE is facility power ÷ IT power, a ratio such as 1.2, not a percentage"),
    "price_usd_per_kwh": (0.0, _MAX_PLAUSIBLE_PRICE_USD_PER_KWH,
                          "give US dollars per kWh; a price per MWh is 1,000 times larger"),
}


def _within(name: str, value: object) -> None:
    low, high, hint = _LIMITS[name]
    _checked(name, value, minimum=low, maximum=high, unit_hint=hint)


def joules_per_token(tps_per_kw: Numeric) -> Numeric:
    """Energy per token in J/token from throughput per power in tokens/s/kW.

    One kW is 1,000 J/s, so ``tokens/s per kW`` tokens are served per 1,000 J.
    """
    _positive("tps_per_kw", tps_per_kw)
    return 1000.0 / tps_per_kw


def kwh_per_million_tokens(joules_per_token: Numeric) -> Numeric:
    """Energy per million tokens in kWh from J/token."""
    _checked("joules_per_token", joules_per_token, minimum=0.0)
    return joules_per_token * MILLION / JOULES_PER_KWH


def energy_cost_per_million_tokens(
    joules_per_token: Numeric, price_usd_per_kwh: Numeric, pue: Numeric = 1.0
) -> Numeric:
    """Electricity cost in US dollars per million tokens.

    ``joules_per_token`` is energy at the IT level (chip or all-in); the facility draws
    ``pue`` times that, paid at ``price_usd_per_kwh``.
    """
    _within("price_usd_per_kwh", price_usd_per_kwh)
    _within("pue", pue)
    return kwh_per_million_tokens(joules_per_token) * pue * price_usd_per_kwh


def chip_throughput(tps_per_kw: Numeric, power_w: Numeric) -> Numeric:
    """Tokens/s per chip implied by a per-kW figure and the power it was divided by (W)."""
    _positive("tps_per_kw", tps_per_kw)
    _power("power_w", power_w)
    return tps_per_kw * power_w / 1000.0


def tps_per_kw_at(tokens_per_s: Numeric, power_w: Numeric) -> Numeric:
    """Tokens/s/kW of a chip serving ``tokens_per_s`` while charged ``power_w`` watts."""
    _positive("tokens_per_s", tokens_per_s)
    _power("power_w", power_w)
    return tokens_per_s / (power_w / 1000.0)


def output_token_fraction(isl_tokens: Numeric, osl_tokens: Numeric) -> Numeric:
    """Share of all tokens in a request that are output tokens (dimensionless)."""
    _positive("isl_tokens", isl_tokens)
    _positive("osl_tokens", osl_tokens)
    return osl_tokens / (isl_tokens + osl_tokens)


def per_output_token(per_total_token: Numeric, isl_tokens: Numeric, osl_tokens: Numeric) -> Numeric:
    """Convert a per-token quantity counted over all tokens to one counted over output tokens only.

    With ``isl_tokens`` in and ``osl_tokens`` out per request, each output token carries
    ``(isl + osl) / osl`` tokens' worth of the total: J/output token = J/token × that factor.
    """
    _checked("per_total_token", per_total_token, minimum=0.0)
    return per_total_token / output_token_fraction(isl_tokens, osl_tokens)


def ratio(candidate: Numeric, baseline: Numeric) -> Numeric:
    """Candidate ÷ baseline, for two figures in the same unit."""
    _positive("candidate", candidate)
    _positive("baseline", baseline)
    return candidate / baseline


def hardware_cost_per_million_tokens(price_usd_per_hour: Numeric, tokens_per_s: Numeric) -> Numeric:
    """Rental cost in US dollars per million tokens for a chip rented at ``price_usd_per_hour``
    while serving ``tokens_per_s`` tokens/s."""
    _checked("price_usd_per_hour", price_usd_per_hour, minimum=0.0)
    _positive("tokens_per_s", tokens_per_s)
    return price_usd_per_hour / (tokens_per_s * 3600.0 / MILLION)
