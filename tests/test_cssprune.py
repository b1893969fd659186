"""The stylesheets cut to the rules the book's pages can match: which rules stay (byte for byte),
which go, and, on the built site, that no class a page uses lost its rules."""

from __future__ import annotations

import re
from pathlib import Path

import myst_nb
import pydata_sphinx_theme
import pytest
import sphinx_design
import tinycss2

from perwatt import cssprune, iconfont

THEME_STATIC = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"


def words(*markup: str, scripts: tuple[str, ...] = ()) -> cssprune.Corpus:
    return cssprune.corpus(markup, scripts)


PAGE = '<nav class="navbar show" id="top"><a class="nav-link" href="#">x</a></nav>'


def test_a_corpus_from_words_found_before_is_the_corpus_of_the_texts():
    script = "el.classList.add('show'); name = 'bs-' + kind + '-auto'; x-y-"
    texts = words(PAGE, "<p>prose</p>", scripts=(script,))
    found = cssprune.corpus_of_words([cssprune.WORD.findall(PAGE), cssprune.WORD.findall("<p>prose</p>")],
                                     [sorted(set(cssprune.WORD.findall(script)))])
    assert found == texts and "bs-" in found.prefixes and found.has("bs-tooltip-auto") and found.has("prose")


def test_a_rule_for_an_unused_class_goes_and_one_for_a_used_class_stays():
    css = ".navbar{color:red}\n.jumbotron{color:blue}\n.nav-link:hover{color:green}\n"
    assert cssprune.prune(css, words(PAGE)) == ".navbar{color:red}\n.nav-link:hover{color:green}\n"


def test_a_selector_list_with_one_selector_that_could_match_is_kept_whole():
    css = ".card-title, .navbar > .nav-link ,.jumbotron{margin:0}.card,.jumbotron{padding:0}"
    assert cssprune.prune(css, words(PAGE)) == ".card-title, .navbar > .nav-link ,.jumbotron{margin:0}"


def test_every_class_and_id_of_a_selector_must_be_in_the_corpus():
    css = "#top .navbar{a:b}#bottom .navbar{c:d}.navbar.dark{e:f}.navbar.show{g:h}"
    assert cssprune.prune(css, words(PAGE)) == "#top .navbar{a:b}.navbar.show{g:h}"


def test_a_media_block_keeps_its_used_rules_and_goes_when_none_is_left():
    css = ("@media (min-width:960px){.navbar{width:50%}.col-lg-3{width:25%}}\n"
           "@media print{.d-print-none{display:none}\n.col-4{width:33%}}\n"
           "@supports (display:grid){@media screen{.grid{display:grid}}}\n.nav-link{x:y}")
    assert cssprune.prune(css, words(PAGE)) == "@media (min-width:960px){.navbar{width:50%}}\n.nav-link{x:y}"


def test_font_faces_keyframes_the_charset_and_rules_without_classes_are_kept():
    css = ('@charset "UTF-8";\n@font-face{font-family:"X";src:url(x.woff2)}\n'
           "@keyframes spin{0%{transform:rotate(0)}to{transform:rotate(1turn)}}\n"
           ':root,[data-bs-theme=light]{--pst-color-primary:#0a7d91;--bs-font:"a", b}\n'
           "html[data-theme=dark] a{color:#fff}*,:after{box-sizing:border-box}\n"
           "@page :first{margin:0}\n.unused{x:y}\n")
    assert cssprune.prune(css, words(PAGE)) == css.replace(".unused{x:y}\n", "")


def test_a_class_that_only_a_script_names_is_kept_and_a_script_prefix_keeps_its_names():
    css = ".collapsing{height:0}.modal-open{overflow:hidden}.bs-tooltip-auto{a:b}.bs-popover-top{c:d}.tooltip{e:f}"
    script = 'e.classList.add("collapsing");const c=`bs-${this.constructor.NAME}-auto`;x="-"+y;'
    assert cssprune.prune(css, words(PAGE)) == ""
    assert cssprune.prune(css, words(PAGE, scripts=(script,))) == ".collapsing{height:0}.bs-tooltip-auto{a:b}.bs-popover-top{c:d}"


def test_names_inside_pseudo_classes_and_attribute_selectors_are_not_required():
    css = (".navbar:not(.jumbotron){a:b}:not(.jumbotron)>p{c:d}.jumbotron:not(.navbar){e:f}"
           "[class*=col-]{g:h}.navbar[aria-expanded=true]::after{i:j}.card::before{k:l}"
           ":is(.jumbotron,.card) .nav-link{m:n}")
    assert cssprune.prune(css, words(PAGE)) == (".navbar:not(.jumbotron){a:b}:not(.jumbotron)>p{c:d}[class*=col-]{g:h}"
                                                ".navbar[aria-expanded=true]::after{i:j}"
                                                ":is(.jumbotron,.card) .nav-link{m:n}")


def test_a_name_the_corpus_cannot_spell_is_kept():
    css = r".md\:flex{display:flex}.w-1\/2{width:50%}.jumbotron{x:y}"
    assert cssprune.prune(css, words(PAGE)) == r".md\:flex{display:flex}.w-1\/2{width:50%}"


def test_what_does_not_parse_is_kept_as_written():
    unclosed_media = ".navbar{a:b}\n@media print{.jumbotron{x:y}\n.card{z:w}"
    assert cssprune.prune(unclosed_media, words(PAGE)) == unclosed_media
    no_block = ".jumbotron{x:y}\n.navbar{a:b} .card >"
    assert cssprune.prune(no_block, words(PAGE)) == ".navbar{a:b} .card >"
    bad_string = '.jumbotron[title="x\n]{x:y}.card{z:w}'
    assert cssprune.prune(bad_string, words(PAGE)) == '.jumbotron[title="x\n]{x:y}'


def test_comments_and_line_breaks_between_kept_rules_are_untouched():
    css = "/*! banner */\n.navbar {\n  color: red;\n}\n\n/* cards */\n.card {\n  x: y;\n}\n.nav-link{a:b}"
    assert cssprune.prune(css, words(PAGE)) == "/*! banner */\n.navbar {\n  color: red;\n}\n\n/* cards */\n.nav-link{a:b}"


def _site(root: Path) -> Path:
    static = root / "_static"
    (static / "styles").mkdir(parents=True)
    (static / "styles" / "theme.css").write_text('@import "../basic.css";', encoding="utf-8")
    (static / "basic.css").write_text(".navbar{a:b}.searchbox{c:d}", encoding="utf-8")
    (static / "design.css").write_text(".show{a:b}.sd-card{c:d}\n/*# sourceMappingURL=design.css.map */\n",
                                       encoding="utf-8")
    (static / "own.css").write_text(".never-used{a:b}", encoding="utf-8")
    (static / "unlinked.css").write_text(".never-used{a:b}", encoding="utf-8")
    (static / "theme.js").write_text('el.classList.toggle("searchbox")', encoding="utf-8")
    (root / "chapters").mkdir()
    (root / "chapters" / "a.html").write_text(
        '<link rel="stylesheet" href="../_static/styles/theme.css?digest=1"><link rel="stylesheet" '
        'href="../_static/design.css"><link rel="stylesheet" href="../_static/own.css">'
        '<script src="../_static/theme.js"></script>' + PAGE, encoding="utf-8")
    return root


def test_the_site_s_linked_and_imported_stylesheets_are_pruned_in_place(tmp_path):
    site = _site(tmp_path)
    static = site / "_static"
    done = {p.path.name: (p.bytes_before, p.bytes_after) for p in cssprune.prune_site(site, leave={"own.css"})}
    assert done == {"basic.css": (27, 27), "design.css": (63, 10), "theme.css": (23, 23)}
    assert (static / "basic.css").read_text(encoding="utf-8") == ".navbar{a:b}.searchbox{c:d}"  # a script's class
    assert (static / "design.css").read_text(encoding="utf-8") == ".show{a:b}"  # and its source map link gone
    assert (static / "own.css").read_text(encoding="utf-8") == ".never-used{a:b}"
    assert (static / "unlinked.css").read_text(encoding="utf-8") == ".never-used{a:b}"


def test_a_rebuild_prunes_the_same_from_what_the_last_one_kept_and_sees_a_page_that_changed(tmp_path):
    cache = tmp_path / "kept"
    first, second = _site(tmp_path / "one"), _site(tmp_path / "two")
    cssprune.prune_site(first, leave={"own.css"}, cache=cache)
    assert (cache / "scans.json").is_file()
    cssprune.prune_site(second, leave={"own.css"}, cache=cache)
    assert (second / "_static" / "design.css").read_text(encoding="utf-8") == ".show{a:b}"
    assert (second / "_static" / "basic.css").read_text(encoding="utf-8") == ".navbar{a:b}.searchbox{c:d}"
    # The page now names sd-card: a third build must keep its rule, whatever the last one kept.
    third = _site(tmp_path / "three")
    page = third / "chapters" / "a.html"
    page.write_text(page.read_text(encoding="utf-8") + '<div class="sd-card"></div>', encoding="utf-8")
    cssprune.prune_site(third, leave={"own.css"}, cache=cache)
    assert (third / "_static" / "design.css").read_text(encoding="utf-8").startswith(".show{a:b}.sd-card{c:d}\n")


def test_a_missing_site_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        cssprune.prune_site(tmp_path / "nowhere")


def selectors(css: str) -> list[tuple[str, str, list[str]]]:
    """Every selector of the stylesheet, at any depth of grouping at-rules: (the at-rules around it,
    its text, the classes and ids it names outside brackets)."""
    found = []

    def walk(nodes, around: str) -> None:
        for node in nodes:
            if node.type == "qualified-rule":
                texts = tinycss2.serialize(node.prelude).split(",")
                names = cssprune.selector_names(node.prelude)
                if len(texts) == len(names):  # no comma inside a :not() or :is()
                    found.extend((around, text.strip(), n) for text, n in zip(texts, names))
            elif node.type == "at-rule" and node.content is not None and node.lower_at_keyword in cssprune.GROUPING:
                walk(tinycss2.parse_rule_list(node.content), around + tinycss2.serialize(node.prelude))
    walk(tinycss2.parse_stylesheet(css), "")
    return found


ORIGINALS = {
    "styles/pydata-sphinx-theme.css": THEME_STATIC / "styles" / "pydata-sphinx-theme.css",
    "sphinx-design.min.css": Path(sphinx_design.__file__).parent / "static" / "sphinx-design.min.css",
    "mystnb.*.css": Path(myst_nb.__file__).parent / "static" / "mystnb.css",
}


@pytest.mark.parametrize("shipped", sorted(ORIGINALS))
def test_a_shipped_stylesheet_is_smaller_and_keeps_every_selector_the_pages_markup_matches(site, shipped):
    original = ORIGINALS[shipped].read_text(encoding="utf-8")
    (path,) = (site / "_static").glob(shipped)
    pruned = path.read_text(encoding="utf-8")
    assert len(pruned.encode()) < 0.6 * len(original.encode())
    used = set()  # the classes and ids on the pages' elements, before any script runs
    for page in iconfont.shipped_pages(site):
        for value in re.findall(r'\b(?:class|id)="([^"]*)"', page.read_text(encoding="utf-8")):
            used.update(value.split())
    kept = {(around, text) for around, text, _ in selectors(pruned)}
    wanted = {(around, text) for around, text, names in selectors(original) if names and set(names) <= used}
    assert sorted(wanted - kept) == []
    if "pydata" in shipped:
        assert len(wanted) > 300 and any("bd-sidebar-primary" in text for _, text in wanted)
