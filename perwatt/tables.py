"""Styled tables for the chapters: labelled columns, units, evidence status, empty unknowns."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from pandas.io.formats.style import Styler


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
