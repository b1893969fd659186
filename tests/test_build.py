"""The book builds from clean with zero warnings, offline by construction."""

from __future__ import annotations

import html
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import SESSION_ENVIRONMENT, digests, session_build

from perwatt import accounting, devtools, iconfont, render, sphinxext, vegabundle

REPO = devtools.REPO
pytestmark = pytest.mark.build


class _Resources(HTMLParser):
    """Collects every URL a page would load by itself (not links a reader may follow)."""

    LOADING = {"script": "src", "img": "src", "iframe": "src", "source": "src", "audio": "src",
               "video": "src", "embed": "src", "object": "data"}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[dict] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self.scripts.append(a)
        if tag in self.LOADING and a.get(self.LOADING[tag]):
            self.urls.append(a[self.LOADING[tag]])
        if tag == "link" and a.get("href") and a.get("rel", "") not in ("", "canonical", "next", "prev", "index", "search"):
            self.urls.append(a["href"])


def pages(site: Path) -> list[Path]:
    """Every page a reader can open (not the theme's template fragments in _static)."""
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts)


def test_build_succeeds_with_zero_warnings(book_build):
    assert book_build.returncode == 0, book_build.log[-6000:]
    sphinx_warnings = re.findall(r"^.*(?:WARNING|ERROR):.*$", book_build.log, flags=re.MULTILINE)
    sphinx_warnings = [w for w in sphinx_warnings if "[IPKernelApp]" not in w]
    assert sphinx_warnings == []


def test_a_clean_build_executes_the_chapters_side_by_side_and_myst_nb_finds_them_cached(book_build):
    if "PERWATT_SITE" in os.environ:
        pytest.skip("reusing a prebuilt site; its build log is not at hand")
    log = book_build.log
    notebooks = devtools.chapter_files()
    assert f"perwatt: executing {len(notebooks)} notebooks" in log, log[-3000:]
    assert log.count("perwatt: executed ") == len(notebooks)
    # Had the extension read a chapter differently from myst-nb, the cache would miss and myst-nb run it again.
    assert log.count("Using cached notebook") == len(notebooks) and "Executing notebook" not in log


def test_every_toc_file_and_only_those_became_a_page(site):
    built = {p.relative_to(site).with_suffix("").as_posix() for p in (site / "chapters").glob("*.html")}
    assert built == {f for f in devtools.toc_files() if f.startswith("chapters/")}


def test_no_page_loads_anything_from_another_host(site):
    for page in pages(site):
        parser = _Resources()
        parser.feed(page.read_text(encoding="utf-8"))
        external = [u for u in parser.urls if re.match(r"^(https?:)?//", u)]
        assert external == [], f"{page.relative_to(site)} loads {external}"


def test_stylesheets_import_nothing_from_another_host(site):
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8", errors="replace")
        assert not re.search(r"(@import|url\()\s*['\"]?(https?:)?//", text), css.relative_to(site)


def test_vega_is_one_shared_vendored_module(site):
    bundles = list((site / "_static").glob("perwatt-vega-*.js"))
    assert len(bundles) == 1
    assert "window.vegaEmbed" in bundles[0].read_text(encoding="utf-8")
    # The repository's copy, as the pinned versions made it (tests/test_vendor.py), not one the build made.
    assert bundles[0].read_bytes() == (vegabundle.VENDOR_DIR / bundles[0].name).read_bytes()
    with_charts = 0
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        parser = _Resources()
        parser.feed(text)
        vega = [s for s in parser.scripts if "perwatt-vega-" in (s.get("src") or "")]
        if 'class="perwatt-spec"' in text:
            with_charts += 1
            assert len(vega) == 1 and vega[0].get("type") != "module" and "defer" in vega[0], page.relative_to(site)
        else:
            assert vega == [], f"{page.relative_to(site)} loads Vega but has no chart"
        # The library itself is never inlined into a page.
        assert "window.vegaEmbed=" not in text
    assert with_charts >= 1


def test_every_chart_spec_ships_packed(site):
    """The build compresses each spec (render.pack_specs); none is left as raw JSON, and each
    unpacks to the spec its chart id was made from, at a fraction of the bytes."""
    raw = packed = 0
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        assert 'type="application/json" class="perwatt-spec"' not in text, page.relative_to(site)
        for target, payload in re.findall(r'class="perwatt-spec" data-target="([^"]+)">(.*?)</script>', text, re.S):
            spec = render.unpack_spec(payload)
            assert render.chart_id(spec) == target
            raw, packed = raw + len(render.spec_json(spec).encode("utf-8")), packed + len(payload)
    assert packed and packed < raw / 3, (packed, raw)


def test_chart_ids_derive_from_their_specs(site):
    page = (site / "chapters" / "per-watt.html").read_text(encoding="utf-8")
    specs = re.findall(r'<script type="application/gzip" class="perwatt-spec" data-target="([^"]+)">(.*?)</script>', page, re.S)
    assert len(specs) >= 2
    for target, payload in specs:
        spec = render.unpack_spec(payload)
        assert target == render.chart_id(spec)
        assert f'<div class="perwatt-chart" id="{target}"' in page


MATHML = "{http://www.w3.org/1998/Math/MathML}"


def test_formulas_are_mathml_written_at_build_time(site):
    """Every formula is MathML with its TeX kept beside it; no page loads a math library."""
    import xml.etree.ElementTree as ET

    formulas = {}
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        parser = _Resources()
        parser.feed(text)
        assert [u for u in parser.urls if "mathjax" in u.lower()] == [], page.relative_to(site)
        assert "MathJax" not in text
        wrappers = re.findall(r'<(?:span|div) class="math notranslate nohighlight"', text)
        found = re.findall(r"<math\b.*?</math>", text, re.S)
        assert len(found) >= len(wrappers), f"{page.relative_to(site)}: a formula was left as TeX"
        for markup in found:
            root = ET.fromstring(markup)  # well formed, or this raises
            tex = root.find(f"{MATHML}semantics/{MATHML}annotation[@encoding='application/x-tex']")
            drawn = "".join(root.find(f"{MATHML}semantics").find(f"{MATHML}mrow").itertext())
            assert tex is not None and tex.text and "\\" not in drawn, markup[:200]
            formulas.setdefault(page.relative_to(site).as_posix(), []).append((root, tex.text))
    assert not (site / "_static" / "mathjax").exists()
    per_watt = formulas["chapters/per-watt.html"]
    assert ["T", "1000/T", "P", "T"] <= [tex for _, tex in per_watt if "\\" not in tex]
    block = next(root for root, tex in per_watt if "aligned" in tex)
    assert block.get("display") == "block"
    rows = block.findall(f".//{MATHML}mtr")
    assert len(rows) == 4 and all(len(r.findall(f"{MATHML}mtd")) == 2 for r in rows)
    assert [c.text for c in rows[0].iter() if c.tag == f"{MATHML}mn"] == ["1000"]
    # Every chapter with math carries the stylesheet that aligns it, and only those.
    for path, found in formulas.items():
        assert "perwatt-math.css" in (site / path).read_text(encoding="utf-8"), path
    assert "perwatt-math.css" not in (site / "chapters" / "glossary.html").read_text(encoding="utf-8")


def test_no_page_loads_the_theme_icon_script_and_every_icon_has_a_glyph(site):
    """The theme's stylesheet draws its icons from the Font Awesome web font; the 1.5 MB script
    that would swap them for SVG is left out, so every icon class a page uses must have a glyph
    rule in that stylesheet."""
    css = (site / "_static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    assert "fa-solid-900.woff2" in css
    used = set()
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        parser = _Resources()
        parser.feed(text)
        assert [u for u in parser.urls if "fontawesome" in u] == [], page.relative_to(site)
        assert any("bootstrap.js" in u for u in parser.urls) or page.name == "index.html"
        for classes in re.findall(r'<(?:i|span) class="([^"]*\bfa-[^"]*)"', text):
            used |= {c for c in classes.split() if c.startswith("fa-")}
    sizes = {"fa-lg", "fa-solid", "fa-regular", "fa-brands"}
    icons = used - sizes
    assert {"fa-magnifying-glass", "fa-download", "fa-sun", "fa-moon", "fa-bars"} <= icons
    missing = [i for i in sorted(icons) if not re.search(rf"\.{i}:before[,{{]", css)]
    assert missing == []


def test_the_icon_fonts_hold_the_glyphs_the_pages_draw_and_little_else(site):
    from fontTools.ttLib import TTFont

    static = site / "_static"
    icons = iconfont.icon_characters((static / iconfont.STYLESHEET).read_text(encoding="utf-8"))
    used = set().union(*(iconfont.class_tokens(p.read_text(encoding="utf-8")) for p in pages(site))) & set(icons)
    assert {"fa-magnifying-glass", "fa-download", "fa-sun", "fa-moon", "fa-circle-half-stroke", "fa-bars"} <= used
    drawn = {icons[name] for name in used}
    # The rules left draw only those, and the close button the theme's script adds to a banner.
    assert set(icons.values()) == drawn | {"\uf00d"}
    fonts = {path.name: set(TTFont(path).getBestCmap()) for path in (static / iconfont.FONT_DIR).iterdir()}
    solid = fonts["fa-solid-900.woff2"]
    assert {ord(c) for c in drawn} <= solid
    # And what the stylesheets draw themselves: the collapsed contents' chevron, a note's icon.
    assert {0xF107, 0xF05A} <= solid
    assert len(solid) < 60 and (static / iconfont.FONT_DIR / "fa-solid-900.woff2").stat().st_size < 10_000
    assert fonts["fa-solid-900.ttf"] == solid and fonts["fa-regular-400.ttf"] == fonts["fa-regular-400.woff2"]


def test_no_widget_state_or_require_js_in_the_site(site):
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        assert "application/vnd.jupyter.widget-state+json" not in text
        assert "require.min.js" not in text and "html-manager" not in text


def test_prose_numbers_come_from_the_model(site):
    page = (site / "chapters" / "per-watt.html").read_text(encoding="utf-8")
    same = accounting.same_overhead_comparison("chip_rated")
    assert f"{same['ratio'].min():.2f}" in page and f"{same['ratio'].max():.2f}" in page
    pairs = accounting.pairs()
    intro = (site / "chapters" / "intro.html").read_text(encoding="utf-8")
    assert f"{pairs['recomputed_ratio'].min():.2f}" in intro
    # Each per-chip ratio sits beside the name of its own baseline and model.
    text = re.sub(r"<[^>]+>", "", page)
    per_chip = accounting.per_chip_comparison().set_index("model")["ratio"]
    said = re.search(r"\((\d\.\d\d) times\s+the GB300 on DeepSeek R1 and (\d\.\d\d) on Kimi K2\.5\), and more on\s+"
                     r"gpt-oss-120b \((\d\.\d\d) times the GB200\)", text)
    assert said, "the per-chip sentence has changed shape; update this test with it"
    assert said.groups() == tuple(f"{per_chip[m]:.2f}" for m in ("deepseek-r1", "kimi-k2.5", "gpt-oss-120b"))


def test_each_figure_cell_shows_its_chart_and_no_dead_control(site):
    # One cell per figure: in the site it is the chart, whose own controls work without a kernel.
    page = (site / "chapters" / "per-watt.html").read_text(encoding="utf-8")
    shown = (REPO / "chapters" / "per-watt.md").read_text(encoding="utf-8").count(".show()")
    assert shown >= 2
    assert page.count('class="perwatt-recompute"') == shown
    assert page.count('class="perwatt-chart"') == shown + 1  # and one static sketch
    assert "perwatt-live-note" not in page and "jupyter-widgets" not in page


def test_unchanged_chapters_are_not_executed_again(second_build):
    # --all re-reads every source; jupyter-cache must still serve every chapter unexecuted.
    proc = session_build(second_build.html.parent.parent, "--all", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = proc.stdout + proc.stderr
    notebooks = devtools.chapter_files()  # plain Markdown pages (glossary, references) are never executed
    assert log.count("Using cached notebook") == len(notebooks), log[-3000:]
    assert "Executing notebook" not in log
    assert "perwatt: executing" not in log


def test_model_changes_invalidate_the_execution_cache(tmp_path):
    cache = tmp_path / ".jupyter_cache"
    app = SimpleNamespace(outdir=str(tmp_path / "html"))
    config = SimpleNamespace(nb_execution_cache_path=str(cache))
    model = sphinxext.model_fingerprint()
    sphinxext._invalidate_stale_cache(app, config, model)
    assert app.perwatt_model_changed  # first build: nothing to trust yet
    (cache / "executed-notebook").write_text("outputs")
    sphinxext._invalidate_stale_cache(app, config, model)
    assert not app.perwatt_model_changed and (cache / "executed-notebook").exists()
    (cache / "perwatt-model.sha256").write_text("a different model")
    sphinxext._invalidate_stale_cache(app, config, model)
    assert app.perwatt_model_changed and not (cache / "executed-notebook").exists()


def test_every_data_file_can_be_downloaded_from_the_site(site):
    page = (site / "chapters" / "data-dictionary.html").read_text(encoding="utf-8")
    links = dict(re.findall(r'href="\.\./(_downloads/[0-9a-f]+/([^"]+))"', page))
    offered = {name: path for path, name in links.items()}
    for data_file in sorted((REPO / "data").glob("*.csv")) + [REPO / "data" / "datapackage.json"]:
        assert data_file.name in offered, f"no download link for {data_file.name}"
        served = site / offered[data_file.name]
        assert served.read_bytes() == data_file.read_bytes()


def test_data_dictionary_page_lists_every_column(site):
    from perwatt import data

    page = (site / "chapters" / "data-dictionary.html").read_text(encoding="utf-8")
    for row in data.dictionary().itertuples():
        assert f">{row.column}<" in page, f"{row.file}: {row.column}"


def test_every_glossary_term_is_linked_from_a_chapter(site):
    glossary = (site / "chapters" / "glossary.html").read_text(encoding="utf-8")
    terms = set(re.findall(r'<dt id="(term-[^"]+)">', glossary))
    assert len(terms) >= 15
    linked = set()
    for page in (site / "chapters").glob("*.html"):
        if page.name != "glossary.html":
            linked |= set(re.findall(r'href="glossary\.html#(term-[^"]+)"', page.read_text(encoding="utf-8")))
    assert terms - linked == set(), f"glossary terms never linked: {sorted(terms - linked)}"


def test_references_list_the_three_articles_and_chapters_cite_them(site):
    refs = (site / "chapters" / "references.html").read_text(encoding="utf-8")
    for title in ("Real Bet with Jalapeño", "first performance results for Jalapeño", "In-House Chip Jalapeño"):
        assert title in refs
    intro = (site / "chapters" / "intro.html").read_text(encoding="utf-8")
    assert intro.count('href="references.html#id') >= 3


def test_every_chart_has_a_text_description_and_a_table(site):
    charts = 0
    for page in pages(site):
        text = page.read_text(encoding="utf-8")
        for cid in re.findall(r'<div class="perwatt-chart" id="([^"]+)"', text):
            charts += 1
            after = text.split(f'data-target="{cid}">', 1)[1].split("</details>", 1)[0]
            description = re.search(r'<p class="perwatt-description">(.+?)</p>', after)
            assert description and len(description.group(1)) > 40, f"{page.name} {cid}: no description"
            assert re.search(r"<tbody><tr><td>", after), f"{page.name} {cid}: no table alternative"
    assert charts >= 10


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for attribute in ("href", "src"):
            if a.get(attribute) and tag in ("a", "link", "script", "img"):
                self.hrefs.append(a[attribute])


def test_internal_links_and_anchors_resolve(site):
    parsed = {}
    for page in pages(site):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        parsed[page.resolve()] = parser
    broken = []
    for page, parser in parsed.items():
        for href in parser.hrefs:
            if re.match(r"^([a-z]+:|//)", href):
                continue  # other schemes and hosts are links out, not part of the site
            path, _, anchor = href.partition("#")
            path = path.split("?", 1)[0]
            target = (page.parent / path).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.name}: {href}")
            elif anchor and target in parsed and anchor not in parsed[target].ids:
                broken.append(f"{page.name}: {href} (no such anchor)")
    assert broken == []


def test_two_clean_builds_give_byte_identical_html(site, second_build):
    first = digests(site)
    assert sorted(first) == sorted(second_build.digests)
    differing = [name for name in first if first[name] != second_build.digests[name]]
    assert differing == []


#: MyST and Sphinx markup that must never reach a reader as text: roles and directive fences.
RAW_MARKUP = re.compile(r"\{glue(?::[a-z]+)?\}|\{(?:term|numref|ref|cite(?::[a-z]+)?|download|doc|eq|exercise|solution)\}"
                        r"|```\{|:::\{")


class _VisibleText(HTMLParser):
    """The text a reader sees: everything outside scripts, styles and code."""

    HIDDEN = {"script", "style", "pre", "code", "textarea"}

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self.HIDDEN:
            self.depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN and self.depth:
            self.depth -= 1

    def handle_data(self, text: str) -> None:
        if not self.depth:
            self.parts.append(text)


def visible_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    return " ".join(parser.parts)


def test_the_markup_finder_sees_what_a_reader_would():
    page = '<p>US \\({glue:text}`b:,.0f` to US\\)</p><pre>{glue:text}`shown as code`</pre><code>{term}`x`</code>'
    assert RAW_MARKUP.findall(visible_text(page)) == ["{glue:text}"]


def test_no_raw_markup_reaches_a_reader(site):
    found = {}
    for page in pages(site):
        text = visible_text(page.read_text(encoding="utf-8"))
        hits = [text[max(0, m.start() - 40):m.end() + 30] for m in RAW_MARKUP.finditer(text)]
        if hits:
            found[page.relative_to(site).as_posix()] = hits[:3]
    assert found == {}


class _Reading(HTMLParser):
    """A page's article as a reader meets it: its text in order, each piece marked with the glossary
    entry its link points to, if any. Headings, code, tables (data, printed from ``data/``), charts'
    text alternatives and scripts are left out: a term's first use is expected in the prose, where a
    link can sit."""

    SKIP = {"script", "style", "pre", "code", "h1", "h2", "h3", "h4", "h5", "h6", "details", "nav", "table"}

    def __init__(self) -> None:
        super().__init__()
        self.in_article = 0
        self.skip = 0
        self.link: list[str | None] = []
        self.pieces: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        a = dict(attrs)
        if tag == "article" and "bd-article" in (a.get("class") or ""):
            self.in_article += 1
        if tag in self.SKIP:
            self.skip += 1
        if tag == "a":
            href = a.get("href") or ""
            self.link.append(href.split("#", 1)[1] if "glossary.html#term-" in href or href.startswith("#term-")
                             else None)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.SKIP and self.skip:
            self.skip -= 1
        if tag == "a" and self.link:
            self.link.pop()
        if tag == "article" and self.in_article:
            self.in_article -= 1

    def handle_data(self, text: str) -> None:
        if self.in_article and not self.skip:
            self.pieces.append((text, next((x for x in reversed(self.link) if x), None)))


def glossary_terms(site: Path) -> dict[str, str]:
    """Each glossary term's anchor id and its text."""
    page = (site / "chapters" / "glossary.html").read_text(encoding="utf-8")
    return {anchor: html.unescape(re.sub(r"<[^>]+>", "", text)).strip()
            for anchor, text in re.findall(r'<dt id="(term-[^"]+)">(.*?)<a class="headerlink"', page, re.S)}


#: Other words by which a reader meets a glossary term before its own name appears.
ALIASES = {
    "All-in power": r"all-in",
    "Concurrency": r"concurrenc(?:y|ies)",
    "MoE": r"mixtures? of experts|mixture-of-experts",
    "Prefix cache": r"prefix cach(?:e|es|ing)",
    "Speculative decoding": r"speculation|speculative",
    "Tail latency": r"tail latency|the tail",
}


def test_every_glossary_term_is_a_link_where_a_reader_first_meets_it(site):
    terms = glossary_terms(site)
    assert len(terms) >= 30
    assert set(ALIASES) <= set(terms.values()), set(ALIASES) - set(terms.values())
    reading = [f"chapters/{f.split('/')[-1]}.html" for f in devtools.toc_files()
               if f.split("/")[-1] not in ("glossary", "references", "data-dictionary")]
    pieces: list[tuple[str, str | None, str]] = []
    for page in reading:
        parser = _Reading()
        parser.feed((site / page).read_text(encoding="utf-8"))
        pieces += [(text, link, page) for text, link in parser.pieces]
    unlinked = {}
    for anchor, term in terms.items():
        words = re.escape(term) + r"(?:s|es)?" + (f"|{ALIASES[term]}" if term in ALIASES else "")
        pattern = re.compile(r"(?<![\w-])(?:" + words + r")(?![\w-])", re.IGNORECASE)
        # A link may word the term differently ("all-in provisioned" for All-in power): it counts.
        first = next(((text, link, page) for text, link, page in pieces if link == anchor or pattern.search(text)),
                     None)
        if first is None:
            unlinked[term] = "never used in the chapters"
            continue
        text, link, page = first
        if link != anchor:
            match = pattern.search(text)
            unlinked[term] = f"{page}: …{text[max(0, match.start() - 40):match.end() + 20]}…"
    assert unlinked == {}, "first met unlinked:\n" + "\n".join(f"{t}: {w!r}" for t, w in unlinked.items())


def test_a_build_gets_the_sessions_environment_not_what_a_test_has_set_since(monkeypatch, tmp_path):
    # The builds run in a background thread while the worker's other tests run, some of which point
    # PERWATT_DATA at an edited copy of the data: a build must not read that.
    import conftest

    seen = {}
    monkeypatch.setattr(conftest.devtools, "build", lambda folder, *extra, timeout, environment=None:
                        seen.update(environment or {}) or SimpleNamespace(stdout="", stderr="", returncode=0))
    monkeypatch.setenv("PERWATT_DATA", str(tmp_path / "an edited copy"))
    conftest._build(tmp_path)
    assert seen and seen.get("PERWATT_DATA") == SESSION_ENVIRONMENT.get("PERWATT_DATA") != str(tmp_path / "an edited copy")
