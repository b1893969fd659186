"""Per Watt: the model behind the book.

Layers, each importing only those below it (import-linter checks this; see pyproject.toml):

* views: :mod:`perwatt.figures` (one module per chapter), :mod:`perwatt.tables`,
  :mod:`perwatt.exercises`, over :mod:`perwatt.interactive` and :mod:`perwatt.render`;
* the chapters' models: :mod:`perwatt.accounting` (per-watt), :mod:`perwatt.benchmark` (the
  table audit), :mod:`perwatt.roofline` and :mod:`perwatt.serving` (prefill and decode),
  :mod:`perwatt.speculative`, :mod:`perwatt.agents` and :mod:`perwatt.load`, :mod:`perwatt.fleet`;
* the shared layers: :mod:`perwatt.catalog` (named things and scenario defaults),
  :mod:`perwatt.metrics` (per-watt formulas) and :mod:`perwatt.data` (validated loaders).

Tools: :mod:`perwatt.workshop` (``python -m perwatt``), :mod:`perwatt.doctor` (its setup check,
standard library only until a check needs more), :mod:`perwatt.sphinxext` (the build),
:mod:`perwatt.devtools` (shared by tests and benchmark scripts).

Importing the package imports nothing heavy: ``perwatt.setup`` and ``perwatt.glue`` load the
rendering layer (Altair) on first use, so the setup check can run where Altair is missing.
"""

import sys as _sys

__all__ = ["glue", "setup"]
__version__ = "0.1.0"

# Altair checks charts with jsonschema, which, when rfc3987-syntax is installed (JupyterLab's
# jupyter-events brings it), compiles that package's 38 grammars as it is imported: 1.5 s or more
# of every kernel's and every test process's start. They check only the "iri" formats, which
# neither Vega-Lite's schema nor this package uses (its URIs are checked by rfc3986-validator);
# without them jsonschema leaves those two formats unchecked. Where it is already loaded, nothing
# changes.
_sys.modules.setdefault("rfc3987_syntax", None)


def __getattr__(name: str):
    if name in __all__:
        from perwatt import render

        return getattr(render, name)
    raise AttributeError(f"module 'perwatt' has no attribute {name!r}")
