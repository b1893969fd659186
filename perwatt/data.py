"""Load the book's data files, validated against ``data/datapackage.json``.

The data package (Frictionless Table Schema) is the one description of every file:
columns, types, units, constraints, keys. :func:`load` reads a file as text, checks every
cell against that schema and only then converts it, so a bad file fails with an error
that names the file, the line and the column instead of turning into NaN somewhere
downstream. An empty cell in an optional column is an unknown and stays empty (NaN);
its row's note says why.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pandas as pd

from perwatt import csvfile, datadir, rules, store
from perwatt.csvfile import DataError
from perwatt.datadir import DEFAULT_DATA_DIR, ENVIRONMENT_VARIABLE, data_dir  # noqa: F401 (this module's API too)

__all__ = ["DataError", "cached", "clear_cache", "stored", "dictionary", "load", "resources", "validate_file"]

F = TypeVar("F", bound=Callable)



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
        package = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: the data package descriptor is missing") from None
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: cannot be read as UTF-8 text ({err})") from None
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err})") from None
    rules.check_package(path, package)
    return package


def resources(directory: Path | None = None) -> dict[str, Resource]:
    """Every resource the data package declares, by name."""
    directory = Path(directory) if directory is not None else data_dir()
    package = _read_package(directory)
    return {
        r["name"]: Resource(r["name"], directory / r["path"], r.get("title", r["name"]), r["schema"])
        for r in package["resources"]
    }


def _validate(resource: Resource) -> tuple[pd.DataFrame, csvfile.Text]:
    """Read one file and check every cell, its keys and its completeness within itself."""
    expected = [f["name"] for f in resource.fields]
    text = csvfile.read(resource.path, expected)
    path = resource.path
    found = list(text.frame.columns)
    missing = [c for c in expected if c not in found]
    if missing:
        shown = ", ".join(map(repr, found[:8])) + (", ..." if len(found) > 8 else "")
        raise DataError(f"{path}: missing column(s) {', '.join(map(repr, missing))}; the header line has "
                        f"{len(found)} column(s), {shown} ({text.describe()}; the book writes "
                        "comma-separated UTF-8)")
    unexpected = [c for c in found if c not in expected]
    if unexpected:
        raise DataError(
            f"{path}: unexpected column(s) {', '.join(map(repr, unexpected))}; "
            "declare them in datapackage.json first"
        )
    if text.frame.empty:
        raise DataError(f"{path}: has a header line but no data rows")
    frame = pd.DataFrame({f["name"]: csvfile.check_column(text, f) for f in resource.fields})
    text.frame = text.frame.iloc[:0]  # the cells as text are checked; only the lines are needed now
    if resource.schema.get("primaryKey"):
        rules.duplicate_keys(frame, resource.schema["primaryKey"], text)
    return frame, text


def _complete_within(resource: Resource, frame: pd.DataFrame, text: csvfile.Text) -> None:
    complete = resource.schema.get("completeness", {})
    if "every" in complete:
        allowed = resource.field(complete["every"]).get("constraints", {}).get("enum", [])
        rules.every(frame, complete, allowed, text)


def _cross_resource(resource: Resource, frame: pd.DataFrame, text: csvfile.Text,
                    all_resources: dict[str, Resource], directory: Path) -> None:
    """Foreign keys, and rows another file needs here (``completeness.covers``)."""
    for fk in resource.schema.get("foreignKeys", []):
        target = fk["reference"]["resource"]
        if target not in all_resources:
            raise DataError(f"{directory / 'datapackage.json'}: resource {resource.name!r} refers to "
                            f"{target!r}, which is not declared")
        known = _load_cached(target, str(directory))[fk["reference"]["fields"]]
        rules.foreign_key(frame, fk["fields"], known, all_resources[target].path.name, text)
    rule = resource.schema.get("completeness", {}).get("covers")
    if rule:
        reference = _load_cached(rule["resource"], str(directory))
        rules.covers(frame, rule, reference, all_resources[rule["resource"]].path.name, resource.path)


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
        result = by_folder(datadir.resolved(), *args, **kwargs)
        return result.copy() if isinstance(result, pd.DataFrame) else result

    _CACHES.append(by_folder)
    wrapper.cache_clear = by_folder.cache_clear
    return wrapper


def stored(function: F) -> F:
    """:func:`cached`, and also kept on disk for other processes when ``PERWATT_STORE`` names a
    folder (:mod:`perwatt.store`): for results that take seconds, asked for by every build,
    kernel and test. Its arguments must be picklable to be stored (others are only cached)."""
    name = f"{function.__module__}.{function.__qualname__}"

    @functools.wraps(function)
    def computed(*args, **kwargs):
        return store.remembered(lambda: function(*args, **kwargs), datadir.resolved(), name,
                                (args, sorted(kwargs.items())))

    return cached(computed)


@functools.cache
def _load_cached(name: str, directory: str) -> pd.DataFrame:
    # Through the store when it is on: in a build, the data check before the kernels start leaves
    # each file's checked frame there, and each kernel reads it instead of checking every file again
    # (about 0.2 s of each kernel's warm-up). A file that fails its checks leaves nothing behind.
    return store.remembered(lambda: _checked(name, directory), directory, "perwatt.data.load", (name,))


def _checked(name: str, directory: str) -> pd.DataFrame:
    all_resources = resources(Path(directory))
    if name not in all_resources:
        raise DataError(f"no resource named {name!r} in {directory}/datapackage.json")
    resource = all_resources[name]
    frame, text = _validate(resource)
    _cross_resource(resource, frame, text, all_resources, Path(directory))
    _complete_within(resource, frame, text)
    rules.cross_column(name, frame, text)
    return frame


def read_file(path: str | Path, name: str, *, check_foreign_keys: bool = True) -> tuple[pd.DataFrame, csvfile.Text]:
    """:func:`validate_file`, also returning the file as read, whose ``where(row, column)`` names
    the line a row of the frame came from (for a caller's own checks)."""
    all_resources = resources()
    if name not in all_resources:
        raise DataError(f"no resource named {name!r} in datapackage.json")
    declared = all_resources[name]
    resource = Resource(declared.name, Path(path), declared.title, declared.schema)
    frame, text = _validate(resource)
    if check_foreign_keys:
        _cross_resource(resource, frame, text, {**all_resources, name: resource}, data_dir().resolve())
    _complete_within(resource, frame, text)
    rules.cross_column(name, frame, text)
    return frame, text


def validate_file(path: str | Path, name: str, *, check_foreign_keys: bool = True) -> pd.DataFrame:
    """Validate any CSV file (a reader's own, say) against the schema of the book's resource ``name``.

    With ``check_foreign_keys=False`` the file may name models, systems and sources the book
    does not know, and need not cover the rows other book files need. Raises :class:`DataError`
    naming the file, line and column.
    """
    return read_file(path, name, check_foreign_keys=check_foreign_keys)[0]


def validate_all(directory: Path | str | None = None) -> None:
    """Load every resource once, so that the first bad file stops whatever is starting (the build)."""
    directory = Path(directory) if directory is not None else data_dir()
    for name in resources(directory):
        load(name, directory)


def load(name: str, directory: Path | str | None = None) -> pd.DataFrame:
    """Load one resource by name (``"power"``, ``"benchmark_results"``, ...), validated.

    Returns a fresh copy, so callers may modify it.
    """
    folder = str(Path(directory).resolve()) if directory is not None else datadir.resolved()
    return _load_cached(name, folder).copy()


def clear_cache() -> None:
    """Forget loaded files and everything computed from them (after editing data in a live session)."""
    _load_cached.cache_clear()
    store.clear()
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
