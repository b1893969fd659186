"""The theme's icons and controls, and the formulas, in a real Chromium with every other host cut off.

The site ships neither the theme's icon script (fontawesome.js) nor MathJax: icons are drawn by the
theme's stylesheet from its Font Awesome web font, cut at build time to the icons the book shows, and
formulas are MathML that the browser lays out itself. So these check what a reader sees: every icon
has its glyph, drawn with ink from the shipped font and not from a fallback, and the font loaded, the colour
mode, search and download controls do what they say, the formulas are laid out as formulas (rows
stacked, equals signs aligned, fractions over their denominators), and no page asks for a math
library or an icon script.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser import (PageVisit, _glyph_problems, _violations_with_every_box_open, page_checked,  # noqa: F401 (fixtures)
                          pages_checked, rendered_glyphs)

pytestmark = pytest.mark.browser


@contextmanager
def clean_visit(browser, site_url: str, path: str):
    """A page that, when the test is done with it, must have logged no error and fetched nothing
    from another host."""
    visit = PageVisit(browser, site_url, path)
    try:
        yield visit.page
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()

#: Every icon element that is shown, with what its ::before draws and in which font.
ICONS = """async () => {
  await document.fonts.ready;
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const faces = Array.from(document.fonts).filter((f) => f.family.includes('Font Awesome'));
  return {
    icons: Array.from(document.querySelectorAll('[class^="fa-"], [class*=" fa-"]')).filter(shown).map((i) => {
      const before = getComputedStyle(i, '::before');
      return {cls: i.className, content: before.content, font: before.fontFamily,
              weight: before.fontWeight, width: i.getBoundingClientRect().width};
    }),
    loaded: faces.filter((f) => f.status === 'loaded').map((f) => f.family + ' ' + f.weight),
    svgIcons: document.querySelectorAll('svg.svg-inline--fa').length,
  };
}"""


def _icon_problems(state: dict) -> list:
    return [i for i in state["icons"]
            if i["content"] in ("none", "normal", '""') or "Font Awesome" not in i["font"] or i["width"] <= 0]


@pytest.mark.parametrize("path", ["chapters/per-watt.html", "search.html", "chapters/glossary.html"])
def test_every_icon_is_drawn_from_the_theme_font(site_url, browser, path):
    visit = PageVisit(browser, site_url, path)
    try:
        state = visit.page.evaluate(ICONS)
        names = {c for i in state["icons"] for c in i["cls"].split() if c.startswith("fa-")}
        # The header's search, colour mode, download and contents icons, at least.
        assert len(state["icons"]) >= 4 and {"fa-magnifying-glass", "fa-download", "fa-list"} & names
        assert _icon_problems(state) == []
        glyphs = rendered_glyphs(visit.page)
        assert _glyph_problems(glyphs) == []
        # Every icon class shown is among the glyphs checked.
        assert len(glyphs) >= len(state["icons"]) and {i["cls"] for i in state["icons"]} <= {g["cls"] for g in glyphs}
        weights = {i["weight"] for i in state["icons"]}
        assert all(any(w in f for f in state["loaded"]) for w in weights), (weights, state["loaded"])
        assert state["svgIcons"] == 0  # no script replaced them
        assert [u for u in visit.requested if "fontawesome" in u and u.endswith(".js")] == []
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


def test_every_glyph_on_every_page_is_drawn_from_the_shipped_font(pages_checked):
    problems = {path: found for path, visit in pages_checked.items() if (found := _glyph_problems(visit["glyphs"]))}
    seen = {g["text"] for visit in pages_checked.values() for g in visit["glyphs"]}
    assert problems == {}
    # The header's search, contents and download icons, and one of the colour modes', at least.
    assert {"\uf002", "\uf03a", "\uf019"} <= seen and {"\uf185", "\uf186", "\uf042"} & seen, seen


#: Two rules that draw, in the theme's solid icon font, an icon the book uses (the sun) and one it does
#: not (a dragon, U+F6D5).
PROBES = r"""() => {
  const style = document.createElement('style');
  style.textContent = `#probe-used::before, #probe-unused::before {font: 900 16px "Font Awesome 6 Free"}
    #probe-used::before {content: "\\f185"} #probe-unused::before {content: "\\f6d5"}`;
  document.head.append(style);
  for (const id of ['probe-used', 'probe-unused']) {
    const probe = document.createElement('span');
    probe.id = id;
    document.querySelector('article').prepend(probe);
  }
}"""


def test_an_icon_the_book_does_not_use_is_not_shipped_and_would_be_caught(site_url, browser):
    with clean_visit(browser, site_url, "chapters/intro.html") as page:
        page.evaluate(PROBES)
        probes = {g["id"]: g for g in rendered_glyphs(page) if g["id"].startswith("probe-")}
        assert probes.keys() == {"probe-used", "probe-unused"}, probes
        used, unused = probes["probe-used"], probes["probe-unused"]
        assert (used["text"], unused["text"]) == ("\uf185", "\uf6d5")
        assert _glyph_problems([used]) == [] and used["ink"] > 300  # the sun's ink box at 32 px: about 32 × 32
        # The dragon's rule names the same font, but the shipped font has no dragon: no ink, or
        # another font's character; either way the check above reports it.
        assert _glyph_problems([unused]) == [unused], unused


def test_no_page_asks_for_an_icon_script_or_a_math_library(pages_checked):
    asked = {}
    for path, visit in pages_checked.items():
        libraries = [u for u in visit["requested"] if "mathjax" in u.lower() or "fontawesome.js" in u]
        if libraries or visit["mathjax"] != ["undefined", 0]:
            asked[path] = (libraries, visit["mathjax"])
    assert len(pages_checked) >= 10 and asked == {}


def test_colour_mode_button_cycles_modes_and_repaints(site_url, browser):
    visit = PageVisit(browser, site_url, "chapters/per-watt.html")
    page = visit.page
    try:
        button = page.locator(".theme-switch-button:visible").first
        seen = {}
        for _ in range(3):
            button.click()
            mode = page.evaluate("() => document.documentElement.dataset.mode")
            toggle = [g for g in rendered_glyphs(page) if "theme-switch" in g["cls"]]
            assert len(toggle) == 1 and _glyph_problems(toggle) == [], (mode, toggle)
            seen[mode] = page.evaluate("""() => {
              const icon = Array.from(document.querySelectorAll('.theme-switch-button .theme-switch'))
                .find((i) => i.getClientRects().length > 0);
              return {icon: icon && icon.dataset.mode, glyph: icon && getComputedStyle(icon, '::before').content,
                      theme: document.documentElement.dataset.theme,
                      background: getComputedStyle(document.body).backgroundColor};
            }""")
        assert set(seen) == {"auto", "light", "dark"}
        assert all(s["icon"] == mode for mode, s in seen.items())  # the button shows the mode it is in
        assert len({s["glyph"] for s in seen.values()}) == 3  # with a different icon for each
        assert seen["dark"]["theme"] == "dark" and seen["light"]["theme"] == "light"
        assert seen["dark"]["background"] != seen["light"]["background"]
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


#: The two things axe (4.14.1, every box open) found below 4.5:1 in the dark theme before 5918c73,
#: each with a page that has it and what on that page has it: captions of output tables (1.71:1 on
#: the light panel the theme gives HTML outputs; per-watt.html, which also has charts and their
#: tables) and a link in an exercise box (2.09:1; fleet.html's link to its figure, the only one then).
DARK_PAGES = {"chapters/per-watt.html": ".cell_output .text_html caption", "chapters/fleet.html": "div.exercise a"}


@pytest.mark.parametrize("path", DARK_PAGES)
def test_the_dark_theme_passes_axe_with_every_box_open(site_url, browser, path):
    """A reader who picks the dark theme with the colour mode button: on these two pages, once the
    pointer and focus have left the button, axe finds nothing with every box open."""
    with clean_visit(browser, site_url, path) as page:
        assert page.locator(DARK_PAGES[path]).count() >= 1, f"{path} no longer has what this test is for"
        button = page.locator(".theme-switch-button:visible").first
        for _ in range(3):  # auto, light and dark, in an order that depends on the system's preference
            if page.evaluate("() => document.documentElement.dataset.theme") == "dark":
                break
            button.click()
        assert page.evaluate("() => [document.documentElement.dataset.mode, document.documentElement.dataset.theme]") \
            == ["dark", "dark"]
        # While the pointer or focus is on the button, the theme's Bootstrap tooltip shows, outside any
        # landmark, and axe reports it as region (moderate), in either theme; the test moves both away first.
        page.mouse.move(0, 0)
        page.evaluate("() => document.activeElement.blur()")
        page.wait_for_function("() => !document.querySelector('.tooltip')", timeout=5_000)
        assert _violations_with_every_box_open(page) == []


def test_search_box_finds_a_chapter(site_url, browser):
    with clean_visit(browser, site_url, "chapters/intro.html") as page:
        button = [g for g in rendered_glyphs(page) if "fa-magnifying-glass" in g["cls"]]
        assert button and _glyph_problems(button) == []
        page.locator(".search-button__button:visible").first.click()
        field = page.locator("#pst-search-dialog input[name=q]")
        field.wait_for(state="visible")
        assert page.evaluate("() => document.getElementById('pst-search-dialog').open")
        field.fill("joules")
        field.press("Enter")
        page.wait_for_url("**/search.html?q=joules*")
        results = page.locator("#search-results ul.search li a")
        results.first.wait_for(timeout=20_000)
        links = results.evaluate_all("as => as.map((a) => a.getAttribute('href'))")
        assert any("per-watt.html" in link for link in links), links


def test_download_menu_offers_files_that_exist_and_print(site_url, browser):
    with clean_visit(browser, site_url, "chapters/per-watt.html") as page:
        page.evaluate("() => { window.printed = 0; window.print = () => { window.printed += 1; }; }")
        menu = page.locator(".dropdown-download-buttons")
        menu.locator("button.dropdown-toggle").click()
        items = menu.locator(".dropdown-menu")
        items.wait_for(state="visible")
        assert _icon_problems(page.evaluate(ICONS)) == []
        shown = rendered_glyphs(page)
        menu_icons = {c for g in shown for c in g["cls"].split() if c.startswith("fa-")}
        assert {"fa-download", "fa-file", "fa-file-pdf", "fa-user-graduate"} <= menu_icons, menu_icons
        assert _glyph_problems(shown) == []
        hrefs = items.locator("a[href]").evaluate_all("as => as.map((a) => a.href)")
        assert any(h.endswith(".md") for h in hrefs) and any(h.endswith(".ipynb") for h in hrefs), hrefs
        for href in hrefs:
            response = page.request.get(href)
            assert response.ok and len(response.body()) > 1000, href
            if href.endswith(".ipynb"):
                assert json.loads(response.body())["cells"]
        items.locator("button.btn-download-pdf-button").click()
        assert page.evaluate("() => window.printed") == 1


#: Where the parts of the first display formula on a page sit: rows of its table, the first
#: operator of each row's right-hand cell (the = signs), and numerator over denominator.
LAYOUT = """() => {
  const box = (e) => e.getBoundingClientRect();
  const content = (e) => { const r = document.createRange(); r.selectNodeContents(e); return r.getBoundingClientRect(); };
  const maths = Array.from(document.querySelectorAll('math'));
  const table = document.querySelector('div.math math mtable');
  const rows = table ? Array.from(table.querySelectorAll(':scope > mtr')) : [];
  const fracs = Array.from(document.querySelectorAll('div.math mfrac'));
  return {
    count: maths.length,
    empty: maths.filter((m) => box(m).width <= 0 || box(m).height <= 0).length,
    blocks: maths.filter((m) => m.getAttribute('display') === 'block').length,
    rowTops: rows.map((r) => box(r).top),
    equalsX: rows.map((r) => box(r.querySelector('mtd:nth-child(2) mo')).left),
    namesRight: rows.map((r) => content(r.querySelector('mtd:first-child')).right),
    fractions: fracs.map((f) => [box(f.children[0]).bottom, box(f.children[1]).top]),
    lineHeight: parseFloat(getComputedStyle(document.querySelector('article p')).lineHeight),
  };
}"""


def test_formulas_are_laid_out_by_the_browser(site_url, browser):
    visit = PageVisit(browser, site_url, "chapters/per-watt.html")
    try:
        layout = visit.page.evaluate(LAYOUT)
        assert layout["count"] >= 4 and layout["blocks"] >= 1 and layout["empty"] == 0
        # The energy-per-token block: four rows, each below the last, = signs in one column.
        tops = layout["rowTops"]
        assert len(tops) == 4 and all(b - a > layout["lineHeight"] * 0.8 for a, b in zip(tops, tops[1:]))
        assert max(layout["equalsX"]) - min(layout["equalsX"]) < 1.5, layout["equalsX"]
        assert max(layout["namesRight"]) - min(layout["namesRight"]) < 1.5  # names flush right, as in TeX
        assert layout["fractions"] and all(num <= den + 0.5 for num, den in layout["fractions"])
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


#: Where the links of one sidebar sit: whether its phone-width dialog is open, and each link that is
#: shown, with its box, and whether the box lies inside the viewport.
SIDEBAR_LINKS = """([dialog, nav]) => {
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const width = document.documentElement.clientWidth, height = window.innerHeight;
  return {
    open: document.getElementById(dialog).open,
    links: Array.from(document.querySelectorAll(nav + ' a[href]')).filter(shown).map((a) => {
      const r = a.getBoundingClientRect();
      return {href: a.getAttribute('href'), text: a.textContent.trim(),
              inside: r.width > 0 && r.left >= 0 && r.right <= width && r.top >= 0 && r.bottom <= height,
              inDialog: !!a.closest('#' + dialog)};
    }),
  };
}"""
PRIMARY = ["pst-primary-sidebar-modal", ".bd-docs-nav"]
SECONDARY = ["pst-secondary-sidebar-modal", "nav.page-toc"]


def _origin(site, site_url: str, origin: str) -> str:
    """The site's base URL over http://127.0.0.1, or on disk (file://), as a reader opens it."""
    return site_url if origin == "http" else site.as_uri()


def _open(page, toggle: str, which: list[str]) -> dict:
    """Click the one shown ``toggle`` button, as a reader would, and wait for its dialog."""
    button = page.locator(f"{toggle}:visible")
    assert button.count() == 1
    button.click()
    try:
        page.wait_for_function("(id) => document.getElementById(id).open", arg=which[0], timeout=5_000)
    except PlaywrightTimeout:
        pytest.fail(f"clicking {toggle} did not open #{which[0]}: {page.evaluate(SIDEBAR_LINKS, which)}")
    return page.evaluate(SIDEBAR_LINKS, which)


def _closes(page, which: list[str]) -> None:
    """Wait until the dialog is closed and none of its links is left on the screen (the sidebar
    slides back out over a quarter of a second)."""
    try:
        page.wait_for_function(f"(which) => {{ const s = ({SIDEBAR_LINKS})(which); "
                               "return !s.open && !s.links.some((link) => link.inside); }",
                               arg=which, timeout=5_000)
    except PlaywrightTimeout:
        pytest.fail(f"#{which[0]} did not close: {page.evaluate(SIDEBAR_LINKS, which)}")


@pytest.mark.parametrize(("origin", "width"), [("http", 390), ("http", 768), ("file", 390)])
def test_the_table_of_contents_opens_on_a_phone_and_a_tablet(site, site_url, browser, origin, width):
    """At a phone's and a tablet's width the book's contents hide behind the header's menu button:
    a click opens them inside the screen, the backdrop and Escape close them, a link in them goes to
    its chapter."""
    visit = PageVisit(browser, _origin(site, site_url, origin), "chapters/per-watt.html", width=width)
    page = visit.page
    try:
        closed = page.evaluate(SIDEBAR_LINKS, PRIMARY)
        assert not closed["open"] and not any(link["inside"] for link in closed["links"])  # until asked for
        shown = _open(page, ".primary-toggle", PRIMARY)
        chapters = [link for link in shown["links"] if link["href"] == "benchmark-tables.html"]
        assert len(shown["links"]) >= 10 and all(link["inDialog"] for link in shown["links"]), shown
        assert len(chapters) == 1 and chapters[0]["inside"], shown
        # A click beside the dialog, on its backdrop, closes it; so does Escape.
        page.mouse.click(width - 5, 450)
        _closes(page, PRIMARY)
        _open(page, ".primary-toggle", PRIMARY)
        page.keyboard.press("Escape")
        _closes(page, PRIMARY)
        _open(page, ".primary-toggle", PRIMARY)
        page.locator(f"#{PRIMARY[0]} a[href='benchmark-tables.html']").click()
        page.wait_for_url("**/chapters/benchmark-tables.html")
        assert page.locator("h1").first.inner_text().startswith("The benchmark tables")
        assert not any(link["inside"] for link in page.evaluate(SIDEBAR_LINKS, PRIMARY)["links"])  # and closed
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


@pytest.mark.parametrize(("origin", "width"), [("http", 390), ("http", 768), ("file", 390)])
def test_the_page_contents_open_on_a_phone_and_a_tablet(site, site_url, browser, origin, width):
    """The page's own contents (its sections), behind the header's other sidebar button."""
    visit = PageVisit(browser, _origin(site, site_url, origin), "chapters/per-watt.html", width=width)
    page = visit.page
    try:
        assert not any(link["inside"] for link in page.evaluate(SIDEBAR_LINKS, SECONDARY)["links"])
        shown = _open(page, ".secondary-toggle", SECONDARY)
        sections = [link for link in shown["links"] if link["href"] == "#where-on-the-curve"]
        assert len(sections) == 1 and sections[0]["inside"] and sections[0]["inDialog"], shown
        page.keyboard.press("Escape")
        _closes(page, SECONDARY)
        _open(page, ".secondary-toggle", SECONDARY)
        page.locator(f"#{SECONDARY[0]} a[href='#where-on-the-curve']").click()
        page.wait_for_url("**/chapters/per-watt.html#where-on-the-curve")
        top = page.evaluate("() => document.getElementById('where-on-the-curve').getBoundingClientRect().top")
        assert 0 <= top < 200, top  # the section's heading at the top of the screen, below the header
        # The theme leaves the dialog open over the section; the backdrop beside it closes it.
        page.mouse.click(5, 450)
        _closes(page, SECONDARY)
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


def test_the_menu_button_folds_the_contents_away_on_a_wide_screen(site_url, browser):
    """Wider than 992 px the contents sit beside the page; the same button hides and shows them."""
    visit = PageVisit(browser, site_url, "chapters/per-watt.html")
    page = visit.page
    try:
        visible = "() => getComputedStyle(document.getElementById('pst-primary-sidebar')).visibility"
        assert page.evaluate(visible) == "visible"
        page.locator(".primary-toggle:visible").click()
        page.wait_for_function(f"() => ({visible})() === 'hidden'", timeout=5_000)
        assert not page.evaluate("() => document.getElementById('pst-primary-sidebar-modal').open")
        page.locator(".primary-toggle:visible").click()
        page.wait_for_function(f"() => ({visible})() === 'visible'", timeout=5_000)
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()
