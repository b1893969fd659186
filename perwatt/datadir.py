"""Where the book's data lives: its own ``data/`` folder, unless ``PERWATT_DATA`` names another.

Apart from :mod:`perwatt.data` so that the build's extension can find the data, and fingerprint it,
without importing pandas (a third of a second of every build).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

#: Where the data lives unless ``PERWATT_DATA`` points elsewhere.
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "data"

#: The environment variable that points the package at another data folder.
ENVIRONMENT_VARIABLE = "PERWATT_DATA"


def data_dir() -> Path:
    """The folder holding ``datapackage.json`` and the CSV files."""
    return Path(os.environ.get(ENVIRONMENT_VARIABLE, DEFAULT_DATA_DIR))


def resolved() -> str:
    """:func:`data_dir`, resolved, as caches key on it. Remembered per value of ``PERWATT_DATA`` (and
    per working folder, where that value is relative, or empty: the working folder itself): resolving
    the path each time took 25 µs of each of the thousands of cached calls a chapter makes."""
    raw = os.environ.get(ENVIRONMENT_VARIABLE)
    return _resolve(raw, os.getcwd() if raw is not None and not os.path.isabs(raw) else "")


@functools.lru_cache(maxsize=32)
def _resolve(raw: str | None, cwd: str) -> str:
    return str((DEFAULT_DATA_DIR if raw is None else Path(cwd, raw)).resolve())
