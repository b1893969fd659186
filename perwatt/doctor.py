"""The workshop setup check: ``python -m perwatt doctor``.

Run from the repository folder, with the Python the workshop will use. It prints one line per check
and, under each failed one, the command that fixes it; it exits 1 if any check failed, 0 otherwise.

It must work where nothing else does: in a bare environment, and on a Python too old for the book.
So this module imports only the standard library at module level and parses on Python 3.8 and
newer; it checks the Python version first and stops there if it is too old; every other check
imports what it needs inside itself, and an error a check did not expect becomes a failed check
rather than a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.util
import io
import os
import re
import shlex
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: A student's set (requirements.txt less the tools that build the book), and those tools (tests/test_kit.py).
STUDENT = "requirements-student.txt"
BOOK_TOOLS = ("jupyter-book", "sphinx-book-theme", "sphinx-exercise", "sphinxcontrib-bibtex")
#: The project's floor: ``requires-python`` in pyproject.toml (tests/test_doctor.py holds them equal).
MIN_PYTHON = (3, 11)
KERNEL_TIMEOUT = 60


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


# --- Fixes ------------------------------------------------------------------------------------

def _sh(path: Path | str) -> str:
    return shlex.quote(str(path))


def default_requirements(repo: Path = REPO, tools: tuple[str, ...] = BOOK_TOOLS) -> Path:
    """The pins to compare with: requirements.txt where a book-building tool is installed, else the student set."""
    from importlib import metadata

    book, student = repo / "requirements.txt", repo / STUDENT
    for name in tools:
        with contextlib.suppress(metadata.PackageNotFoundError):
            metadata.version(name)  # raises if it is not installed
            return book
    return student if student.is_file() else book


def install_fix(requirements: Path | None = None) -> str:
    """The command that installs the pinned packages into the environment running this check."""
    requirements = Path(requirements) if requirements else default_requirements()
    target = requirements.name if requirements.parent == REPO else _sh(requirements.resolve())
    if sys.prefix == sys.base_prefix:  # not a virtual environment: pip would install for the whole system
        venv = r".venv\Scripts\python" if sys.platform == "win32" else ".venv/bin/python"
        make = ("make book" if target == "requirements.txt" else
                f"{_sh(sys.executable)} -m venv .venv && {venv} -m pip install -r {target}")
        return (f"This Python is not in a virtual environment: make the project's own (.venv, with the pinned packages): "
                f"`cd {_sh(REPO)} && {make}`, then run `{venv} -m perwatt doctor`.")
    python = _sh(sys.executable)
    command = f"{python} -m pip install -r {target}"
    if importlib.util.find_spec("pip") is None:
        command = f"{python} -m ensurepip && {command}"
    # requirements.txt installs the package itself with `-e .`, so pip runs in the repository folder.
    return f"Run `cd {_sh(REPO)} && {command}`."


def report_fix() -> str:
    return (f"A fault in the setup check itself: run `{_sh(sys.executable)} -m perwatt doctor` once more, and if it "
            "repeats, send this output to the workshop host or the book's maintainers.")


# --- Checks -----------------------------------------------------------------------------------

def check_python() -> Check:
    version, floor = sys.version_info[:3], ".".join(map(str, MIN_PYTHON))
    if version >= MIN_PYTHON:
        return Check("Python", True, ".".join(map(str, version)))
    return Check("Python", False,
                 f"{'.'.join(map(str, version))} at {sys.executable}; the book needs {floor} or newer "
                 "(the other checks were not run)",
                 f"Install Python {floor} or newer and make the environment with it (first `rm -rf .venv` if an older "
                 f"Python made it): `cd {_sh(REPO)} && make book PYTHON=python{floor}`, or for a student's environment "
                 f"without make `python{floor} -m venv .venv && .venv/bin/python -m pip install -r {STUDENT}`; "
                 "then run `.venv/bin/python -m perwatt doctor`.")


def _pins(requirements: Path) -> dict[str, str]:
    lines = (line.split("#", 1)[0].strip() for line in requirements.read_text(encoding="utf-8").splitlines())
    found = (re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line) for line in lines)
    return {match.group(1).lower(): match.group(2) for match in found if match}


def check_packages(requirements: Path | None = None) -> Check:
    from importlib import metadata

    requirements = Path(requirements) if requirements else default_requirements()
    if not requirements.is_file():
        fix = (f"Restore it: `cd {_sh(REPO)} && git checkout {requirements.name}`." if requirements.parent == REPO
               else "Give --requirements the path of an existing requirements file.")
        return Check("Pinned packages", False, f"no requirements file at {requirements}", fix)
    different, missing = [], []
    for name, pinned in _pins(requirements).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(f"{name} missing (needs {pinned})")
            continue
        if installed != pinned:
            different.append(f"{name} {installed} installed, needs {pinned}")
    if not different + missing:
        return Check("Pinned packages", True, f"all as pinned in {requirements.name}")
    return Check("Pinned packages", False, "; ".join(different + missing) + f" (pins from {requirements.name})",
                 install_fix(requirements))


def writable_targets() -> list[Path]:
    """Where the workshop writes: the repository (its .venv), the build and the handouts."""
    return [REPO, REPO / "_build", REPO / "handouts"]


def unwritable(target: Path) -> tuple[Path, OSError] | None:
    """Try creating and removing a file where ``target`` is (or would be created): the error, if any."""
    probe = target
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent  # a folder not made yet is made in its nearest existing parent
    try:
        handle, name = tempfile.mkstemp(prefix=".perwatt-doctor-", dir=probe)
        os.close(handle)
        os.remove(name)
    except OSError as err:
        return probe, err
    return None


def _writable_fix(path: Path, err: OSError) -> str:
    # A copied .venv would still point at the old folder, so the copy makes its own.
    copy = (f"copy the repository somewhere you can write: "
            f"`cp -r {_sh(REPO)} ~/perwatt && rm -rf ~/perwatt/.venv && cd ~/perwatt && make book`")
    if path.exists() and not path.is_dir():
        return f"`{path}` is a file where a folder is needed: move it aside (`mv {_sh(path)} {_sh(str(path) + '.bak')}`)."
    if err.errno in (errno.EACCES, errno.EPERM) and hasattr(os, "geteuid") and path.stat().st_uid == os.geteuid():
        return f"Make it writable: `chmod -R u+w {_sh(path)}`; or {copy}."
    return f"It is read-only or not yours: {copy}."


def check_writable(targets: list[Path] | None = None) -> Check:
    targets = writable_targets() if targets is None else targets
    problems: dict[Path, OSError] = {}
    for found in filter(None, map(unwritable, targets)):
        problems.setdefault(*found)  # several targets may stop at the same folder
    if not problems:
        return Check("Writable folders", True, f"can write in {REPO} and its _build and handouts folders")
    detail = "; ".join(f"cannot write in {path} ({err.strerror or err})" for path, err in problems.items())
    return Check("Writable folders", False, detail + "; `make book` and handouts need to write there",
                 " ".join(dict.fromkeys(_writable_fix(path, err) for path, err in problems.items())))


def check_data() -> Check:
    try:
        import pandas  # noqa: F401
    except Exception as err:  # noqa: BLE001 - a pandas that fails to import is as good as missing
        return Check("Data files", False, f"skipped: pandas is missing or broken ({type(err).__name__}: {err})", install_fix())
    from perwatt import data

    try:
        data.validate_all()
    except data.DataError as err:
        fix = (f"PERWATT_DATA points at {data.data_dir()}: correct that file there, or unset PERWATT_DATA."
               if os.environ.get("PERWATT_DATA") else
               f"Restore the file from the repository: `cd {_sh(REPO)} && git checkout data/`.")
        return Check("Data files", False, str(err), fix)
    return Check("Data files", True, f"{len(data.resources())} files valid against {data.data_dir().name}/datapackage.json")


_KERNEL_PROBE = "import os, sys, perwatt\nprint(os.path.realpath(sys.prefix))\nprint(os.path.dirname(os.path.realpath(perwatt.__file__)))"


def _last_line(log) -> str:
    log.seek(0)
    lines = [line for line in log.read().decode("utf-8", "replace").splitlines() if line.strip()]
    return f" (kernel said: {lines[-1].strip()})" if lines else ""


def check_kernel(timeout: float = KERNEL_TIMEOUT) -> Check:
    name = "Jupyter kernel"
    try:
        from jupyter_client.manager import start_new_kernel
    except Exception as err:  # noqa: BLE001
        return Check(name, False, f"jupyter_client is missing or broken ({type(err).__name__}: {err})", install_fix())
    out: list[str] = []

    def collect(message: dict) -> None:
        if message["header"]["msg_type"] == "stream" and message["content"]["name"] == "stdout":
            out.append(message["content"]["text"])

    # The kernel's own stdout and stderr (ipykernel's warning that TCP is unencrypted, among others)
    # go to a file, not the screen; its last line is shown if the kernel fails.
    with tempfile.TemporaryFile() as log:
        try:
            manager, client = start_new_kernel(startup_timeout=timeout, kernel_name="python3", stdout=log, stderr=log)
        except Exception as err:  # noqa: BLE001 - any failure here means no working kernel
            fix = (install_fix() if importlib.util.find_spec("ipykernel") is None else
                   f"Register this environment's kernel: `{_sh(sys.executable)} -m ipykernel install --user --name python3`.")
            return Check(name, False, f"could not start the python3 kernel: {type(err).__name__}: {err}{_last_line(log)}", fix)
        try:
            reply = client.execute_interactive(_KERNEL_PROBE, timeout=timeout, store_history=False, output_hook=collect)
        except TimeoutError:
            return Check(name, False, f"started, but did not run `import perwatt` within {timeout:.0f} s{_last_line(log)}",
                         f"Run `cd {_sh(REPO)} && {_sh(sys.executable)} -m perwatt doctor` again; if it stays slow, "
                         "close other notebooks and kernels first.")
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
    content = reply["content"]
    if content["status"] != "ok":
        return Check(name, False, f"started, but `import perwatt` failed: {content.get('ename')}: {content.get('evalue')}",
                     f"Run `cd {_sh(REPO)} && {_sh(sys.executable)} -m pip install -e .`.")
    prefix, package = ("".join(out).split() + ["?", "?"])[:2]
    here = os.path.realpath(sys.prefix)
    if prefix != here:  # a python3 kernel spec from elsewhere shadows this environment's own
        spec = getattr(manager.kernel_spec, "resource_dir", "?")
        return Check(name, False, f"the python3 kernel (spec in {spec}) runs the Python in {prefix}, not this one ({here})",
                     f"Remove that kernel spec: `{_sh(sys.executable)} -m jupyter kernelspec remove -y python3`, "
                     "then run this check again.")
    if package != os.path.realpath(REPO / "perwatt"):
        return Check(name, False, f"the kernel imports perwatt from {package}, not from this repository ({REPO})",
                     f"Run `cd {_sh(REPO)} && {_sh(sys.executable)} -m pip install -e .`.")
    return Check(name, True, "starts and imports perwatt from this repository")


def check_widget_frontend() -> Check:
    share = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    wanted = ("@jupyter-widgets/jupyterlab-manager", "anywidget", "jupyterlab-myst")  # myst: the chapters' Markdown
    missing = [name for name in wanted if not (share / name).exists()]
    if missing:
        return Check("Widget front end", False, f"missing JupyterLab extension(s) in {share}: {', '.join(missing)}",
                     install_fix() + " (It installs jupyterlab_widgets, anywidget and jupyterlab-myst.)")
    return Check("Widget front end", True, "JupyterLab widget manager, anywidget and MyST Markdown installed")


def check_offline_charts() -> Check:
    name = "Offline charts"
    try:
        import altair as alt
        import vl_convert
    except Exception as err:  # noqa: BLE001
        return Check(name, False, f"cannot render: {type(err).__name__}: {err}",
                     install_fix() + " (vl-convert-python bundles Vega for offline use.)")
    pins = _pins(default_requirements())
    wanted = " ".join(f"{n}=={pins[n]}" if n in pins else n for n in ("altair", "vl-convert-python"))
    reinstall = f"Reinstall the chart packages: `{_sh(sys.executable)} -m pip install --force-reinstall {wanted}`."
    try:
        chart = alt.Chart(alt.Data(values=[{"x": 1, "y": 2}])).mark_point().encode(x="x:Q", y="y:Q")
        svg = vl_convert.vegalite_to_svg(chart.to_dict())
        bundle = vl_convert.javascript_bundle()
    except Exception as err:  # noqa: BLE001 - report whatever broke rendering
        return Check(name, False, f"could not render: {type(err).__name__}: {err}", reinstall)
    if "<svg" in svg and "vegaEmbed" in bundle:
        return Check(name, True, "a chart renders with the bundled Vega, no network")
    return Check(name, False, "rendering returned no SVG, or the bundle has no Vega-Embed", reinstall)


# --- Running them -----------------------------------------------------------------------------

def run_check(name: str, check, *args) -> Check:
    """One check, quietly: its warnings and printing are swallowed, and an error becomes a failed check."""
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            warnings.simplefilter("ignore")
            return check(*args)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - never a traceback
        message = str(err).strip().splitlines()
        return Check(name, False, f"the check failed unexpectedly: {type(err).__name__}: {message[0] if message else ''}",
                     report_fix())


def doctor(requirements: Path | None = None, kernel: bool = True) -> list[Check]:
    """Run every check, the Python version first; the kernel check can be skipped where it is too slow."""
    python = run_check("Python", check_python)
    if not python.ok:
        return [python]  # the rest would fail for the same reason; the fix is the same
    checks = [python, run_check("Pinned packages", check_packages, requirements),
              run_check("Writable folders", check_writable)]
    if kernel:
        checks.append(run_check("Jupyter kernel", check_kernel))
    return checks + [run_check("Widget front end", check_widget_frontend), run_check("Data files", check_data),
                     run_check("Offline charts", check_offline_charts)]


def report(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"[{'ok' if check.ok else 'FAIL'}] {check.name}: {check.detail}")
        if not check.ok:
            lines.append(f"       fix: {check.fix}")
    failed = sum(not c.ok for c in checks)
    return "\n".join(lines + ["Ready for the workshop." if not failed else f"{failed} problem(s) to fix before the workshop."])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requirements", type=Path, default=None,
                        help=f"the pinned requirements to compare with (default: the repository's requirements.txt "
                             f"where the book-building tools are installed, else its {STUDENT})")
    parser.add_argument("--no-kernel", action="store_true", help="skip starting a Jupyter kernel")


def run(args: argparse.Namespace) -> int:
    try:
        checks = doctor(args.requirements, kernel=not args.no_kernel)
    except KeyboardInterrupt:
        print("Interrupted: the setup check did not finish.")
        return 130
    try:
        print(report(checks), flush=True)
    except BrokenPipeError:  # the reader left early (`| head`): not worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if all(c.ok for c in checks) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perwatt doctor",
                                     description="Check this environment for the workshop; print a fix per problem.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
