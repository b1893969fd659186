"""Drop the style rules no page of the built book can match, from the stylesheets its pages load.

Most of the theme's stylesheet is Bootstrap: utility and component rules for classes the book never
uses, which every reader downloads on a first visit. After the build (:func:`prune_site`), each
rule is judged against a *corpus*: every name-like word (``[A-Za-z0-9_-]+``) in every page and in
every script a page loads, since scripts add classes at run time (Bootstrap's ``show``, a tooltip's
parts). A rule stays if any selector in its list could match, that is if every class and id that
selector names at its top level is in the corpus. The test is one-sided on purpose: a name inside
``:not()``, ``:is()`` or an attribute selector is not required (so such rules are kept more often,
never dropped wrongly), and a word the corpus holds in prose keeps its rule too.

Rules without a class or id, ``@font-face``, ``@keyframes`` and every other at-rule are kept whole;
``@media``, ``@supports``, ``@layer`` and ``@container`` blocks are judged rule by rule and dropped
only when no rule inside is left. What is kept is the original text, byte for byte (no
reserialisation), and anything that does not parse into a prelude and a block is kept as it is.

A script that glued a class name together from pieces would hide it; the scripts the themes ship do
so only with a prefix (Bootstrap's ``bs-`` + ``tooltip`` + ``-auto``), so a script word that ends in
a hyphen counts as the start of any class name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tinycss2

from perwatt import iconfont

#: A word of the corpus; a class or id spelt otherwise (with escapes) cannot be judged and is kept.
WORD = re.compile(r"[A-Za-z0-9_-]+")
#: A script word that a class name may continue: a hyphen at the end, two letters or digits before.
PREFIX = re.compile(r"[A-Za-z0-9_-]*[A-Za-z0-9]{2}[A-Za-z0-9_-]*-")
#: At-rules whose block holds style rules, each judged on its own.
GROUPING = frozenset({"media", "supports", "layer", "container"})
IMPORT = re.compile(r"""@import\s+(?:url\(\s*)?["']?([^"')\s;]+)""", re.IGNORECASE)
#: Tokens that mean the tokenizer gave up on a stretch of text.
BROKEN = frozenset({"error", "bad-string", "bad-url"})


@dataclass(frozen=True)
class Corpus:
    """The names a page or script of the site could put on an element."""

    words: frozenset[str]
    prefixes: tuple[str, ...] = ()

    def has(self, name: str) -> bool:
        if name in self.words or not WORD.fullmatch(name):
            return True
        return name.startswith(self.prefixes)


def corpus(markup: Iterable[str], scripts: Iterable[str]) -> Corpus:
    """The corpus of some pages' HTML and some scripts' text."""
    return corpus_of_words(map(WORD.findall, markup), map(WORD.findall, scripts))


def corpus_of_words(markup: Iterable[Iterable[str]], scripts: Iterable[Iterable[str]]) -> Corpus:
    """:func:`corpus`, from the words already found in each page and each script."""
    words: set[str] = set()
    for found in markup:
        words.update(found)
    prefixes: set[str] = set()
    for found in scripts:
        found = set(found)
        words |= found
        prefixes.update(word for word in found if word.endswith("-") and PREFIX.fullmatch(word))
    return Corpus(frozenset(words), tuple(sorted(prefixes)))


def selector_names(prelude: Sequence) -> list[list[str]]:
    """Each selector of a rule's prelude -> the classes and ids it names outside any brackets or
    function (``.nav a:not(.x)`` -> ``["nav"]``)."""
    selectors: list[list[str]] = [[]]
    for i, token in enumerate(prelude):
        if token == ",":
            selectors.append([])
        elif token.type == "hash":
            selectors[-1].append(token.value)
        elif token == "." and i + 1 < len(prelude) and prelude[i + 1].type == "ident":
            selectors[-1].append(prelude[i + 1].value)
    return selectors


def could_match(prelude: Sequence, words: Corpus) -> bool:
    """Whether any selector of the prelude names only classes and ids in the corpus."""
    return any(all(words.has(name) for name in names) for names in selector_names(prelude))


class _Source:
    """The stylesheet's text with its tokenizer's positions turned into offsets."""

    def __init__(self, css: str) -> None:
        # The tokenizer counts lines and columns in this normalised text; so the output is cut from it.
        self.text = (css.replace("\0", "\ufffd").replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n"))
        self.newlines = [m.start() for m in re.finditer("\n", self.text)]

    def offset(self, token) -> int:
        before = self.newlines[token.source_line - 2] if token.source_line > 1 else -1
        return before + token.source_column


def _groups(tokens: Sequence) -> list[tuple[int, int, str]]:
    """Split a list of component values into (first, past-last, kind) index ranges: a rule (its
    prelude and block, or an at-rule's statement), or a kept stretch (space, a comment, a rule
    that never reaches a block)."""
    groups, i = [], 0
    while i < len(tokens):
        token = tokens[i]
        if token.type in ("whitespace", "comment") or token in ("<!--", "-->"):
            groups.append((i, i + 1, "space" if token.type == "whitespace" else "other"))
            i += 1
            continue
        j = i
        while j < len(tokens) and tokens[j].type != "{} block" and not (token.type == "at-keyword" and tokens[j] == ";"):
            j += 1
        if j == len(tokens):  # no block before the end: not a rule, keep it as written
            groups.append((i, j, "other"))
            break
        groups.append((i, j + 1, "at" if token.type == "at-keyword" else "rule"))
        i = j + 1
    return groups


def _prune_list(source: _Source, tokens: Sequence, end: int, words: Corpus) -> tuple[str, int]:
    """The kept text of a list of component values that ends at offset ``end``, and how many rules
    it keeps."""
    starts = [source.offset(t) for t in tokens] + [end]
    kept, rules, dropped_before = [], 0, False
    for first, last, kind in _groups(tokens):
        span = source.text[starts[first]:starts[last]]
        if kind == "space" and dropped_before:
            dropped_before = False
            continue  # the line break after a dropped rule goes with it
        dropped_before = False
        keep, text = True, span
        if kind == "rule":
            prelude = tokens[first:last - 1]
            keep = _broken(prelude) or could_match(prelude, words)
        elif kind == "at" and tokens[first].lower_value in GROUPING and tokens[last - 1].type == "{} block":
            keep, text = _prune_block(source, tokens[last - 1], starts[first], starts[last], words)
        if keep:
            kept.append(text)
            rules += kind in ("rule", "at")
        else:
            dropped_before = True
    return "".join(kept), rules


def _broken(tokens: Sequence) -> bool:
    """Whether the tokenizer gave up anywhere in these component values, brackets included."""
    return any(t.type in BROKEN or _broken(getattr(t, "content", None) or getattr(t, "arguments", None) or ())
               for t in tokens)


def _prune_block(source: _Source, block, start: int, end: int, words: Corpus) -> tuple[bool, str]:
    """Whether a grouping at-rule spanning ``start:end`` keeps a rule, and its text with the rules
    inside it pruned. A block the file ends inside of (no closing brace) is kept as written."""
    content = block.content
    close = end - 1
    if not content or source.text[close] != "}" or (end == len(source.text) and not _closes(source.text[start:end])):
        return True, source.text[start:end]
    opening = source.offset(block) + 1
    inner, rules = _prune_list(source, content, close, words)
    return rules > 0, source.text[start:opening] + inner + "}"


def _closes(text: str) -> bool:
    """Whether every brace opened in ``text`` (outside comments and strings) is closed."""
    text = re.sub(r"/\*.*?(\*/|$)", "", text, flags=re.DOTALL)
    text = re.sub(r"\\.|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'", "", text, flags=re.DOTALL)
    return text.count("{") == text.count("}")


def prune(css: str, words: Corpus) -> str:
    """The stylesheet less every style rule no selector of which the corpus could match."""
    source = _Source(css)
    tokens = tinycss2.parse_component_value_list(source.text, skip_comments=False)
    return _prune_list(source, tokens, len(source.text), words)[0]


class _Recording:
    """A corpus that notes every name it is asked about, and its answer."""

    def __init__(self, words: Corpus) -> None:
        self.words, self.asked = words, {}

    def has(self, name: str) -> bool:
        self.asked[name] = answer = self.words.has(name)
        return answer


def _answers(sheet: str, names: Sequence[str], words: Corpus) -> str:
    return hashlib.sha256("\0".join([sheet, *(f"{n}={int(words.has(n))}" for n in names)]).encode()).hexdigest()


def prune_remembered(css: str, words: Corpus, cache: Path) -> str:
    """:func:`prune`, kept in the folder ``cache`` for later builds. Pruning is the slowest step of
    a rebuild (the theme's stylesheet alone is 0.3 MB to tokenize), and its result depends only on
    the sheet and on the corpus's answers for the names the sheet asks about. Those names are kept
    with the result, and a result is used again only when the new corpus answers every one of them
    the same way: pruning would then ask the same questions in the same order, and keep the same
    rules."""
    sheet = hashlib.sha256(css.encode()).hexdigest()
    asked_file = cache / f"{sheet}.names.json"
    if asked_file.is_file():
        names = json.loads(asked_file.read_text(encoding="utf-8"))
        kept = cache / f"{_answers(sheet, names, words)}.css"
        if kept.is_file():
            return kept.read_text(encoding="utf-8")
    recording = _Recording(words)
    pruned = prune(css, recording)  # type: ignore[arg-type]  (a corpus in all but name)
    names = sorted(recording.asked)
    cache.mkdir(parents=True, exist_ok=True)
    asked_file.write_text(json.dumps(names), encoding="utf-8")
    (cache / f"{_answers(sheet, names, words)}.css").write_text(pruned, encoding="utf-8")
    return pruned


def loaded_assets(site: Path, scans: iconfont.Scans | None = None,
                  pages: list[Path] | None = None) -> tuple[set[Path], set[Path]]:
    """The local stylesheets (with those they @import) and scripts the site's pages load (``pages``,
    if given, are :func:`iconfont.shipped_pages` of the site, already listed)."""
    site, scans = site.resolve(), scans or iconfont.Scans()
    assets: set[Path] = set()
    for page in iconfont.shipped_pages(site) if pages is None else pages:
        assets |= iconfont.page_assets(page, page.read_text(encoding="utf-8"), site, scans)
    sheets = _with_imports({p for p in assets if p.suffix == ".css"}, site)
    return sheets, {p for p in assets if p.suffix == ".js"}


def _with_imports(sheets: set[Path], site: Path) -> set[Path]:
    """The stylesheets and every local stylesheet they @import, at any depth."""
    found, todo = set(sheets), list(sheets)
    while todo:
        sheet = todo.pop()
        for url in IMPORT.findall(sheet.read_text(encoding="utf-8")):
            target = (sheet.parent / url).resolve()
            if not re.match(r"^[a-z]+:|^//", url) and target.is_file() and target.is_relative_to(site) \
                    and target.suffix == ".css" and target not in found:
                found.add(target)
                todo.append(target)
    return found


@dataclass(frozen=True)
class Pruned:
    path: Path
    bytes_before: int
    bytes_after: int


def prune_site(site: Path, leave: Collection[str] = (), cache: Path | None = None, *,
               only: Collection[Path] | None = None, skip: Collection[Path] = ()) -> list[Pruned]:
    """Prune every stylesheet the built site's pages load, in place, except those named in
    ``leave`` (file names); what each weighed before and after, in bytes, by path. With ``cache``,
    results are kept there and used again by later builds (:func:`prune_remembered`). ``only`` and
    ``skip`` (paths) narrow the stylesheets pruned, not the pages and scripts read: two processes
    may prune a site's sheets between them."""
    if not site.is_dir():
        raise FileNotFoundError(f"prune_site: site {site} is not a folder")
    # What each page and script was found to hold is kept beside the pruned sheets (iconfont.Scans).
    scans = iconfont.Scans(None if cache is None else cache / "scans.json")

    def words_in(path: Path) -> list[str]:
        text = path.read_text(encoding="utf-8")
        return scans("words", text, lambda: WORD.findall(text))

    pages = iconfont.shipped_pages(site)
    sheets, scripts = loaded_assets(site, scans, pages)
    words = corpus_of_words(map(words_in, pages), map(words_in, sorted(scripts)))
    scans.save()
    results = []
    only = None if only is None else {Path(p).resolve() for p in only}
    skip = {Path(p).resolve() for p in skip}
    for sheet in sorted(sheets):
        if sheet.name in leave or sheet in skip or (only is not None and sheet not in only):
            continue
        before = sheet.read_text(encoding="utf-8")
        after = prune(before, words) if cache is None else prune_remembered(before, words, cache)
        if after != before:
            # A source map would describe the unpruned file.
            after = iconfont.SOURCE_MAP.sub("", after)
            iconfont.write_whole(sheet, after)
        results.append(Pruned(sheet, len(before.encode()), len(after.encode())))
    return results
