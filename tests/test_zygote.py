"""Kernels forked from a zygote (perwatt.zygote), in real kernels: each is a kernel of its own to
jupyter_client and to the code it runs, starts with what the zygote loaded, and ends with the build."""

from __future__ import annotations

import os
import resource
import select
import sys
from pathlib import Path

import pytest
from nbclient import NotebookClient
from nbformat import v4

from perwatt import devtools, zygote

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(not zygote.available(), reason="kernels are forked on Linux only")]

#: A module no kernel imports at start, to tell a kernel the zygote loaded from one that loaded itself.
PRELOADED = "wave"


def _client(z: zygote.Zygote, *sources: str, cwd: Path) -> NotebookClient:
    manager = zygote.manager_class(devtools.kernel_options()["kernel_manager_class"], z)
    notebook = v4.new_notebook(cells=[v4.new_code_cell(s) for s in sources])
    return NotebookClient(notebook, timeout=120, kernel_name="python3", kernel_manager_class=manager,
                          resources={"metadata": {"path": str(cwd)}})


def _printed(client: NotebookClient) -> list[str]:
    return ["".join(o.get("text", "") for o in cell.outputs).strip() for cell in client.nb.cells]


def _ended(pid: int, timeout: float) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


@pytest.fixture
def z(tmp_path: Path):
    made = zygote.Zygote(f"import {PRELOADED}", tmp_path)
    yield made
    made.close()


def test_a_forked_kernel_is_a_kernel_of_its_own_with_what_the_zygote_loaded(z, tmp_path, monkeypatch) -> None:
    chapter = tmp_path / "chapter"
    chapter.mkdir()
    monkeypatch.setenv("PERWATT_ZYGOTE_PROBE", "from the build")
    client = _client(z, "import os, sys",
                     f"print({PRELOADED!r} in sys.modules)",
                     "print(os.getcwd())",
                     "print(os.environ['PERWATT_ZYGOTE_PROBE'])",
                     "print(os.getpgid(0) == os.getpid(), os.getppid())",
                     "print(sys.path)",
                     cwd=chapter)
    client.execute(cleanup_kc=False)
    try:
        pid = client.km.provisioner.pid
        assert isinstance(client.km.provisioner.process, zygote.ForkedKernel)
        printed = _printed(client)
        assert printed[1:4] == ["True", str(chapter), "from the build"]
        # Its own session, so a signal to its process group never reaches the build's; the zygote its parent.
        assert printed[4] == f"True {z.process.pid}"
        assert os.getpgid(pid) == pid != os.getpgid(0)
        # Its import path that of a kernel jupyter_client starts itself.
        usual = NotebookClient(v4.new_notebook(cells=[v4.new_code_cell("import sys\nprint(sys.path)")]), timeout=120,
                               kernel_name="python3", **devtools.kernel_options(),
                               resources={"metadata": {"path": str(chapter)}})
        usual.execute()
        assert printed[5] == _printed(usual)[0]
    finally:
        client._cleanup_kernel()
    assert _ended(pid, 10), "the kernel outlived its shutdown"


def test_a_kernel_the_zygote_cannot_stand_in_for_starts_as_jupyter_client_starts_it(z) -> None:
    assert z.serves([sys.executable, "-m", "ipykernel_launcher", "-f", "kernel.json"])
    assert not z.serves([sys.executable, "-m", "some_other_kernel", "-f", "kernel.json"])
    assert not z.serves(["/usr/bin/env", "-m", "ipykernel_launcher", "-f", "kernel.json"])


def test_stopping_the_zygote_stops_every_kernel_it_forked(tmp_path) -> None:
    z = zygote.Zygote("", tmp_path)
    client = _client(z, "import os\nprint(os.getpid())", cwd=tmp_path)
    client.execute(cleanup_kc=False)
    pid = int(_printed(client)[0])
    try:
        assert not _ended(pid, 0)
        z.close()  # the build's end, its kernel not shut down
        assert _ended(pid, 10), "a kernel outlived its zygote"
        assert z.process.returncode == 0
    finally:
        client.kc.stop_channels()


def test_a_forked_kernels_cpu_time_counts_as_the_builds(tmp_path) -> None:
    # perf/build_time.py reports the CPU time of the build and every process it started.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    z = zygote.Zygote("", tmp_path)
    client = _client(z, "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass",
                     cwd=tmp_path)
    client.execute(cleanup_kc=False)
    assert isinstance(client.km.provisioner.process, zygote.ForkedKernel), "the kernel was not forked"
    client._cleanup_kernel()
    z.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime >= 1.0
