"""Shared fixtures: leak checks (threads, child processes) around every test that asks."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

# A shell that starts the test command in the background (`cmd &` without job control)
# leaves SIGINT ignored, and an ignored signal stays ignored across exec: neither this
# process nor the servers and CLIs it spawns would see Ctrl-C, and the Ctrl-C tests would
# test nothing. Put Python's handler back; children then start with the default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}


def _mcpsync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mcpsync-")]


def _running(pid: int) -> bool:
    """True for a process that exists and is not a zombie (one may vanish while we look)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # NoSuchProcess, or gone between the listing and the look
        return False


@pytest.fixture
def no_leaks():
    """Assert that the test leaves no mcpsync thread and no child process behind."""
    threads_before = set(_mcpsync_threads())
    children_before = _children()
    yield
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        threads = [t for t in _mcpsync_threads() if t not in threads_before and t.is_alive()]
        children = [pid for pid in _children() - children_before if _running(pid)]
        if not threads and not children:
            return
        time.sleep(0.05)
    raise AssertionError(
        f"left behind: threads {[t.name for t in threads]}, child processes {children}"
    )


@pytest.fixture(autouse=True)
def _restore_mcpsync_logger():
    """The CLI, run in-process by some tests, configures the `mcpsync` logger; undo it."""
    import logging

    logger = logging.getLogger("mcpsync")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


@pytest.fixture
def rsps():
    """A ``responses`` mock for requests (the auth tests' World runs on it)."""
    import responses

    with responses.RequestsMock(assert_all_requests_are_fired=False) as r:
        yield r


@pytest.fixture
def http():
    """A plain ``requests.Session``, closed after the test."""
    import requests

    with requests.Session() as s:
        yield s
