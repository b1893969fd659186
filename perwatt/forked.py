"""Work done by a forked copy of the build's process, on the core the build's own process leaves idle.

Once the kernels have finished, a build runs on one core: Sphinx writes the pages, then the book's
extension cuts the icon fonts, prunes the stylesheets and writes the handouts, one after another.
:func:`start` hands a piece of that work to a child process (``os.fork``: the child starts with
everything the build has read, without reading or computing it again), and :func:`Job.result` waits for its result.

A child that fails returns no result (files it wrote may remain): the work is then done again in
the build's own process, so that its error is reported as the build's own, with the build's logging. Where
``os.fork`` is missing (Windows), the work is done there from the start, when its result is asked for.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Job(Generic[T]):
    work: Callable[[], T]
    pid: int | None = None
    #: The read end of the pipe the child writes its pickled result to.
    reader: int | None = None

    def result(self) -> T:
        """The work's result: the child's, or (if it failed, or there is none) the work done here."""
        if self.pid is None:
            return self.work()
        with os.fdopen(self.reader, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if os.waitstatus_to_exitcode(status) == 0 and payload:
            return pickle.loads(payload)
        return self.work()

    def discard(self) -> None:
        """Wait for the child without using its result (the build stopped)."""
        if self.pid is not None:
            os.close(self.reader)
            os.waitpid(self.pid, 0)
            self.pid = None


def start(work: Callable[[], T], fork: bool = True) -> Job[T]:
    """Begin ``work`` in a child process; its result must pickle. With ``fork`` false (work that
    is quick, say, because a rebuild finds it done before) it is done here, when asked for."""
    if not fork or not hasattr(os, "fork"):
        return Job(work)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the work, send its result, and leave without the parent's exit handlers
        os.close(reader)
        status = 1
        try:
            payload = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(writer)
    return Job(work, pid, reader)
