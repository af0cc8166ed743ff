"""The stdio session against a hostile server (tests/servers/hostile_server.py), public API only.

Deep nesting, wrong-typed ids, non-JSON stdout, server-chosen logger names, oversize replies,
a server that stops reading, a grandchild that keeps stderr open: each ends in a typed error
or is reported, and the session stays usable (or notices the end).
"""

from __future__ import annotations

import sys
import threading
import time

import pytest
from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.errors import ProtocolError
from mcpsync.transports.stdio import MessageTooLarge, StdioTransport

HOSTILE = [sys.executable, str(SERVERS_DIR / "hostile_server.py")]


def connect(*modes: str, **kwargs):
    kwargs.setdefault("timeout", 20)
    kwargs.setdefault("connect_timeout", 20)
    return mcpsync.Session.connect([*HOSTILE, *modes], era="legacy", **kwargs)


def text(result) -> str:
    return result.content[0].text


def test_deep_nesting_is_a_protocol_error_and_the_reply_behind_it_arrives(no_leaks):
    with connect() as s:
        assert text(s.call_tool("deep", {"depth": 100_000})) == "after deep"
        errors = [e for e in s.connection.protocol_errors if "nested too deeply" in str(e)]
        assert len(errors) == 1 and isinstance(errors[0], ProtocolError)
        assert text(s.call_tool("echo", {"message": "still"})) == "still"


def test_deep_nesting_while_idle_keeps_the_reader_alive(no_leaks):
    with connect() as s:
        tick = threading.Event()  # never set: a bounded wait between looks
        assert text(s.call_tool("deep_idle", {"depth": 100_000})) == "ok"
        deadline = time.monotonic() + 15
        while not s.connection.closed and time.monotonic() < deadline:
            tick.wait(0.02)
        assert s.connection.closed, "the session did not notice the server exit"
        assert getattr(s.connection.close_error, "exit_code", None) == 5
        assert any("nested too deeply" in str(e) for e in s.connection.protocol_errors)


def test_ids_match_by_type_and_value(no_leaks):
    with connect() as s:
        # Replies with id 7.0, true and "7" for request 7 come first: none of them is its reply.
        assert text(s.call_tool("wrong_ids", {})) == "right"
        unknown = [str(e) for e in s.connection.protocol_errors if "unknown request id" in str(e)]
        assert len(unknown) == 3
        assert any("True" in e for e in unknown) and any("'" in e for e in unknown)


def test_a_true_id_is_not_the_reply_to_request_1(no_leaks):
    # initialize is request 1; a reply with "id": true and a bogus version comes first.
    with connect("true_id_init") as s:
        assert s.protocol_version == "2025-11-25"
        assert any("unknown request id True" in str(e) for e in s.connection.protocol_errors)


def test_non_json_stdout_is_kept_and_reported(no_leaks):
    with connect("noise") as s:
        assert s.transport.stdout_noise() == [
            "Starting weather server on port 8000...",
            "loading model",
            "ready!",
        ]
        reported = [str(e) for e in s.connection.protocol_errors if "wrote to stdout" in str(e)]
        assert len(reported) == 3 and "Starting weather server" in reported[0]
        assert text(s.call_tool("echo", {"message": "fine"})) == "fine"


def test_the_noise_tail_is_bounded(no_leaks):
    transport = StdioTransport([*HOSTILE])
    assert transport.stdout_noise() == []
    for i in range(100):
        transport.framer.line(f"banner {i}".encode())  # the reader's line step
    assert transport.stdout_noise() == [f"banner {i}" for i in range(80, 100)]


_BODY = b'"result":{"content":[{"type":"text","text":"' + b"x" * 5000 + b'"}]}'
_LAYOUTS = {  # where a server puts the id of a too-long reply
    "first": (b'{"jsonrpc":"2.0","id":42,' + _BODY + b"}", 42),
    "last": (b'{"jsonrpc":"2.0",' + _BODY + b',"id":42}', 42),
    # the TypeScript SDK's order (the same rule as HTTP's: transports.replyid)
    "before jsonrpc": (b"{" + _BODY + b',"id":42,"jsonrpc":"2.0"}', 42),
    "a string id": (b"{" + _BODY + b',"jsonrpc":"2.0","id":"r-1"}', "r-1"),
    "nested only": (b'{"jsonrpc":"2.0",' + _BODY[:-1] + b',"id":42}}', None),
}


@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_an_oversize_reply_names_its_request_wherever_the_id_is(layout):
    # The reader's framing step alone: the id is read from the first or the last bytes.
    errors: list[BaseException] = []
    transport = StdioTransport([*HOSTILE], max_message_bytes=1000)
    transport._bind(lambda m: None, lambda e: None, errors.append)  # noqa: SLF001
    line, expected = _LAYOUTS[layout]
    for start in range(0, len(line), 700):  # in pieces, as a pipe delivers it
        transport.framer.feed(line[start : start + 700])
    assert not errors or layout == "first"  # else nothing is known before the newline
    transport.framer.feed(b'\n{"jsonrpc":"2.0","id":43,"result":{}}\n')
    assert len(errors) == 1 and isinstance(errors[0], MessageTooLarge)
    assert errors[0].request_id == expected and "over 1000 bytes" in str(errors[0])
    # a whole line over the cap (read in one piece) is named the same way
    whole: list[BaseException] = []
    transport._bind(lambda m: None, lambda e: None, whole.append)  # noqa: SLF001
    transport.framer.line(line)
    assert len(whole) == 1 and whole[0].request_id == expected


def test_an_oversize_reply_fails_its_call_at_once(no_leaks):
    transport = StdioTransport([*HOSTILE], max_message_bytes=64 * 1024)
    with mcpsync.Session.connect(transport, era="legacy", timeout=30) as s:
        started = time.monotonic()
        with pytest.raises(MessageTooLarge, match="over 65536 bytes"):
            s.call_tool("big", {"bytes": 1_000_000}, timeout=30)
        assert time.monotonic() - started < 10
        assert text(s.call_tool("echo", {"message": "after"})) == "after"


def test_a_write_to_a_server_that_stopped_reading_is_bounded(no_leaks):
    transport = StdioTransport([*HOSTILE], shutdown_timeout=0.5)
    s = mcpsync.Session.connect(transport, era="legacy", timeout=20)
    try:
        assert text(s.call_tool("stop_reading", {})) == "not reading any more"
        big = "x" * (1024 * 1024)  # far more than a pipe holds
        started = time.monotonic()
        with pytest.raises(mcpsync.RequestTimeout):  # the call's own timeout, while writing
            s.call_tool("echo", {"message": big}, timeout=2)
        assert time.monotonic() - started < 4, "the write was not bounded by the call's timeout"
        # A second writer waits for the first one's bound, not forever; close() from another
        # thread while it waits ends it at once and is bounded itself.
        outcome: list[BaseException] = []

        def blocked_writer() -> None:
            try:
                s.call_tool("echo", {"message": big}, timeout=60)
            except BaseException as exc:  # noqa: BLE001 - reported below
                outcome.append(exc)

        worker = threading.Thread(target=blocked_writer)
        worker.start()
        deadline = time.monotonic() + 10
        while not transport._write_lock.locked() and time.monotonic() < deadline:  # noqa: SLF001
            threading.Event().wait(0.01)
        started = time.monotonic()
        closer = threading.Thread(target=s.close)
        closer.start()
        closer.join(8)
        worker.join(8)
        assert not closer.is_alive() and not worker.is_alive()
        assert time.monotonic() - started < 8, "close() was not bounded"
        assert outcome and isinstance(outcome[0], mcpsync.MCPSyncError)
    finally:
        s.close()


def test_a_write_that_waits_out_its_timeout_behind_another_is_a_request_timeout(no_leaks):
    """A call whose whole timeout passes while another call's write holds the pipe failed
    as a plain TransportError before (as if the session were broken): it is a timeout."""
    transport = StdioTransport([*HOSTILE], shutdown_timeout=0.5)
    s = mcpsync.Session.connect(transport, era="legacy", timeout=20)
    try:
        assert text(s.call_tool("stop_reading", {})) == "not reading any more"
        big = "x" * (1024 * 1024)
        outcome: list[BaseException] = []

        def first_writer() -> None:
            try:
                s.call_tool("echo", {"message": big}, timeout=5)
            except BaseException as exc:  # noqa: BLE001 - checked below
                outcome.append(exc)

        first = threading.Thread(target=first_writer)
        first.start()
        deadline = time.monotonic() + 10
        while not transport._write_lock.locked() and time.monotonic() < deadline:  # noqa: SLF001
            threading.Event().wait(0.01)
        for _ in range(5):  # whichever ends first, the wait for the pipe or the call's timer
            with pytest.raises(mcpsync.RequestTimeout):
                s.call_tool("echo", {"message": "small"}, timeout=0.05)
        first.join(10)
        assert not first.is_alive()
        assert outcome and isinstance(outcome[0], mcpsync.RequestTimeout), outcome
    finally:
        s.close()


def test_write_timeout_is_both_a_timeout_and_a_transport_error():
    exc = mcpsync.WriteTimeout("server 'x' did not read its stdin within 1 s")
    assert isinstance(exc, mcpsync.RequestTimeout | TimeoutError)
    assert isinstance(exc, mcpsync.TransportError | ConnectionError)


def _grandchild_pid(transport: StdioTransport) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for line in transport.stderr_tail().splitlines():
            if line.strip().isdigit():
                return int(line)
        threading.Event().wait(0.02)
    raise AssertionError("the grandchild did not report its pid")


def test_no_thread_outlives_close_when_a_grandchild_keeps_stderr_open(no_leaks):
    import os
    import signal

    transport = StdioTransport([*HOSTILE, "grandchild"], shutdown_timeout=0.5)
    first = mcpsync.Session.connect(transport, era="legacy", timeout=20)
    grandchild = _grandchild_pid(transport)
    try:
        assert text(first.call_tool("echo", {"message": "one"})) == "one"
        first.close()
        leftover = [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-stdio")]
        assert not leftover, f"threads alive after close(): {leftover}"
        # The next session reuses the descriptor numbers: every one of its calls is answered.
        with connect() as second:
            for i in range(30):
                assert text(second.call_tool("echo", {"message": str(i)}, timeout=5)) == str(i)
    finally:
        first.close()
        try:
            os.kill(grandchild, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_server_stderr_is_logged_under_the_servers_logger(caplog, no_leaks):
    with caplog.at_level("INFO", logger="mcpsync.server"):
        with connect("stderr_hello", name="weather") as s:
            # the server wrote it before its first reply; the drain thread logs it (bounded wait)
            deadline = time.monotonic() + 10
            while "hello from stderr" not in s.transport.stderr_tail():
                assert time.monotonic() < deadline
                threading.Event().wait(0.02)
            assert text(s.call_tool("echo", {"message": "x"})) == "x"
    records = [r for r in caplog.records if r.getMessage() == "hello from stderr"]
    assert records and records[0].name == "mcpsync.server.weather"
