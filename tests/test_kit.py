"""The offline room kit: a student set that is the book's own pins less its building and test tools,
that still provides everything the package imports, and a `make wheelhouse` that downloads exactly it.

Installing from a wheelhouse takes minutes, so these tests read the files and this environment's
package metadata instead; the offline install itself is described in the facilitator guide.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from perwatt import doctor

REPO = Path(__file__).resolve().parent.parent
STUDENT = REPO / doctor.STUDENT
#: Modules students never run: the Sphinx extension (inside the book build), the build and chapter
#: tools, the handout writer and the host's command line that calls them. `python -m perwatt doctor`
#: goes straight to perwatt.doctor (perwatt/__main__.py).
HOST_ONLY = {"perwatt.sphinxext", "perwatt.mathml", "perwatt.devtools", "perwatt.handouts", "perwatt.workshop", "perwatt.hub",
            "perwatt.iconfont", "perwatt.cssprune", "perwatt.execution", "perwatt.upstream"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    return {canonical(name): version for name, version in doctor._pins(path).items()}


LINUX = {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}
WINDOWS = {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"}
MACOS = {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"}


def closure(names, platform: dict[str, str] = LINUX) -> set[str]:
    """The distributions these pull in on a platform, following this environment's metadata (extras not
    taken); a distribution not installed here (one only another platform needs) is listed, not followed."""
    seen, todo = set(), [canonical(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for req in map(Requirement, requires):
            if req.marker is None or req.marker.evaluate({"extra": "", **platform}):
                todo.append(canonical(req.name))
    return seen


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module a file imports, at top level or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


STUDENT_MODULES = {module_name(p): p for p in sorted((REPO / "perwatt").rglob("*.py"))
                   if module_name(p) not in HOST_ONLY}


# --- The student set --------------------------------------------------------------------------

def test_the_student_set_is_pinned_exactly_with_requirements_txts_versions():
    lines = [line.split("#", 1)[0].strip() for line in STUDENT.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line]
    assert "-c constraints.txt" in lines and "-e ." in lines
    for line in lines:
        if not line.startswith(("-c ", "-e ")):
            assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+-]+", line), f"{STUDENT.name}: {line!r} is not an exact pin"
    book, student = pins(REPO / "requirements.txt"), pins(STUDENT)
    assert student, "no pins read"
    assert {name: book.get(name) for name in student} == student  # a subset, at the same versions


def test_the_student_set_leaves_out_the_book_building_and_test_tools():
    student, book = pins(STUDENT), pins(REPO / "requirements.txt")
    tools = {canonical(name) for name in doctor.BOOK_TOOLS}
    assert tools <= set(book), "doctor.BOOK_TOOLS names a package requirements.txt does not pin"
    test_only = set(pins(REPO / "requirements-test.txt")) - {"jupyter-client"}  # the kernel needs that one anyway
    pulled_in = closure(student)
    # The setup check tells a student's environment from the book's by these tools, so nothing a
    # student installs may bring one of them along.
    assert not pulled_in & tools, pulled_in & tools
    assert not pulled_in & test_only, pulled_in & test_only
    assert "jupyter-book" not in pulled_in and "playwright" not in pulled_in


def test_the_package_declares_nothing_the_student_set_lacks():
    # `make wheelhouse` downloads the student pins, not `-e .`'s own requirements, so those must be among them.
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert {canonical(Requirement(r).name) for r in project["dependencies"]} <= set(pins(STUDENT))


def test_every_third_party_module_students_import_is_provided_by_the_student_set():
    provided = closure(pins(STUDENT))
    owners = metadata.packages_distributions()
    checked = set()
    for name, path in STUDENT_MODULES.items():
        for module in imports(path):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in {"__future__", "perwatt"}:
                continue
            assert top in owners, f"{name} imports {top}, which no installed distribution provides"
            checked.add(top)
            assert {canonical(d) for d in owners[top]} & provided, f"{name} imports {top}, which {STUDENT.name} does not bring"
    # The premise: the walk found the package's real dependencies, the lazily imported ones included.
    assert {"numpy", "pandas", "scipy", "altair", "ipywidgets", "vl_convert", "myst_nb", "IPython",
            "jupyter_client"} <= checked, checked


def test_students_modules_do_not_reach_into_the_host_tools():
    for name, path in STUDENT_MODULES.items():
        reached = {m for m in imports(path) if ".".join(m.split(".")[:2]) in HOST_ONLY}
        if name == "perwatt.__main__":
            reached -= {"perwatt.workshop", "perwatt.workshop.main"}  # the host's commands, not `doctor`
        assert not reached, f"{name} imports {reached}"


def test_jupyterlab_myst_is_installed_and_compatible_with_this_jupyterlab():
    # jupyterlab-myst 2.7.0 wants @jupyter/ydoc ^3 where JupyterLab 4.6 shares ^4, and JupyterLab's own
    # check marks it "X" (incompatible); the pinned version must pass that check.
    assert metadata.version("jupyterlab-myst") == pins(STUDENT)["jupyterlab-myst"]
    proc = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True, text=True,
                          timeout=120)
    listed = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    assert re.search(r"jupyterlab-myst v\S+ enabled +OK", listed), listed
    assert "not compatible" not in listed, listed


# --- make wheelhouse --------------------------------------------------------------------------

def recipe(target: str) -> str:
    lines = (REPO / "Makefile").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"{target}: $(STAMP)")
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        body.append(line)
    return "\n".join(body)


def test_the_wheelhouse_target_downloads_the_student_set_and_the_build_backend():
    text = recipe("wheelhouse")
    assert "pip download" in text and "--only-binary=:all:" in text
    assert "requirements-student.txt" in text and "requirements.txt" not in text.replace("requirements-student.txt", "")
    assert "-c constraints.txt" in text
    build = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]
    constraints = pins(REPO / "constraints.txt")
    for requirement in map(Requirement, build):
        # Offline, pip builds `-e .` from the wheelhouse too: the backend must be downloaded, at a pinned version.
        assert str(requirement) in text, requirement
        assert canonical(requirement.name) in constraints, requirement.name
        assert constraints[canonical(requirement.name)] in SpecifierSet(str(requirement.specifier)), requirement
    assert {"wheelhouse/", "wheelhouse-*/"} <= set((REPO / ".gitignore").read_text(encoding="utf-8").splitlines())


def make_variable(name: str) -> set[str]:
    found = re.search(rf"^{name} := (.*)$", (REPO / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert found, name
    return {canonical(word) for word in found.group(1).split()}


@pytest.mark.parametrize("platform, variable", [(WINDOWS, "WINDOWS_ONLY"), (MACOS, "MACOS_ONLY")])
def test_what_only_windows_or_macos_needs_is_downloaded_for_them_at_a_pinned_version(platform, variable):
    # `pip download --platform` evaluates markers for the machine it runs on, so a wheelhouse for Windows
    # would lack colorama and pywinpty unless the Makefile names them.
    student = pins(STUDENT)
    only_there = closure(student, platform) - closure(student)
    assert make_variable(variable) == only_there
    assert only_there <= set(pins(REPO / "constraints.txt")), only_there - set(pins(REPO / "constraints.txt"))


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("sed") is None, reason="needs make and sed")
def test_the_wheelhouse_target_passes_exactly_the_student_pins():
    # make -n prints the recipe without running it; its sed then reads the real file.
    shown = subprocess.run(["make", "-n", "wheelhouse"], capture_output=True, text=True, cwd=REPO, timeout=60).stdout
    script = re.search(r"sed -n '([^']+)' requirements-student\.txt", shown)
    assert script, shown
    out = subprocess.run(["sed", "-n", script.group(1), "requirements-student.txt"], capture_output=True, text=True,
                         cwd=REPO, timeout=60, check=True).stdout.split()
    assert {canonical(a.split("==")[0]): a.split("==")[1] for a in out} == pins(STUDENT)
    assert len(out) == len(pins(STUDENT))
