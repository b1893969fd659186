"""Shared fixtures: a clean build of the book, a local server for it, and a real Chromium.

The build fixture builds the book from scratch into a temporary folder (fresh
jupyter-cache, every chapter executed) with the same strict flags as ``make book``
(:data:`perwatt.devtools.BUILD_FLAGS`). Set ``PERWATT_SITE`` to an existing ``_build/html``
to reuse it while iterating locally; CI never sets it.

``make test`` spreads the tests over the machine's cores with pytest-xdist. Work that several
tests read is done once per run, not once per worker (:func:`once_per_run`): the book's build,
which starts in the background as soon as a worker's session begins, a second clean build for
the reproducibility and cache checks, and the tour of every page in Chromium. Slow model results
are computed once per run too, through the store (:mod:`perwatt.store`), which every process of
the run shares. The tests of a
module with a module-scoped fixture (a JupyterLab, a kernel, a bare virtual environment) all
run on one worker, so that fixture is set up once.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from perwatt import devtools, store


@dataclass(frozen=True)
class Build:
    html: Path
    log: str
    returncode: int


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder every worker of this run shares (each xdist worker's own temp folder sits inside it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    """Hold ``lock`` against the other workers of this run (and the other threads of this one)."""
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[Path], dict]) -> dict:
    """``compute(folder)``, run by whichever worker asks first, in a fresh folder of its own; every
    worker gets its result (which must be JSON). An error is reported to each worker that asks."""
    folder = run_folder(tmp_path_factory) / name
    outcome = folder.with_suffix(".json")
    with exclusive(folder.with_suffix(".lock")):
        if not outcome.exists():
            folder.mkdir(exist_ok=True)  # left by an attempt stopped by a BaseException (pytest.fail, ^C)
            try:
                result = {"value": compute(folder)}
            except Exception as err:
                result = {"error": f"{type(err).__name__}: {err}"}
            outcome.write_text(json.dumps(result), encoding="utf-8")
    result = json.loads(outcome.read_text(encoding="utf-8"))
    if "error" in result:
        pytest.fail(f"{name} failed: {result['error']}")
    return result["value"]


#: The environment every build of the run gets: as the session began, once the store is named. A build
#: runs in a background thread, and took whatever a test of its worker had set meanwhile: one run's
#: second build read the data of a test's edited copy (PERWATT_DATA), and its fleet chapter and search
#: index differed from the first build's.
SESSION_ENVIRONMENT: dict[str, str] = {}


def session_build(folder: Path, *extra: str, timeout: float = 1200):
    """devtools.build with the session's environment: how every test builds the book."""
    return devtools.build(folder, *extra, timeout=timeout, environment=SESSION_ENVIRONMENT or None)


def _build(folder: Path) -> dict:
    proc = session_build(folder)
    return {"log": proc.stdout + proc.stderr, "returncode": proc.returncode}


#: The files two builds of one source must agree on, byte for byte.
COMPARED = (".html", ".js", ".css", ".json", ".csv", ".woff2", ".ttf")


def digests(site: Path) -> dict[str, str]:
    return {p.relative_to(site).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(site.rglob("*")) if p.is_file() and p.suffix in COMPARED}


def _second_build(folder: Path) -> dict:
    built = _build(folder)
    assert built["returncode"] == 0, built["log"][-6000:]
    # Taken now: a test rebuilds this folder afterwards.
    return {"digests": digests(folder / "_build" / "html")}


def _uses(item: pytest.Item, fixture: str) -> bool:
    return fixture in getattr(item, "fixturenames", ())


@pytest.fixture(scope="session", autouse=True)
def _one_store_per_run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Turn on the store of slow results (:mod:`perwatt.store`) for every process of the run: the
    builds, their kernels, the handouts and the workers then compute each fleet plan, serving sweep
    and figure grid once between them. A store the caller already named is used as it is."""
    os.environ.setdefault(store.VARIABLE, str(run_folder(tmp_path_factory) / "store"))
    SESSION_ENVIRONMENT.update(os.environ)


@pytest.fixture(scope="session", autouse=True)
def _builds_start_early(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                        _one_store_per_run: None) -> None:
    """Start the builds the selected tests need as soon as the session begins, in the background:
    the other tests run meanwhile, and the first to need a build waits only for what is left of it."""
    if os.environ.get("PERWATT_SITE"):
        return
    needed = [(name, compute) for fixture, name, compute in (("book_build", "book", _build),
                                                              ("second_build", "second-build", _second_build))
              if any(_uses(item, fixture) for item in request.session.items)]
    if not needed:
        return
    run_folder(tmp_path_factory)  # made here, not raced for by the thread

    def build_all() -> None:
        for name, compute in needed:
            try:
                once_per_run(tmp_path_factory, name, compute)
            except BaseException:  # noqa: BLE001 (reported to the tests that ask for it)
                pass

    threading.Thread(target=build_all, daemon=True).start()


@pytest.fixture(scope="session")
def book_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    reuse = os.environ.get("PERWATT_SITE")
    if reuse:
        return Build(Path(reuse).resolve(), "", 0)
    result = once_per_run(tmp_path_factory, "book", _build)
    return Build(run_folder(tmp_path_factory) / "book" / "_build" / "html", result["log"], result["returncode"])


@dataclass(frozen=True)
class SecondBuild:
    html: Path
    #: Its files as the clean build wrote them, before any test rebuilt it.
    digests: dict[str, str]


@pytest.fixture(scope="session")
def second_build(tmp_path_factory: pytest.TempPathFactory) -> SecondBuild:
    """A second clean build of the same source, in its own folder: the first is only ever read."""
    if os.environ.get("PERWATT_SITE"):
        pytest.skip("reusing a prebuilt site; this needs the tests' own clean builds of this source")
    result = once_per_run(tmp_path_factory, "second-build", _second_build)
    return SecondBuild(run_folder(tmp_path_factory) / "second-build" / "_build" / "html", result["digests"])


@pytest.fixture(scope="session")
def site(book_build: Build) -> Path:
    """The built site's folder; fails (does not skip) if the build failed."""
    if book_build.returncode != 0:
        pytest.fail("the book did not build:\n" + book_build.log[-6000:])
    return book_build.html


@pytest.fixture(scope="session")
def site_url(site: Path):
    with devtools.served(site) as url:
        yield url


#: axe-core, the accessibility checker, exactly as tests/axe/package-lock.json pins it; `make` installs
#: it with npm. (axe-playwright-python bundles 4.12.1, whose colour-contrast rule took two to three
#: and a half times as long on the book's pages.)
AXE_LOCK = Path(__file__).parent / "axe" / "package-lock.json"
AXE_SCRIPT = devtools.REPO / ".venv" / "axe" / "node_modules" / "axe-core" / "axe.min.js"


@functools.cache
def axe():
    """An axe-playwright-python runner over the pinned axe-core; an error naming the fix if that is
    missing or another version."""
    from axe_playwright_python.sync_playwright import Axe

    # A plain error, not pytest.fail: once_per_run hands an Exception's message to every worker that asks.
    pinned = json.loads(AXE_LOCK.read_text(encoding="utf-8"))["packages"]["node_modules/axe-core"]["version"]
    install = ("mkdir -p .venv/axe && cp tests/axe/package.json tests/axe/package-lock.json .venv/axe/ && "
               "npm ci --prefix .venv/axe (npm: on Debian, apt-get install nodejs npm)")
    if not AXE_SCRIPT.exists():
        raise RuntimeError(f"axe-core is not installed at {AXE_SCRIPT}; install it: {install}")
    found = re.match(r"/\*! axe v(\S+)", AXE_SCRIPT.read_text(encoding="utf-8")[:100])
    if not found or found.group(1) != pinned:
        raise RuntimeError(f"{AXE_SCRIPT} is axe {found and found.group(1)}, not {pinned} as "
                           f"tests/axe/package-lock.json pins; install that: {install}")
    return Axe.from_file(AXE_SCRIPT)


#: The tests' browsers resolve no host name but localhost (127.0.0.1 is reached by its address), so a
#: request for another host fails at once, as it would offline. The tests still see every request:
#: PageVisit records them from the context's events, and one for any origin but the site's fails
#: them. Intercepting each request instead (context.route, which also turns off the HTTP cache) took
#: 0.94-0.98 s of the machine's CPU a visit to per-watt.html, against 0.88-0.95 s, in three rounds
#: of ten visits each way.
BROWSER_ARGS = [*devtools.CHROMIUM_ARGS, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=devtools.find_chromium(), args=BROWSER_ARGS)
        except Error as err:
            pytest.fail(f"{devtools.NO_BROWSER}\n(Playwright said: {str(err).splitlines()[0]})")
        yield launched
        launched.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # In the order the background builds finish: first what needs neither build (it runs while
    # the book builds), then what reads the book, last what needs the second build (started after
    # the first), so that no worker sits waiting for a build while other work is left.
    items.sort(key=lambda item: 2 if _uses(item, "second_build") else 1 if _uses(item, "book_build") else 0)


_MODULE_FIXTURE = re.compile(r"""@pytest\.fixture\(scope\s*=\s*["']module["']""")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Spread single tests over the workers, except that a module with a module-scoped fixture goes
    to one worker whole. (xdist's own --dist loadgroup cannot do this under pytest 9.2: it marks a
    group by renaming the test's node id, which pytest no longer reads.)"""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    together = {path.relative_to(config.rootpath).as_posix() for path in Path(__file__).parent.glob("test_*.py")
                if _MODULE_FIXTURE.search(path.read_text(encoding="utf-8"))}

    class ModulesWithFixturesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in together else nodeid

    config.option.loadscopereorder = False  # keep the order collection chose
    return ModulesWithFixturesTogether(config, log)
