"""Benchmark: update latency of the live widget panels, in a real Jupyter kernel.

For each figure's panel, 50 updates of one control's value, each timed inside the kernel from the
assignment to the new chart having been handed to the widget (model recomputed, spec rebuilt, comm
message queued). Target: median ≤ 50 ms.

Run: .venv/bin/python perf/widget_latency.py
"""

from __future__ import annotations

import json

from jupyter_client.manager import start_new_kernel

from _common import table, write

UPDATES = 50

CODE = """
import json, time, statistics, perwatt
from perwatt import figures
perwatt.setup()
out = {}
for figure in figures.all_figures():
    panel = figure.panel()
    control = figure.controls[0]
    widget = panel.controls[control.name]
    values = [v for v in control.options]
    times = []
    for i in range(%d):
        value = values[(i + 1) %% len(values)]
        if control.widget == "slider":
            value = float(value)
        start = time.perf_counter()
        widget.value = value
        times.append((time.perf_counter() - start) * 1000)
    # Where the time goes: the model alone, and the chart spec alone, at the same settings.
    model_ms, chart_ms = [], []
    for i in range(10):
        setting = {control.name: values[(i + 1) %% len(values)]}
        start = time.perf_counter(); figure.frame(**setting); model_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter(); figure.chart_at(**setting).to_dict(validate=False)
        chart_ms.append((time.perf_counter() - start) * 1000)
    out[f"{figure.name}/{control.name}"] = {"median_ms": statistics.median(times), "max_ms": max(times),
                                            "model_ms": statistics.median(model_ms),
                                            "chart_spec_ms": statistics.median(chart_ms)}
print(json.dumps(out))
""" % UPDATES


def main() -> dict:
    manager, client = start_new_kernel(kernel_name="python3")
    chunks = []
    try:
        client.execute_interactive(CODE, timeout=600, store_history=False,
                                   output_hook=lambda m: chunks.append(m["content"].get("text", ""))
                                   if m["msg_type"] == "stream" else None)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    results = json.loads("".join(chunks))
    print(table([(f"{key} median", v["median_ms"], 50.0, "ms") for key, v in results.items()]))
    report = {"panels": results, "updates_per_panel": UPDATES, "median_target_ms": 50}
    for key, v in results.items():
        if v["median_ms"] > 50:
            line = (f"reason: {key}: {v['model_ms']:.1f} ms recomputing the model and {v['chart_spec_ms']:.1f} ms "
                    f"building the chart spec (which includes recomputing it) of the {v['median_ms']:.1f} ms update; "
                    "the rest is the widget's traitlets and comm message")
            report.setdefault("reasons", []).append(line)
            print(line)
    write("widget_latency", report)
    return report


if __name__ == "__main__":
    main()
