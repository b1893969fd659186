"""Executing the book's chapters side by side before Sphinx reads them.

myst-nb executes each notebook while Sphinx reads it, one after another, so a clean build keeps one
core busy. :func:`execute_side_by_side` (connected by :mod:`perwatt.sphinxext` to
``env-before-read-docs``) runs the notebooks jupyter-cache lacks first, in fresh kernels, as many at
once as there are cores, and caches them exactly as myst-nb would.
"""

from __future__ import annotations

import os
from pathlib import Path

from sphinx.application import Sphinx


def stale_notebooks(env, docnames: list[str]) -> list[tuple[Path, object, dict | None]]:
    """The documents about to be read that are notebooks jupyter-cache has no outputs for, each
    read exactly as myst-nb reads it (so the cache entry written for it is the one myst-nb looks up)."""
    from jupyter_cache import get_cache
    from myst_nb.core.read import create_nb_reader

    cache = get_cache(env.mystnb_config.execution_cache_path or ".jupyter_cache")
    stale = []
    for docname in docnames:
        path = Path(env.doc2path(docname))
        text = path.read_text(encoding="utf-8")
        reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
        if reader is None:
            continue  # plain Markdown, never executed
        notebook = reader.read(text)
        try:
            cache.match_cache_notebook(notebook)
        except KeyError:
            stale.append((path, notebook, reader.read_fmt))
    return stale


def execute_side_by_side(app: Sphinx, env, docnames: list[str]) -> None:
    """myst-nb executes each notebook while Sphinx reads it, one after another, so a clean build
    keeps one core busy. Execute the stale ones first, one fresh kernel per notebook and as many at
    once as there are cores, and cache them as myst-nb would; reading then finds every one cached.
    A notebook that fails here is left uncached, and myst-nb runs it again and reports its error."""
    config = env.mystnb_config
    if config.execution_mode != "cache":
        return
    from concurrent.futures import ThreadPoolExecutor

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from jupyter_cache.executors.utils import single_nb_execution
    from sphinx.util import logging

    stale = stale_notebooks(env, docnames)
    workers = min(len(stale), os.cpu_count() or 1)
    if workers < 2:
        return  # nothing to overlap: myst-nb's own execution is the same work
    # The longest first, so that no long notebook starts last while the other cores sit idle.
    stale.sort(key=lambda item: -sum(len(c.source) for c in item[1].cells if c.cell_type == "code"))

    def execute(item):
        path, notebook, _ = item
        # Threads suffice: the work is in the kernels, each its own process.
        return single_nb_execution(notebook, cwd=str(path.parent), timeout=config.execution_timeout,
                                   allow_errors=config.execution_allow_errors, meta_override=True)

    logger = logging.getLogger(__name__)
    logger.info(f"perwatt: executing {len(stale)} notebooks, {workers} at a time")
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(execute, stale))
    cache = get_cache(config.execution_cache_path or ".jupyter_cache")
    for (path, notebook, read_fmt), result in zip(stale, results):
        if result.err is not None:
            continue
        record = cache.add_nb_to_project(str(path), **({"read_data": read_fmt} if read_fmt else {}))
        cache.cache_notebook_bundle(CacheBundleIn(notebook, record.uri, data={"execution_seconds": result.time}),
                                    check_validity=False, overwrite=True)
        logger.info(f"perwatt: executed {path.name} in {result.time:.2f} seconds")
