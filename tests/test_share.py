"""Links a teacher can share, and each chart's data and picture as files, in a real Chromium.

A link ``page.html#<figure id>?<control>=<value>&...`` opens a figure at that setting: the page's
inputs show it and the chart's data is the Python model's at it. The "Copy link to this setting"
button writes such a link; opened in a fresh page, it gives back the same setting. The CSV a
chart offers is the model's rows at the current setting (for a chart with no controls, the data
it was given); the PNG and SVG are the chart as drawn. A bad link warns and changes nothing.
Over http on 127.0.0.1, with every other host cut off, and over file:// as a reader opens it.
"""

from __future__ import annotations

import json
import math
import re
import struct
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import pandas as pd
import pytest
from test_browser import (FIGURES, PageVisit, _assert_matches_model, _current_setting, _move, _shown,
                          _violations, reader_pages)
from tolerances import SHIPPED_RTOL

from perwatt import render
from perwatt.interactive import InteractiveFigure

pytestmark = pytest.mark.browser

READY = "() => window.perwatt && window.perwatt.ready !== undefined"
#: Clipboard writes fail, as they do on some browsers' pages opened from disk.
NO_CLIPBOARD = """
Object.defineProperty(Navigator.prototype, "clipboard", { configurable: true, get: () => ({
  writeText: () => Promise.reject(new DOMException("not allowed", "NotAllowedError")) }) });
"""


class Visit(PageVisit):
    """A fresh page, as in test_browser, that also keeps console warnings (a bad link must warn,
    not error) and works over file:// as well as http (``base`` is the site's URL either way)."""

    def __init__(self, browser, base: str, path: str, *, clipboard: bool = False,
                 init_script: str | None = None, viewport: tuple[int, int] = (1280, 900)) -> None:
        self.errors, self.warnings, self.off_origin, self.requested = [], [], [], []
        self.context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]},
                                           accept_downloads=True)
        if clipboard:
            self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        self.context.on("request", self._record(base))
        if init_script:
            self.context.add_init_script(init_script)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        self.page.on("console", self._console)
        self.open(f"{base}/{path}")

    def _console(self, msg) -> None:
        if msg.type == "error":
            self.errors.append(f"console error: {msg.text}")
        elif msg.type == "warning":
            self.warnings.append(msg.text)

    def open(self, url: str) -> None:
        self.page.goto(url, wait_until="load")
        self.page.wait_for_function(READY, timeout=20_000)
        # Resolves once every chart is drawn and the page's link has been applied.
        self.page.evaluate("() => window.perwatt.ready")

    @property
    def link_warnings(self) -> list[str]:
        """The book's own warnings (Vega-Lite has some of its own about a few charts' encodings)."""
        return [w for w in self.warnings if w.startswith("perwatt: ")]

    def download(self, chart_id: str, button: str) -> Path:
        with self.page.expect_download() as info:
            self.tools(chart_id).get_by_role("button", name=button).click()
        return Path(info.value.path())

    def tools(self, chart_id: str):
        return self.page.locator(f"#{chart_id} + .perwatt-tools")


def _figures_in(site: Path) -> dict[str, dict]:
    """Where each chart is: its page, its element id, and the id of the figure holding it."""
    found = {}
    for path in reader_pages(site):
        text = (site / path).read_text(encoding="utf-8")
        for holder in re.finditer(r'<figure[^>]*\bid="([^"]+)"(.*?)</figure>', text, re.S):
            for chart in re.finditer(r'class="perwatt-chart" id="([^"]+)" data-figure="([^"]*)"', holder.group(2)):
                found[chart.group(2) or holder.group(1)] = {"path": path, "chart": chart.group(1),
                                                            "anchor": holder.group(1)}
    return found


@pytest.fixture(scope="session")
def where(site) -> dict[str, dict]:
    found = _figures_in(site)
    assert set(FIGURES) <= set(found), f"figures not found in a <figure>: {set(FIGURES) - set(found)}"
    return found


def _elsewhere(figure: InteractiveFigure) -> dict:
    """A setting away from the defaults on every control, whose model rows differ from the defaults'."""
    setting = {}
    for control in figure.controls:
        others = [v for v in control.options if v != control.default]
        setting[control.name] = others[len(others) // 2]
    values = list(figure.values)
    assert not figure.frame(**setting)[values].equals(figure.frame()[values]), f"{figure.name}: pick another setting"
    return setting


def _link(anchor: str, setting: dict) -> str:
    return f"#{anchor}?{urlencode(setting)}"


def _assert_csv_is_the_model(path: Path, figure: InteractiveFigure, setting: dict) -> None:
    table = pd.read_csv(path)
    # Every column the chart ships, in order, and no byte-order mark glued to the first name.
    assert list(table.columns) == figure.shipped_columns
    for control in figure.controls:
        want = setting[control.name]
        for have in table[control.name]:
            assert (math.isclose(have, want, rel_tol=1e-9, abs_tol=1e-12) if control.widget == "slider"
                    else str(have) == str(want) or have == want), f"{control.name}: {have} != {want}"
    assert len(table) == len(figure.frame(**setting))
    _assert_matches_model([table], figure, setting)


def _in_view(page, anchor: str) -> bool:
    return page.evaluate("(id) => { const r = document.getElementById(id).getBoundingClientRect();"
                         " return r.top < innerHeight && r.bottom > 0 && r.top > -5; }", anchor)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_shared_link_opens_the_figure_at_its_setting_and_its_csv_is_the_model_there(site_url, browser, where, name):
    """One page per figure (each load draws every chart on it): the link's setting as the page shows
    it, then the CSV at that setting and at the next one a reader moves to."""
    figure, at = FIGURES[name], where[name]
    setting = _elsewhere(figure)
    visit = Visit(browser, site_url, at["path"] + _link(at["anchor"], setting))
    try:
        assert _current_setting(visit.page, at["chart"], figure) == setting  # the inputs show it
        _assert_matches_model(_shown(visit.page, at["chart"], figure), figure, setting)
        assert _in_view(visit.page, at["anchor"])
        # Every other chart on the page keeps its own defaults, even where control names repeat.
        for other, place in where.items():
            if place["path"] == at["path"] and other != name and other in FIGURES:
                assert _current_setting(visit.page, place["chart"], FIGURES[other]) == FIGURES[other].defaults()
        assert visit.errors == [] and visit.link_warnings == [] and visit.off_origin == []

        csv = visit.download(at["chart"], "Download data (CSV)")
        assert csv.read_bytes().startswith(b"\xef\xbb\xbf")  # marked UTF-8, for spreadsheets
        _assert_csv_is_the_model(csv, figure, setting)
        # Moved by the reader afterwards: the file follows the page, not the link.
        control = figure.controls[0]
        moved = control.default if setting[control.name] != control.default else control.options[0]
        _move(visit.page, at["chart"], control, moved)
        setting = {**setting, control.name: moved}
        assert _current_setting(visit.page, at["chart"], figure) == setting
        _assert_csv_is_the_model(visit.download(at["chart"], "Download data (CSV)"), figure, setting)
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


def test_csv_of_a_chart_without_controls_is_the_data_it_draws(site, site_url, browser):
    at = _figures_in(site)["fig-operating-points"]
    text = (site / at["path"]).read_text(encoding="utf-8")
    payload = re.search(rf'data-target="{at["chart"]}">(.*?)</script>', text, re.S).group(1)
    spec = render.unpack_spec(payload)
    given = [row for rows in spec["datasets"].values() for row in rows]
    assert len(given) >= 2
    visit = Visit(browser, site_url, at["path"])
    try:
        tools = visit.tools(at["chart"])
        assert tools.get_by_role("button", name="Copy link to this setting").count() == 0  # nothing to set
        table = pd.read_csv(visit.download(at["chart"], "Download data (CSV)"))
        assert len(table) == len(given)
        assert set(table.columns) == {c for row in given for c in row}
        records = table.to_dict("records")
        for row in given:
            assert any(all(_same(have.get(c), v) for c, v in row.items()) for have in records), f"row missing: {row}"
        assert visit.errors == []
    finally:
        visit.close()


def _same(have, want) -> bool:
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(have, (int, float)) and math.isclose(have, want, rel_tol=SHIPPED_RTOL)
    return have == want


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("name", ["power-basis", "fig-operating-points"])
def test_pictures_download_as_png_and_svg(site, site_url, browser, name):
    at = _figures_in(site)[name]
    setting = {"jalapeno_power_w": 1200.0, "baseline_basis": "all_in_provisioned"} if name in FIGURES else {}
    visit = Visit(browser, site_url, at["path"] + (_link(at["anchor"], setting) if setting else ""))
    try:
        drawn = visit.page.locator(f"#{at['chart']} > svg")
        width, height = (float(drawn.get_attribute(a)) for a in ("width", "height"))
        png = visit.download(at["chart"], "Download picture (PNG)").read_bytes()
        assert len(png) > 1000
        assert _png_size(png) == (round(2 * width), round(2 * height))  # twice the screen's pixels
        svg = ET.parse(visit.download(at["chart"], "Download picture (SVG)")).getroot()
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"
        assert float(svg.get("width")) == width
        labels = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text")]
        assert labels
        if setting:  # the picture is of the setting on the page, not the defaults
            ratios = FIGURES[name].frame(**setting)["ratio"]
            assert {f"{r:.2f}" for r in ratios} <= set(labels)
            assert not {f"{r:.2f}" for r in FIGURES[name].frame()["ratio"]} <= set(labels)
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


def _split(link: str) -> tuple[str, str, dict]:
    page, _, fragment = link.partition("#")
    anchor, _, query = fragment.partition("?")
    return page, anchor, dict(parse_qsl(query))


def _as_options(figure: InteractiveFigure, texts: dict) -> dict:
    """A link's values, as the options they name."""
    out = {}
    for name, text in texts.items():
        control = figure.control(name)
        out[name] = next(v for v in control.options if str(v) == text
                         or (isinstance(v, (int, float)) and math.isclose(float(text), v, abs_tol=1e-12)))
    return out



def _assert_link_reopens(browser, base: str, link: str, at: dict, figure, setting: dict, neighbour=None) -> None:
    """A fresh page opened from ``link`` shows ``figure`` at ``setting``, drawn as the model computes it,
    and (if given) a neighbouring figure still at its defaults."""
    fresh = Visit(browser, base, link.removeprefix(base + "/"))
    try:
        assert _current_setting(fresh.page, at["chart"], figure) == setting
        _assert_matches_model(_shown(fresh.page, at["chart"], figure), figure, setting)
        if neighbour is not None:
            chart, other = neighbour
            assert _current_setting(fresh.page, chart, other) == other.defaults()
        assert fresh.errors == [] and fresh.link_warnings == []
    finally:
        fresh.close()

def test_copy_link_reproduces_the_setting_in_a_fresh_page(site_url, browser, where):
    """Two figures on one page share control names; the link carries only the one it was copied from."""
    figure, at = FIGURES["frontier"], where["frontier"]
    neighbour = FIGURES["roofline"]
    assert where["roofline"]["path"] == at["path"] and {"model", "accelerator"} <= {c.name for c in neighbour.controls}
    visit = Visit(browser, site_url, at["path"], clipboard=True)
    try:
        page = visit.page
        for name, value in (("model", "kimi-k2.5"), ("workload", "1k/8k"), ("precision", "fp8")):
            _move(page, at["chart"], figure.control(name), value)
        setting = _current_setting(page, at["chart"], figure)
        assert setting != figure.defaults()
        visit.tools(at["chart"]).get_by_role("button", name="Copy link to this setting").click()
        visit.tools(at["chart"]).get_by_role("status").filter(has_text="Link copied.").wait_for()
        link = page.evaluate("() => navigator.clipboard.readText()")
        assert link == page.url  # also put in the address bar
        base, anchor, texts = _split(link)
        assert base == f"{site_url}/{at['path']}" and anchor == at["anchor"] == "fig-frontier"
        assert set(texts) == {c.name for c in figure.controls}
        assert _as_options(figure, texts) == setting
        assert visit.tools(at["chart"]).get_by_label("Link to this setting").input_value() == link
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()
    _assert_link_reopens(browser, site_url, link, at, figure, setting,
                         neighbour=(where["roofline"]["chart"], neighbour))


def test_from_disk_the_link_falls_back_to_a_field_and_still_works(site, browser, where):
    """Opened from disk, where some browsers shut the clipboard: the link is shown to copy by hand,
    and the file:// link it shows reopens the setting; the CSV still downloads."""
    figure, at = FIGURES["energy-cost"], where["energy-cost"]
    base = site.as_uri()
    visit = Visit(browser, base, at["path"], init_script=NO_CLIPBOARD)
    try:
        page = visit.page
        _move(page, at["chart"], figure.control("pue"), 1.3)
        _move(page, at["chart"], figure.control("tokens"), "output")
        setting = _current_setting(page, at["chart"], figure)
        assert setting == {**figure.defaults(), "pue": 1.3, "tokens": "output"}
        tools = visit.tools(at["chart"])
        tools.get_by_role("button", name="Copy link to this setting").click()
        tools.get_by_role("status").filter(has_text="Select the link below").wait_for()
        field = tools.get_by_label("Link to this setting")
        link = field.input_value()
        assert link.startswith("file://") and _split(link)[1] == "fig-energy-cost"
        assert page.url == link  # the address bar holds it too, even on a page from disk
        assert _as_options(figure, _split(link)[2]) == setting
        # Selected, ready for the reader's own copy.
        assert page.evaluate("() => document.activeElement.value.length === "
                             "document.activeElement.selectionEnd - document.activeElement.selectionStart")
        _assert_csv_is_the_model(visit.download(at["chart"], "Download data (CSV)"), figure, setting)
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()
    _assert_link_reopens(browser, base, link, at, figure, setting)


BAD_LINKS = {
    "unknown name": "#fig-power-basis?wattage=900",
    "a name from another figure": "#fig-power-basis?pue=1.2",
    "off the slider's steps": "#fig-power-basis?jalapeno_power_w=925",
    "out of range": "#fig-power-basis?jalapeno_power_w=5000&jalapeno_power_w=-50",
    "not a number": "#fig-power-basis?jalapeno_power_w=abc&jalapeno_power_w=Infinity&jalapeno_power_w=",
    "not an option": "#fig-power-basis?baseline_basis=CHIP_RATED&published_basis=",
    "garbage": "#fig-power-basis?%E0%A4%A=%%&&==&<script>=1",
    "no such figure": "#fig-nothing-here?jalapeno_power_w=900",
    "malformed figure name": "#fig-%E0%A4%A?jalapeno_power_w=900",
}


@pytest.mark.parametrize("case", BAD_LINKS)
def test_a_bad_link_warns_and_leaves_the_defaults(site_url, browser, where, case):
    figure, at = FIGURES["power-basis"], where["power-basis"]
    visit = Visit(browser, site_url, at["path"] + BAD_LINKS[case])
    try:
        rendered = visit.page.evaluate("() => Array.from(document.querySelectorAll('.perwatt-chart'), "
                                       "(c) => c.dataset.rendered === 'true' && !!c.querySelector('svg'))")
        assert len(rendered) >= 3 and all(rendered)
        assert _current_setting(visit.page, at["chart"], figure) == figure.defaults()
        _assert_matches_model(_shown(visit.page, at["chart"], figure), figure, figure.defaults())
        assert visit.errors == [] and visit.off_origin == []
        assert visit.link_warnings, "a bad link must say why it was ignored"
    finally:
        visit.close()


def test_a_link_applies_what_it_can_and_follows_later_changes(site_url, browser, where):
    figure, at = FIGURES["power-basis"], where["power-basis"]
    visit = Visit(browser, site_url, at["path"] + "#fig-power-basis?jalapeno_power_w=920&baseline_basis=all_in_provisioned")
    try:
        setting = {**figure.defaults(), "baseline_basis": "all_in_provisioned"}
        assert _current_setting(visit.page, at["chart"], figure) == setting
        assert len([w for w in visit.link_warnings if "jalapeno_power_w" in w and "nearest 900" in w]) == 1
        # A link followed on the same page (a hash change, no reload) applies too.
        visit.page.evaluate("() => { location.hash = 'fig-power-basis?jalapeno_power_w=1500'; }")
        visit.page.wait_for_function(
            "() => document.querySelector('#fig-power-basis input[name=jalapeno_power_w]').value === '1500'")
        visit.page.evaluate("(id) => window.perwatt.embeds[id].view.runAsync().then(() => true)", at["chart"])
        setting = {**setting, "jalapeno_power_w": 1500.0}
        assert _current_setting(visit.page, at["chart"], figure) == setting
        _assert_matches_model(_shown(visit.page, at["chart"], figure), figure, setting)
        assert visit.errors == []
    finally:
        visit.close()


def test_the_tools_fit_a_phone_are_named_and_do_not_print(site, site_url, browser, where):
    at = where["energy-cost"]
    # Every chart the built page holds gets a toolbar (the per-watt chapter has several).
    charts = (site / at["path"]).read_text(encoding="utf-8").count('class="perwatt-chart"')
    assert charts >= 3
    visit = Visit(browser, site_url, at["path"], clipboard=True, viewport=(390, 844))
    try:
        page = visit.page
        toolbars = page.locator(".perwatt-tools")
        assert toolbars.count() == page.locator(".perwatt-chart").count() == charts
        visit.tools(at["chart"]).get_by_role("button", name="Copy link to this setting").click()
        visit.tools(at["chart"]).get_by_label("Link to this setting").wait_for()
        boxes = page.evaluate("() => Array.from(document.querySelectorAll('.perwatt-tools, .perwatt-tools *'),"
                              " (e) => { const r = e.getBoundingClientRect(); return [e.tagName, r.left, r.right]; })")
        assert [b for b in boxes if b[1] < 0 or b[2] > 390] == []
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        # The toolbar wraps rather than running off the screen: its buttons take more than one row.
        tops = visit.tools(at["chart"]).get_by_role("button").evaluate_all(
            "bs => bs.map(b => Math.round(b.getBoundingClientRect().top))")
        assert len(tops) == 4 and len(set(tops)) > 1
        assert visit.errors == [] and visit.off_origin == []
        # (axe's own style-sheet preload asks for a file the page never does, so errors are checked first.)
        assert _violations(page, ".perwatt-tools") == []
        assert page.get_by_role("group", name="Share or download this chart").count() == charts
        page.emulate_media(media="print")
        assert not toolbars.first.is_visible()
    finally:
        visit.close()
