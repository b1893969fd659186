"""A hostile label in a table and in a chart, opened in a real Chromium: no script runs, the label
shows as text. The page is built the way the book builds pages: the table by ``tables.styled``,
the chart by ``render.chart_html`` (its spec as inert JSON, its text-and-table alternative), drawn
by the site's vendored Vega bundle and the book's chart loader."""

from __future__ import annotations

import shutil
from pathlib import Path

import altair as alt
import pandas as pd
import pytest

from perwatt import render, tables

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=window.__pwned=1>"
SCRIPTED = "</script><script>window.__pwned=2</script>"
LOADER = Path(render.__file__).parent / "static" / "perwatt-charts.js"


def _chart_html(frame: pd.DataFrame) -> str:
    chart = alt.Chart(frame).mark_bar().encode(
        x=alt.X("model_label:N", title=f"Model {HOSTILE}"),
        y=alt.Y("tps_per_kw:Q", title="Tokens/s/kW"),
        tooltip=[alt.Tooltip("model_label:N", title=f"Model {HOSTILE}"), alt.Tooltip("tps_per_kw:Q")],
    ).properties(description=f"A chart of {HOSTILE}")
    spec = chart.to_dict()
    spec["usermeta"] = {"perwatt": {"figure": "hostile", "table": render.table_meta(frame)}}
    return render.chart_html(spec)


@pytest.fixture
def hostile_page(site: Path, tmp_path: Path) -> Path:
    bundle = next((site / "_static").glob("perwatt-vega-*.js"))
    shutil.copy(bundle, tmp_path / bundle.name)
    shutil.copy(LOADER, tmp_path / LOADER.name)
    frame = pd.DataFrame({"model_label": [HOSTILE, SCRIPTED], "tps_per_kw": [85_448.0, 44_960.0]})
    table = tables.styled(frame, {"model_label": tables.Column(f"Model {HOSTILE}"),
                                  "tps_per_kw": tables.Column("Tokens/s/kW", "{:,.0f}", "reported")},
                          caption=f"Caption {HOSTILE}", table_id="hostile").to_html()
    page = tmp_path / "hostile.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>hostile</title>"
        f"<script defer src='{bundle.name}'></script><script defer src='{LOADER.name}'></script>"
        f"</head><body><main>{table}\n{_chart_html(frame)}</main></body></html>", encoding="utf-8")
    return page


def test_a_hostile_label_runs_no_script_and_shows_as_text(browser, hostile_page: Path):
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(hostile_page.as_uri(), wait_until="load")
        page.wait_for_function("() => window.perwatt && window.perwatt.ready !== undefined")
        page.evaluate("() => window.perwatt.ready")
        assert page.locator(".perwatt-chart").get_attribute("data-rendered") == "true", errors

        # The table: the label is a cell's text, not an element.
        cells = page.locator("table.perwatt-table td").all_inner_texts()
        assert HOSTILE in cells and SCRIPTED in cells
        assert page.locator("table.perwatt-table caption").inner_text() == f"Caption {HOSTILE}"
        assert f"Model {HOSTILE}" in page.locator("table.perwatt-table th").all_inner_texts()

        # The chart: axis labels and title are SVG text.
        svg_text = page.locator(".perwatt-chart svg text").all_text_contents()
        assert any(HOSTILE in t or t.startswith("<img") for t in svg_text), svg_text
        assert f"Model {HOSTILE}" in svg_text

        # Its tooltip, on hovering the hostile bar, shows the label as text.
        box = page.locator(".perwatt-chart svg .mark-rect path").first.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        tooltip = page.locator("#vg-tooltip-element")
        tooltip.wait_for(state="visible", timeout=5000)
        assert HOSTILE in tooltip.inner_text()
        assert tooltip.locator("img, script").count() == 0

        # The text-and-table alternative.
        page.locator("details.perwatt-alt summary").click()
        alternative = page.locator("details.perwatt-alt td").all_inner_texts()
        assert HOSTILE in alternative and SCRIPTED in alternative
        assert HOSTILE in page.locator("details.perwatt-alt .perwatt-description").inner_text()

        # Nowhere did the markup become an element, and no handler ran.
        assert page.locator("main img, main script:not([type='application/json'])").count() == 0
        assert page.evaluate("() => window.__pwned") is None
        assert not errors, errors
    finally:
        context.close()
