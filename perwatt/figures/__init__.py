"""The book's interactive figures, one module per chapter over a shared kit.

Each figure is one function decorated with :func:`perwatt.figures.kit.figure` in its chapter's
module; importing this package registers them all. Chapters call the functions by name
(``figures.power_basis().show()``); tests and benchmarks iterate :func:`all_figures`.
"""

from __future__ import annotations

# Imported in chapter order: the registry lists figures in the order they are defined.
from perwatt.figures.per_watt import energy_cost, power_basis  # isort: skip
from perwatt.figures.benchmark_tables import latency_audit, users_per_chip  # isort: skip
from perwatt.figures.prefill_decode import frontier, implied_bandwidth, roofline  # isort: skip
from perwatt.figures.speculative_decoding import (SPEC_ACCELERATOR, SPEC_MODEL, speculation_batch,  # isort: skip
                                                  speedup_surface)
from perwatt.figures.agent_workloads import AGENT_MODEL, agent_task, serving_load, serving_load_frame  # isort: skip
from perwatt.figures.fleet import fleet  # isort: skip
from perwatt.figures.kit import REGISTRY  # isort: skip
from perwatt.interactive import InteractiveFigure

__all__ = ["AGENT_MODEL", "SPEC_ACCELERATOR", "SPEC_MODEL", "agent_task", "all_figures", "by_name", "energy_cost",
           "fleet", "frontier", "implied_bandwidth", "latency_audit", "power_basis", "roofline",
           "serving_load", "serving_load_frame", "speculation_batch", "speedup_surface", "users_per_chip"]


def all_figures() -> list[InteractiveFigure]:
    """Every interactive figure in the book, in chapter order, for tests and benchmarks."""
    return [factory() for factory in REGISTRY]


def by_name(name: str) -> InteractiveFigure:
    """The interactive figure called ``name`` (its ``data-figure`` in the site)."""
    for figure in all_figures():
        if figure.name == name:
            return figure
    raise ValueError(f"no figure named {name!r}; figures: {[f.name for f in all_figures()]}")
