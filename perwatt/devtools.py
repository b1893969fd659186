"""What the tests, the benchmark scripts and the Makefile share: the build, the table of contents,
a quiet local server, the browser, and running one chapter.

``python -m perwatt.devtools build [OUT]`` builds the book with the strict flags (the Makefile's
``make book``); ``python -m perwatt.devtools chapter NAME`` executes one chapter in a fresh kernel
and reports its first error, in seconds rather than a whole build (``make chapter NAME=...``).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The strict build: every warning an error, every reference checked, all problems reported.
BUILD_FLAGS = ("--warningiserror", "--nitpick", "--keep-going")


def jupyter_book() -> str:
    return str(Path(sys.executable).with_name("jupyter-book"))


def build(out: Path | None = None, *extra: str, timeout: float = 1200,
          environment: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Build the book strictly, into ``out`` (a fresh folder) or the repository's own ``_build``, with
    ``environment`` (this process's own, by default) and from the repository's folder."""
    where = ["--path-output", str(out)] if out is not None else []
    env = {k: v for k, v in (os.environ if environment is None else environment).items() if k != "PERWATT_RENDER"}
    return subprocess.run([jupyter_book(), "build", str(REPO), *where, *BUILD_FLAGS, *extra],
                          capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)


def toc_files(root: Path = REPO) -> list[str]:
    """Every file in the book's _toc.yml, in reading order (without the .md)."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    return [toc["root"]] + [c["file"] for part in toc.get("parts", []) for c in part["chapters"]]


def front_matter(text: str) -> str:
    return text.split("---", 2)[1] if text.startswith("---") else ""


def chapter_files(root: Path = REPO) -> list[Path]:
    """The executable chapters (those with a kernelspec), in reading order."""
    paths = [root / f"{f}.md" for f in toc_files(root)]
    return [p for p in paths if "kernelspec:" in front_matter(p.read_text(encoding="utf-8"))]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # A page closed mid-download (the browser moving on) is not a failure of the site.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


@contextmanager
def served(site: Path) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 for the duration; yields the base URL."""
    server = _Server(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


#: The full desktop browsers, in the order they are looked for.
FULL_CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Chromium's headless shell (Debian's package chromium-headless-shell, built from the same source and
#: version as chromium): the same Blink and V8 without the desktop browser's display compositor, and
#: what Playwright itself runs for headless tests. The browser tests take about half the CPU time in it.
HEADLESS_SHELLS = ("chromium-headless-shell",)
#: As root and without a network, Chromium needs these to start cleanly and stay quiet.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NO_BROWSER = ("No Chromium found for the browser tests. Install one: on Debian or Ubuntu "
              "`sudo apt-get install chromium chromium-headless-shell`; elsewhere `.venv/bin/python -m playwright install chromium` "
              "(needs internet); or point PERWATT_CHROMIUM at a Chromium or Chrome binary.")


def find_chromium(full: bool = False) -> str | None:
    """A system Chromium: the headless shell if there is one, else a full browser (``full``: only a
    full browser); the path in ``PERWATT_CHROMIUM`` either way. None lets Playwright use its own download."""
    explicit = os.environ.get("PERWATT_CHROMIUM")
    if explicit:
        return explicit
    for name in FULL_CHROMIUMS if full else HEADLESS_SHELLS + FULL_CHROMIUMS:
        found = shutil.which(name)
        if found:
            return found
    return None


@functools.cache  # one kernel manager class per process; each kernel it starts gets its own path
def kernel_options() -> dict:
    """NotebookClient options for the kernels the build and the tests start: Unix sockets where
    there are any, each kernel's at its own absolute path, so that kernels starting at once (two
    builds and the handouts in one test run) never race for a TCP port (jupyter_client picks a
    free one, frees it and lets the kernel bind it), and no kernel warns that its TCP traffic is
    unencrypted. Each kernel's client counts it ready as soon as it has answered
    (:func:`ready_client_class`)."""
    if os.name != "posix":
        return {}
    import tempfile
    import uuid

    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class SocketFileKernelManager(AsyncKernelManager):
        transport = "ipc"

        @default("ip")
        def _socket_files(self) -> str:
            # jupyter_client's own default is a path relative to the working folder, shared by every kernel there.
            return os.path.join(tempfile.gettempdir(), f"perwatt-kernel-{uuid.uuid4().hex}")

        @default("client_factory")
        def _ready_when_answered(self) -> type:
            return ready_client_class()

    return {"kernel_manager_class": SocketFileKernelManager}


@functools.cache
def ready_client_class() -> type:
    """jupyter_client's asynchronous kernel client, except that a kernel is ready once it has
    answered a kernel_info request and its IOPub channel has delivered a message (jupyter_client's
    own test that both channels are connected). jupyter_client then goes on reading IOPub until it
    has been silent for 0.2 s, dropping what comes: the kernel's busy and idle notices for those
    requests. NotebookClient reads only the messages that answer its own requests, so nothing it
    shows changes; each kernel start takes 0.16 s less (from 0.45 s to 0.29 s to ready, in six
    starts each way)."""
    from queue import Empty

    from jupyter_client.asynchronous import AsyncKernelClient

    class ReadyWhenAnsweredClient(AsyncKernelClient):
        async def wait_for_ready(self, timeout: float | None = None) -> None:
            give_up = time.monotonic() + (float("inf") if timeout is None else timeout)
            while True:
                self.kernel_info()
                try:
                    reply = await self.shell_channel.get_msg(timeout=1)
                except Empty:
                    reply = None
                if reply is not None and reply["msg_type"] == "kernel_info_reply":
                    try:
                        await self.iopub_channel.get_msg(timeout=0.2)
                    except Empty:
                        pass  # IOPub not connected yet: ask again
                    else:
                        self._handle_kernel_info_reply(reply)
                        return
                if not await self.is_alive():
                    raise RuntimeError("Kernel died before replying to kernel_info")
                if time.monotonic() > give_up:
                    raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")

    return ReadyWhenAnsweredClient


def run_chapter(name: str, timeout: float = 300) -> tuple[float, str | None]:
    """Execute one chapter, as the build would, in a fresh kernel: (seconds, first error or None)."""
    import jupytext
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = REPO / "chapters" / f"{name.removesuffix('.md')}.md"
    if not path.exists():
        names = sorted(p.stem for p in chapter_files())
        raise SystemExit(f"no chapter {name!r}; chapters: {', '.join(names)}")
    notebook = jupytext.read(path)
    os.environ["PERWATT_RENDER"] = "static"  # as the build renders charts
    start = time.perf_counter()
    try:
        NotebookClient(notebook, timeout=timeout, kernel_name="python3", **kernel_options(),
                       resources={"metadata": {"path": str(path.parent)}}).execute()
    except CellExecutionError as err:
        return time.perf_counter() - start, str(err).strip().splitlines()[-1]
    return time.perf_counter() - start, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perwatt.devtools", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the book strictly into _build/html")
    chapter = commands.add_parser("chapter", help="execute one chapter and report its first error")
    chapter.add_argument("name", help="a chapter file's name, e.g. per-watt")
    args = parser.parse_args(argv)
    if args.command == "build":
        env = {k: v for k, v in os.environ.items() if k != "PERWATT_RENDER"}
        return subprocess.run([jupyter_book(), "build", str(REPO), *BUILD_FLAGS], env=env).returncode
    seconds, error = run_chapter(args.name)
    print(f"{args.name}: {'ran cleanly' if error is None else 'failed: ' + error} in {seconds:.1f} s")
    return 0 if error is None else 1


if __name__ == "__main__":
    sys.exit(main())
