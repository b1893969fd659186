"""The package's shape: layers that only import downwards, every module placed, small modules,
and no reaching into the tests or the performance scripts."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from perwatt.devtools import REPO

PACKAGE = REPO / "perwatt"
MODULES = sorted(PACKAGE.rglob("*.py"))
#: The longest a module may grow before it should be split.
MAX_LINES = 350


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint), "--config", str(REPO / "pyproject.toml")], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_every_module_sits_in_a_layer():
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    placed = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    modules = {module_name(p) for p in MODULES} - {"perwatt"}
    # A module inside a placed package (perwatt.figures.kit) is covered by its package's layer.
    unplaced = {m for m in modules if not any(m == p or m.startswith(p + ".") for p in placed)}
    assert unplaced == set(), f"place these modules in a layer in pyproject.toml: {sorted(unplaced)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_module_is_too_long(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


#: The one change to sys.path the package may make, and where: a kernel's zygote takes out the
#: working folder that "python -c" put first, as ipykernel_launcher does (perwatt/zygote.py).
LAUNCH_PATH = ("zygote.py", "if sys.path[:1] == ['']:\n    del sys.path[0]")


class _DropLaunchPath(ast.NodeTransformer):
    dropped = 0

    def visit_If(self, node: ast.If):
        if ast.unparse(node) == LAUNCH_PATH[1]:
            self.dropped += 1
            return None
        return self.generic_visit(node)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_the_package_reaches_into_neither_tests_nor_scripts(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if path.name == LAUNCH_PATH[0]:
        drop = _DropLaunchPath()
        tree = drop.visit(tree)
        assert drop.dropped == 1, f"{path.name} no longer takes out its launch folder as ipykernel_launcher does"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        assert not [n for n in names if n.split(".")[0] in ("tests", "perf", "conftest", "_common")], names
        if isinstance(node, ast.Attribute) and node.attr == "path" and getattr(node.value, "id", "") == "sys":
            pytest.fail(f"{path.name} changes sys.path")
