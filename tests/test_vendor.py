"""The repository's copy of the Vega bundle (perwatt/vendor/) is what the installed versions make."""

from __future__ import annotations

from pathlib import Path

import pytest

from perwatt import vegabundle

pytestmark = pytest.mark.slow  # vl-convert takes 1-2 s of CPU to make the bundle


def test_the_vendored_bundle_is_the_one_the_installed_versions_make(tmp_path: Path) -> None:
    vendored = vegabundle.vendored()
    assert vendored is not None, (f"{vegabundle.VENDOR_RECORD} names other versions than the installed "
                                  f"({vegabundle.source()}): run scripts/vendor_vega.py")
    made = tmp_path / vendored.name
    vegabundle.make(made)
    assert made.read_bytes() == vendored.read_bytes(), "the vendored bundle differs: run scripts/vendor_vega.py"
    assert vendored.name == vegabundle.name()


def test_a_build_with_other_versions_makes_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vegabundle, "source", lambda: "vl-convert-python 0.0, altair 0.0, classic script")
    assert vegabundle.vendored() is None
    made = vegabundle.written(tmp_path / "static")
    assert made.parent == tmp_path / "static" and made.stat().st_size > 500_000
    assert made.read_text(encoding="utf-8").startswith('(function () {\n"use strict";\n')
    again = vegabundle.written(tmp_path / "static")  # reused, not made again
    assert again == made and again.stat().st_mtime_ns == made.stat().st_mtime_ns
