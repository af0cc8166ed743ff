"""A future's bounds (issue 31, bug B): a ``submit_*`` future is done when its request's
own timeout passes, whoever reads the transport, and ``result(timeout=t)`` returns or
raises within ``t``. Over stdio (the waiting caller reads the pipe itself: the shared
timer must wake that read) and over the memory transport (no caller reads).
"""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fakes import FakeServer

import mcpsync
from mcpsync.errors import RequestTimeout

#: how much later than its bound a wait may end (scheduling on a loaded 2-CPU machine)
SLACK = 0.5
LONG = {"duration": 30, "steps": 1}  # the demo's long_running tool: answers after 30 s


def timed(fn: Any) -> tuple[float, BaseException | None]:
    t0 = time.monotonic()
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - measured, then checked by the test
        return time.monotonic() - t0, exc
    return time.monotonic() - t0, None


@pytest.fixture(scope="module", params=["legacy", "auto"])
def stdio(request: pytest.FixtureRequest) -> Iterator[mcpsync.Session]:
    argv = [sys.executable, "-m", "mcpsync.demo_server"]
    with mcpsync.Session.connect(argv, connect_timeout=20, era=request.param) as session:
        yield session


@pytest.fixture
def memory() -> Iterator[mcpsync.Session]:
    release = threading.Event()

    def never(message: dict[str, Any]) -> None:  # holds the call until the test ends
        release.wait(30)

    server = FakeServer(handlers={"tools/call": never, "ping": never})
    with mcpsync.Session.connect(server.transport, connect_timeout=10, era="legacy") as session:
        yield session
    release.set()


def usable(session: mcpsync.Session) -> None:
    assert session.call_tool("echo", {"message": "on"}, timeout=10).content[0].text == "on"


def test_stdio_a_futures_own_timeout_ends_result_with_a_longer_timeout(stdio):
    future = stdio.submit_call_tool("long_running", LONG, timeout=1.5)
    elapsed, error = timed(lambda: future.result(timeout=30))
    assert isinstance(error, RequestTimeout), repr(error)
    assert elapsed <= 1.5 + SLACK, f"{elapsed:.2f} s for a 1.5 s request timeout"
    usable(stdio)


def test_stdio_result_timeout_bounds_only_that_wait(stdio):
    future = stdio.submit_call_tool("long_running", LONG, timeout=30)
    elapsed, error = timed(lambda: future.result(timeout=1))
    assert isinstance(error, concurrent.futures.TimeoutError), repr(error)
    assert 1 - 0.05 <= elapsed <= 1 + SLACK, f"result(timeout=1) took {elapsed:.2f} s"
    assert not future.done(), "result(timeout) must not end the request"
    assert future.cancel()
    usable(stdio)


def test_stdio_the_timeout_reaches_a_future_another_thread_reads_for(stdio):
    # A blocking call in another thread holds the pipe (the reader role) for its own reply;
    # this thread's future still ends at its own timeout.
    errors: list[BaseException] = []

    def block() -> None:
        try:
            stdio.call_tool("long_running", LONG, timeout=4)
        except BaseException as exc:  # noqa: BLE001 - expected RequestTimeout
            errors.append(exc)

    reader = threading.Thread(target=block)
    reader.start()
    try:
        future = stdio.submit_call_tool("long_running", LONG, timeout=1.5)
        elapsed, error = timed(lambda: future.result(timeout=30))
    finally:
        reader.join(10)
    assert isinstance(error, RequestTimeout), repr(error)
    assert elapsed <= 1.5 + SLACK, f"{elapsed:.2f} s for a 1.5 s request timeout"
    assert len(errors) == 1 and isinstance(errors[0], RequestTimeout), errors
    usable(stdio)


def test_stdio_a_future_nobody_waits_for_is_done_at_its_timeout(stdio):
    future = stdio.submit_call_tool("long_running", LONG, timeout=1)
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    t0 = time.monotonic()
    assert done.wait(1 + SLACK + 1), "the future never became done"
    elapsed = time.monotonic() - t0
    assert elapsed <= 1 + SLACK, f"done after {elapsed:.2f} s for timeout=1"
    assert isinstance(future.exception(timeout=0), RequestTimeout)


def test_memory_a_futures_own_timeout_ends_result_with_a_longer_timeout(memory):
    future = memory.submit_call_tool("hang", {}, timeout=1.5)
    elapsed, error = timed(lambda: future.result(timeout=30))
    assert isinstance(error, RequestTimeout), repr(error)
    assert elapsed <= 1.5 + SLACK, f"{elapsed:.2f} s for a 1.5 s request timeout"


def test_memory_result_timeout_bounds_only_that_wait(memory):
    future = memory.submit_ping(timeout=30)
    elapsed, error = timed(lambda: future.result(timeout=1))
    assert isinstance(error, concurrent.futures.TimeoutError), repr(error)
    assert 1 - 0.05 <= elapsed <= 1 + SLACK, f"result(timeout=1) took {elapsed:.2f} s"
    assert not future.done()
    assert future.cancel()
