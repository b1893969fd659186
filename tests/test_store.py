"""The store of slow results on disk (perwatt.store): off unless asked for, keyed on everything a
result depends on, shared between processes, and never the keeper of a solver's time-out."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perwatt import covers, data, fleet, store
from perwatt.interactive import Control, InteractiveFigure

DATA = str(data.DEFAULT_DATA_DIR.resolve())


class Counter:
    """A computation that counts how often it really ran."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


@pytest.fixture
def on(tmp_path: Path, monkeypatch) -> Path:
    where = tmp_path / "store"
    monkeypatch.setenv(store.VARIABLE, str(where))
    return where


def test_off_unless_the_variable_names_a_folder(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(store.VARIABLE, raising=False)
    count = Counter(1.5)
    assert [store.remembered(count, DATA, "off", (1,)) for _ in range(2)] == [1.5, 1.5]
    assert count.calls == 2 and store.folder() is None
    monkeypatch.setenv(store.VARIABLE, "")
    assert store.folder() is None


def test_a_result_is_computed_once_and_read_back_equal(on: Path):
    frame = pd.DataFrame({"chips": [8, 72], "tokens_per_s": [1.0 / 3, np.nan]})
    count = Counter(frame)
    first = store.remembered(count, DATA, "frame", ("gb200", 35.0))
    again = store.remembered(count, DATA, "frame", ("gb200", 35.0))
    assert count.calls == 1
    pd.testing.assert_frame_equal(again, frame)  # bit for bit, NaN kept
    assert first is frame and again is not frame
    assert len(list(on.rglob("*.pickle"))) == 1


def test_the_key_changes_with_the_name_the_arguments_and_the_data(tmp_path: Path):
    base = store.key(DATA, "f", ((1.0,), []))
    assert base == store.key(DATA, "f", ((1.0,), []))
    assert len({base, store.key(DATA, "g", ((1.0,), [])), store.key(DATA, "f", ((1.0000001,), [])),
                store.key(DATA, "f", ((1,), []))}) == 4
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    assert store.key(str(copy), "f", ((1.0,), [])) == base  # the same files, elsewhere
    with open(copy / "assumptions.csv", "a", encoding="utf-8") as handle:
        handle.write("\n")
    store.clear()  # as data.clear_cache() does after an edit
    assert store.key(str(copy), "f", ((1.0,), [])) != base


def test_arguments_that_cannot_be_pickled_are_computed_not_stored(on: Path):
    count = Counter(2.0)
    assert store.key(DATA, "f", (lambda: 0,)) is None
    assert [store.remembered(count, DATA, "f", (lambda: 0,)) for _ in range(2)] == [2.0, 2.0]
    assert count.calls == 2 and not on.exists()


def test_an_unreadable_entry_is_computed_again_and_replaced(on: Path):
    store.remembered(Counter(3.0), DATA, "f", ())
    (entry,) = on.rglob("*.pickle")
    entry.write_bytes(b"not a pickle")
    count = Counter(4.0)
    assert store.remembered(count, DATA, "f", ()) == 4.0 and count.calls == 1
    assert store.remembered(Counter(5.0), DATA, "f", ()) == 4.0


def test_a_stored_function_is_shared_across_processes(on: Path):
    # Two processes at once ask for the same plan: one solves it, the other waits and reads it.
    script = ("import sys, numpy as np\nfrom perwatt import fleet\n"
              "c = np.array([1.0, 2.0]).tobytes(); a = np.array([[1.0, 1.0]]).tobytes()\n"
              "print(fleet._highs(c, a, (1, 2), (3.5,), (np.inf,), True)[2].tolist())\n")
    runs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [r.communicate(timeout=120)[0].strip() for r in runs]
    assert outputs == ["[4.0, 0.0]"] * 2
    assert len(list(on.rglob("*.pickle"))) == 1


def test_a_solver_time_out_is_never_stored(on: Path, monkeypatch):
    class Stopped:
        status, message, x = 1, "Time limit reached.", None

    def handed_over(*args, **kwargs):
        raise covers.Unsolved("handed to HiGHS")

    monkeypatch.setattr(fleet, "milp", lambda *args, **kwargs: Stopped())
    # The exact search solves this programme itself; a time-out can only come from HiGHS.
    monkeypatch.setattr(fleet.fleet_search, "cheapest_plan", handed_over)
    fleet._solve.cache_clear()
    fleet._highs.cache_clear()
    c, a = np.array([1.0]).tobytes(), np.array([[1.0]]).tobytes()
    status, message, x = fleet._solve(c, a, (1, 1), (1.0,), (np.inf,), True)
    assert (status, message) == (1, "Time limit reached.") and not x.flags.writeable
    assert not list(on.rglob("*.pickle"))
    fleet._solve.cache_clear()
    fleet._highs.cache_clear()


def test_a_figure_grid_is_stored_only_for_the_packages_own_models(on: Path):
    def mine(rate: float) -> pd.DataFrame:  # a reader's model, defined here: its code is not fingerprinted
        return pd.DataFrame({"k": ["a"], "v": [rate * 2]})

    fig = InteractiveFigure((Control("rate", "Rate:", (1.0, 2.0), 1.0),), mine, lambda base, grid: base,
                            keys=("k",), values=("v",), name="mine")
    assert fig.grid["v"].to_list() == [2.0, 4.0]
    assert not on.exists()
    from perwatt import figures
    fresh = figures.kernel_gains.__wrapped__  # a new figure object each call, with no grid in memory
    grid = fresh().grid
    entries = sorted(on.rglob("*.pickle"))
    assert entries
    pd.testing.assert_frame_equal(fresh().grid, grid)
    assert sorted(on.rglob("*.pickle")) == entries


def test_live_kernels_bundle_the_widget_javascript_once_between_them(on: Path, monkeypatch):
    """A live kernel's setup has vl-convert bundle JupyterChart's JavaScript (about 2 s of CPU); with
    the store on, the first kernel bundles it and the next reads the same text back."""
    import altair as alt
    import vl_convert

    from perwatt import render

    bundle = Counter(vl_convert.javascript_bundle)
    monkeypatch.setattr(vl_convert, "javascript_bundle", lambda *args, **kwargs: bundle()(*args, **kwargs))
    patched, made = vl_convert.javascript_bundle, []
    for _ in range(2):
        monkeypatch.setattr(alt.JupyterChart, "_is_offline", False)  # as in a fresh kernel
        monkeypatch.setattr(alt.JupyterChart, "_esm", "")
        render._enable_offline_widgets()
        made.append(alt.JupyterChart._esm)
    assert bundle.calls == 1 and made[0] == made[1] and "vega" in made[0].lower() and len(made[0]) > 100_000
    assert vl_convert.javascript_bundle is patched  # put back as it was found
    assert any(on.rglob("*.pickle"))


def test_checked_data_is_read_back_not_checked_again(on: Path, tmp_path: Path, monkeypatch):
    # The build checks every file before its kernels start; each kernel then reads the checked
    # frames from the store rather than checking every file again.
    folder = tmp_path / "data"
    shutil.copytree(data.DEFAULT_DATA_DIR, folder)
    data.clear_cache()
    data.validate_all(folder)
    names = list(data.resources(folder))
    assert len(list(on.rglob("*.pickle"))) == len(names)
    checked = {name: data.load(name, folder) for name in names}
    data.clear_cache()  # as a new kernel starts: nothing in memory

    def not_again(name, directory):
        raise AssertionError(f"{name} was checked again")

    monkeypatch.setattr(data, "_checked", not_again)
    for name in names:
        pd.testing.assert_frame_equal(data.load(name, folder), checked[name])
    data.clear_cache()


def test_a_file_that_fails_its_checks_leaves_nothing_in_the_store(on: Path, tmp_path: Path):
    folder = tmp_path / "data"
    shutil.copytree(data.DEFAULT_DATA_DIR, folder)
    power = folder / data.resources(folder)["power"].path.name
    power.write_text(power.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")  # header only
    data.clear_cache()
    with pytest.raises(data.DataError, match="no data rows"):
        data.load("power", folder)
    assert list(on.rglob("*.pickle")) == []
    with pytest.raises(data.DataError, match="no data rows"):  # and fails again, from the file
        data.load("power", folder)
    data.clear_cache()
