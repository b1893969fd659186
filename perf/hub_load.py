"""Benchmark: a room of N students on the workshop JupyterHub (deploy/jupyterhub), on this machine.

For each N, a fresh hub from deploy/jupyterhub/jupyterhub_config.py on 127.0.0.1 and free ports (spawner
"simple": every server as this Unix user, which is what differs from a real room; the servers, kernels and
code are the same). N students are created through the REST API, all at once as a room arrives; each starts
a server, pulls the handouts with nbgitpuller from a local git repository (the one-click link's work), then
opens the per-watt and prefill-decode handouts as JupyterLab does (a session, a kernel in their own server)
and runs every code cell over the kernel's websocket. Both kernels stay open, as they do in JupyterLab
until a student closes the tab or the kernel culler stops them.

Measured: seconds to a ready server; seconds to run each handout; each student's peak memory (their
server's process tree: the server and its kernels) and the room's (every process the hub started), sampled
each second from /proc as RSS (shared libraries counted in every process) and PSS (shared pages shared out:
the sum is what the machine really gives). Failures are counted, not raised. Every process is stopped.

Targets, for a room: every server ready within 30 s; each handout runs within 60 s; a student's peak PSS
within the configured 1.5 GB limit; no failures.

Run after `make book`: .venv/bin/python perf/hub_load.py [N ...]   (default 5 10 20; stops early when the
machine runs short of memory or time)
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import REPO, median, table, write

spec = importlib.util.spec_from_file_location("hubctl", REPO / "deploy" / "jupyterhub" / "hubctl.py")
hubctl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hubctl)

HANDOUTS = ("01-per-watt.ipynb", "03-prefill-decode.ipynb")
FOLDER = "perwatt-handouts"
BUDGET_S = 40 * 60  # the whole run; a room size that would start past it is skipped
MB_PER_STUDENT = 900  # to start a room size, the machine needs this much available per student, plus a reserve
RESERVE_MB = 2000
TARGETS = {"ready_s": 30.0, "run_s": 60.0, "student_mb": 1536.0}


def available_mb() -> float:
    return hubctl.meminfo_mb()["MemAvailable"]


def handouts_repository(where: Path) -> str:
    # The built site's copies: the same bytes `perwatt handouts` writes (tests/test_handouts.py checks).
    built = REPO / "_build" / "html" / "handouts"
    if not all((built / name).exists() for name in HANDOUTS):
        raise SystemExit(f"no handouts in {built}: run `make book` first")
    return f"file://{hubctl.publish_handouts(sorted(built.glob('*.ipynb')), where / FOLDER)}"


class Sampler(threading.Thread):
    """Peak memory per student and for the room, once a second, until stopped; flags a machine running short."""

    def __init__(self, hub, names: list[str]) -> None:
        super().__init__(daemon=True)
        self.hub, self.names = hub, names
        self.peak = {name: (0.0, 0.0) for name in names}
        self.room = (0.0, 0.0)
        self.low_memory = False
        self.used_start = self._used()
        self.used_peak = 0.0
        self.halt = threading.Event()

    @staticmethod
    def _used() -> float:
        info = hubctl.meminfo_mb()
        return info["MemTotal"] - info["MemAvailable"]

    def run(self) -> None:
        while not self.halt.wait(1.0):
            parents = hubctl._parents()
            everything = set(self.hub.processes()) | set(hubctl.tree(self.hub.proc.pid, parents))
            self.room = tuple(map(max, self.room, hubctl.memory(sorted(everything))))
            for pid in everything:
                environ = hubctl._environ(pid)
                name = environ.get("JUPYTERHUB_USER")
                if name in self.peak and parents.get(pid) == self.hub.proc.pid:  # the server, not a kernel
                    self.peak[name] = tuple(map(max, self.peak[name], hubctl.memory(hubctl.tree(pid, parents))))
            self.used_peak = max(self.used_peak, self._used() - self.used_start)
            if available_mb() < RESERVE_MB / 2:
                self.low_memory = True


async def one_student(student, repo: str, timeout: float) -> dict:
    result = {"name": student.name, "failures": []}
    try:
        await student.create()
        result["ready_s"] = await student.start_server(timeout=timeout)
        await student.pull(repo, "handouts", FOLDER, timeout=timeout)
        for notebook in HANDOUTS:
            result[notebook] = await student.run_notebook(f"{FOLDER}/{notebook}", timeout=timeout)
            result[f"kernel:{notebook}"] = student.kernel_start_s
    except Exception as err:  # noqa: BLE001 - a failure is a measurement here
        result["failures"].append(f"{type(err).__name__}: {str(err)[:300]}")
    return result


def room(n: int, repo: str, scratch: Path) -> dict:
    names = [f"student{i:02d}" for i in range(1, n + 1)]
    hub = hubctl.Hub(scratch / f"hub-{n}")
    start = time.perf_counter()
    hub.start()
    sampler = Sampler(hub, names)
    sampler.start()
    try:
        async def everyone():
            tasks = [asyncio.ensure_future(one_student(hubctl.Student(hub, name), repo, 120 + 30 * n)) for name in names]
            while not all(t.done() for t in tasks):
                if sampler.low_memory:
                    for t in tasks:
                        t.cancel()
                await asyncio.sleep(0.5)
            return [t.result() if not t.cancelled() else {"name": "?", "failures": ["cancelled: low memory"]}
                    for t in tasks]

        results = asyncio.run(everyone())
        time.sleep(2)  # one more sample with every kernel idle and loaded
    finally:
        sampler.halt.set()
        sampler.join(10)
        leftovers = hub.stop()
    wall = time.perf_counter() - start
    done = [r for r in results if not r["failures"]]
    summary = {"students": n, "wall_s": wall, "failures": [f"{r['name']}: {f}" for r in results for f in r["failures"]],
               "leftover_processes": leftovers, "stopped_for_low_memory": sampler.low_memory,
               "room_peak_rss_mb": sampler.room[0], "room_peak_pss_mb": sampler.room[1],
               "machine_used_peak_mb": sampler.used_peak, "per_student": results,
               "student_peak_rss_mb": {k: v[0] for k, v in sampler.peak.items()},
               "student_peak_pss_mb": {k: v[1] for k, v in sampler.peak.items()}}
    for key in ["ready_s", *HANDOUTS, *(f"kernel:{h}" for h in HANDOUTS)]:
        values = [r[key] for r in results if key in r]
        summary[key] = {"median": median(values), "max": max(values)} if values else None
    pss = [v for v in summary["student_peak_pss_mb"].values() if v]
    rss = [v for v in summary["student_peak_rss_mb"].values() if v]
    summary["student_pss_mb"] = {"median": median(pss), "max": max(pss)} if pss else None
    summary["student_rss_mb"] = {"median": median(rss), "max": max(rss)} if rss else None
    summary["completed"] = len(done)
    return summary


def print_table(rooms: list[dict]) -> None:
    print(f"{'N':>3} {'ready s med/max':>16} {'per-watt s med/max':>19} {'prefill s med/max':>18} "
          f"{'kernel s med/max':>17} {'student MB PSS med/max':>23} {'RSS max':>8} {'room MB PSS':>12} {'RSS':>7} {'fail':>5} {'wall s':>7}")
    for r in rooms:
        def pair(key, fmt="{:.1f}"):
            return "n/a" if not r.get(key) else f"{fmt.format(r[key]['median'])}/{fmt.format(r[key]['max'])}"
        print(f"{r['students']:>3} {pair('ready_s'):>16} {pair(HANDOUTS[0]):>19} {pair(HANDOUTS[1]):>18} {pair('kernel:' + HANDOUTS[0]):>17} "
              f"{pair('student_pss_mb', '{:.0f}'):>23} {(r['student_rss_mb'] or {}).get('max', 0):>8.0f} "
              f"{r['room_peak_pss_mb']:>12.0f} {r['room_peak_rss_mb']:>7.0f} {len(r['failures']):>5} {r['wall_s']:>7.0f}")


def main(sizes: list[int] | None = None) -> dict:
    sizes = sizes or [5, 10, 20]
    if not hubctl.PROXY.exists():
        raise SystemExit(hubctl.NO_PROXY)
    machine = {"cores": len(os.sched_getaffinity(0)), "available_mb_at_start": round(available_mb())}
    scratch = Path(tempfile.mkdtemp(prefix="perwatt-hub-load-"))
    began = time.perf_counter()
    rooms, skipped = [], []
    try:
        repo = handouts_repository(scratch)
        for n in sizes:
            need = n * MB_PER_STUDENT + RESERVE_MB
            if available_mb() < need:
                skipped.append(f"N={n}: {available_mb():.0f} MB available, {need} MB needed to start it")
                continue
            if time.perf_counter() - began > BUDGET_S:
                skipped.append(f"N={n}: past the {BUDGET_S / 60:.0f}-minute budget")
                continue
            print(f"\n== {n} students")
            rooms.append(room(n, repo, scratch))
            print_table(rooms[-1:])
            if rooms[-1]["stopped_for_low_memory"]:
                skipped.append(f"after N={n}: the machine ran short of memory; larger rooms not tried")
                break
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("\n== summary")
    print_table(rooms)
    rows = []
    for r in rooms:
        n = r["students"]
        if r["ready_s"]:
            rows.append((f"N={n}: slowest server to ready", r["ready_s"]["max"], TARGETS["ready_s"], "s"))
        for notebook in HANDOUTS:
            if r[notebook]:
                rows.append((f"N={n}: slowest run of {notebook}", r[notebook]["max"], TARGETS["run_s"], "s"))
        if r["student_pss_mb"]:
            rows.append((f"N={n}: largest student peak (PSS)", r["student_pss_mb"]["max"], TARGETS["student_mb"], "MB"))
    print(table(rows))
    for r in rooms:
        for failure in r["failures"]:
            print(f"failure, N={r['students']}: {failure}")
        if r["leftover_processes"]:
            print(f"N={r['students']}: {len(r['leftover_processes'])} process(es) outlived the hub and were killed")
    for line in skipped:
        print(f"skipped: {line}")
    report = {"rooms": rooms, "skipped": skipped, "targets": TARGETS, "handouts": HANDOUTS,
              "machine": machine}
    write("hub_load", report)
    return report


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or None)
