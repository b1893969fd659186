"""The per-kW frontier across chips: its formula against the serving model, its frontiers, bands and
ratios, and the page's numbers against Python's at sampled settings."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perwatt import bands, catalog, crosschip, expression, inverse, power, serving
from perwatt.figures import cross_chip as pwf
from perwatt.figures import cross_chip_page as pipeline
from perwatt.specs import DEFAULTS, chip, known_chips, model_spec

MODELS = tuple(catalog.results()["model"].drop_duplicates())


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("accelerator", known_chips())
def test_the_formula_is_the_serving_model_on_every_chip(model, accelerator):
    # A chip with no published power gets one here: the test is of the arithmetic, not the chip.
    device, drawn = bands.system_chip(accelerator, assumed_power_w=700.0), catalog.lengths()
    try:
        swept = serving.sweep(model, accelerator)
    except ValueError:
        with pytest.raises(ValueError, match="does not fit"):
            crosschip.rows(model, device)
        return
    rows = crosschip.rows(model, device)
    assert len(rows) == len(swept)
    served = serving.serve(model_spec(model), device, rows["batch"].to_numpy(float), drawn.isl_mean, drawn.osl_mean,
                           DEFAULTS, rows["chips"].to_numpy(float), rows["ep"].to_numpy(float),
                           rows["dp_attention"].to_numpy(bool))
    np.testing.assert_allclose(rows["x"], served["tokens_per_s_per_user"], rtol=1e-12)
    np.testing.assert_allclose(rows["y"] * device.power_w / 1000, served["total_tokens_per_s_per_chip"], rtol=1e-12)
    modelled = crosschip.rows(model, device, power_basis="modelled")
    watts = power.pool_watts(model_spec(model), device, modelled["batch"].to_numpy(float), drawn.isl_mean,
                             drawn.osl_mean, modelled["chips"].to_numpy(float), modelled["ep"].to_numpy(float),
                             modelled["dp_attention"].to_numpy(bool))
    np.testing.assert_allclose(modelled["watts"], watts, rtol=1e-12)
    assert (modelled["watts"] < device.power_w).any() and (modelled["watts"] <= device.power_w).all()


def test_the_frontier_is_the_sweeps_own_at_rated_power():
    # At rated power tokens per kW is tokens per chip over a constant: the same points win.
    device = chip("gb200")
    ours = crosschip.frontier("deepseek-r1", device)
    theirs = serving.frontier("deepseek-r1", "gb200")
    np.testing.assert_allclose(np.sort(ours["x"].to_numpy()), np.sort(theirs["tokens_per_s_per_user"].to_numpy()),
                               rtol=1e-12)


readers = st.builds(crosschip.reader_chip, st.floats(1, 32), st.floats(500, 20_000), st.floats(32, 1024),
                    st.floats(100, 2000), st.sampled_from([8, 72]))
settings_ = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS), "precision": st.sampled_from(pwf.PRECISIONS),
    "power_basis": st.sampled_from(crosschip.POWER_BASES), "layer_us": st.floats(0, 150),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setting=settings_, reader=readers)
def test_every_curve_is_a_frontier_and_its_band_holds_it(setting, reader):
    assumptions = dataclasses.replace(DEFAULTS, layer_latency_us=setting["layer_us"])
    systems = [crosschip.READER, "gb300", "mi355x", "h100"]
    try:
        curves = bands.curves(setting["model"], systems, setting["precision"], setting["power_basis"],
                                  assumptions, reader=reader)
    except ValueError as error:
        assert "none of" in str(error)
        return
    for (system, case), curve in curves.groupby(["system", "case"]):
        device = bands.system_chip(system, reader)
        every = crosschip.rows(setting["model"], device, setting["precision"], setting["power_basis"],
                               crosschip.with_efficiency(assumptions, bands.efficiency_band()[case]))
        x, y = every["x"].to_numpy(), every["y"].to_numpy()
        for cx, cy in zip(curve["x"], curve["y"]):
            beaten = (x >= cx) & (y >= cy) & ((x > cx) | (y > cy))
            assert not beaten.any(), f"{system} {case}: ({cx}, {cy}) is beaten"
        # Nothing left out: every row is beaten by or equal to a curve point.
        cover = (curve["x"].to_numpy()[:, None] >= x[None, :]) & (curve["y"].to_numpy()[:, None] >= y[None, :])
        assert cover.any(axis=0).all()
    read = bands.at_targets(curves)
    low_ok = read["low"].isna() | (read["low"] <= read["central"] * (1 + 1e-12))
    assert low_ok.all() and (read["central"] <= read["high"] * (1 + 1e-12)).all()


def test_best_at_reads_the_most_per_kw_at_or_beyond_a_target():
    curve = pd.DataFrame({"x": [10.0, 20.0, 40.0], "y": [300.0, 200.0, 50.0]})
    np.testing.assert_array_equal(crosschip.best_at(curve, [5, 10, 15, 40, 41]), [300, 300, 200, 50, np.nan])


def test_the_ratio_interval_takes_the_two_chips_band_ends_apart():
    read = pd.DataFrame({"system": ["a", "b"], "t": [10.0, 10.0], "low": [8.0, 2.0], "central": [10.0, 4.0],
                         "high": [12.0, 5.0]})
    out = bands.ratio_along(read, "a", "b").iloc[0]
    assert (out["ratio"], out["ratio_low"], out["ratio_high"]) == (2.5, 8 / 5, 6.0)


def test_an_unpublished_power_needs_an_assumption_and_the_reader_chip_checks_its_inputs():
    unpublished = dataclasses.replace(chip("h100"), power_w=float("nan"))
    with pytest.raises(ValueError, match="power is not published"):
        crosschip.rows("gpt-oss-120b", unpublished)
    with pytest.raises(ValueError, match="^bandwidth_tb_s"):
        crosschip.reader_chip(-1, 1000, 100, 700)
    with pytest.raises(ValueError, match="^power_w"):
        crosschip.reader_chip(8, 1000, 100, 0.7)


def test_a_formula_prints_what_it_computes():
    a, b = expression.field("a"), expression.param("b")
    formula = expression.Formula((("s", expression.maximum(a * 2, b) + 1), ("t", expression.where(
        expression.field("s") > 3, expression.field("s"), 0.0))))
    out = formula.evaluate({"a": np.array([1.0, 3.0])}, {"b": 2.5})
    np.testing.assert_array_equal(out["s"], [3.5, 7.0])
    assert formula.vega()[0]["calculate"] == "(max((datum['a'] * 2.0), b) + 1.0)"
    assert formula.vega(keep=("t",)) == [{"calculate": "(((max((datum['a'] * 2.0), b) + 1.0) > 3.0) ? "
                                          "(max((datum['a'] * 2.0), b) + 1.0) : 0.0)", "as": "t"}]
    with pytest.raises(ValueError, match="missing"):
        formula.evaluate({}, {"b": 1.0})


@pytest.mark.parametrize("model", MODELS)
def test_the_inverse_round_trips_each_reported_point(model):
    row = catalog.results().set_index(["model", "system"]).loc[(model, catalog.CANDIDATE)]
    free = dataclasses.replace(DEFAULTS, layer_latency_us=0.0)
    solved = inverse.inverse(model, row["interactivity"], row["tps_per_kw"], 8, 1, assumptions=free, tflops=1e7)
    assert solved["solvable"]
    device = crosschip.reader_chip(solved["bandwidth_tb_s"], 1e7, 4096, solved["power_w"], 8)
    every = crosschip.rows(model, dataclasses.replace(device, hbm_bytes=float("inf")), assumptions=free)
    spec = model_spec(model)
    at = every[(every["chips"] == 8) & (every["ep"] == (8 if spec.is_moe else 1)) & ~every["dp_attention"].astype(bool)
               & (every["batch"] == 1)].iloc[0]
    assert at["x"] == pytest.approx(row["interactivity"], rel=1e-9)
    assert at["y"] == pytest.approx(row["tps_per_kw"], rel=1e-9)
    # At the fitted fixed time per layer no bandwidth reaches the reported speed: the answer stays unknown.
    capped = inverse.inverse(model, row["interactivity"], row["tps_per_kw"], 8, 1)
    assert not capped["solvable"] and capped["bandwidth_tb_s"] is None and capped["power_w"] is None
    assert capped["ceiling"] < row["interactivity"] and capped["ceiling"] < 1e6 / (spec.layers * DEFAULTS.layer_latency_us)


def test_the_inverse_names_what_it_cannot_take():
    with pytest.raises(ValueError, match="^ep"):
        inverse.inverse("deepseek-r1", 100.0, 1000.0, chips=8, ep=3)
    with pytest.raises(ValueError, match="^tokens_per_s_per_user"):
        inverse.inverse("deepseek-r1", -1.0, 1000.0)
    with pytest.raises(ValueError, match="^baseline"):
        inverse.gap_conditions("deepseek-r1", "tpu7x", 100.0)


# --- In the page: the browser's numbers are the model's ----------------------------------------------

page_settings = st.fixed_dictionaries({
    "model": st.sampled_from(MODELS), "precision": st.sampled_from(pwf.PRECISIONS),
    "power_basis": st.sampled_from(crosschip.POWER_BASES),
    "system_b": st.sampled_from(pwf.CHIP_NAMES), "system_c": st.sampled_from(pwf.CHIP_NAMES),
    "target": st.sampled_from(pwf.READOUT_TARGETS), "layer_us": st.integers(0, 150).map(float),
    "reader_tb_s": st.integers(2, 64).map(lambda v: v / 2), "reader_tflops": st.integers(1, 40).map(lambda v: v * 500.0),
    "reader_gb": st.integers(1, 32).map(lambda v: v * 32.0), "reader_w": st.integers(2, 40).map(lambda v: v * 50.0),
    "reader_domain": st.sampled_from([8, 72]),
})


def _chart_id(page) -> str:
    return page.locator(".perwatt-chart[data-figure='per-watt-frontier']").get_attribute("id")


def _move_to(page, chart_id: str, setting: dict) -> None:
    """Set the chart's controls' signals and wait for the page to recompute."""
    page.evaluate("""async ([id, s]) => { const v = window.perwatt.embeds[id].view;
        for (const [k, x] of Object.entries(s)) v.signal(k, x); await v.runAsync(); }""", [chart_id, setting])


def _items(page, chart_id: str, mark: str) -> list[dict]:
    return page.evaluate("""([id, mark]) => { const out = []; const walk = (n) => { if (!n) return;
        if (n.marktype && n.name === mark + '_marks') { for (const i of n.items || []) out.push(i.datum); }
        (n.items || []).forEach(walk); }; walk(window.perwatt.embeds[id].view.scenegraph().root); return out; }""",
                         [chart_id, mark])


@pytest.mark.browser
def test_the_page_draws_the_models_frontier_band_and_readout_at_sampled_settings(site, site_url, browser):
    from tests.test_browser import PageVisit  # noqa: PLC0415 - the browser tests' page helper

    visit = PageVisit(browser, site_url, "chapters/prefill-decode.html")
    page = visit.page
    try:
        chart_id = _chart_id(page)
        figure = pwf.per_watt_frontier()
        checked = []

        @settings(max_examples=12, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(setting=page_settings)
        def check(setting):
            full = {**figure.defaults(), **setting}
            _move_to(page, chart_id, setting)
            frames = pwf.live_frames(**full)
            drawn = pd.DataFrame(_items(page, chart_id, "frontier"))
            want = frames["frontier"]
            assert len(drawn) == len(want), f"{setting}: {len(drawn)} points drawn, the model has {len(want)}"
            key = ["system", "x"]
            drawn, want = drawn.sort_values(key).reset_index(drop=True), want.sort_values(key).reset_index(drop=True)
            assert list(drawn["system"]) == list(want["system"])
            np.testing.assert_allclose(drawn["x"], want["x"], rtol=1e-7)
            np.testing.assert_allclose(drawn["y"], want["y"], rtol=1e-7)
            band = pd.DataFrame(_items(page, chart_id, "band"))
            if len(frames["band"]):
                merged = band.merge(frames["band"], on=["system", "t"], suffixes=("_page", ""))
                assert len(merged) == len(frames["band"])
                np.testing.assert_allclose(merged["central_page"], merged["central"], rtol=1e-7)
                # The band's ends as well: the page reads them per case from each row's own targets.
                np.testing.assert_allclose(merged["low_page"], merged["low"], rtol=1e-7)
                np.testing.assert_allclose(merged["high_page"], merged["high"], rtol=1e-7)
            readout = _items(page, chart_id, "readout")
            ratio = frames["ratio"].set_index("t")
            if full["target"] in ratio.index and full["system_a"] != full["system_b"]:
                assert len(readout) == 1
                assert math.isclose(readout[0]["ratio"], ratio.loc[full["target"], "ratio"], rel_tol=1e-7)
                for end in ("ratio_low", "ratio_high"):
                    assert math.isclose(readout[0][end], ratio.loc[full["target"], end], rel_tol=1e-7)
            checked.append(len(want))

        check()
        assert len(checked) >= 10 and sum(checked) > 100
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


def test_a_formula_run_per_case_prints_suffixed_columns_and_the_given_value():
    a, b = expression.field("a"), expression.param("b")
    formula = expression.Formula((("s", a * b), ("t", expression.field("s") + expression.field("e"))))
    low = formula.vega(suffix="_low", given={"e": 0.5})
    assert low == [{"calculate": "(datum['a'] * b)", "as": "s_low"},
                   {"calculate": "(datum['s_low'] + 0.5)", "as": "t_low"}]
    assert formula.vega(keep=("t",), suffix="_high", given={"e": 2.0}) == [
        {"calculate": "((datum['a'] * b) + 2.0)", "as": "t_high"}]
    assert formula.vega(keep=("t",), suffix="", given=None) == formula.vega(keep=("t",))
    with pytest.raises(ValueError, match="given names no input field"):
        formula.vega(given={"s": 1.0})


def test_the_page_copies_rows_per_case_only_on_a_frontier_and_per_target_only_where_answered():
    steps = pipeline.shared_transforms(bands.efficiency_band())
    flattens = [i for i, step in enumerate(steps) if "flatten" in step]
    # Rows are copied per slot before any control is read, and per case only after the frontier.
    assert steps[flattens[0]]["flatten"] == ["slot"] and all("model" not in str(s) for s in steps[:flattens[0]])
    assert steps[flattens[1]]["flatten"] == ["case"] and steps[flattens[1] - 3]["filter"].startswith("datum.front_")
    # And narrowed to one row per layout with only what the marks read, before any copy per case.
    narrowed = steps[flattens[1] - 2]["aggregate"]
    assert {a["as"] for a in narrowed} == {f"{n}_{c}" for n in ("watts", "x", "y", "front") for c in bands.CASES}
    # One row per layout: a maximum over two layouts would draw a point neither of them has.
    layout = [f for f in pipeline.LAYOUT_FIELDS if f not in ("system", "label")]
    assert steps[flattens[1] - 2]["groupby"] == ["system", "label", *layout]
    for model in catalog.results()["model"].drop_duplicates():
        for precision in pipeline.PRECISIONS:
            assert not crosschip.terms(model, precision).duplicated(layout).any(), (model, precision)
    # A row answers the targets above the next slower row's speed, up to its own.
    answered = next(s for s in steps if s.get("as") == "targets")["calculate"]
    assert answered.startswith("slice(") and answered.count(">= 1 ?") == 2
    # The band's and readout's layers start with steps that make new rows (else Vega copies every row).
    assert "flatten" in pipeline.read_at_targets()[0] and "filter" in pipeline.read_at_target()[0]


def test_a_kernel_panel_recomputes_the_figure_through_python(monkeypatch):
    from perwatt import render
    from perwatt.interactive import FigurePanel

    monkeypatch.setattr(render, "is_static", lambda: False)
    panel = FigurePanel(pwf.per_watt_frontier())
    before = panel.view.spec
    panel.controls["reader_tb_s"].value = 4.0
    after = panel.view.spec
    assert before != after
    shown = [d for d in after["datasets"].values() if d and "x" in d[0] and "batch" in d[0]]
    want = pwf.live_frames(**{**pwf.per_watt_frontier().defaults(), "reader_tb_s": 4.0})["frontier"]
    assert any(len(d) == len(want) and math.isclose(max(r["y"] for r in d), want["y"].max(), rel_tol=1e-9) for d in shown)


@pytest.mark.browser
def test_the_data_download_is_the_frontier_drawn_not_the_terms_shipped(site, site_url, browser):
    from test_share import Visit  # noqa: PLC0415 - the sharing tests' page helper, which keeps downloads

    visit = Visit(browser, site_url, "chapters/prefill-decode.html")
    page = visit.page
    try:
        chart_id = _chart_id(page)
        figure = pwf.per_watt_frontier()
        for setting in ({}, {"model": "deepseek-r1", "reader_tb_s": 8.0, "power_basis": "modelled"}):
            _move_to(page, chart_id, setting)
            table = pd.read_csv(visit.download(chart_id, "Download data (CSV)"))
            want = pwf.live_frames(**{**figure.defaults(), **setting})["frontier"]
            assert list(table.columns) == list(pwf.FRONTIER_COLUMNS)
            key = ["system", "x"]
            table, want = table.sort_values(key).reset_index(drop=True), want.sort_values(key).reset_index(drop=True)
            assert list(table["system"]) == list(want["system"]) and len(table) > 20
            np.testing.assert_allclose(table["y"], want["y"], rtol=1e-7)
            np.testing.assert_allclose(table["watts"], want["watts"], rtol=1e-7)
        assert visit.errors == [] and visit.off_origin == []
    finally:
        visit.close()


# --- The fast paths against the code they replaced (kept here as the reference) --------------------

def _bisect_one_step_at_a_time(f, low: float, high: float, steps: int = 200) -> float:
    """inverse._bisect_log as it was: one point per step, every step taken."""
    a, b = np.log(low), np.log(high)
    for _ in range(steps):
        mid = (a + b) / 2
        a, b = (mid, b) if f(float(np.exp(mid))) < 0 else (a, mid)
    return float(np.exp((a + b) / 2))


@settings(max_examples=300, deadline=None)
@given(root=st.floats(-5.0, 45.0), scale=st.sampled_from([None, 1.0, 7.5, 1e3]), steps=st.integers(0, 250),
       depth=st.integers(1, 8))
def test_the_bisection_asks_several_steps_at_once_and_answers_as_one_step_at_a_time(root, scale, steps, depth):
    # Increasing functions of x, smooth or in steps (as the gap's whole batches make it), with the
    # crossing inside the bounds, at an end or outside them.
    def f(x):
        value = np.log(np.asarray(x, dtype=float))
        return (value if scale is None else np.floor(value * scale) / scale) - root
    expected = _bisect_one_step_at_a_time(lambda x: float(f(np.array([x]))[0]), 1.0, 1e18, steps)
    assert inverse._bisect_log(f, 1.0, 1e18, steps, depth) == expected


def _frontier_as_it_was(frame):
    """crosschip.frontier as it was, from the rows (checked equal to crosschip.rows' before it is called)."""
    best = frame[frame["efficient"]].drop_duplicates(["x", "y"])
    return best.sort_values(["x", "y"], ascending=[False, False]).reset_index(drop=True)


def _rows_as_they_were(model, device, precision, power_basis, assumptions):
    grid = crosschip.terms(model, precision)
    given_ = {**crosschip._fields(device, device.power_w, model_spec(model).with_precision(precision)),
              **crosschip.parameters(assumptions, power_basis)}

    def tree(formula, rows):  # each step by its own Expr.evaluate, as Formula.evaluate once did
        env = {**given_, **{k: np.asarray(v) for k, v in rows.to_dict("series").items()}}
        for name, expr in formula.steps:
            env[name] = np.asarray(expr.evaluate(env), dtype=float)
        return {name: env[name] for name, _ in formula.steps}

    grid = grid[tree(crosschip.ADMISSION, grid)["valid"] > 0].reset_index(drop=True)
    frame = grid[["chips", "ep", "dp_attention", "batch"]].assign(**tree(crosschip.FORMULA, grid))
    frame["efficient"] = serving.pareto_efficient(frame["x"], frame["y"])
    return frame


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setting=settings_, accelerator=st.sampled_from([c for c in known_chips() if chip(c).power_known]),
       efficiency=st.floats(0.2, 1.0), reader=readers, use_reader=st.booleans())
def test_rows_and_frontiers_on_arrays_equal_the_frames_they_replaced(setting, accelerator, efficiency, reader,
                                                                      use_reader):
    device = reader if use_reader else chip(accelerator)
    assumptions = dataclasses.replace(DEFAULTS, layer_latency_us=setting["layer_us"], bandwidth_efficiency=efficiency)
    args = (setting["model"], device, setting["precision"], setting["power_basis"], assumptions)
    try:
        expected = _rows_as_they_were(*args)
    except ValueError:
        return
    if expected.empty:
        with pytest.raises(ValueError, match="does not fit"):
            crosschip.rows(*args)
        return
    pd.testing.assert_frame_equal(crosschip.rows(*args), expected, check_exact=True)
    pd.testing.assert_frame_equal(crosschip.frontier(*args), _frontier_as_it_was(expected), check_exact=True)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), accelerator=st.sampled_from(["h100", "gb300", "mi355x", "b200"]),
       multiples=st.lists(st.floats(0.5, 1000.0), min_size=1, max_size=6), target=st.floats(1.0, 3000.0))
def test_many_bandwidths_read_at_once_are_each_chips_own_frontier_read_at_the_target(model, accelerator, multiples,
                                                                                      target):
    device = chip(accelerator)
    try:
        crosschip.frontier(model, device)
    except ValueError:
        return
    bandwidths = [device.bandwidth_bytes_s * k for k in multiples]
    one_by_one = [crosschip.best_at(crosschip.frontier(model, dataclasses.replace(device, bandwidth_bytes_s=b)),
                                    target)[0] for b in bandwidths]
    np.testing.assert_array_equal(crosschip._best_at_bandwidths(model, device, bandwidths, target), one_by_one)


def _gap_conditions_as_they_were(model, baseline, target, gaps):
    device = chip(baseline)

    def best(multiple):
        faster = dataclasses.replace(device, bandwidth_bytes_s=device.bandwidth_bytes_s * multiple)
        value = crosschip.best_at(crosschip.frontier(model, faster), target)[0]
        return float(value) if np.isfinite(value) else 0.0

    base, rows = best(1.0), []
    top = best(inverse.MULTIPLE_SEARCH[1]) / base
    for gap in gaps:
        multiple = (float("nan") if top < gap else _bisect_one_step_at_a_time(
            lambda k: best(k) / base - gap, *inverse.MULTIPLE_SEARCH, steps=40) * (1 + 1e-9))
        rows.append({"gap": float(gap), "bandwidth_multiple": multiple,
                     "gap_reached": best(multiple) / base if np.isfinite(multiple) else float("nan"),
                     "power_share": 1.0 / float(gap), "baseline_tps_per_kw": base, "most_from_bandwidth": top})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("baseline, target", [("gb300", 100.0), ("h100", 50.0), ("mi355x", 20.0)])
def test_the_gap_conditions_are_the_one_point_at_a_time_search(baseline, target):
    gaps = (1.3, 2.1, 4.1, 900.0)
    pd.testing.assert_frame_equal(inverse.gap_conditions("deepseek-r1", baseline, target, gaps),
                                  _gap_conditions_as_they_were("deepseek-r1", baseline, target, np.asarray(gaps)),
                                  check_exact=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), accelerator=st.sampled_from([c for c in known_chips() if chip(c).power_known]),
       power_basis=st.sampled_from(crosschip.POWER_BASES), bandwidth=st.one_of(st.none(), st.floats(1e11, 1e14)))
def test_a_compiled_formula_computes_exactly_what_its_tree_computes(model, accelerator, power_basis, bandwidth):
    terms = crosschip.terms(model).to_dict("series")
    given_ = {**crosschip.chip_fields(accelerator, model), **crosschip.parameters(power_basis=power_basis)}
    if bandwidth is not None:
        given_["bandwidth"] = np.array([bandwidth, bandwidth * 2])[:, None]  # several chips at once, as the gap asks
    for formula in (crosschip.ADMISSION, crosschip.FORMULA):
        env = {**given_, **{k: np.asarray(v) for k, v in terms.items()}}
        compiled = formula.evaluate(terms, given_)
        for name, expr in formula.steps:
            env[name] = np.asarray(expr.evaluate(env), dtype=float)
            np.testing.assert_array_equal(compiled[name], env[name], strict=True)
