"""Tolerances the tests set themselves, from first principles, not imported from the code under test.

A static chart ships its numbers as text at 10 significant digits (the chart's inline CSV). Rounding
a number x to 10 significant digits moves it by at most half a unit in the 10th digit, i.e. by at most
0.5 × 10^(1 − 10) = 5e-10 of |x| (the worst case is a mantissa of 1.000000000…, where the unit in
the 10th digit is 10^-9 of x). Reading the text back as a double adds about 1e-16. So a shipped
number agrees with the model's to a relative 5e-10; :data:`SHIPPED_RTOL` = 1e-9 allows twice that,
and a shipped value from a wrong formula, or a lost digit (a relative 1e-8 or more), still fails.
"""

from __future__ import annotations

#: Significant digits of the numbers a chart ships: the book's promise, fixed here independently.
SHIPPED_DIGITS = 10
#: Relative agreement between a shipped number and the model's (see the module docstring).
SHIPPED_RTOL = 1e-9
assert 0.5 * 10.0 ** (1 - SHIPPED_DIGITS) <= SHIPPED_RTOL < 10.0 ** (2 - SHIPPED_DIGITS)
