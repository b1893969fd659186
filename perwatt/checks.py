"""Argument checks shared by every model function, and the limits they hold everywhere.

Each public model function validates its arguments once, at its boundary, with these checks.
A bad argument raises :class:`ValueError` whose message starts with the parameter's name.
The limits are the book's, in one place: a value outside them is either impossible (a negative
count, a fraction above 1) or, far more likely, given in the wrong unit (0.7 "watts" that is
0.7 kW, a PUE of 130 that is a percentage, a price per MWh). Upper limits on sizes also keep
every result finite and every call quick.

Numeric checks accept a number, a sequence of numbers, a NumPy array or a pandas Series, and
return it as floats in the same kind of container (a list or tuple becomes an array), so the
caller computes with the checked value.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any

import numpy as np
import pandas as pd

#: Below this many watts a "power" is taken to have been given in kilowatts.
MIN_PLAUSIBLE_POWER_W = 20.0
#: Above this many watts a chip's power is a rack's or a cluster's.
MAX_PLAUSIBLE_POWER_W = 100_000.0
#: Above this PUE the value was probably given as a percentage.
MAX_PLAUSIBLE_PUE = 3.0
#: Above this price per kWh the value was probably given per MWh.
MAX_PLAUSIBLE_PRICE_USD_PER_KWH = 5.0
#: Above this rent per chip-hour the price is a whole system's.
MAX_USD_PER_CHIP_HOUR = 10_000.0
#: The longest prompt, output or context, in tokens.
MAX_TOKENS = 1e9
#: The largest batch (sequences served together).
MAX_BATCH = 1_000_000
#: The longest draft (speculative tokens per round).
MAX_GAMMA = 1024
#: Rates (tokens/s, tokens/s per user, tokens/s/kW) lie in this range.
MIN_RATE, MAX_RATE = 1e-6, 1e12
#: The bounds on any other positive quantity: they keep products and quotients of checked values finite.
MIN_MAGNITUDE, MAX_MAGNITUDE = 1e-9, 1e15
#: The most random draws one Monte Carlo call may make (rounds × draft length).
MAX_DRAWS = 10_000_000
#: The most request-steps one queue simulation may run (requests × output tokens).
MAX_SIMULATED_TOKENS = 1_000_000

LIMITS = {
    "pue": (1.0, MAX_PLAUSIBLE_PUE, "PUE is facility power ÷ IT power, a ratio such as 1.2, not a percentage"),
    "price_usd_per_kwh": (0.0, MAX_PLAUSIBLE_PRICE_USD_PER_KWH,
                          "give US dollars per kWh; a price per MWh is 1,000 times larger"),
}


def _reject_non_numbers(name: str, value: object) -> None:
    if isinstance(value, (bool, np.bool_)) or getattr(getattr(value, "dtype", None), "kind", None) == "b":
        raise ValueError(f"{name} must be a number, got a boolean")
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if value is None or isinstance(value, (str, bytes, dict, set)) or kind in ("O", "U", "S", "M", "m", "c"):
        raise ValueError(f"{name} must be a number (or array of numbers), got {value!r}")
    if isinstance(value, (list, tuple)) and any(
            isinstance(v, (bool, np.bool_, str, bytes)) or v is None for v in np.ravel(np.asarray(value, dtype=object))):
        raise ValueError(f"{name} must be a number (or array of numbers), got {value!r}")


def _plain(name: str, value: float | int, minimum: float | None, exclusive_minimum: float | None,
           maximum: float | None, exclusive_maximum: float | None, whole: bool, unit_hint: str) -> np.ndarray:
    """:func:`array` for one Python float or int: :func:`_general`'s checks, in the same order, with
    the same messages, in about a fourteenth of the time (8.1 to 0.59 us for ``array('x', 3.5,
    minimum=0.0)``; the chapters make some 47,000 checks when run in one process)."""
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be a number (or array of numbers), got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got NaN or infinity")
    rule = None
    if exclusive_minimum is not None and number <= exclusive_minimum:
        rule = f"greater than {exclusive_minimum:g}"
    elif minimum is not None and number < minimum:
        rule = f"at least {minimum:g}"
    elif exclusive_maximum is not None and number >= exclusive_maximum:
        rule = f"less than {exclusive_maximum:g}"
    elif maximum is not None and number > maximum:
        rule = f"at most {maximum:g}"
    elif whole and not number.is_integer():
        rule = "a whole number"
    if rule is not None:
        hint = f" ({unit_hint})" if unit_hint else ""
        raise ValueError(f"{name} must be {rule}, got {number:g}{hint}")
    return np.array(number)


def array(name: str, value: object, *, minimum: float | None = None, exclusive_minimum: float | None = None,
          maximum: float | None = MAX_MAGNITUDE, exclusive_maximum: float | None = None, whole: bool = False,
          unit_hint: str = "") -> np.ndarray:
    """``value`` as a float array after checking it; raise ValueError naming ``name``."""
    check = _plain if type(value) is float or type(value) is int else _general  # exactly: a bool is an int
    return check(name, value, minimum, exclusive_minimum, maximum, exclusive_maximum, whole, unit_hint)


def _general(name: str, value: object, minimum: float | None, exclusive_minimum: float | None,
             maximum: float | None, exclusive_maximum: float | None, whole: bool, unit_hint: str) -> np.ndarray:
    _reject_non_numbers(name, value)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number (or array of numbers), got {value!r}") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        where = "" if arr.ndim == 0 else f" at position {int(np.flatnonzero(bad.ravel())[0])}"
        raise ValueError(f"{name} must be finite, got NaN or infinity{where}")

    def fail(rule: str, offending: np.ndarray) -> None:
        hint = f" ({unit_hint})" if unit_hint else ""
        raise ValueError(f"{name} must be {rule}, got {float(offending.ravel()[0]):g}{hint}")

    if exclusive_minimum is not None and (arr <= exclusive_minimum).any():
        fail(f"greater than {exclusive_minimum:g}", arr[arr <= exclusive_minimum])
    if minimum is not None and (arr < minimum).any():
        fail(f"at least {minimum:g}", arr[arr < minimum])
    if exclusive_maximum is not None and (arr >= exclusive_maximum).any():
        fail(f"less than {exclusive_maximum:g}", arr[arr >= exclusive_maximum])
    if maximum is not None and (arr > maximum).any():
        fail(f"at most {maximum:g}", arr[arr > maximum])
    if whole and (arr != np.round(arr)).any():
        fail("a whole number", arr[arr != np.round(arr)])
    return arr


def number(name: str, value: Any, **rules: Any) -> Any:
    """Check ``value`` with :func:`array`'s rules and return it as floats in its own kind of
    container: a Series stays a Series (same index), a scalar becomes a float, anything else an array."""
    arr = array(name, value, **rules)
    if isinstance(value, pd.Series):
        return value.astype(float)
    return float(arr) if arr.ndim == 0 else arr


def scalar(name: str, value: Any, **rules: Any) -> float:
    """One number (not an array), checked with :func:`array`'s rules."""
    if np.ndim(value) != 0 or isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be a single number, got {value!r}")
    return float(array(name, value, **rules))


def integer(name: str, value: Any, *, minimum: int = 1, maximum: float = MAX_MAGNITUDE) -> int:
    """One whole number in [minimum, maximum], as an int."""
    return int(scalar(name, value, minimum=minimum, maximum=maximum, whole=True))


def positive(name: str, value: Any, maximum: float = MAX_MAGNITUDE) -> Any:
    """Greater than 0 (and, to keep quotients finite, at least :data:`MIN_MAGNITUDE`)."""
    array(name, value, exclusive_minimum=0.0, maximum=maximum)
    return number(name, value, minimum=MIN_MAGNITUDE)


def nonnegative(name: str, value: Any, maximum: float = MAX_MAGNITUDE) -> Any:
    return number(name, value, minimum=0.0, maximum=maximum)


def fraction(name: str, value: Any, *, zero: bool = True, one: bool = True) -> Any:
    """A share in [0, 1]; ``zero=False`` or ``one=False`` leaves that end out."""
    return number(name, value, minimum=0.0 if zero else None, exclusive_minimum=None if zero else 0.0,
                  maximum=1.0 if one else None, exclusive_maximum=None if one else 1.0)


def count(name: str, value: Any, *, minimum: int = 1, maximum: float = MAX_MAGNITUDE) -> Any:
    """Whole numbers of at least ``minimum`` (a batch, a number of chips or calls)."""
    return number(name, value, minimum=minimum, maximum=maximum, whole=True)


def tokens(name: str, value: Any, *, minimum: float = 0.0) -> Any:
    """A length or context in tokens, in [minimum, :data:`MAX_TOKENS`]."""
    return number(name, value, minimum=minimum, maximum=MAX_TOKENS)


def rate(name: str, value: Any) -> Any:
    """Tokens per second (per chip, per user or per kW)."""
    return number(name, value, minimum=MIN_RATE, maximum=MAX_RATE)


def power_w(name: str, value: Any) -> Any:
    """A chip's power in watts; a value below 20 W is taken to be kilowatts and refused."""
    arr = array(name, value, exclusive_minimum=0.0, maximum=MAX_PLAUSIBLE_POWER_W)
    if (arr < MIN_PLAUSIBLE_POWER_W).any():
        first = float(arr[arr < MIN_PLAUSIBLE_POWER_W].ravel()[0])
        raise ValueError(
            f"{name} must be in watts; {first:g} W is implausibly low for an accelerator "
            f"and looks like kilowatts (pass {first * 1000:g} for {first:g} kW)"
        )
    return number(name, value)


def within(name: str, value: Any, limit: str | None = None) -> Any:
    """A quantity with a plausible range in :data:`LIMITS` (``limit`` defaults to ``name``)."""
    low, high, hint = LIMITS[limit or name]
    return number(name, value, minimum=low, maximum=high, unit_hint=hint)


def pue(name: str, value: Any) -> Any:
    return within(name, value, "pue")


def price_usd_per_kwh(name: str, value: Any) -> Any:
    return within(name, value, "price_usd_per_kwh")


def usd_per_chip_hour(name: str, value: Any) -> Any:
    return nonnegative(name, value, maximum=MAX_USD_PER_CHIP_HOUR)


def choice(name: str, value: Any, options) -> Any:
    """One of ``options`` (compared as text, so an unhashable value is refused cleanly)."""
    options = list(options)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def flags(name: str, value: Any) -> np.ndarray:
    """A boolean or an array of booleans (one per layout of a sweep, say)."""
    array = np.asarray(value)
    if array.dtype != bool:
        raise ValueError(f"{name} must be True or False (or an array of them), got {value!r}")
    return array


def instance(name: str, value: Any, kind: type) -> Any:
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be a {kind.__name__}, got {value!r}")
    return value


def instances(name: str, value: Any, kind: type, *, nonempty: bool = True) -> list:
    """A list or tuple of ``kind`` (at least one unless ``nonempty=False``)."""
    if not isinstance(value, (list, tuple)) or (nonempty and not value):
        raise ValueError(f"{name} must be a non-empty list of {kind.__name__}, got {value!r}")
    for i, item in enumerate(value):
        instance(f"{name}[{i}]", item, kind)
    return list(value)


def broadcastable(**values: Any) -> None:
    """Arrays that must broadcast together (NumPy's rules); raise ValueError naming them if not."""
    shaped = {name: np.shape(v) for name, v in values.items() if isinstance(v, (np.ndarray, pd.Series))}
    try:
        np.broadcast_shapes(*shaped.values())
    except ValueError:
        listed = ", ".join(f"{name} {shape}" for name, shape in shaped.items())
        raise ValueError(f"{' and '.join(shaped)} must have shapes that broadcast together, got {listed}") from None


def optional(name: str, value: Any, check) -> Any:
    """``None`` (the documented default), or ``value`` passed through ``check(name, value)``."""
    return None if value is None else check(name, value)


# --- Checking at a function's boundary --------------------------------------------------------

#: FLOPs or bytes of one step, at most.
MAX_WORK = 1e30
#: Chips in one serving instance, at most.
MAX_CHIPS = 1_000_000
#: Seconds of any duration, at most (about 30 years).
MAX_SECONDS = 1e9


def rule(check, *args: Any, **kwargs: Any):
    """A check with its limits fixed, for :func:`validated`: ``rule(count, maximum=10)``."""
    return lambda name, value: check(name, value, *args, **kwargs)


def kind(cls: type):
    return rule(instance, cls)


#: The rules every module uses for the same quantity.
BATCH = rule(count, minimum=1, maximum=MAX_BATCH)
CHIPS = rule(count, minimum=1, maximum=MAX_CHIPS)
CONTEXT = rule(tokens, minimum=0.0)
LENGTH = rule(tokens, minimum=1.0)
KV_BITS = rule(number, exclusive_minimum=0.0, maximum=64.0)
BITS = rule(scalar, exclusive_minimum=0.0, maximum=64.0)
WORK = rule(number, minimum=0.0, maximum=MAX_WORK)
SECONDS = rule(nonnegative, maximum=MAX_SECONDS)
RATE = rate
TEXT = rule(instance, str)
#: One price per kWh, or one PUE (not an array), with the unit hint of :data:`LIMITS`.
PRICE = rule(scalar, minimum=0.0, maximum=MAX_PLAUSIBLE_PRICE_USD_PER_KWH, unit_hint=LIMITS["price_usd_per_kwh"][2])
PUE = rule(scalar, minimum=1.0, maximum=MAX_PLAUSIBLE_PUE, unit_hint=LIMITS["pue"][2])
FLAG = flag


def validated(**rules):
    """Check the named arguments of every call with their rules before the function runs, and
    pass it the checked values. Defaults the caller leaves out are trusted and not checked.
    ``function.unchecked`` is the bare function, for callers that have checked already."""
    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as err:
                raise ValueError(f"{function.__name__}: {err}") from None
            checked = {}
            for name, check in rules.items():
                if name in bound.arguments:
                    bound.arguments[name] = checked[name] = check(name, bound.arguments[name])
            broadcastable(**checked)
            return function(*bound.args, **bound.kwargs)

        wrapper.unchecked = function
        return wrapper
    return decorate
