"""Shared helpers for the benchmark scripts: where results go and how they are printed."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from perwatt.devtools import CHROMIUM_ARGS, REPO, BUILD_FLAGS, find_chromium, served  # noqa: F401 (shared)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def site() -> Path:
    """The built site to measure: ``PERWATT_SITE`` (as for the tests) or the repository's own build."""
    chosen = os.environ.get("PERWATT_SITE")
    return Path(chosen).resolve() if chosen else REPO / "_build" / "html"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values)


def write(name: str, report: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(report, indent=2, default=float))
    return path


def table(rows: list[tuple[str, float, float, str]]) -> str:
    """rows of (measure, measured, target, unit): a ratio above 1 misses the target."""
    lines = [f"{'measure':<52}{'measured':>12}{'target':>10}{'ratio':>8}  unit"]
    for measure, measured, target, unit in rows:
        lines.append(f"{measure:<52}{measured:>12.4g}{target:>10.4g}{measured / target:>8.2f}  {unit}"
                     + ("" if measured <= target else "   MISSED"))
    return "\n".join(lines)
