"""The Sphinx extension's wiring, without building: what it connects, and where in each event."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from perwatt import sphinxext, upstream


@pytest.fixture(autouse=True)
def _nbformat_as_it_was(monkeypatch):
    """Connecting the extension patches nbformat's validator for the whole process: undone after each test."""
    from nbformat import json_compat

    monkeypatch.setattr(json_compat.FastJsonSchemaValidator, "__init__", json_compat.FastJsonSchemaValidator.__init__)


class _RecordingApp:
    """Stands in for Sphinx's application: records each handler connected, accepts any other call."""

    def __init__(self, doctreedir: Path) -> None:
        self.handlers: list[tuple[str, object, int]] = []
        self.doctreedir = str(doctreedir)

    def connect(self, event: str, handler, priority: int = 500) -> int:
        self.handlers.append((event, handler, priority))
        return len(self.handlers)

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def test_the_build_exempts_what_it_keeps_from_the_collector_as_each_phase_ends(tmp_path):
    app = _RecordingApp(tmp_path)
    gc.unfreeze()
    try:
        sphinxext.setup(app)
        # What was imported before the extensions were set up is frozen at once.
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    freezing = {event: priority for event, handler, priority in app.handlers if handler is sphinxext._keep_for_good}
    assert freezing == {"builder-inited": 999, "env-updated": 999, "build-finished": 999}
    # After every other handler of the same event, so that what those made is kept too.
    for event, priority in freezing.items():
        others = [p for e, h, p in app.handlers if e == event and h is not sphinxext._keep_for_good]
        assert all(p < priority for p in others), event


def test_pybtex_finds_each_plugin_once_and_still_what_it_found_before(tmp_path):
    import pybtex.plugin

    uncached = getattr(pybtex.plugin.entry_points, "__wrapped__", pybtex.plugin.entry_points)
    (found,) = uncached(group="pybtex.style.formatting", name="plain")
    want = found.load()
    upstream.connect(_RecordingApp(tmp_path))
    lookups = pybtex.plugin.entry_points
    assert lookups.__wrapped__ is uncached
    assert pybtex.plugin.find_plugin("pybtex.style.formatting", "plain") is want
    before = lookups.cache_info().hits
    assert pybtex.plugin.find_plugin("pybtex.style.formatting", "plain") is want
    assert lookups.cache_info().hits > before
    # A plugin registered at run time is still found first.
    class Mine(pybtex.plugin.Plugin):
        pass
    assert pybtex.plugin.register_plugin("pybtex.style.formatting", "perwatt-test-style", Mine)
    try:
        assert pybtex.plugin.find_plugin("pybtex.style.formatting", "perwatt-test-style") is Mine
    finally:
        pybtex.plugin._RUNTIME_PLUGINS["pybtex.style.formatting"].pop("perwatt-test-style")


def _notebook_schema() -> dict:
    from nbformat import v4

    return json.loads((Path(v4.__file__).parent / v4.nbformat_schema[(None, None)]).read_text(encoding="utf-8"))


def _notebooks() -> list[dict]:
    """A valid notebook, then notebooks each wrong in one place the schema checks."""
    import copy

    import nbformat

    good = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Prose"),
        nbformat.v4.new_code_cell("1 + 1", execution_count=1, outputs=[
            nbformat.v4.new_output("execute_result", {"text/plain": "2"}, execution_count=1)])])
    good = json.loads(nbformat.writes(good))
    for position, cell in enumerate(good["cells"]):
        cell["id"] = f"cell-{position}"  # not random: two calls make the same notebooks
    wrong = []
    for change in (lambda nb: nb.pop("metadata"), lambda nb: nb["cells"][0].update(cell_type="prose"),
                   lambda nb: nb.update(nbformat_minor="5"), lambda nb: nb["cells"][1]["outputs"][0].update(output_type="x"),
                   lambda nb: nb["cells"][1].update(id="no spaces allowed"), lambda nb: nb.update(extra=1)):
        notebook = copy.deepcopy(good)
        change(notebook)
        wrong.append(notebook)
    return [good, *wrong]


def _verdict(validate, notebook: dict) -> tuple:
    from fastjsonschema import JsonSchemaValueException

    try:
        validate(notebook)
    except JsonSchemaValueException as error:
        return error.message, error.name, error.rule
    return ("valid",)


def test_the_notebook_schema_validator_is_compiled_once_and_judges_as_fastjsonschema_compiles_it(tmp_path, monkeypatch):
    import fastjsonschema

    schema = _notebook_schema()
    direct = fastjsonschema.compile(schema)
    kept = upstream.schema_validator(schema, tmp_path)
    assert len(list(tmp_path.glob("*.marshal"))) == 1
    verdicts = [_verdict(direct, nb) for nb in _notebooks()]
    assert verdicts[0] == ("valid",) and all(v != ("valid",) for v in verdicts[1:])
    assert [_verdict(kept, nb) for nb in _notebooks()] == verdicts
    # Later: read back, not compiled again.
    monkeypatch.setattr(fastjsonschema, "compile_to_code", lambda *a, **k: pytest.fail("compiled again"))
    again = upstream.schema_validator(schema, tmp_path)
    assert [_verdict(again, nb) for nb in _notebooks()] == verdicts
    # Another schema (nbformat relaxes one for notebooks from a later minor version) is kept apart.
    monkeypatch.undo()
    relaxed = {**schema, "additionalProperties": True}
    assert _verdict(upstream.schema_validator(relaxed, tmp_path), _notebooks()[-1]) == ("valid",)
    assert len(list(tmp_path.glob("*.marshal"))) == 2
    # A file cut short is compiled again, not trusted.
    for path in tmp_path.glob("*.marshal"):
        path.write_bytes(path.read_bytes()[:100])
    assert [_verdict(upstream.schema_validator(schema, tmp_path), nb) for nb in _notebooks()] == verdicts


def test_nbformat_validates_through_the_kept_validator_with_the_same_errors(tmp_path, monkeypatch):
    import nbformat
    from nbformat import validator

    def errors() -> list:
        monkeypatch.setattr(validator, "validators", {})  # nbformat's own per-process cache, emptied
        found = []
        for notebook in (nb for nb in _notebooks() if isinstance(nb["nbformat_minor"], int)):  # else it asserts
            try:
                nbformat.validate(notebook)
                found.append("valid")
            except nbformat.ValidationError as error:
                found.append(str(error))
        return found

    before = errors()
    upstream.connect(_RecordingApp(tmp_path))
    assert errors() == before and before[0] == "valid" and "valid" not in before[1:]
    assert list((tmp_path / "perwatt-nbschema").glob("*.marshal"))


BIB = """@article{one, author = {Ada Lovelace and Charles Babbage}, title = {{TITLE}}, journal = {Notes}, year = {1843}}
@book{two, author = {Grace Hopper}, title = {A Compiler}, publisher = {Remington Rand}, year = {1952}}
"""


def test_bibliographies_are_formatted_again_only_when_their_entries_change(tmp_path, monkeypatch):
    import io

    from pybtex.style.formatting import BaseStyle
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text("extensions = ['sphinxcontrib.bibtex']\nbibtex_bibfiles = ['refs.bib']\n"
                                 "def setup(app):\n    from perwatt import upstream\n    upstream._bibtex_formats_kept()\n")
    (src / "index.rst").write_text("Title\n=====\n\nAs :cite:t:`one` and :cite:p:`two` say.\n\n.. bibliography::\n")
    formatted = []
    format_entry = BaseStyle.format_entry
    monkeypatch.setattr(BaseStyle, "format_entry", lambda self, label, entry, *a, **k: (
        formatted.append(entry.key), format_entry(self, label, entry, *a, **k))[1])

    def build(title: str, prose: str = "", bib: str = BIB) -> str:
        (src / "refs.bib").write_text(bib.replace("TITLE", title))
        (src / "index.rst").write_text((src / "index.rst").read_text() + prose)
        formatted.clear()
        warnings.seek(0)
        warnings.truncate()
        app = Sphinx(src, src, tmp_path / "out", tmp_path / "doctrees", "html", status=None, warning=warnings)
        app.build()
        assert app.statuscode == 0
        return (tmp_path / "out" / "index.html").read_text(encoding="utf-8")

    warnings = io.StringIO()

    first = build("Sketch of the Analytical Engine")
    # Each entry formatted for the list and for its tooltip.
    assert sorted(formatted) == ["one", "one", "two", "two"] and "Sketch of the Analytical Engine" in first
    again = build("Sketch of the Analytical Engine", prose="\nMore prose.\n")
    assert formatted == [] and again.replace("<p>More prose.</p>\n", "") == first
    changed = build("Notes on the Engine")
    assert sorted(formatted) == ["one", "one", "two", "two"]
    assert "Notes on the Engine" in changed and "Sketch of the Analytical Engine" not in changed
    # An entry that cannot be formatted warns at every build, not only the first.
    broken = BIB.replace(", journal = {Notes}", "")
    for prose in ("", "\nEven more prose.\n"):
        build("Notes on the Engine", prose, bib=broken)
        assert "missing journal in one" in warnings.getvalue() and "one" in formatted, prose
