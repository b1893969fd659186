"""The live panels in a real JupyterLab, driven by Chromium: every chart draws with no network,
and every slider keeps a usable track at a desktop and at a narrow width."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from perwatt import devtools, figures, interactive

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

SLIDER_FIGURES = [f for f in figures.all_figures() if any(c.widget == "slider" for c in f.controls)]


#: A chapter's kind of MyST markup, which stock JupyterLab shows as raw text and jupyterlab-myst renders.
MYST_CELL = "```{warning} Reported, not verified\nEvery Jalapeño figure here is reported.\n```"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving one notebook that shows every figure with a slider, and its URL."""
    root = tmp_path_factory.mktemp("lab")
    cells = [nbformat.v4.new_markdown_cell(MYST_CELL), nbformat.v4.new_code_cell("from perwatt import figures")]
    cells += [nbformat.v4.new_code_cell(f"figures.{f.name.replace('-', '_')}().show()") for f in SLIDER_FIGURES]
    spec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": spec}), root / "panels.ipynb")
    port = _free_port()
    # Its own workspace and settings: JupyterLab keeps the last session's layout in the user's home,
    # and one left with a wide side panel squeezes the notebook to a sliver.
    state = tmp_path_factory.mktemp("lab-state")
    env = {k: v for k, v in os.environ.items() if k != "PERWATT_RENDER"}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--allow-root",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
         f"--LabApp.workspaces_dir={state / 'workspaces'}", f"--LabApp.user_settings_dir={state / 'settings'}",
         "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)


@pytest.fixture(scope="module")
def notebook_page(lab, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    offsite: list[str] = []

    def local_only(route) -> None:
        if route.request.url.startswith((lab, "data:", "blob:")):
            route.continue_()
        else:
            offsite.append(route.request.url)
            route.abort()

    context.route("**/*", local_only)
    page = context.new_page()
    page.goto(f"{lab}/lab/tree/panels.ipynb")
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=120_000)
    # Run the cells only once the notebook's kernel is ready: earlier, the command does nothing.
    page.wait_for_function("window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel", timeout=120_000)
    page.evaluate("async () => { const s = window.jupyterapp.shell.currentWidget.sessionContext; await s.ready;"
                  " await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    page.wait_for_function(f"document.querySelectorAll('.perwatt-panel').length >= {len(SLIDER_FIGURES)}",
                           timeout=180_000)
    page.wait_for_function(f"document.querySelectorAll('.perwatt-panel canvas, .perwatt-panel svg.marks')"
                           f".length >= {len(SLIDER_FIGURES)}", timeout=60_000)
    yield page, offsite
    context.close()


def _tracks(page) -> list[tuple[str, float]]:
    return page.evaluate("""() => [...document.querySelectorAll('.perwatt-panel .widget-hslider')].map(w => [
        w.querySelector('.widget-label').textContent,
        w.querySelector('.slider-container').getBoundingClientRect().width
            / parseFloat(getComputedStyle(w).fontSize)])""")


#: For each panel: how far its controls reach past the right edge of the cell's output area, in
#: pixels (0 or less: inside), and the labels of any two controls drawn over each other.
CONTROL_LAYOUT = """() => [...document.querySelectorAll('.perwatt-panel')].map((panel) => {
  const edge = panel.closest('.jp-OutputArea-output').getBoundingClientRect().right;
  const controls = [...panel.querySelectorAll('.widget-hslider, .widget-radio, .widget-dropdown')];
  const boxes = controls.map((c) => c.getBoundingClientRect());
  const overlapping = [];
  boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b, j) => {
    if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) {
      overlapping.push([i, i + 1 + j].map((k) => controls[k].querySelector('.widget-label').textContent));
    }
  }));
  return { past: Math.max(...boxes.map((b) => b.right - edge)), overlapping };
})"""


def test_every_panel_chart_draws_with_no_network(notebook_page):
    page, offsite = notebook_page
    assert page.get_by_text("Click to show javascript error").count() == 0
    assert offsite == []


@pytest.mark.parametrize("width", [1280, 800])
def test_every_slider_keeps_a_usable_track(notebook_page, width):
    page, _ = notebook_page
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_timeout(500)
    tracks = _tracks(page)
    sliders = sum(c.widget == "slider" for f in SLIDER_FIGURES for c in f.controls)
    assert len(tracks) == sliders
    narrow = [(label, round(em, 1)) for label, em in tracks if em < interactive.SLIDER_MIN_TRACK_EM]
    assert narrow == [], f"at {width}px"
    # Kept wide, and still inside the cell, each control clear of the others: a slider too wide
    # for its row wraps, its track below its label, and the next control moves down to make room.
    layout = page.evaluate(CONTROL_LAYOUT)
    gaps = page.evaluate("() => [...document.querySelectorAll('.perwatt-panel .perwatt-controls')]"
                         ".map((box) => [getComputedStyle(box).rowGap, getComputedStyle(box).columnGap])")
    assert len(gaps) == len(layout) and all(row != "normal" and float(row[:-2]) > 0 and float(col[:-2]) > float(row[:-2])
                                            for row, col in gaps), gaps
    assert [p["past"] for p in layout if p["past"] > 0.5] == [], f"at {width}px"
    assert [p["overlapping"] for p in layout if p["overlapping"]] == [], f"at {width}px"


def test_myst_markup_renders_in_jupyterlab(notebook_page):
    """Chapters opened as notebooks use MyST directives; with jupyterlab-myst they render, not as raw text."""
    page, _ = notebook_page
    cell = page.locator(".jp-MarkdownCell").first
    text = cell.inner_text()
    assert "Every Jalapeño figure here is reported." in text and "{warning}" not in text, text
    assert cell.locator("[class*=admonition]").count() >= 1, cell.inner_html()[:500]
