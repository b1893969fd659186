"""What a data file must satisfy beyond its cells: the descriptor's own shape, rules spanning
columns, and completeness (no required row missing).

:mod:`perwatt.data` calls these after :mod:`perwatt.csvfile` has checked every cell; each raises
:class:`~perwatt.csvfile.DataError` naming the file, and the line and column where one applies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from perwatt.csvfile import DataError, Text

#: The field types the loader knows how to check.
TYPES = ("string", "number", "integer", "boolean")


def check_package(path: Path, package: object) -> None:
    """Refuse a descriptor the loader cannot read, saying where in it the problem is."""
    if not isinstance(package, dict):
        raise DataError(f"{path}: the top level must be a JSON object with a 'resources' list, "
                        f"found a {type(package).__name__}")
    listed = package.get("resources")
    if not isinstance(listed, list):
        raise DataError(f"{path}: 'resources' must be a list of resources")
    names = set()
    for i, resource in enumerate(listed):
        at = f"{path}: resources[{i}]"
        if not isinstance(resource, dict):
            raise DataError(f"{at} must be an object, found a {type(resource).__name__}")
        for key in ("name", "path"):
            if not isinstance(resource.get(key), str) or not resource[key]:
                raise DataError(f"{at} has no {key!r} (a non-empty string)")
        at = f"{path}: resource {resource['name']!r}"
        if resource["name"] in names:
            raise DataError(f"{at} is declared twice")
        names.add(resource["name"])
        schema = resource.get("schema")
        if not isinstance(schema, dict) or not isinstance(schema.get("fields"), list):
            raise DataError(f"{at} needs 'schema.fields', a list of fields")
        fields = []
        for j, field in enumerate(schema["fields"]):
            if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                raise DataError(f"{at}: schema.fields[{j}] must be an object with a 'name'")
            if field.get("type", "string") not in TYPES:
                raise DataError(f"{at}, field {field['name']!r}: type must be one of {', '.join(TYPES)}, "
                                f"got {field.get('type')!r}")
            if not isinstance(field.get("constraints", {}), dict):
                raise DataError(f"{at}, field {field['name']!r}: 'constraints' must be an object")
            fields.append(field["name"])
        key = schema.get("primaryKey", [])
        if not isinstance(key, list) or not set(key) <= set(fields):
            raise DataError(f"{at}: primaryKey must list fields of the schema, got {key!r}")
        for fk in schema.get("foreignKeys", []):
            reference = fk.get("reference") if isinstance(fk, dict) else None
            if not (isinstance(reference, dict) and fk.get("fields") in fields
                    and isinstance(reference.get("resource"), str) and isinstance(reference.get("fields"), str)):
                raise DataError(f"{at}: a foreign key needs 'fields' (a field of the schema) and "
                                f"'reference' with 'resource' and 'fields', got {fk!r}")


def duplicate_keys(frame: pd.DataFrame, key: list[str], text: Text) -> None:
    duplicated = frame.duplicated(subset=key, keep="first").to_numpy()
    if duplicated.any():
        row = int(np.flatnonzero(duplicated)[0])
        values = ", ".join(f"{k}={frame[k].iloc[row]!r}" for k in key)
        raise DataError(f"{text.where(row)}: duplicate key ({values})")


def foreign_key(frame: pd.DataFrame, column: str, known: pd.Series, target_file: str, text: Text) -> None:
    values = frame[column]
    unknown = (values.notna() & ~values.isin(set(known))).to_numpy()
    if unknown.any():
        row = int(np.flatnonzero(unknown)[0])
        raise DataError(f"{text.where(row, column)}: unknown {column.removesuffix('_id')} "
                        f"{values.iloc[row]!r} (not in {target_file})")


def every(frame: pd.DataFrame, rule: dict, allowed: list, text: Text) -> None:
    """Each combination of ``rule["for_each"]`` present has a row for every allowed value of
    ``rule["every"]`` (every metric for each model and system, say)."""
    groups, column = rule["for_each"], rule["every"]
    have = frame.groupby(groups, sort=False)[column].nunique()
    short = have[have < len(allowed)]
    if len(short):
        first = short.index[0] if len(groups) > 1 else (short.index[0],)
        mask = np.logical_and.reduce([frame[g].to_numpy() == v for g, v in zip(groups, first)])
        present = set(frame.loc[mask, column])
        missing = [v for v in allowed if v not in present]
        who = ", ".join(f"{g} {v!r}" for g, v in zip(groups, first))
        raise DataError(f"{text.where(int(np.flatnonzero(mask)[0]))}: {who} has no row for {column} {', '.join(map(repr, missing))} "
                        f"(every {', '.join(groups)} needs one for each of {', '.join(map(str, allowed))})")


def covers(frame: pd.DataFrame, rule: dict, reference: pd.DataFrame, reference_file: str, path: Path) -> None:
    """Every key of another file appears here: a printed ratio for each model and metric, say."""
    fields, theirs = rule["fields"], rule.get("referenced", rule["fields"])
    here = set(zip(*(frame[f] for f in fields)))
    needed = list(dict.fromkeys(zip(*(reference[f] for f in theirs))))
    missing = [k for k in needed if k not in here]
    if missing:
        shown = "; ".join(", ".join(f"{f}={v!r}" for f, v in zip(fields, k)) for k in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise DataError(f"{path}: no row for {shown}{more} (each {', '.join(theirs)} of {reference_file} needs one)")


def cross_column(name: str, frame: pd.DataFrame, text: Text) -> None:
    """Rules that span columns, which Table Schema cannot state."""
    if name == "power":
        mismatch = frame["power_w"].isna().to_numpy() != (frame["bound"] == "unknown").to_numpy()
        if mismatch.any():
            row = int(np.flatnonzero(mismatch)[0])
            power, bound = frame["power_w"].iloc[row], frame["bound"].iloc[row]
            raise DataError(f"{text.where(row, 'bound')}: {bound!r} does not match power_w "
                            f"({'empty' if np.isnan(power) else power}); use 'unknown' exactly when power_w is empty")
    if name == "claims":
        low, high = frame["low"].to_numpy(), frame["high"].to_numpy()
        for row in range(len(frame)):
            if np.isnan(low[row]) != np.isnan(high[row]):
                raise DataError(f"{text.where(row, 'high')}: give both ends of a range or neither")
            if low[row] > high[row]:
                raise DataError(f"{text.where(row, 'low')}: {low[row]} is above high {high[row]}")
    if name == "workloads":
        for side in ("input", "output"):
            low, high = frame[f"{side}_min_fraction"].to_numpy(), frame[f"{side}_max_fraction"].to_numpy()
            above = np.flatnonzero(low > high)
            if len(above):
                row = int(above[0])
                raise DataError(f"{text.where(row, f'{side}_min_fraction')}: {low[row]} is above "
                                f"{side}_max_fraction {high[row]}")
        marked = int(frame["behind_table"].sum())
        if marked != 1:
            raise DataError(f"{text.path}, column 'behind_table': exactly one workload must be marked true, "
                            f"found {marked}")
