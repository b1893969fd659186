"""What every chapter's figures share: the registry, the palette, shared layers and controls.

A figure is one function decorated with :func:`figure` in its chapter's module. The decorator
caches it and records it, so :func:`perwatt.figures.all_figures` knows every figure without a
hand-kept list.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable

import altair as alt
import pandas as pd

from perwatt import catalog, data, roofline
from perwatt.interactive import Control, InteractiveFigure

#: Every registered figure factory, in the order the chapter modules define them.
REGISTRY: list[Callable[[], InteractiveFigure]] = []


def figure(factory: Callable[[], InteractiveFigure]) -> Callable[[], InteractiveFigure]:
    """Register a figure factory, built once per data folder. The figure is named after the
    function (``power_basis`` → ``power-basis``), and its docstring is its description, the
    text a screen reader gives for the chart."""
    @functools.wraps(factory)
    def named() -> InteractiveFigure:
        made = factory()
        return dataclasses.replace(made, name=factory.__name__.replace("_", "-"),
                                   description=made.description or " ".join(inspect.getdoc(factory).split()))

    cached = data.cached(named)
    REGISTRY.append(cached)
    return cached


# --- Palette: one colour per thing, the same in every chart ----------------------------------

SYSTEM_COLOURS = {"Jalapeño": "#c2410c", "GB200": "#15803d", "GB300": "#1d4ed8"}
CHIP_COLOURS = {"jalapeno": "#c2410c", "b200": "#0e7490", "gb200": "#15803d", "h200": "#7c3aed", "h100": "#64748b"}
PHASE_COLOURS = {"prefill": "#7c3aed", "decode": "#0f766e", "tools": "#94a3b8"}
VERDICT_COLOURS = {"possible": "#2563eb", "impossible: TTFT shorter than one step": "#dc2626"}
STATISTIC_COLOURS = {"p50_s": "#2563eb", "p99_s": "#dc2626"}
SPECULATION_COLOUR = "#7c3aed"
ROOF_COLOUR = "#334155"


def colour(field: str, title: str, palette: dict[str, str], **legend) -> alt.Color:
    """A nominal colour encoding over a fixed palette (so colours never shift with the data)."""
    extra = {"legend": alt.Legend(**legend)} if legend else {}
    return alt.Color(f"{field}:N", title=title, scale=alt.Scale(domain=list(palette), range=list(palette.values())),
                     **extra)


def system_colour(field: str = "system_label", title: str = "System") -> alt.Color:
    return colour(field, title, SYSTEM_COLOURS)


def model_order() -> list[str]:
    """The articles' models in the order of the table."""
    return list(catalog.results()["model_label"].drop_duplicates())


# --- Shared layers -----------------------------------------------------------------------------

def points_with_labels(base: alt.Chart, x: alt.X, y: alt.Y, text: alt.Text, tooltip: list,
                       offset: alt.YOffset | None = None) -> list[alt.Chart]:
    """A dot per row, coloured by system, with its value written beside it."""
    extra = {"yOffset": offset} if offset is not None else {}
    points = base.mark_point(filled=True, size=140).encode(x=x, y=y, color=system_colour(), tooltip=tooltip, **extra)
    labels = base.mark_text(align="left", dx=9, fontSize=12).encode(x=x, y=y, text=text, **extra)
    return [points, labels]


def reference_line(value: float, scale: alt.Scale, channel: str = "x") -> alt.Chart:
    """A dashed line at ``value`` (parity, one user per chip, no gain), vertical or horizontal."""
    encoding = alt.X("reference:Q", scale=scale) if channel == "x" else alt.Y("reference:Q", scale=scale)
    return alt.Chart(pd.DataFrame({"reference": [value]})).mark_rule().encode(**{channel: encoding})


def log_scale(values: pd.Series, pad: float) -> alt.Scale:
    """A fixed log axis over every value the controls can reach, padded by a factor either side,
    so the marks move while the axis holds still."""
    return alt.Scale(type="log", domain=[float(values.min()) / pad, float(values.max()) * pad], nice=False)


# --- Controls several chapters use --------------------------------------------------------------

def model_control() -> Control:
    # The articles' three models; the others in model_specs.csv are there to validate against.
    table = catalog.results()[["model", "model_label"]].drop_duplicates()
    return Control("model", "Model:", tuple(table["model"]), table["model"].iloc[0], "select",
                   tuple(table["model_label"]))


def accelerator_control(default: str = "gb200", names: tuple[str, ...] | None = None) -> Control:
    names = tuple(roofline.known_chips()) if names is None else names
    return Control("accelerator", "Accelerator:", names, default, "select",
                   tuple(catalog.accelerator_label(n) for n in names))


def precision_control() -> Control:
    return Control("precision", "Weights:", roofline.PRECISIONS, "as_released", "radio",
                   tuple(roofline.PRECISION_LABELS[p] for p in roofline.PRECISIONS))


def price_control(start: float, stop: float, step: float) -> Control:
    return Control.slider("price_usd_per_kwh", "Electricity price, $/kWh:", start, stop, step,
                          catalog.assumption("electricity_price_usd_per_kwh"), decimals=2)


def tooltips(*entries: tuple) -> list[alt.Tooltip]:
    """Tooltip rows from ``(field:type, title)`` or ``(field:type, title, format)`` entries."""
    return [alt.Tooltip(entry[0], title=entry[1], **({"format": entry[2]} if len(entry) > 2 else {}))
            for entry in entries]


def framed(chart: alt.TopLevelMixin, heading: str, subtitle: str | list[str], width: int,
           height: int | alt.Step) -> alt.TopLevelMixin:
    """A chart's size and its title and subtitle, set the same way for every figure."""
    return chart.properties(width=width, height=height, title=alt.TitleParams(heading, subtitle=subtitle))
