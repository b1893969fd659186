"""Colours as a browser computes them, and WCAG 2's contrast ratio, for the tests that check contrast
where axe does not: text drawn in a chart's SVG."""

from __future__ import annotations

import re

RGB = tuple[float, float, float]
#: The named colours Vega writes into an SVG's fill attribute for the book's charts.
NAMED = {"black": "rgb(0, 0, 0)", "white": "rgb(255, 255, 255)"}


def rgba(css: str) -> tuple[RGB, float]:
    """A colour as (red, green, blue) 0-255 and its alpha, from rgb()/rgba(), #rrggbb or a name in
    NAMED; an error naming the colour for any other form."""
    css = NAMED.get(css, css)
    if re.fullmatch(r"#[0-9a-fA-F]{6}", css):
        return tuple(float(int(css[i:i + 2], 16)) for i in (1, 3, 5)), 1.0
    found = re.fullmatch(r"rgba?\((\d+), ?(\d+), ?(\d+)(?:, ?([\d.]+))?\)", css)
    assert found, f"a colour these tests cannot read: {css}"
    return tuple(float(v) for v in found.groups()[:3]), float(found.group(4) or 1)


def over(colour: str, opacity: float, under: RGB) -> RGB:
    """``colour``, at ``opacity`` times its own alpha, painted over ``under``."""
    rgb, alpha = rgba(colour)
    a = opacity * alpha
    return tuple(a * c + (1 - a) * u for c, u in zip(rgb, under))


def contrast(a: RGB, b: RGB) -> float:
    """WCAG 2's contrast ratio of two sRGB colours (0-255 a channel)."""
    def luminance(rgb: RGB) -> float:
        linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)
