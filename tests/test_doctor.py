"""The setup check, ``python -m perwatt doctor``: it never crashes, and never says "ready" when it is not.

It is run where the book's environment is missing or wrong (a bare virtual environment, an old
Python, a read-only folder), so these tests make those places and read what it prints there.
"""

from __future__ import annotations

import ast
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from perwatt import doctor

REPO = Path(__file__).resolve().parent.parent


def run(python: str | Path, *args: str, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess:
    """``python -m perwatt doctor ARGS`` in a clean environment: no PYTHONPATH unless given."""
    base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    return subprocess.run([str(python), "-m", "perwatt", "doctor", *args], capture_output=True, text=True,
                          cwd=cwd, env={**base, **env}, timeout=300)


def failures(stdout: str) -> dict[str, tuple[str, str]]:
    """Each failed check's name: (its detail, the fix on the next line)."""
    lines = stdout.splitlines()
    found = {}
    for line, following in zip(lines, lines[1:] + [""]):
        if line.startswith("[FAIL] "):
            name, detail = line.removeprefix("[FAIL] ").split(": ", 1)
            assert following.startswith("       fix: "), f"no fix under: {line}"
            found[name] = (detail, following.removeprefix("       fix: "))
    return found


# --- Where nothing is installed ---------------------------------------------------------------

@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """A new virtual environment with nothing in it, not even pip."""
    where = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    listed = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(len(list(m.distributions())))"],
                            capture_output=True, text=True, env={}, cwd=where, timeout=60)
    # The premise: no packages at all. (Run from the repository, the editable install's
    # perwatt.egg-info in the current folder would count as one.)
    assert listed.stdout.strip() == "0", listed
    return python


@pytest.mark.parametrize("how", ["cwd is the repository", "PYTHONPATH is the repository"])
def test_a_bare_environment_gets_a_fix_for_every_failure_and_no_traceback(bare_python, tmp_path, how):
    if how.startswith("cwd"):
        proc = run(bare_python, "--no-kernel")
    else:
        proc = run(bare_python, "--no-kernel", cwd=tmp_path, PYTHONPATH=str(REPO))
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.stderr == ""
    assert proc.returncode == 1
    failed = failures(proc.stdout)
    assert set(failed) == {"Pinned packages", "Widget front end", "Data files", "Offline charts"}
    # No book-building tool is installed, so the check compares with the student set and installs that.
    python = shlex.quote(str(bare_python))
    pip = f"cd {shlex.quote(str(REPO))} && {python} -m ensurepip && {python} -m pip install -r requirements-student.txt"
    assert all(pip in fix for _, fix in failed.values()), failed
    pins = doctor._pins(REPO / doctor.STUDENT)
    detail = failed["Pinned packages"][0]
    assert f"pandas missing (needs {pins['pandas']})" in detail and f"altair missing (needs {pins['altair']})" in detail
    assert detail.count(" missing (needs ") == len(pins) and detail.endswith(" (pins from requirements-student.txt)")
    assert failed["Data files"][0].startswith("skipped: pandas is missing")
    assert "No module named 'altair'" in failed["Offline charts"][0]
    assert "[ok] Python: " in proc.stdout and "[ok] Writable folders: " in proc.stdout
    assert proc.stdout.splitlines()[-1] == "4 problem(s) to fix before the workshop."


def test_the_module_imports_only_the_standard_library_at_top_level():
    tree = ast.parse((REPO / "perwatt" / "doctor.py").read_text(encoding="utf-8"))
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names) | {"__future__"}, imported - set(sys.stdlib_module_names)


def test_python_m_perwatt_doctor_loads_nothing_but_the_doctor_before_it_checks():
    # -S: no site-packages, no .pth hooks; the doctor is replaced by a probe that lists what is loaded.
    probe = ("import runpy, sys\nimport perwatt.doctor as d\n"
             "def listed(*a, **k):\n"
             "    print(sorted(m for m, loaded in sys.modules.items()\n"
             "                 if loaded is not None and m.split('.')[0] not in sys.stdlib_module_names))\n"
             "    raise SystemExit(0)\n"
             "d.doctor = listed\nsys.argv = ['perwatt', 'doctor', '--no-kernel']\n"
             "runpy.run_module('perwatt', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['__main__', 'perwatt', 'perwatt.doctor']"  # no workshop, devtools or data


@pytest.mark.parametrize("path", ["perwatt/__init__.py", "perwatt/__main__.py", "perwatt/doctor.py"])
def test_what_runs_before_the_version_check_parses_on_python_3_8(path):
    ast.parse((REPO / path).read_text(encoding="utf-8"), feature_version=(3, 8))


def test_the_python_floor_is_the_projects():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=" + ".".join(map(str, doctor.MIN_PYTHON))


def _old_python(version: str) -> str | None:
    """An interpreter of that version that runs (a pyenv shim on PATH may not)."""
    candidates = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python{version}")))
    for python in [*candidates, shutil.which(f"python{version}")]:
        if python:
            said = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=60)
            if said.stdout.strip() == version:
                return python
    return None


@pytest.mark.parametrize("version", ["3.9", "3.10"])
def test_an_old_python_is_told_what_to_install(version):
    python = _old_python(version)
    if python is None:
        pytest.skip(f"no python{version} on PATH or under ~/.pyenv/versions to run the check with")
    proc = run(python, "--no-kernel")
    assert "Traceback" not in proc.stdout + proc.stderr and proc.stderr == "", proc.stderr
    assert proc.returncode == 1
    failed = failures(proc.stdout)
    assert list(failed) == ["Python"]
    assert failed["Python"][0].startswith(f"{version}.") and "needs 3.11 or newer" in failed["Python"][0]
    assert "make book PYTHON=python3.11" in failed["Python"][1]


def test_too_old_a_python_stops_the_check_with_its_fix(monkeypatch):
    monkeypatch.setattr(doctor, "MIN_PYTHON", (99, 0))
    checks = doctor.doctor(kernel=False)
    assert [(c.name, c.ok) for c in checks] == [("Python", False)]
    assert "make book PYTHON=python99.0" in checks[0].fix
    assert "Ready for the workshop" not in doctor.report(checks)


# --- Read-only folders ------------------------------------------------------------------------

#: Root writes through any mode bits by its CAP_DAC_OVERRIDE; without it, a 0o555 folder stops it too.
NO_OVERRIDE = ["--bounding-set", "-dac_override", "--inh-caps", "-dac_override", "--"]


def _as_a_user_who_cannot_write(folder: Path) -> list[str]:
    """A command prefix under which writing into ``folder`` (mode 0o555) fails; skips if there is none."""
    prefix = []
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, which writes through chmod 0o555, and no setpriv to drop that right")
        prefix = [setpriv, *NO_OVERRIDE]
    probe = subprocess.run([*prefix, sys.executable, "-c", f"open({str(folder / 'probe')!r}, 'w')"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        (folder / "probe").unlink()
        pytest.skip("this user can write into a 0o555 folder here, so no read-only copy can be made")
    return prefix


@pytest.mark.slow  # the whole check in this environment: about 10 s, most of it starting the chart renderer
def test_a_read_only_copy_of_the_repository_is_not_ready(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "perwatt", copy / "perwatt", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "data", copy / "data")
    for name in ("requirements.txt", "constraints.txt", "pyproject.toml"):
        shutil.copy(REPO / name, copy / name)
    folders = [copy, *(p for p in copy.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    try:
        prefix = _as_a_user_who_cannot_write(copy)
        base = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        # cwd is the copy, so `python -m perwatt` imports the copy and checks the copy's folders.
        proc = subprocess.run([*prefix, sys.executable, "-m", "perwatt", "doctor", "--no-kernel"],
                              capture_output=True, text=True, cwd=copy, env=base, timeout=300)
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 1
    failed = failures(proc.stdout)
    assert list(failed) == ["Writable folders"], proc.stdout  # everything else in this environment is fine
    detail, fix = failed["Writable folders"]
    assert detail.startswith(f"cannot write in {copy} (Permission denied)")
    assert f"chmod -R u+w {copy}" in fix and f"cp -r {copy} ~/perwatt" in fix
    assert "Ready for the workshop" not in proc.stdout


def test_a_file_where_a_folder_should_be_fails_the_writable_check(tmp_path, monkeypatch):
    blocker = tmp_path / "repo"
    blocker.write_text("a file where the repository's folder should be")
    target = blocker / "_build"
    check = doctor.check_writable([tmp_path, target])
    assert not check.ok
    assert check.detail.startswith(f"cannot write in {blocker} (Not a directory)")
    assert f"mv {blocker} {blocker}.bak" in check.fix
    monkeypatch.setattr(doctor, "writable_targets", lambda: [target])
    monkeypatch.setattr(doctor, "check_data", lambda: doctor.Check("Data files", True, "not checked here"))
    monkeypatch.setattr(doctor, "check_offline_charts", lambda: doctor.Check("Offline charts", True, "not checked here"))
    text = doctor.report(doctor.doctor(kernel=False))
    assert f"[FAIL] Writable folders: cannot write in {blocker}" in text
    assert "Ready for the workshop" not in text


def test_this_checkout_is_writable():
    check = doctor.check_writable()
    assert check.ok, check
    assert not list(REPO.glob(".perwatt-doctor-*"))  # the probe file was removed


# --- Pins -------------------------------------------------------------------------------------

def test_a_wrong_pin_names_the_package_and_both_versions(tmp_path):
    installed = metadata.version("pandas")
    major, minor, patch = installed.split(".")[:3]
    wrong = f"{major}.{minor}.{int(patch) + 1}"  # a near miss: 3.1.1 installed, 3.1.2 pinned
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"-c constraints.txt\npandas=={wrong}\naltair=={metadata.version('altair')}\n-e .\n")
    check = doctor.check_packages(requirements)
    assert not check.ok
    assert check.detail == f"pandas {installed} installed, needs {wrong} (pins from requirements.txt)"
    assert f"pip install -r {requirements}" in check.fix or "make book" in check.fix
    # (the command line with --requirements: tests/test_workshop.py::test_doctor_fails_clearly_on_a_broken_install)


def _repo_with_both_sets(tmp_path: Path) -> Path:
    for name in ("requirements.txt", doctor.STUDENT):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_the_pins_checked_are_the_books_where_a_book_building_tool_is_installed(tmp_path):
    repo = _repo_with_both_sets(tmp_path)
    assert doctor.default_requirements(repo, tools=("pytest", "not-a-real-package-xyz")) == repo / "requirements.txt"
    assert doctor.default_requirements(repo, tools=("not-a-real-package-xyz",)) == repo / doctor.STUDENT
    (repo / doctor.STUDENT).unlink()  # an older checkout without the student set
    assert doctor.default_requirements(repo, tools=("not-a-real-package-xyz",)) == repo / "requirements.txt"


def test_this_environment_is_checked_against_requirements_txt_and_also_satisfies_the_student_set():
    assert doctor.default_requirements() == REPO / "requirements.txt"  # jupyter-book is installed here
    assert doctor.check_packages().detail == "all as pinned in requirements.txt"
    student = doctor.check_packages(REPO / doctor.STUDENT)
    assert student.ok and student.detail == "all as pinned in requirements-student.txt", student


def test_a_student_outside_a_virtual_environment_is_told_to_make_one_without_make(monkeypatch):
    monkeypatch.setattr(sys, "base_prefix", sys.prefix)  # as if this Python were the system's
    fix = doctor.install_fix(REPO / doctor.STUDENT)
    assert f"-m venv .venv && .venv/bin/python -m pip install -r {doctor.STUDENT}`" in fix and "make book" not in fix
    assert "`.venv/bin/python -m perwatt doctor`" in fix
    assert "make book" in doctor.install_fix(REPO / "requirements.txt")
    monkeypatch.setattr(sys, "platform", "win32")
    assert r".venv\Scripts\python -m pip install -r requirements-student.txt" in doctor.install_fix(REPO / doctor.STUDENT)


def test_the_widget_front_end_includes_myst_markdown():
    check = doctor.check_widget_frontend()
    assert check.ok and "MyST Markdown" in check.detail, check


# --- The kernel -------------------------------------------------------------------------------

@pytest.mark.kernel
def test_the_kernel_check_passes_without_the_kernels_noise():
    inherited = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    proc = run(sys.executable, **inherited)
    assert "[ok] Jupyter kernel: starts and imports perwatt from this repository" in proc.stdout, proc.stdout
    assert "without encryption" not in proc.stdout + proc.stderr
    assert proc.stderr == ""


# --- A check that breaks ----------------------------------------------------------------------

def test_a_check_that_raises_is_reported_not_a_crash(monkeypatch, capsys):
    def broken():
        print("noise from inside the check")
        raise RuntimeError("boom\nand a second line")

    def passing(name):
        return lambda *args: doctor.Check(name, True, "fine")

    for attr, name in [("check_packages", "Pinned packages"), ("check_writable", "Writable folders"),
                       ("check_data", "Data files"), ("check_offline_charts", "Offline charts")]:
        monkeypatch.setattr(doctor, attr, passing(name))
    monkeypatch.setattr(doctor, "check_widget_frontend", broken)
    assert doctor.main(["--no-kernel"]) == 1
    out, err = capsys.readouterr()
    assert err == "" and "Traceback" not in out and "noise" not in out
    failed = failures(out)
    assert failed == {"Widget front end": ("the check failed unexpectedly: RuntimeError: boom", doctor.report_fix())}
    assert "send this output to the workshop host" in doctor.report_fix()
    assert out.splitlines()[-1] == "1 problem(s) to fix before the workshop."
