"""What a reader's own benchmark figures can plausibly be, and the unit slip a figure outside that
most likely is: the bounds :func:`perwatt.benchmark.analyze` holds a reader's file to, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perwatt.csvfile import DataError, Text


@dataclass(frozen=True)
class Plausible:
    """The range a reader's figure for one metric can physically take, and the unit mistake a
    figure outside it most likely is."""

    unit: str
    low: float
    high: float
    if_low: str
    if_high: str


#: Bounds for a reader's own figures (:func:`perwatt.benchmark.analyze`), in one place. They are far outside any
#: published figure and inside what a unit slip produces. Tokens/s/kW: from 1 (a kJ per token)
#: to 10^7 (0.1 mJ per token); InferenceX's lowest in the book's data is about 14, the articles'
#: highest 85,448. Tokens/s per user: from 0.1 (10 s per token) to 10^5 (10 µs per token, four
#: times the fastest claimed, Jalapeño's 22,935). Latency: up to a day.
BOUNDS = {
    "tps_per_kw": Plausible("tokens/s/kW", 1.0, 1e7, "is it in tokens/s per watt? Multiply by 1,000",
                            "is it per MW, or the whole system's tokens/s? Divide by the kW it drew"),
    "interactivity": Plausible("tokens/s/user", 0.1, 1e5, "is it a time per output token? Tokens/s per user is 1,000 ÷ TPOT in ms",
                               "is it the whole system's tokens/s rather than one user's?"),
    "e2e_latency_s": Plausible("s", 0.0, 86_400.0, "", "is it in milliseconds? Divide by 1,000"),
}
#: The longest time to first token a reader's row may imply. InferenceX's longest median TTFT in
#: the book's data (data/inferencex_dsr1.csv, 8k/1k) is 146 s; a latency typed in milliseconds
#: (1030 for 1.03 s) implies a thousand seconds or more.
MAX_TTFT_S = 600.0


def check(results: pd.DataFrame, text: Text, audit: pd.DataFrame) -> None:
    """Refuse figures outside :data:`BOUNDS`, or implying a TTFT over :data:`MAX_TTFT_S`,
    naming the line and the likely unit mistake."""
    value = results["value"].to_numpy()
    for metric, bounds in BOUNDS.items():
        rows = (results["metric"] == metric).to_numpy()
        for bad, words, hint in ((rows & (value < bounds.low), "below", bounds.if_low),
                                 (rows & (value > bounds.high), "above", bounds.if_high)):
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                limit = bounds.low if words == "below" else bounds.high
                raise DataError(f"{text.where(row, 'value')}: {value[row]:g} {bounds.unit} is {words} "
                                     f"the plausible {limit:g} for {metric}; {hint}")
    long_wait = audit["implied_ttft_s"].to_numpy() > MAX_TTFT_S
    if long_wait.any():
        first = audit[long_wait].iloc[0]
        latency = (results["model"] == first["model"]) & (results["system"] == first["system"]) \
            & (results["metric"] == "e2e_latency_s")
        row = int(np.flatnonzero(latency.to_numpy())[0])
        raise DataError(
            f"{text.where(row, 'value')}: a latency of {first['e2e_latency_s']:g} s at {first['interactivity']:g} "
            f"tokens/s per user leaves {first['implied_ttft_s']:.1f} s for the first token of a "
            f"{first['osl_tokens']:g}-token output, more than {MAX_TTFT_S:g} s; is it in milliseconds? "
            f"{first['e2e_latency_s']:g} ms is {first['e2e_latency_s'] / 1000:g} s")
