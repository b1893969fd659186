"""The per-watt frontier figure's page pipeline: the Vega-Lite transforms that take the shipped
terms to each shown system's frontier, band and readout in the browser.

They run :data:`perwatt.crosschip.FORMULA` and :data:`perwatt.crosschip.ADMISSION` as calculate
transforms and then read the curves as :mod:`perwatt.bands` does; tests compare the two at sampled
settings. :mod:`perwatt.figures.cross_chip` draws the marks over these rows or over Python's.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from perwatt import bands, catalog, crosschip
from perwatt.specs import GIGA, TERA, chip, known_chips, model_spec

#: The chips a reader may pick: every accelerator with memory and bandwidth in data/accelerators.csv.
CHIP_NAMES = tuple(known_chips())
SLOTS = ("system_a", "system_b", "system_c", "system_d")
CHIP_FIELDS = ("bandwidth", "hbm", "power_w", "scale_up", "scale_out", "domain",
               *(f"{op}_peak" for op in crosschip.OPS))
PRECISIONS = ("as_released", "fp4")
#: The formula steps the page keeps as columns (the rest it writes into these): what the marks and
#: tooltips show, and the two pass times every later step reads several times.
KEPT_STEPS = ("t_decode", "t_prefill", "tpot_s", "watts", "x", "y")
#: The steps the marks and tooltips show, taken from the case a frontier row is drawn in.
SHOWN_STEPS = ("watts", "x", "y")
#: What tells one frontier row from another (a system's layout at a batch), and what the marks,
#: tooltips and download show of it besides SHOWN_STEPS.
LAYOUT_FIELDS = ("system", "label", "chips", "ep", "dp_attention", "batch")


def system_labels() -> dict[str, str]:
    labels = {crosschip.READER: "your chip"}
    labels.update({name: catalog.accelerator_label(name) for name in CHIP_NAMES})
    return labels


def chips_table() -> pd.DataFrame:
    """The chip fields of every system for every model and precision (keyed ``system|model|precision``,
    since each operator's peak depends on its format); the reader's rows are placeholders the page
    fills from its sliders, and an unpublished power is 0 (the page then uses the assumed watts, or
    draws nothing)."""
    rows = []
    for model in catalog.results()["model"].drop_duplicates():
        spec = {p: model_spec(model).with_precision(p) for p in PRECISIONS}
        for precision in PRECISIONS:
            for name in CHIP_NAMES:
                device = chip(name)
                power = device.power_w if np.isfinite(device.power_w) else 0.0
                rows.append({"key": f"{name}|{model}|{precision}", "label": system_labels()[name],
                             **crosschip._fields(device, power, spec[precision])})  # noqa: SLF001 - the model's own fields
            rows.append({"key": f"{crosschip.READER}|{model}|{precision}", "label": "your chip",
                         **{f: 0.0 for f in CHIP_FIELDS}})
    return pd.DataFrame(rows)


def shared_transforms(band: dict) -> list[dict]:
    """The page's pipeline from shipped terms to each shown system's frontier points in each case."""
    reader = {"bandwidth": f"reader_tb_s * {TERA:g}", "hbm": f"reader_gb * {GIGA:g}", "power_w": "reader_w",
              "scale_up": repr(crosschip.reader_link_bytes_s()), "scale_out": "0", "domain": "reader_domain",
              **{f"{op}_peak": f"reader_tflops * {TERA:g}" for op in crosschip.OPS}}
    steps: list[dict] = [
        # A row per slot, flattened from constants before anything a control moves: the page copies
        # every row once, as it loads, and a control then reruns the later steps on the same rows
        # (copying rows of some thirty fields was most of a recompute's time).
        {"calculate": json.dumps(list(range(len(SLOTS)))), "as": "slot"},
        {"flatten": ["slot"]},
        {"filter": "datum.model == model && datum.precision == precision"},
        {"calculate": "[" + ", ".join(SLOTS) + "][datum.slot]", "as": "system"},
        {"calculate": "datum.system + '|' + model + '|' + precision", "as": "key"},
        {"lookup": "key", "from": {"data": {"values": json.loads(chips_table().to_json(orient="records"))},
                                   "key": "key", "fields": ["label", *CHIP_FIELDS]}},
    ]
    for name in CHIP_FIELDS:
        fallback = "(datum.power_w > 0 ? datum.power_w : assumed_w)" if name == "power_w" else f"datum.{name}"
        steps.append({"calculate": f"datum.system == '{crosschip.READER}' ? {reader[name]} : {fallback}", "as": name})
    steps += [
        {"filter": "datum.power_w > 0"},
        *crosschip.ADMISSION.vega(keep=("valid",)),
        {"filter": "datum.valid > 0"},
    ]
    # Each case's numbers as columns of the one row (x_low, y_central, ...), not a copy of the row
    # per case: copying rows of some fifty fields was most of the page's time.
    for case in bands.CASES:
        steps += crosschip.FORMULA.vega(keep=KEPT_STEPS, suffix=f"_{case}", given={"eta_m": band[case]})
    for case in bands.CASES:
        steps += _frontier_steps(case)
    # Only rows on some case's frontier are copied, once per case they are on; and only the fields
    # the marks, tooltips and download read (one row per layout, so each maximum is the row's own
    # value): the flattens below copy every field of a row, and a row had some eighty.
    steps += [
        {"filter": " || ".join(f"datum.front_{case}" for case in bands.CASES)},
        {"aggregate": [{"op": "max", "field": f"{name}_{case}", "as": f"{name}_{case}"}
                       for case in bands.CASES for name in (*SHOWN_STEPS, "front")],
         "groupby": list(LAYOUT_FIELDS)},
        {"calculate": json.dumps(list(bands.CASES)), "as": "case"},
        {"flatten": ["case"]},
        {"filter": "datum['front_' + datum.case]"},
        *({"calculate": f"datum['{name}_' + datum.case]", "as": name} for name in SHOWN_STEPS),
        *_targets_answered(),
    ]
    return steps


def _frontier_steps(case: str) -> list[dict]:
    """``front_<case>``: the row is on its system's frontier in that case. Fastest per user first
    (ties: most per kW first), a row is kept if it beats the best tokens/s per kW of every row before
    it. Sorted on negated values, ascending: the window sorts this page's Vega build gave descending
    orders were not honoured in a test."""
    x, y, order = f"x_{case}", f"y_{case}", [{"field": f"neg_x_{case}", "order": "ascending"},
                                             {"field": f"neg_y_{case}", "order": "ascending"}]
    return [
        {"calculate": f"-datum.{x}", "as": f"neg_x_{case}"},
        {"calculate": f"-datum.{y}", "as": f"neg_y_{case}"},
        {"window": [{"op": "max", "field": y, "as": f"best_{case}"}], "frame": [None, 0], "sort": order,
         "groupby": ["system"]},
        {"window": [{"op": "lag", "field": f"best_{case}", "as": f"best_faster_{case}"}], "sort": order,
         "groupby": ["system"]},
        {"calculate": f"!isValid(datum.best_faster_{case}) || datum.{y} > datum.best_faster_{case}",
         "as": f"front_{case}"},
    ]


def _reached(value: str) -> str:
    """How many of bands.TARGETS are at most ``value`` (an expression)."""
    return "(" + " + ".join(f"({value} >= {t:g} ? 1 : 0)" for t in bands.TARGETS) + ")"


def _targets_answered() -> list[dict]:
    """``targets``: the targets at which a frontier row is its case's best.

    Along a frontier, fastest first, tokens/s per kW rises strictly as tokens/s per user falls, so
    the best at a target is the slowest row still at least that fast: each row answers the targets
    above the next (slower) row's speed and up to its own. The band then copies each row once per
    such target rather than once per target (crosschip.best_at reads every row at every target)."""
    order = [{"field": "neg_x", "order": "ascending"}]
    return [
        {"calculate": "-datum.x", "as": "neg_x"},
        {"window": [{"op": "lead", "field": "x", "as": "slower_x"}], "sort": order, "groupby": ["system", "case"]},
        {"calculate": f"slice({json.dumps(list(bands.TARGETS))}, "
                      f"isValid(datum.slower_x) ? {_reached('datum.slower_x')} : 0, {_reached('datum.x')})",
         "as": "targets"},
    ]


# A layer whose data starts with a step that changes rows (a calculate, a window) gets a copy of
# every row of the shared pipeline first, so the band and the readout start with steps that make
# new rows (a flatten, an aggregate) and the shared pipeline does the rest.

def read_at_targets() -> list[dict]:
    """Frontier rows to the best tokens/s per kW at each target, one column per case."""
    return [{"flatten": ["targets"], "as": ["t"]},
            {"aggregate": [{"op": "max", "field": "y", "as": "best"}], "groupby": ["system", "label", "case", "t"]},
            *_band_ends()]


def read_at_target() -> list[dict]:
    """The same at the readout's target alone."""
    return [{"filter": "datum.x >= target"},
            {"aggregate": [{"op": "max", "field": "y", "as": "best"}], "groupby": ["system", "label", "case"]},
            {"calculate": "target", "as": "t"},
            *_band_ends()]


def _band_ends() -> list[dict]:
    """Each case's best per system and target to one row, with the band's ends."""
    return [
        {"pivot": "case", "value": "best", "groupby": ["system", "label", "t"]},
        {"filter": "isValid(datum.central)"},
        # The band's ends: the least and most of the cases that reach the target (bands.at_targets).
        {"calculate": "min(isValid(datum.low) ? datum.low : datum.central, datum.central, "
                      "isValid(datum.high) ? datum.high : datum.central)", "as": "band_low"},
        {"calculate": "max(isValid(datum.low) ? datum.low : datum.central, datum.central, "
                      "isValid(datum.high) ? datum.high : datum.central)", "as": "high"},
        {"calculate": "datum.band_low", "as": "low"},
    ]


def ratio_steps() -> list[dict]:
    pick = []
    for slot, side in (("system_a", "a"), ("system_b", "b")):
        for case in bands.CASES:
            pick.append({"calculate": f"datum.system == {slot} ? datum['{case}'] : null", "as": f"{case}_{side}"})
    fields = [f"{c}_{s}" for s in "ab" for c in bands.CASES]
    return [*pick,
            {"aggregate": [{"op": "max", "field": f, "as": f} for f in fields], "groupby": ["t"]},
            {"filter": "isValid(datum.central_a) && isValid(datum.central_b)"},
            {"calculate": "datum.central_a / datum.central_b", "as": "ratio"},
            {"calculate": "datum.low_a / datum.high_b", "as": "ratio_low"},
            {"calculate": "datum.high_a / datum.low_b", "as": "ratio_high"}]


def readout_text() -> str:
    return ("'A ÷ B at ≥ ' + format(datum.t, ',.0f') + ' tokens/s per user:\\n' + format(datum.ratio, '.2f') "
            "+ '× (' + format(datum.ratio_low, '.2f') + '–' + format(datum.ratio_high, '.2f') + ')'")
