"""The book's interactive figures, one module per chapter over a shared kit.

Each figure is one function decorated with :func:`perwatt.figures.kit.figure` in its chapter's
module. Importing this package imports the chapter modules, which registers every figure, and
makes each one callable by name here (``figures.power_basis().show()``), with no list to keep.
Tests and benchmarks iterate :func:`all_figures`.
"""

from __future__ import annotations

# Imported in chapter order: the registry lists figures in the order the chapters show them.
from perwatt.figures import per_watt, benchmark_tables, prefill_decode  # noqa: F401  # isort: skip
from perwatt.figures import speculative_decoding, agent_workloads, fleet_choices  # noqa: F401  # isort: skip
from perwatt.figures import disaggregated, kernel_gains  # noqa: F401  # isort: skip
from perwatt.figures import token_cost  # noqa: F401  # isort: skip
from perwatt.figures.agent_workloads import AGENT_MODEL, serving_load_frame  # noqa: F401
from perwatt.figures.agent_workloads import waiting_agents_frame  # noqa: F401
from perwatt.figures.kit import REGISTRY
from perwatt.figures.token_cost import proxy_table as cost_proxy_table  # noqa: F401
from perwatt.figures.fleet_choices import sensitivity_table as fleet_sensitivity_table  # noqa: F401
# Recomputed in the page from shipped terms (perwatt.computed), so not among all_figures' grids.
from perwatt.figures.cross_chip import per_watt_frontier  # noqa: F401
from perwatt.figures.speculative_decoding import SPEC_ACCELERATOR, SPEC_MODEL  # noqa: F401
from perwatt.interactive import InteractiveFigure

globals().update({factory.__name__: factory for factory in REGISTRY})


def all_figures() -> list[InteractiveFigure]:
    """Every grid-precomputed interactive figure in the book, in chapter order, for tests and
    benchmarks (:func:`computed_figures` lists the others)."""
    return [factory() for factory in REGISTRY]


def by_name(name: str) -> InteractiveFigure:
    """The interactive figure called ``name`` (its ``data-figure`` in the site)."""
    for figure in all_figures():
        if figure.name == name:
            return figure
    raise ValueError(f"no figure named {name!r}; figures: {[f.name for f in all_figures()]}")


def computed_figures() -> list:
    """The figures the page recomputes from shipped terms (:class:`perwatt.computed.ComputedFigure`)."""
    return [per_watt_frontier()]
