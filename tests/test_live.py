"""Widget panels in a real Jupyter kernel: set a control's value, and the figure's data follows.

A kernel is started with jupyter_client, as JupyterLab would start one. Code runs in it the
way a reader's cells would; the test reads back the messages the front end would receive.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest
from jupyter_client.manager import start_new_kernel

from perwatt import figures

pytestmark = pytest.mark.kernel
FIGURES = {f.name: f for f in figures.all_figures()}


class Kernel:
    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PERWATT_RENDER"}
        self.manager, self.client = start_new_kernel(kernel_name="python3", env=env)

    def run(self, code: str, timeout: float = 120) -> list[dict]:
        """Execute code; return the iopub messages it produced. Fails on an error."""
        messages: list[dict] = []
        reply = self.client.execute_interactive(
            code, timeout=timeout, output_hook=messages.append, store_history=False
        )
        errors = [m for m in messages if m["msg_type"] == "error"]
        assert reply["content"]["status"] == "ok", "\n".join(errors[0]["content"]["traceback"]) if errors else reply
        return messages

    def value(self, expression: str):
        out = self.run(f"print(json.dumps({expression}))")
        text = "".join(m["content"]["text"] for m in out if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")
        return json.loads(text)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


#: Reads back, inside the kernel, the rows a panel has sent to the front end: the largest of the
#: spec's datasets (others are decorations such as a parity line).
SHOWN_DATA = """
import pandas as pd

def shown_data(panel):
    datasets = panel.view.spec.get("datasets", {})
    return pd.DataFrame(max(datasets.values(), key=len))
"""


@pytest.fixture(scope="module")
def kernel():
    k = Kernel()
    k.run("import json, perwatt\nfrom perwatt import figures\nperwatt.setup()\n" + SHOWN_DATA)
    yield k
    k.close()


def _compare(rows: list[dict], figure, setting: dict) -> None:
    # JSON has no NaN: an unknown arrives as null, which is NaN to the model.
    shown = pd.DataFrame(rows).set_index(list(figure.keys))[list(figure.values)].apply(pd.to_numeric).sort_index()
    model = figure.frame(**setting).set_index(list(figure.keys))[list(figure.values)].sort_index()
    pd.testing.assert_frame_equal(shown, model, check_dtype=False, check_column_type=False,
                                  check_index_type=False, rtol=1e-12, atol=0)


def _moves() -> list[tuple[str, str, object]]:
    """Every control of every figure, moved to a value other than its default."""
    moves = []
    for figure in FIGURES.values():
        for control in figure.controls:
            others = [v for v in control.options if v != control.default]
            moves.append((figure.name, control.name, others[len(others) // 2]))
    return moves


@pytest.mark.parametrize(("name", "control", "value"), _moves())
def test_setting_a_control_redraws_the_panel_with_the_model_values(kernel, name, control, value):
    figure = FIGURES[name]
    kernel.run(f"panel = figures.by_name({figure.name!r}).panel()\nview_id = id(panel.view)")
    before = kernel.value("shown_data(panel).to_dict(orient='records')")
    _compare(before, figure, figure.defaults())

    messages = kernel.run(f"panel.controls[{control!r}].value = {value!r}")
    after = kernel.value("shown_data(panel).to_dict(orient='records')")
    _compare(after, figure, {**figure.defaults(), control: value})
    assert after != before
    # Redrawn in place: the same chart widget, its spec pushed to the front end over the
    # widget comm, and no new output stacked under the cell.
    assert kernel.value("id(panel.view) == view_id and panel.children[-1] is panel.view")
    assert not [m for m in messages if m["msg_type"] in ("display_data", "execute_result")]
    updates = [m for m in messages if m["msg_type"] == "comm_msg"
               and "spec" in m["content"]["data"].get("state", {})]
    assert updates, "no spec update was sent to the front end"
    sent = updates[-1]["content"]["data"]["state"]["spec"]
    rows = max(sent["datasets"].values(), key=len)
    _compare(rows, figure, {**figure.defaults(), control: value})


def test_displaying_a_panel_shows_one_widget_view(kernel):
    messages = kernel.run("panel = figures.energy_cost().panel()\ndisplay(panel)")
    views = [m for m in messages if m["msg_type"] == "display_data"]
    assert len(views) == 1
    assert "application/vnd.jupyter.widget-view+json" in views[0]["content"]["data"]


def test_the_chart_widget_needs_no_network(kernel):
    # JupyterChart's default JavaScript imports from a CDN; offline mode embeds vl-convert's bundle.
    assert kernel.value("__import__('altair').JupyterChart._is_offline")
    esm = kernel.value("__import__('altair').JupyterChart._esm[:200000]")
    assert "https://" not in esm.split("\n", 5)[0]
    assert "esm.sh" not in kernel.value("__import__('altair').JupyterChart._esm")


def test_static_mode_shows_a_note_instead_of_controls(kernel):
    kernel.run("import os\nos.environ['PERWATT_RENDER'] = 'static'")
    try:
        html = kernel.value("figures.power_basis().panel()._repr_html_()")
        assert "perwatt-live-note" in html and "Jupyter" in html
        assert kernel.value("type(figures.power_basis().panel()).__name__") == "LiveOnlyNote"
    finally:
        kernel.run("del os.environ['PERWATT_RENDER']")


def test_speculation_crossover_moves_with_the_controls_in_the_live_panel(kernel):
    kernel.run("panel = figures.by_name('speculation-batch').panel()")
    read = "float(shown_data(panel)['crossover_batch'].iloc[0])"
    start = kernel.value(read)
    kernel.run("panel.controls['alpha'].value = 0.9")
    assert kernel.value(read) > start
    kernel.run("panel.controls['alpha'].value = 0.7\npanel.controls['c'].value = 0.3")
    assert kernel.value(read) < start
