"""The built site in a real Chromium, served on 127.0.0.1 with every other host cut off.

The tests drive Chromium's headless shell where the system has one, and one test compares a chapter
in the full browser against it (devtools.find_chromium).

Every page (visited once per run, page by page, by whichever worker asks first): no page errors, no console errors, no request to another origin, every chart
drawn. Every bound control on every chart: move the real input element the way a reader
would (keyboard on sliders, clicks on radios, choices in dropdowns), then check that the
data behind the chart's marks changed and equals the Python model at that setting.
"""

from __future__ import annotations

import math
import re
import socket
from pathlib import Path

import pandas as pd
import pytest
from colours import contrast, over
from conftest import BROWSER_ARGS, axe, once_per_run
from tolerances import SHIPPED_RTOL

from perwatt import devtools, figures
from perwatt.interactive import SLIDER_MIN_TRACK_EM, Control, InteractiveFigure

pytestmark = pytest.mark.browser
FIGURES = {f.name: f for f in figures.all_figures()}
COMPUTED = {f.name for f in figures.computed_figures()}

# Reads, for one chart, the rows behind every mark: the data each mark is drawn from,
# after the chart's own filters have run.
MARK_DATA = """
(id) => {
  const result = window.perwatt.embeds[id];
  const names = new Set();
  const walk = (marks) => (marks || []).forEach((m) => {
    if (m.from && m.from.data) names.add(m.from.data);
    // A faceted group (a line per series) draws from its facet's source data set.
    if (m.from && m.from.facet && m.from.facet.data) names.add(m.from.facet.data);
    walk(m.marks);
  });
  walk(result.vgSpec.marks);
  const out = {};
  for (const name of names) {
    try {
      out[name] = result.view.data(name).map((row) => ({ ...row }));
    } catch (error) {
      // Data sets local to a facet exist only inside its groups; their source was added above.
    }
  }
  return out;
}
"""


def reader_pages(site: Path) -> list[str]:
    return sorted(
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if "_static" not in p.relative_to(site).parts
    )


class PageVisit:
    """A page opened in a fresh context that records errors, every URL it asks for, and those
    outside the site (another host's the tests' browser cannot reach: conftest.BROWSER_ARGS)."""

    def __init__(self, browser, site_url: str, path: str, width: int = 1280) -> None:
        self.errors: list[str] = []
        self.off_origin: list[str] = []
        self.requested: list[str] = []
        self.context = browser.new_context(viewport={"width": width, "height": 900})
        self.context.on("request", self._record(site_url))
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))
        self.page.on("console", lambda msg: self.errors.append(f"console {msg.type}: {msg.text}")
                     if msg.type == "error" else None)
        self.page.goto(f"{site_url}/{path}", wait_until="load")
        self.page.wait_for_function("() => !window.perwatt || window.perwatt.ready !== undefined")
        self.page.evaluate("() => window.perwatt && window.perwatt.ready")

    def _record(self, site_url: str):
        def record(request) -> None:
            self.requested.append(request.url)
            if not request.url.startswith((site_url + "/", "data:", "blob:")):
                self.off_origin.append(request.url)
        return record

    def close(self) -> None:
        self.context.close()


#: Every shown element whose ::before or ::after draws text in a Font Awesome font (the icon classes,
#: and the icons the stylesheets draw themselves): its text, and the ink that text leaves on a canvas
#: in that font. A glyph the font lacks leaves none: the shipped fonts' missing glyph is blank. Each
#: element is marked, so that the browser can say which font it drew the text with (rendered_glyphs).
GLYPHS = """async () => {
  await document.fonts.ready;
  const canvas = document.createElement('canvas').getContext('2d');
  const ink = (text, style) => {
    canvas.font = `${style.fontWeight} 32px ${style.fontFamily}`;
    const m = canvas.measureText(text);
    return (m.actualBoundingBoxLeft + m.actualBoundingBoxRight) * (m.actualBoundingBoxAscent + m.actualBoundingBoxDescent);
  };
  // Marks from an earlier call would point at entries of that call's list.
  for (const e of document.querySelectorAll('[data-glyph-before], [data-glyph-after]')) {
    e.removeAttribute('data-glyph-before');
    e.removeAttribute('data-glyph-after');
  }
  const found = [];
  for (const e of document.querySelectorAll('body *')) {
    if (e.getClientRects().length === 0 || getComputedStyle(e).visibility === 'hidden') continue;
    for (const pseudo of ['before', 'after']) {
      const style = getComputedStyle(e, '::' + pseudo);
      const text = (/^"(.+)"$/s.exec(style.content) || [])[1];
      if (!text || style.display === 'none' || !style.fontFamily.includes('Font Awesome')) continue;
      e.setAttribute('data-glyph-' + pseudo, found.length);
      found.push({cls: e.getAttribute('class') || '', id: e.id, pseudo, text, font: style.fontFamily,
                  ink: ink(text, style)});
    }
  }
  return found;
}"""


def rendered_glyphs(page) -> list[dict]:
    """GLYPHS, each with the fonts Chromium drew its text with (``drawn``), from the DevTools protocol."""
    glyphs = page.evaluate(GLYPHS)
    cdp = page.context.new_cdp_session(page)
    try:
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        todo = [cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]]
        while todo:
            node = todo.pop()
            attributes = dict(zip(node.get("attributes", [])[::2], node.get("attributes", [])[1::2]))
            for pseudo in node.get("pseudoElements", []):
                index = attributes.get(f"data-glyph-{pseudo['pseudoType']}")
                if index is not None:
                    fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": pseudo["nodeId"]})["fonts"]
                    glyphs[int(index)]["drawn"] = [f["familyName"] for f in fonts if f["glyphCount"] > 0]
            todo.extend(node.get("children", []))
    finally:
        cdp.detach()
    return glyphs


def _glyph_problems(glyphs: list[dict]) -> list[dict]:
    """Glyphs without ink, or drawn (wholly or partly) in a font other than Font Awesome's."""
    return [g for g in glyphs
            if g["ink"] <= 0 or not g.get("drawn") or not all(f.startswith("Font Awesome") for f in g["drawn"])]


#: Every reader page, known before the book is built: one per entry of _toc.yml, the root's redirect,
#: and Sphinx's own index and search pages (test_every_reader_page_is_checked holds the built site to this list).
PAGES = [f"{name}.html" for name in devtools.toc_files()] + ["index.html", "genindex.html", "search.html"]
#: The pages that draw a chart: those whose source shows a figure (test_every_chart_page_is_known
#: holds the built site to this list).
CHART_PAGES = [f"{name}.html" for name in devtools.toc_files()
               if re.search(r"^figures\.\w+\(.*\)\.show\(\)", (devtools.REPO / f"{name}.md").read_text(encoding="utf-8"), re.M)]


#: A chart's background, and for each visible piece of its text: its colour (fill) and opacity (its
#: fill opacity times the opacity of it and of each group it sits in), and what it is drawn on: the
#: last rect mark (a bar, a heat map's cell) painted before it whose box holds the text's centre,
#: with that mark's colour and opacity, else the chart's background. Text at opacity 0, empty text and
#: anything with no box on the page (in a closed box, say) are left out.
CHART_INK = """(chart) => {
  const svg = chart.querySelector(':scope > svg');
  if (!svg) return null;
  const opacity = (e) => {
    let o = parseFloat(getComputedStyle(e).fillOpacity);
    for (let x = e; x && x !== svg; x = x.parentElement) o *= parseFloat(getComputedStyle(x).opacity);
    return o;
  };
  const rects = new Set(svg.querySelectorAll('g.mark-rect > path'));
  const under = [];
  const seen = new Set();
  for (const e of svg.querySelectorAll('path, text')) {
    if (e.tagName === 'path') {
      const box = e.getBoundingClientRect();
      if (rects.has(e) && box.width > 0 && box.height > 0) under.push({box, fill: getComputedStyle(e).fill, opacity: opacity(e)});
      continue;
    }
    const o = opacity(e);
    const box = e.getBoundingClientRect();
    if (o === 0 || !e.textContent.trim() || box.width === 0 || box.height === 0) continue;
    const x = box.left + box.width / 2, y = box.top + box.height / 2;
    const on = under.filter((u) => u.fill !== 'none' && u.opacity > 0 && x >= u.box.left && x <= u.box.right
                                    && y >= u.box.top && y <= u.box.bottom).pop();
    seen.add([getComputedStyle(e).fill, o.toFixed(3), on ? on.fill : 'background', on ? on.opacity.toFixed(3) : '1'].join('|'));
  }
  return {background: getComputedStyle(svg).backgroundColor, text: Array.from(seen).sort()};
}"""


def _visit_once(site_url: str, browser, path: str) -> dict:
    """One reader page, opened once, with what each per-page check reads: errors, requests to
    other hosts or for a math library or icon script, the charts and formulas as drawn, every icon
    glyph and the font it was drawn in, and last (it opens every box first) what axe finds."""
    visit = PageVisit(browser, site_url, path)
    try:
        charts = visit.page.evaluate(
            "() => Array.from(document.querySelectorAll('.perwatt-chart'), (c) => "
            "({id: c.id, figure: c.dataset.figure, rendered: c.dataset.rendered, "
            "svg: !!c.querySelector('svg .mark-group, svg g'), "
            "nan: Array.from(c.querySelectorAll('svg text'), (t) => t.textContent)"
            ".filter((t) => /NaN|undefined|null/.test(t)), ink: (" + CHART_INK + ")(c)}))"
        )
        # Formulas are MathML the browser draws itself: each must take up room on the page.
        formulas = visit.page.evaluate("() => Array.from(document.querySelectorAll('math'), (m) => "
                                       "{ const r = m.getBoundingClientRect(); return r.width > 0 && r.height > 0; })")
        mathjax = visit.page.evaluate("() => [typeof window.MathJax, document.querySelectorAll('mjx-container').length]")
        glyphs = rendered_glyphs(visit.page)
        return {"errors": list(visit.errors), "off_origin": list(visit.off_origin),
                "requested": list(visit.requested), "charts": charts, "formulas": formulas,
                "mathjax": mathjax, "glyphs": glyphs,
                # The redirect page is checked with axe on its own (test_the_root_page_...).
                "axe": None if path == "index.html" else _violations_with_every_box_open(visit.page)}
    finally:
        visit.close()


@pytest.fixture(scope="session")
def page_checked(site, request, tmp_path_factory):
    """``page_checked(path)``: that page's visit (_visit_once), made once per run by whichever worker
    asks first. The per-page tests below ask page by page, so that the workers share the visits."""
    def checked(path: str) -> dict:
        return once_per_run(tmp_path_factory, "page-" + re.sub(r"\W", "-", path), lambda _: _visit_once(
            request.getfixturevalue("site_url"), request.getfixturevalue("browser"), path))
    return checked


@pytest.fixture(scope="session")
def pages_checked(site, page_checked):
    """Every reader page's visit, by path."""
    return {path: page_checked(path) for path in reader_pages(site)}


def test_every_reader_page_is_checked(site):
    assert reader_pages(site) == sorted(PAGES)


def test_every_chart_page_is_known(site):
    drawn = [p for p in PAGES if 'class="perwatt-chart"' in (site / p).read_text(encoding="utf-8")]
    assert drawn == CHART_PAGES and len(CHART_PAGES) >= 5


def test_the_full_browser_shows_a_chapter_as_the_headless_shell_does(site_url, browser, page_checked):
    """The suite drives Chromium's headless shell where there is one (devtools.find_chromium), which
    halves the browser tests' CPU time. Readers run the full browser: there, a chapter with charts and
    formulas shows the same charts, formulas and icons, with no error, no request elsewhere and
    nothing for axe. (With PERWATT_CHROMIUM set, both are that one browser.)"""
    from playwright.sync_api import Error

    full = devtools.find_chromium(full=True)
    path = "chapters/per-watt.html"
    try:
        # Without a system browser, Playwright's own: its channel "chromium" is the full browser, not the shell.
        launched = browser.browser_type.launch(**({"executable_path": full} if full else {"channel": "chromium"}),
                                               args=BROWSER_ARGS)
    except Error as err:
        pytest.fail(f"No full Chromium to compare the headless shell with. {devtools.NO_BROWSER}\n"
                    f"(Playwright said: {str(err).splitlines()[0]})")
    try:
        seen = _visit_once(site_url, launched, path)
    finally:
        launched.close()
    shell = page_checked(path)
    assert seen["errors"] == [] and seen["off_origin"] == [] and seen["axe"] == []
    assert seen["charts"] == shell["charts"] and len(seen["charts"]) >= 3
    assert seen["formulas"] == shell["formulas"] and all(seen["formulas"])
    assert _glyph_problems(seen["glyphs"]) == [] and len(seen["glyphs"]) == len(shell["glyphs"])


@pytest.mark.parametrize("path", PAGES)
def test_no_page_or_console_errors(page_checked, path):
    assert page_checked(path)["errors"] == []


@pytest.mark.parametrize("path", PAGES)
def test_no_request_leaves_the_site(page_checked, path):
    assert page_checked(path)["off_origin"] == []


def test_a_request_for_another_host_is_seen_and_goes_nowhere(site_url, browser):
    """The check above can fail: what a page asks of another host is recorded, and the tests' browser
    cannot reach it (conftest.BROWSER_ARGS), so a page that leaned on a CDN would show it. The
    machine's own name stands in for a reachable host: where /etc/hosts lists it, as here, it
    resolves to this machine without the rule (elsewhere this step shows less)."""
    host = socket.gethostname()
    elsewhere = site_url.replace("127.0.0.1", host if host not in ("localhost", "127.0.0.1") else "example.org")
    visit = PageVisit(browser, site_url, "chapters/intro.html")
    try:
        # no-cors: a reachable host answers with an opaque response, which resolves the fetch.
        outcome = visit.page.evaluate("""() => fetch('https://cdn.jsdelivr.net/npm/vega@6/build/vega.min.js?probe',
                                                 { mode: 'no-cors' }).then(() => 'loaded', () => 'failed')""")
        assert outcome == "failed"
        assert visit.off_origin == ["https://cdn.jsdelivr.net/npm/vega@6/build/vega.min.js?probe"]
        with pytest.raises(Exception, match="ERR_NAME_NOT_RESOLVED"):
            visit.page.goto(f"{elsewhere}/index.html", wait_until="commit")
        assert visit.off_origin[-1] == f"{elsewhere}/index.html"
    finally:
        visit.close()


@pytest.mark.parametrize("path", PAGES)
def test_every_chart_is_drawn(site, page_checked, path):
    charts = page_checked(path)["charts"]
    # As many as the page holds, each drawn: none on a page whose source shows no figure.
    assert len(charts) == (site / path).read_text(encoding="utf-8").count('class="perwatt-chart"')
    assert bool(charts) == (path in CHART_PAGES)
    assert [c for c in charts if c["rendered"] != "true" or not c["svg"]] == []
    # A label reading "NaN" means the chart lost a column its expressions need.
    assert [c for c in charts if c["nan"]] == []


@pytest.mark.parametrize("path", CHART_PAGES)
def test_chart_text_stands_out_from_what_it_is_drawn_on(page_checked, path):
    """axe-core 4.14 left the contrast of the charts' text for review rather than judging it (on
    prefill-decode.html at 390 px, 219 text and tspan nodes), so this checks it, as each page opens,
    in the light theme: every colour of chart text (CHART_INK) has at least 4.5:1 against what it is
    drawn on, a rect mark (a bar, a heat map's cell) or else the chart's background, each blended by
    its opacity. (Text over other marks, such as an area, is measured against the background.) The
    speed-up heat map's numbers must be found on their cells, or the check would measure them
    against the background."""
    charts = page_checked(path)["charts"]
    assert charts
    low = []
    for chart in charts:
        assert chart["ink"] and chart["ink"]["text"], f"{chart['id']}: no drawing, or no visible text"
        background = over(chart["ink"]["background"], 1.0, (255.0, 255.0, 255.0))
        if chart["figure"] == "speedup-surface":
            assert any(entry.split("|")[2] != "background" for entry in chart["ink"]["text"]), "no number on a cell"
        for entry in chart["ink"]["text"]:
            fill, opacity, on, on_opacity = entry.split("|")
            try:
                under = background if on == "background" else over(on, float(on_opacity), background)
                if contrast(over(fill, float(opacity), under), under) < 4.5:
                    low.append(f"{chart['figure'] or chart['id']}: {entry}")
            except AssertionError as err:  # a colour colours.rgba cannot read
                low.append(f"{chart['figure'] or chart['id']}: {entry}: {err}")
    assert low == []


@pytest.mark.parametrize("path", PAGES)
def test_math_is_typeset_offline(page_checked, path):
    formulas = page_checked(path)["formulas"]
    assert formulas.count(False) == 0
    if path == "chapters/per-watt.html":
        assert len(formulas) >= 4


def _targets(control: Control) -> list:
    """Settings to move a control to: every option of a choice, a spread of slider stops."""
    if control.widget != "slider":
        return [v for v in control.options if v != control.default] + [control.default]
    n = len(control.options)
    picks = {0, n // 3, (2 * n) // 3, n - 1}
    return [control.options[i] for i in sorted(picks) if control.options[i] != control.default]


def _move(page, chart_id: str, control: Control, value) -> None:
    scope = f"#{chart_id} .vega-bindings"
    if control.widget == "slider":
        slider = page.locator(f"{scope} input[type=range][name='{control.name}']")
        slider.focus()
        # By keyboard, from whichever end is nearer: each key press is a round trip and a recompute.
        stop, last = control.options.index(value), len(control.options) - 1
        from_start = stop <= last - stop
        slider.press("Home" if from_start else "End")
        for _ in range(stop if from_start else last - stop):
            slider.press("ArrowRight" if from_start else "ArrowLeft")
    elif control.widget == "radio":
        page.locator(f"{scope} input[type=radio][name='{control.name}'][value='{value}']").check()
    else:
        select = page.locator(f"{scope} select[name='{control.name}']")
        # Vega writes option values as JavaScript prints them (4, not 4.0).
        shown = [o for o in select.locator("option").evaluate_all("os => os.map(o => o.value)")
                 if o == str(value) or _number(o) == value]
        select.select_option(shown[0])
    page.evaluate("async (id) => { await window.perwatt.embeds[id].view.runAsync(); return true; }", chart_id)


#: Each control's value as its input shows it, in one call: a slider's or dropdown's value, the
#: checked radio button's (null when none is checked, or when the chart has no such input).
INPUT_VALUES = """([id, controls]) => controls.map(([name, widget]) => {
  const scope = document.querySelector('#' + id + ' .vega-bindings');
  const selector = {slider: `input[type=range][name="${name}"]`, radio: `input[type=radio][name="${name}"]:checked`}[widget]
    || `select[name="${name}"]`;
  const input = scope && scope.querySelector(selector);
  return input ? input.value : null;
})"""


def _current_setting(page, chart_id: str, figure: InteractiveFigure) -> dict:
    """Read every control's value off the page, as the reader sees it."""
    setting = {}
    shown = page.evaluate(INPUT_VALUES, [chart_id, [[c.name, c.widget] for c in figure.controls]])
    for control, raw in zip(figure.controls, shown, strict=True):
        assert raw is not None, f"{chart_id}: no {control.widget} input shows {control.name}"
        if control.widget == "slider":
            raw = float(raw)
            setting[control.name] = min(control.options, key=lambda v: abs(v - raw))
            assert abs(setting[control.name] - raw) < control.step / 1000
        else:
            # The page holds text; map it back to the option it stands for (numbers stay numbers).
            matches = [v for v in control.options
                       if str(v) == raw or (isinstance(v, (int, float)) and _number(raw) == v)]
            assert len(matches) == 1, f"{control.name}: page shows {raw!r}, not one of {control.options}"
            setting[control.name] = matches[0]
    return setting


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _shown(page, chart_id: str, figure: InteractiveFigure) -> list[pd.DataFrame]:
    """The mark datasets that carry the figure's model rows."""
    datasets = page.evaluate(MARK_DATA, chart_id)
    needed = set(figure.keys) | set(figure.values)
    frames = [pd.DataFrame(rows) for rows in datasets.values() if rows and needed <= set(rows[0])]
    assert frames, f"no mark of {figure.name} shows {sorted(needed)}"
    return frames


def _assert_matches_model(frames: list[pd.DataFrame], figure: InteractiveFigure, setting: dict) -> None:
    """Every mark shows only model rows with the model's values, and together they show them all."""
    keys, values = list(figure.keys), list(figure.values)
    expected = figure.frame(**setting).set_index(keys)[values].sort_index()
    for frame in frames:
        got = frame.set_index(keys)[values].sort_index()
        extra = set(got.index) - set(expected.index)
        assert not extra, f"{figure.name} at {setting}: rows the model does not have: {extra}"
        for column in values:
            for key, have in got[column].items():
                want = expected.loc[key, column]
                if pd.isna(want):  # an unknown or "never" stays empty in the chart too
                    assert pd.isna(have), f"{figure.name} at {setting}: {column} for {key} is {have}, model has none"
                    continue
                assert math.isclose(have, want, rel_tol=SHIPPED_RTOL), (
                    f"{figure.name} at {setting}: {column} for {key} is {have}, model says {want}")
    shown = set().union(*(set(f.set_index(keys).index) for f in frames))
    assert shown == set(expected.index), f"{figure.name} at {setting}: model rows not drawn: {set(expected.index) - shown}"


@pytest.mark.parametrize("path", CHART_PAGES)
def test_every_control_recomputes_its_chart_to_the_model(site_url, browser, page_checked, path):
    moved = 0
    # Figures the page recomputes from terms are checked against the model in test_crosschip.py.
    charts = [c for c in page_checked(path)["charts"] if c["figure"] and c["figure"] not in COMPUTED]
    # Every chart page draws a figure with controls (else this page checked nothing).
    assert charts
    visit = PageVisit(browser, site_url, path)
    page = visit.page
    try:
        for chart in charts:
            figure = FIGURES[chart["figure"]]
            setting = _current_setting(page, chart["id"], figure)
            assert setting == figure.defaults()
            _assert_matches_model(_shown(page, chart["id"], figure), figure, setting)
            for control in figure.controls:
                for value in _targets(control):
                    setting_before = _current_setting(page, chart["id"], figure)
                    shown_before = _shown(page, chart["id"], figure)
                    _move(page, chart["id"], control, value)
                    setting = _current_setting(page, chart["id"], figure)
                    assert setting == {**setting_before, control.name: value}, f"{control.name} did not move"
                    shown_after = _shown(page, chart["id"], figure)
                    _assert_matches_model(shown_after, figure, setting)
                    values = list(figure.values)
                    model_moved = not figure.frame(**setting)[values].equals(figure.frame(**setting_before)[values])
                    data_moved = not _rows(shown_after, figure).equals(_rows(shown_before, figure))
                    assert data_moved == model_moved, f"{figure.name}: moving {control.name} to {value}"
                    moved += 1
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()
    assert moved >= len(charts)


def _rows(frames: list[pd.DataFrame], figure: InteractiveFigure) -> pd.DataFrame:
    """All model rows the marks show, one per key, in a fixed order."""
    keys, values = list(figure.keys), list(figure.values)
    combined = pd.concat([f[keys + values] for f in frames]).drop_duplicates(subset=keys)
    return combined.sort_values(keys).reset_index(drop=True)


def test_power_basis_labels_show_the_model_ratio(site_url, browser):
    """Beyond the data: the numbers drawn in the SVG are the model's, after a move."""
    figure = FIGURES["power-basis"]
    visit = PageVisit(browser, site_url, "chapters/per-watt.html")
    try:
        chart_id = visit.page.locator(".perwatt-chart[data-figure='power-basis']").get_attribute("id")
        _move(visit.page, chart_id, figure.control("baseline_basis"), "all_in_provisioned")
        texts = visit.page.locator(f"#{chart_id} svg g.mark-text.role-mark text").all_text_contents()
        expected = figure.frame(baseline_basis="all_in_provisioned")["ratio"]
        assert sorted(texts) == sorted(f"{r:.2f}" for r in expected)
    finally:
        visit.close()


def test_speculation_crossover_moves_with_the_controls_in_the_browser(site_url, browser):
    figure = FIGURES["speculation-batch"]
    visit = PageVisit(browser, site_url, "chapters/speculative-decoding.html")
    page = visit.page
    try:
        chart_id = page.locator(".perwatt-chart[data-figure='speculation-batch']").get_attribute("id")

        def crossover() -> float:
            return float(_rows(_shown(page, chart_id, figure), figure)["crossover_batch"].iloc[0])

        start = crossover()
        _move(page, chart_id, figure.control("alpha"), 0.9)
        assert crossover() > start  # better drafts keep paying at larger batches
        _move(page, chart_id, figure.control("alpha"), 0.7)
        _move(page, chart_id, figure.control("c"), 0.3)
        assert crossover() < start  # costlier drafts stop paying sooner
        _move(page, chart_id, figure.control("c"), 0.1)
        _move(page, chart_id, figure.control("gamma"), 4)
        assert crossover() < start
        assert crossover() == figure.frame(gamma=4)["crossover_batch"].iloc[0]
    finally:
        visit.close()


def test_solutions_are_hidden_until_asked_for(site_url, browser):
    visit = PageVisit(browser, site_url, "chapters/per-watt.html")
    try:
        solutions = visit.page.locator("div.solution.dropdown")
        assert solutions.count() >= 3
        first = solutions.first
        body = first.locator("p").last
        assert not body.is_visible()
        first.locator(".admonition-title, button").first.click()
        body.wait_for(state="visible")
    finally:
        visit.close()


def _violations(page, context: str | None = None) -> list[str]:
    """Every axe violation on the page (or in the elements ``context`` selects), of any impact, one
    line per failing element."""
    # Details of the violations only: listing every element each passing rule checked doubled the
    # run on a chart page, and a pass is reported all the same (with one element).
    results = axe().run(page, context=context, options={"resultTypes": ["violations"]})
    assert results.response["passes"], "axe checked nothing"
    return [f"{v['id']} ({v['impact']}): {node['target']}"
            for v in results.response["violations"] for node in v["nodes"]]


def _violations_with_every_box_open(page) -> list[str]:
    """axe on the page as a reader can open it: hidden code cells and their output, each chart's
    text and table. (axe reads colours as drawn, so only once the boxes have faded in.)"""
    page.evaluate("async () => { document.querySelectorAll('details').forEach((d) => { d.open = true; });"
                  " await new Promise(requestAnimationFrame);"
                  " await Promise.all(document.getAnimations().map((a) => a.finished)); }")
    return _violations(page)


@pytest.mark.parametrize("path", [p for p in PAGES if p != "index.html"])
def test_no_accessibility_violations_of_any_impact(page_checked, path):
    assert page_checked(path)["axe"] == []


def test_the_root_page_redirects_and_passes_axe_itself(site_url, browser):
    """index.html only sends the reader on to the first chapter, but a screen reader announces it
    first, and a browser that does not follow the refresh shows it: it must pass axe as it is."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        with page.expect_request("**/chapters/intro.html") as request:
            page.goto(f"{site_url}/index.html", wait_until="load")
        assert request.value.is_navigation_request()
        # A 204 answer to a navigation leaves the browser where it is: on the redirect page.
        page.route("**/chapters/intro.html", lambda route: route.fulfill(status=204))
        page.goto(f"{site_url}/index.html", wait_until="load")
        page.wait_for_timeout(300)
        assert page.url == f"{site_url}/index.html"
        assert page.get_by_role("link", name="Open the book").get_attribute("href") == "chapters/intro.html"
        assert _violations(page) == []
    finally:
        context.close()


#: For one chart: its column (the article's content box), and everything of the chart that is not
#: inside it: the drawing, any text drawn beyond the drawing's own edges (the SVG would clip it),
#: and any control; and how far the chart and the page scroll sideways.
FIT = """(id) => {
  const chart = document.getElementById(id);
  const article = chart.closest('article') || document.body;
  const style = getComputedStyle(article);
  const box = article.getBoundingClientRect();
  const column = { left: box.left + parseFloat(style.paddingLeft), right: box.right - parseFloat(style.paddingRight) };
  const svg = chart.querySelector(':scope > svg').getBoundingClientRect();
  const outside = (r, edges) => r.width > 0 && (r.left < edges.left - 0.5 || r.right > edges.right + 0.5);
  const describe = (e) => { const r = e.getBoundingClientRect();
    return `${e.tagName} ${(e.name || e.textContent || '').trim().slice(0, 40)} [${Math.round(r.left)}, ${Math.round(r.right)}]`; };
  return {
    column: column.right - column.left,
    drawing: svg.right - svg.left,
    drawingOutside: outside(svg, column),
    clippedText: Array.from(chart.querySelectorAll('svg text')).filter((t) => outside(t.getBoundingClientRect(), svg)).map(describe),
    controlsOutside: Array.from(chart.querySelectorAll('.vega-bindings, .vega-bind, .vega-bind input, .vega-bind select, .vega-bind label'))
      .filter((e) => outside(e.getBoundingClientRect(), column)).map(describe),
    sliderEms: Array.from(chart.querySelectorAll('.vega-bind input[type=range]'),
      (s) => s.getBoundingClientRect().width / parseFloat(getComputedStyle(s).fontSize)),
    chartScroll: chart.scrollWidth - chart.clientWidth,
    pageScroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
  };
}"""


def _assert_fits(page, chart_id: str, where: str) -> dict:
    state = page.evaluate(FIT, chart_id)
    assert not state["drawingOutside"], f"{where}: the chart is {state['drawing']:.0f} px in a {state['column']:.0f} px column"
    assert state["clippedText"] == [], f"{where}: text cut off at the chart's edge"
    assert state["controlsOutside"] == [], f"{where}: controls outside the column"
    assert state["chartScroll"] <= 1 and state["pageScroll"] <= 1, f"{where}: scrolls sideways: {state}"
    assert min(state["sliderEms"], default=SLIDER_MIN_TRACK_EM) >= SLIDER_MIN_TRACK_EM, f"{where}: {state['sliderEms']}"
    return state


def _click_slider(page, slider, fraction: float) -> None:
    """Click a range input's track at a fraction of its length, as a reader with a mouse or a finger would."""
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    page.mouse.click(box["x"] + fraction * box["width"], box["y"] + box["height"] / 2)


@pytest.mark.parametrize("path", CHART_PAGES)
@pytest.mark.parametrize("width", [390, 768])
def test_charts_and_controls_fit_a_phone_and_a_tablet(site_url, browser, page_checked, width, path):
    """At a phone's and a tablet's width every chart and every control sits inside the column, no
    text of a chart is cut off, nothing scrolls sideways; every control can be reached and moved,
    sliders by keyboard and by mouse, and the chart then shows the model at the new setting, still
    inside the column. axe finds nothing at this width either."""
    checked = 0
    charts = page_checked(path)["charts"]
    visit = PageVisit(browser, site_url, path, width=width)
    page = visit.page
    try:
        for chart in charts:
            chart_id, where = chart["id"], f"{path} at {width} px, chart {chart['figure'] or chart['id']}"
            state = _assert_fits(page, chart_id, where)
            # Drawn to the column's width, not its own: wider than any figure's design at 768 px.
            assert state["drawing"] >= state["column"] - 40, f"{where}: {state}"
            figure = FIGURES.get(chart["figure"])
            for control in figure.controls if figure else ():
                before = _current_setting(page, chart_id, figure)
                value = _targets(control)[0]
                if control.widget == "slider":
                    slider = page.locator(f"#{chart_id} .vega-bindings input[type=range][name='{control.name}']")
                    # Well away from where the slider starts, so the click must move it.
                    start = control.options.index(before[control.name]) / (len(control.options) - 1)
                    _click_slider(page, slider, 0.2 if start > 0.5 else 0.8)
                    page.evaluate("async (id) => { await window.perwatt.embeds[id].view.runAsync(); }", chart_id)
                    clicked = _current_setting(page, chart_id, figure)
                    assert clicked[control.name] != before[control.name], f"{where}: {control.name} did not move by mouse"
                    _assert_matches_model(_shown(page, chart_id, figure), figure, clicked)
                    _move(page, chart_id, control, value)  # and by keyboard
                elif control.widget == "radio":
                    page.locator(f"#{chart_id} .vega-bindings input[type=radio][name='{control.name}'][value='{value}']").click(timeout=5000)
                    page.evaluate("async (id) => { await window.perwatt.embeds[id].view.runAsync(); }", chart_id)
                else:
                    _move(page, chart_id, control, value)
                setting = _current_setting(page, chart_id, figure)
                assert setting == {**before, control.name: value}, f"{where}: {control.name} did not move"
                _assert_matches_model(_shown(page, chart_id, figure), figure, setting)
                _assert_fits(page, chart_id, f"{where}, {control.name}={value}")
                checked += 1
        assert visit.errors == [] and visit.off_origin == []
        # (After the errors: axe's own style-sheet preload asks for a file the page never does.)
        assert _violations(page) == [], f"{path} at {width} px"
    finally:
        visit.close()
    # Every chart page draws a figure with controls (else this page checked nothing).
    assert charts and checked >= 1


def test_a_chart_follows_its_column_when_only_the_column_changes(site_url, browser):
    """The side bar opening or closing changes the column, not the window: the chart refits all the same."""
    visit = PageVisit(browser, site_url, "chapters/per-watt.html")
    page = visit.page
    try:
        chart_id = page.locator(".perwatt-chart[data-figure='power-basis']").get_attribute("id")
        wide = _assert_fits(page, chart_id, "at first")["drawing"]
        page.evaluate("(id) => { document.getElementById(id).style.maxWidth = '320px'; }", chart_id)
        page.wait_for_function("(id) => document.querySelector('#' + id + ' > svg').getBoundingClientRect().width <= 320",
                               arg=chart_id, timeout=5000)
        page.evaluate("async (id) => { await window.perwatt.embeds[id].view.runAsync(); }", chart_id)
        narrow = page.evaluate(FIT, chart_id)
        assert narrow["clippedText"] == [] and narrow["chartScroll"] <= 1 and wide > 500
        assert visit.errors == []
    finally:
        visit.close()


def test_charts_draw_on_a_page_opened_from_disk(site, browser):
    """Readers open index.html straight from disk: file://, where browsers refuse module scripts."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    off_disk: list[str] = []

    def only_files(route) -> None:
        if route.request.url.startswith(("file://", "data:", "blob:")):
            route.continue_()
        else:
            off_disk.append(route.request.url)
            route.abort()

    context.route("**/*", only_files)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        for path in ("chapters/per-watt.html", "chapters/prefill-decode.html"):
            page.goto((site / path).as_uri(), wait_until="load")
            page.wait_for_function("() => window.perwatt && window.perwatt.ready !== undefined", timeout=20_000)
            page.evaluate("() => window.perwatt.ready")
            charts = page.evaluate(
                "() => Array.from(document.querySelectorAll('.perwatt-chart'), "
                "(c) => c.dataset.rendered === 'true' && !!c.querySelector('svg'))")
            assert len(charts) >= 2 and all(charts), f"{path} from disk: {charts}"
        assert errors == [] and off_disk == []
    finally:
        context.close()


@pytest.mark.parametrize("paper", ["A4", "Letter"])
@pytest.mark.parametrize(("page", "phrase"), [("checklist", "Which watts?"), ("run-sheet", "A laptop fails")])
def test_one_sheet_pages_print_on_one_sheet(site_url, browser, paper, page, phrase):
    """The checklist and the host's run sheet are meant to be carried away: printed, each fits one
    sheet, content only."""
    visit = PageVisit(browser, site_url, f"chapters/{page}.html")
    try:
        visit.page.emulate_media(media="print")
        assert not visit.page.locator(".bd-sidebar-primary").is_visible()
        assert visit.page.get_by_text(phrase).first.is_visible()
        pdf = visit.page.pdf(format=paper, margin={"top": "12mm", "bottom": "12mm", "left": "12mm", "right": "12mm"})
        # Each page of a PDF is one object of type /Page (the page tree is /Pages).
        assert len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf)) == 1
    finally:
        visit.close()


def _pdf_text(pdf: bytes) -> str:
    """The text of a PDF with all white space removed (wrapping and layout insert their own)."""
    import io

    from pypdf import PdfReader

    return re.sub(r"\s+", "", "".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages))


#: The printable width of A4 with 12 mm margins, in CSS pixels (96 per inch): what print lays out in.
A4_PRINT_WIDTH_PX = round((210 - 2 * 12) / 25.4 * 96)

PRINT_STATE = """() => {
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const width = document.documentElement.clientWidth;
  return {
    controls: Array.from(document.querySelectorAll('.vega-bindings, .perwatt-tools, div.solution, details.hide'))
      .filter(shown).length,
    tables: Array.from(document.querySelectorAll('details.perwatt-alt table')).map(shown),
    tableText: Array.from(document.querySelectorAll('details.perwatt-alt tbody tr:first-child'), (r) => r.innerText),
    clippedCode: Array.from(document.querySelectorAll('pre'))
      .filter((p) => shown(p) && p.scrollWidth > p.clientWidth + 1).map((p) => p.innerText.slice(0, 60)),
    code: Array.from(document.querySelectorAll('pre')).filter(shown).map((p) => p.innerText),
    wideCharts: Array.from(document.querySelectorAll('.perwatt-chart svg'))
      .filter((s) => s.getBoundingClientRect().right > width + 1).length,
    wideTables: Array.from(document.querySelectorAll('table'))
      .filter((t) => shown(t) && t.getBoundingClientRect().right > width + 1).map((t) => t.innerText.slice(0, 60)),
  };
}"""


@pytest.mark.parametrize("path", ["chapters/per-watt.html", "chapters/benchmark-tables.html"])
def test_a_chapter_prints_its_content_with_nothing_cut_off(site_url, browser, path):
    """Printed: no controls, buttons or closed solution boxes; each chart's text-and-table
    alternative open; every code line wrapped inside the page; and the PDF carries that text."""
    visit = PageVisit(browser, site_url, path)
    try:
        page = visit.page
        page.set_viewport_size({"width": A4_PRINT_WIDTH_PX, "height": 1000})
        page.emulate_media(media="print")
        state = page.evaluate(PRINT_STATE)
        assert state["controls"] == 0
        assert state["tables"] and all(state["tables"]), state["tables"]
        assert state["clippedCode"] == [] and state["wideCharts"] == 0 and state["wideTables"] == [], state
        text = _pdf_text(page.pdf(format="A4", margin={side: "12mm" for side in ("top", "bottom", "left", "right")}))
        expected = state["tableText"] + [max((line for block in state["code"] for line in block.splitlines()),
                                            key=len, default="")]
        missing = [t for t in expected if re.sub(r"\s+", "", t) not in text]
        assert missing == [], missing
    finally:
        visit.close()
