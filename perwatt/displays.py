"""Displays in the build's kernels without waiting on output streams that hold nothing.

ipykernel 7.4 flushes stdout and stderr before it publishes any display, so that what a cell
printed comes before what it then displays, and it waits on its IO thread for each flush even when
nothing was printed. The chapters glue about a thousand values, each a display: with two such waits
each, 300 glued values took 0.31 s in a kernel, half of it waiting. :func:`skip_empty_flushes`
flushes only a stream that holds text, so the order of what a cell shows stays the same (the
display is sent by the same IO thread, after any flush it has already begun). The build's kernels
call it as they warm up (:data:`perwatt.execution.WARM_UP`); perwatt.upstream flags a new ipykernel.
"""

from __future__ import annotations

import sys


def _holds_text(stream) -> bool:
    """Whether ``stream`` may hold unsent text: an ipykernel stream with buffered writes or an echo,
    or any other kind of stream (flushed as before)."""
    buffers = getattr(stream, "_buffers", None)
    return buffers is None or bool(buffers) or getattr(stream, "echo", None) is not None


def skip_empty_flushes(shell) -> None:
    """Make ``shell``'s display publisher flush only the streams that hold text (an ipykernel shell;
    any other is left as it is)."""
    publisher = getattr(shell, "display_pub", None)
    if publisher is None or not hasattr(publisher, "_flush_streams"):
        return

    def flush_streams() -> None:
        for stream in (sys.stdout, sys.stderr):
            if _holds_text(stream):
                stream.flush()

    publisher._flush_streams = flush_streams
