"""Workshop tools: the setup check (``doctor``) and student handouts.

Run from the repository folder:

* ``python -m perwatt doctor``: checks the environment a chapter needs and prints a fix for each
  problem; exits 1 if anything is wrong.
* ``python -m perwatt handouts --out handouts``: writes one student notebook per chapter from the
  built book (:mod:`perwatt.handouts`); ``--answers`` keeps the solutions, ``--force`` replaces
  notebooks that differ.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from perwatt import devtools

REPO = devtools.REPO
MIN_PYTHON = (3, 11)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _pins(requirements: Path) -> dict[str, str]:
    pins = {}
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+-]+)", line)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def check_python() -> Check:
    version = sys.version_info[:3]
    ok = version >= MIN_PYTHON
    return Check("Python", ok, ".".join(map(str, version)),
                 "" if ok else f"Install Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer and run `make book` again.")


def check_packages(requirements: Path) -> Check:
    wrong = []
    for name, pinned in _pins(requirements).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} missing (needs {pinned})")
            continue
        if installed != pinned:
            wrong.append(f"{name} {installed} (needs {pinned})")
    ok = not wrong
    return Check("Pinned packages", ok, "all as pinned" if ok else "; ".join(wrong),
                 "" if ok else f"Run `{sys.executable} -m pip install -r {requirements.name}` in the repository folder.")


def check_kernel() -> Check:
    try:
        from jupyter_client.manager import start_new_kernel

        manager, client = start_new_kernel(kernel_name="python3")
        try:
            reply = client.execute_interactive("import perwatt", timeout=60, store_history=False)
            ok = reply["content"]["status"] == "ok"
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
    except Exception as err:  # noqa: BLE001 - any failure here means no working kernel
        return Check("Jupyter kernel", False, f"could not start: {err}",
                     f"Run `{sys.executable} -m ipykernel install --user --name python3`.")
    return Check("Jupyter kernel", ok, "starts and imports perwatt" if ok else "started, but `import perwatt` failed",
                 "" if ok else "Run `pip install -e .` in the repository folder, in this environment.")


def check_widget_frontend() -> Check:
    share = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    missing = [name for name in ("@jupyter-widgets/jupyterlab-manager", "anywidget") if not (share / name).exists()]
    ok = not missing
    return Check("Widget front end", ok, "JupyterLab widget manager and anywidget installed" if ok
                 else f"missing JupyterLab extension(s): {', '.join(missing)}",
                 "" if ok else "Run `pip install -r requirements.txt` (it installs jupyterlab_widgets and anywidget).")


def check_data() -> Check:
    from perwatt import data

    try:
        names = list(data.resources())
        for name in names:
            data.load(name)
    except data.DataError as err:
        return Check("Data files", False, str(err), "Restore the file from the repository (`git checkout data/`).")
    return Check("Data files", True, f"{len(names)} files valid against data/datapackage.json")


def check_offline_charts() -> Check:
    try:
        import altair as alt
        import vl_convert

        chart = alt.Chart(alt.Data(values=[{"x": 1, "y": 2}])).mark_point().encode(x="x:Q", y="y:Q")
        svg = vl_convert.vegalite_to_svg(chart.to_dict())
        bundle = vl_convert.javascript_bundle()
    except Exception as err:  # noqa: BLE001 - report whatever broke rendering
        return Check("Offline charts", False, f"could not render: {err}",
                     "Run `pip install -r requirements.txt` (vl-convert-python bundles Vega for offline use).")
    ok = "<svg" in svg and "vegaEmbed" in bundle
    return Check("Offline charts", ok, "a chart renders with the bundled Vega, no network" if ok else "rendering returned no SVG",
                 "" if ok else "Reinstall vl-convert-python from requirements.txt.")


def doctor(requirements: Path | None = None, kernel: bool = True) -> list[Check]:
    """Run every check; the kernel check can be skipped where starting a kernel is too slow."""
    requirements = requirements or REPO / "requirements.txt"
    checks = [check_python(), check_packages(requirements), check_widget_frontend(), check_data(), check_offline_charts()]
    if kernel:
        checks.insert(2, check_kernel())
    return checks


def report(checks: list[Check]) -> str:
    lines = []
    for check in checks:
        lines.append(f"[{'ok' if check.ok else 'FAIL'}] {check.name}: {check.detail}")
        if not check.ok:
            lines.append(f"       fix: {check.fix}")
    failed = sum(not c.ok for c in checks)
    lines.append("Ready for the workshop." if not failed else f"{failed} problem(s) to fix before the workshop.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m perwatt", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("doctor", help="check this environment for the workshop")
    check.add_argument("--requirements", type=Path, default=REPO / "requirements.txt")
    check.add_argument("--no-kernel", action="store_true", help="skip starting a Jupyter kernel")
    hand = commands.add_parser("handouts", help="write student notebooks (run `make book` first)")
    hand.add_argument("--out", type=Path, default=Path("handouts"), help="folder for the notebooks")
    hand.add_argument("--force", action="store_true", help="replace notebooks that differ (students' edits are lost)")
    hand.add_argument("--answers", action="store_true", help="keep the worked solutions: the host's answer key")
    args = parser.parse_args(argv)
    if args.command == "doctor":
        checks = doctor(args.requirements, kernel=not args.no_kernel)
        print(report(checks))
        return 0 if all(c.ok for c in checks) else 1
    from perwatt import handouts

    try:
        written = handouts.write(args.out, force=args.force, answers=args.answers)
    except handouts.HandoutError as err:
        print(f"handouts: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0
