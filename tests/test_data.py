"""The data files and their loader: every file validates; malformed files fail clearly."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from perwatt import data

DATA = Path(__file__).resolve().parent.parent / "data"


def test_every_declared_resource_loads_and_every_csv_is_declared():
    declared = data.resources(DATA)
    on_disk = {p.name for p in DATA.glob("*.csv")}
    assert {r.path.name for r in declared.values()} == on_disk
    for name in declared:
        frame = data.load(name, DATA)
        assert len(frame) > 0, name


def test_schema_fields_carry_units_for_every_number():
    for resource in data.resources(DATA).values():
        for field in resource.fields:
            if field.get("type") in ("number", "integer"):
                assert field.get("unit"), f"{resource.name}.{field['name']} has no unit"


def test_benchmark_values_match_the_article():
    # Spot checks against the table in the source text itself, not against our own CSV.
    relative = data.load("sources", DATA).set_index("source_id").loc["realbet", "file"]
    text = (DATA.parent / relative).resolve()  # paths in sources.csv are relative to the repository
    if not text.exists():
        pytest.skip(f"the article's text is not beside this checkout ({text})")
    article = text.read_text(encoding="utf-8")
    results = data.load("benchmark_results", DATA)
    for row in results.itertuples():
        shown = f"{row.value:,.0f}" if row.value >= 100 else f"{row.value:.2f}"
        assert shown in article, f"{row.model}/{row.system}/{row.metric}: {shown} not in the article"


def test_unknowns_stay_empty_with_a_note():
    power = data.load("power", DATA)
    unknown = power[power["bound"] == "unknown"]
    assert len(unknown) == 3
    assert unknown["power_w"].isna().all()
    assert unknown["note"].str.len().gt(20).all()
    assert power.loc[power["bound"] != "unknown", "power_w"].notna().all()


def test_every_row_names_a_known_source():
    sources = set(data.load("sources", DATA)["source_id"])
    for name, resource in data.resources(DATA).items():
        frame = data.load(name, DATA)
        if "source_id" in frame and name != "sources":
            cited = {s for s in frame["source_id"] if isinstance(s, str)}
            assert cited <= sources, name


@pytest.fixture
def broken(tmp_path: Path):
    """A copy of data/ to damage; returns a function that rewrites one file."""
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    data.clear_cache()

    def rewrite(file: str, old: str, new: str) -> Path:
        path = copy / file
        text = path.read_text(encoding="utf-8")
        assert old in text, f"test setup: {old!r} not in {file}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
        return copy

    yield rewrite
    data.clear_cache()


@pytest.mark.parametrize(
    ("file", "old", "new", "resource", "expected"),
    [
        ("power.csv", "jalapeno,chip_rated,700,", "jalapeno,chip_rated,-700,", "power",
         ["power.csv", "line 2", "'power_w'", "greater than 0"]),
        ("power.csv", "gb200,chip_rated,1200,", "gb200,chip_rated,1.2kW,", "power",
         ["power.csv", "line 5", "'power_w'", "'1.2kW' is not a number"]),
        ("power.csv", "gb200,chip_rated,1200,", "gb200,chip_rated,nan,", "power",
         ["power.csv", "line 5", "'power_w'", "not a finite number"]),
        ("power.csv", "gb300,chip_rated,1400,", "gb999,chip_rated,1400,", "power",
         ["power.csv", "line 8", "'system'", "unknown system 'gb999'", "systems.csv"]),
        ("power.csv", "system,basis,power_w,bound", "system,basis,watts,bound", "power",
         ["power.csv", "missing column", "'power_w'"]),
        ("power.csv", "jalapeno,chip_rated,700,exact", "jalapeno,chip_rated,,exact", "power",
         ["power.csv", "line 2", "'bound'", "'exact'"]),
        ("benchmark_results.csv", "gpt-oss-120b,jalapeno,tps_per_kw,85448", "gpt-oss-999b,jalapeno,tps_per_kw,85448",
         "benchmark_results", ["benchmark_results.csv", "line 2", "'model'", "unknown model 'gpt-oss-999b'"]),
        ("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw,44960", "gpt-oss-120b,gb200,tps_per_kw,44 960",
         "benchmark_results", ["benchmark_results.csv", "line 3", "'value'", "'44 960' is not a number"]),
        ("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw", "gpt-oss-120b,gb200,tps_per_watt",
         "benchmark_results", ["benchmark_results.csv", "line 3", "'metric'", "not one of"]),
        ("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw", "gpt-oss-120b,jalapeno,tps_per_kw",
         "benchmark_results", ["benchmark_results.csv", "line 3", "duplicate key"]),
        ("workloads.csv", "8k/1k,8192,1024", "8k/1k,8192.5,1024", "workloads",
         ["workloads.csv", "line 2", "'isl_tokens'", "not a whole number"]),
        ("workloads.csv", ",0.8,1.0,", ",1.0,0.8,", "workloads",
         ["workloads.csv", "line 2", "'input_min_fraction'"]),
        ("sources.csv", ",article,reported,", ",article,,", "sources",
         ["sources.csv", "line 2", "'status'", "required"]),
    ],
)
def test_malformed_files_fail_naming_file_line_and_column(broken, file, old, new, resource, expected):
    directory = broken(file, old, new)
    with pytest.raises(data.DataError) as info:
        data.load(resource, directory)
    message = str(info.value)
    for part in expected:
        assert part in message, f"{part!r} missing from: {message}"


def test_unexpected_column_is_refused(broken):
    directory = broken("pue.csv", "cooling,pue,source_id,note", "cooling,pue,source_id,note,extra")
    path = directory / "pue.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([lines[0]] + [line + "," for line in lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(data.DataError, match="unexpected column.*'extra'"):
        data.load("pue", directory)


def test_missing_file_and_descriptor_are_named(tmp_path: Path):
    with pytest.raises(data.DataError, match="datapackage.json"):
        data.load("power", tmp_path)
    (tmp_path / "datapackage.json").write_text(json.dumps(
        {"resources": [{"name": "power", "path": "power.csv", "schema": {"fields": []}}]}))
    with pytest.raises(data.DataError, match="power.csv: file not found"):
        data.load("power", tmp_path)


def test_loaded_types_are_numbers_not_text():
    results = data.load("benchmark_results", DATA)
    assert pd.api.types.is_float_dtype(results["value"])
    workloads = data.load("workloads", DATA)
    assert pd.api.types.is_integer_dtype(workloads["isl_tokens"])
    assert not any(math.isnan(v) for v in results["value"])


def test_load_returns_a_copy():
    first = data.load("power", DATA)
    first.loc[0, "power_w"] = -1
    assert data.load("power", DATA).loc[0, "power_w"] > 0


def test_descriptor_of_the_wrong_shape_is_named(tmp_path: Path):
    for descriptor, expected in (([], "top level must be a JSON object"),
                                 ({"resources": [{"name": "power", "path": "power.csv"}]}, "needs 'schema.fields'"),
                                 ({"resources": {}}, "'resources' must be a list")):
        (tmp_path / "datapackage.json").write_text(json.dumps(descriptor))
        with pytest.raises(data.DataError, match=expected) as info:
            data.load("power", tmp_path)
        assert "datapackage.json" in str(info.value)


def test_a_deleted_required_row_fails_at_load(broken):
    directory = broken("benchmark_results.csv", "kimi-k2.5,gb300,interactivity,120,0,realbet,\n", "")
    with pytest.raises(data.DataError, match=r"benchmark_results.csv, line 15: model 'kimi-k2.5', system 'gb300' "
                                             r"has no row for metric 'interactivity'"):
        data.load("benchmark_results", directory)


def test_a_deleted_printed_ratio_fails_at_load(broken):
    directory = broken("reported_ratios.csv", "deepseek-r1,e2e_latency_s,3.6,1,realbet,Published as ≈3.6× lower.\n", "")
    with pytest.raises(data.DataError, match=r"reported_ratios.csv: no row for model='deepseek-r1', metric='e2e_latency_s'"):
        data.load("reported_ratios", directory)


@pytest.mark.build
def test_a_corrupted_data_file_stops_the_build_with_its_error(tmp_path: Path):
    from perwatt import devtools

    copy = tmp_path / "book"
    shutil.copytree(devtools.REPO, copy, ignore=shutil.ignore_patterns(
        ".venv", "_build", ".git", ".hypothesis", ".pytest_cache", "__pycache__", "wheelhouse", ".jupyter_cache"))
    power = copy / "data" / "power.csv"
    power.write_text(power.read_text(encoding="utf-8").replace("gb200,chip_rated,1200,", "gb200,chip_rated,1.2kW,"),
                     encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PERWATT_RENDER", "PERWATT_DATA")}
    proc = subprocess.run([devtools.jupyter_book(), "build", str(copy), "--path-output", str(tmp_path / "out"),
                           *devtools.BUILD_FLAGS], capture_output=True, text=True, env=env, timeout=120)
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"{power}, line 5, column 'power_w': '1.2kW' is not a number" in console, console[-3000:]
    assert "glue data" not in console  # it stopped before any chapter ran
