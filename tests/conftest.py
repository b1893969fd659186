"""Shared fixtures: a clean build of the book, a local server for it, and a real Chromium.

The build fixture builds the book from scratch into a temporary folder (fresh
jupyter-cache, every chapter executed) with the same strict flags as ``make book``
(:data:`perwatt.devtools.BUILD_FLAGS`). Set ``PERWATT_SITE`` to an existing ``_build/html``
to reuse it while iterating locally; CI never sets it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from perwatt import devtools


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
    proc = devtools.build(out)
    return Build(out / "_build" / "html", proc.stdout + proc.stderr, proc.returncode)


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


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import Error, sync_playwright

    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(executable_path=devtools.find_chromium(),
                                                  args=devtools.CHROMIUM_ARGS)
        except Error as err:
            pytest.fail(f"{devtools.NO_BROWSER}\n(Playwright said: {str(err).splitlines()[0]})")
        yield launched
        launched.close()
