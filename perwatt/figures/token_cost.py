"""The per-watt chapter's figure of the cost of a token: US$ per million tokens on three pricing bases."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
from pandas.io.formats.style import Styler

from perwatt import catalog, cost, tables
from perwatt.figures.kit import colour, figure, framed, log_scale, price_control, tooltips
from perwatt.interactive import Control, InteractiveFigure

#: The two ends of the curve, coloured apart.
END_COLOURS = {"peak": "#0f766e", "interactive": "#c2410c"}
#: Significant digits each shipped column is rounded to, so the grid (every setting of five
#: controls) stays small. The total places the dot and its two-digit label, so it keeps four; the
#: others appear only in the tooltip, at three, so rounding them to three shows the same digits.
DIGITS = {"usd_per_million_tokens": 4, "usd_per_million_input": 3, "usd_per_million_output": 3,
          "million_tokens_per_usd": 3}


def _rounded(values: pd.Series, digits: int) -> np.ndarray:
    v = values.to_numpy(float)
    scale = 10.0 ** (digits - 1 - np.floor(np.log10(np.abs(v))))
    return np.round(v * scale) / scale


def costs(basis: str, custom_usd_per_hour: float, price_usd_per_kwh: float, lifetime_years: float,
          overhead_usd_per_hour: float) -> pd.DataFrame:
    """:func:`perwatt.cost.token_costs` at one setting, its costs to :data:`DIGITS` significant digits
    (tokens per dollar in millions, fewer characters per row)."""
    frame = cost.token_costs(basis, custom_usd_per_hour, price_usd_per_kwh, lifetime_years, overhead_usd_per_hour)
    values = {**{c: frame[c] for c in DIGITS if c in frame}, "million_tokens_per_usd": frame["tokens_per_usd"] / 1e6}
    # One frame from the columns' arrays (their dtypes kept, no indexes to align): 243 settings.
    return pd.DataFrame({"system": frame["system"].array, "end": frame["end"].array,
                         **{c: _rounded(values[c], d) for c, d in DIGITS.items()}})


def _draw(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    # A fixed log axis over every setting: a control moves the dots, not the axis.
    x = alt.X("usd_per_million_tokens:Q", title="US$ per million tokens, input + output (log scale)",
              scale=log_scale(grid["usd_per_million_tokens"], 1.5), axis=alt.Axis(format="$.2~g"))
    names = {s: catalog.accelerator_label(s) for s in cost.CHIPS}
    label = " : ".join(f"datum.value == '{s}' ? '{n}'" for s, n in names.items()) + " : datum.value"
    y = alt.Y("system:N", title=None, sort=list(cost.CHIPS), axis=alt.Axis(labelExpr=label))
    offset = alt.YOffset("end:N", sort=list(END_COLOURS))
    tip = tooltips(("system:N", "Chip"), ("end:N", "End of the curve"),
                   ("usd_per_million_tokens:Q", "US$ per million tokens", "$.3~g"),
                   ("usd_per_million_input:Q", "US$ per million input tokens", "$.3~g"),
                   ("usd_per_million_output:Q", "US$ per million output tokens", "$.3~g"),
                   ("million_tokens_per_usd:Q", "Million tokens per US$", ".3~g"))
    points = base.mark_point(filled=True, size=120).encode(
        x=x, y=y, yOffset=offset, tooltip=tip,
        color=colour("end", "End of the curve", END_COLOURS, orient="bottom",
                     labelExpr="datum.value == 'peak' ? 'peak load' : "
                               f"'{cost.INTERACTIVE_TARGET:.0f} tokens/s per user or faster'"))
    text = base.mark_text(align="left", dx=8, fontSize=12).encode(
        x=x, y=y, yOffset=offset, text=alt.Text("usd_per_million_tokens:Q", format="$.2~g"))
    return framed(alt.layer(points, text), f"Cost per million tokens, {cost.MODEL} (modelled)",
                  "Chips without a price on the chosen basis are left out.", 460, alt.Step(34))


@figure
def token_cost() -> InteractiveFigure:
    """Dot plot on a logarithmic axis: US dollars per million tokens (input and output together) for
    each chip the serving-model chapter covers that has a price, at the busiest point of its modelled curve and
    at the interactive target, on the chosen pricing basis: InferenceX's rental prices, one hourly
    price of your own for every chip, or owning the chip (purchase price over its lifetime, electricity
    and an operations overhead)."""
    return InteractiveFigure(
        controls=(
            Control("basis", "Price a chip-hour by:", cost.BASES, "rental", "radio",
                    ("InferenceX rental prices", "your own $/chip-hour", "owning the chip")),
            Control.slider("custom_usd_per_hour", "Your own $/chip-hour:", 1.0, 4.0, 1.5, 2.5),
            # From the default price up: the exercise doubles it; a cheaper grid point would add a
            # third to the shipped grid for a view the section draws no conclusion from.
            price_control(0.08, 0.16, 0.04),
            Control.slider("lifetime_years", "Owned: lifetime, years:", 3.0, 7.0, 2.0,
                           catalog.assumption("owned_lifetime_years")),
            Control.slider("overhead_usd_per_hour", "Owned: overhead, $/chip-hour:", 0.0, 0.6, 0.3,
                           catalog.assumption("owned_overhead_usd_per_chip_hour"), decimals=1),
        ),
        compute=costs, draw=_draw, keys=("system", "end"),
        values=tuple(DIGITS))


def proxy_table(price_usd_per_kwh: float) -> Styler:
    """:func:`perwatt.cost.proxy_table` at the book's owned-chip assumptions, as the chapter shows it:
    each pair's per-watt ratio ``w``, rent-per-watt ratio ``q``, and the rent at which they would swap."""
    frame = cost.proxy_table(price_usd_per_kwh, catalog.assumption("owned_lifetime_years"),
                             catalog.assumption("owned_overhead_usd_per_chip_hour"))
    frame = frame.assign(a=frame["a"].map(catalog.accelerator_label), b=frame["b"].map(catalog.accelerator_label),
                         agree=frame["agree"].map({True: "yes", False: "no"}))
    return tables.styled(frame, {
        "end": tables.Column("End"),
        "a": tables.Column("Chip a"),
        "b": tables.Column("Chip b"),
        "per_watt_ratio": tables.Column("w (per kW, a ÷ b)", "{:.2f}", "derived"),
        "price_per_watt_ratio": tables.Column("q (rent per W, a ÷ b)", "{:.2f}", "derived"),
        "agree": tables.Column("Rankings agree", status="derived"),
        "usd_per_hour_a": tables.Column("a's rent, US$/h", "{:.2f}", "confirmed"),
        "flip_usd_per_hour_a": tables.Column("a's rent at the flip, US$/h", "{:.2f}", "derived"),
    }, caption="Per watt against rental cost for each pair of chips at each end of the curve: the rankings "
       "agree while q lies on the same side of w as 1 does.", table_id="cost-proxy")
