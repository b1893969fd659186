"""Run every benchmark and write perf/results/report.json. Run after `make book`:

    .venv/bin/python perf/all.py
"""

from __future__ import annotations

import browser_latency
import build_time
import byon_scale
import hub_load
import model_throughput
import page_weight
import widget_latency
from _common import write

if __name__ == "__main__":
    report = {}
    for name, module in [("model_throughput", model_throughput), ("byon_scale", byon_scale),
                         ("page_weight", page_weight),
                         ("browser_latency", browser_latency), ("widget_latency", widget_latency),
                         ("build_time", build_time), ("hub_load", hub_load)]:
        print(f"\n== {name}")
        report[name] = module.main()
    write("report", report)
