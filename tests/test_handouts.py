"""Student handouts, made from the built book: plain Markdown with the numbers written in, the
chapter's visible code and nothing else, the same bytes every time, students' edits kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from perwatt import devtools, handouts

pytestmark = pytest.mark.build

#: What MyST looks like when a front end does not understand it.
RAW_MYST = re.compile(r"\{[a-z]+(?::[a-z]+)?\}`|^[>\s]*(?:`{3,}|:{3,})\{|^\([\w-]+\)=\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def build(site: Path) -> Path:
    return site.parent


@pytest.fixture(scope="module")
def written(build: Path, tmp_path_factory) -> list[Path]:
    return handouts.write(tmp_path_factory.mktemp("handouts"), build=build)


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _markdown(notebook: nbformat.NotebookNode) -> str:
    return "\n\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")


def _visible_code(chapter: Path) -> list[str]:
    cells = [c for c in jupytext.read(chapter).cells if c.cell_type == "code"]
    return [c.source.strip() for c in cells if "remove-cell" not in c.metadata.get("tags", [])]


def test_one_notebook_per_chapter_in_reading_order(written):
    assert [p.name for p in written] == [f"{i:02d}-{c.stem}.ipynb" for i, c in enumerate(devtools.chapter_files())]


def test_every_name_at_once_is_each_name_on_its_own():
    chapters = devtools.chapter_files()
    for answers in (False, True):
        names = handouts.filenames(answers)
        assert list(names) == [c.stem for c in chapters]
        assert names == {c.stem: handouts.filename(c, answers) for c in chapters}
    assert handouts.filenames(True)[chapters[1].stem] == f"01-{chapters[1].stem}-answers.ipynb"


def test_no_raw_myst_and_no_plumbing(written):
    for path, chapter in zip(written, devtools.chapter_files()):
        notebook = _read(path)
        raw = RAW_MYST.findall(_markdown(notebook))
        assert raw == [], f"{path.name}: raw MyST {raw[:3]}"
        # The code is exactly the chapter's visible cells, the setup cell first: no glue, no plumbing.
        code = [c.source for c in notebook.cells if c.cell_type == "code"]
        assert code == _visible_code(chapter), path.name
        assert code[0].startswith("# Setup") and not any("glue(" in c for c in code), path.name
        assert all(not c.outputs and c.execution_count is None for c in notebook.cells if c.cell_type == "code")


def test_every_exercise_states_its_numbers(written, build):
    checked = 0
    for path, chapter in zip(written, devtools.chapter_files()):
        glued = handouts.glue_values(chapter, build)
        source = chapter.read_text(encoding="utf-8")
        text = _markdown(_read(path))
        for label, body in re.findall(r"^```\{exercise\}[^\n]*\n:label: (\S+)\n(.*?)^```", source, re.M | re.S):
            number = handouts.load_index(build).numbers[label][1]
            assert f"**Exercise {number}." in text, f"{path.name}: no heading for {label}"
            for key, spec in re.findall(r"\{glue:text\}`([\w]+):?([^`]*)`", body):
                from myst_nb.core.variables import format_plain_text

                shown = format_plain_text(glued[key], spec)
                statement = text.split(f"**Exercise {number}.", 1)[1].split("**Exercise", 1)[0]
                assert shown in statement, f"{path.name} {label}: {key} should read {shown}"
                checked += 1
    assert checked >= 15


def test_cross_references_read_as_the_site_numbers_them(written):
    text = _markdown(_read(written[1]))  # per-watt
    assert text.startswith("# 1. Per-watt metrics")
    assert "Fig. 1.2" in text and "§1.4" in text and "(SemiAnalysis, 2026b)" in text
    assert "**Which workload?**" in text  # the checklist, included inside a box


def test_no_solution_text_unless_the_answer_key_is_asked_for(written, build, tmp_path):
    key = handouts.write(tmp_path / "key", answers=True, build=build)
    for path, answers, chapter in zip(written, key, devtools.chapter_files()):
        solutions = re.findall(r"^```\{solution\} (\S+)\n(.*?)^```", chapter.read_text(encoding="utf-8"), re.M | re.S)
        student, host = _markdown(_read(path)), _markdown(_read(answers))
        assert "Solution to" not in student
        for label, body in solutions:
            assert f"**Solution to Exercise {handouts.load_index(build).numbers[label][1]}**" in host
            words = [w for w in re.sub(r"\{[^}]+\}`[^`]*`", " ", body).split() if len(w) > 3 and w.isalpha()]
            phrase = " ".join(words[:4])
            assert phrase and phrase not in student.replace("\n> ", " ").replace("\n", " "), f"{path.name} leaks {label}"


def test_a_second_run_writes_the_same_bytes(written, build, tmp_path):
    again = handouts.write(tmp_path, build=build)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in written]
    ids = [c.id for c in _read(written[1]).cells]
    assert ids[0] == "per-watt-000" and len(set(ids)) == len(ids)


def test_the_site_offers_the_same_notebooks(written, site):
    for path in written:
        assert (site / "handouts" / path.name).read_bytes() == path.read_bytes()
    page = (site / "chapters" / "per-watt.html").read_text(encoding="utf-8")
    assert 'href="../handouts/01-per-watt.ipynb"' in page


def test_an_edited_handout_is_kept_unless_forced(build, tmp_path):
    first = handouts.write(tmp_path, build=build)
    edited = first[1]
    notebook = _read(edited)
    notebook.cells[-1].source += "\n# my answer: 42"
    nbformat.write(notebook, edited)
    mine = edited.read_bytes()
    with pytest.raises(handouts.HandoutError, match=edited.name):
        handouts.write(tmp_path, build=build)
    assert edited.read_bytes() == mine
    handouts.write(tmp_path, force=True, build=build)
    assert edited.read_bytes() != mine and "my answer" not in edited.read_text(encoding="utf-8")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perwatt", "handouts", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_a_bad_out_folder_gets_a_clear_error_not_a_traceback(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder")
    for out, expected in ((a_file, "is a file"), (a_file / "inside", "cannot write")):
        proc = _cli("--out", str(out), cwd=devtools.REPO)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert expected in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_without_a_built_book_the_error_says_to_build(tmp_path):
    with pytest.raises(handouts.HandoutError, match="make book"):
        handouts.write(tmp_path / "out", build=tmp_path / "no-build")


def _run(path: Path) -> list[str]:
    """One handout in a fresh kernel started in its own folder: the errors its cells printed."""
    notebook = _read(path)
    NotebookClient(notebook, timeout=300, kernel_name="python3", **devtools.kernel_options(),
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return [f"{o.ename}: {o.evalue}" for c in notebook.cells if c.cell_type == "code" for o in c.outputs
            if o.output_type == "error"]


@pytest.mark.slow
def test_every_handout_runs_top_to_bottom_from_its_own_folder(written):
    """Each notebook, in a fresh kernel started in the handouts folder: the chapter's visible code,
    after its setup cell and nothing else, runs as a student would run it. (As many kernels at once
    as there are cores: each is its own process, so threads are enough to drive them.)"""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        for path, errors in zip(written, pool.map(_run, written)):
            assert errors == [], f"{path.name}: {errors}"
