"""Output in the build's kernels without waiting on output streams that hold nothing.

ipykernel 7.4 flushes stdout and stderr before it publishes any display and before it replies to
each cell, so that what a cell printed comes first, and each flush waits on the kernel's IO thread
even when nothing was printed. The chapters glue about a thousand values, each a display: 300
glued values took 0.24 s of a kernel's own time, most of it in those waits. After
:func:`skip_empty_flushes`, a stream flushes only when it holds text; what a cell shows keeps its
order, since the IO thread sends a display, and the kernel's "idle" that ends each cell, after
any flush it has already begun. The build's kernels call it as they warm up
(:data:`perwatt.execution.WARM_UP`); perwatt.upstream flags a new ipykernel.
"""

from __future__ import annotations

import sys


def _holds_text(stream) -> bool:
    """Whether an ipykernel output stream may hold unsent text: buffered writes, or an echo."""
    return bool(stream._buffers) or stream.echo is not None


def skip_empty_flushes() -> None:
    """Make stdout and stderr, where they are ipykernel's streams, flush only when they hold text."""
    for stream in (sys.stdout, sys.stderr):
        if not (hasattr(stream, "_buffers") and hasattr(stream, "echo")) or "flush" in vars(stream):
            continue  # not ipykernel's, or done already

        def flush(stream=stream, flush=stream.flush) -> None:
            if _holds_text(stream):
                flush()

        stream.flush = flush
