"""perwatt.forked: the build's work done by a forked child, and done again here when the child fails."""

from __future__ import annotations

import os

import pytest

from perwatt import forked


def test_the_result_comes_from_a_child_process() -> None:
    here = os.getpid()
    job = forked.start(lambda: {"pid": os.getpid(), "texts": ["a" * 100_000, "b"]})
    result = job.result()
    assert result["pid"] != here and result["texts"] == ["a" * 100_000, "b"]  # more than a pipe's buffer


def test_work_that_fails_in_the_child_is_done_again_here() -> None:
    here = os.getpid()
    job = forked.start(lambda: os.getpid() if os.getpid() == here else 1 / 0)
    assert job.result() == here


def test_an_error_the_work_raises_here_too_is_the_callers() -> None:
    def broken() -> None:
        raise ValueError("the handouts could not be made: no chapters")

    job = forked.start(broken)
    with pytest.raises(ValueError, match="no chapters"):
        job.result()


def test_a_discarded_job_leaves_no_child_behind() -> None:
    job = forked.start(lambda: 42)
    pid = job.pid
    job.discard()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_work_asked_not_to_fork_is_done_here_when_its_result_is_asked_for() -> None:
    done = []
    job = forked.start(lambda: done.append(os.getpid()) or len(done), fork=False)
    assert job.pid is None and done == []
    assert job.result() == 1 and done == [os.getpid()]
