"""Sphinx extension that keeps the built book offline and its charts alive without a kernel.

Listed in ``_config.yml`` under ``sphinx.extra_extensions``. It

* checks every data file first and stops the build at the first bad one, printing its
  :class:`~perwatt.data.DataError` (otherwise every chapter would run, fail inside its kernel and
  leave hundreds of missing-glue warnings, the real error buried in a report file);
* tells the kernels that execute the chapters to render charts for the static site
  (``PERWATT_RENDER=static``, inherited by every kernel the build starts);
* clears jupyter-cache when the package or the data changed, since the cache only sees
  the chapters' own cells;
* ships Vega, Vega-Lite and vega-embed as one shared classic script, made by vl-convert at the
  Vega-Lite version Altair targets and kept in the repository (:mod:`perwatt.vegabundle`), plus
  the small loader that draws
  every chart on a page (both load from disk as well as over http), and ships each chart's
  spec compressed;
* writes every formula as MathML at build time (:mod:`perwatt.mathml`), which browsers draw
  themselves, so no page loads a math library;
* keeps the theme's icons but not the 1.5 MB script it draws them with (its stylesheet draws the
  same icons from a web font), and cuts that font and the stylesheet's icon rules to the icons the
  book shows (:mod:`perwatt.iconfont`), then drops the style rules no page can match from every
  stylesheet the pages load, most of the theme's Bootstrap (:mod:`perwatt.cssprune`);
* puts the theme's home link inside a landmark and writes the root redirect page in full, so that
  axe finds nothing on any page;
* works around what the pinned upstream packages do (:mod:`perwatt.upstream`), each workaround
  naming the version it was written against; the build warns (and so, under ``-W``, fails) when an
  installed version differs, so that a maintainer checks whether it is still needed;
* keeps what a rebuild would redo unchanged (pruned stylesheets, cut fonts, handouts) beside the
  doctrees, so that a build after a small edit redoes only what the edit changed;
* spares Python's garbage collector the objects the build keeps to its end (:func:`_keep_for_good`).
"""

from __future__ import annotations

import gc
import hashlib
import html
import os
import re
import shutil
from pathlib import Path

from sphinx.application import Sphinx

from perwatt import cssprune, datadir, devtools, execution, forked, iconfont, mathml, render, store, upstream, vegabundle

STATIC_DIR = Path(__file__).parent / "static"
TEMPLATES_DIR = Path(__file__).parent / "templates"

def model_fingerprint() -> str:
    """A hash of everything the chapters compute from besides their own text: the package and data/."""
    digest = hashlib.sha256()
    files = sorted(Path(__file__).parent.rglob("*.py")) + sorted(datadir.data_dir().glob("*"))
    for path in files:
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _model_stamp(app: Sphinx, config) -> Path:
    """Where the fingerprint of the model the cached chapters were executed with is kept."""
    cache_path = getattr(config, "nb_execution_cache_path", "") or str(Path(app.outdir).parent / ".jupyter_cache")
    return Path(cache_path) / "perwatt-model.sha256"


def _model_changed(stamp: Path, fingerprint: str) -> bool:
    """Whether the cached chapters were executed with another model than ``fingerprint`` (or none)."""
    return not stamp.exists() or stamp.read_text() != fingerprint


def _invalidate_stale_cache(app: Sphinx, config, fingerprint: str) -> None:
    """jupyter-cache keys on a notebook's own cells; a change to the model must re-execute too.
    The fingerprint is written only once the data has validated (see :func:`_config_inited`)."""
    stamp = _model_stamp(app, config)
    changed = _model_changed(stamp, fingerprint)
    if changed and stamp.parent.exists():
        shutil.rmtree(stamp.parent)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(fingerprint)
    app.perwatt_model_changed = changed  # read by _reread_all_if_model_changed


def _reread_all_if_model_changed(app: Sphinx, env, added, changed, removed) -> list[str]:
    """Sphinx only re-reads edited sources; after a model change every chapter must run again."""
    return sorted(env.found_docs) if getattr(app, "perwatt_model_changed", False) else []


def _point_kernels_at_the_books_data(app: Sphinx) -> None:
    """The book's own data (its ``data/`` folder, unless ``PERWATT_DATA`` names another) is what
    the kernels that run the chapters read."""
    own = Path(app.srcdir) / "data"
    if datadir.ENVIRONMENT_VARIABLE not in os.environ and (own / "datapackage.json").is_file():
        os.environ[datadir.ENVIRONMENT_VARIABLE] = str(own.resolve())


def _check_data(app: Sphinx) -> None:
    """Load every data file once; the first DataError stops the build before any chapter runs.

    The data is the book's own (its ``data/`` folder, unless ``PERWATT_DATA`` names another), and
    the kernels that run the chapters are pointed at the same folder.
    """
    from sphinx.errors import ConfigError

    from perwatt import data

    try:
        data.validate_all()
    except data.DataError as err:
        raise ConfigError(f"perwatt: the book's data does not validate, so no chapter can run:\n{err}") from None


def _config_inited(app: Sphinx, config) -> None:
    _point_kernels_at_the_books_data(app)
    os.environ[render.MODE_VARIABLE] = "static"
    stamp, fingerprint = _model_stamp(app, config), model_fingerprint()
    unchanged = not _model_changed(stamp, fingerprint)
    # The kernels share what each computes slowly (perwatt.store), in a store kept with the execution
    # cache and emptied with it; a store the caller named (the test run's) is used as it is.
    if store.VARIABLE not in os.environ:
        build_store = stamp.parent.with_name("perwatt-store")
        if not unchanged and build_store.exists():
            shutil.rmtree(build_store)
        os.environ[store.VARIABLE] = str(build_store)
    # Nothing cached can be used: the kernels start now, while the rest of the build sets up. The
    # data is checked meanwhile (about 0.2 s alone, which each kernel then reads from the store rather than
    # checking again); a bad file stops the build and the kernels with it.
    execution.start_early(app, every_notebook_is_stale=not unchanged)
    # The stamp, written once the data validated, fingerprints the data and the code that checks it.
    if not unchanged:
        try:
            _check_data(app)
        except Exception:
            execution.close(app)
            raise
    _invalidate_stale_cache(app, config, fingerprint)
    # The repository's copy of the bundle, when the installed versions made it; else one made here.
    bundle = vegabundle.vendored() or vegabundle.written(Path(app.doctreedir) / "perwatt-static")
    app.perwatt_vega_bundle = bundle.name
    config.html_static_path = [*config.html_static_path, str(STATIC_DIR), str(bundle)]
    # First, so that its navbar-logo.html and sections/header.html stand in for the theme's (which they include).
    config.templates_path = [str(TEMPLATES_DIR), *config.templates_path]
    # sphinx-book-theme reads this; an empty value makes the theme log a console error.
    config.html_context = {**config.html_context, "default_mode": "light"}


def _ship_icons_and_prune_css(app: Sphinx, exception: Exception | None) -> None:
    """Last, once every page and stylesheet is written: only the icons the pages use, then every
    stylesheet the pages load less the rules no page can match (the book's own are left whole).
    The theme's stylesheet holds the icon rules, so it is cut for icons first, then pruned; in a
    build from clean, by a forked process (:mod:`perwatt.forked`) while this one prunes the others."""
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    sources = [Path(d) / "static" for d in app.builder.theme.get_theme_dirs()]
    theme_static = next((s for s in sources if (s / iconfont.STYLESHEET).is_file()), None)
    if theme_static is None:
        logger.warning(f"perwatt.iconfont: no theme has {iconfont.STYLESHEET}; the icon font ships whole")
    # Kept beside the doctrees: a clean build starts without them, a rebuild reuses them.
    site, cache, own = Path(app.outdir), Path(app.doctreedir) / "perwatt-cssprune", {p.name for p in STATIC_DIR.glob("*.css")}
    theme_sheet = site / "_static" / iconfont.STYLESHEET

    def icons() -> iconfont.IconUse | None:
        return None if theme_static is None else iconfont.ship_used_icons(
            site / "_static", theme_static, cache=Path(app.doctreedir) / "perwatt-iconfont")

    if cache.exists():  # a rebuild finds most of it done before (kept beside the doctrees): no fork
        use, pruned = icons(), cssprune.prune_site(site, leave=own, cache=cache)
    else:
        job = forked.start(lambda: (icons(), cssprune.prune_site(site, leave=own, cache=cache, only={theme_sheet})))
        others = cssprune.prune_site(site, leave=own, cache=cache, skip={theme_sheet})
        use, theirs = job.result()
        pruned = others + theirs
    if use is not None:
        for name in sorted(use.unknown):
            logger.warning(f"perwatt.iconfont: a page uses the class {name}, which no stylesheet it loads defines")
        logger.info(f"perwatt.iconfont: {len(use.classes)} icon classes, {len(use.characters)} glyphs shipped")
    for sheet in sorted(pruned, key=lambda sheet: sheet.path):
        logger.info(f"perwatt.cssprune: {sheet.path.name} {sheet.bytes_before} -> {sheet.bytes_after} bytes")


def _write_root_favicon(app: Sphinx, exception: Exception | None) -> None:
    """Browsers ask for /favicon.ico on pages without an icon link (the root redirect page)."""
    if exception is None and app.builder.format == "html":
        shutil.copyfile(STATIC_DIR / "favicon.ico", Path(app.outdir) / "favicon.ico")


#: The site's root page: the browser goes on to the first chapter at once. Written in full (a
#: language, a title, a heading and a link inside a landmark) for a reader whose browser does not
#: follow the refresh, and for a screen reader that announces the page before it goes.
ROOT_REDIRECT = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Refresh" content="0; url={url}">
<title>{title}</title>
</head>
<body>
<main>
<h1>{title}</h1>
<p><a href="{url}">Open the book</a></p>
</main>
</body>
</html>
"""


def _write_root_redirect(app: Sphinx, exception: Exception | None) -> None:
    """Instead of the one-line redirect sphinx-external-toc writes when the site has no index
    page, which has no language, title or landmark (axe reports all three)."""
    if exception is not None or app.builder.format != "html" or app.config.root_doc == "index":
        return
    url = app.builder.get_target_uri(app.config.root_doc)
    (Path(app.outdir) / "index.html").write_text(
        ROOT_REDIRECT.format(url=html.escape(url, quote=True), title=html.escape(app.config.html_title or app.config.project)),
        encoding="utf-8")


def _add_chart_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Load Vega only on pages that have charts; the browser caches it across them."""
    if 'class="perwatt-spec"' not in context.get("body", ""):
        return
    # Deferred classic scripts run in document order after parsing, the bundle, then the loader,
    # and, unlike modules, also on a page opened from disk.
    app.add_js_file(app.perwatt_vega_bundle, loading_method="defer", priority=600)
    app.add_js_file("perwatt-charts.js", loading_method="defer", priority=601)


def _pack_chart_specs(app: Sphinx, doctree) -> None:
    """The chart data is most of a chart page's bytes; ship it compressed (render.PACKED_TYPE).

    Packed as the page is read rather than as it is written, and without docutils' second copy of
    each output's text (its ``rawsource``, which HTML never shows): the doctree Sphinx pickles, and
    unpickles again for numbering figures and for each cross-reference into the page, is then a
    sixth of the size."""
    from docutils import nodes

    for node in doctree.findall(nodes.raw):
        if "output" not in node["classes"] or node.get("format") != "html":
            continue
        node.rawsource = ""
        text = node.astext()
        if 'class="perwatt-spec"' in text:
            node.replace(node.children[0], nodes.Text(render.pack_specs(text)))


#: Where the built site keeps each chapter's student notebook.
HANDOUT_DIR = "handouts"


def _handout_names(app: Sphinx) -> dict[str, str]:
    """Each chapter page's handout file name; worked out once per build, not once per page (each
    time it reads every chapter)."""
    from perwatt import handouts

    if not hasattr(app, "perwatt_handout_names"):
        app.perwatt_handout_names = {f"chapters/{stem}": name for stem, name in handouts.filenames().items()}
    return app.perwatt_handout_names


def _offer_student_notebook(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Beside the theme's download buttons: the chapter as a student notebook, no solutions."""
    name = _handout_names(app).get(pagename)
    if name is None:
        return
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            group["buttons"].insert(0, {
                "type": "link", "url": context["pathto"](f"{HANDOUT_DIR}/{name}", 1), "text": "student .ipynb",
                "tooltip": "Download the student notebook: numbers written in, no solutions",
                "icon": "fas fa-user-graduate", "label": "download-student-notebook-button"})


def _handouts(app: Sphinx) -> dict[str, str]:
    from perwatt import handouts

    return handouts.render(devtools.chapter_files(), handouts.BookIndex.from_env(app.env), Path(app.outdir).parent,
                           cache=Path(app.doctreedir) / "perwatt-handouts")


def _start_student_notebooks(app: Sphinx, _builder) -> None:
    """As the pages start to be written (the book's cross-references all known by then), a forked
    process (:mod:`perwatt.forked`) makes the handouts beside them, in a build from clean."""
    if app.builder.format == "html":
        from perwatt import handouts  # noqa: F401 - imported before the fork, not by the child

        fork = not (Path(app.doctreedir) / "perwatt-handouts").exists()  # as for the stylesheets
        app.perwatt_handouts = forked.start(lambda: _handouts(app), fork=fork)


def _write_student_notebooks(app: Sphinx, exception: Exception | None) -> None:
    """The handouts, made from this very build, so the site offers what `perwatt handouts` writes."""
    job, app.perwatt_handouts = getattr(app, "perwatt_handouts", None), None
    if exception is not None or app.builder.format != "html":
        if job is not None:
            job.discard()
        return
    out = Path(app.outdir) / HANDOUT_DIR
    out.mkdir(exist_ok=True)
    for name, text in (job.result() if job is not None else _handouts(app)).items():
        (out / name).write_text(text, encoding="utf-8")


def _keep_for_good(*_args) -> None:
    """As each phase ends (set-up, environment loaded, doctrees read, pages written), exempt what is
    alive from the collector's later passes (:func:`gc.freeze`): it lives to the end, yet each full
    collection, and the last as the process exits, walked it again (about 0.7 s of a 3.3 s rebuild;
    perf/build_time.py). Cycles made later are still collected; the kernels are other processes."""
    gc.freeze()


def setup(app: Sphinx) -> dict:
    upstream.connect(app)
    _keep_for_good()
    for event in ("builder-inited", "env-updated", "build-finished"):
        app.connect(event, _keep_for_good, priority=999)
    app.connect("config-inited", _config_inited)
    app.connect("env-get-outdated", _reread_all_if_model_changed)
    app.connect("env-before-read-docs", execution.submit_stale)
    app.connect("source-read", execution.collect)
    app.connect("env-updated", execution.release)
    app.connect("build-finished", execution.close, priority=100)  # when a build stops early too
    app.connect("doctree-read", _pack_chart_specs)
    app.connect("html-page-context", _add_chart_scripts)
    app.connect("html-page-context", _offer_student_notebook, priority=502)  # after the theme's buttons
    app.connect("build-finished", _write_root_favicon)
    app.connect("build-finished", _write_root_redirect, priority=400)  # before sphinx-external-toc's
    app.connect("write-started", _start_student_notebooks)
    app.connect("build-finished", _write_student_notebooks)
    # After myst-nb's and the theme's own build-finished steps (which write stylesheets), all at the
    # default priority 500.
    app.connect("build-finished", _ship_icons_and_prune_css, priority=900)
    app.add_css_file("perwatt.css")
    mathml.setup(app)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
