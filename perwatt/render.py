"""How charts reach the reader: one setup call, two modes.

Every chapter calls :func:`setup` from a hidden first cell. It also glues the three articles'
titles (``title_<source id>``), so the prose can cite them by title.

* **Static mode** (the book build; :mod:`perwatt.sphinxext` sets ``PERWATT_RENDER=static``
  for the kernels it starts): Altair charts render as a ``<div>`` plus the Vega-Lite spec
  in an inert ``<script type="application/json">``. The site's own vendored Vega bundle
  and ``perwatt-charts.js`` draw them; nothing is fetched from another host. Element ids
  are derived from the spec, so two builds of the same source give the same HTML.
* **Live mode** (JupyterLab, Notebook, VS Code): charts render through Altair's
  ``JupyterChart`` widget with its JavaScript taken from vl-convert, so they work
  offline too, and widget panels can redraw them in place.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import html
import json
import os
import re
import threading
from importlib import metadata

from perwatt import datadir, store

MODE_VARIABLE = "PERWATT_RENDER"
STATIC_RENDERER = "perwatt-static"
THEME = "perwatt"
#: Written once, under every chart whose controls recompute it in the page.
RECOMPUTE_NOTE = "Recomputed in your browser from values the Python model computed for every setting."


def is_static() -> bool:
    """True while the book is being built (charts must render without a kernel)."""
    return os.environ.get(MODE_VARIABLE, "").lower() == "static"


def spec_json(spec: dict) -> str:
    """Canonical JSON for a spec: sorted keys, no spaces, so equal specs give equal text."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chart_id(spec: dict) -> str:
    """A deterministic element id for a chart, derived from its spec."""
    return "pw-chart-" + hashlib.sha256(spec_json(spec).encode("utf-8")).hexdigest()[:12]


def chart_html(spec: dict) -> str:
    """The static-site HTML for one chart: a container and its spec as inert JSON."""
    cid = chart_id(spec)
    meta = spec.get("usermeta", {}).get("perwatt", {})
    figure = html.escape(meta.get("figure", ""), quote=True)
    description = html.escape(spec.get("description", ""), quote=True)
    # "</" inside the JSON would end the script element early.
    payload = spec_json(spec).replace("</", "<\\/").replace("<!--", "<\\!--")
    note = f'<p class="perwatt-recompute">{RECOMPUTE_NOTE}</p>\n' if spec.get("params") else ""
    return (
        f'<div class="perwatt-chart" id="{cid}" data-figure="{figure}" role="figure" '
        f'aria-label="{description}"></div>\n'
        f'<script type="application/json" class="perwatt-spec" data-target="{cid}">{payload}</script>\n'
        + note + _alternative(description, meta.get("table"))
    )


#: How the built site ships each spec: its JSON, gzip-compressed, as base64 text, about a fifth of
#: the JSON's bytes for these grids of model values (the digits are kept). perwatt-charts.js
#: inflates it with the browser's own DecompressionStream, offline and from disk alike.
PACKED_TYPE = "application/gzip"
_INERT_SPEC = re.compile(r'<script type="application/json" class="perwatt-spec" data-target="([^"]+)">(.*?)</script>',
                         re.S)


def pack_specs(page: str) -> str:
    """A page's HTML with every chart spec :func:`chart_html` wrote packed (see :data:`PACKED_TYPE`)."""
    def packed(match: re.Match) -> str:
        text = match.group(2).replace("<\\/", "</").replace("<\\!--", "<!--")  # undo chart_html's escapes
        # mtime=0: the same spec packs to the same bytes, so two builds of one source stay identical.
        data = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
        return f'<script type="{PACKED_TYPE}" class="perwatt-spec" data-target="{match.group(1)}">{data}</script>'
    return _INERT_SPEC.sub(packed, page)


def unpack_spec(payload: str) -> dict:
    """The spec inside a packed script element's text."""
    return json.loads(gzip.decompress(base64.b64decode(payload)).decode("utf-8"))


def _alternative(description: str, table: dict | None) -> str:
    """The chart as text: its description, and its values at the default setting as a table."""
    parts = ['<details class="perwatt-alt"><summary>Chart as text and table</summary>',
             f'<p class="perwatt-description">{description}</p>']
    if table:
        head = "".join(f'<th scope="col">{html.escape(str(c))}</th>' for c in table["columns"])
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
                       for row in table["rows"])
        parts.append(f"<table><caption>Values at the controls' starting settings</caption>"
                     f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    parts.append("</details>")
    return "".join(parts)


def _cell(value: object) -> str:
    """A table cell as text: numbers to four significant digits, unknowns empty."""
    import numpy as np  # here, not at the top: the build's extension imports this module for pack_specs

    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        number = float(value)
        if np.isnan(number):
            return ""
        return f"{number:,.0f}" if abs(number) >= 1000 else f"{number:.4g}"
    return str(value)


def table_meta(frame) -> dict:
    """A chart's values as the table a reader without the chart gets (a screen reader, a printout),
    carried in the spec's ``usermeta`` and written out by :func:`chart_html`."""
    return {"columns": [str(c) for c in frame.columns],
            "rows": [[_cell(v) for v in row] for row in frame.itertuples(index=False)]}


def static_renderer(spec: dict, **metadata: object) -> dict[str, str]:
    """Altair renderer for the static site: HTML only, no CDN, no inline code."""
    return {"text/html": chart_html(spec)}


class BuiltChart:
    """A figure's chart as a chapter cell shows it while the book is built: the HTML of
    :func:`static_renderer`, from the chart's spec unchecked against Vega-Lite's schema.

    The tests check every figure's chart against the schema (tests/test_figures.py), so checking
    it again in every build only cost time: 0.4-0.6 s of the kernels' 10 s in a clean build. Altair
    displaying a chart itself checks it, so a chart a chapter draws outside the figures still is."""

    def __init__(self, chart) -> None:
        self.chart = chart

    def _repr_mimebundle_(self, *args: object, **kwargs: object) -> dict[str, str]:
        # The context is the one Altair's own display passes.
        return static_renderer(self.chart.to_dict(validate=False, context={"pre_transform": False}))


def _theme() -> alt.theme.ThemeConfig:
    import altair as alt

    return alt.theme.ThemeConfig(
        config={
            "view": {"continuousWidth": 520, "continuousHeight": 260, "stroke": None},
            "font": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
            "axis": {"labelFontSize": 12, "titleFontSize": 13},
            # Legends above the plot, and every reference rule dashed, in every chart.
            "legend": {"labelFontSize": 12, "titleFontSize": 13, "orient": "top"},
            "rule": {"strokeDash": [4, 3]},
            "title": {"fontSize": 15, "anchor": "start"},
        }
    )


def setup() -> None:
    """Configure Altair for the current mode and glue the articles' titles for the prose.
    Safe to call more than once."""
    configure()
    _glue_titles()


def configure() -> None:
    """Altair's theme and renderer for the current mode; in a live kernel, charts that load
    Vega from the package, never from a CDN. Figures call it too, so a reader who skips the
    setup cell still gets working offline charts. Cheap after the first call in a mode."""
    _configure(is_static())


@functools.cache
def _configure(static: bool) -> None:
    # Altair is imported here, not at the top: the build's Sphinx extension imports this module
    # for its page packing alone, and Altair's import would add seconds to every build.
    import altair as alt

    alt.theme.register(THEME, enable=True)(_theme)
    # Grids precomputed for in-browser recomputation can exceed Altair's 5,000-row guard.
    alt.data_transformers.disable_max_rows()
    if static:
        # Altair also checks each part of a chart as it is made, which the checks of the whole
        # (Altair's display, and the tests of the figures: see BuiltChart) repeat.
        alt.utils.schemapi.disable_debug_mode()
        alt.renderers.register(STATIC_RENDERER, static_renderer)
        alt.renderers.enable(STATIC_RENDERER)
        _show_tables_flat()
    else:
        _enable_offline_widgets()
        alt.renderers.enable("jupyter", offline=True)


#: Held while vl_convert.javascript_bundle is swapped: a second thread must not take the swapped-in
#: function for the original and put it back for good.
_SWAP = threading.Lock()


def _enable_offline_widgets() -> None:
    """``alt.JupyterChart.enable_offline()``, with the JavaScript it has vl-convert bundle (about 2 s
    of CPU, in every live kernel) kept in the store (:mod:`perwatt.store`) when the store is on: a
    run's or a workshop's kernels then bundle it once between them."""
    import altair as alt
    import vl_convert

    version = metadata.version("vl-convert-python")
    with _SWAP:
        bundle = vl_convert.javascript_bundle

        def remembered(*args, **kwargs) -> str:
            return store.remembered(lambda: bundle(*args, **kwargs), datadir.resolved(),
                                    "vl_convert.javascript_bundle", (version, args, sorted(kwargs.items())))

        vl_convert.javascript_bundle = remembered
        try:
            alt.JupyterChart.enable_offline()
        finally:
            vl_convert.javascript_bundle = bundle


def flat_table_html(frame) -> str:
    """A DataFrame as the built page shows it: one header row, every cell of it named. pandas' own
    HTML leaves the header cell over the index empty, which screen readers announce as nothing
    (axe: "empty-table-header"); here a meaningful index becomes a named column, a plain row count
    is left out."""
    import pandas as pd

    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    flat = frame if plain else frame.reset_index()
    return flat.to_html(index=False, border=0)


def _show_tables_flat() -> None:
    from IPython import get_ipython

    import pandas as pd

    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, flat_table_html)


def _glue_titles() -> None:
    from IPython import get_ipython

    from perwatt import catalog

    # Glue fills the prose of the built site; in a live kernel it would only print noise.
    if not is_static() or get_ipython() is None:
        return
    titles = catalog.source_titles()
    for source_id in catalog.article_ids():
        glue(f"title_{source_id}", titles[source_id])


def glue(name: str, value: object) -> None:
    """Store a computed value for the prose (``{glue:text}`name:format```), without showing it.

    NumPy scalars become plain Python numbers first, so format specs such as ``:.2f``
    apply to the number rather than to its ``np.float64(...)`` representation.
    """
    import numpy as np
    from myst_nb import glue as myst_glue

    if isinstance(value, np.generic):
        value = value.item()
    myst_glue(name, value, display=False)
