"""Figures of the agents-and-load chapter: one agent task, and one serving instance under load."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from perwatt import agent_loop, agents, catalog, data, load
from perwatt.figures.kit import (PHASE_COLOURS, STATISTIC_COLOURS, SYSTEM_COLOURS, colour, figure, framed,
                                 reference_line, tooltips)
from perwatt.interactive import Control, InteractiveFigure

#: The model whose agent task the chapter follows.
AGENT_MODEL = "deepseek-r1"


#: The parts of a task's time, each with the column of the comparison that holds it.
TASK_PARTS = {"prefill": "prefill_s", "decode": "decode_s", "tools": "tool_total_s"}


def agent_task_frame(steps: int, context_growth: float, cache_hit: float, tool_s: float) -> pd.DataFrame:
    """Each system's task time split into its parts (one row per part and system, part by part)."""
    # The comparison's columns, not its frame, tiled into one frame rather than melted and joined:
    # the grid asks for 300 of these.
    wide = agents._comparison_columns(AGENT_MODEL, int(steps), context_growth, cache_hit, tool_s)  # noqa: SLF001
    systems, parts = len(wide["system"]), len(TASK_PARTS)

    def tiled(name: str) -> np.ndarray:
        return np.tile(np.asarray(wide[name], dtype=float), parts)

    return pd.DataFrame({
        "system": wide["system"] * parts, "system_label": wide["system_label"] * parts,
        "latency_s": tiled("latency_s"), "energy_j": tiled("energy_j"),
        "latency_advantage": wide["latency_advantage"],
        "component": [part for part in TASK_PARTS for _ in range(systems)],
        "seconds": np.concatenate([np.asarray(wide[name], dtype=float) for name in TASK_PARTS.values()]),
        "energy_kj": tiled("energy_j") / 1000,
        # Each row also carries its system's three parts, so one label per bar can print them all:
        # at most settings one part is a sliver too thin to see on the bar itself.
        **{name: tiled(name) for name in TASK_PARTS.values()},
    })


def _draw_agent_task(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    # The axis follows the chosen task: a fixed axis sized for fifty calls would leave a ten-call
    # task as slivers. The total is written above each bar, so it never runs off the axis.
    x_scale = alt.Scale(zero=True, nice=True)
    y = alt.Y("system_label:N", title=None, sort=list(SYSTEM_COLOURS))
    bars = base.mark_bar(height=28).encode(
        x=alt.X("seconds:Q", title="Task latency, s", scale=x_scale, stack="zero"), y=y,
        color=colour("component", "Time spent in", PHASE_COLOURS), order=alt.Order("component:O", sort="descending"),
        tooltip=tooltips(("system_label:N", "System"), ("component:N", "Part"), ("seconds:Q", "Seconds", ",.1f")))
    one_per_bar = base.transform_filter("datum.component == 'decode'")
    totals = one_per_bar.mark_text(
        align="left", baseline="bottom", dy=-16, fontSize=12).encode(x=alt.datum(0), y=y, text="summary:N")
    # Every part's seconds under its bar, since a part of a second is invisible on a long task's axis.
    parts = one_per_bar.mark_text(
        align="left", baseline="top", dy=16, fontSize=11, color="#334155").encode(x=alt.datum(0), y=y, text="parts:N")
    chart = alt.layer(bars, totals, parts).transform_calculate(
        summary="format(datum.latency_s, ',.1f') + ' s, ' + format(datum.energy_kj, ',.2f') + ' kJ'",
        parts="'prefill ' + (datum.prefill_s < 10 ? format(datum.prefill_s, '.2f') : format(datum.prefill_s, ',.1f'))"
              " + ' s · decode ' + (datum.decode_s < 10 ? format(datum.decode_s, '.2f') : format(datum.decode_s, ',.1f'))"
              " + ' s · tools ' + format(datum.tool_total_s, ',.0f') + ' s'")
    return framed(chart, "One agent task: where the time goes",
                  ["DeepSeek R1: prefill of uncached context, decode of outputs, tool time.",
                   "The two systems' prefill inputs come from different evidence and are not comparable."],
                  420, alt.Step(72))


@figure
def agent_task() -> InteractiveFigure:
    """Stacked bars: the latency of one agent task on Jalapeño and on its NVIDIA baseline, split into
    prefill, decode and tool time, with the task's energy, for DeepSeek R1 and the chosen number of
    calls, context growth per call, prefix-cache hit rate and tool time."""
    return InteractiveFigure(
        controls=(
            Control("steps", "Model calls per task:", (1, 5, 10, 25, 50), 10, "select"),
            Control.slider("context_growth", "Context added per call, tokens:", 0, 4000, 1000, 1000, decimals=0),
            Control.slider("cache_hit", "Prefix-cache hit rate:", 0.0, 0.9, 0.3, 0.6, decimals=1),
            Control.slider("tool_s", "Tool time between calls, s:", 0, 10, 5, 5, decimals=0),
        ),
        compute=agent_task_frame, draw=_draw_agent_task,
        keys=("system", "component"), values=("seconds", "latency_s", "energy_j"), ships=("system_label", "energy_kj", "prefill_s", "decode_s", "tool_total_s"))


#: The arrival rates the load figure offers, requests/s: from a light load to past where the
#: largest cap saturates (a request takes over a second even alone, so the queue fills at a few per second).
LOAD_RATES = (0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
#: Idle draw the load figure offers, as a share of the rating (the default comes from assumptions.csv).
IDLE_SHARES = (0.1, 0.2, 0.5, 1.0)


@data.stored
def _load_curve(max_batch: int) -> pd.DataFrame:
    return load.load_curve(max_batch, LOAD_RATES)


def serving_load_frame(max_batch: int, arrival_rate: float, idle_power_fraction: float) -> pd.DataFrame:
    """The whole load curve for one batch cap, the chosen rate marked, with energy per token."""
    curve = _load_curve(int(max_batch))
    # On the columns' arrays, and one frame built at the end: the grid asks for 120 of these.
    column = {"rate_rps" if name == "arrival_rate" else name: curve[name].to_numpy() for name in curve.columns}
    column["joules_per_output_token"] = load.joules_per_output_token(
        column["rated_power_w"], column["chips"], column["busy_fraction"], column["throughput_tokens_per_s"],
        idle_power_fraction)
    column["selected"] = np.isclose(column["rate_rps"], arrival_rate)
    return pd.DataFrame(column)


def _draw_serving_load(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    rates = alt.Scale(type="log", domain=[LOAD_RATES[0], LOAD_RATES[-1]], nice=False)
    x = alt.X("rate_rps:Q", title="Arrival rate, requests/s (log)", scale=rates)
    y_scale = alt.Scale(type="log", domain=[float(grid["p50_s"].min()) / 1.5, float(grid["p99_s"].max()) * 1.5],
                        nice=False)
    lines = base.transform_fold(["p50_s", "p99_s"], as_=["statistic", "latency"]).mark_line(point=True).encode(
        x=x, y=alt.Y("latency:Q", title="Request latency, s (log)", scale=y_scale),
        color=colour("statistic", "Latency", STATISTIC_COLOURS,
                     labelExpr="datum.label == 'p50_s' ? 'median' : '99th percentile'"))
    chosen = base.transform_filter("datum.selected")
    rule = chosen.mark_rule().encode(x=x)
    # At the plot's left edge rather than beside the rule: beside a rule near the right, the summary
    # would run past the chart's edge on a narrow screen.
    text = chosen.mark_text(align="left", dx=4, y=12, fontSize=11).encode(
        x=alt.datum(LOAD_RATES[0], scale=rates), text="summary:N")
    chart = alt.layer(lines, rule, text).transform_calculate(
        summary="format(datum.throughput_tokens_per_s, ',.0f') + ' tok/s, p99 ' + format(datum.p99_s, '.2f') "
                "+ ' s, ' + format(datum.joules_per_output_token, '.2f') + ' J/token'")
    return framed(chart, "One serving instance under rising load",
                  f"{load.LOAD_MODEL} on {catalog.accelerator_label(load.LOAD_ACCELERATOR)}, continuous batching, "
                  f"{catalog.workload()['isl_tokens']:,}-token prompts, {load.LOAD_OSL}-token outputs.", 440, 260)


@figure
def serving_load() -> InteractiveFigure:
    """Line chart on log axes: median and 99th-percentile request latency of one simulated serving
    instance against the arrival rate, for the chosen cap on the batch size, with the throughput, tail
    latency and energy per output token at the chosen arrival rate; busy chips are charged their rated
    power and idle chips the chosen share of it."""
    return InteractiveFigure(
        controls=(
            Control("max_batch", "Largest batch:", (1, 16, 128), 16, "select"),
            Control("arrival_rate", "Arrival rate, requests/s:", LOAD_RATES, 2.0, "select"),
            Control("idle_power_fraction", "Idle draw, share of rated power (assumed):", IDLE_SHARES,
                    catalog.assumption("idle_power_fraction"), "select"),
        ),
        compute=serving_load_frame, draw=_draw_serving_load,
        keys=("rate_rps",), values=("p50_s", "p99_s", "throughput_tokens_per_s", "joules_per_output_token"),
        ships=("selected",))


#: The closed loop the waiting-agents figure runs: two models on one accelerator with a sourced rent.
LOOP_MODELS = ("gpt-oss-120b", "deepseek-r1")
LOOP_ACCELERATOR = "gb200"
#: Concurrent sessions drawn as lines, tool seconds along the axis, and the task shape around them.
LOOP_SESSIONS = (1, 8, 32, 128)
LOOP_TOOLS = (0, 2, 5, 10, 30, 60)
LOOP_STEPS = (5, 10, 25)
LOOP_GROWTH = 1000
IDLE_SHARES_LOOP = (0.0, 0.2, 0.4)
ACTIVE_SHARES = (0.43, 1.0)
SESSION_COLOURS = {"1": "#94a3b8", "8": "#0e7490", "32": "#7c3aed", "128": "#c2410c"}


@data.stored
def _loop_grid(model: str, steps: int, hold: bool) -> pd.DataFrame:
    # One vectorised call per model, task length and policy: sessions × tools × idle × active shares.
    sessions = np.array(LOOP_SESSIONS, dtype=float)[:, None, None, None]
    tools = np.array(LOOP_TOOLS, dtype=float)[None, :, None, None]
    idle = np.array(IDLE_SHARES_LOOP)[None, None, :, None]
    active = np.array(ACTIVE_SHARES)[None, None, None, :]
    drawn = catalog.lengths()
    out = agent_loop.per_watt_error(model, LOOP_ACCELERATOR, sessions, steps, tools, drawn.isl_mean, LOOP_GROWTH,
                                    drawn.osl_mean, hold, None, idle, active)
    index = pd.MultiIndex.from_product([LOOP_SESSIONS, LOOP_TOOLS, IDLE_SHARES_LOOP, ACTIVE_SHARES],
                                       names=["sessions", "tool_s", "idle", "active"])
    keep = ("energy_ratio", "cost_ratio", "sessions_served")
    frame = pd.DataFrame({k: out[k].ravel() for k in keep}, index=index).reset_index()
    frame["session_label"] = frame["sessions"].astype(str)
    return frame


def waiting_agents_frame(model: str, steps: int, cache: str, idle_fraction: float, active_fraction: float,
                         measure: str) -> pd.DataFrame:
    """Task ÷ single-round per-watt estimate, per sessions and tool time, for one setting; ``cache``
    is ``"held"`` (kept through tools) or ``"dropped"``."""
    if cache not in ("held", "dropped"):
        raise ValueError(f"cache must be 'held' or 'dropped', got {cache!r}")
    grid = _loop_grid(model, int(steps), cache == "held")
    chosen = np.isclose(grid["idle"].to_numpy(), idle_fraction) & np.isclose(grid["active"].to_numpy(), active_fraction)
    # On the columns' arrays, and one frame built at the end: the grid asks for 144 of these.
    ratio = grid[f"{measure}_ratio"].to_numpy()[chosen]
    return pd.DataFrame({**{name: grid[name].to_numpy()[chosen]
                            for name in ("sessions", "session_label", "tool_s", "sessions_served")}, "ratio": ratio})


def _draw_waiting_agents(base: alt.Chart, grid: pd.DataFrame) -> alt.LayerChart:
    y_scale = alt.Scale(type="log", domain=[float(grid["ratio"].min()) / 1.1, float(grid["ratio"].max()) * 1.1],
                        nice=False)
    lines = base.mark_line(point=True).encode(
        x=alt.X("tool_s:Q", title="Tool time between calls, s"),
        y=alt.Y("ratio:Q", title="Task ÷ per-watt estimate (log)", scale=y_scale),
        color=colour("session_label", "Sessions", SESSION_COLOURS),
        tooltip=tooltips(("sessions:Q", "Sessions asked"), ("sessions_served:Q", "Sessions that fit"),
                         ("tool_s:Q", "Tool s"), ("ratio:Q", "Ratio", ".2f")))
    chart = alt.layer(reference_line(1.0, y_scale, "y"), lines)
    return framed(chart, "Agents that wait: what a single-round per-watt figure misses",
                  [f"Closed loop on {catalog.accelerator_label(LOOP_ACCELERATOR)}; above 1 the 8k/1k figure "
                   "understates the task.", "Idle and busy power and the holding rule are assumptions."], 400, 260)


@figure
def waiting_agents() -> InteractiveFigure:
    """Line chart: the energy or cost of an agent task in a closed loop, divided by what a per-watt
    figure modelled on single-round 8k/1k requests at the same sessions predicts, against the tool
    time between calls, one line per number of concurrent sessions, for the chosen model, calls per
    task, cache policy during tools, and idle and busy power shares."""
    return InteractiveFigure(
        controls=(
            Control("model", "Model:", LOOP_MODELS, "deepseek-r1", "radio",
                    tuple(catalog.label(pd.DataFrame({"model": LOOP_MODELS}))["model_label"])),
            Control("steps", "Model calls per task:", LOOP_STEPS, 10, "select"),
            Control("cache", "During tools, the cache is:", ("held", "dropped"), "held", "radio"),
            Control("idle_fraction", "Idle draw, share of rating (assumed):", IDLE_SHARES_LOOP,
                    catalog.assumption("idle_power_fraction"), "select"),
            Control("active_fraction", "Busy draw, share of rating (assumed):", ACTIVE_SHARES,
                    catalog.assumption("active_power_fraction"), "select"),
            Control("measure", "Compare:", ("energy", "cost"), "energy", "radio", ("energy", "cost")),
        ),
        compute=waiting_agents_frame, draw=_draw_waiting_agents,
        keys=("sessions", "tool_s"), values=("ratio",), ships=("session_label", "sessions_served"))
