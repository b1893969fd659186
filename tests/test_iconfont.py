"""The icon font cut to the icons the book shows: which icons are found, which rules are kept, and
the fonts written (from the theme's real Font Awesome files)."""

from __future__ import annotations

import os
from pathlib import Path

import pydata_sphinx_theme
import pytest
from fontTools.ttLib import TTFont

from perwatt import iconfont

THEME_STATIC = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"
SOLID = THEME_STATIC / iconfont.FONT_DIR / "fa-solid-900.woff2"
SUN, MOON, XMARK, CHEVRON = "\uf185", "\uf186", "\uf00d", "\uf107"

CSS = ('.fa-0:before{content:"\\30 "}.fa-sun:before{content:"\\f185"}.fa-moon:before,.fa-night:before{content:"\\f186"}'
       '.fa-dragon:before{content:"\\f6d5"}.nav .fa-ghost:before{content:"\\f6e2"}.fa-lg{font-size:1.25em}'
       ':root{--pst-icon-bell:"\uf0f3"}.onthispage:after{content:"\\f107";font-family:Font Awesome\\ 6 Free}'
       "\n/*# sourceMappingURL=theme.css.map*/")


def test_icon_rules_are_read_with_their_aliases_and_escapes():
    icons = iconfont.icon_characters(CSS)
    assert icons == {"fa-0": "0", "fa-sun": SUN, "fa-moon": MOON, "fa-night": MOON, "fa-dragon": "\uf6d5"}
    # A rule for an icon inside something else is the theme's own, not an icon rule.
    assert "fa-ghost" not in icons


def test_characters_the_stylesheet_draws_itself_are_kept_but_not_the_icon_rules_own():
    assert iconfont.css_drawn_characters(CSS) == {"\uf6e2", "\uf0f3", CHEVRON}


def test_trimming_drops_only_icon_rules_no_class_in_use_names():
    trimmed = iconfont.trim_icon_rules(CSS, {"fa-night", "fa-sun"})
    assert '.fa-moon:before,.fa-night:before{content:"\\f186"}' in trimmed  # a rule is kept whole
    assert '.fa-sun:before{content:"\\f185"}' in trimmed
    assert "fa-dragon" not in trimmed and "fa-0:" not in trimmed
    assert ".nav .fa-ghost:before" in trimmed and ".fa-lg{font-size:1.25em}" in trimmed and "--pst-icon-bell" in trimmed
    assert "sourceMappingURL" not in trimmed


def test_a_trimmed_stylesheet_is_kept_and_used_again_only_for_the_same_sheet_and_classes(tmp_path, monkeypatch):
    keep = {"fa-night", "fa-sun"}
    expected = iconfont.trim_icon_rules(CSS, keep)
    assert iconfont._trimmed_remembered(CSS, keep, tmp_path) == expected
    monkeypatch.setattr(iconfont, "trim_icon_rules", lambda *a: pytest.fail("trimmed again"))
    assert iconfont._trimmed_remembered(CSS, set(keep), tmp_path) == expected  # read back
    monkeypatch.undo()
    # Another class kept, or another sheet, is trimmed afresh.
    assert "fa-dragon" in iconfont._trimmed_remembered(CSS, keep | {"fa-dragon"}, tmp_path)
    assert iconfont._trimmed_remembered(CSS + ".x{}", keep, tmp_path).endswith(".x{}")
    assert len(list(tmp_path.glob("*.trimmed.css"))) == 3


def test_the_pages_are_every_html_file_outside_the_static_folders(tmp_path):
    for name in ("index.html", "chapters/a.html", "chapters/deep/b.html", "_static/vendor.html",
                 "chapters/_static/c.html", "chapters/notes.txt", "_sources/x.html"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x", encoding="utf-8")
    assert iconfont.shipped_pages(tmp_path) == [tmp_path / n for n in
                                                ("_sources/x.html", "chapters/a.html", "chapters/deep/b.html", "index.html")]


def test_classes_are_read_from_class_attributes_only():
    html = '<i class="fa-solid fa-sun fa-lg"></i><p>a sofa-bed, or fa-dragon in prose</p><span class=\'fas fa-moon\'>'
    assert iconfont.class_tokens(html) == {"fa-solid", "fa-sun", "fa-lg", "fa-moon"}


def _site(root: Path) -> Path:
    (root / "_static" / "styles").mkdir(parents=True)
    (root / "_static" / iconfont.STYLESHEET).write_text("already cut", encoding="utf-8")
    (root / "_static" / "close.js").write_text('i.classList = "fa-solid fa-xmark";', encoding="utf-8")
    (root / "_static" / "unused.js").write_text('i.classList = "fa-dragon";', encoding="utf-8")
    (root / "_static" / "extra.css").write_text('.onthispage:after{content:"\\f107"}', encoding="utf-8")
    (root / "chapters").mkdir()
    (root / "chapters" / "a.html").write_text(
        '<link rel="stylesheet" href="../_static/styles/pydata-sphinx-theme.css?digest=1">'
        '<link rel="stylesheet" href="../_static/extra.css"><script src="../_static/close.js"></script>'
        '<i class="fa-solid fa-sun fa-lg"></i><i class="fa-solid fa-spelled-wrong"></i>', encoding="utf-8")
    return root


def test_the_icons_found_are_the_pages_their_scripts_and_their_stylesheets(tmp_path):
    css = CSS + '.fa-xmark:before{content:"\\f00d"}.fa-solid{font-weight:900}'
    use = iconfont.find_icon_use(_site(tmp_path), css)
    assert use.classes == {"fa-sun", "fa-xmark"}  # fa-dragon is only in a script no page loads
    assert use.characters == {SUN, XMARK, CHEVRON, "\uf6e2", "\uf0f3"}
    assert use.unknown == {"fa-spelled-wrong"}


def test_a_rebuild_finds_the_same_icons_from_what_the_last_one_kept_and_rescans_a_changed_page(tmp_path):
    css = CSS + '.fa-xmark:before{content:"\\f00d"}.fa-solid{font-weight:900}'
    site, kept = _site(tmp_path), tmp_path / "scans.json"
    first = iconfont.Scans(kept)
    use = iconfont.find_icon_use(site, css, first)
    first.save()
    assert use == iconfont.find_icon_use(site, css)
    # Kept: a second build computes nothing again.
    second = iconfont.Scans(kept)
    calls = []
    def counted(scan, text, compute):
        return iconfont.Scans.__call__(second, scan, text, lambda: calls.append(scan) or compute())
    assert iconfont.find_icon_use(site, css, counted) == use and calls == []
    # Nothing new found: the file is left as it is, not written again.
    before = kept.stat().st_mtime_ns
    os.utime(kept, ns=(before - 10**9, before - 10**9))
    second.save()
    assert kept.stat().st_mtime_ns == before - 10**9
    # A page that changed is scanned again, and what it now holds counts.
    page = site / "chapters" / "a.html"
    page.write_text(page.read_text(encoding="utf-8").replace("fa-sun", "fa-moon"), encoding="utf-8")
    moved = iconfont.find_icon_use(site, css, iconfont.Scans(kept))
    assert "fa-moon" in moved.classes and "fa-sun" not in moved.classes and MOON in moved.characters
    assert moved == iconfont.find_icon_use(site, css)
    # An unreadable file is scanned afresh, not trusted.
    kept.write_text("{not json", encoding="utf-8")
    assert iconfont.find_icon_use(site, css, iconfont.Scans(kept)) == moved


def _cmap(path: Path) -> set[int]:
    return set(TTFont(path).getBestCmap())


def test_a_font_is_cut_to_the_characters_it_has_and_written_the_same_twice(tmp_path):
    first, second, sfnt = tmp_path / "a.woff2", tmp_path / "b.woff2", tmp_path / "c.ttf"
    iconfont.subset_font(SOLID, first, {SUN, MOON, "\U0010fffd"}, "woff2")
    iconfont.subset_font(SOLID, second, {SUN, MOON, "\U0010fffd"}, "woff2")
    iconfont.subset_font(SOLID, sfnt, {SUN}, None)
    assert _cmap(first) == {0xF185, 0xF186} and _cmap(sfnt) == {0xF185}
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes()[:4] == b"wOF2" and sfnt.read_bytes()[:4] == b"\x00\x01\x00\x00"
    assert first.stat().st_size < SOLID.stat().st_size / 50
    font = TTFont(first)
    sun = font["glyf"][font.getBestCmap()[0xF185]]
    assert sun.numberOfContours > 0 and font["hmtx"][font.getBestCmap()[0xF185]][0] == 512  # the glyph, whole
    assert "Font Awesome" in font["name"].getDebugName(0)  # the copyright travels with it


@pytest.mark.parametrize("name", iconfont.FONTS)
def test_every_theme_font_the_build_cuts_is_where_it_is_looked_for(name):
    for suffix in iconfont.FORMATS:
        assert (THEME_STATIC / iconfont.FONT_DIR / f"{name}{suffix}").is_file()
    assert (THEME_STATIC / iconfont.STYLESHEET).is_file()


def test_the_theme_stylesheet_has_the_icon_rules_the_book_relies_on():
    icons = iconfont.icon_characters((THEME_STATIC / iconfont.STYLESHEET).read_text(encoding="utf-8"))
    assert len(icons) > 1500  # the whole set: the rules are read, not missed by a change of format
    assert icons["fa-sun"] == SUN and icons["fa-magnifying-glass"] == "\uf002" and icons["fa-search"] == "\uf002"
