"""Benchmark: clean and cached build times, each as a ratio to an empty Jupyter Book built the same way.

Copies the book (the files git tracks) and a fresh `jupyter-book create` template into a temporary
folder, builds each from clean, then edits one sentence of prose in each and rebuilds with the cache.
Targets: clean build ≤ 3× the empty book; cached rebuild after a prose-only edit ≤ 1.2×.

Run: .venv/bin/python bench/build_time.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, table, write

FLAGS = ["--warningiserror", "--nitpick", "--keep-going"]
JB = str(Path(sys.executable).with_name("jupyter-book"))


def build(folder: Path) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run([JB, "build", str(folder), *FLAGS], capture_output=True, text=True)
    return time.perf_counter() - start, proc.returncode


def copy_book(target: Path) -> Path:
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target / name)
    return target


def edit_prose(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\nOne more sentence of prose, to time a rebuild.\n", encoding="utf-8")


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        book = copy_book(tmp / "book")
        empty = tmp / "empty"
        subprocess.run([JB, "create", str(empty)], capture_output=True, check=True)
        empty_clean, empty_rc = build(empty)
        book_clean, book_rc = build(book)
        edit_prose(empty / "markdown.md")
        edit_prose(book / "chapters" / "per-watt.md")
        empty_cached, _ = build(empty)
        book_cached, _ = build(book)
    report = {
        "empty_clean_s": empty_clean, "empty_cached_s": empty_cached, "empty_build_returncode": empty_rc,
        "book_clean_s": book_clean, "book_cached_s": book_cached, "book_build_returncode": book_rc,
        "clean_ratio": book_clean / empty_clean, "cached_ratio": book_cached / empty_cached,
        "clean_target": 3.0, "cached_target": 1.2,
    }
    print(table([
        ("clean build, book ÷ empty book", report["clean_ratio"], 3.0, "ratio"),
        ("cached rebuild after a prose edit, book ÷ empty book", report["cached_ratio"], 1.2, "ratio"),
    ]))
    print(f"(book {book_clean:.1f} s clean, {book_cached:.1f} s cached; "
          f"empty book {empty_clean:.1f} s clean, {empty_cached:.1f} s cached)")
    write("build_time", report)
    return report


if __name__ == "__main__":
    main()
