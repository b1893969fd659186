"""Vega, Vega-Lite and vega-embed as the one classic script every page with a chart loads.

vl-convert makes the bundle at the Vega-Lite version the installed Altair targets. The repository
keeps a copy (``perwatt/vendor/``, written by ``scripts/vendor_vega.py``), which a build uses when the
installed versions are the ones that made it; a build with other versions makes its own and keeps
it beside its doctrees (:func:`written`).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path


def name() -> str:
    """The bundle's file name, after the Vega-Lite version Altair targets."""
    import altair as alt

    return f"perwatt-vega-{alt.SCHEMA_VERSION.lstrip('v')}.js"


def source() -> str:
    """What the bundle is made from, by installed versions: read without importing Altair or
    vl-convert, which together take a second or more of every build to import."""
    return (f"vl-convert-python {metadata.version('vl-convert-python')}, altair {metadata.version('altair')}, "
            "classic script")


def make(target: Path) -> None:
    """Write the bundle to ``target`` (1.3-1.5 s, 1.6-1.9 s of CPU, on a 2-core machine)."""
    import vl_convert
    from altair.utils._importers import vl_version_for_vl_convert

    bundle = vl_convert.javascript_bundle(vl_version=vl_version_for_vl_convert())
    # vl-convert ships an ES module, and Chromium refuses module scripts on pages opened from disk
    # (origin "null"). The bundle imports and exports nothing, so inside a function it runs as a
    # classic script; the function keeps its top-level names out of the page's global scope, and
    # "use strict" keeps the strict semantics a module has.
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f'(function () {{\n"use strict";\n{bundle}\n}})();\n', encoding="utf-8")


def _recorded(record: Path, folder: Path) -> Path | None:
    """The bundle a record names (what it was made from, then its file name), if it was made from
    the installed versions and is there."""
    try:
        made_from, _, file_name = record.read_text(encoding="utf-8").partition("\n")
    except FileNotFoundError:
        return None
    path = folder / file_name.strip()
    return path if made_from == source() and path.is_file() else None


#: The bundle kept in the repository (``scripts/vendor_vega.py`` writes it), with its record.
VENDOR_DIR = Path(__file__).parent / "vendor"
VENDOR_RECORD = VENDOR_DIR / "perwatt-vega.source"


def vendored() -> Path | None:
    """The repository's copy of the bundle, if it was made from the installed versions (else None,
    and the build makes its own: :func:`written`)."""
    return _recorded(VENDOR_RECORD, VENDOR_DIR)


def _made(folder: Path, record: Path) -> Path:
    """Make the bundle in ``folder`` and write ``record`` for it, as :func:`_recorded` reads it."""
    target = folder / name()
    make(target)
    record.write_text(f"{source()}\n{target.name}\n", encoding="utf-8")
    return target


def vendor() -> Path:
    """Make the repository's copy of the bundle from the installed versions, and its record."""
    for old in VENDOR_DIR.glob("perwatt-vega-*.js"):
        old.unlink()
    return _made(VENDOR_DIR, VENDOR_RECORD)


def written(directory: Path) -> Path:
    """Write the Vega bundle into ``directory``, unless the one there was made from the same
    versions. Returns its path."""
    # The record sits beside the folder, not in it: the folder is copied into the site as it is.
    record = directory.with_name(f"{directory.name}-vega.source")
    return _recorded(record, directory) or _made(directory, record)
