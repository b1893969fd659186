"""Student handouts: each chapter as a notebook that any Jupyter shows as the site does.

Made from a built book (``make book``), so the numbers are the site's own:

* every ``{glue:text}`` number is written into the text, formatted as on the site;
* MyST roles and directives become plain Markdown: cross-references become the numbers and
  titles the site shows, citations their author and year, exercises and boxes bold headings;
* the plumbing cells (tagged ``remove-cell``) and the worked solutions are left out, outputs are
  cleared, and the chapter's visible setup cell comes first, so every remaining cell runs;
* cell ids come from the chapter and the cell's position, so two runs write the same bytes.

``answers=True`` keeps the solutions, for the host's answer key. Nothing here executes a chapter.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import pickle
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from perwatt import devtools, doctor, store

REPO = devtools.REPO
BUILD = REPO / "_build"


class HandoutError(Exception):
    """A handout cannot be written; the message says what to do."""


@dataclass(frozen=True)
class BookIndex:
    """What the built book calls each label: section titles, and the numbers Sphinx gave."""

    titles: dict[str, str]  # label -> section or figure title
    numbers: dict[str, tuple[str, str]]  # label -> (kind, "1.2"): figure, exercise or section
    chapters: dict[str, str]  # chapter stem -> its number, "1"
    citations: dict[str, tuple[str, str]]  # bibtex key -> (authors, year)
    figure_format: str  # e.g. "Fig. %s"

    @classmethod
    def from_env(cls, env: Any) -> BookIndex:
        """Read a Sphinx build environment (live in the build, or unpickled afterwards)."""
        std = env.domaindata["std"]
        titles = {label: title for label, (_, _, title) in std["labels"].items()}
        numbers: dict[str, tuple[str, str]] = {}
        for kinds in env.toc_fignumbers.values():
            for kind, labels in kinds.items():
                numbers.update({label: (kind, ".".join(map(str, n))) for label, n in labels.items()})
        chapters = {docname.split("/")[-1]: ".".join(map(str, sections.get("", ())))
                    for docname, sections in env.toc_secnumbers.items()}
        # A label sits beside its section's own anchor; the table of contents pairs titles and anchors.
        for label, (docname, _, title) in std["labels"].items():
            sections = env.toc_secnumbers.get(docname, {})
            for ref in env.tocs[docname].findall(_reference()) if docname in env.tocs else ():
                if ref.astext() == title and ref["anchorname"] in sections:
                    numbers.setdefault(label, ("section", ".".join(map(str, sections[ref["anchorname"]]))))
        citations = {c.key: _author_year(c.entry) for c in env.domaindata["cite"]["citations"]}
        figure_format = env.config.numfig_format.get("figure", "Fig. %s")
        return cls(titles, numbers, chapters, citations, figure_format)

    def ref(self, label: str) -> str:
        if label not in self.titles:
            raise HandoutError(f"unknown cross-reference {label!r}: rebuild the book with `make book`")
        return self.titles[label]

    def numref(self, label: str, template: str | None) -> str:
        if label not in self.numbers:
            raise HandoutError(f"no number for {label!r}: rebuild the book with `make book`")
        kind, number = self.numbers[label]
        default = {"figure": self.figure_format, "exercise": "Exercise %s"}.get(kind, "Section %s")
        return (template or default).replace("%s", number)

    def cite(self, keys: str, textual: bool) -> str:
        found = []
        for key in (k.strip() for k in keys.split(",")):
            if key not in self.citations:
                raise HandoutError(f"unknown citation {key!r}: is it in references.bib?")
            found.append(self.citations[key])
        if textual:
            return "; ".join(f"{authors} ({year})" for authors, year in found)
        return "(" + "; ".join(f"{authors}, {year}" for authors, year in found) + ")"


def _reference() -> type:
    from docutils import nodes

    return nodes.reference


def _author_year(entry: Any) -> tuple[str, str]:
    people = entry.persons.get("author", [])
    names = ["".join(p.last_names or p.first_names).strip("{}") for p in people]
    authors = names[0] if len(names) == 1 else (" and ".join(names) if len(names) == 2 else f"{names[0]} et al.")
    return authors.replace("{", "").replace("}", ""), entry.fields.get("year", "n.d.")


def load_index(build: Path = BUILD) -> BookIndex:
    """The index of a book built into ``build`` (its ``.doctrees/environment.pickle``)."""
    pickled = build / ".doctrees" / "environment.pickle"
    if not pickled.exists():
        raise HandoutError(f"no built book in {build}: run `make book` first (the handouts take their numbers from it)")
    with pickled.open("rb") as handle:
        return BookIndex.from_env(pickle.load(handle))  # noqa: S301 - the book's own build output


def glue_values(chapter: Path, build: Path = BUILD) -> dict[str, str]:
    """The numbers a chapter's cells glued when the book was last built, as their plain text."""
    path = build / "jupyter_execute" / chapter.relative_to(REPO).with_suffix(".glue.json")
    if not path.exists():
        return {}
    outputs = json.loads(path.read_text(encoding="utf-8"))
    return {key: next(v for k, v in out["data"].items() if k.endswith("text/plain")) for key, out in outputs.items()}


# --- MyST to Markdown -------------------------------------------------------------------------

_ROLE = re.compile(r"\{(?P<role>[a-z]+(?::[a-z]+)?)\}`(?P<body>[^`]*)`")
_TITLED = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
_DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[a-z-]+)\}[ \t]*(?P<arg>[^\n]*)\n(?P<options>(?::[\w-]+:[^\n]*\n)*)"
    # The body holds no directive of its own: the innermost block is converted first.
    r"(?P<body>(?:(?!^[ \t]*(?:`{3,}|:{3,})\{).)*?)^(?P=fence)[ \t]*$\n?", re.MULTILINE | re.DOTALL)
_LABEL_LINE = re.compile(r"^\([\w-]+\)=[ \t]*\n", re.MULTILINE)


@dataclass(frozen=True)
class Context:
    """What converting one chapter's Markdown needs."""

    chapter: Path
    glue: dict[str, str]
    index: BookIndex
    answers: bool


def _role(match: re.Match, ctx: Context) -> str:
    from myst_nb.core.variables import format_plain_text  # the site's own formatting of glued values

    role, body = match["role"], match["body"]
    titled = _TITLED.match(body)
    text, target = (titled["text"], titled["target"]) if titled else (None, body)
    if role == "glue:text":
        key, _, spec = target.partition(":")
        if key not in ctx.glue:
            raise HandoutError(f"{ctx.chapter.name}: no value for {key!r}; run `make book` again, it may be stale")
        return format_plain_text(ctx.glue[key], spec)
    if role in ("term", "download", "doc"):
        return text if text is not None else target
    if role == "ref":
        return text if text is not None else ctx.index.ref(target)
    if role == "numref":
        return ctx.index.numref(target, text)
    if role in ("cite:p", "cite:t"):
        return ctx.index.cite(target, textual=role == "cite:t")
    raise HandoutError(f"{ctx.chapter.name}: the handouts do not know the role {{{role}}}")


def _quote(markdown: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in markdown.strip().splitlines())


def _directive(match: re.Match, ctx: Context) -> str:
    name, arg, body = match["name"], match["arg"].strip(), match["body"]
    options = dict(re.findall(r"^:([\w-]+):[ \t]*(.*)$", match["options"], flags=re.MULTILINE))
    if name == "include":
        return (ctx.chapter.parent / arg).read_text(encoding="utf-8")
    if name == "exercise":
        number = ctx.index.numref(options["label"], "Exercise %s") if "label" in options else "Exercise"
        return f"**{number}. {arg}**\n\n{_quote(body)}\n"
    if name == "solution":
        if not ctx.answers:
            return ""
        return f"**Solution to {ctx.index.numref(arg, 'Exercise %s')}**\n\n{_quote(body)}\n"
    if name == "admonition":
        return f"> **{arg}**\n>\n{_quote(body)}\n"
    raise HandoutError(f"{ctx.chapter.name}: the handouts do not know the directive {{{name}}}")


def to_markdown(myst: str, ctx: Context) -> str:
    """One Markdown cell's MyST turned into Markdown that any notebook front end renders."""
    text = _LABEL_LINE.sub("", myst)
    # Directives nest (a box that includes a list): convert from the inside out until none remain.
    while True:
        converted = _DIRECTIVE.sub(lambda m: _directive(m, ctx), text)
        if converted == text:
            break
        text = converted
    text = _ROLE.sub(lambda m: _role(m, ctx), text)
    number = ctx.index.chapters.get(ctx.chapter.stem)
    if number:
        text = re.sub(r"^# (?!\d)", f"# {number}. ", text, count=1, flags=re.MULTILINE)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# --- Notebooks --------------------------------------------------------------------------------

def _figure_caption(cell: Any, ctx: Context) -> str | None:
    figure = cell.metadata.get("mystnb", {}).get("figure")
    if not figure:
        return None
    # A caption is MyST too: its roles ({ref}, {term}, glue) become plain text like the prose's.
    caption = to_markdown(" ".join(str(figure.get("caption", "")).split()), ctx)
    return f"*{ctx.index.numref(figure['name'], None)}. {caption}*" if "name" in figure else f"*{caption}*"


def handout(chapter: Path, index: BookIndex, glue: dict[str, str], answers: bool = False):
    """One chapter as a student notebook (an ``nbformat`` node), written nowhere."""
    import nbformat
    # The reader the build reads the chapter with; jupytext's reads the same cells (tests/test_project.py),
    # and importing jupytext imports Jupyter Server's contents managers too, about 0.05 s of a rebuild.
    from myst_nb.core.read import read_myst_markdown_notebook

    ctx = Context(chapter, glue, index, answers)
    source = read_myst_markdown_notebook(chapter.read_text(encoding="utf-8"))
    code = [c for c in source.cells if c.cell_type == "code"]
    if not code or "remove-cell" in code[0].metadata.get("tags", []):
        raise HandoutError(f"{chapter.name}: its first code cell (the setup) must be visible, not tagged remove-cell")
    cells = []
    for cell in source.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "markdown":
            text = to_markdown(cell.source, ctx)
            if text:
                cells.append(nbformat.v4.new_markdown_cell(text))
        elif "remove-cell" not in tags:
            caption = _figure_caption(cell, ctx)
            if caption:
                cells.append(nbformat.v4.new_markdown_cell(caption))
            cells.append(nbformat.v4.new_code_cell(cell.source.strip()))
    for position, cell in enumerate(cells):
        cell.id = f"{chapter.stem}-{position:03d}"
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": source.metadata["kernelspec"]})
    notebook.metadata["language_info"] = {"name": "python"}
    return notebook


def filename(chapter: Path, answers: bool = False) -> str:
    """``01-per-watt.ipynb``: the chapter's place in the reading order, then its name."""
    return filenames(answers)[chapter.stem]


def filenames(answers: bool = False) -> dict[str, str]:
    """Every chapter's :func:`filename`, by the chapter's stem, from one reading of the table of
    contents and the chapters (naming each chapter on its own reads them all again)."""
    return {p.stem: f"{position:02d}-{p.stem}{'-answers' if answers else ''}.ipynb"
            for position, p in enumerate(devtools.chapter_files())}


def render(chapters: list[Path], index: BookIndex, build: Path = BUILD, answers: bool = False,
           cache: Path | None = None) -> dict[str, str]:
    """Each chapter's handout as the exact text to write, by file name. With ``cache``, each text is
    kept there under everything it is made from, for later builds (the build passes one)."""
    names = filenames(answers)
    return {names[c.stem]: _rendered(c, index, glue_values(c, build), answers, cache) for c in chapters}


def _rendered(chapter: Path, index: BookIndex, glue: dict[str, str], answers: bool, cache: Path | None) -> str:
    import nbformat

    if cache is None:
        return nbformat.writes(handout(chapter, index, glue, answers)) + "\n"
    # Parsing the chapters is most of the work, and a rebuild usually changes one of them or none.
    made_from = json.dumps([_source_digest(), chapter.stem, chapter.read_text(encoding="utf-8"), dataclasses.asdict(index),
                            glue, answers], sort_keys=True, default=list)
    kept = cache / f"{hashlib.sha256(made_from.encode()).hexdigest()}.ipynb"
    if kept.is_file():
        return kept.read_text(encoding="utf-8")
    text = nbformat.writes(handout(chapter, index, glue, answers)) + "\n"
    cache.mkdir(parents=True, exist_ok=True)
    kept.write_text(text, encoding="utf-8")
    return text


@functools.cache
def _source_digest() -> str:
    """This package's source and the notebook libraries' versions: what turns a chapter into a handout."""
    digest = hashlib.sha256(f"myst-nb {metadata.version('myst-nb')}, nbformat {metadata.version('nbformat')}".encode())
    store.digest_files(digest, Path(__file__).parent, "*.py")
    return digest.hexdigest()


def _check_writable(out: Path) -> None:
    """Fail on a bad ``--out`` before the (slower) rendering, and whether or not a book is built."""
    if out.exists() and not out.is_dir():
        raise HandoutError(f"--out {out} is a file; give a folder for the notebooks")
    found = doctor.unwritable(out)  # the setup check's own probe: a file made and removed there
    if found:
        where, err = found
        why = "is a file" if not where.is_dir() else f"is not writable ({err.strerror or err})"
        raise HandoutError(f"cannot write to --out {out}: {where} {why}; choose a folder you can write to")


def write(out: Path, force: bool = False, answers: bool = False, build: Path = BUILD) -> list[Path]:
    """Write every chapter's handout into ``out``; never replace a different file unless ``force``."""
    _check_writable(out)
    rendered = render(devtools.chapter_files(), load_index(build), build, answers)
    changed = [name for name, text in rendered.items()
               if (out / name).exists() and (out / name).read_text(encoding="utf-8") != text]
    if changed and not force:
        raise HandoutError(f"{len(changed)} file(s) in {out} differ from the handouts and were kept: "
                           f"{', '.join(changed)}. Students' edits may be in them; use --force to replace them, "
                           "or choose another --out folder.")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in rendered.items():
            (out / name).write_text(text, encoding="utf-8")
    except OSError as err:
        raise HandoutError(f"cannot write to --out {out}: {err.strerror or err}; choose a folder you can write to") from err
    return [out / name for name in rendered]
