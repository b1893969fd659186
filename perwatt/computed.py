"""Figures the page recomputes from shipped terms, not from a precomputed grid.

:class:`perwatt.interactive.InteractiveFigure` ships the model's output at every point of its
controls' grid; that grid multiplies with each control. A :class:`ComputedFigure` ships the
model's inputs instead (terms that do not depend on the controls) and a
:class:`perwatt.expression.Formula` that turns them into the figure's numbers, so the page
recomputes the figure itself with the model's own arithmetic.

Both kinds share the same controls and the same live panel: in a kernel, :meth:`ComputedFigure.panel`
recomputes through Python (``live``) and redraws in place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

from perwatt import render
from perwatt.interactive import Control, FigurePanel, LiveOnlyNote


@dataclass(frozen=True)
class ComputedFigure:
    """``static()`` is the page's chart, controls bound; ``live(**setting)`` the same chart drawn
    from Python's numbers at one setting (a panel redraws it); ``marks`` names the marks whose data
    the tests compare between the two; ``download`` says which mark's rows, and which of their
    columns, the page's data download gives (by default, the data the chart was given)."""

    controls: tuple[Control, ...]
    static: Callable[[], alt.TopLevelMixin]
    live: Callable[..., alt.TopLevelMixin]
    marks: tuple[str, ...]
    table: Callable[[], pd.DataFrame] | None = None
    #: The mark whose rows the page's "Download data (CSV)" gives, and their columns.
    download: tuple[str, tuple[str, ...]] | None = None
    name: str = ""
    description: str = ""

    def defaults(self) -> dict[str, Any]:
        return {c.name: c.default for c in self.controls}

    def control(self, name: str) -> Control:
        for c in self.controls:
            if c.name == name:
                return c
        raise KeyError(f"figure {self.name!r} has no control {name!r}")

    def _finish(self, chart: alt.TopLevelMixin, with_table: bool = False) -> alt.TopLevelMixin:
        meta = {"figure": self.name, "controls": [c.name for c in self.controls], "marks": list(self.marks),
                "computed": True}
        if self.download is not None:
            meta["csv"] = {"mark": self.download[0], "columns": list(self.download[1])}
        if with_table and self.table is not None:
            # The default setting's numbers, as the table a reader without the chart gets instead.
            meta["table"] = render.table_meta(self.table())
        meta = {"perwatt": meta}
        return chart.properties(description=self.description, usermeta=meta)

    def chart(self) -> alt.TopLevelMixin:
        return self._finish(self.static().add_params(*(c.param() for c in self.controls)), with_table=True)

    def chart_at(self, **setting: Any) -> alt.TopLevelMixin:
        unknown = set(setting) - {c.name for c in self.controls}
        if unknown:
            raise ValueError(f"figure {self.name!r} has no control(s) {sorted(unknown)}")
        return self._finish(self.live(**{**self.defaults(), **setting}))

    def panel(self):
        if render.is_static():
            return LiveOnlyNote(self.name)
        return FigurePanel(self)

    def show(self):
        """The static chart while the book is built, the live panel in a kernel."""
        return render.BuiltChart(self.chart()) if render.is_static() else FigurePanel(self)
