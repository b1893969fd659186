"""Workarounds for the pinned upstream packages the build uses, each with the version it was written for.

:func:`connect` installs them on a Sphinx application (:mod:`perwatt.sphinxext` calls it), and
:func:`check_versions` warns (and so, under ``-W``, fails the build) when an installed version
differs from the one a workaround was written against, so that a maintainer checks whether it is
still needed. Workarounds that live elsewhere are listed in :data:`PATCHED` too: the theme's
templates (``perwatt/templates``), the TeX that latex2mathml lacks (:mod:`perwatt.mathml`) and
the live kernels' widget JavaScript (:mod:`perwatt.render`) and the build kernels' displays
(:mod:`perwatt.displays`).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import re
import sys
import weakref
from importlib import metadata
from pathlib import Path

from sphinx.application import Sphinx

from perwatt import store

#: Upstream behaviour this extension works around, by the package and version it was seen in:
#: package -> (version the workaround was written for, what it works around).
PATCHED = {
    "sphinx-book-theme": ("1.3.0", "declares THEBE_JS_URL a second time, beside sphinx-thebe's own "
                                   "declaration (a page error on every page); leaves the colour mode empty "
                                   "(a console error)"),
    "sphinx-thebe": ("0.3.1", "the other THEBE_JS_URL declaration"),
    "sphinxcontrib-bibtex": ("2.7.0", "marks bibliography entries role=doc-biblioentry inside a list, "
                                      "which screen readers and axe reject; formats every entry of every "
                                      "bibliography again on every build, though the entries rarely change"),
    "pydata-sphinx-theme": ("0.17.1", "loads 1.5 MB of icon script, fontawesome.js, beside the web font that draws "
                                      "the icons (templates/static); opens sidebars from hidden buttons (templates/sections); "
                                      "names the search button \"Search\" though it shows its shortcut too "
                                      "(templates/search-button-field.html)"),
    "altair": ("6.3.0", "has vl-convert bundle JupyterChart's offline JavaScript anew in every live kernel, "
                        "about 2 s (perwatt.render keeps it in the store)"),
    "myst-nb": ("1.4.0", "names each hidden cell's toggle \"Toggle hidden content\", not the words it shows"),
    "latex2mathml": ("3.81.1", "knows neither the aligned environment nor a line break's extra space "
                               "(perwatt.mathml.prepare)"),
    "sphinx": ("7.4.7", "adds ?v=checksum to an asset URL only if the file is already in the output folder; "
                        "unpickles a chapter's whole doctree again for every numbered reference into it"),
    "pybtex": ("0.26.1", "looks each citation style and backend up among every installed package's entry points "
                         "again for every entry and citation"),
    "ipykernel": ("7.4.0", "flushes stdout and stderr before every display and reply, waiting on its IO thread for each "
                           "even when they hold nothing (perwatt.displays, in the build's kernels)"),
    "nbformat": ("5.11.1", "turns the notebook schema into a validator (fastjsonschema) anew in every process that "
                           "checks a notebook: 0.06 s of a rebuild after a prose edit"),
    "sphinx-exercise": ("1.2.1", "keeps every exercise and solution node in the environment together with its "
                                 "whole document, so the pickled environment carries the chapters' doctrees again"),
}


def check_versions() -> None:
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    for package, (version, what) in PATCHED.items():
        installed = metadata.version(package)
        if installed != version:
            logger.warning(f"perwatt.sphinxext works around {package} {version} ({what}); "
                           f"{installed} is installed: check whether the workaround is still needed")


def _detach_exercise_registry(app: Sphinx, doctree) -> None:
    """sphinx-exercise keeps each exercise's and solution's node in the environment to number and
    title them, and each node refers to its whole document, outputs included: the pickled
    environment, which every build loads and saves, grew to 6.8 MB. Keep detached copies of the
    page just read: the titles, labels and numbers it reads are all in the nodes themselves."""
    docname = app.env.docname
    for entry in getattr(app.env, "sphinx_exercise_registry", {}).values():
        if entry["docname"] != docname:
            continue
        node = entry["node"].deepcopy()
        node.parent = None
        for part in node.findall():
            part._document = None  # a node inserted into a page later finds the page's through its parent
        entry["node"] = node


class _ReadOnceDoctrees:
    """A build environment whose get_doctree unpickles each document once, for lookups that only
    read the tree. Everything else is the environment's own."""

    def __init__(self, env, trees: dict) -> None:
        self._env, self._trees = env, trees

    def get_doctree(self, docname: str):
        if docname not in self._trees:
            self._trees[docname] = self._env.get_doctree(docname)
        return self._trees[docname]

    def __getattr__(self, name: str):
        return getattr(self._env, name)


#: Per environment (so per build), the doctrees numbered references have read.
_NUMREF_TREES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _numref_reads_each_doctree_once() -> None:
    """Sphinx resolves a numbered reference by unpickling the whole doctree of the page it points
    into, once per reference: the book's 67 references into pages that carry their charts' data
    took 2 s of every build. The lookup only reads the tree, so each tree is unpickled once."""
    from sphinx.domains.std import StandardDomain

    resolve = StandardDomain._resolve_numref_xref
    if getattr(resolve, "perwatt", False):
        return

    def resolve_reading_once(self, env, *args, **kwargs):
        return resolve(self, _ReadOnceDoctrees(env, _NUMREF_TREES.setdefault(env, {})), *args, **kwargs)

    resolve_reading_once.perwatt = True
    StandardDomain._resolve_numref_xref = resolve_reading_once


def _drop_duplicate_thebe(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """sphinx-thebe and the book theme both declare THEBE_JS_URL; keep one declaration."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen_thebe_config = False
    kept = []
    for script in scripts:
        body = getattr(script, "attributes", {}).get("body", "") or ""
        if "THEBE_JS_URL" in body:
            if seen_thebe_config:
                continue
            seen_thebe_config = True
        kept.append(script)
    scripts[:] = kept  # in place: Sphinx adds page-specific scripts to this same list


def _accessible_citation_list(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Docutils marks a bibliography as a list whose entries are not list items, which screen
    readers (and axe, as a critical violation) reject; make the entries list items."""
    body = context.get("body", "")
    if 'class="citation-list"' in body:
        context["body"] = body.replace('role="doc-biblioentry"', 'role="listitem"')


_HIDDEN_CELL_TOGGLE = '<summary aria-label="Toggle hidden content">'


def _toggles_named_by_their_text(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """myst-nb labels each hidden cell's toggle "Toggle hidden content" while it shows "Show code cell
    source": a reader who speaks the words on screen cannot name it (WCAG 2.5.3 "Label in Name",
    axe's rule label-content-name-mismatch). Without the label, the words it shows name it."""
    body = context.get("body", "")
    if _HIDDEN_CELL_TOGGLE in body:
        context["body"] = body.replace(_HIDDEN_CELL_TOGGLE, "<summary>")


_CHECKSUM = re.compile(r'\?v=[0-9a-f]+"')


def _stable_asset_urls(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Sphinx appends a checksum to an asset's URL only if the file is already in the output
    folder, and several extensions copy theirs only when the build finishes: a first build and
    a rebuild would then differ. Drop the checksums so every build of a source is byte-identical."""
    for key in ("js_tag", "css_tag"):
        tag = context.get(key)
        if tag is not None:
            context[key] = lambda asset, _tag=tag: _CHECKSUM.sub('"', _tag(asset))


def _bibtex_plugins_found_once() -> None:
    """pybtex finds each style, name format and backend it formats a citation with among every
    installed distribution's entry points (importlib.metadata), again for every lookup, and
    sphinxcontrib-bibtex looks them up for every entry and every citation of every build: about
    0.1 s of each rebuild. What is installed does not change during a build, so each lookup of a
    group and name is made once (plugins registered at run time are still looked up first)."""
    import functools

    import pybtex.plugin

    if not hasattr(pybtex.plugin.entry_points, "cache_info"):
        pybtex.plugin.entry_points = functools.cache(pybtex.plugin.entry_points)


def _entry_content(entry) -> tuple:
    """Everything of a pybtex entry that its formatted text is made from, as plain values."""
    people = tuple((role, tuple((tuple(p.first_names), tuple(p.middle_names), tuple(p.prelast_names),
                                 tuple(p.last_names), tuple(p.lineage_names)) for p in persons))
                   for role, persons in entry.persons.items())
    return entry.key, entry.type, tuple(entry.fields.items()), people


def _bibtex_formats_kept() -> None:
    """sphinxcontrib-bibtex formats every entry of every bibliography again at each build, twice
    with tooltips: 0.1 to 0.2 s of a rebuild after a prose edit, for the book's 34 entries. The
    formatted entries are kept in the domain's data (pickled with the environment), each under
    everything they are made from: the entries' fields and names in order, the styles, the label
    prefix and both packages' versions. Any change there formats them again. So does an entry that
    failed to format: the error is only shown by formatting it, so it is never kept."""
    from pybtex.richtext import Tag
    from sphinxcontrib.bibtex.domain import BibtexDomain

    formatted_entries = BibtexDomain.get_formatted_entries
    if getattr(formatted_entries, "perwatt", False):
        return
    versions = (metadata.version("pybtex"), metadata.version("sphinxcontrib-bibtex"))

    def formatted_once(self, bibliography_key, docnames, tooltips, tooltips_style):
        bibliography = self.bibliographies[bibliography_key]
        entries = {entry.key: entry for _, entry in self.get_sorted_entries(bibliography_key, docnames)}
        made_from = (versions, bibliography.style, bibliography.labelprefix, tooltips, tooltips_style,
                     tuple(_entry_content(entry) for entry in entries.values()))
        kept = self.data.setdefault("perwatt_formatted", {})
        if bibliography_key in kept and kept[bibliography_key][0] == made_from:
            return [(entries[key], text, tip) for key, text, tip in kept[bibliography_key][1]]
        done = list(formatted_entries(self, bibliography_key, docnames, tooltips, tooltips_style))
        if all(type(text.text) is not Tag for _, text, _ in done):  # a Tag alone: the error sphinxcontrib shows
            kept[bibliography_key] = (made_from, [(entry.key, text, tip) for entry, text, tip in done])
        else:
            kept.pop(bibliography_key, None)
        return done

    formatted_once.perwatt = True
    BibtexDomain.get_formatted_entries = formatted_once


def schema_validator(schema: dict, folder: Path):
    """What ``fastjsonschema.compile(schema)`` returns, from compiled code kept in ``folder``.

    fastjsonschema writes a schema's validator as Python source and compiles it; for nbformat's
    notebook schema that takes 0.06 s, paid by every process that checks a notebook, as a rebuild
    does for the chapter it reads again. The validator's module is kept as bytecode under
    everything it is made from (the schema, fastjsonschema's version, the Python that compiled it)
    and only run again. Its source is fastjsonschema's own, from ``compile_to_code``, which writes
    what ``compile`` runs, with the module-level values spelt out."""
    import fastjsonschema
    from fastjsonschema.ref_resolver import RefResolver

    made_from = json.dumps([metadata.version("fastjsonschema"), sys.version, schema], sort_keys=True)
    kept = folder / f"{hashlib.sha256(made_from.encode()).hexdigest()}.marshal"
    try:
        name, code = marshal.loads(kept.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):  # not kept yet, or unreadable: compile it again
        name = RefResolver.from_schema(schema, handlers={}, store={}).get_scope_name()
        code = compile(fastjsonschema.compile_to_code(schema), f"<fastjsonschema {kept.stem[:12]}>", "exec")
        folder.mkdir(parents=True, exist_ok=True)
        store.write_bytes_whole(kept, marshal.dumps((name, code)))  # for a build running beside this one
    namespace: dict = {}
    exec(code, namespace)
    return namespace[name]


def _notebook_schema_kept(folder: Path) -> None:
    """nbformat checks each notebook it makes, reads or writes against its schema, through a
    validator it compiles once per process (:func:`schema_validator` keeps that compiled in ``folder``)."""
    from nbformat import json_compat

    validator = json_compat.FastJsonSchemaValidator
    original = getattr(validator.__init__, "perwatt_original", validator.__init__)

    def kept_compiled(self, schema):
        json_compat.JsonSchemaValidator.__init__(self, schema)
        self._validator = schema_validator(schema, folder)

    kept_compiled.perwatt_original = original
    validator.__init__ = kept_compiled


def connect(app: Sphinx) -> None:
    """Install every workaround of this module on ``app``."""
    _notebook_schema_kept(Path(app.doctreedir) / "perwatt-nbschema")
    _bibtex_plugins_found_once()
    _bibtex_formats_kept()
    _numref_reads_each_doctree_once()
    app.connect("config-inited", lambda app, config: check_versions())
    app.connect("doctree-read", _detach_exercise_registry)
    app.connect("html-page-context", _drop_duplicate_thebe)
    app.connect("html-page-context", _accessible_citation_list)
    app.connect("html-page-context", _toggles_named_by_their_text)
    app.connect("html-page-context", _stable_asset_urls)
