"""Benchmark: clean and cached build times, each as a ratio to an empty Jupyter Book built the same way.

Copies the book (the files git tracks) and a fresh `jupyter-book create` template into a temporary
folder, builds each from clean, then edits one sentence of prose in each and rebuilds with the cache.
Targets: clean build ≤ 3× the empty book; cached rebuild after a prose-only edit ≤ 1.2×.

One build of each is not enough on a shared 2-core machine: the same empty book's clean build has
taken anywhere from 3.2 to 8.4 s. So the two books take turns, the empty book's clean build three
times and the book's twice (each from nothing: output and execution cache removed), then five
rebuilds each after a prose edit; each ratio is of the medians, and every sample is reported.

Run: .venv/bin/python perf/build_time.py
"""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BUILD_FLAGS, REPO, median, table, write

from perwatt import execution

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
    """The files git tracks, and the package's bytecode, as `make book` leaves it (the Makefile's
    COMPILE): the kernels import perwatt from the copy, and a clean build removes the site and the
    execution cache, not Python's bytecode, as the empty book's packages keep theirs."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target / name)
    compileall.compile_dir(target / "perwatt", quiet=1)
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
    from perwatt import sphinxext, vegabundle

    costs = {}
    start = time.perf_counter()
    if vegabundle.vendored() is None:  # other versions installed: each clean build makes one
        vegabundle.written(tmp / "vega")
    costs["Vega bundle (found)"] = time.perf_counter() - start
    start = time.perf_counter()
    sphinxext.model_fingerprint()
    costs["model fingerprint"] = time.perf_counter() - start
    return costs


def clean_build(folder: Path) -> tuple[float, int, float]:
    shutil.rmtree(folder / "_build", ignore_errors=True)
    return build(folder)


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        book = copy_book(tmp / "book")
        empty = tmp / "empty"
        subprocess.run([JB, "create", str(empty)], capture_output=True, check=True)
        empties, books = [clean_build(empty)], []
        for _ in range(2):
            books.append(clean_build(book))
            empties.append(clean_build(empty))
        executing = _execution_seconds(book / "_build" / ".jupyter_cache")
        empty_cached, book_cached = [], []
        for _ in range(5):
            edit_prose(empty / "markdown.md")
            empty_cached.append(build(empty)[0])
            edit_prose(book / "chapters" / "per-watt.md")
            book_cached.append(build(book)[0])
        fixed = _fixed_costs(tmp)
    (empty_clean, empty_cpu), (book_clean, book_cpu) = ((median([b[0] for b in runs]), median([b[2] for b in runs]))
                                                        for runs in (empties, books))
    # The empty template's build warns, so under the book's strict flags it always ends with 1.
    empty_rc, book_rc = max(b[1] for b in empties), max(b[1] for b in books)
    cores = os.cpu_count() or 1
    report = {
        "empty_clean_s": empty_clean, "empty_cached_s": median(empty_cached), "empty_build_returncode": empty_rc,
        "book_clean_s": book_clean, "book_cached_s": median(book_cached), "book_build_returncode": book_rc,
        "samples_s": {"empty_clean": [b[0] for b in empties], "book_clean": [b[0] for b in books],
                      "empty_cached": empty_cached, "book_cached": book_cached},
        "empty_clean_cpu_s": empty_cpu, "book_clean_cpu_s": book_cpu, "cores": cores,
        "clean_ratio": book_clean / empty_clean, "cached_ratio": median(book_cached) / median(empty_cached),
        "clean_target": 3.0, "cached_target": 1.2,
        "chapter_execution_s": executing, "per_build_fixed_costs_s": fixed,
    }
    print(table([
        ("clean build, book ÷ empty book", report["clean_ratio"], 3.0, "ratio"),
        ("cached rebuild after a prose edit, book ÷ empty book", report["cached_ratio"], 1.2, "ratio"),
    ]))
    print(f"(medians: book {book_clean:.1f} s clean, {report['book_cached_s']:.1f} s cached; "
          f"empty book {empty_clean:.1f} s clean, {report['empty_cached_s']:.1f} s cached)")
    for name, samples in report["samples_s"].items():
        print(f"  {name}: " + ", ".join(f"{v:.2f}" for v in samples) + " s")
    total_exec = sum(executing.values())
    longest = sorted(executing, key=executing.get, reverse=True)[:len(execution.RUN_LONGEST)]
    report["run_longest"] = {"listed": list(execution.RUN_LONGEST), "measured": longest,
                             "still_longest": set(longest) == set(execution.RUN_LONGEST)}
    reasons = [
        f"clean: the chapters' kernels ran {total_exec:.1f} s in all, side by side on {cores} cores "
        f"(slowest: {max(executing, key=executing.get)} at {max(executing.values()):.1f} s), which the empty "
        f"book does not do",
        f"clean: the build used {book_cpu:.1f} CPU seconds, kernels included (the empty book {empty_cpu:.1f}); "
        f"on {cores} cores it cannot take less than {book_cpu / cores:.1f} s, "
        f"{book_cpu / cores / empty_clean:.1f}× the empty book, however it is scheduled",
        f"clean: perwatt/execution.py starts {', '.join(execution.RUN_LONGEST)} first; the longest in the last clean "
        f"build: {', '.join(f'{n} {executing[n]:.1f} s' for n in longest)}"
        + ("" if report["run_longest"]["still_longest"] else " (the list is out of date: update RUN_LONGEST)"),
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
