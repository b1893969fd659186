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
