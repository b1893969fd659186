"""Load the book's data files, validated against ``data/datapackage.json``.

The data package (Frictionless Table Schema) is the one description of every file:
columns, types, units, constraints, keys. :func:`load` reads a file as text, checks every
cell against that schema and only then converts it, so a bad file fails with an error
that names the file, the row and the column instead of turning into NaN somewhere
downstream. An empty cell in an optional column is an unknown and stays empty (NaN);
its row's note says why.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pandas as pd

F = TypeVar("F", bound=Callable)

#: Where the data lives unless ``PERWATT_DATA`` points elsewhere.
DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / "data"


class DataError(ValueError):
    """A data file does not match its schema. The message names file, row and column."""


def data_dir() -> Path:
    """The folder holding ``datapackage.json`` and the CSV files."""
    return Path(os.environ.get("PERWATT_DATA", DEFAULT_DATA_DIR))


@dataclass(frozen=True)
class Resource:
    """One CSV file and its Table Schema, as declared in the data package."""

    name: str
    path: Path
    title: str
    schema: dict

    @property
    def fields(self) -> list[dict]:
        return self.schema["fields"]

    def field(self, column: str) -> dict:
        return next(f for f in self.fields if f["name"] == column)


def _read_package(directory: Path) -> dict:
    path = directory / "datapackage.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: the data package descriptor is missing") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err})") from None


def resources(directory: Path | None = None) -> dict[str, Resource]:
    """Every resource the data package declares, by name."""
    directory = Path(directory) if directory is not None else data_dir()
    package = _read_package(directory)
    return {
        r["name"]: Resource(r["name"], directory / r["path"], r.get("title", r["name"]), r["schema"])
        for r in package["resources"]
    }


def _convert(raw: str, field: dict, where: str) -> object:
    """Check one cell against its field and return it typed (None for an empty cell)."""
    constraints = field.get("constraints", {})
    if raw.strip() == "":
        if constraints.get("required"):
            raise DataError(f"{where}: a value is required but the cell is empty")
        return None
    kind = field.get("type", "string")
    value: object = raw
    if kind in ("number", "integer"):
        try:
            number = float(raw)
        except ValueError:
            raise DataError(f"{where}: {raw!r} is not a number") from None
        if not math.isfinite(number):
            raise DataError(f"{where}: {raw!r} is not a finite number")
        if kind == "integer":
            if not number.is_integer():
                raise DataError(f"{where}: {raw!r} is not a whole number")
            number = int(number)
        value = number
        unit = field.get("unit")
        unit_note = f" {unit}" if unit and len(unit) < 12 else ""
        if "minimum" in constraints and number < constraints["minimum"]:
            raise DataError(f"{where}: {raw}{unit_note} is below the minimum {constraints['minimum']}")
        if "exclusiveMinimum" in constraints and number <= constraints["exclusiveMinimum"]:
            raise DataError(
                f"{where}: {raw}{unit_note} must be greater than {constraints['exclusiveMinimum']}"
            )
        if "maximum" in constraints and number > constraints["maximum"]:
            raise DataError(f"{where}: {raw}{unit_note} is above the maximum {constraints['maximum']}")
    if kind == "boolean":
        # Table Schema's default spellings of true and false.
        truthy, falsy = ("true", "True", "TRUE", "1"), ("false", "False", "FALSE", "0")
        if raw not in truthy + falsy:
            raise DataError(f"{where}: {raw!r} is not true or false")
        value = raw in truthy
    if "enum" in constraints and value not in constraints["enum"]:
        allowed = ", ".join(map(str, constraints["enum"]))
        raise DataError(f"{where}: {raw!r} is not one of: {allowed}")
    if "pattern" in constraints and not re.fullmatch(constraints["pattern"], raw):
        raise DataError(f"{where}: {raw!r} does not match the pattern {constraints['pattern']}")
    return value


def _validate_frame(text: pd.DataFrame, resource: Resource) -> pd.DataFrame:
    path = resource.path
    expected = [f["name"] for f in resource.fields]
    missing = [c for c in expected if c not in text.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(map(repr, missing))}")
    unexpected = [c for c in text.columns if c not in expected]
    if unexpected:
        raise DataError(
            f"{path}: unexpected column(s) {', '.join(map(repr, unexpected))}; "
            "declare them in datapackage.json first"
        )
    columns: dict[str, list] = {c: [] for c in expected}
    for row_number, (_, row) in enumerate(text.iterrows(), start=1):
        for field in resource.fields:
            column = field["name"]
            where = f"{path}, row {row_number}, column {column!r}"
            columns[column].append(_convert(row[column], field, where))
    frame = pd.DataFrame(columns)
    for field in resource.fields:
        column = field["name"]
        if field.get("type") in ("number", "integer"):
            # Empty optional cells are explicit unknowns: they become NaN on purpose.
            frame[column] = pd.to_numeric(frame[column].astype("object").where(frame[column].notna()))
            if field["type"] == "integer" and frame[column].notna().all():
                frame[column] = frame[column].astype("int64")
        elif field.get("type") == "boolean":
            frame[column] = frame[column].astype("bool")
        else:
            frame[column] = frame[column].astype("object")
    key = resource.schema.get("primaryKey")
    if key:
        duplicated = frame.duplicated(subset=key, keep="first")
        if duplicated.any():
            row_number = int(duplicated.to_numpy().nonzero()[0][0]) + 1
            values = ", ".join(f"{k}={frame.loc[row_number - 1, k]!r}" for k in key)
            raise DataError(f"{path}, row {row_number}: duplicate key ({values})")
    return frame


def _read_text(resource: Resource) -> pd.DataFrame:
    try:
        return pd.read_csv(resource.path, dtype=str, keep_default_na=False, encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{resource.path}: file not found (declared as {resource.name!r})") from None
    except pd.errors.ParserError as err:
        raise DataError(f"{resource.path}: not a well-formed CSV file ({err})") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{resource.path}: the file is empty") from None


def _check_foreign_keys(name: str, frame: pd.DataFrame, all_resources: dict[str, Resource],
                        directory: Path) -> None:
    resource = all_resources[name]
    for fk in resource.schema.get("foreignKeys", []):
        column = fk["fields"]
        target = fk["reference"]["resource"]
        target_column = fk["reference"]["fields"]
        known = set(_load_cached(target, str(directory))[target_column])
        for row_number, value in enumerate(frame[column], start=1):
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            if value not in known:
                raise DataError(
                    f"{resource.path}, row {row_number}, column {column!r}: unknown "
                    f"{column.removesuffix('_id')} {value!r} (not in {all_resources[target].path.name})"
                )


#: Every cache :func:`cached` made, so that :func:`clear_cache` reaches them without importing
#: the modules above this one.
_CACHES: list = []


def cached(function: F) -> F:
    """Remember ``function``'s results per data folder (``PERWATT_DATA``) and arguments.

    Keying on the folder means a reader who points ``PERWATT_DATA`` elsewhere never gets answers
    computed from the old files; :func:`clear_cache` forgets every such cache at once. A
    DataFrame result is copied on the way out, so callers may change what they get.
    """
    @functools.cache
    def by_folder(directory: str, *args, **kwargs):
        return function(*args, **kwargs)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        result = by_folder(str(data_dir().resolve()), *args, **kwargs)
        return result.copy() if isinstance(result, pd.DataFrame) else result

    _CACHES.append(by_folder)
    wrapper.cache_clear = by_folder.cache_clear
    return wrapper


@functools.cache
def _load_cached(name: str, directory: str) -> pd.DataFrame:
    all_resources = resources(Path(directory))
    if name not in all_resources:
        raise DataError(f"no resource named {name!r} in {directory}/datapackage.json")
    resource = all_resources[name]
    frame = _validate_frame(_read_text(resource), resource)
    _check_foreign_keys(name, frame, all_resources, Path(directory))
    _check_rules(name, frame, resource)
    return frame


def _check_rules(name: str, frame: pd.DataFrame, resource: Resource) -> None:
    """Rules that span columns, which Table Schema cannot state."""
    if name == "power":
        for row_number, (power, bound) in enumerate(zip(frame["power_w"], frame["bound"]), start=1):
            unknown = math.isnan(power)
            if unknown != (bound == "unknown"):
                raise DataError(
                    f"{resource.path}, row {row_number}, column 'bound': {bound!r} does not match "
                    f"power_w ({'empty' if unknown else power}); use 'unknown' exactly when power_w is empty"
                )
    if name == "claims":
        for row_number, (low, high) in enumerate(zip(frame["low"], frame["high"]), start=1):
            if math.isnan(low) != math.isnan(high):
                raise DataError(f"{resource.path}, row {row_number}, column 'high': give both ends of a range or neither")
            if not math.isnan(low) and low > high:
                raise DataError(f"{resource.path}, row {row_number}, column 'low': {low} is above high {high}")
    if name == "workloads":
        for side in ("input", "output"):
            low_high = zip(frame[f"{side}_min_fraction"], frame[f"{side}_max_fraction"])
            for row_number, (low, high) in enumerate(low_high, start=1):
                if low > high:
                    raise DataError(f"{resource.path}, row {row_number}, column '{side}_min_fraction': "
                                    f"{low} is above {side}_max_fraction {high}")
        if int(frame["behind_table"].sum()) != 1:
            raise DataError(f"{resource.path}, column 'behind_table': exactly one workload must be marked true, "
                            f"found {int(frame['behind_table'].sum())}")


def validate_file(path: str | Path, name: str, *, check_foreign_keys: bool = True) -> pd.DataFrame:
    """Validate any CSV file (a reader's own, say) against the schema of the book's resource ``name``.

    With ``check_foreign_keys=False`` the file may name models, systems and sources the book
    does not know. Raises :class:`DataError` naming the file, row and column.
    """
    all_resources = resources()
    if name not in all_resources:
        raise DataError(f"no resource named {name!r} in datapackage.json")
    declared = all_resources[name]
    resource = Resource(declared.name, Path(path), declared.title, declared.schema)
    frame = _validate_frame(_read_text(resource), resource)
    if check_foreign_keys:
        _check_foreign_keys(name, frame, {**all_resources, name: resource}, data_dir())
    _check_rules(name, frame, resource)
    return frame


def load(name: str, directory: Path | str | None = None) -> pd.DataFrame:
    """Load one resource by name (``"power"``, ``"benchmark_results"``, ...), validated.

    Returns a fresh copy, so callers may modify it.
    """
    directory = Path(directory) if directory is not None else data_dir()
    return _load_cached(name, str(directory.resolve())).copy()


def clear_cache() -> None:
    """Forget loaded files and everything computed from them (after editing data in a live session)."""
    _load_cached.cache_clear()
    for forget in _CACHES:
        forget.cache_clear()


def dictionary(directory: Path | str | None = None) -> pd.DataFrame:
    """The data dictionary: one row per column of every file, straight from datapackage.json."""
    rows = []
    for resource in resources(Path(directory) if directory is not None else None).values():
        for field in resource.fields:
            constraints = field.get("constraints", {})
            rules = []
            if constraints.get("required"):
                rules.append("required")
            for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤")):
                if key in constraints:
                    rules.append(f"{word} {constraints[key]}")
            if "enum" in constraints:
                rules.append("one of: " + ", ".join(map(str, constraints["enum"])))
            if "pattern" in constraints:
                rules.append(f"matches {constraints['pattern']}")
            keys = resource.schema.get("primaryKey", [])
            references = [fk["reference"] for fk in resource.schema.get("foreignKeys", [])
                          if fk["fields"] == field["name"]]
            if field["name"] in keys:
                rules.append("part of the key" if len(keys) > 1 else "the key")
            for ref in references:
                rules.append(f"refers to {ref['resource']}.{ref['fields']}")
            rows.append({
                "file": resource.path.name,
                "resource": resource.name,
                "title": resource.title,
                "column": field["name"],
                "type": field.get("type", "string"),
                "unit": field.get("unit", ""),
                "description": field.get("description", ""),
                "rules": "; ".join(rules),
            })
    return pd.DataFrame(rows)
