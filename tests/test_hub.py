"""The workshop hub: the one-click links (fast), and a smoke test of deploy/jupyterhub (slow): the hub starts on
127.0.0.1, a student logs in with the room's password, follows a room link, gets a server, pulls the handouts
with nbgitpuller and runs the per-watt handout in a kernel of that server; then every process is stopped."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from perwatt import hub

REPO = Path(__file__).resolve().parent.parent
HUB = "https://hub.example.org"
HANDOUTS = "https://github.com/ORG/perwatt-handouts.git"


# --- Links ------------------------------------------------------------------------------------

def test_a_handout_link_is_nbgitpullers_format_exactly():
    assert hub.link(HUB, HANDOUTS, "01-per-watt.ipynb", "main") == (
        "https://hub.example.org/hub/user-redirect/git-pull"
        "?repo=https%3A%2F%2Fgithub.com%2FORG%2Fperwatt-handouts.git"
        "&urlpath=lab%2Ftree%2Fperwatt-handouts%2F01-per-watt.ipynb"
        "&branch=main&targetpath=perwatt-handouts")


def test_a_folder_inside_the_repository_a_hub_under_a_path_and_the_classic_interface():
    assert hub.link("http://10.0.0.5:8000/jhub/", "git@github.com:ORG/perwatt.git", "01-per-watt.ipynb",
                    "handouts", "room/day 1", "classic") == (
        "http://10.0.0.5:8000/jhub/hub/user-redirect/git-pull"
        "?repo=git%40github.com%3AORG%2Fperwatt.git"
        "&urlpath=tree%2Fperwatt%2Froom%2Fday%25201%2F01-per-watt.ipynb"
        "&branch=handouts&targetpath=perwatt")


def test_without_a_branch_the_link_leaves_it_to_the_repositorys_default():
    url = hub.link(HUB, "https://gitlab.com/a/b", None)
    assert url == ("https://hub.example.org/hub/user-redirect/git-pull"
                   "?repo=https%3A%2F%2Fgitlab.com%2Fa%2Fb&urlpath=lab%2Ftree%2Fb&targetpath=b")
    # Decoded, every value is what was given: nothing lost to encoding.
    assert {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()} == {
        "repo": "https://gitlab.com/a/b", "urlpath": "lab/tree/b", "targetpath": "b"}


def test_the_command_prints_the_folder_and_one_link_per_handout_in_reading_order():
    proc = subprocess.run([sys.executable, "-m", "perwatt", "links", "--hub", HUB, "--repo", HANDOUTS,
                           "--branch", "handouts"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert [name for name, _ in rows][:3] == ["all", "00-intro.ipynb", "01-per-watt.ipynb"]
    assert rows[2][1] == hub.link(HUB, HANDOUTS, "01-per-watt.ipynb", "handouts")
    assert all(url.startswith(f"{HUB}/hub/user-redirect/git-pull?repo=") for _, url in rows)


@pytest.mark.parametrize("argument, value, message", [
    ("--hub", "hub.example.org", "--hub 'hub.example.org' is not a web address"),
    ("--hub", "https://hub.example.org/hub/", "points inside the hub"),
    ("--hub", "https://hub.example.org/?x=1", "has a query or fragment"),
    ("--repo", "not a url", "--repo 'not a url' is not a git repository URL"),
    ("--repo", "ftp://example.org/x.git", "is not a git repository URL"),
    ("--branch", "two words", "--branch 'two words' is not a valid git branch name"),
    ("--branch", "a..b", "is not a valid git branch name"),
    ("--handouts-path", "../elsewhere", "--handouts-path '../elsewhere' must be a folder inside the repository"),
])
def test_a_bad_parameter_gets_a_message_naming_it_and_no_links(argument, value, message):
    args = {"--hub": HUB, "--repo": HANDOUTS, argument: value}
    proc = subprocess.run([sys.executable, "-m", "perwatt", "links", *[x for kv in args.items() for x in kv]],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("links: ") and message in proc.stderr, proc.stderr


# --- The hub, for real ------------------------------------------------------------------------

def _hubctl():
    pytest.importorskip("jupyterhub", reason="JupyterHub is not installed: `pip install -r requirements-hub.txt`")
    spec = importlib.util.spec_from_file_location("hubctl", REPO / "deploy" / "jupyterhub" / "hubctl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _handouts_repository(hubctl, site: Path, where: Path) -> Path:
    """The generated handouts, committed to a branch of their own, as the host publishes them."""
    return hubctl.publish_handouts(sorted((site / "handouts").glob("*.ipynb")), where / "perwatt-handouts")


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """As in a process started in the background (``&``) by a non-interactive shell, whose children inherit it."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _ignores_sigint(pid: int) -> bool:
    ignored = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)))


@pytest.mark.slow
@pytest.mark.hub
def test_a_student_logs_in_follows_a_link_and_runs_the_per_watt_handout_then_everything_stops(site, tmp_path):
    hubctl = _hubctl()
    repo = f"file://{_handouts_repository(hubctl, site, tmp_path)}"
    # Started as a host's script might start it: the hub stops its idle culler with SIGINT, which the
    # culler must not inherit as ignored (else the hub waits about 30 s for it, and our stop(), which waits
    # 30 s, may give up on the hub first).
    with _sigint_ignored():
        room = hubctl.Hub(tmp_path / "hub").start()
    try:
        async def student() -> None:
            ada = hubctl.Student(room, "ada")
            assert not await ada.log_in("not-the-password"), "the hub let a wrong password in"
            assert await ada.log_in(room.password)
            link = hub.link(room.url, repo, "01-per-watt.ipynb", "handouts")
            # Logged in but with no server yet, the link sends the student to start one, then to the pull.
            assert (await ada.follow(link)).startswith("/hub/spawn/ada?next=%2Fuser%2Fada%2Fgit-pull%3Frepo%3D")
            await ada.start_server()
            query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
            await ada.pull(query["repo"], query["branch"], query["targetpath"])
            notebook = query["urlpath"].removeprefix("lab/tree/")
            assert notebook == "perwatt-handouts/01-per-watt.ipynb"
            await ada.run_notebook(notebook, timeout=120)
            assert room.server_pid("ada") is not None

        # The browser tests' Playwright keeps an event loop running in this thread for the whole
        # session, where asyncio.run refuses to start; the student gets a thread and a loop of its own.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(lambda: asyncio.run(asyncio.wait_for(student(), 150))).result()
        cullers = [pid for pid in hubctl.tree(room.proc.pid) if "jupyterhub_idle_culler" in hubctl._command(pid)]
        assert len(cullers) == 1 and not _ignores_sigint(cullers[0]), cullers
    except Exception:
        print(room.log_tail(60))
        raise
    finally:
        started_processes = room.processes()
        leftovers = room.stop()
    assert len(started_processes) >= 4, started_processes  # hub, proxy, the student's server, its kernel
    assert room.stopped.startswith("on SIGTERM"), room.stopped
    assert leftovers == [], (f"still running after the hub stopped ({room.stopped}): {room.leftover_commands}\n"
                             f"{room.log_tail(60)}")
    assert room.processes() == []


def test_the_kubernetes_values_parse_and_set_what_the_room_needs():
    import yaml

    values = yaml.safe_load((REPO / "deploy" / "jupyterhub" / "z2jh-values.yaml").read_text(encoding="utf-8"))
    assert set(values) <= {"hub", "singleuser", "cull", "prePuller", "scheduling", "proxy"}
    assert values["hub"]["config"]["JupyterHub"]["authenticator_class"] == "shared-password"
    assert set(values["singleuser"]["memory"]) == {"limit", "guarantee"} == set(values["singleuser"]["cpu"])
    assert values["cull"]["enabled"] is True and values["cull"]["timeout"] == 3600
    assert values["singleuser"]["defaultUrl"] == "/lab"
    assert "nbgitpuller==" in (REPO / "binder" / "requirements.txt").read_text(encoding="utf-8")
