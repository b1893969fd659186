"""Ship only the Font Awesome glyphs the built book draws, and only the icon rules that draw them.

The theme's stylesheet carries a rule for each of Font Awesome's ~1,900 icons and its web fonts a
glyph for each, about 300 kB a reader downloads for the two dozen icons the book shows. After the
build (:func:`ship_used_icons`), the icons are found where the pages can draw them from:

* the ``fa-*`` classes in every page's markup (the header's buttons, the download menu, the
  colour-mode toggle's three icons, each shown in one mode only);
* the ``fa-*`` class names in the scripts the pages load, which add icons at run time (the theme's
  close button on a banner);
* every private-use character in the stylesheets the pages load outside the icon rules, which is
  how the themes draw icons from CSS alone (admonition titles, the collapsed contents' chevron).

The fonts are then cut to those characters, from the theme's own copies (not the output folder's,
which a previous build already cut), and the stylesheet keeps only the icon rules that name a class
in use. A class in the markup that no stylesheet defines is reported, since it would draw nothing.
A script that built a class name from pieces at run time would go unseen here; none of the themes'
does, and the browser tests check that every glyph a page shows is drawn from the shipped font.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

#: The theme's stylesheet that holds the icon rules and its fonts' @font-face, relative to _static.
STYLESHEET = "styles/pydata-sphinx-theme.css"
FONT_DIR = "vendor/fontawesome/webfonts"
FONTS = ("fa-solid-900", "fa-regular-400", "fa-brands-400")
FORMATS = {".woff2": "woff2", ".ttf": None}  # suffix -> fontTools flavor

#: One icon rule as Font Awesome writes it: only ``.fa-NAME:before`` selectors, and a content string.
#: It begins a rule (after ``}``, a comment, a line break or the start): ``.x .fa-y:before`` is not one.
ICON_RULE = re.compile(r'(?:(?<=\})|(?<=\*/)|^)((?:\.fa-[a-z0-9-]+::?before\s*,\s*)*\.fa-[a-z0-9-]+::?before)'
                       r'\s*\{\s*content\s*:\s*"((?:[^"\\]|\\.)*)"\s*;?\s*\}', re.MULTILINE)
ICON_NAME = re.compile(r"\.(fa-[a-z0-9-]+)::?before")
#: A Font Awesome class name inside a script's text or a class attribute.
CLASS_TOKEN = re.compile(r"(?<![\w-])fa-[a-z0-9]+(?:-[a-z0-9]+)*")
CLASS_ATTRIBUTE = re.compile(r'\bclass\s*=\s*(?:"([^"]*)"|\'([^\']*)\')', re.IGNORECASE)
CSS_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})\s?|\\(.)", re.DOTALL)
SOURCE_MAP = re.compile(r"/\*# sourceMappingURL=[^*]*\*/\s*")
ASSET_LINK = re.compile(r'<(?:script[^>]*\bsrc|link[^>]*\bhref)\s*=\s*"([^"#?]+)[^"]*"', re.IGNORECASE)
PRIVATE_USE = range(0xE000, 0xF900)
PRIVATE_USE_CHARACTER = re.compile(f"[{chr(PRIVATE_USE.start)}-{chr(PRIVATE_USE.stop - 1)}]")


def unescape_css(text: str) -> str:
    """The characters a CSS string stands for (``"\\f185"`` is U+F185)."""
    def char(match: re.Match) -> str:
        if match.group(2) is not None:
            return match.group(2)
        code = int(match.group(1), 16)
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code < 0xE000 else "\ufffd"
    return CSS_ESCAPE.sub(char, text)


def icon_characters(css: str) -> dict[str, str]:
    """Each icon class the stylesheet defines -> the character(s) its ``::before`` draws."""
    icons = {}
    for match in ICON_RULE.finditer(css):
        drawn = unescape_css(match.group(2))
        for name in ICON_NAME.findall(match.group(1)):
            icons[name] = drawn
    return icons


def css_drawn_characters(css: str) -> set[str]:
    """Private-use characters the stylesheet uses outside its icon rules (the icons CSS draws itself)."""
    rest = unescape_css(ICON_RULE.sub("", css))
    return set(PRIVATE_USE_CHARACTER.findall(rest))


def trim_icon_rules(css: str, keep: set[str]) -> str:
    """The stylesheet less every icon rule that names no class in ``keep``, and less its source map
    link (the map describes the untrimmed file)."""
    def rule(match: re.Match) -> str:
        return match.group(0) if set(ICON_NAME.findall(match.group(1))) & keep else ""
    return SOURCE_MAP.sub("", ICON_RULE.sub(rule, css))


def class_tokens(html: str) -> set[str]:
    """The ``fa-*`` classes on a page's elements (not words in its text)."""
    return {token for match in CLASS_ATTRIBUTE.finditer(html)
            for token in CLASS_TOKEN.findall(match.group(1) or match.group(2) or "")}


def linked_assets(page: Path, html: str, root: Path) -> set[Path]:
    """The local scripts and stylesheets a page loads."""
    found = set()
    for url in ASSET_LINK.findall(html):
        if re.match(r"^[a-z]+:|^//", url):
            continue
        target = (page.parent / url).resolve()
        if target.is_file() and target.is_relative_to(root) and target.suffix in (".js", ".css"):
            found.add(target)
    return found


def write_whole(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never part of
    one: the build reads the site's stylesheets and these records in two processes at once."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class Scans:
    """What a scan of a text found, kept in the JSON file ``path`` under the scan's name and the
    text's digest, for the next build: a rebuild after an edit rewrites two or three pages, and
    scanning all of them and their scripts again was a twentieth of it. Only the entries looked up
    are written back, so the file holds one build's worth. Without a path nothing is kept."""

    def __init__(self, path: Path | None = None) -> None:
        self.path, self._found = path, {}
        try:
            self._kept = json.loads(path.read_text(encoding="utf-8")) if path is not None and path.is_file() else {}
        except (ValueError, OSError):  # unreadable: scan again
            self._kept = {}

    def __call__(self, scan: str, text: str, compute: Callable[[], Iterable[str]]) -> list[str]:
        key = f"{scan}:{hashlib.sha256(text.encode()).hexdigest()}"
        if key not in self._found:
            kept = self._kept.get(key)
            self._found[key] = kept if isinstance(kept, list) else sorted(set(compute()))
        return self._found[key]

    def save(self) -> None:
        """Write what this build looked up, unless that is what the file holds already."""
        if self.path is not None and self._found != self._kept:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_whole(self.path, json.dumps(self._found, sort_keys=True))


def page_assets(page: Path, html: str, root: Path, scans: Scans) -> set[Path]:
    """:func:`linked_assets`, through ``scans`` (the page's place is part of what is scanned)."""
    found = scans(f"assets of {page.relative_to(root).as_posix()}", html,
                  lambda: (p.relative_to(root).as_posix() for p in linked_assets(page, html, root)))
    return {root / name for name in found if (root / name).is_file()}


@dataclass(frozen=True)
class IconUse:
    classes: frozenset[str]  # icon classes the pages or their scripts use
    characters: frozenset[str]  # every character the fonts must keep
    unknown: frozenset[str]  # fa-* classes in the markup that no loaded stylesheet defines


def shipped_pages(site: Path) -> list[Path]:
    """The site's pages (not the HTML files some packages keep among their static assets). The
    walk skips every ``_static`` folder rather than listing its files (most of the site's) to drop them."""
    pages = []
    for folder, subfolders, files in os.walk(site):
        subfolders[:] = [name for name in subfolders if name != "_static"]
        pages.extend(Path(folder) / name for name in files if name.endswith(".html"))
    return sorted(pages)


def find_icon_use(site: Path, icon_css: str, scans: Scans | None = None) -> IconUse:
    """Which icons the built site at ``site`` can show; ``icon_css`` is the untrimmed icon stylesheet.
    With ``scans``, what each page, script and stylesheet was found to hold is looked up there first."""
    site, scans = site.resolve(), scans or Scans()
    # As "name characters" lines: a scan keeps lists of text (class names hold no space).
    icons = dict(line.split(" ", 1) for line in scans(
        "icon rules", icon_css, lambda: (f"{name} {drawn}" for name, drawn in icon_characters(icon_css).items())))
    markup, assets = set(), set()
    for page in shipped_pages(site):
        html = page.read_text(encoding="utf-8")
        markup.update(scans("icon classes", html, lambda: class_tokens(html)))
        assets |= page_assets(page, html, site, scans)
    stylesheets = [icon_css if path.as_posix().endswith(STYLESHEET) else path.read_text(encoding="utf-8")
                   for path in assets if path.suffix == ".css"]
    scripts = [path.read_text(encoding="utf-8") for path in assets if path.suffix == ".js"]
    scripted = {token for js in scripts for token in scans("icon names", js, lambda: CLASS_TOKEN.findall(js))}
    classes = (markup | scripted) & set(icons)
    characters = {c for name in classes for c in icons[name]}
    defined = set()
    for css in stylesheets:
        characters.update(scans("drawn icons", css, lambda: css_drawn_characters(css)))
        defined.update(scans("icon names", css, lambda: CLASS_TOKEN.findall(css)))
    return IconUse(frozenset(classes), frozenset(characters), frozenset(markup - defined))


def subset_font(source: Path, target: Path, characters: Iterable[str], flavor: str | None) -> None:
    """Write ``source`` cut to ``characters`` (those it has), as ``flavor`` ("woff2" or None for sfnt)."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    options = subset.Options()
    options.flavor = flavor
    options.name_IDs = ["*"]  # the copyright and licence records travel with the glyphs
    options.ignore_missing_unicodes = True
    # No timestamp of today in the file: two builds of one source ship the same bytes.
    font = TTFont(source, recalcTimestamp=False)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted({ord(c) for c in characters}))
    subsetter.subset(font)
    font.flavor = flavor
    target.parent.mkdir(parents=True, exist_ok=True)
    font.save(target, reorderTables=False)


def _subset_remembered(source: Path, target: Path, characters: Iterable[str], flavor: str | None,
                       cache: Path) -> None:
    """:func:`subset_font`, its output kept in ``cache`` under the font, the flavour and the characters."""
    chars = "".join(sorted(set(characters)))
    key = hashlib.sha256(source.read_bytes() + f"\0{flavor}\0{chars}".encode()).hexdigest()
    kept = cache / f"{key}.font"
    if not kept.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        subset_font(source, kept, chars, flavor)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kept, target)


def _trimmed_remembered(css: str, keep: set[str], cache: Path) -> str:
    """:func:`trim_icon_rules`, its output kept in ``cache`` under the stylesheet and the classes kept."""
    key = hashlib.sha256("\0".join([css, *sorted(keep)]).encode()).hexdigest()
    kept = cache / f"{key}.trimmed.css"
    if kept.is_file():
        return kept.read_text(encoding="utf-8")
    trimmed = trim_icon_rules(css, keep)
    cache.mkdir(parents=True, exist_ok=True)
    write_whole(kept, trimmed)
    return trimmed


def ship_used_icons(static: Path, theme_static: Path, cache: Path | None = None) -> IconUse:
    """Cut the icon fonts and rules in the built site's ``static`` folder to what its pages use,
    from the originals in the theme's ``theme_static`` folder. With ``cache``, the cut fonts are
    kept there for later builds that use the same icons, and what each file was found to hold."""
    icon_css = (theme_static / STYLESHEET).read_text(encoding="utf-8")
    scans = Scans(None if cache is None else cache / "scans.json")
    use = find_icon_use(static.parent, icon_css, scans)
    scans.save()
    keep = set(use.classes)
    write_whole(static / STYLESHEET, trim_icon_rules(icon_css, keep) if cache is None else
                _trimmed_remembered(icon_css, keep, cache))
    for name in FONTS:
        for suffix, flavor in FORMATS.items():
            source = theme_static / FONT_DIR / f"{name}{suffix}"
            if not source.is_file():
                continue
            if cache is None:
                subset_font(source, static / FONT_DIR / source.name, use.characters, flavor)
            else:
                _subset_remembered(source, static / FONT_DIR / source.name, use.characters, flavor, cache)
    return use
