"""Connection.on_closed: called once, off the reader, when the connection dies (not on close())."""

from __future__ import annotations

import threading

import pytest
from servers.launch import demo_argv, faulty_argv

import mcpsync
from mcpsync.errors import ServerExited


def test_a_server_that_exits_calls_on_closed_once_off_the_reader(no_leaks):
    seen: list[tuple[BaseException, str]] = []
    called = threading.Event()

    def closed(error: BaseException) -> None:
        seen.append((error, threading.current_thread().name))
        called.set()

    with mcpsync.Session.connect(faulty_argv("--crash-on-call", "echo")) as s:
        s.connection.on_closed(closed)
        with pytest.raises(ServerExited):
            s.call_tool("echo", {"message": "boom"}, timeout=10)
        assert called.wait(10)
        ((error, thread),) = seen
        assert isinstance(error, ServerExited)
        assert error.exit_code == 3
        assert "crashing on purpose" in (error.stderr_tail or "")
        assert "reader" not in thread and thread.startswith("mcpsync-closed[")
        # registered after the death: called at once, in this thread, with the same error
        late: list[BaseException] = []
        s.connection.on_closed(late.append)
        assert late == [error]
    assert len(seen) == 1  # the close() after the death calls nobody again


def test_an_explicit_close_never_calls_on_closed(no_leaks):
    seen: list[BaseException] = []
    s = mcpsync.Session.connect(demo_argv())
    s.connection.on_closed(seen.append)
    s.call_tool("echo", {"message": "hi"})
    s.close()
    s.connection.on_closed(seen.append)  # closed by the caller: never called
    assert seen == []
    assert s.connection.closed


def test_a_failing_callback_does_not_stop_the_others(no_leaks, caplog):
    second = threading.Event()

    def bad(error: BaseException) -> None:
        raise RuntimeError("callback bug")

    with mcpsync.Session.connect(faulty_argv("--crash-on-call", "echo")) as s:
        s.connection.on_closed(bad)
        s.connection.on_closed(lambda error: second.set())
        with pytest.raises(ServerExited):
            s.call_tool("echo", {"message": "boom"}, timeout=10)
        assert second.wait(10)
