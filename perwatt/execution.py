"""Executing the book's chapters side by side before Sphinx reads them.

myst-nb executes each notebook while Sphinx reads it, one after another, each in a kernel of its
own, so a clean build keeps one core busy and pays, for every chapter, a kernel's start and the
imports and data checks every chapter begins with. :func:`execute_side_by_side` (connected by
:mod:`perwatt.sphinxext` to ``env-before-read-docs``) runs the notebooks jupyter-cache lacks first,
on as many kernels as there are cores, each kernel running one notebook after another, and caches
them exactly as myst-nb would.

A kernel that has run one chapter starts the next as a fresh kernel would: an empty namespace, the
execution count back at 1, the chapters' folder as its working folder. What it keeps is what a
chapter cannot see: imported modules and the package's caches of the data and of what was computed
from it (:func:`perwatt.data.cached`). A chapter that relied on another having run first would pass
here and fail for a reader; the handout test runs every chapter in a kernel of its own, as a
student does, to catch that.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
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


#: Run in a kernel between two notebooks: what a fresh kernel has (the working folder is set
#: without leaving a name behind). The count is set to 0: running this cell adds 1.
_FRESH = ("get_ipython().run_line_magic('reset', '-f')\n"
          "__import__('os').chdir({cwd!r})\n"
          "get_ipython().execution_count = 0")


@dataclass
class Executed:
    path: Path
    notebook: object
    read_fmt: dict | None
    seconds: float
    error: str | None


def run_notebooks(stale: list[tuple[Path, object, dict | None]], kernels: int, timeout: int | None,
                  allow_errors: bool) -> list[Executed]:
    """Execute each notebook on one of ``kernels`` kernels (each taking the next notebook left, in
    the order given), every notebook starting as in a fresh kernel; in the order given."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    todo: queue.Queue = queue.Queue()
    for position, item in enumerate(stale):
        todo.put((position, item))
    done: dict[int, Executed] = {}

    def work() -> None:
        # Threads suffice: the work is in the kernels, each its own process.
        owner = None
        try:
            while True:
                try:
                    position, (path, notebook, read_fmt) = todo.get_nowait()
                except queue.Empty:
                    return
                owner, done[position] = _run_one(owner, path, notebook, read_fmt, timeout, allow_errors)
        finally:
            if owner is not None:
                owner._cleanup_kernel()

    with ThreadPoolExecutor(kernels) as pool:
        for future in [pool.submit(work) for _ in range(kernels)]:
            future.result()
    return [done[i] for i in range(len(stale))]


def _run_one(owner, path: Path, notebook, read_fmt, timeout: int | None, allow_errors: bool):
    """Run one notebook on ``owner``'s kernel (a NotebookClient, or None to start one); returns the
    client that owns the kernel now (None once the kernel has failed) and what happened."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from nbformat import v4

    settings = notebook.metadata.get("execution", {})  # a notebook may set its own, as myst-nb allows
    options = {"timeout": settings.get("timeout", timeout), "allow_errors": settings.get("allow_errors", allow_errors),
               # No timestamps in the cells: two builds of one source must write the same notebooks.
               "record_timing": False, "resources": {"metadata": {"path": str(path.parent)}}}
    start = time.perf_counter()
    try:
        if owner is not None:
            fresh = v4.new_notebook(cells=[v4.new_code_cell(_FRESH.format(cwd=str(path.parent)))])
            NotebookClient(fresh, km=owner.km, kc=owner.kc, **options).execute()
        client = NotebookClient(notebook, **options) if owner is None else \
            NotebookClient(notebook, km=owner.km, kc=owner.kc, **options)
        client.execute(cleanup_kc=False)
        return owner or client, Executed(path, notebook, read_fmt, time.perf_counter() - start, None)
    except (CellExecutionError, CellTimeoutError) as err:
        return owner or client, Executed(path, notebook, read_fmt, time.perf_counter() - start, str(err))
    except (DeadKernelError, RuntimeError) as err:
        # The kernel is gone or wedged: the next notebook gets a new one.
        if owner is not None:
            owner._cleanup_kernel()
        return None, Executed(path, notebook, read_fmt, time.perf_counter() - start, f"{type(err).__name__}: {err}")


def execute_side_by_side(app: Sphinx, env, docnames: list[str]) -> None:
    """Execute the notebooks about to be read that jupyter-cache lacks, before Sphinx reads them,
    on one kernel per core (see the module docstring), and cache them as myst-nb would; reading then
    finds every one cached. A notebook that fails here is left uncached, and myst-nb runs it again
    and reports its error."""
    config = env.mystnb_config
    if config.execution_mode != "cache":
        return
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from sphinx.util import logging

    stale = stale_notebooks(env, docnames)
    if not stale:
        return
    kernels = min(len(stale), os.cpu_count() or 1)
    # The longest first, so that no long notebook starts last while the other kernels sit idle.
    stale.sort(key=lambda item: -sum(len(c.source) for c in item[1].cells if c.cell_type == "code"))
    logger = logging.getLogger(__name__)
    logger.info(f"perwatt: executing {len(stale)} notebooks on {kernels} kernel(s)")
    results = run_notebooks(stale, kernels, config.execution_timeout, config.execution_allow_errors)
    cache = get_cache(config.execution_cache_path or ".jupyter_cache")
    for result in results:
        if result.error is not None:
            continue
        record = cache.add_nb_to_project(str(result.path), **({"read_data": result.read_fmt} if result.read_fmt else {}))
        cache.cache_notebook_bundle(CacheBundleIn(result.notebook, record.uri, data={"execution_seconds": result.seconds}),
                                    check_validity=False, overwrite=True)
        logger.info(f"perwatt: executed {result.path.name} in {result.seconds:.2f} seconds")
