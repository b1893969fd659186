"""Write data/inferencex_dsr1.csv from InferenceX-app's dashboard API snapshot.

The snapshot is ``packages/app/cypress/fixtures/api/benchmarks.json`` in SemiAnalysisAI/InferenceX-app
(read from the fork vngcloud/InferenceX-app at commit 528c4146). Every DeepSeek-R1 row is kept, in the
snapshot's order, for all three workloads. Columns are renamed with units; numbers are written at ten
significant digits; nothing is dropped or filled in (a missing power reading stays empty).

    git -C <InferenceX-app clone> show 528c4146:packages/app/cypress/fixtures/api/benchmarks.json > benchmarks.json
    python scripts/inferencex_snapshot.py benchmarks.json data/inferencex_dsr1.csv
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

WORKLOADS = {(1024, 1024): "1k/1k", (8192, 1024): "8k/1k", (1024, 8192): "1k/8k"}
#: Our column, then where it sits in a snapshot row ("metrics." for the measured values).
COLUMNS = {
    "workload": None, "isl_tokens": "isl", "osl_tokens": "osl",
    "hardware": "hardware", "framework": "framework", "precision": "precision", "spec_method": "spec_method",
    "disagg": "disagg", "multinode": "is_multinode", "concurrency": "conc",
    "prefill_gpus": "num_prefill_gpu", "decode_gpus": "num_decode_gpu",
    "prefill_tp": "prefill_tp", "prefill_ep": "prefill_ep", "prefill_dp_attention": "prefill_dp_attention",
    "prefill_workers": "prefill_num_workers",
    "decode_tp": "decode_tp", "decode_ep": "decode_ep", "decode_dp_attention": "decode_dp_attention",
    "decode_workers": "decode_num_workers",
    "total_tokens_per_s_per_gpu": "metrics.tput_per_gpu",
    "input_tokens_per_s_per_prefill_gpu": "metrics.input_tput_per_gpu",
    "output_tokens_per_s_per_decode_gpu": "metrics.output_tput_per_gpu",
    "median_interactivity": "metrics.median_intvty", "mean_interactivity": "metrics.mean_intvty",
    "median_e2e_latency_s": "metrics.median_e2el", "mean_e2e_latency_s": "metrics.mean_e2el",
    "median_ttft_s": "metrics.median_ttft", "mean_ttft_s": "metrics.mean_ttft",
    "median_tpot_s": "metrics.median_tpot", "mean_tpot_s": "metrics.mean_tpot",
    "avg_power_w": "metrics.avg_power_w", "joules_per_output_token": "metrics.joules_per_output_token",
    "joules_per_total_token": "metrics.joules_per_total_token",
    "date": "date", "run_id": "run_url",
}


def _cell(row: dict, where: str) -> str:
    value = row["metrics"].get(where[8:]) if where.startswith("metrics.") else row[where]
    if value is None:
        return ""
    if where == "run_url":  # .../actions/runs/<id>/attempts/1
        return value.split("/runs/")[1].split("/")[0]
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def rows(snapshot: list[dict]):
    kept = [r for r in snapshot if r["model"] == "dsr1"]
    for n, row in enumerate(kept, start=1):
        out = {"point_id": f"ix-{n:03d}"}
        for column, where in COLUMNS.items():
            out[column] = WORKLOADS[row["isl"], row["osl"]] if where is None else _cell(row, where)
        out["source_id"] = "inferencex-fixture"
        yield out


def main(source: str, target: str) -> None:
    snapshot = json.loads(Path(source).read_text(encoding="utf-8"))
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["point_id", *COLUMNS, "source_id"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows(snapshot))


if __name__ == "__main__":
    main(*sys.argv[1:3])
