"""Styled tables for the chapters: labelled columns, units, evidence status, empty unknowns."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from pandas.io.formats.style import Styler

from perwatt import comparisons, data


@dataclass(frozen=True)
class Column:
    """How one column is shown: its heading, number format and evidence status."""

    label: str
    fmt: str = "{}"
    status: str = ""  # "reported", "confirmed" or "derived"; shown in the heading


def styled(frame: pd.DataFrame, columns: dict[str, Column], *, caption: str, table_id: str) -> Styler:
    """A pandas Styler showing ``columns`` of ``frame`` in order.

    Unknown values (NaN) are shown as empty cells, never as a number; the caller gives
    the reason in a note beside the table. ``table_id`` fixes the HTML ids so that two
    builds produce the same page.
    """
    missing = [c for c in columns if c not in frame]
    if missing:
        raise ValueError(f"table {table_id!r}: no column(s) {missing} in the frame")
    shown = frame[list(columns)].copy()
    headings = {
        name: f"{col.label} ({col.status})" if col.status else col.label for name, col in columns.items()
    }
    formats = {headings[name]: col.fmt for name, col in columns.items()}
    shown.columns = [headings[c] for c in shown.columns]
    return (
        shown.style.set_uuid(table_id)
        .format(formats, na_rep="")
        .hide(axis="index")
        .set_caption(caption)
        .set_table_attributes('class="perwatt-table"')
    )


def conversions(price_usd_per_kwh: float, pue: float = 1.0) -> Styler:
    """The reported tokens/s/kW and what it converts to: J/token, kWh and US$ per million tokens."""
    costs = comparisons.energy_costs(price_usd_per_kwh=price_usd_per_kwh, pue=pue, tokens="all")
    return styled(
        costs,
        {
            "model_label": Column("Model"),
            "system_label": Column("System"),
            "tps_per_kw": Column("Tokens/s/kW", "{:,.0f}", "reported"),
            "joules_per_token": Column("J/token", "{:.4f}", "derived"),
            "kwh_per_million_tokens": Column("kWh per million tokens", "{:.4f}", "derived"),
            "cost_usd_per_million_tokens": Column("US$ per million tokens", "{:.5f}", "derived"),
        },
        caption=f"The reported throughput per kilowatt and what it converts to, at US${price_usd_per_kwh:.2f} "
        f"per kWh and a PUE of {pue:g}.",
        table_id="conversions",
    )


def power() -> Styler:
    """Watts per chip on each basis, with the kind of value, its evidence label and its note."""
    frame = data.load("power")
    frame["system_label"] = frame["system"].map(data.load("systems").set_index("system")["label"])
    frame["basis_label"] = frame["basis"].map(comparisons.BASIS_LABELS)
    frame["status"] = frame["source_id"].map(data.load("sources").set_index("source_id")["status"])
    return styled(
        frame,
        {
            "system_label": Column("System"),
            "basis_label": Column("Basis"),
            "power_w": Column("Watts per chip", "{:,.0f}"),
            "bound": Column("Kind of value"),
            "status": Column("Evidence"),
            "note": Column("Note"),
        },
        caption="Power per chip on each basis. Empty cells are unknown; the note says why.",
        table_id="power",
    )


def implied_throughput() -> Styler:
    """Tokens/s per chip that each power basis implies for the reported tokens/s/kW."""
    implied = comparisons.implied_chip_throughput()
    wide = implied.pivot_table(
        index=["model_label", "system_label"], columns="basis", values="tokens_per_s", sort=False, dropna=False
    ).reset_index()
    return styled(
        wide,
        {
            "model_label": Column("Model"),
            "system_label": Column("System"),
            "chip_measured": Column("if divided by measured draw", "{:,.0f}", "derived"),
            "chip_rated": Column("if divided by rating", "{:,.0f}", "derived"),
            "all_in_provisioned": Column("if divided by all-in", "{:,.0f}", "derived"),
        },
        caption="Tokens/s per chip implied by the reported tokens/s/kW on each power basis. "
        "Empty: that basis has no known power for the system.",
        table_id="implied-throughput",
    )
