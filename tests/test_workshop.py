"""Workshop kit: exercises in every chapter, and the setup check (handouts: tests/test_handouts.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from perwatt import devtools

REPO = Path(__file__).resolve().parent.parent
CHAPTERS = [p for p in devtools.chapter_files() if p.stem not in ("intro", "data-dictionary")]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_has_three_exercises_with_hidden_solutions(chapter):
    text = chapter.read_text(encoding="utf-8")
    exercises = re.findall(r"^```\{exercise\}.*?\n:label: (\S+)", text, flags=re.MULTILINE)
    assert len(exercises) >= 3
    for label in exercises:
        block = re.search(r"^```\{solution\} " + re.escape(label) + r"\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
        assert block, f"{chapter.stem}: no solution for {label}"
        assert ":class: dropdown" in block.group(1), f"{label}: solution not hidden by default"
    assert re.search(r"[Pp]redict", "\n".join(re.findall(r"^```\{exercise\}.*?^```", text, re.MULTILINE | re.DOTALL)))


@pytest.mark.slow
def test_doctor_passes_on_this_install():
    proc = subprocess.run([sys.executable, "-m", "perwatt", "doctor"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Ready for the workshop." in proc.stdout


def test_doctor_fails_clearly_on_a_broken_install(tmp_path):
    broken_data = tmp_path / "data"
    broken_data.mkdir()
    for f in (REPO / "data").iterdir():
        (broken_data / f.name).write_bytes(f.read_bytes())
    (broken_data / "power.csv").write_text((REPO / "data" / "power.csv").read_text().replace(",700,", ",seven hundred,"))
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("altair==0.0.1\nnot-a-real-package-xyz==1.0\n")
    proc = subprocess.run([sys.executable, "-m", "perwatt", "doctor", "--no-kernel", "--requirements", str(requirements)],
                          capture_output=True, text=True, timeout=300, env={"PERWATT_DATA": str(broken_data), "PATH": ""})
    assert proc.returncode == 1
    out = proc.stdout
    assert "[FAIL] Pinned packages: altair" in out and "needs 0.0.1" in out and "not-a-real-package-xyz missing" in out
    assert "[FAIL] Data files:" in out and "power.csv, line 2, column 'power_w'" in out
    assert out.count("fix:") == 2 and "2 problem(s)" in out
