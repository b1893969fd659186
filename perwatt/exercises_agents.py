"""The agent chapter's exercises (one function per label, as :mod:`perwatt.exercises`, which
re-exports them): apart so that neither module passes the package's length limit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perwatt import agents, catalog, figures


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


def agents_ex_wait(sessions: int = 8, tool_s: float = 30.0) -> dict:
    """Predict-then-check: the per-watt figure's error on a task with no tools and with long ones."""
    energy, cost = _waiting()["ratio"], _waiting(measure="cost")["ratio"]
    return {"sessions": sessions, "tool": tool_s, "energy_0": energy[(sessions, 0)],
            "energy_t": energy[(sessions, tool_s)], "cost_t": cost[(sessions, tool_s)]}


def agents_ex_sessions(tool_s: float = 30.0, limit: float = 2.0) -> dict:
    """The fewest sessions on the figure's grid whose task energy stays within ``limit`` × the estimate."""
    ratio = _waiting()["ratio"].xs(tool_s, level="tool_s")
    served = _waiting()["sessions_served"].xs(tool_s, level="tool_s")
    return {"tool": tool_s, "limit": limit, "fewest": int(ratio[ratio < limit].index.min()),
            "ratio": float(ratio[ratio < limit].iloc[0]), "most": int(ratio.index.max()),
            "most_served": int(served.iloc[-1])}


def agents_ex_hold(sessions: int = 128, tool_s: float = 10.0) -> dict:
    """Energy per task with caches held through tools and with caches dropped (DeepSeek R1, ten calls)."""
    held, dropped = (_waiting(hold=h)["ratio"][(sessions, tool_s)] for h in (True, False))
    return {"sessions": sessions, "tool": tool_s, "held": held, "dropped": dropped,
            "served": int(_waiting()["sessions_served"][(sessions, tool_s)])}
