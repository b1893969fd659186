"""Drive the workshop hub from a script, as a room of students would: used by tests/test_hub.py (the smoke
test) and perf/hub_load.py (the load test), and usable by a host to try a hub before the day.

* :class:`Hub` starts JupyterHub with this folder's jupyterhub_config.py on 127.0.0.1 and free ports, in a
  folder of its own, and stops it and every process it started (it finds them by a marker in their
  environment, so a kernel that outlived its server is found too).
* :class:`Student` logs in through the hub's login form (the shared password), or is created through the REST
  API; starts a server; pulls the handouts with nbgitpuller; runs a notebook's code cells in a kernel of their
  own server over the Jupyter websocket protocol, as JupyterLab does.
* :func:`memory` reads resident and proportional memory of process trees from /proc.

Only loopback traffic; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "jupyterhub_config.py"
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent
PROXY = REPO / ".venv" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
# Tornado's client runs 10 requests at a time by default and times out the rest in its queue: a room is more.
AsyncHTTPClient.configure(None, max_clients=500)
NO_PROXY = (f"configurable-http-proxy not found at {PROXY}: install it with `make` (the Makefile's install step runs "
            "`npm ci --prefix .venv/node`; it needs Node.js 20+ and npm, on Debian `apt-get install nodejs npm`)")


class HubError(RuntimeError):
    """The hub, a server or a kernel did not do what a student needs, in time."""


def _port_pair() -> int:
    """A free loopback port whose next port is free too (the hub's API and the proxy's API)."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            try:
                with socket.socket() as second:
                    second.bind(("127.0.0.1", port + 1))
                    return port
            except OSError:
                continue
    raise HubError("no two adjacent free ports on 127.0.0.1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent to collect it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _command(pid: int) -> str:
    """The command line ``pid`` runs, or "" if it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").strip()
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _parents() -> dict[int, int]:
    parents = {}
    for pid in _pids():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def tree(root: int, parents: dict[int, int] | None = None) -> list[int]:
    """``root`` and all its descendants, by parent pid."""
    parents = _parents() if parents is None else parents
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += [child for child, parent in parents.items() if parent == pid]
    return found


def memory(pids: list[int]) -> tuple[float, float]:
    """(RSS, PSS) in MB summed over ``pids``. RSS counts shared libraries once per process, PSS shares them out:
    summed over every process on a machine, PSS is what they really use."""
    rss = pss = 0.0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        rss += int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1)) / 1024 if "VmRSS" in status else 0
        found = re.search(r"^Pss:\s+(\d+)", rollup, re.M)
        pss += int(found.group(1)) / 1024 if found else 0
    return rss, pss


def publish_handouts(notebooks: list[Path], repo: Path) -> Path:
    """Commit ``notebooks`` to the branch ``handouts`` of a new git repository at ``repo``, as a host
    publishes the generated handouts for nbgitpuller to pull."""
    repo.mkdir(parents=True)
    for notebook in notebooks:
        (repo / notebook.name).write_bytes(notebook.read_bytes())
    git = ["git", "-C", str(repo), "-c", "user.name=Host", "-c", "user.email=host@example.org"]
    subprocess.run(["git", "init", "--quiet", "--initial-branch=handouts", str(repo)], check=True, timeout=60)
    subprocess.run(git + ["add", "."], check=True, timeout=60)
    subprocess.run(git + ["commit", "--quiet", "-m", "Handouts"], check=True, timeout=60)
    return repo


def meminfo_mb() -> dict[str, float]:
    """This machine's /proc/meminfo, in MB."""
    lines = Path("/proc/meminfo").read_text().splitlines()
    return {key: int(value.split()[0]) / 1024 for key, value in (line.split(":", 1) for line in lines)}


class Hub:
    """The workshop hub from jupyterhub_config.py, on 127.0.0.1, with its state and students' homes under ``root``."""

    def __init__(self, root: Path, password: str | None = None, **env: str) -> None:
        if not PROXY.exists():
            raise HubError(NO_PROXY)
        self.root = Path(root)
        self.password = password or secrets.token_urlsafe(12)
        self.token = secrets.token_hex(32)
        self.run_id = uuid.uuid4().hex
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.env = {"PERWATT_HUB_PASSWORD": self.password, "PERWATT_HUB_IP": "127.0.0.1",
                    "PERWATT_HUB_PORT": str(self.port), "PERWATT_HUB_INTERNAL_PORT": str(_port_pair()),
                    "PERWATT_HUB_STATE": str(self.root / "state"), "PERWATT_HUB_SPAWNER": "simple",
                    "PERWATT_HUB_HOMES": str(self.root / "homes"), "PERWATT_HUB_PROXY": str(PROXY),
                    "PERWATT_HUB_API_TOKEN": self.token, "PERWATT_HUB_RUN": self.run_id, **env}
        self.proc: subprocess.Popen | None = None
        self.log = self.root / "jupyterhub.log"
        #: Set by stop(): how the hub went, and the command of each process still running after it.
        self.stopped: str = "not stopped"
        self.leftover_commands: dict[int, str] = {}

    def start(self, timeout: float = 60) -> Hub:
        (self.root / "state").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PERWATT_", "JUPYTERHUB_"))}
        env.update(self.env, PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(CONFIG)], cwd=self.root / "state",
                                         env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise HubError(f"jupyterhub exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                urllib.request.urlopen(f"{self.url}hub/api/", timeout=2)
                return self
            except OSError:
                time.sleep(0.25)
        raise HubError(f"the hub did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""

    def processes(self, also: set[int] = frozenset()) -> list[int]:
        """Every live process this hub started: the hub, its proxy and services, servers and kernels (by the
        marker in their environment), and any of ``also`` still alive."""
        return [pid for pid in _pids() if pid != os.getpid() and (
            pid in also or _environ(pid).get("PERWATT_HUB_RUN") == self.run_id) and _alive(pid)]

    def server_pid(self, name: str) -> int | None:
        for pid in self.processes():
            environ = _environ(pid)
            if environ.get("JUPYTERHUB_USER") == name and "singleuser" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                return pid
        return None

    def stop(self, timeout: float = 30) -> list[int]:
        """Stop the hub (which stops the servers and the proxy); returns the processes that were still alive
        afterwards, which it then kills. An empty list: everything stopped as it should. How the hub went
        and what each leftover ran are kept in ``stopped`` and ``leftover_commands``, to say why."""
        started = set(tree(self.proc.pid)) if self.proc is not None and self.proc.poll() is None else set()
        began = time.monotonic()
        self.stopped, self.leftover_commands = "not running", {}
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
                self.stopped = f"on SIGTERM, in {time.monotonic() - began:.1f} s"
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                self.stopped = f"killed: no exit within {timeout:.0f} s of SIGTERM"
        leftovers = []
        for _ in range(20):  # servers and kernels get a moment to exit after the hub
            leftovers = self.processes(started)
            if not leftovers:
                return []
            time.sleep(0.25)
        self.leftover_commands = {pid: _command(pid) for pid in leftovers}
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.processes(started):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            time.sleep(1)
        return leftovers

    def __enter__(self) -> Hub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- REST API ---------------------------------------------------------------------------------

    async def request(self, method: str, path: str, body: object = None, token: str | None = None,
                      headers: dict | None = None, timeout: float = 60, **kwargs) -> tuple[int, dict, str]:
        """(status, headers, text); never raises for an HTTP status."""
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"token {token}"
        data = body if isinstance(body, (str, bytes)) or body is None else json.dumps(body)
        if data is not None and not isinstance(body, (str, bytes)):
            headers.setdefault("Content-Type", "application/json")
        if method in ("POST", "PUT", "PATCH") and data is None:
            data = ""
        request = HTTPRequest(self.url + path.lstrip("/"), method=method, body=data, headers=headers,
                              request_timeout=timeout, connect_timeout=10, follow_redirects=False, **kwargs)
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except HTTPClientError as err:  # pragma: no cover - raise_error=False covers HTTP statuses
            response = err.response
        if response is None or response.code == 599:
            raise HubError(f"{method} {path}: no answer ({getattr(response, 'error', 'timeout')})")
        return response.code, response.headers, response.body.decode(errors="replace")

    async def admin(self, method: str, path: str, body: object = None, expect=(200, 201, 202, 204)) -> object:
        code, _, text = await self.request(method, f"hub/api/{path}", body, token=self.token)
        if code not in expect:
            raise HubError(f"{method} hub/api/{path}: {code} {text[:300]}")
        return json.loads(text) if text.strip() else None


class Student:
    """One simulated student on a :class:`Hub`."""

    def __init__(self, hub: Hub, name: str) -> None:
        self.hub, self.name, self.token = hub, name, None
        self.kernel_start_s: float | None = None
        self.cookies: dict[str, str] = {}

    def _keep(self, headers) -> None:
        for header in headers.get_list("Set-Cookie"):
            for key, morsel in SimpleCookie(header).items():
                self.cookies[key] = morsel.value

    def _cookie(self) -> dict[str, str]:
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}

    async def log_in(self, password: str) -> bool:
        """The hub's login form, as a browser fills it in; True if the hub let the student in."""
        code, headers, text = await self.hub.request("GET", "hub/login")
        self._keep(headers)
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', text)
        form = urlencode({"username": self.name, "password": password, "_xsrf": xsrf.group(1) if xsrf else ""})
        code, headers, _ = await self.hub.request("POST", "hub/login", form, headers={
            **self._cookie(), "Content-Type": "application/x-www-form-urlencoded"})
        self._keep(headers)
        if code != 302:
            return False
        # Logged in by cookie: ask for an API token for this student, as a script of theirs would.
        code, _, text = await self.hub.request("POST", f"hub/api/users/{self.name}/tokens", {"note": "hubctl"},
                                               headers={**self._cookie(), "X-XSRFToken": self.cookies.get("_xsrf", "")})
        if code not in (200, 201):
            raise HubError(f"logged in, but no token for {self.name}: {code} {text[:300]}")
        self.token = json.loads(text)["token"]
        return True

    async def create(self) -> None:
        """Through the REST API with the admin service's token: the load test's way in."""
        await self.hub.admin("POST", f"users/{self.name}", expect=(201, 409))
        self.token = (await self.hub.admin("POST", f"users/{self.name}/tokens", {"note": "hubctl"}))["token"]

    async def follow(self, link: str) -> str:
        """Open an nbgitpuller link (logged in by cookie); returns where the hub sends the student."""
        code, headers, _ = await self.hub.request("GET", link.removeprefix(self.hub.url), headers=self._cookie())
        if code not in (302, 303):
            raise HubError(f"{self.name}: the link answered {code}, not a redirect to their server")
        return headers["Location"]

    async def start_server(self, timeout: float = 180) -> float:
        """Ask for a server and wait until it answers; returns the seconds to a ready server."""
        start = time.perf_counter()
        code, _, text = await self.hub.request("POST", f"hub/api/users/{self.name}/server", token=self.token)
        if code not in (201, 202, 400):  # 400: already running
            raise HubError(f"{self.name}: server not started: {code} {text[:300]}")
        while time.perf_counter() - start < timeout:
            code, _, text = await self.hub.request("GET", f"user/{self.name}/api/status", token=self.token, timeout=30)
            if code == 200:
                return time.perf_counter() - start
            await asyncio.sleep(0.25)
        raise HubError(f"{self.name}: no ready server after {timeout:.0f} s")

    async def pull(self, repo: str, branch: str | None, folder: str, timeout: float = 120) -> None:
        """What the nbgitpuller link makes the student's server do: clone (or update) the handouts."""
        query = urlencode({"repo": repo, "targetpath": folder, **({"branch": branch} if branch else {})})
        code, _, text = await self.hub.request("GET", f"user/{self.name}/git-pull/api?{query}", token=self.token,
                                               timeout=timeout)
        events = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
        if code != 200 or not events or events[-1].get("phase") != "finished":
            raise HubError(f"{self.name}: nbgitpuller failed: {code} {(events[-1] if events else text)!s:.500}")

    async def run_notebook(self, path: str, timeout: float = 300) -> float:
        """Open ``path`` (relative to the student's home) as JupyterLab does, in a new kernel, and run every code
        cell in order; returns the seconds from the first cell sent to the last reply. Raises on a cell's error."""
        code, _, text = await self.hub.request("GET", f"user/{self.name}/api/contents/{path}", token=self.token)
        if code != 200:
            raise HubError(f"{self.name}: cannot open {path}: {code} {text[:200]}")
        cells = [c["source"] for c in json.loads(text)["content"]["cells"] if c["cell_type"] == "code"]
        opened = time.perf_counter()
        session = {"path": path, "type": "notebook", "name": "", "kernel": {"name": "python3"}}
        code, _, text = await self.hub.request("POST", f"user/{self.name}/api/sessions", session, token=self.token)
        if code not in (200, 201):
            raise HubError(f"{self.name}: no kernel for {path}: {code} {text[:300]}")
        kernel = json.loads(text)["kernel"]["id"]
        ws_url = self.hub.url.replace("http", "ws", 1) + f"user/{self.name}/api/kernels/{kernel}/channels"
        socket_ = await asyncio.wait_for(websocket_connect(HTTPRequest(
            ws_url, headers={"Authorization": f"token {self.token}"}), max_message_size=256 * 2**20), 60)
        session_id = uuid.uuid4().hex
        try:
            await self._call(socket_, session_id, "kernel_info_request", {}, 120)
            start = time.perf_counter()
            self.kernel_start_s = start - opened  # opening the notebook to a kernel that answers
            for number, source in enumerate(cells, 1):
                reply = await self._call(socket_, session_id, "execute_request", {
                    "code": source, "silent": False, "store_history": True, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True}, timeout)
                if reply["status"] != "ok":
                    raise HubError(f"{self.name}: {path}, code cell {number}: {reply.get('ename')}: {reply.get('evalue')}")
            return time.perf_counter() - start
        finally:
            socket_.close()

    async def _call(self, socket_, session_id: str, msg_type: str, content: dict, timeout: float) -> dict:
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": msg_type, "username": self.name, "session": session_id,
                  "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "version": "5.3"}
        await socket_.write_message(json.dumps({"header": header, "parent_header": {}, "metadata": {},
                                                "content": content, "channel": "shell", "buffers": []}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HubError(f"{self.name}: no {msg_type} reply within {timeout:.0f} s")
            message = await asyncio.wait_for(socket_.read_message(), left)
            if message is None:
                raise HubError(f"{self.name}: the kernel's websocket closed during {msg_type}")
            if isinstance(message, bytes):
                continue  # binary frames carry widget buffers
            message = json.loads(message)
            if message.get("channel") == "shell" and message["parent_header"].get("msg_id") == msg_id:
                return message["content"]
