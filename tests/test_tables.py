"""Styled tables: every text a table shows is escaped, so a label is never markup."""

from __future__ import annotations

import math

import pandas as pd

from perwatt import tables

HOSTILE = "<img src=x onerror=alert(1)>"


def _html(frame: pd.DataFrame, columns: dict, caption: str = "A caption") -> str:
    return tables.styled(frame, columns, caption=caption, table_id="hostile").to_html()


def test_a_hostile_label_comes_out_escaped():
    frame = pd.DataFrame({"model_label": [HOSTILE, "gpt-oss-120b"], "tps_per_kw": [85_448.0, math.nan]})
    page = _html(frame, {"model_label": tables.Column("Model"),
                         "tps_per_kw": tables.Column("Tokens/s/kW", "{:,.0f}", "reported")})
    assert HOSTILE not in page and "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    # Numbers keep their format and unknowns stay empty.
    assert ">85,448<" in page and "nan" not in page.lower().replace("nan-", "")


def test_headings_and_caption_are_escaped_too():
    frame = pd.DataFrame({"system": ["a & b"]})
    page = _html(frame, {"system": tables.Column(HOSTILE, status="<script>x</script>")},
                 caption=f"Caption {HOSTILE} & more")
    assert "<img" not in page and "<script>x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt; (&lt;script&gt;x&lt;/script&gt;)" in page
    assert "<caption>Caption &lt;img src=x onerror=alert(1)&gt; &amp; more</caption>" in page
    assert ">a &amp; b<" in page


def test_a_book_table_still_shows_its_labels():
    page = tables.conversions(0.08).to_html()
    assert "Jalape" in page and "<img" not in page
