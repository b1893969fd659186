"""Benchmark: bring-your-own numbers on a file of a million rows.

Writes a valid 10^6-row file in the long format of data/benchmark_results.csv (166,667 models,
each on a candidate and one baseline, three metrics each: 1,000,002 rows, about 40 MB) to a temporary folder, and
runs ``perwatt.benchmark.analyze`` on it in a child process, which reports its own peak resident
memory (``VmHWM`` in /proc/self/status; ``getrusage`` elsewhere): that of Python, pandas and the
analysis, not of the script that generated the file. Targets: ≤ 10 s and ≤ 400 MB.
Prints a table and writes perf/results/byon_scale.json.

Run: .venv/bin/python perf/byon_scale.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import table, write

ROWS = 1_000_000
TARGET_S, TARGET_MB = 10.0, 400.0

CHILD = """
import json, resource, sys, time
start = time.perf_counter()
from perwatt import benchmark
imported = time.perf_counter()
report = benchmark.analyze(sys.argv[1], candidate="chip")
done = time.perf_counter()
# VmHWM is this process's own peak: ru_maxrss would carry over the peak of the parent that forked it.
status = open("/proc/self/status").read() if sys.platform == "linux" else ""
hwm = [int(l.split()[1]) for l in status.splitlines() if l.startswith("VmHWM:")]
peak_kb = hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"import_s": imported - start, "analyze_s": done - imported, "rows": len(report.results),
                  "audit_rows": len(report.audit), "peak_kb": peak_kb}))
"""


def write_file(path: Path, rows: int = ROWS) -> int:
    """Plausible figures, each model on "chip" and "base", every metric once per pair: six rows a
    model, so the file has the first multiple of six at or above ``rows``. Returns the row count."""
    rng = np.random.default_rng(0)
    models = -(-rows // 6)
    pairs = 2 * models
    rate = rng.uniform(50, 500, pairs).round(0)
    latency = ((1024 / rate) * rng.uniform(1.05, 1.5, pairs)).round(2)
    frame = pd.DataFrame({
        "model": np.repeat([f"model-{i}" for i in range(models)], 6),
        "system": np.tile(np.repeat(["chip", "base"], 3), models),
        "metric": np.tile(["tps_per_kw", "e2e_latency_s", "interactivity"], pairs),
        "value": np.column_stack([rng.uniform(5_000, 90_000, pairs).round(0), latency, rate]).ravel(),
        "decimals": np.tile([0, 2, 0], pairs), "source_id": "my-lab", "note": "",
    })
    frame.to_csv(path, index=False)
    return len(frame)


def main() -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "million.csv"
        lines = write_file(path)
        size = path.stat().st_size
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"analyze failed on the generated file:\n{proc.stderr[-3000:]}")
        child = json.loads(proc.stdout.strip().splitlines()[-1])
    peak_mb = child.pop("peak_kb") / 1024
    report = {"rows": lines, "file_mb": size / 1e6, "wall_s": wall, **child, "peak_rss_mb": peak_mb,
              "target_s": TARGET_S, "target_mb": TARGET_MB}
    print(table([(f"analyze {lines:,} rows ({size / 1e6:.0f} MB): wall, incl. start-up", wall, TARGET_S, "s"),
                 ("  of which analyze() itself", child["analyze_s"], TARGET_S, "s"),
                 ("peak resident memory of the child process", peak_mb, TARGET_MB, "MB")]))
    write("byon_scale", report)
    return report


if __name__ == "__main__":
    main()
