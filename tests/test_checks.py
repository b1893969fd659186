"""perwatt.checks: a Python float or int is checked without NumPy, exactly as any other value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perwatt import checks

BOUNDS = st.none() | st.floats(allow_nan=False, allow_infinity=False, width=64) | st.integers(-10**6, 10**6)
VALUES = (st.floats(width=64) | st.integers(min_value=-10**400, max_value=10**400)
          | st.sampled_from([0, 1, -1, 0.5, 2.0, 10**15, 10**15 + 1, 1e15, 2**53 + 1]))


def _outcome(check, value, rules):
    try:
        result = check("x", value, *rules)
    except ValueError as err:
        return "refused", str(err)
    return "accepted", (result.dtype, result.shape, float(result))


@given(value=VALUES, minimum=BOUNDS, exclusive_minimum=BOUNDS, maximum=BOUNDS, exclusive_maximum=BOUNDS,
       whole=st.booleans(), hint=st.sampled_from(["", "give US dollars per kWh"]))
def test_a_plain_number_gets_the_general_checks_answer(value, minimum, exclusive_minimum, maximum,
                                                       exclusive_maximum, whole, hint):
    rules = (minimum, exclusive_minimum, maximum, exclusive_maximum, whole, hint)
    assert _outcome(checks._plain, value, rules) == _outcome(checks._general, value, rules)


@pytest.mark.parametrize("value", [True, np.float64(2.0), np.int64(3), [1.0], "1.0", None])
def test_only_a_python_float_or_int_takes_the_plain_path(value, monkeypatch):
    monkeypatch.setattr(checks, "_plain", lambda *args: pytest.fail(f"{value!r} took the plain path"))
    try:
        checks.array("x", value)
    except ValueError:
        pass  # a bool, text or nothing is refused, as before


def test_the_plain_path_is_what_array_takes_and_answers_alike():
    assert checks.array("x", 3).dtype == np.float64 and checks.array("x", 3).ndim == 0
    with pytest.raises(ValueError, match=r"^price must be at most 2, got 3 \(per kWh\)$"):
        checks.array("price", 3, maximum=2.0, unit_hint="per kWh")
    with pytest.raises(ValueError, match=r"^n must be a number \(or array of numbers\), got 1000"):
        checks.array("n", 10**400)
    with pytest.raises(ValueError, match="must be a number, got a boolean"):
        checks.array("flag", True)
