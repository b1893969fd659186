"""The build's kernel pool (perwatt.execution) in real kernels: a kernel that has run one notebook
runs the next as a fresh kernel would, over the one connection it was warmed up with."""

from __future__ import annotations

from pathlib import Path

import pytest
from nbformat import v4

from perwatt import execution

pytestmark = pytest.mark.kernel


def _notebook(*sources: str):
    return v4.new_notebook(cells=[v4.new_code_cell(s) for s in sources])


def _text(cell) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs)


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory):
    """A warmed-up kernel (the pool's first step), and two chapter folders."""
    root = tmp_path_factory.mktemp("pool")
    first, second = root / "first", root / "second"
    first.mkdir()
    second.mkdir()
    owner = execution._warm_up(root, timeout=120)
    assert owner is not None, "no kernel started"
    yield owner, first, second
    execution._shut_down(owner)


def test_the_next_notebook_starts_fresh_on_the_same_connection(warm, monkeypatch) -> None:
    owner, first, second = warm
    connections = []
    opened = owner.km.client
    monkeypatch.setattr(owner.km, "client", lambda *a, **k: connections.append(1) or opened(*a, **k))

    one = _notebook("left_behind = 41\nleft_behind + 1")
    owner, ran = execution._run_one(owner, first / "a.md", one, None, 120, False)
    assert ran.error is None
    assert _text(one.cells[0]) == "42"

    two = _notebook("'left_behind' in dir()", "import os; os.getcwd()", "get_ipython().execution_count")
    owner, ran = execution._run_one(owner, second / "b.md", two, None, 120, False)
    assert ran.error is None
    assert _text(two.cells[0]) == "False"  # the namespace was reset
    assert Path(_text(two.cells[1]).strip("'")) == second  # the notebook's own folder
    assert [c.execution_count for c in two.cells] == [1, 2, 3]
    assert _text(two.cells[2]) == "3"
    # Both notebooks (and the reset between them) ran over the warm-up's connection.
    assert connections == []


def test_a_failing_notebook_is_reported_and_the_kernel_runs_the_next(warm) -> None:
    owner, first, _ = warm
    owner, ran = execution._run_one(owner, first / "bad.md", _notebook("1 / 0"), None, 120, False)
    assert ran.error is not None and "ZeroDivisionError" in ran.error
    assert owner is not None
    after = _notebook("6 * 7")
    owner, ran = execution._run_one(owner, first / "good.md", after, None, 120, False)
    assert ran.error is None and _text(after.cells[0]) == "42"


def test_a_kernel_is_stopped_at_once_not_asked_to_stop(tmp_path: Path) -> None:
    # Asked, a kernel that had run chapters sometimes took longer than the 2.5 s jupyter_client
    # waits before it sends SIGTERM; the build's kernels hold nothing worth a graceful exit.
    import signal

    owner = execution._warm_up(tmp_path, timeout=120)
    assert owner is not None, "no kernel started"
    process = owner.km.provisioner.process
    execution._shut_down(owner)
    assert process.poll() == -signal.SIGKILL
    assert owner.km is None and owner.kc is None  # the connection is closed too


def test_warm_kernels_show_printed_text_and_displays_in_the_order_a_cell_made_them(warm) -> None:
    # The warm-up stops output streams waiting when they hold nothing (perwatt.displays); text a
    # cell printed still comes before what it then displays, and after what it displayed before.
    owner, first, _ = warm
    cell = ("from myst_nb import glue\n"
            "print('before')\n"
            "glue('a_number', 41.5, display=False)\n"
            "print('between', flush=False)\n"
            "display(42)\n"
            "import sys; sys.stderr.write('after\\n')\n"
            "sys.stdout.flush.__qualname__, sys.stderr.flush.__qualname__")
    notebook = _notebook(cell)
    owner, ran = execution._run_one(owner, first / "order.md", notebook, None, 120, False)
    assert ran.error is None
    shown = [(o.output_type, o.get("name") or next(iter(o.get("data", {})), "")) for o in notebook.cells[0].outputs]
    texts = [o.get("text", "") for o in notebook.cells[0].outputs if o.output_type == "stream"]
    assert shown[:4] == [("stream", "stdout"), ("display_data", "application/papermill.record/text/plain"),
                         ("stream", "stdout"), ("display_data", "text/plain")], shown
    assert texts[:2] == ["before\n", "between\n"] and texts[2] == "after\n"
    assert _text(notebook.cells[0]).count("skip_empty_flushes") == 2


def test_a_kernel_is_ready_once_it_has_answered_and_its_first_cell_shows_only_its_own_outputs(tmp_path: Path) -> None:
    # Its client stops reading IOPub once the kernel has answered (devtools.ready_client_class): the
    # busy and idle notices left there are not the cell's and must not show as its outputs.
    from nbclient import NotebookClient

    from perwatt import devtools

    manager_class = devtools.kernel_options()["kernel_manager_class"]
    assert manager_class().client_factory is devtools.ready_client_class()
    notebook = _notebook("print('printed'); display('shown'); 'value'")
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", **devtools.kernel_options(),
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [(o.output_type, o.get("text") or o.get("data", {}).get("text/plain")) for o in notebook.cells[0].outputs]
    assert outputs == [("stream", "printed\n"), ("display_data", "'shown'"), ("execute_result", "'value'")]


def test_a_client_waiting_for_a_kernel_that_died_says_so(tmp_path: Path) -> None:
    import asyncio

    from perwatt import devtools

    async def wait_on_a_killed_kernel() -> dict:
        manager = devtools.kernel_options()["kernel_manager_class"]()
        await manager.start_kernel(cwd=str(tmp_path))
        client = manager.client()
        replies = []
        handle = client._handle_kernel_info_reply
        client._handle_kernel_info_reply = lambda msg: (replies.append(msg["content"]), handle(msg))
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=60)
            (answered,) = replies  # ready on the kernel's reply, not before it
            await manager.shutdown_kernel(now=True)
            with pytest.raises(RuntimeError, match="died"):
                await client.wait_for_ready(timeout=60)
            return answered
        finally:
            client.stop_channels()
            await manager.cleanup_resources()

    answered = asyncio.run(wait_on_a_killed_kernel())
    assert answered["status"] == "ok" and answered["implementation"] == "ipython"
