"""The per-watt frontier chapter's figure: tokens/s per kW against tokens/s per user, chip by chip.

The page ships :func:`perwatt.crosschip.terms` for every model and precision, a table of chips, and
:data:`perwatt.crosschip.FORMULA` as calculate transforms; everything after that (the frontier, the
bands, the readout of A ÷ B at a target) is drawn by the same functions whether
the numbers come from the page or from Python (:func:`live`).
"""

from __future__ import annotations

import dataclasses
import inspect

import altair as alt
import numpy as np
import pandas as pd

from perwatt import bands, catalog, crosschip, data, instruments
from perwatt.computed import ComputedFigure
from perwatt.figures import cross_chip_page as page
from perwatt.figures.cross_chip_page import CHIP_NAMES, PRECISIONS, SLOTS, system_labels
from perwatt.figures.kit import framed, model_control, tooltips
from perwatt.interactive import Control, csv_data
from perwatt.specs import GIGA, TERA, chip

SLOT_DEFAULTS = {"system_a": crosschip.READER, "system_b": "gb300", "system_c": "mi355x", "system_d": "h100"}
#: Per-user targets the readout offers (a subset of bands.TARGETS, which the page reads curves at).
READOUT_TARGETS = (10.0, 20.0, 30.0, 50.0, 70.0, 100.0, 150.0)
X_DOMAIN, Y_DOMAIN = [1, 30_000], [5, 300_000]
#: Colours per system, fixed so a chip keeps its colour whichever slot it is picked in.
PALETTE = ("#c2410c", "#1d4ed8", "#15803d", "#7c3aed", "#0e7490", "#b45309", "#be123c", "#4d7c0f", "#64748b",
           "#a21caf", "#0f766e", "#1e293b")


def _colour() -> alt.Color:
    labels = list(system_labels().values()) + ["Jalapeño"]
    return alt.Color("label:N", title="System", scale=alt.Scale(domain=labels, range=list(PALETTE[:len(labels)])),
                     legend=alt.Legend(orient="bottom", columns=3))


def reader_from(setting: dict):
    return crosschip.reader_chip(setting["reader_tb_s"], setting["reader_tflops"], setting["reader_gb"],
                                 setting["reader_w"], int(setting["reader_domain"]))


def _assumptions(setting: dict):
    return dataclasses.replace(crosschip.DEFAULTS, layer_latency_us=float(setting["layer_us"]))


def reader_start() -> dict[str, float]:
    """Where the reader's chip starts, each from the data, not a guess at Jalapeño: the bandwidth of
    the HBM4 hypothesis (8 stacks at the standard's top speed), Jalapeño's rated watts, and a GB300's
    dense FP8 TFLOP/s and memory, for a chip to move away from."""
    gb300 = chip("gb300")
    return {"tb_s": instruments.jalapeno_bandwidth_hypothesis()["tb_s"], "w": catalog.power_w(catalog.CANDIDATE, "chip_rated"),
            "tflops": gb300.peak_flops["fp8"] / TERA, "gb": gb300.hbm_bytes / GIGA}


def controls() -> tuple[Control, ...]:
    labels = system_labels()
    names = (crosschip.READER, *CHIP_NAMES)
    start = reader_start()
    slot_controls = tuple(Control(s, f"System {s[-1].upper()}:", names, SLOT_DEFAULTS[s], "select",
                                  tuple(labels[n] for n in names)) for s in SLOTS)
    return (model_control(),
            Control("precision", "Experts:", ("as_released", "fp4"), "as_released", "radio",
                    ("as released", "FP4")),
            Control("power_basis", "Power:", crosschip.POWER_BASES, "rated", "radio",
                    ("rated", "modelled from load (assumption)")),
            *slot_controls,
            Control("target", "Readout at tokens/s per user:", READOUT_TARGETS, 50.0, "select"),
            Control.slider("layer_us", "Fixed time per layer, µs:", 0, 150, 1, crosschip.DEFAULTS.layer_latency_us),
            Control.slider("reader_tb_s", "Your chip: HBM TB/s:", 1, 32, 0.5, start["tb_s"]),
            Control.slider("reader_tflops", "Your chip: dense TFLOP/s:", 500, 20_000, 500, start["tflops"]),
            Control.slider("reader_gb", "Your chip: memory GB:", 32, 1024, 32, start["gb"]),
            Control.slider("reader_w", "Your chip: watts:", 100, 2000, 50, start["w"]),
            Control("reader_domain", "Your chip: scale-up domain:", (8, 72), 8, "radio", ("8 chips", "72 chips")),
            Control.slider("assumed_w", "Assumed watts where none is published (0: not drawn):", 0, 1500, 50, 0))


# --- What the page computes, and what Python computes for the same setting -----------------------

def live_frames(**setting) -> dict[str, pd.DataFrame]:
    """Python's numbers for every mark at one setting: the frontier points, the band at the
    targets, the ratio of system A to system B along them."""
    labels = system_labels()
    systems = [setting[s] for s in SLOTS]
    assumed = float(setting["assumed_w"]) or None
    curve = bands.curves(setting["model"], systems, setting["precision"], setting["power_basis"],
                             _assumptions(setting), reader=reader_from(setting), assumed_power_w=assumed)
    curve["label"] = curve["system"].map(labels)
    read = bands.at_targets(curve)
    read["label"] = read["system"].map(labels)
    try:
        ratio = bands.ratio_along(read, setting["system_a"], setting["system_b"])
    except ValueError:  # A or B is not drawn (no memory for the model, or no power given): no readout
        ratio = pd.DataFrame(columns=["t", "ratio", "ratio_low", "ratio_high"], dtype=float)
    return {"frontier": curve[curve["case"] == "central"].reset_index(drop=True), "band": read, "ratio": ratio}


def reported_points() -> pd.DataFrame:
    table = catalog.results()
    return pd.DataFrame({"model": table["model"], "label": table["system_label"],
                         "x": table["interactivity"], "y": table["tps_per_kw"],
                         "evidence": "reported, not independently verified"})


def measured_points() -> pd.DataFrame:
    """InferenceX's measured DeepSeek-R1 8k/1k points: total tokens/s per GPU ÷ rated kW."""
    table = catalog.measured("8k/1k")
    kw = table["hardware"].map(lambda n: chip(n).power_w / 1000)
    return pd.DataFrame({"model": "deepseek-r1", "system": table["hardware"],
                         "label": table["hardware"].map(system_labels()), "x": table["median_interactivity"],
                         "y": table["total_tokens_per_s_per_gpu"] / kw, "point_id": table["point_id"]})


# --- Drawing: the same marks over either source ------------------------------------------------------

def _xy(x: str = "x", y: str = "y"):
    return (alt.X(f"{x}:Q", title="Tokens/s per user (log)", scale=alt.Scale(type="log", domain=X_DOMAIN, nice=False)),
            alt.Y(f"{y}:Q", title="Total tokens/s per kW (log)",
                  scale=alt.Scale(type="log", domain=Y_DOMAIN, nice=False)))


def _main_layers(frontier_chart, band_chart, reported, measured, target_rule, readout):
    x, y = _xy()
    band = band_chart.mark_area(opacity=0.15, clip=True, aria=False).encode(
        x=alt.X("t:Q", scale=alt.Scale(type="log", domain=X_DOMAIN, nice=False)),
        y=alt.Y("low:Q", scale=alt.Scale(type="log", domain=Y_DOMAIN, nice=False)), y2="high:Q", color=_colour()).properties(name="band")
    tip = tooltips(("label:N", "System"), ("chips:Q", "Chips per instance"), ("batch:Q", "Sequences"),
                   ("x:Q", "Tokens/s per user", ",.1f"), ("y:Q", "Tokens/s per kW", ",.0f"), ("watts:Q", "W per chip", ",.0f"))
    line = frontier_chart.mark_line(point=alt.OverlayMarkDef(filled=True, size=40), clip=True).encode(
        x=x, y=y, color=_colour(), detail="system:N", order="x:Q", tooltip=tip).properties(name="frontier")
    # Hidden from screen readers: for two of the three models there are no measured points, and an
    # empty symbol group has no name for one to read (the table beside the chart carries the curves).
    seen = measured.mark_point(shape="circle", filled=False, size=30, opacity=0.6, clip=True, aria=False).encode(
        x=x, y=y, color=_colour(), tooltip=tooltips(("label:N", "Measured by InferenceX"), ("point_id:N", "Point"),
                                                     ("x:Q", "Tokens/s per user", ",.0f"), ("y:Q", "Tokens/s per kW", ",.0f"))).properties(name="measured")
    claimed = reported.mark_point(shape="diamond", filled=True, size=140, stroke="black").encode(
        x=x, y=y, color=_colour(), tooltip=tooltips(("label:N", "Reported"), ("evidence:N", "Evidence"),
                                                     ("x:Q", "Tokens/s per user", ",.0f"), ("y:Q", "TPS/kW", ",.0f"))).properties(name="reported")
    words = reported.mark_text(align="right", dx=-9, dy=-9, fontSize=11).encode(
        x=x, y=y, text=alt.Text("text:N")).transform_calculate(text="'reported: ' + datum.label")
    rule = target_rule.mark_rule(strokeDash=[4, 3], color="#334155").encode(
        x=alt.X("t:Q", scale=alt.Scale(type="log", domain=X_DOMAIN, nice=False)))
    text = readout.mark_text(align="left", x=6, y=8, fontSize=11, fontWeight="bold", lineBreak="\n").encode(
        text="readout:N").properties(name="readout")
    return alt.layer(band, rule, seen, line, claimed, words, text)


def _framed(main):
    return framed(main, "Work per watt at the same interactivity",
                  ["Lines: each chip's frontier in the serving model. Shaded: its band over bandwidth efficiency.",
                   "Diamonds: reported in one article's table. Circles: InferenceX's measured R1 runs.",
                   "Top left: system A ÷ system B at the readout's target."], 460, 320)


def static_chart() -> alt.TopLevelMixin:
    band = bands.efficiency_band()
    terms = pd.concat([crosschip.terms(m, p) for m in catalog.results()["model"].drop_duplicates()
                       for p in PRECISIONS], ignore_index=True)
    shipped = terms.assign(dp_attention=terms["dp_attention"].astype(int))
    top = alt.Chart(csv_data(shipped))
    frontier_chart = alt.Chart().transform_filter("datum.case == 'central'")
    band_chart = _steps(page.read_at_targets())
    # The readout reads the curves at the target alone, not at every target the band needs.
    readout = _steps([*page.read_at_target(), *page.ratio_steps(), {"calculate": page.readout_text(), "as": "readout"}])
    rule = alt.Chart(pd.DataFrame({"t": [0.0]})).transform_calculate(t="target")
    reported = alt.Chart(reported_points()).transform_filter("datum.model == model")
    measured = alt.Chart(measured_points()).transform_filter(
        "datum.model == model && indexof([" + ", ".join(SLOTS) + "], datum.system) >= 0")
    chart = _framed(_main_layers(frontier_chart, band_chart, reported, measured, rule, readout))
    chart.data = top.data
    chart.transform = page.shared_transforms(band)
    # Constants of the formula that no control moves, and the two derived from controls.
    fixed = {k: v for k, v in crosschip.parameters().items() if k not in ("layer_s", "modelled")}
    params = [alt.param(name=k, value=float(v)) for k, v in fixed.items()]
    params += [alt.param(name="layer_s", expr="layer_us * 1e-6"),
               alt.param(name="modelled", expr="power_basis == 'modelled' ? 1 : 0")]
    return chart.add_params(*params)


def _steps(steps: list[dict]) -> alt.Chart:
    """A layer with no data of its own that reads the shared rows through these transforms."""
    chart = alt.Chart()
    chart.transform = list(steps)
    return chart


def live(**setting) -> alt.TopLevelMixin:
    frames = live_frames(**setting)
    ratio = frames["ratio"]
    at = ratio[np.isclose(ratio["t"], setting["target"])].copy()
    if len(at):
        row = at.iloc[0]
        at["readout"] = (f"A ÷ B at ≥ {row['t']:,.0f} tokens/s per user:\n{row['ratio']:.2f}× "
                         f"({row['ratio_low']:.2f}–{row['ratio_high']:.2f})")
    rule = alt.Chart(pd.DataFrame({"t": [float(setting["target"])]}))
    reported = reported_points()
    measured = measured_points()
    measured = measured[(measured["model"] == setting["model"]) & measured["system"].isin([setting[s] for s in SLOTS])]
    return _framed(_main_layers(alt.Chart(frames["frontier"]), alt.Chart(frames["band"]),
                                alt.Chart(reported[reported["model"] == setting["model"]]), alt.Chart(measured), rule,
                                alt.Chart(at.assign(readout=at.get("readout", "")))))


@data.cached
def per_watt_frontier() -> ComputedFigure:
    """On log-log axes: total tokens per second per kW against tokens per second per user, one
    frontier line per chosen system from the serving model, with a shaded band for the range of
    bandwidth efficiency, the articles' reported points as diamonds and InferenceX's measured
    DeepSeek R1 points as circles, a dashed line at the chosen interactivity target, and a readout
    of system A's tokens per second per kW over system B's at that target, with its interval."""
    return ComputedFigure(controls=controls(), static=static_chart, live=live, table=default_table,
                          name="per-watt-frontier", description=" ".join(inspect.getdoc(per_watt_frontier).split()),
                          marks=("frontier", "band", "readout", "reported", "measured"),
                          download=("frontier", FRONTIER_COLUMNS))


#: What the page's data download gives for each frontier point drawn.
FRONTIER_COLUMNS = ("label", "system", "chips", "batch", "x", "y", "watts")


def default_table() -> pd.DataFrame:
    """The frontier points at the controls' starting settings, as a table."""
    frame = live_frames(**{c.name: c.default for c in controls()})["frontier"]
    return pd.DataFrame({"System": frame["label"], "Chips": frame["chips"].astype(int), "Sequences": frame["batch"].astype(int),
                         "Tokens/s per user": frame["x"].round(1), "Tokens/s per kW": frame["y"].round(0)})
