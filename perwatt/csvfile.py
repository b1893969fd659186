"""Reading one CSV file as text, and checking its cells against a Table Schema field, vectorized.

:mod:`perwatt.data` describes the files; this module reads any one of them (the book's or a
reader's own): its bytes, its encoding, its delimiter, its lines. Every failure raises
:class:`DataError` naming the file and, where one applies, the line (counted as an editor counts
them: the header is line 1) and the column. Cells are checked a whole column at a time, so a file
of a million rows takes seconds; only the first bad cell is turned into a message.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


class DataError(ValueError):
    """A data file does not match its schema. The message names the file, line and column."""


#: The delimiters a file may use, by name; the header line decides which one it does.
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab"}
#: A number as the files write it: digits with an optional decimal point and exponent. Python's
#: float() also takes "19_641" and pandas takes "1,000" with a thousands option; neither is a
#: spelling a data file should rely on. The non-finite spellings match here so that they get their
#: own message below.
NUMBER = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\s*", re.IGNORECASE)
_DECIMAL_COMMA = re.compile(r"\s*[+-]?\d{1,3}(?:[.,]\d{3})*,\d+\s*|\s*[+-]?\d+,\d+\s*")
#: Table Schema's default spellings of true and false.
TRUE, FALSE = ("true", "True", "TRUE", "1"), ("false", "False", "FALSE", "0")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, not a CSV file") from None
    except OSError as err:
        raise DataError(f"{path}: cannot be read ({err.strerror or err})") from None


def _decode(path: Path, raw: bytes) -> tuple[bytes, str]:
    """The file as UTF-8 bytes without a byte-order mark, and the encoding it was in."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw, encoding = raw[3:], "UTF-8 with a byte-order mark"
    elif raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        # Excel's "Unicode text" export: UTF-16 with a byte-order mark (and usually tabs).
        try:
            return raw.decode("utf-16").encode("utf-8"), "UTF-16"
        except UnicodeDecodeError as err:
            raise DataError(f"{path}: starts with a UTF-16 byte-order mark but is not valid UTF-16 "
                            f"(at byte {err.start}); save it as CSV UTF-8") from None
    else:
        encoding = "UTF-8"
    if b"\x00" in raw:
        line = raw[:raw.index(b"\x00")].count(b"\n") + 1
        raise DataError(f"{path}, line {line}: contains NUL bytes, as UTF-16 without a byte-order mark "
                        "does; save it as CSV UTF-8")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataError(f"{path}, line {line}: not UTF-8 text (byte 0x{raw[err.start]:02X} at character "
                        f"{column} of the line; Latin-1 or Windows-1252 files look like this): save it as "
                        "CSV UTF-8") from None
    return raw, encoding


def _header_line(body: bytes) -> str:
    for line in io.BytesIO(body):
        if line.strip():
            return line.decode("utf-8").rstrip("\r\n")
    return ""


def _delimiter(path: Path, header: str, expected: list[str]) -> str:
    """The delimiter whose split of the header line finds the most expected columns (comma on a tie)."""
    def found(sep: str) -> int:
        names = next(csv.reader([header], delimiter=sep), [])
        return len(set(names) & set(expected))
    return max(DELIMITERS, key=lambda sep: (found(sep), sep == ","))


@dataclass
class Text:
    """A CSV file read as text: every cell a string, and a way back to the line a row is on."""

    path: Path
    frame: pd.DataFrame
    delimiter: str
    encoding: str
    body: bytes

    def line(self, row: int) -> int:
        """The line (header = 1, as an editor counts) on which data row ``row`` (0-based) starts.
        Scans the file, so it is for error messages only."""
        reader = csv.reader(io.StringIO(self.body.decode("utf-8"), newline=""), delimiter=self.delimiter)
        seen = -2  # the header is row -1
        start = 1
        for record in reader:
            if record and not (len(record) == 1 and not record[0].strip()):
                seen += 1
                if seen == row:
                    return start
            start = reader.line_num + 1
        return start

    def where(self, row: int, column: str | None = None) -> str:
        at = f"{self.path}, line {self.line(row)}"
        return at if column is None else f"{at}, column {column!r}"

    def describe(self) -> str:
        """How the file was read, for messages about its shape."""
        return f"read as {DELIMITERS[self.delimiter]}-separated {self.encoding}"


def read(path: str | Path, expected: list[str]) -> Text:
    """Read a CSV file as text, with the delimiter its header line uses."""
    path = Path(path)
    body, encoding = _decode(path, _read_bytes(path))
    header = _header_line(body)
    if not header:
        raise DataError(f"{path}: the file is empty")
    delimiter = _delimiter(path, header, expected)
    try:
        frame = pd.read_csv(io.BytesIO(body), sep=delimiter, dtype=str, keep_default_na=False,
                            encoding="utf-8", skipinitialspace=False)
    except pd.errors.ParserError as err:
        raise DataError(f"{path}: not a well-formed CSV file ({str(err).strip()}; "
                        f"{DELIMITERS[delimiter]}-separated)") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{path}: the file is empty") from None
    return Text(path, frame.fillna(""), delimiter, encoding, body)


def _number_message(raw: str) -> str:
    if "_" in raw:
        return f"{raw!r} is not a number (write digits only: no underscores)"
    if _DECIMAL_COMMA.fullmatch(raw):
        return (f"{raw!r} is not a number: it has a comma. Write numbers with a decimal point and no "
                "thousands separator (1.03, 19641); a European spreadsheet export needs its decimal "
                "separator set to '.'")
    return f"{raw!r} is not a number"


def check_column(text: Text, field: dict) -> pd.Series:
    """Check one column against its field and return it typed (NaN or None where a cell is empty).

    Each rule looks only at the cells every earlier rule passed, so each bad cell fails its first
    rule; the first bad cell in the file's order raises its rule's message.
    """
    column = field["name"]
    raw = text.frame[column]
    constraints = field.get("constraints", {})
    kind = field.get("type", "string")
    empty = (raw == "").to_numpy().copy()
    if kind in ("number", "integer"):
        numeric = raw.str.fullmatch(NUMBER).to_numpy(dtype=bool)
        odd = ~numeric & ~empty  # only cells that are not numbers can be blanks: look at those alone
        if odd.any():
            empty[odd] = (raw[odd].str.strip() == "").to_numpy()
    else:
        empty |= raw.str.isspace().to_numpy(dtype=bool)
    failures: list[tuple[np.ndarray, object]] = []  # (mask, message for one raw cell and its value)
    if constraints.get("required"):
        failures.append((empty, lambda r, v: "a value is required but the cell is empty"))
    present = ~empty
    value: pd.Series = raw.astype(object).where(present, None)
    if kind in ("number", "integer"):
        failures.append((present & ~numeric, lambda r, v: _number_message(r)))
        ok = present & numeric
        number = pd.Series(np.nan, index=raw.index)
        if ok.any():
            number[ok] = raw[ok].astype(float)
        values = number.to_numpy()
        failures.append((ok & ~np.isfinite(values), lambda r, v: f"{r!r} is not a finite number"))
        with np.errstate(invalid="ignore"):
            if kind == "integer":
                failures.append((ok & np.isfinite(values) & (np.mod(values, 1) != 0),
                                 lambda r, v: f"{r!r} is not a whole number"))
            unit = field.get("unit")
            # A short unit reads after the value (1200 W); "1", a pure number's unit, does not.
            unit_note = f" {unit}" if unit and unit != "1" and len(unit) < 12 else ""
            for key, test, words in (("minimum", np.less, "is below the minimum"),
                                     ("exclusiveMinimum", np.less_equal, "must be greater than"),
                                     ("maximum", np.greater, "is above the maximum")):
                if key in constraints:
                    bound = constraints[key]
                    failures.append((test(values, bound),
                                     lambda r, v, w=words, b=bound: f"{r.strip()}{unit_note} {w} {b}"))
        value = number
    elif kind == "boolean":
        known = raw.isin(TRUE + FALSE).to_numpy()
        failures.append((present & ~known, lambda r, v: f"{r!r} is not true or false"))
        value = raw.isin(TRUE)
    if "enum" in constraints:
        allowed = constraints["enum"]
        failures.append((present & ~value.isin(allowed).to_numpy(),
                         lambda r, v: f"{r!r} is not one of: {', '.join(map(str, allowed))}"))
    if "pattern" in constraints:
        pattern = re.compile(constraints["pattern"])
        failures.append((present & ~raw.str.fullmatch(pattern).to_numpy(dtype=bool),
                         lambda r, v: f"{r!r} does not match the pattern {constraints['pattern']}"))
    _raise_first(text, column, value, failures)
    if kind == "integer" and not np.isnan(value.to_numpy()).any():
        value = value.astype("int64")
    return value


def _raise_first(text: Text, column: str, value: pd.Series, failures: list) -> None:
    """Raise the message of the first cell (in file order) that fails a rule, its earliest rule."""
    if not failures:
        return
    passed = np.ones(len(value), dtype=bool)
    first, message = None, None
    for mask, describe in failures:
        fails = np.asarray(mask, dtype=bool) & passed
        passed &= ~fails
        hits = np.flatnonzero(fails)
        if len(hits) and (first is None or hits[0] < first):
            first, message = int(hits[0]), describe
    if first is not None:
        raw = str(text.frame[column].iloc[first])
        raise DataError(f"{text.where(first, column)}: {message(raw, value.iloc[first])}")


def is_unknown(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
