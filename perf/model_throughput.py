"""Benchmark: how fast the serving model evaluates, on this machine, in one run.

Evaluates ``perwatt.serving.serve`` on one million random configurations (batch, input and
output lengths, efficiencies) in one vectorized call, and times a full frontier (every
layout the sweep tries at every batch) as a figure's widget panel would run it. Prints a table and writes perf/results/model_throughput.json.
Timings on a shared machine are noisy: read them as orders of magnitude against the targets.

Run: .venv/bin/python perf/model_throughput.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from perwatt import roofline, serving

CONFIGURATIONS = 1_000_000
TARGET_MILLION_S = 1.0
TARGET_FRONTIER_S = 0.05  # a frontier redraw should fit well inside an interaction


def best_of(runs: int, work) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> dict:
    rng = np.random.default_rng(0)
    batch = 2.0 ** rng.integers(0, 11, CONFIGURATIONS)
    isl = rng.choice([1024.0, 8192.0], CONFIGURATIONS)
    osl = rng.choice([1024.0, 8192.0], CONFIGURATIONS)
    spec = roofline.model_spec("deepseek-r1")
    device = roofline.chip("gb300")
    million = best_of(3, lambda: serving.serve(spec, device, batch, isl, osl))
    frontier = best_of(5, lambda: serving.frontier("deepseek-r1", "gb300"))
    report = {
        "configurations": CONFIGURATIONS,
        "million_configurations_s": million,
        "million_target_s": TARGET_MILLION_S,
        "configurations_per_s": CONFIGURATIONS / million,
        "frontier_sweep_s": frontier,
        "frontier_target_s": TARGET_FRONTIER_S,
    }
    print(f"{'measure':<34}{'measured':>12}{'target':>12}{'ratio':>8}")
    print(f"{'10^6 configurations, s':<34}{million:>12.3f}{TARGET_MILLION_S:>12.3f}{million / TARGET_MILLION_S:>8.2f}")
    print(f"{'frontier: layouts x batches, s':<34}{frontier:>12.4f}{TARGET_FRONTIER_S:>12.3f}{frontier / TARGET_FRONTIER_S:>8.2f}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "model_throughput.json").write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
