"""The design card: layout, exact pins, chapters as text notebooks, launch settings."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import jupytext
import yaml

REPO = Path(__file__).resolve().parent.parent


def test_top_level_layout():
    for name in ("_config.yml", "_toc.yml", "README.md", "chapters", "data", "requirements.txt"):
        assert (REPO / name).exists(), name


def test_every_direct_dependency_is_pinned_exactly():
    for file in ("requirements.txt", "requirements-test.txt"):
        for line in (REPO / file).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith(("-r ", "-c ", "-e ")):
                continue
            assert re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+-]+", line), f"{file}: {line!r} is not an exact pin"


def test_jupyter_book_one_and_sphinx_below_eight():
    pins = dict(
        line.split("==") for line in (REPO / "requirements.txt").read_text().splitlines() if "==" in line
    )
    assert pins["jupyter-book"].startswith("1.")
    assert int(pins["sphinx"].split(".")[0]) < 8


def test_toc_parts_are_numbered_and_list_existing_chapters():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text(encoding="utf-8"))
    assert toc["format"] == "jb-book"
    for part in toc["parts"]:
        assert part.get("numbered") is True
        for chapter in part["chapters"]:
            assert (REPO / f"{chapter['file']}.md").exists()


def test_chapters_are_myst_text_notebooks_with_code():
    from perwatt.devtools import chapter_files

    executable = chapter_files()
    assert {p.stem for p in executable} >= {"intro", "per-watt", "benchmark-tables", "prefill-decode",
                                             "speculative-decoding", "agent-workloads"}
    for path in executable:
        notebook = jupytext.read(path)
        assert notebook.metadata["kernelspec"]["name"] == "python3", path.name
        assert notebook.metadata["jupytext"]["text_representation"]["format_name"] == "myst", path.name
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert code, path.name
        # Every chapter sets up first, in one cell shown collapsed: the code below it, pasted after
        # it into a fresh kernel, runs (tests/test_handouts.py), so a reader must be able to see it.
        assert "perwatt.setup()" in code[0].source, path.name
        assert code[0].metadata.get("tags") == ["hide-input"], path.name



def test_the_build_and_jupytext_read_the_same_cells_from_every_chapter():
    """The handouts are made from myst-nb's reading of a chapter (the build's own); a reader who
    opens the chapter in Jupyter gets jupytext's. Each cell, its kind, source and metadata, the same."""
    from myst_nb.core.read import read_myst_markdown_notebook

    from perwatt.devtools import chapter_files

    for path in chapter_files():
        text = path.read_text(encoding="utf-8")
        theirs, ours = jupytext.reads(text, fmt="md:myst"), read_myst_markdown_notebook(text)
        assert ours.metadata["kernelspec"] == theirs.metadata["kernelspec"], path.name
        assert [(c.cell_type, c.source, c.metadata) for c in ours.cells] == \
               [(c.cell_type, c.source, c.metadata) for c in theirs.cells], path.name

def test_launch_buttons_are_configured_and_thebe_is_off():
    config = yaml.safe_load((REPO / "_config.yml").read_text(encoding="utf-8"))
    buttons = config["launch_buttons"]
    assert {"binderhub_url", "jupyterhub_url", "notebook_interface"} <= set(buttons)
    assert buttons["thebe"] is False
    assert config["execute"]["execute_notebooks"] == "cache"
    assert config["only_build_toc_files"] is True


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in quick.strip().splitlines()]
    assert commands == ["make book", "make test"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, flags=re.MULTILINE)


def _makefile_unused() -> list[str]:
    found = re.search(r"^UNUSED := (.+)$", (REPO / "Makefile").read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert found, "Makefile: no UNUSED line"
    return found.group(1).split()


def test_make_leaves_out_the_iri_parser_every_jsonschema_import_would_build():
    from importlib import metadata

    from packaging.utils import canonicalize_name

    unused = _makefile_unused()
    assert unused == ["rfc3987-syntax", "lark"]
    installed = {canonicalize_name(d.metadata["Name"]) for d in metadata.distributions()}
    assert set(unused) & installed == set(), "set up before make removed them? run make again, or: .venv/bin/python -m pip uninstall -y " + " ".join(unused)
    probe = subprocess.run([sys.executable, "-c", "import sys, jsonschema, altair, nbformat; "
                            "print(sorted(m for m in sys.modules if m.startswith(('rfc3987', 'lark'))))"],
                           capture_output=True, text=True, check=True, timeout=120)
    assert probe.stdout.strip() == "[]"
    # What the package would check, no schema installed here asks for (jsonschema's own tests aside).
    site = Path(sysconfig.get_paths()["purelib"])
    asking = re.compile(rb'"format"\s*:\s*"iri(-reference)?"')
    users = [p.relative_to(site).as_posix() for p in site.rglob("*.json")
             if p.relative_to(site).parts[0] != "jsonschema" and asking.search(p.read_bytes())]
    assert users == []
