"""Per Watt: the model behind the book.

* :mod:`perwatt.metrics`: per-watt formulas (tokens/s/kW, J/token, kWh and cost per million tokens).
* :mod:`perwatt.data`: validated loaders for ``data/``.
* :mod:`perwatt.comparisons`: the articles' figures joined with the model.
* :mod:`perwatt.figures`: interactive figures; :mod:`perwatt.interactive` their machinery.
* :mod:`perwatt.render`: chart rendering for the static site and live kernels.
* :mod:`perwatt.sphinxext`: the Sphinx extension that keeps the built site offline.
"""

from perwatt.render import glue, setup

__all__ = ["glue", "setup"]
__version__ = "0.1.0"
