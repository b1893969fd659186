"""Executing the book's chapters on kernels that start early, while Sphinx goes on with its own work.

myst-nb executes each notebook while Sphinx reads it, one after another, each in a kernel of its
own: a clean build keeps one core busy, and pays for every chapter a kernel's start and the
imports and data checks every chapter begins with. Here (hooks connected by :mod:`perwatt.sphinxext`):

* on a clean build, or after the model changed, as many kernels as there are cores start as soon
  as the configuration is read, and import the package and load its data while Sphinx sets up
  (:func:`start_early`); on Linux, one process does that once and the kernels are forked from it
  (:mod:`perwatt.zygote`);
* once Sphinx knows which documents it will read, the notebooks among them that jupyter-cache
  lacks go to those kernels, the longest first (:data:`RUN_LONGEST`); each kernel runs one
  notebook after another;
* Sphinx reads every other page first (:func:`submit_stale`), then each notebook as its kernel
  finishes it, caching it exactly as myst-nb would just before myst-nb looks it up (:func:`collect`).

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

from perwatt import devtools, zygote


def _notebooks(env, docnames: list[str]) -> list[tuple[Path, object, str]]:
    """Of the documents about to be read, the notebooks: each path, myst-nb's reader and the text."""
    from myst_nb.core.read import create_nb_reader

    found = []
    for docname in docnames:
        path = Path(env.doc2path(docname))
        text = path.read_text(encoding="utf-8")
        reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
        if reader is not None:  # else plain Markdown, never executed
            found.append((path, reader, text))
    return found


def _stale(env, notebooks: list[tuple[Path, object, str]], cache_is_empty: bool = False
           ) -> list[tuple[Path, object, dict | None]]:
    """The notebooks (from :func:`_notebooks`) jupyter-cache has no outputs for, each read exactly as
    myst-nb reads it (so the cache entry written for it is the one myst-nb looks up). Every one,
    unasked, when the cache is known to be empty."""
    from jupyter_cache import get_cache

    cache = None if cache_is_empty else get_cache(env.mystnb_config.execution_cache_path or ".jupyter_cache")
    stale = []
    for path, reader, text in notebooks:
        notebook = reader.read(text)
        if cache is not None:
            try:
                cache.match_cache_notebook(notebook)
                continue
            except KeyError:
                pass
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


#: The imports and data loading every chapter begins with: done once by the kernels' zygote
#: (:mod:`perwatt.zygote`) before it forks them, and again by each kernel in its warm-up, in 1-2 ms
#: where the kernel was forked, its modules and data loaded already.
PRELOAD = ("import perwatt.figures, perwatt.tables, perwatt.exercises, perwatt.exercises_agents\n"
           "from perwatt import data\n"
           "data.validate_all()\n")
#: What a kernel does while Sphinx sets up. What it leaves lives as long as the kernel, so the
#: garbage collector's full passes are spared it (:func:`gc.freeze`): about 6% of the chapters'
#: execution time, in three clean builds each way. Displays stop waiting on empty output streams
#: (:mod:`perwatt.displays`).
WARM_UP = PRELOAD + ("from perwatt import displays\n"
                     "displays.skip_empty_flushes()\n"
                     "__import__('gc').freeze()")


class KernelPool:
    """Kernels that execute notebooks in the background, each one after another (see the module
    docstring). :meth:`submit` queues a notebook, :meth:`result` waits for it, :meth:`close` lets
    the kernels finish what is queued and shuts them down."""

    def __init__(self, kernels: int, cwd: Path, timeout: int | None, allow_errors: bool) -> None:
        import queue
        import threading

        self.timeout, self.allow_errors = timeout, allow_errors
        self._jobs: queue.Queue = queue.Queue()
        self._done: dict[Path, Executed] = {}
        self._ready: dict[Path, threading.Event] = {}
        self.order: list[Path] = []
        self._closing = False
        # Forked from one process that has loaded what every kernel loads, where that can be done.
        self._kernel_options = devtools.kernel_options()
        self._zygote = zygote.Zygote(PRELOAD, cwd) if zygote.available() and self._kernel_options else None
        if self._zygote is not None:
            forking = zygote.manager_class(self._kernel_options["kernel_manager_class"], self._zygote)
            self._kernel_options = {"kernel_manager_class": forking}
        # Threads suffice: the work is in the kernels, each its own process.
        self._threads = [threading.Thread(target=self._work, args=(cwd,), daemon=True) for _ in range(kernels)]
        for thread in self._threads:
            thread.start()

    def submit(self, path: Path, notebook, read_fmt: dict | None) -> None:
        import threading

        self._ready[path] = threading.Event()
        self.order.append(path)
        self._jobs.put((path, notebook, read_fmt))

    def pending(self, path: Path) -> bool:
        return path in self._ready

    def result(self, path: Path) -> Executed:
        self._ready[path].wait()
        return self._done[path]

    def close(self, wait: bool = True) -> None:
        """Let the kernels finish what is queued, then stop them; with ``wait``, until they have."""
        if not self._closing:
            self._closing = True
            for _ in self._threads:
                self._jobs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None

    def _work(self, cwd: Path) -> None:
        owner = None
        try:
            owner = _warm_up(cwd, self.timeout, self._kernel_options)
            while (job := self._jobs.get()) is not None:
                path = job[0]
                try:
                    owner, self._done[path] = _run_one(owner, *job, self.timeout, self.allow_errors, self._kernel_options)
                finally:
                    self._ready[path].set()
        finally:
            _shut_down(owner)


def _warm_up(cwd: Path, timeout: int | None, kernel_options: dict | None = None):
    """A kernel started with ``kernel_options`` (:func:`perwatt.devtools.kernel_options` unless the
    pool's) that has run :data:`WARM_UP` (None if it could not start; the first notebook then
    starts one). A warm-up that fails leaves nothing a chapter can see: its namespace is cleared."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError
    from nbformat import v4

    client = NotebookClient(v4.new_notebook(cells=[v4.new_code_cell(WARM_UP)]), timeout=timeout, record_timing=False,
                            kernel_name="python3", **(kernel_options or devtools.kernel_options()),
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute(cleanup_kc=False)
    except (CellExecutionError, CellTimeoutError):
        pass  # bad data, say: the build's own check reports it
    except Exception:  # noqa: BLE001 - no kernel: the first notebook starts its own and reports why
        _shut_down(client)
        return None
    return client


def _shut_down(client) -> None:
    """Stop a client's kernel, if it has one (one that never started has nothing to stop).

    At once: the kernel holds nothing the build needs. Asked to shut down, they sometimes took as
    long as jupyter_client waits before it sends SIGTERM, 2.5 s: closing them took 2.65 and 2.89 s
    in 2 of 7 clean builds here, 0.12-0.22 s in the others (the cause inferred, not observed)."""
    if client is not None and client.km is not None:
        client.shutdown_kernel = "immediate"
        client._cleanup_kernel()


def _on(owner, client):
    """``client`` set to run on ``owner``'s kernel through ``owner``'s connection to it. The
    constructor drops a ``kc`` passed to it (nbclient 0.11), so the client would open a connection
    of its own, wait 0.2 s to see it answer, and leave it open: twice per notebook, as 0.4 s of a
    kernel's time spent waiting, and two connections left behind."""
    client.km, client.kc = owner.km, owner.kc
    return client


def _run_one(owner, path: Path, notebook, read_fmt, timeout: int | None, allow_errors: bool,
             kernel_options: dict | None = None):
    """Run one notebook on ``owner``'s kernel (a NotebookClient, or None to start one); returns the
    client that owns the kernel now (None once the kernel has failed) and what happened."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from nbformat import v4

    settings = notebook.metadata.get("execution", {})  # a notebook may set its own, as myst-nb allows
    options = {"timeout": settings.get("timeout", timeout), "allow_errors": settings.get("allow_errors", allow_errors),
               # No timestamps in the cells: two builds of one source must write the same notebooks.
               "record_timing": False, **(kernel_options or devtools.kernel_options()),
               "resources": {"metadata": {"path": str(path.parent)}}}
    start = time.perf_counter()
    client = None
    try:
        if owner is not None:
            fresh = v4.new_notebook(cells=[v4.new_code_cell(_FRESH.format(cwd=str(path.parent)))])
            _on(owner, NotebookClient(fresh, **options)).execute(cleanup_kc=False)
        client = NotebookClient(notebook, **options) if owner is None else _on(owner, NotebookClient(notebook, **options))
        client.execute(cleanup_kc=False)
        return owner or client, Executed(path, notebook, read_fmt, time.perf_counter() - start, None)
    except (CellExecutionError, CellTimeoutError) as err:
        return owner or client, Executed(path, notebook, read_fmt, time.perf_counter() - start, str(err))
    except Exception as err:  # noqa: BLE001 - a dead or wedged kernel: the next notebook gets a new one
        for gone in (owner, client):
            _shut_down(gone)
        return None, Executed(path, notebook, read_fmt, time.perf_counter() - start, f"{type(err).__name__}: {err}")


# --- The build's hooks ------------------------------------------------------------------------

def _kernels(count: int) -> int:
    return max(1, min(count, os.cpu_count() or 1))


def start_early(app: Sphinx, every_notebook_is_stale: bool) -> None:
    """At config-inited: where no chapter's outputs can be reused (a clean build, a changed model),
    start the kernels now, so that they import and load while Sphinx sets up."""
    if every_notebook_is_stale and app.config.nb_execution_mode == "cache":
        chapters = devtools.chapter_files(Path(app.srcdir))
        app.perwatt_pool = KernelPool(_kernels(len(chapters)), Path(app.srcdir), app.config.nb_execution_timeout,
                                      app.config.nb_execution_allow_errors)


#: The chapters that run longest, longest first. A code cell's length says little of how long it
#: runs (fleet.md's figure solves a fleet plan at each of its 27 settings): in clean builds on 2
#: cores, fleet.md ran 3.5-3.6 s and prefill-decode.md 2.6-2.7 s, the next longest 1.3-1.8 s. Queued
#: by code length, the two kernels finished their last chapters 1.2-1.7 s apart (three clean
#: builds); with these first, 0.1-0.2 s apart. perf/build_time.py reports, from each of its clean
#: builds, whether these are still the longest.
RUN_LONGEST = ("fleet.md", "prefill-decode.md")


def _longest_first(item: tuple[Path, object, dict | None]) -> tuple[int, int]:
    """Sort key: the chapters :data:`RUN_LONGEST` names first, in its order; then the longest code."""
    path, notebook, _ = item
    named = RUN_LONGEST.index(path.name) if path.name in RUN_LONGEST else len(RUN_LONGEST)
    return named, -sum(len(c.source) for c in notebook.cells if c.cell_type == "code")


def submit_stale(app: Sphinx, env, docnames: list[str]) -> None:
    """At env-before-read-docs: of the documents Sphinx is about to read (and so myst-nb would
    execute), every notebook jupyter-cache lacks goes to the kernels, the longest first, so that no
    long one starts last while the others sit idle. Sphinx then reads every page that waits for no
    kernel first, then the notebooks in the order the kernels take them up. A rebuild after an edit
    reads only what changed, so only that is checked (reading each notebook to match the cache was
    a tenth of such a rebuild), and one notebook alone is left to myst-nb."""
    from sphinx.util import logging

    pool = getattr(app, "perwatt_pool", None)
    config = env.mystnb_config
    notebooks = _notebooks(env, docnames) if config.execution_mode == "cache" else []
    # One notebook and no kernel started (a rebuild after an edit): nothing would run beside it, so
    # myst-nb's own cache check, and its run if the cache lacks it, do it once, not twice (the check
    # opens the cache and hashes the notebook, about a twentieth of such a rebuild).
    # Kernels started early mean the cache was just emptied (a clean build, a changed model).
    stale = _stale(env, notebooks, cache_is_empty=pool is not None) if pool is not None or len(notebooks) > 1 else []
    if not stale:
        if pool is not None:
            pool.close()
            app.perwatt_pool = None
        return
    if pool is None:
        pool = app.perwatt_pool = KernelPool(_kernels(len(stale)), Path(app.srcdir), config.execution_timeout,
                                             config.execution_allow_errors)
    stale.sort(key=_longest_first)
    for item in stale:
        pool.submit(*item)
    logging.getLogger(__name__).info(f"perwatt: executing {len(stale)} notebooks on {len(pool._threads)} kernel(s)")
    rank = {path: i for i, path in enumerate(pool.order)}
    docnames.sort(key=lambda d: rank.get(Path(env.doc2path(d)), -1))


def collect(app: Sphinx, docname: str, source: list[str]) -> None:
    """At source-read: a notebook on its way from a kernel is waited for and cached as myst-nb would
    (then myst-nb finds it). One that failed is left uncached: myst-nb runs it again and reports its error."""
    pool = getattr(app, "perwatt_pool", None)
    path = Path(app.env.doc2path(docname))
    if pool is None or not pool.pending(path):
        return
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    from sphinx.util import logging

    result = pool.result(path)
    if result.error is not None:
        return
    cache = get_cache(app.env.mystnb_config.execution_cache_path or ".jupyter_cache")
    record = cache.add_nb_to_project(str(result.path), **({"read_data": result.read_fmt} if result.read_fmt else {}))
    cache.cache_notebook_bundle(CacheBundleIn(result.notebook, record.uri, data={"execution_seconds": result.seconds}),
                                check_validity=False, overwrite=True)
    logging.getLogger(__name__).info(f"perwatt: executed {result.path.name} in {result.seconds:.2f} seconds")


def release(app: Sphinx, _env) -> None:
    """After reading: the kernels are stopped while Sphinx goes on to write the pages (a tenth of a
    second or more that it no longer waits for); :func:`close` waits for them."""
    pool = getattr(app, "perwatt_pool", None)
    if pool is not None:
        pool.close(wait=False)


def close(app: Sphinx, *_args) -> None:
    """When the build ends or stops: the kernels are shut down, and waited for."""
    pool = getattr(app, "perwatt_pool", None)
    if pool is not None:
        app.perwatt_pool = None
        pool.close()
