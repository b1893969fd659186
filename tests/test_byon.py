"""Bring your own numbers: a corpus of malformed files, each with the exact outcome it must have.

Every case starts from the book's own data/benchmark_results.csv (header on line 1; gpt-oss-120b's
rows on lines 2-7, DeepSeek R1's on 8-13, Kimi K2.5's on 14-19), changes it the way a careless
export or a typo would, and runs ``benchmark.analyze`` on it. The outcome is either the same report
as the untouched file, or a DataError whose message names the file and, where one applies, the
line (as an editor counts: the header is line 1) and the column.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from perwatt import benchmark, data, tables

BOOK = (Path(__file__).resolve().parent.parent / "data")
TEXT = (BOOK / "benchmark_results.csv").read_text(encoding="utf-8")
PRINTED = (BOOK / "reported_ratios.csv").read_text(encoding="utf-8")
LIMIT_S = 10.0
FOLDER = "<a folder>"
NOTE = "Reported as mixed TPS/kW; the power basis is not stated."
#: The book's file with its notes quoted, as a spreadsheet writes a field holding its delimiter.
QUOTED_NOTES = TEXT.replace(NOTE, f'"{NOTE}"')


def line(n: int, old: str, new: str, text: str = TEXT) -> str:
    """``text`` with ``old`` replaced by ``new`` on line ``n`` (header = 1)."""
    lines = text.split("\n")
    assert old in lines[n - 1], f"test setup: {old!r} not on line {n}: {lines[n - 1]!r}"
    lines[n - 1] = lines[n - 1].replace(old, new, 1)
    return "\n".join(lines)


def drop(n: int, text: str = TEXT) -> str:
    lines = text.split("\n")
    return "\n".join(lines[:n - 1] + lines[n:])


def every_line(old: str, new: str, text: str = TEXT) -> str:
    return "\n".join(s.replace(old, new) for s in text.split("\n"))


def scale_latency(factor: float) -> str:
    rows = [r.split(",") for r in TEXT.strip().split("\n")]
    for r in rows[1:]:
        if r[2] == "e2e_latency_s":
            r[3], r[4] = f"{float(r[3]) * factor:g}", "0"
    return "\n".join(",".join(r) for r in rows) + "\n"


@dataclass(frozen=True)
class Case:
    id: str
    content: bytes | str  # FOLDER: the path is a folder
    expected: tuple[str, ...] = ()  # parts of the message; empty: the file must analyze cleanly
    printed: bytes | str | None = PRINTED  # the reported= file, or None for none


def ok(id: str, content, printed=PRINTED) -> Case:
    return Case(id, content, (), printed)


def bad(id: str, content, *expected: str, printed=PRINTED) -> Case:
    return Case(id, content, expected, printed)


def bad_printed(id: str, printed, *expected: str) -> Case:
    return Case(id, TEXT, expected, printed)


CASES = [
    # Shape: empty, header-only, folders.
    bad("empty-file", b"", "mine.csv: the file is empty"),
    bad("only-blank-lines", "\n  \n\n", "mine.csv: the file is empty"),
    bad("only-a-bom", b"\xef\xbb\xbf", "mine.csv: the file is empty"),
    bad("header-only", TEXT.split("\n")[0] + "\n", "mine.csv: has a header line but no data rows"),
    bad("a-folder", FOLDER, "mine.csv: is a folder, not a CSV file"),
    # Encodings.
    ok("utf8-with-bom", b"\xef\xbb\xbf" + TEXT.encode("utf-8")),
    ok("utf16-le-bom-tabs-as-excel-unicode-text", TEXT.replace(",", "\t").encode("utf-16")),
    ok("utf16-be-bom", b"\xfe\xff" + TEXT.encode("utf-16-be")),
    bad("utf16-without-bom", TEXT.encode("utf-16-le"), "mine.csv, line 1", "NUL bytes", "UTF-8"),
    bad("latin1-note", line(4, "realbet,", "realbet,café").encode("latin-1"),
        "mine.csv, line 4", "not UTF-8", "0xE9", "Latin-1"),
    bad("windows1252-quote", line(9, "realbet,", "realbet,it’s").encode("cp1252"),
        "mine.csv, line 9", "not UTF-8", "0x92"),
    bad("binary-junk", b"\x89PNG\r\n\x1a\n\xff\xd8", "mine.csv, line 1", "not UTF-8"),
    # Delimiters.
    ok("semicolons-with-decimal-points", QUOTED_NOTES.replace(",", ";")),
    ok("tabs", TEXT.replace(",", "\t")),
    ok("crlf-line-ends", TEXT.replace("\n", "\r\n")),
    bad("european-excel-semicolons-and-decimal-commas",
        every_line(".", ",", QUOTED_NOTES.replace(",", ";")),
        "mine.csv, line 4, column 'value'", "'1,03'", "decimal point"),
    bad("pipes", TEXT.replace(",", "|"), "mine.csv: missing column(s)", "1 column(s)", "read as comma-separated UTF-8"),
    bad("quoted-decimal-comma", line(4, ",1.03,", ',"1,03",'), "mine.csv, line 4, column 'value'", "'1,03'",
        "decimal point"),
    bad("quoted-thousands-separator", line(2, ",85448,", ',"85,448",'), "mine.csv, line 2, column 'value'",
        "'85,448'", "thousands separator"),
    # Columns.
    bad("capitalised-header", line(1, "model,", "Model,"), "mine.csv: missing column(s) 'model'"),
    bad("missing-column", every_line(",realbet,", ",").replace("decimals,source_id", "decimals"),
        "mine.csv: missing column(s) 'source_id'"),
    bad("extra-column", line(1, "note", "note,extra"), "mine.csv: unexpected column(s) 'extra'"),
    bad("ragged-row", line(6, ",realbet,", ",realbet,x,y,"), "mine.csv: not a well-formed CSV", "line 6"),
    # Values that are not numbers, or not finite, or not whole.
    bad("empty-value", line(4, ",1.03,", ",,"), "mine.csv, line 4, column 'value'", "required"),
    bad("whitespace-value", line(4, ",1.03,", ",   ,"), "mine.csv, line 4, column 'value'", "required"),
    bad("underscore-digits", line(8, "19641", "19_641"), "mine.csv, line 8, column 'value'", "'19_641'",
        "underscores"),
    bad("units-in-the-cell", line(8, "19641", "19641 tok/s"), "mine.csv, line 8, column 'value'",
        "'19641 tok/s' is not a number"),
    bad("hex", line(8, "19641", "0x4cb9"), "mine.csv, line 8, column 'value'", "is not a number"),
    bad("nan", line(3, "44960", "nan"), "mine.csv, line 3, column 'value'", "not a finite number"),
    bad("inf", line(3, "44960", "inf"), "mine.csv, line 3, column 'value'", "not a finite number"),
    bad("overflowing-exponent", line(3, "44960", "1e400"), "mine.csv, line 3, column 'value'",
        "not a finite number"),
    ok("spaces-around-a-number", line(4, ",1.03,", ", 1.03 ,")),
    bad("decimals-400", line(4, ",1.03,2,", ",1.03,400,"), "mine.csv, line 4, column 'decimals'",
        "above the maximum 15"),
    bad("decimals-negative", line(4, ",1.03,2,", ",1.03,-1,"), "mine.csv, line 4, column 'decimals'",
        "below the minimum 0"),
    bad("decimals-fractional", line(4, ",1.03,2,", ",1.03,1.5,"), "mine.csv, line 4, column 'decimals'",
        "not a whole number"),
    # Zero and negative figures.
    bad("zero-throughput", line(2, "85448", "0"), "mine.csv, line 2, column 'value'", "must be greater than 0"),
    bad("zero-per-user-rate", line(7, ",427,", ",0,"), "mine.csv, line 7, column 'value'",
        "must be greater than 0"),
    bad("zero-latency", line(4, ",1.03,", ",0,"), "mine.csv, line 4, column 'value'", "must be greater than 0"),
    bad("negative-latency", line(5, ",1.80,", ",-1.80,"), "mine.csv, line 5, column 'value'",
        "must be greater than 0"),
    # Plausibility: unit slips.
    bad("all-latencies-in-ms", scale_latency(1000), "mine.csv, line 4, column 'value'", "milliseconds", "1.03 s"),
    bad("one-latency-in-ms", line(5, ",1.80,", ",1800,"), "mine.csv, line 5, column 'value'", "milliseconds"),
    bad("latency-over-a-day", line(5, ",1.80,", ",100000,"), "mine.csv, line 5, column 'value'",
        "above the plausible", "milliseconds"),
    bad("rate-given-as-seconds-per-token", line(7, ",427,", ",0.002,"), "mine.csv, line 7, column 'value'",
        "below the plausible 0.1", "time per output token"),
    bad("rate-of-the-whole-system", line(6, ",22935,", ",2293500,"), "mine.csv, line 6, column 'value'",
        "above the plausible", "one user"),
    bad("throughput-per-watt", line(3, "44960", "0.5"), "mine.csv, line 3, column 'value'",
        "below the plausible 1", "per watt"),
    bad("throughput-per-megawatt", line(3, "44960", "44960000000"), "mine.csv, line 3, column 'value'",
        "above the plausible", "per MW"),
    # Rows and keys.
    bad("unknown-metric", line(3, "tps_per_kw", "tps_per_watt"), "mine.csv, line 3, column 'metric'",
        "not one of"),
    bad("duplicate-row", TEXT + TEXT.split("\n")[1] + "\n", "mine.csv, line 20", "duplicate key"),
    bad("missing-metric-row", drop(19), "mine.csv, line 15", "kimi-k2.5", "gb300", "interactivity"),
    bad("no-candidate", every_line("jalapeno", "other"), "mine.csv: model 'gpt-oss-120b'",
        "candidate system 'jalapeno'"),
    bad("two-baselines", TEXT + "".join(f"gpt-oss-120b,gb300,{m},{v},0,realbet,\n" for m, v in
                                        (("tps_per_kw", 11781), ("e2e_latency_s", 6), ("interactivity", 118))),
        "mine.csv: model 'gpt-oss-120b': expected exactly one baseline system, found ['gb200', 'gb300']"),
    bad("blank-model", line(2, "gpt-oss-120b,", ","), "mine.csv, line 2, column 'model'", "required"),
    bad("blank-system", line(3, ",gb200,", ", ,"), "mine.csv, line 3, column 'system'", "required"),
    # Line numbers count what an editor shows: blank lines and quoted line breaks included.
    bad("blank-line-before-a-bad-row", line(7, ",1.80,", ",1.8O,", TEXT.replace("\n", "\n\n", 2)),
        "mine.csv, line 7, column 'value'", "'1.8O' is not a number"),
    bad("quoted-line-break-before-a-bad-row",
        line(4, "44960", "4496O", line(2, NOTE, '"Reported as mixed\nTPS/kW."')),
        "mine.csv, line 4, column 'value'", "'4496O' is not a number"),
    bad("crlf-and-a-bad-row", line(3, "44960", "4496O").replace("\n", "\r\n"), "mine.csv, line 3, column 'value'"),
    # The reported= file.
    bad_printed("printed-header-only", PRINTED.split("\n")[0] + "\n", "printed.csv: has a header line but no data rows"),
    bad_printed("printed-missing-a-row", drop(4, PRINTED), "printed.csv: no reported ratio",
                "('gpt-oss-120b', 'interactivity')"),
    bad_printed("printed-decimals-400", line(2, ",1.9,1,", ",1.9,400,", PRINTED), "printed.csv, line 2, column 'decimals'",
                "above the maximum 15"),
    bad_printed("printed-approx-sign", line(2, ",1.9,", ",≈1.9,", PRINTED), "printed.csv, line 2, column 'reported_ratio'",
                "is not a number"),
    bad_printed("printed-latin1", PRINTED.encode("latin-1", errors="replace"), "printed.csv, line 2", "not UTF-8",
                "0xD7"),
    bad_printed("printed-a-folder", FOLDER, "printed.csv: is a folder"),
]


def _write(path: Path, content) -> Path:
    if content is FOLDER:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def _base_report(tmp_path: Path) -> benchmark.Report:
    return benchmark.analyze(_write(tmp_path / "base.csv", TEXT), candidate="jalapeno",
                             reported=_write(tmp_path / "base-printed.csv", PRINTED))


def test_the_corpus_is_large_and_its_cases_distinct():
    assert len(CASES) >= 50
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_each_malformed_file_has_its_exact_outcome(tmp_path, case):
    mine = _write(tmp_path / "mine.csv", case.content)
    printed = None if case.printed is None else _write(tmp_path / "printed.csv", case.printed)
    start = time.perf_counter()
    if case.expected:
        with pytest.raises(data.DataError) as info:
            benchmark.analyze(mine, candidate="jalapeno", reported=printed)
        message = str(info.value)
        for part in case.expected:
            assert part in message, f"{part!r} missing from: {message}"
        assert str(tmp_path) in message  # the file is named by its full path
    else:
        report = benchmark.analyze(mine, candidate="jalapeno", reported=printed)
        base = _base_report(tmp_path)
        pd.testing.assert_frame_equal(report.audit, base.audit)
        pd.testing.assert_frame_equal(report.checks, base.checks)
    assert time.perf_counter() - start < LIMIT_S


def test_a_zero_latency_is_never_a_verdict(tmp_path):
    # It used to come out as "impossible: negative TTFT"; now the file is refused at the cell.
    with pytest.raises(data.DataError, match=r"line 4, column 'value': 0 must be greater than 0"):
        benchmark.analyze(_write(tmp_path / "mine.csv", line(4, ",1.03,", ",0,")), candidate="jalapeno")


def test_the_books_impossible_rows_stay_impossible_not_implausible(tmp_path):
    audit = _base_report(tmp_path).audit.set_index(["model", "system"])
    assert audit.loc[("gpt-oss-120b", "gb200"), "verdict"] == "impossible: TTFT shorter than one step"
    assert audit.loc[("gpt-oss-120b", "jalapeno"), "verdict"] == "possible"


def test_a_readers_own_names_are_their_own_labels(tmp_path):
    own = every_line("jalapeno", "my-chip", every_line("kimi-k2.5", "my-model", every_line("gb300", "h100")))
    printed = every_line("kimi-k2.5", "my-model", PRINTED)
    report = benchmark.analyze(_write(tmp_path / "mine.csv", own), candidate="my-chip",
                               reported=_write(tmp_path / "printed.csv", printed))
    shown = tables.derived(report.derived).data
    assert set(shown["Model"]) == {"gpt-oss-120b", "DeepSeek R1", "my-model"}
    assert set(shown["System"]) == {"my-chip", "GB200", "h100"}
    checks = tables.ratio_checks(report.checks).data
    assert "my-model" in set(checks["Model"]) and not (checks["Model"].str.strip() == "").any()


def test_line_numbers_follow_the_editor_for_every_row(tmp_path):
    # Row k of the data (0-based) is on line k + 2 when nothing spans lines.
    path = _write(tmp_path / "mine.csv", TEXT)
    text = data.read_file(path, "benchmark_results", check_foreign_keys=False)[1]
    assert [text.line(k) for k in range(18)] == list(range(2, 20))


def _rows(n: int) -> str:
    header, body = TEXT.split("\n", 1)
    return header + "\n" + body * 0 + "".join(
        f"m{i},{s},{m},{v},0,lab,\n" for i in range(n // 6) for s in ("chip", "base")
        for m, v in (("tps_per_kw", 20000 if s == "chip" else 10000), ("e2e_latency_s", 3 if s == "chip" else 6),
                     ("interactivity", 400 if s == "chip" else 200)))


def _python_calls(work: Callable[[], object]) -> tuple[object, int]:
    """``work()``, and how many Python and built-in function calls it made."""
    calls = 0

    def count(frame, event, arg) -> None:
        nonlocal calls
        calls += event in ("call", "c_call")

    sys.setprofile(count)
    try:
        result = work()
    finally:
        sys.setprofile(None)
    return result, calls


def test_a_large_file_is_validated_vectorized(tmp_path):
    # The old row-by-row loop took tens of seconds on 60,000 rows. Counted, not timed (this machine's
    # speed varies): each row adds a few calls (pandas matches text cells against their patterns one
    # cell at a time: 4 calls a row with pandas 3.1); a loop of Python over the rows, as the old one
    # was, would add far more.
    small, large = _write(tmp_path / "small.csv", _rows(6_000)), _write(tmp_path / "mine.csv", _rows(60_000))
    benchmark.analyze(small, candidate="chip")  # caches filled, modules imported
    _, few = _python_calls(lambda: benchmark.analyze(small, candidate="chip"))
    report, many = _python_calls(lambda: benchmark.analyze(large, candidate="chip"))
    assert (many - few) / 54_000 < 10
    assert len(report.audit) == 20_000
    bad_path = _write(tmp_path / "bad.csv", _rows(60_000).replace("m9999,base,interactivity,200", "m9999,base,interactivity,2OO"))
    with pytest.raises(data.DataError, match=r"line 60001, column 'value': '2OO' is not a number"):
        benchmark.analyze(bad_path, candidate="chip")


def test_a_header_of_eight_columns_is_shown_whole_and_of_nine_abbreviated(tmp_path):
    # 'Model' for 'model' plus one extra column: 8 columns found, all shown; two extras: 9, the first 8 and "...".
    eight = line(1, "note", "note,x", line(1, "model,", "Model,"))
    with pytest.raises(data.DataError, match=r"the header line has 8 column\(s\), 'Model', 'system', 'metric', "
                                             r"'value', 'decimals', 'source_id', 'note', 'x' \(read as"):
        benchmark.analyze(_write(tmp_path / "eight.csv", eight), candidate="jalapeno")
    nine = line(1, "note", "note,x,y", line(1, "model,", "Model,"))
    with pytest.raises(data.DataError, match=r"9 column\(s\), 'Model', .*, 'x', \.\.\. \(read as"):
        benchmark.analyze(_write(tmp_path / "nine.csv", nine), candidate="jalapeno")


def test_figures_exactly_at_the_plausible_bounds_are_accepted(tmp_path):
    # plausible.BOUNDS: tokens/s/kW from 1, tokens/s per user up to 100,000; the bounds themselves pass.
    at_bounds = line(6, ",22935,", ",100000,", line(3, ",44960,", ",1,"))
    report = benchmark.analyze(_write(tmp_path / "mine.csv", at_bounds), candidate="jalapeno")
    table = report.results.set_index(["model", "system", "metric"])["value"]
    assert table[("gpt-oss-120b", "gb200", "tps_per_kw")] == 1.0
    assert table[("gpt-oss-120b", "jalapeno", "interactivity")] == 100_000.0


def test_an_implied_ttft_of_exactly_the_limit_passes_and_just_over_fails(tmp_path):
    # gpt-oss-120b on GB200 at 1,024 tokens/s per user and 1,025 output tokens: 1,024 steps after the
    # first token take 1 s, so a 601 s latency leaves exactly 600 s (plausible.MAX_TTFT_S) for it.
    text = line(7, ",427,", ",1024,", line(5, ",1.80,", ",601,"))
    audit = benchmark.analyze(_write(tmp_path / "mine.csv", text), candidate="jalapeno", osl_tokens=1025).audit
    assert audit.set_index(["model", "system"]).loc[("gpt-oss-120b", "gb200"), "implied_ttft_s"] == 600.0
    over = line(5, ",601,", ",601.5,", text)
    with pytest.raises(data.DataError, match=r"mine.csv, line 5, column 'value': a latency of 601.5 s at 1024 "
                                             r"tokens/s per user leaves 600.5 s"):
        benchmark.analyze(_write(tmp_path / "mine.csv", over), candidate="jalapeno", osl_tokens=1025)
