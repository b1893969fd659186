"""The data files and their loader: every file validates; malformed files fail clearly."""

from __future__ import annotations

import json
import math
import shutil
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
         ["power.csv", "row 1", "'power_w'", "greater than 0"]),
        ("power.csv", "gb200,chip_rated,1200,", "gb200,chip_rated,1.2kW,", "power",
         ["power.csv", "row 4", "'power_w'", "'1.2kW' is not a number"]),
        ("power.csv", "gb200,chip_rated,1200,", "gb200,chip_rated,nan,", "power",
         ["power.csv", "row 4", "'power_w'", "not a finite number"]),
        ("power.csv", "gb300,chip_rated,1400,", "gb999,chip_rated,1400,", "power",
         ["power.csv", "row 7", "'system'", "unknown system 'gb999'", "systems.csv"]),
        ("power.csv", "system,basis,power_w,bound", "system,basis,watts,bound", "power",
         ["power.csv", "missing column", "'power_w'"]),
        ("power.csv", "jalapeno,chip_rated,700,exact", "jalapeno,chip_rated,,exact", "power",
         ["power.csv", "row 1", "'bound'", "'exact'"]),
        ("benchmark_results.csv", "gpt-oss-120b,jalapeno,tps_per_kw,85448", "gpt-oss-999b,jalapeno,tps_per_kw,85448",
         "benchmark_results", ["benchmark_results.csv", "row 1", "'model'", "unknown model 'gpt-oss-999b'"]),
        ("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw,44960", "gpt-oss-120b,gb200,tps_per_kw,44 960",
         "benchmark_results", ["benchmark_results.csv", "row 2", "'value'", "'44 960' is not a number"]),
        ("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw", "gpt-oss-120b,gb200,tps_per_watt",
         "benchmark_results", ["benchmark_results.csv", "row 2", "'metric'", "not one of"]),
        ("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw", "gpt-oss-120b,jalapeno,tps_per_kw",
         "benchmark_results", ["benchmark_results.csv", "row 2", "duplicate key"]),
        ("workloads.csv", "8k/1k,8192,1024", "8k/1k,8192.5,1024", "workloads",
         ["workloads.csv", "row 1", "'isl_tokens'", "not a whole number"]),
        ("workloads.csv", ",0.8,1.0,", ",1.0,0.8,", "workloads",
         ["workloads.csv", "row 1", "'input_min_fraction'"]),
        ("sources.csv", ",article,reported,", ",article,,", "sources",
         ["sources.csv", "row 1", "'status'", "required"]),
    ],
)
def test_malformed_files_fail_naming_file_row_and_column(broken, file, old, new, resource, expected):
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
