"""Interactive figures: their model output, their grids and the chart specs built from them."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from colours import contrast, rgba
from tolerances import SHIPPED_RTOL

from perwatt import accounting, catalog, figures, metrics, render, serving, store
from perwatt.interactive import Control, InteractiveFigure

FIGURES = {f.name: f for f in figures.all_figures()}


def parse_csv_data(values: str) -> pd.DataFrame:
    """The rows of a chart's inline CSV, read back; an empty cell is an unknown, as in the chart."""
    return pd.read_csv(io.StringIO(values), keep_default_na=False, na_values=[""])


_DATUM = re.compile(r"datum\.([A-Za-z_][A-Za-z0-9_]*)|datum\[['\"]([^'\"]+)['\"]\]")


def referenced_fields(spec: object) -> set[str]:
    """Every column a Vega-Lite spec reads: encoding fields, fold lists, and datum references
    inside filter and calculate expressions."""
    if isinstance(spec, dict):
        found: set[str] = set()
        for key, value in spec.items():
            if key == "field" and isinstance(value, str):
                found.add(value)
            elif key == "labelExpr":
                continue  # a legend's or axis's own datum (its label), not a data column
            elif key == "fold" and isinstance(value, list):
                found |= {v for v in value if isinstance(v, str)}
            else:
                found |= referenced_fields(value)
        return found
    if isinstance(spec, list):
        return set().union(*(referenced_fields(item) for item in spec)) if spec else set()
    if isinstance(spec, str):
        return {a or b for a, b in _DATUM.findall(spec)}
    return set()


def test_every_column_a_chart_reads_is_shipped():
    for fig in FIGURES.values():
        spec = fig.chart().to_dict()
        # Columns the chart computes itself (calculate, fold) are not shipped, and need not be.
        made = {t.get("as") for layer in [spec, *spec.get("layer", [])] for t in layer.get("transform", [])
                if "calculate" in t} | {"statistic", "latency", "reference"}
        missing = referenced_fields(spec) - set(fig.shipped_columns) - made
        assert missing == set(), f"{fig.name} reads columns it does not ship: {missing}"


def test_power_basis_defaults_reproduce_the_published_ratios():
    # Both sides on their ratings: re-expressing changes nothing, so the ratio is the table's.
    frame = figures.power_basis().frame().set_index("model")
    pairs = accounting.pairs().set_index("model")
    assert frame["ratio"].to_dict() == pytest.approx(pairs["recomputed_ratio"].to_dict(), rel=1e-12)
    assert frame["ratio"].round(1).to_dict() == pairs["published_ratio"].to_dict()


def test_power_basis_measured_assumption_at_measured_watts_also_reproduces_them():
    measured = catalog.power_w("jalapeno", "chip_measured")
    frame = figures.power_basis().frame(published_basis="jalapeno_measured", jalapeno_power_w=measured)
    assert frame["ratio"].to_list() == pytest.approx(accounting.pairs()["recomputed_ratio"].to_list(), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(figures.power_basis().control("jalapeno_power_w").options),
       st.sampled_from(["chip_rated", "jalapeno_measured"]),
       st.sampled_from(["chip_rated", "all_in_provisioned"]))
def test_power_basis_ratio_is_inverse_in_jalapeno_watts(watts, published, baseline):
    fig = figures.power_basis()
    here = fig.frame(published_basis=published, jalapeno_power_w=watts, baseline_basis=baseline)
    at_1000 = fig.frame(published_basis=published, jalapeno_power_w=1000.0, baseline_basis=baseline)
    assert (here["ratio"] * watts).to_list() == pytest.approx((at_1000["ratio"] * 1000.0).to_list(), rel=1e-12)


def test_all_in_baseline_raises_the_ratio_by_the_power_ratio():
    fig = figures.power_basis()
    rated = fig.frame(baseline_basis="chip_rated").set_index("model")
    all_in = fig.frame(baseline_basis="all_in_provisioned").set_index("model")
    factor = rated["baseline"].map(lambda s: catalog.power_w(s, "all_in_provisioned") / catalog.power_w(s, "chip_rated"))
    assert (all_in["ratio"] / rated["ratio"]).to_dict() == pytest.approx(factor.to_dict(), rel=1e-12)


def test_energy_cost_rows_equal_the_formulas():
    fig = figures.energy_cost()
    frame = fig.frame(price_usd_per_kwh=0.12, pue=1.3, tokens="output")
    # Output tokens at the 8k/1k mean draws: (6553 + 8192) / 2 in, (819 + 1024) / 2 out.
    expected = metrics.energy_cost_per_million_tokens(
        metrics.per_output_token(1000.0 / frame["tps_per_kw"], 7372.5, 921.5), 0.12, 1.3
    )
    assert frame["cost_usd_per_million_tokens"].to_list() == pytest.approx(expected.to_list(), rel=1e-12)


def test_output_tokens_cost_about_nine_times_all_tokens_on_8k_1k():
    fig = figures.energy_cost()
    ratio = fig.frame(tokens="output")["joules_per_token"] / fig.frame(tokens="all")["joules_per_token"]
    # (7372.5 + 921.5) / 921.5 = 9.0005: drawing both lengths keeps the targets' ratio of 9.
    assert ratio.to_list() == pytest.approx([8294 / 921.5] * len(ratio), rel=1e-12)


def test_grid_covers_every_setting_once():
    for fig in FIGURES.values():
        names = [c.name for c in fig.controls]
        settings_seen = fig.grid[names].drop_duplicates()
        expected = int(np.prod([len(c.options) for c in fig.controls]))
        assert len(settings_seen) == expected, fig.name


def test_chart_ships_the_grid_exactly():
    for fig in FIGURES.values():
        spec = fig.chart().to_dict()
        largest = max(spec["datasets"].values(), key=len)
        shipped = parse_csv_data(largest)
        columns = [c.name for c in fig.controls] + list(fig.keys) + list(fig.values)
        left = shipped[columns].sort_values(columns).reset_index(drop=True)
        right = fig.grid[columns].sort_values(columns).reset_index(drop=True)
        pd.testing.assert_frame_equal(left, right, check_dtype=False, check_column_type=False,
                                      rtol=SHIPPED_RTOL, atol=0)


def test_chart_binds_one_input_per_control():
    for fig in FIGURES.values():
        params = {p["name"]: p for p in fig.chart().to_dict()["params"]}
        assert set(params) == {c.name for c in fig.controls}
        for control in fig.controls:
            bind = params[control.name]["bind"]
            assert bind["input"] == {"slider": "range", "radio": "radio", "select": "select"}[control.widget]
            assert params[control.name]["value"] == control.default


def test_chart_at_one_setting_has_no_controls_and_the_model_rows():
    fig = figures.energy_cost()
    spec = fig.chart_at(pue=1.2).to_dict()
    assert "params" not in spec
    rows = max(spec["datasets"].values(), key=len)
    assert [r["cost_usd_per_million_tokens"] for r in rows] == fig.frame(pue=1.2)["cost_usd_per_million_tokens"].to_list()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_live_chart_draws_what_it_drew_with_its_rows_on_every_layer(name):
    # chart_at puts the rows on the drawn chart, once; Altair's own way puts them on each layer
    # drawn from the base. The pictures must be the same, mark for mark, at a moved setting too.
    import altair as alt
    import vl_convert

    fig = FIGURES[name]
    moved = {fig.controls[0].name: fig.controls[0].options[-1]}
    for setting in ({}, moved):
        ours = fig.chart_at(**setting).to_dict(validate=False)
        theirs = fig._finish(fig.draw(alt.Chart(fig.frame(**setting)), fig.grid)).to_dict(validate=False)
        # (vl-convert numbers colour gradients on from one picture to the next within a process)
        drawn = [re.sub(r"gradient_\d+", "gradient", vl_convert.vegalite_to_svg(spec)) for spec in (ours, theirs)]
        assert drawn[0] == drawn[1], (name, setting)


def test_unknown_control_is_refused():
    with pytest.raises(ValueError, match="no control"):
        figures.energy_cost().frame(voltage=3)


def test_slider_controls_must_step_evenly():
    with pytest.raises(ValueError, match="equal steps"):
        Control("x", "x", (1.0, 2.0, 4.0), 1.0)
    with pytest.raises(ValueError, match="default"):
        Control("x", "x", (1.0, 2.0), 3.0)


def test_static_html_is_inert_and_id_derives_from_spec():
    spec = figures.power_basis().chart().to_dict()
    html = render.chart_html(spec)
    cid = render.chart_id(spec)
    assert f'id="{cid}"' in html and f'data-target="{cid}"' in html
    assert "<script>" not in html and "vegaEmbed" not in html
    assert 'type="application/json"' in html and "</script" not in html.split(">", 2)[2].rsplit("</script>", 1)[0]


def test_packed_spec_unpacks_to_the_same_spec_in_a_fraction_of_the_bytes():
    spec = figures.power_basis().chart().to_dict()
    spec["description"] = "a </script> and a <!-- in the text"  # the escapes chart_html makes
    page = "<p>before</p>" + render.chart_html(spec) + "<p>after</p>"
    packed = render.pack_specs(page)
    assert packed == render.pack_specs(page)  # the same bytes every time
    payload = re.search(r'<script type="application/gzip" class="perwatt-spec" data-target="([^"]+)">([A-Za-z0-9+/=]+)</script>',
                        packed)
    assert payload and payload.group(1) == render.chart_id(spec)
    assert render.unpack_spec(payload.group(2)) == json.loads(render.spec_json(spec))
    assert packed.startswith("<p>before</p>") and packed.endswith("<p>after</p>")
    assert packed.replace(payload.group(0), "") == page.replace(re.search(r"<script.*?</script>", page, re.S).group(0), "")
    grid = max((render.chart_html(f.chart().to_dict()) for f in figures.all_figures()), key=len)
    assert len(render.pack_specs(grid)) < len(grid) / 3


_SPEC_HTML = """
import json, perwatt
from perwatt import figures, render
perwatt.setup()
print(json.dumps([render.chart_html(f.chart().to_dict()) for f in figures.all_figures()]))
"""


@pytest.mark.slow
def test_two_fresh_processes_give_identical_chart_html():
    # One computes every figure from nothing; the other reads what this run's store holds (or
    # fills it): so the model is deterministic across processes, and the store returns its answers.
    assert os.environ.get(store.VARIABLE), "the test run's store is on (tests/conftest.py)"
    runs = [
        subprocess.run([sys.executable, "-c", _SPEC_HTML], capture_output=True, text=True, check=True,
                       env={"PERWATT_RENDER": "static", "PATH": "", **extra}).stdout
        for extra in ({}, {store.VARIABLE: os.environ[store.VARIABLE]})
    ]
    assert runs[0] == runs[1]
    assert len(json.loads(runs[0])) == len(FIGURES)


def test_every_figure_validates_at_its_defaults_and_another_setting():
    # Live panels skip schema validation on redraw; this is where it happens instead.
    for fig in FIGURES.values():
        fig.chart_at().to_dict(validate=True)
        moved = {c.name: c.options[-1] for c in fig.controls}
        fig.chart_at(**moved).to_dict(validate=True)


def test_a_figure_shown_in_the_build_is_its_checked_chart_as_the_static_renderer_writes_it(monkeypatch):
    # The build skips schema validation on showing a figure's chart (render.BuiltChart); this is
    # where it happens instead, on the very chart the page gets.
    monkeypatch.setenv(render.MODE_VARIABLE, "static")
    for fig in FIGURES.values():
        shown = fig.show()
        assert isinstance(shown, render.BuiltChart), fig.name
        assert shown._repr_mimebundle_() == render.static_renderer(fig.chart().to_dict(validate=True)), fig.name


def test_figures_called_frontiers_declare_their_axes():
    for fig in FIGURES.values():
        title = fig.chart_at().to_dict(validate=False).get("title", {})
        words = " ".join([fig.description, str(title)]).lower()
        if "frontier" in words or "trade-off" in words:
            assert fig.frontier is not None, f"{fig.name} is presented as a frontier but declares no axes"


def test_no_frontier_point_is_beaten_on_both_axes_at_any_setting():
    checked = 0
    for fig in FIGURES.values():
        if fig.frontier is None:
            continue
        x, y = fig.frontier
        names = [c.name for c in fig.controls]
        for setting, rows in fig.grid.groupby(names):
            xs, ys = rows[x].to_numpy(), rows[y].to_numpy()
            beaten = [(i, j) for i in range(len(rows)) for j in range(len(rows))
                      if xs[j] >= xs[i] and ys[j] >= ys[i] and (xs[j] > xs[i] or ys[j] > ys[i])]
            assert beaten == [], f"{fig.name} at {setting}: points beaten on both axes {beaten}"
            checked += 1
    assert checked >= 100


def test_pareto_filter_known_case():
    # (1, 5) and (3, 3) trade off; (2, 2) loses to (3, 3) on both; (3, 3) twice: neither beats the other.
    mask = serving.pareto_efficient([1, 2, 3, 3], [5, 2, 3, 3])
    assert mask.tolist() == [True, False, True, True]


def test_a_decorated_function_is_a_registered_named_described_figure():
    from perwatt.figures import kit

    before = list(kit.REGISTRY)
    try:
        @kit.figure
        def toy_figure() -> InteractiveFigure:
            """A toy chart, described
            over two lines."""
            return InteractiveFigure(controls=(Control("k", "K:", (1, 2), 1, "select"),),
                                     compute=lambda k: pd.DataFrame({"row": [1], "v": [float(k)]}),
                                     draw=lambda base, grid: base.mark_point().encode(x="v:Q"),
                                     keys=("row",), values=("v",))

        made = toy_figure()
        assert kit.REGISTRY[-1] is toy_figure and len(kit.REGISTRY) == len(before) + 1
        assert made.name == "toy-figure" and made.description == "A toy chart, described over two lines."
        assert made.frame(k=2)["v"].tolist() == [2.0]
    finally:
        kit.REGISTRY[:] = before


def test_charts_validate_in_a_process_that_never_compiles_the_iri_grammars():
    # perwatt keeps jsonschema from loading rfc3987-syntax (1.5 s of every kernel's start); Altair's
    # schema checks, format checks included, still run, and reject a bad chart.
    probe = ("import sys, perwatt, altair as alt, pandas as pd\n"
             "assert sys.modules['rfc3987_syntax'] is None, 'the IRI grammars were loaded'\n"
             "alt.Chart(pd.DataFrame({'x': [1]})).mark_point().encode(x='x:Q').to_dict(validate=True)\n"
             "try:\n"
             "    alt.Chart(pd.DataFrame({'x': [1]})).mark_point(size='big').to_dict(validate=True)\n"
             "except Exception as err:\n"
             "    print(type(err).__name__)\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "SchemaValidationError"


def test_contrast_is_wcags():
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast((255, 255, 255), (255, 255, 255)) == pytest.approx(1.0)
    # Two colour pairs axe measured in the book's dark theme before 5918c73 (its report: 1.71 and 2.09).
    assert round(contrast(rgba("#9ca4af")[0], rgba("#ced6dd")[0]), 2) == 1.71
    assert round(contrast(rgba("#0a4f9e")[0], rgba("#171e2a")[0]), 2) == 2.09


def test_every_number_on_the_speedup_heat_map_stands_out_from_its_cell():
    # Black on every cell fell to 3.34:1 at c = 0 and 2.37:1 at c = 0.5; each number now takes black or
    # white, whichever stands out more. Every setting, as vl-convert draws it. (The better of black
    # and white is always at least 4.58:1, so this fails only if the choice goes wrong.)
    import vl_convert

    figure = FIGURES["speedup-surface"]
    key = re.compile(r"γ[^:]*: (\d+); Acceptance rate α: ([\d.]+)")
    for c in figure.controls[0].options:
        svg = vl_convert.vegalite_to_svg(figure.chart_at(c=c).to_dict())
        cells = {key.search(label).groups(): fill for label, fill in
                 re.findall(r'<path [^>]*?aria-label="([^"]*Speed-up[^"]*)"[^>]*?fill="([^"]+)"', svg)}
        numbers = re.findall(r'<text [^>]*?aria-label="([^"]*)"[^>]*aria-roledescription="text mark"[^>]*fill="([^"]+)"',
                             svg)
        assert len(numbers) == len(cells) >= 50
        worst = min(contrast(rgba(fill)[0], rgba(cells[key.search(label).groups()])[0]) for label, fill in numbers)
        assert worst >= 4.5, f"c = {c}: {worst:.2f}:1"
