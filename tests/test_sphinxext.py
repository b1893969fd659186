"""The Sphinx extension's wiring, without building: what it connects, and where in each event."""

from __future__ import annotations

import gc

from perwatt import sphinxext, upstream


class _RecordingApp:
    """Stands in for Sphinx's application: records each handler connected, accepts any other call."""

    def __init__(self) -> None:
        self.handlers: list[tuple[str, object, int]] = []

    def connect(self, event: str, handler, priority: int = 500) -> int:
        self.handlers.append((event, handler, priority))
        return len(self.handlers)

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


def test_the_build_exempts_what_it_keeps_from_the_collector_as_each_phase_ends():
    app = _RecordingApp()
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


def test_pybtex_finds_each_plugin_once_and_still_what_it_found_before():
    import pybtex.plugin

    uncached = getattr(pybtex.plugin.entry_points, "__wrapped__", pybtex.plugin.entry_points)
    (found,) = uncached(group="pybtex.style.formatting", name="plain")
    want = found.load()
    upstream.connect(_RecordingApp())
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
