"""The Sphinx extension's wiring, without building: what it connects, and where in each event."""

from __future__ import annotations

import gc

from perwatt import sphinxext


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
