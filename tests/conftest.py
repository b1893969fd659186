"""Shared fixtures: a clean build of the book, a local server for it, and a real Chromium.

The build fixture builds the book from scratch into a temporary folder (fresh
jupyter-cache, every chapter executed) with the same strict flags as ``make book``.
Set ``PERWATT_SITE`` to an existing ``_build/html`` to reuse it while iterating locally;
CI never sets it.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD_FLAGS = ["--warningiserror", "--nitpick", "--keep-going"]


@dataclass(frozen=True)
class Build:
    html: Path
    log: str
    returncode: int


@pytest.fixture(scope="session")
def book_build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    reuse = os.environ.get("PERWATT_SITE")
    if reuse:
        return Build(Path(reuse).resolve(), "", 0)
    out = tmp_path_factory.mktemp("book")
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    env = {k: v for k, v in os.environ.items() if k != "PERWATT_RENDER"}
    proc = subprocess.run(
        [str(jupyter_book), "build", str(REPO), "--path-output", str(out), *BUILD_FLAGS],
        capture_output=True, text=True, env=env, timeout=1200,
    )
    return Build(out / "_build" / "html", proc.stdout + proc.stderr, proc.returncode)


@pytest.fixture(scope="session")
def site(book_build: Build) -> Path:
    """The built site's folder; fails (does not skip) if the build failed."""
    if book_build.returncode != 0:
        pytest.fail("the book did not build:\n" + book_build.log[-6000:])
    return book_build.html


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # A page closed mid-download (the browser moving on) is not a failure of the site.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@pytest.fixture(scope="session")
def site_url(site: Path):
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: As root and without a network, Chromium needs these to start cleanly and stay quiet.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
NO_BROWSER = (
    "No Chromium found for the browser tests. Install one: on Debian or Ubuntu "
    "`sudo apt-get install chromium`; elsewhere `.venv/bin/python -m playwright install chromium` "
    "(needs internet); or point PERWATT_CHROMIUM at a Chromium or Chrome binary."
)


def find_chromium() -> str | None:
    """A system Chromium, or None to let Playwright use its own download."""
    explicit = os.environ.get("PERWATT_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        except Error as err:
            pytest.fail(f"{NO_BROWSER}\n(Playwright said: {str(err).splitlines()[0]})")
        yield launched
        launched.close()
