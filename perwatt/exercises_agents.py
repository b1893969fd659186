"""The agent chapter's exercises (one function per label, as :mod:`perwatt.exercises`, which
re-exports them): apart so that neither module passes the package's length limit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import agent_loop, agents, catalog, figures


def agents_ex_cache(cold: float = 0.0, warm: float = 0.9) -> dict:
    """The answer to the chapter's cache prompt: how far each system's task latency falls when the prefix-cache hit rate rises from cold to warm."""
    d = figures.agent_task().defaults()

    def latency(hit: float):
        return agents.task_comparison(figures.AGENT_MODEL, d["steps"], d["context_growth"], hit,
                                      d["tool_s"]).set_index("system")["latency_s"]

    drop = latency(cold) - latency(warm)
    return {"cold": cold, "warm": warm, "drop_jal": drop["jalapeno"], "drop_base": drop["gb300"]}


def agents_ex_tools(tool_lo: float = 0.0, tool_hi: float = 10.0) -> dict:
    """The task-latency advantage with no tool time and with ``tool_hi`` seconds between calls."""
    d = figures.agent_task().defaults()

    def task(tool_s: float) -> pd.DataFrame:
        return agents.task_comparison(figures.AGENT_MODEL, d["steps"], d["context_growth"], d["cache_hit"],
                                      tool_s).set_index("system")

    lo, hi = task(tool_lo), task(tool_hi)
    return {"tool_lo": tool_lo, "tool_hi": tool_hi,
            "adv_lo": lo["latency_advantage"].iloc[0], "adv_hi": hi["latency_advantage"].iloc[0],
            "tools_total": hi["tool_total_s"].iloc[0],
            "gap_s": hi.loc["gb300", "latency_s"] - hi.loc["jalapeno", "latency_s"]}


def agents_ex_minute(output_tokens: int = 1024, gap_s: float = 60.0) -> dict:
    """Calls a DeepSeek R1 task needs before the decode-time gap passes ``gap_s``."""
    p = agents.profiles(figures.AGENT_MODEL)
    per_call = output_tokens * (p["gb300"].tpot_s - p["jalapeno"].tpot_s)
    return {"output_tokens": output_tokens, "gap_s": gap_s, "per_call": per_call,
            "calls": int(np.floor(gap_s / per_call)) + 1}


def agents_ex_tail(p99_limit_s: float = 5.0, caps: tuple[int, int] = (1, 16)) -> dict:
    """The highest arrival rate on the figure's grid with p99 under the limit, for two batch caps."""
    idle = catalog.assumption("idle_power_fraction")
    out = {"limit": p99_limit_s, "cap_lo": caps[0], "cap_hi": caps[1]}
    for key, cap in (("rate_lo", caps[0]), ("rate_hi", caps[1])):
        curve = figures.serving_load_frame(cap, figures.serving_load().defaults()["arrival_rate"], idle)
        out[key] = float(curve.loc[curve["p99_s"] < p99_limit_s, "rate_rps"].max())
    return out


def _waiting(model: str = "deepseek-r1", steps: int = 10, hold: bool = True, measure: str = "energy"):
    """The waiting-agents figure's ratios at its default power shares, indexed by sessions and tool time."""
    d = figures.waiting_agents().defaults()
    frame = figures.waiting_agents_frame(model, steps, "held" if hold else "dropped", d["idle_fraction"],
                                         d["active_fraction"], measure)
    return frame.set_index(["sessions", "tool_s"])


def _loop(sessions: int, tool_s: float, hold: bool = True, idle: float | None = None,
          active: float | None = None) -> dict:
    """The closed loop behind the figure (its default model and calls) at one setting, for what the
    figure's frame does not carry: the batch in a call, the busy share, the throughput."""
    drawn, d = catalog.lengths(), figures.waiting_agents().defaults()
    out = agent_loop.per_watt_error(d["model"], figures.agent_workloads.LOOP_ACCELERATOR, sessions, d["steps"], tool_s,
                                    drawn.isl_mean, figures.agent_workloads.LOOP_GROWTH, drawn.osl_mean, hold, None,
                                    idle, active)
    return {**{k: float(v) for k, v in out.items()}, "tokens_per_s": float(out["calls_per_s"]) * drawn.osl_mean}


def agents_ex_wait(sessions: int = 8, tool_s: float = 30.0) -> dict:
    """Predict-then-check: the per-watt figure's error on a task with no tools and with long ones,
    and why: the batch in a call, the busy share, and the ratio if an idle chip drew nothing."""
    energy, cost = _waiting()["ratio"], _waiting(measure="cost")["ratio"]
    waited, no_idle = _loop(sessions, tool_s), _loop(sessions, tool_s, idle=0.0)
    return {"sessions": sessions, "tool": tool_s, "energy_0": energy[(sessions, 0)],
            "energy_t": energy[(sessions, tool_s)], "cost_t": cost[(sessions, tool_s)],
            "batch_t": waited["batch"], "busy_t": waited["busy_fraction"] * 100,
            "energy_t_no_idle": no_idle["energy_ratio"]}


def agents_ex_sessions(tool_s: float = 30.0, limit: float = 2.0) -> dict:
    """The fewest sessions on the figure's grid whose task energy stays within ``limit`` × the estimate."""
    ratio = _waiting()["ratio"].xs(tool_s, level="tool_s")
    served = _waiting()["sessions_served"].xs(tool_s, level="tool_s")
    return {"tool": tool_s, "limit": limit, "fewest": int(ratio[ratio < limit].index.min()),
            "ratio": float(ratio[ratio < limit].iloc[0]), "most": int(ratio.index.max()),
            "most_served": int(served.iloc[-1])}


def agents_ex_hold(sessions: int = 128, tool_s: float = 10.0) -> dict:
    """Energy per task with caches held through tools and with caches dropped (DeepSeek R1, ten calls),
    and the batch in a call, busy share and output tokens per second behind the difference."""
    held, dropped = (_waiting(hold=h)["ratio"][(sessions, tool_s)] for h in (True, False))
    loops = {"held": _loop(sessions, tool_s, True), "dropped": _loop(sessions, tool_s, False)}
    return {"sessions": sessions, "tool": tool_s, "held": held, "dropped": dropped,
            "served": int(_waiting()["sessions_served"][(sessions, tool_s)]),
            **{f"{k}_{name}": loop[v] * scale for name, loop in loops.items()
               for k, v, scale in (("batch", "batch", 1), ("busy", "busy_fraction", 100),
                                   ("tokens", "tokens_per_s", 1))}}
