"""Kernels forked, ready, from one process that has already imported what every chapter imports.

A clean build starts one kernel per core (:mod:`perwatt.execution`), and each started Python and
ipykernel, imported pandas, Altair and the package, and checked the data, before its first chapter:
the same work twice, at the point of the build where the cores are busiest. Here one process (the
*zygote*, :func:`serve`) does it once, and each kernel is a fork of it that goes on to start
ipykernel as ``python -m ipykernel_launcher`` would. jupyter_client manages such a kernel
as it manages any other, through a provisioner (:class:`ForkedProvisioner`): connection file,
signals to the kernel's process group, shutdown, clean-up.

What a kernel inherits is what the zygote imported and loaded before it forked: modules, and the
package's caches of the data (as a kernel that has run one chapter keeps them for the next,
:mod:`perwatt.execution`); it starts with its own environment variables, working folder and
namespace. What Python reads only as it starts (PYTHONHASHSEED, PYTHONPATH, ``-X`` options) is the
zygote's, which starts in the build's environment as the kernels do; and what a kernel writes to its
process's own stdout, not through ipykernel, goes to the build's stderr.

Linux only (a kernel forked this way is the zygote's child, not the build's: the build follows it
through a pidfd). Elsewhere, or when the zygote cannot serve, kernels start as jupyter_client starts them.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from jupyter_client.provisioning import LocalProvisioner

#: The command that starts a kernel, after the interpreter: what a zygote can stand in for.
KERNEL_MODULE = ["-m", "ipykernel_launcher"]


def available() -> bool:
    """Whether kernels can be forked here: Linux, with pidfds that work (a container's seccomp
    profile, or a kernel before 5.3, refuses them)."""
    if sys.platform != "linux" or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


# --- The zygote itself -------------------------------------------------------------------------

def serve(preload: str) -> None:
    """Run as the zygote: run ``preload`` (imports, data checks), then fork a kernel for each
    request read from stdin, one JSON object per line ({"args", "env", "cwd"}), answering each
    with the kernel's pid. A request to stop, or the end of stdin, stops the zygote, and any kernel
    still running with it, and waits for them all."""
    # As ipykernel_launcher does: the working folder ("-c" put it first) is not searched for imports
    # while they load; the kernel's shell puts it back where a kernel has it.
    if sys.path[:1] == [""]:
        del sys.path[0]
    # The answers go out on a copy of stdout; what anything else writes there goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    try:
        exec(compile(preload, "<perwatt zygote preload>", "exec"), {})
        from ipykernel import kernelapp  # noqa: F401 - what every kernel imports first
    except Exception:  # noqa: BLE001 - each kernel's warm-up repeats the preload; the build checks the data
        pass
    import gc

    gc.freeze()
    # No kernel is waited for before the end: until then an ended kernel keeps its number, so the
    # build's signals to its process group can reach no other; its pidfd has told the build.
    children = []
    for line in sys.stdin:
        try:
            request = json.loads(line)
            if request.get("stop"):
                break
            answer = {"pid": _fork_kernel(request["args"], request["env"], request["cwd"], answers.fileno())}
            children.append(answer["pid"])
        except Exception as err:  # noqa: BLE001 - the build starts this kernel itself instead
            answer = {"error": f"{type(err).__name__}: {err}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    for pid in children:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass  # its group is gone
    # Waited for, their CPU time counts as this process's children's, and so the build's
    # (perf/build_time.py reads it).
    for pid in children:
        os.waitpid(pid, 0)


def _fork_kernel(args: list[str], env: dict[str, str], cwd: str, answers: int) -> int:
    """A forked child that starts ipykernel with ``args``; its pid, once it leads a session of its
    own (so that a signal to its process group never reaches the zygote's, the build's) and is in
    ``cwd``. What stops it before its kernel starts, or ends the kernel, it prints on stderr."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the kernel
        code = 0
        try:
            os.close(ready_r)
            os.close(answers)
            os.setsid()
            os.chdir(cwd)
            os.write(ready_w, b"1")
            os.close(ready_w)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            os.environ.clear()
            os.environ.update(env, JPY_PARENT_PID=str(os.getppid()))  # ends with the zygote
            sys.argv = ["ipykernel_launcher", *args]
            from ipykernel import kernelapp

            kernelapp.launch_new_instance(argv=args)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
        except BaseException:  # noqa: BLE001 - reported, then the process ends here
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            import atexit

            atexit._run_exitfuncs()  # as an interpreter's exit would (IPython's history, a chapter's own)
            os._exit(code)
    os.close(ready_w)
    try:
        if os.read(ready_r, 1) != b"1":
            raise OSError("the forked kernel ended before it started")
    finally:
        os.close(ready_r)
    return pid


# --- The build's side --------------------------------------------------------------------------

class Zygote:
    """A zygote process for the kernels of one build (:func:`serve`): started at once, so that it
    loads while the build goes on; :meth:`fork` asks it for a kernel, :meth:`close` stops it."""

    def __init__(self, preload: str, cwd: Path) -> None:
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from perwatt import zygote; zygote.serve(sys.argv[1])", preload],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, text=True,
            start_new_session=True)  # a Ctrl-C at the build is the build's to handle

    def serves(self, cmd: list[str]) -> bool:
        """Whether a kernel started by ``cmd`` is one this zygote can fork (this interpreter's ipykernel)."""
        return (len(cmd) > 2 and cmd[1:3] == KERNEL_MODULE and self.process.poll() is None
                and os.path.abspath(cmd[0]) == os.path.abspath(sys.executable))

    def fork(self, args: list[str], env: dict[str, str], cwd: str) -> ForkedKernel:
        with self._lock:
            self.process.stdin.write(json.dumps({"args": args, "env": env, "cwd": cwd}) + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        try:
            answer = json.loads(line or '{"error": "the zygote ended"}')
            pid = None if "error" in answer else int(answer["pid"])
        except (ValueError, KeyError, TypeError) as err:
            raise OSError(f"perwatt.zygote: an answer that is not one: {line!r}") from err
        if pid is None:
            raise OSError(f"perwatt.zygote: {answer['error']}")
        return ForkedKernel(pid)

    def close(self) -> None:
        """Stop the zygote (and any kernel it forked that is still running)."""
        # Asked, not left to see its input end: a process forked from the build meanwhile
        # (perwatt.forked) holds that end open as long as it runs.
        with self._lock:
            if not self.process.stdin.closed:
                try:
                    self.process.stdin.write('{"stop": true}\n')
                    self.process.stdin.close()
                except OSError:
                    pass  # it has ended already
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


class ForkedKernel:
    """A forked kernel as jupyter_client handles a kernel process (the parts of
    :class:`subprocess.Popen` it uses), followed through a pidfd: it is not this process's child,
    so its exit status is not known here, and is reported as -1."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        return self.wait(0)

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is None:
            ended = select.poll()
            ended.register(self._pidfd, select.POLLIN)
            if ended.poll(None if timeout is None else timeout * 1000):
                self.returncode = -1
                os.close(self._pidfd)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        # As Popen does for a child that has ended: nothing to signal, no error.
        if self.returncode is None:
            try:
                signal.pidfd_send_signal(self._pidfd, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkedProvisioner(LocalProvisioner):
    """jupyter_client's local provisioner, the kernel forked from :attr:`zygote` when it can be."""

    zygote: Zygote | None = None

    async def launch_kernel(self, cmd: list[str], **kwargs: Any):
        if self.zygote is None or not self.zygote.serves(cmd):
            return await super().launch_kernel(cmd, **kwargs)
        try:
            self.process = self.zygote.fork(cmd[3:], dict(kwargs.get("env") or os.environ),
                                            str(kwargs.get("cwd") or os.getcwd()))
        except OSError:
            return await super().launch_kernel(cmd, **kwargs)
        # The kernel leads its own session: its process group is its pid, as for a kernel Popen starts.
        self.pid = self.pgid = self.process.pid
        self.cwd = kwargs.get("cwd") or os.getcwd()
        return self.connection_info


def manager_class(base: type, zygote: Zygote) -> type:
    """``base`` (a jupyter_client kernel manager class) with its kernels forked from ``zygote``."""

    class ForkingKernelManager(base):
        async def _async_pre_start_kernel(self, **kw: Any):
            if self.provisioner is None:
                import uuid

                self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
                self.provisioner = ForkedProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec,
                                                     parent=self)
                self.provisioner.zygote = zygote
            return await super()._async_pre_start_kernel(**kw)

    return ForkingKernelManager
