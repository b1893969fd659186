"""Benchmark: clean and cached build times, each as a ratio to an empty Jupyter Book built the same way.

Copies the book (the files git tracks) and a fresh `jupyter-book create` template into a temporary
folder, builds each from clean, then edits one sentence of prose in each and rebuilds with the cache.
Targets: clean build ≤ 3× the empty book; cached rebuild after a prose-only edit ≤ 1.2×.

Run: .venv/bin/python perf/build_time.py
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BUILD_FLAGS, REPO, table, write

JB = str(Path(sys.executable).with_name("jupyter-book"))


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def build(folder: Path) -> tuple[float, int, float]:
    """Wall seconds, return code, and CPU seconds of the build and every process it started (kernels too)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run([JB, "build", str(folder), *BUILD_FLAGS], capture_output=True, text=True)
    return time.perf_counter() - start, proc.returncode, _children_cpu() - cpu


def copy_book(target: Path) -> Path:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target / name)
    return target


def edit_prose(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\nOne more sentence of prose, to time a rebuild.\n", encoding="utf-8")


def _execution_seconds(cache_path: Path) -> dict[str, float]:
    """Seconds each chapter spent executing, as jupyter-cache recorded them."""
    from jupyter_cache import get_cache

    return {Path(r.uri).name: float(r.data.get("execution_seconds", 0.0))
            for r in get_cache(str(cache_path)).list_cache_records()}


def _fixed_costs(tmp: Path) -> dict[str, float]:
    """Work the book's extension does on every build, timed on its own."""
    from perwatt import sphinxext

    costs = {}
    sphinxext.write_vega_bundle(tmp / "vega")  # the first build generates it; later builds reuse it
    start = time.perf_counter()
    sphinxext.write_vega_bundle(tmp / "vega")
    costs["Vega bundle (reused)"] = time.perf_counter() - start
    start = time.perf_counter()
    sphinxext.model_fingerprint()
    costs["model fingerprint"] = time.perf_counter() - start
    return costs


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        book = copy_book(tmp / "book")
        empty = tmp / "empty"
        subprocess.run([JB, "create", str(empty)], capture_output=True, check=True)
        empty_clean, empty_rc, empty_cpu = build(empty)
        book_clean, book_rc, book_cpu = build(book)
        edit_prose(empty / "markdown.md")
        edit_prose(book / "chapters" / "per-watt.md")
        empty_cached, _, _ = build(empty)
        book_cached, _, _ = build(book)
        executing = _execution_seconds(book / "_build" / ".jupyter_cache")
        fixed = _fixed_costs(tmp)
    cores = os.cpu_count() or 1
    report = {
        "empty_clean_s": empty_clean, "empty_cached_s": empty_cached, "empty_build_returncode": empty_rc,
        "book_clean_s": book_clean, "book_cached_s": book_cached, "book_build_returncode": book_rc,
        "empty_clean_cpu_s": empty_cpu, "book_clean_cpu_s": book_cpu, "cores": cores,
        "clean_ratio": book_clean / empty_clean, "cached_ratio": book_cached / empty_cached,
        "clean_target": 3.0, "cached_target": 1.2,
        "chapter_execution_s": executing, "per_build_fixed_costs_s": fixed,
    }
    print(table([
        ("clean build, book ÷ empty book", report["clean_ratio"], 3.0, "ratio"),
        ("cached rebuild after a prose edit, book ÷ empty book", report["cached_ratio"], 1.2, "ratio"),
    ]))
    print(f"(book {book_clean:.1f} s clean, {book_cached:.1f} s cached; "
          f"empty book {empty_clean:.1f} s clean, {empty_cached:.1f} s cached)")
    total_exec = sum(executing.values())
    reasons = [
        f"clean: the chapters' kernels ran {total_exec:.1f} s in all, side by side on {cores} cores "
        f"(slowest: {max(executing, key=executing.get)} at {max(executing.values()):.1f} s), which the empty "
        f"book does not do",
        f"clean: the build used {book_cpu:.1f} CPU seconds, kernels included (the empty book {empty_cpu:.1f}); "
        f"on {cores} cores it cannot take less than {book_cpu / cores:.1f} s, "
        f"{book_cpu / cores / empty_clean:.1f}× the empty book, however it is scheduled",
        "cached: every build also pays " + ", ".join(f"{k} {v:.2f} s" for k, v in fixed.items())
        + f", {sum(fixed.values()):.1f} s in all, on top of Sphinx reading and writing 14 pages",
    ]
    report["reasons"] = reasons
    for line in reasons:
        print("reason:", line)
    write("build_time", report)
    return report


if __name__ == "__main__":
    main()
