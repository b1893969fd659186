"""Benchmark: `make test` on a fresh clone, as README's two commands run it. Target: ≤ 4 minutes.

Clones this repository's last commit into a temporary folder (with this repository's sibling
``shared/`` linked beside it, where there is one), runs `make book`, then times `make test`. For
each run it reports the wall time, pytest's own count, the CPU seconds of `make test` and of every
process it waited for (the workers, the kernels, the builds; not a process whose parent left it to
the system, as Chromium's can be), and on Linux the whole machine's busy CPU seconds meanwhile
(/proc/stat: user, nice, system, irq and softirq time of everything, including any other work
running then). On this 2-core machine the wall time of nearly the same tests has varied by a minute
from one run to another; we expect the CPU seconds to vary less, which is not yet shown for `make
test`. Uncommitted changes are not in the clone, so they are not measured. The clone reuses what is
cached in the home folder (pip's and npm's downloads), as a second clone on one machine would.
Each run's whole output is kept in ``perf/results/test_time-<commit>-<time>.log``, and its
failures and pytest's list of the slowest steps in the JSON report. A run takes about five minutes.

Run: .venv/bin/python perf/test_time.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from _common import REPO, RESULTS, median, table, write

TARGET_S = 240.0
#: Left out of the runs' environment: what would let a run reuse earlier work instead of doing its
#: own (a prebuilt site, a results store), point it at other data, or change what make and pytest run.
LEFT_OUT = ("PERWATT_SITE", "PERWATT_STORE", "PERWATT_DATA", "PYTEST_ADDOPTS", "MAKEFLAGS")


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds of the command and everything it waited for, and its outcome."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    outcome = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), outcome


def machine_busy_cpu_s() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (Linux), or None where /proc/stat is missing."""
    try:
        user, nice, system, _idle, _iowait, irq, softirq = (
            int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8])
    except (OSError, ValueError):
        return None
    # (guest time is already inside user and nice; steal is time the machine was not given)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def pytest_seconds(output: str) -> float | None:
    """Pytest's own count from its last summary line ("... 1533 passed in 227.0s (0:03:46) ...")."""
    found = re.findall(r"\bin ([0-9]+(?:\.[0-9]+)?)s\b", output)
    return float(found[-1]) if found else None


def one_run(folder: Path, env: dict[str, str]) -> dict:
    clone = folder / "repo"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    if (REPO.parent / "shared").is_dir():
        (folder / "shared").symlink_to(REPO.parent / "shared")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    book_s, _, book = _timed(["make", "book"], clone, env)
    if book.returncode != 0:
        raise SystemExit(f"make book failed in a fresh clone at {commit}:\n{(book.stdout + book.stderr)[-4000:]}")
    busy_before = machine_busy_cpu_s()
    test_s, test_cpu_s, test = _timed(["make", "test"], clone, env)
    busy_after = machine_busy_cpu_s()
    lines = test.stdout.splitlines()
    summary = next((line for line in reversed(lines) if " in " in line and "=" in line), "")
    # pytest's list of the slowest steps (Makefile: --durations=25), kept so that a slow run says where its time went
    start = next((i for i, line in enumerate(lines) if "slowest" in line and "durations" in line), len(lines))
    slowest = [line for line in lines[start + 1:] if re.match(r"\s*[0-9.]+s ", line)]
    failures = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    # The whole output, so that a failure in a clone (since removed) can still be read.
    log = RESULTS / f"test_time-{commit}-{time.strftime('%Y%m%dT%H%M%S')}.log"
    RESULTS.mkdir(exist_ok=True)
    log.write_text(test.stdout + test.stderr, encoding="utf-8")
    return {"commit": commit, "make_book_s": book_s, "make_test_s": test_s, "make_test_cpu_s": test_cpu_s,
            "machine_busy_cpu_s": None if busy_before is None else busy_after - busy_before,
            "pytest_s": pytest_seconds(summary), "passed": test.returncode == 0, "summary": summary.strip("= "),
            "failures": failures, "slowest": slowest, "log": log.name}


def main(runs: int = 1) -> dict:
    if subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout.strip():
        print("note: this repository has uncommitted changes; the clone measures its last commit without them")
    env = {k: v for k, v in os.environ.items() if k not in LEFT_OUT}
    samples = []
    for n in range(runs):
        # A process left behind (Chromium's, say) may still hold files in the clone as it is removed.
        with tempfile.TemporaryDirectory(prefix="perwatt-test-time-", ignore_cleanup_errors=True) as tmp:
            sample = one_run(Path(tmp), env)
        samples.append(sample)
        write("test_time", {"target_s": TARGET_S, "runs": samples})  # kept as each run ends
        busy = sample["machine_busy_cpu_s"]
        print(f"run {n + 1}: make test {sample['make_test_s']:.1f} s ({sample['make_test_cpu_s']:.0f} CPU s waited for, "
              f"{'?' if busy is None else f'{busy:.0f}'} machine-wide; "
              f"pytest {sample['pytest_s']} s; {sample['summary']}), make book {sample['make_book_s']:.1f} s", flush=True)
        for line in sample["failures"]:
            print(f"  {line}", flush=True)
    walls = [s["make_test_s"] for s in samples]
    report = {"target_s": TARGET_S, "runs": samples, "median_make_test_s": median(walls),
              "median_make_test_cpu_s": median([s["make_test_cpu_s"] for s in samples])}
    print(table([("make test on a fresh clone, median wall time", median(walls), TARGET_S, "s")]))
    print(f"(CPU seconds of make test and what it waited for, median: {report['median_make_test_cpu_s']:.0f}; "
          f"every run {'passed' if all(s['passed'] for s in samples) else 'did NOT pass'})")
    write("test_time", report)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1, help="fresh clones to time, one after another (default 1)")
    main(parser.parse_args().runs)
