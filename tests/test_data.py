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

from perwatt import data, fleet_profiles

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


def test_tpu7x_and_trainium2_rows_keep_their_unknowns_empty_with_a_note():
    chips = data.load("accelerators", DATA).set_index("accelerator")
    sources = data.load("sources", DATA).set_index("source_id")
    tpu, trn = chips.loc["tpu7x"], chips.loc["trainium2"]
    # The vendors publish GiB; the column is GB, to one decimal.
    assert tpu["hbm_gb"] == round(192 * 2 ** 30 / 1e9, 1) == 206.2
    assert trn["hbm_gb"] == round(96 * 2 ** 30 / 1e9, 1) == 103.1
    assert [tpu[c] for c in ("bandwidth_tb_s", "fp8_tflops", "bf16_tflops", "scale_up_gb_s", "scale_up_domain")] == \
        [7.37, 4614, 2307, 600, 64]
    assert [trn[c] for c in ("bandwidth_tb_s", "fp8_tflops", "bf16_tflops", "scale_up_gb_s", "scale_up_domain",
                             "scale_out_gb_s")] == [2.9, 1299, 667, 512, 16, 25]
    for row in (tpu, trn):
        assert pd.isna(row["power_w"]) and pd.isna(row["fp4_tflops"])
        assert "power" in row["note"].lower() and "not published" in row["note"]
        assert "GiB" in row["note"] and row["status"] == "secondary"
        assert sources.loc[row["source_id"], "status"] == "confirmed"
    assert pd.isna(tpu["scale_out_gb_s"]) and "modelling choice" in tpu["note"] and "not a switch" in tpu["note"]
    assert sources.loc["google-ironwood-announcement", "status"] == "secondary"


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
    assert "glue data" not in console and "perwatt: executed" not in console  # it stopped before any chapter ran
    # The kernels start while the data is checked; the build stopped them (a kernel works in the book's folder).
    assert _working_in(copy) == []


def _working_in(folder: Path) -> list[int]:
    """Processes whose working folder is ``folder`` or inside it."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")).is_relative_to(folder):
                found.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            pass
    return found


# Schema constraints, each at its boundary (issue 16: dropping `maximum` or `pattern` went unnoticed).
def test_a_value_at_the_maximum_loads_and_one_above_it_is_refused(broken):
    # workloads.csv: every *_fraction has maximum 1; 8k/1k's input_max_fraction is 1.0 on line 2.
    directory = broken("workloads.csv", "8k/1k,8192,1024,0.8,1.0,", "8k/1k,8192,1024,0.8,1,")
    assert data.load("workloads", directory).loc[0, "input_max_fraction"] == 1.0  # the maximum itself is allowed
    data.clear_cache()  # the same folder, edited again
    directory = broken("workloads.csv", "8k/1k,8192,1024,0.8,1,", "8k/1k,8192,1024,0.8,1.0000001,")
    with pytest.raises(data.DataError) as info:
        data.load("workloads", directory)
    assert str(info.value) == (f"{directory / 'workloads.csv'}, line 2, column 'input_max_fraction': "
                               "1.0000001 is above the maximum 1")


def test_decimals_at_and_above_their_maximum(broken):
    # benchmark_results.csv: decimals has maximum 15 (a double carries about 15 significant digits).
    directory = broken("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw,44960,0,", "gpt-oss-120b,gb200,tps_per_kw,44960,15,")
    assert data.load("benchmark_results", directory).loc[1, "decimals"] == 15
    data.clear_cache()
    directory = broken("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw,44960,15,", "gpt-oss-120b,gb200,tps_per_kw,44960,16,")
    with pytest.raises(data.DataError, match=r"benchmark_results.csv, line 3, column 'decimals': 16 is above the maximum 15"):
        data.load("benchmark_results", directory)


@pytest.mark.parametrize(("old", "new", "bad"), [
    ("kimi-k2.5,Kimi K2.5,", "Kimi-K2.5,Kimi K2.5,", "Kimi-K2.5"),     # capitals: the first character fails
    ("kimi-k2.5,Kimi K2.5,", "kimi-k2.5_v2,Kimi K2.5,", "kimi-k2.5_v2"),  # a valid prefix: the whole cell must match
])
def test_a_cell_failing_its_pattern_is_refused(broken, old, new, bad):
    # models.csv: model must match [a-z0-9.-]+ in full; Kimi K2.5 is on line 4.
    directory = broken("models.csv", old, new)
    with pytest.raises(data.DataError) as info:
        data.load("models", directory)
    assert str(info.value) == (f"{directory / 'models.csv'}, line 4, column 'model': {bad!r} does not match "
                               "the pattern [a-z0-9.-]+")


# clear_cache must reach every cache (issue 16: skipping one went unnoticed).
def _cached_functions() -> list:
    """Every function in perwatt/ decorated with ``@data.cached`` or ``@data.stored``, found in the source, and every
    figure factory (``figures.kit.figure`` wraps each in ``data.cached``)."""
    import ast
    import importlib

    from perwatt import figures
    found = []
    for path in sorted((DATA.parent / "perwatt").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(ast.unparse(d) in ("data.cached", "data.stored")
                                                             for d in node.decorator_list):
                module = ".".join(path.relative_to(DATA.parent).with_suffix("").parts)
                found.append(getattr(importlib.import_module(module), node.name))
    return found + list(figures.kit.REGISTRY)


#: Arguments to fill the cache of each cached function that takes some (by name).
CACHE_ARGUMENTS = {"_profiles": ("gpt-oss-120b",), "_load_curve": (1,), "_model_spec": ("llama-3.1-8b",),
                   "_chip": ("h100",), "_terms": ("gpt-oss-120b", "as_released"), "_refit_by_chip": ("layer_latency_us",), "_capacity": ("gpt-oss-120b", "gb200", 1024.0, 1024.0, 20.0),
                   "_sourced_point": ("gpt-oss-120b", "gb200", 1024.0, 1024.0, 20.0, 1200.0),
                   "_solved": ("gpt-oss-120b", 10000.0, 192.0),
                   "_jalapeno_point": ("gpt-oss-120b", 10000.0, 192.0, 1024.0, 1024.0, 20.0),
                   "_phases": ("gpt-oss-120b", "h100", 1024.0, 1024.0),
                   "_points": ("deepseek-r1", ("h100",)),
                   "_solve": (b"\0" * 8, b"\0" * 8, (1, 1), (0.0,), (1.0,), True),
                   "_highs": (b"\0" * 8, b"\0" * 8, (1, 1), (0.0,), (1.0,), True),
                   "_price_per_chip_hour": ("gb200",), "_loop_grid": ("gpt-oss-120b", 5, True),
                   "_labels": ("models", "model"), "_workloads": (35.0,),
                   "_kit": (35.0, 1.0, fleet_profiles.JalapenoAssumptions(), None),
                   "_priced_points": ("deepseek-r1", ("gb200", "h100"))}


def test_every_cached_function_is_registered_and_clear_cache_empties_them_all():
    import inspect
    functions = _cached_functions()
    assert len(functions) >= 20  # eleven decorated in the source, and the book's figures
    registered = {id(c) for c in data._CACHES}
    for function in functions:
        assert id(function.cache_clear.__self__) in registered, f"{function.__qualname__} is not cleared by clear_cache"
    # Fill every one of them, then clear: each must be empty, not only the first or the last.
    for function in functions:
        needs = [p for p in inspect.signature(function).parameters.values() if p.default is p.empty]
        assert not needs or function.__name__ in CACHE_ARGUMENTS, f"add arguments for {function.__qualname__}"
        function(*CACHE_ARGUMENTS.get(function.__name__, ()))
        assert function.cache_clear.__self__.cache_info().currsize > 0, function.__qualname__
    assert data._load_cached.cache_info().currsize > 0
    data.clear_cache()
    assert data._load_cached.cache_info().currsize == 0
    assert [f.__qualname__ for f in functions if f.cache_clear.__self__.cache_info().currsize] == []
    assert [c for c in data._CACHES if c.cache_info().currsize] == []


def test_after_clear_cache_an_edited_file_is_read_again(tmp_path: Path, monkeypatch):
    from perwatt import catalog
    copy = tmp_path / "data"
    shutil.copytree(DATA, copy)
    monkeypatch.setenv(data.ENVIRONMENT_VARIABLE, str(copy))
    data.clear_cache()
    try:
        assert catalog.assumption("chat_min_tokens_per_s_per_user") == 20.0
        assert catalog.table_workload() == "8k/1k"
        path = copy / "assumptions.csv"
        path.write_text(path.read_text(encoding="utf-8").replace("chat_min_tokens_per_s_per_user,20,",
                                                                 "chat_min_tokens_per_s_per_user,35,"), encoding="utf-8")
        assert catalog.assumption("chat_min_tokens_per_s_per_user") == 20.0  # same folder: still the cached answer
        data.clear_cache()
        assert catalog.assumption("chat_min_tokens_per_s_per_user") == 35.0
        assert data.load("assumptions").set_index("assumption_id").loc["chat_min_tokens_per_s_per_user", "value"] == 35.0
    finally:
        monkeypatch.delenv(data.ENVIRONMENT_VARIABLE)
        data.clear_cache()


# Gaps the mutation run on the data modules found (perf/mutation.py --group data).
def test_data_dictionary_known_rows():
    rules = data.dictionary(DATA).set_index(["resource", "column"])
    assert rules.loc[("workloads", "input_max_fraction"), "rules"] == "required; > 0; ≤ 1"
    assert rules.loc[("models", "model"), "rules"] == "required; matches [a-z0-9.-]+; the key"
    assert rules.loc[("benchmark_results", "model"), "rules"] == "required; part of the key; refers to models.model"
    assert rules.loc[("benchmark_results", "metric"), "rules"] == (
        "required; one of: tps_per_kw, e2e_latency_s, interactivity; part of the key")
    assert rules.loc[("benchmark_results", "decimals"), "rules"] == "required; ≥ 0; ≤ 15"
    power = rules.loc[("power", "power_w")]
    assert (power["file"], power["type"], power["unit"], power["rules"]) == ("power.csv", "number", "W", "> 0")
    assert len(rules) == sum(len(r.fields) for r in data.resources(DATA).values())


@pytest.mark.parametrize(("schema", "expected"), [
    ({"fields": [{"name": "a", "constraints": []}]}, "field 'a': 'constraints' must be an object"),
    ({"fields": [{"name": "a"}], "primaryKey": "a"}, "primaryKey must list fields of the schema"),
    ({"fields": [{"name": "a"}], "primaryKey": ["b"]}, "primaryKey must list fields of the schema"),
    ({"fields": [{"name": "a"}], "foreignKeys": [{"fields": "a", "reference": {"resource": "x"}}]},
     "a foreign key needs 'fields'"),
    ({"fields": [{"name": "a"}], "foreignKeys": [{"fields": "b", "reference": {"resource": "x", "fields": "y"}}]},
     "a foreign key needs 'fields'"),
])
def test_descriptor_field_errors_are_named(tmp_path: Path, schema, expected):
    _assert_descriptor_refused(tmp_path, {"resources": [{"name": "power", "path": "power.csv", "schema": schema}]},
                               expected, "datapackage.json: resource 'power'")


@pytest.mark.parametrize(("descriptor", "expected"), [
    ([], "top level must be a JSON object"),
    ({"resources": [{"name": "power", "path": "power.csv"}]}, "needs 'schema.fields'"),
    ({"resources": {}}, "'resources' must be a list"),
])
def test_descriptor_of_the_wrong_shape_is_named(tmp_path: Path, descriptor, expected):
    _assert_descriptor_refused(tmp_path, descriptor, expected, "datapackage.json")


def _assert_descriptor_refused(folder: Path, descriptor: object, expected: str, names: str) -> None:
    (folder / "datapackage.json").write_text(json.dumps(descriptor))
    with pytest.raises(data.DataError, match=expected) as info:
        data.load("power", folder)
    assert names in str(info.value)


def test_duplicate_key_names_every_field_of_the_key(broken):
    directory = broken("benchmark_results.csv", "gpt-oss-120b,gb200,tps_per_kw", "gpt-oss-120b,jalapeno,tps_per_kw")
    with pytest.raises(data.DataError, match=r"line 3: duplicate key \(model='gpt-oss-120b', system='jalapeno', "
                                             r"metric='tps_per_kw'\)$"):
        data.load("benchmark_results", directory)


def test_a_printed_ratios_file_missing_many_rows_shows_five_and_counts_the_rest(broken):
    # reported_ratios.csv needs 9 rows (3 models × 3 metrics); keep gpt-oss-120b's 3: 6 are missing.
    path = DATA / "reported_ratios.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    directory = broken("reported_ratios.csv", "model", "model")
    (directory / "reported_ratios.csv").write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    with pytest.raises(data.DataError) as info:
        data.load("reported_ratios", directory)
    assert str(info.value).count("model=") == 5 and " and 1 more (each model, metric" in str(info.value)


def test_a_workload_drawing_one_length_loads(broken):
    # min fraction = max fraction is allowed (every request the same length); only min > max is refused.
    directory = broken("workloads.csv", "8k/1k,8192,1024,0.8,1.0,0.8,1.0,", "8k/1k,8192,1024,0.8,1.0,1.0,1.0,")
    assert data.load("workloads", directory).loc[0, "output_min_fraction"] == 1.0


@pytest.mark.parametrize("value", [None, "", "data", "relative/elsewhere", str(data.DEFAULT_DATA_DIR)])
def test_the_folder_caches_key_on_is_the_folder_data_reads(value, monkeypatch, tmp_path):
    # datadir.resolved() remembers its answer; it must be data_dir() resolved for every value of
    # PERWATT_DATA, unset, empty (the working folder), relative or absolute, in any working folder.
    from perwatt import datadir

    monkeypatch.chdir(tmp_path)
    if value is None:
        monkeypatch.delenv(datadir.ENVIRONMENT_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(datadir.ENVIRONMENT_VARIABLE, value)
    assert datadir.resolved() == str(datadir.data_dir().resolve())
