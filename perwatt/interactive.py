"""Interactive figures that recompute in both worlds from one model function.

An :class:`InteractiveFigure` pairs a model function (a setting of its controls in, a
tidy DataFrame out) with a drawing function (a filtered Altair chart and the whole grid
in, a chart out; the grid lets a drawing fix its scales so they hold still while the
controls move).

* :meth:`InteractiveFigure.chart` is the **static-site** view: the model is evaluated
  once per point of the controls' grid, and the chart carries those rows; Altair
  parameters bound to sliders, radios and dropdowns filter them in the browser. What a
  reader sees at any control setting is therefore exactly what the Python model
  computed for it, with no formula written again in JavaScript.
* :meth:`InteractiveFigure.panel` is the **live-kernel** view: an ipywidgets panel whose
  controls call the model in Python and redraw the same chart in place. In the static
  build it is replaced by a one-line note, so the site never shows a dead control.
* :meth:`InteractiveFigure.show` picks one: the static chart while the book is built, the live
  panel in a kernel. A chapter has one cell per figure.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import altair as alt
import ipywidgets as widgets
import numpy as np
import pandas as pd

from perwatt import datadir, render, store

WidgetKind = Literal["slider", "radio", "select"]
#: Significant digits of the numbers a static chart ships (see :func:`csv_data`).
SIGNIFICANT_DIGITS = 10
#: Relative agreement between the browser's numbers and the model's that this guarantees.
SHIPPED_RTOL = 10.0 ** (1 - SIGNIFICANT_DIGITS)


#: Slider geometry in a panel, in em: the track's least width, the readout's, and a label's per
#: character (generous, so a label never eats into the track).
SLIDER_TRACK_EM = 16.0
SLIDER_MIN_TRACK_EM = 12.0
READOUT_EM = 5.0
LABEL_EM_PER_CHAR = 0.55

#: A slider's track keeps its width in any row: when the panel is too narrow for label, track and
#: readout on one line, the track wraps below its label instead of shrinking to nothing, and the
#: slider grows to hold both lines (a widget row's fixed height would lay the track over the next one).
PANEL_STYLE = ("<style>.perwatt-panel .widget-hslider .slider-container"
               f" {{ min-width: {SLIDER_MIN_TRACK_EM:g}em; flex: 1 1 auto; }}"
               " .perwatt-panel .widget-hslider { height: auto; min-height: var(--jp-widgets-inline-height); }"
               # In the stylesheet, not the Layout: ipywidgets' Layout has no `gap` (only grid_gap, for grids).
               " .perwatt-panel .perwatt-controls { gap: 0.5em 1.5em; }</style>")
#: As wide as the panel at most, its margins included.
FULL_WIDTH = "calc(100% - 2 * var(--jp-widgets-margin))"


@dataclass(frozen=True)
class Control:
    """One input of a figure: its name (the model's keyword argument), label and grid.

    ``options`` is the grid the static site precomputes; a slider's options must be
    evenly spaced so a range input can step through them exactly. ``default`` is the one place
    the figure's starting value is set: the figure's model function takes every control's value
    as an argument, with no default of its own.
    """

    name: str
    label: str
    options: tuple[Any, ...]
    default: Any
    widget: WidgetKind = "slider"
    option_labels: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.default not in self.options:
            raise ValueError(f"control {self.name!r}: default {self.default!r} is not among its options")
        if self.option_labels is not None and len(self.option_labels) != len(self.options):
            raise ValueError(f"control {self.name!r}: option_labels must match options one to one")
        if self.widget == "slider":
            steps = np.diff(np.asarray(self.options, dtype=float))
            if len(steps) == 0 or not np.allclose(steps, steps[0], rtol=1e-9, atol=1e-12) or steps[0] <= 0:
                raise ValueError(f"control {self.name!r}: slider options must rise in equal steps")

    @classmethod
    def slider(cls, name: str, label: str, start: float, stop: float, step: float,
               default: float, decimals: int = 6) -> "Control":
        """A slider from ``start`` to ``stop`` inclusive, in steps of ``step``."""
        count = int(round((stop - start) / step)) + 1
        options = tuple(float(round(start + i * step, decimals)) for i in range(count))
        return cls(name, label, options, float(round(default, decimals)), "slider")

    @property
    def step(self) -> float:
        # Rounded so that 1.1 - 1.0 is the 0.1 a range input needs to reach its maximum exactly.
        return round(float(self.options[1]) - float(self.options[0]), 12)

    def label_for(self, value: Any) -> str:
        if self.option_labels is None:
            return str(value)
        return self.option_labels[self.options.index(value)]

    def binding(self) -> alt.Binding:
        """The Vega-Lite input element for this control."""
        if self.widget == "slider":
            return alt.binding_range(
                min=self.options[0], max=self.options[-1], step=self.step, name=self.label + " "
            )
        make = alt.binding_radio if self.widget == "radio" else alt.binding_select
        labels = {"labels": list(self.option_labels)} if self.option_labels else {}
        return make(options=list(self.options), name=self.label + " ", **labels)

    def param(self) -> alt.Parameter:
        return alt.param(name=self.name, value=self.default, bind=self.binding())

    def filter_expression(self) -> str:
        """Vega expression keeping the grid rows that match the control's current value."""
        if self.widget == "slider":
            # Range inputs return decimal strings parsed to the nearest double; compare with slack.
            return f"abs(datum['{self.name}'] - {self.name}) < {self.step / 1000:g}"
        return f"datum['{self.name}'] == {self.name}"

    def ipywidget(self) -> widgets.Widget:
        style = {"description_width": "initial"}
        layout = widgets.Layout(width="auto")
        if self.widget == "slider":
            decimals = max(0, -int(np.floor(np.log10(self.step)))) if self.step < 1 else 0
            # A flex row shrinks its items: a slider beside other controls lost its track entirely.
            # So it keeps its own width, label plus a track of at least SLIDER_TRACK_EM, and wraps
            # to the next row instead, never wider than the panel.
            width = f"{len(self.label) * LABEL_EM_PER_CHAR + SLIDER_TRACK_EM + READOUT_EM:.1f}em"
            return widgets.FloatSlider(
                value=self.default, min=self.options[0], max=self.options[-1], step=self.step,
                description=self.label, readout_format=f".{decimals}f", style=style,
                continuous_update=True, layout=widgets.Layout(width=width, max_width=FULL_WIDTH, flex="0 0 auto", flex_flow="row wrap"),
            )
        choices = [(self.label_for(v), v) for v in self.options]
        if self.widget == "radio":
            return widgets.RadioButtons(options=choices, value=self.default,
                                        description=self.label, style=style, layout=layout)
        return widgets.Dropdown(options=choices, value=self.default,
                                description=self.label, style=style, layout=layout)


@dataclass(frozen=True)
class InteractiveFigure:
    """A figure whose data comes from ``compute(**setting)`` and whose look from ``draw``.

    ``name`` (its id in the site) and ``description`` (what a screen reader says of it) are set
    by :func:`perwatt.figures.kit.figure` from the function that makes the figure.

    ``keys`` identify a row of the model's output and ``values`` are the numbers the chart
    shows; tests compare exactly these between the model, the browser and the panel. The static
    chart ships those columns, the controls' columns and the ``ships`` columns its drawing reads
    besides. ``frontier`` names the two columns (higher is better on both) of a figure drawn as a
    frontier or trade-off curve; tests check that no point it shows is beaten on both.
    """

    controls: tuple[Control, ...]
    compute: Callable[..., pd.DataFrame]
    draw: Callable[[alt.Chart, pd.DataFrame], alt.TopLevelMixin]
    keys: tuple[str, ...]
    values: tuple[str, ...]
    ships: tuple[str, ...] = ()
    frontier: tuple[str, str] | None = None
    name: str = ""
    description: str = ""

    def control(self, name: str) -> Control:
        for c in self.controls:
            if c.name == name:
                return c
        raise KeyError(f"figure {self.name!r} has no control {name!r}")

    def defaults(self) -> dict[str, Any]:
        return {c.name: c.default for c in self.controls}

    def frame(self, **setting: Any) -> pd.DataFrame:
        """The model's rows at one setting (defaults for controls not given)."""
        unknown = set(setting) - {c.name for c in self.controls}
        if unknown:
            raise ValueError(f"figure {self.name!r} has no control(s) {sorted(unknown)}")
        full = {**self.defaults(), **setting}
        return self._computed(full).assign(**full)

    def _computed(self, full: dict[str, Any]) -> pd.DataFrame:
        """The model's rows at a full setting, checked, without the controls' columns."""
        out = self.compute(**full)
        # A column named like a control must hold that control's value, or the filter would mislead.
        clashes = [name for name, value in full.items() if name in out.columns and not (out[name] == value).all()]
        if clashes:
            raise ValueError(f"figure {self.name!r}: model output column(s) {clashes} clash with controls")
        missing = [c for c in (*self.keys, *self.values) if c not in out]
        if missing:
            raise ValueError(f"figure {self.name!r}: model output lacks column(s) {missing}")
        return out

    def settings(self) -> Iterator[dict[str, Any]]:
        """Every point of the controls' grid."""
        names = [c.name for c in self.controls]
        for combo in itertools.product(*(c.options for c in self.controls)):
            yield dict(zip(names, combo))

    @cached_property
    def grid(self) -> pd.DataFrame:
        """The model evaluated at every grid point, one block of rows per setting (kept in the
        store, :mod:`perwatt.store`, when it is on and the model is a function of the package)."""
        def evaluate() -> pd.DataFrame:
            settings = list(self.settings())
            blocks = [self._computed(s) for s in settings]
            # The controls' columns added once to the whole grid, as frame() adds them to each block
            # (a column at a time per block was a fifth of a chapter's figure time).
            sizes = [len(b) for b in blocks]
            grid = pd.concat(blocks, ignore_index=True)
            return grid.assign(**{c.name: _repeated([s[c.name] for s in settings], sizes) for c in self.controls})

        module, name = getattr(self.compute, "__module__", None) or "", getattr(self.compute, "__qualname__", "<")
        if not module.startswith("perwatt.") or "<" in name:  # a reader's own or a closure: its code is not fingerprinted
            return evaluate()
        asked = (self.name, [(c.name, tuple(c.options)) for c in self.controls])
        return store.remembered(evaluate, datadir.resolved(), f"{module}.{name} (grid)", asked)

    def _usermeta(self, with_table: bool) -> dict:
        meta = {"figure": self.name, "keys": list(self.keys), "values": list(self.values),
                "controls": [c.name for c in self.controls]}
        if with_table:
            # The default setting's rows travel with the static chart, as the table a reader
            # without the chart (a screen reader, a printout) gets instead.
            meta["table"] = render.table_meta(self.frame()[[*self.keys, *self.values]])
        return {"perwatt": meta}

    def _finish(self, chart: alt.TopLevelMixin, with_table: bool = False) -> alt.TopLevelMixin:
        return chart.properties(description=self.description, usermeta=self._usermeta(with_table))

    @property
    def shipped_columns(self) -> list[str]:
        """The columns the static chart carries, in a fixed order."""
        return list(dict.fromkeys([c.name for c in self.controls] + [*self.keys, *self.values, *self.ships]))

    def chart(self) -> alt.TopLevelMixin:
        """The static-site figure: the whole grid, filtered in the browser by bound controls."""
        condition = " && ".join(c.filter_expression() for c in self.controls)
        params = [c.param() for c in self.controls]
        base = alt.Chart(csv_data(self.grid[self.shipped_columns])).transform_filter(condition)
        return self._finish(self.draw(base, self.grid).add_params(*params), with_table=True)

    def chart_at(self, **setting: Any) -> alt.TopLevelMixin:
        """The same figure at one setting, without controls (what a live panel shows)."""
        # The rows go on the drawn chart, not on each layer: when layers share a DataFrame, Altair
        # 6.3 hashes its printed form to name the views it lifts the data from, 4-10 ms per update
        # of a live panel. The layers read the chart's rows either way (a layer with rows of its
        # own, such as a reference line, keeps them).
        chart = self.draw(alt.Chart(), self.grid)
        chart.data = self.frame(**setting)
        return self._finish(chart)

    def panel(self):
        """A live ipywidgets panel in a kernel; a one-line note in the static build."""
        if render.is_static():
            return LiveOnlyNote(self.name)
        return FigurePanel(self)

    def show(self):
        """What a chapter's figure cell displays: the static chart while the book is built (its
        controls recompute it in the browser), the live panel in a kernel (they recompute it
        through Python). Never both, and never a control that does nothing."""
        return render.BuiltChart(self.chart()) if render.is_static() else FigurePanel(self)


def _repeated(values: list, sizes: list[int]) -> pd.Series:
    """Each value repeated as many times as its block has rows, typed as one value assigned alone is."""
    typed = pd.Series(values)
    return pd.Series(np.repeat(typed.to_numpy(), sizes), dtype=typed.dtype)


def csv_data(frame: pd.DataFrame) -> alt.InlineData:
    """Inline chart data as CSV text with explicit column types.

    CSV is about a third the size of JSON records for these grids. Numbers are written to
    ``SIGNIFICANT_DIGITS`` significant digits, far beyond what any label or axis shows, so
    the browser holds the model's values to within one part in 10^9 at a fraction of the
    bytes of full round-trip precision. Text is quoted where it needs to be, as Vega's CSV
    reader expects, and booleans travel as ``true``/``false``.
    """
    parse = {}
    shipped = frame.copy()
    for column in frame.columns:
        if pd.api.types.is_bool_dtype(frame[column]):
            parse[column] = "boolean"
            shipped[column] = frame[column].map({True: "true", False: "false"})
        elif pd.api.types.is_numeric_dtype(frame[column]):
            parse[column] = "number"
        else:
            parse[column] = "string"
    text = shipped.to_csv(index=False, lineterminator="\n", quoting=csv.QUOTE_MINIMAL,
                          float_format=f"%.{SIGNIFICANT_DIGITS}g")
    return alt.InlineData(values=text, format=alt.DataFormat(type="csv", parse=parse))


class LiveOnlyNote:
    """What a panel cell shows in the static site instead of controls that would do nothing."""

    def __init__(self, figure_name: str) -> None:
        self.figure_name = figure_name

    def _repr_html_(self) -> str:
        return (
            '<p class="perwatt-live-note">Run this cell in Jupyter to get a panel that '
            "recomputes the figure above through Python. On this page the figure's own "
            "controls already recompute it in your browser.</p>"
        )


class FigurePanel(widgets.VBox):
    """Controls plus the figure; moving a control recomputes through Python and redraws in place."""

    def __init__(self, figure: InteractiveFigure) -> None:
        render.configure()
        self.figure = figure
        self.controls = {c.name: c.ipywidget() for c in figure.controls}
        self.view = alt.JupyterChart(figure.chart_at(**self.setting))
        for widget in self.controls.values():
            widget.observe(self._redraw, names="value")
        box = widgets.Box([widgets.HTML(PANEL_STYLE), *self.controls.values()],
                          layout=widgets.Layout(flex_flow="row wrap"))
        box.add_class("perwatt-controls")
        super().__init__([box, self.view])
        self.add_class("perwatt-panel")

    @property
    def setting(self) -> dict[str, Any]:
        return {name: widget.value for name, widget in self.controls.items()}

    def _redraw(self, _change: dict) -> None:
        # Send the new spec to the same view; the front end redraws it in place. Schema
        # validation (three quarters of an update's time) is skipped here: the panel's first
        # chart was validated, and the tests validate the figure at every setting they try.
        self.view.spec = self.figure.chart_at(**self.setting).to_dict(validate=False)
