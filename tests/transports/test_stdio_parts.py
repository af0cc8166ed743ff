"""The stdio transport's parts, each alone, through the interface its constructor declares.

``StdioTransport`` holds a ``ChildProcess`` (spawn, stderr tail, shutdown ladder) and a
``PipeReader`` (reader thread, reader role, framing): neither knows its host. These tests
build each one with plain pipes and callbacks, no transport, so a part that reached back
into a host's attributes (as the mixins did) fails here.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

import pytest

from mcpsync.errors import ProtocolError
from mcpsync.transports.child import ChildProcess, default_environment
from mcpsync.transports.ndjson import LineFramer
from mcpsync.transports.reader import POLL, PipeReader

pytestmark = pytest.mark.skipif(not POLL, reason="the pipe reader's poll() path")

WAIT = 20.0


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


class _Waiter:
    """What ``wait_for`` waits on: anything with ``done()``."""

    def __init__(self) -> None:
        self.message: Any = None

    def done(self) -> bool:
        return self.message is not None


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_the_reader_alone_reads_both_pipes_and_ends_on_the_stop_pipe(no_leaks) -> None:
    before = _fds()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    stop_r, stop_w = os.pipe()
    got: list[tuple[Any, str]] = []
    errors: list[BaseException] = []
    stderr: list[bytes] = []
    seen = threading.Event()

    def deliver(message: Any) -> None:
        got.append((message, threading.current_thread().name))
        seen.set()

    framer = LineFramer("alone", 1 << 20, deliver, errors.append)
    reader = PipeReader(
        "alone", stdout_fd=out_r, stderr_fd=err_r, stop_fd=stop_r, framer=framer,
        on_stderr=stderr.append, on_stderr_end=lambda: None, on_eof=lambda: None,
    )  # fmt: skip
    reader.start()
    try:
        # Idle (no caller waits): the reader thread reads stdout, and stderr all along.
        os.write(err_w, b"starting\n")
        os.write(out_w, b"not json\n" + _line({"jsonrpc": "2.0", "method": "notifications/x"}))
        assert seen.wait(WAIT)
        assert got == [
            ({"jsonrpc": "2.0", "method": "notifications/x"}, "mcpsync-stdio-reader[alone]")
        ]
        assert len(errors) == 1 and isinstance(errors[0], ProtocolError)
        assert list(framer.noise) == ["not json"]
        deadline = time.monotonic() + WAIT
        while not stderr and time.monotonic() < deadline:
            seen.wait(0.01)
        assert stderr == [b"starting\n"]

        # A caller waiting for its reply reads it in its own thread (the reader role).
        waiter = _Waiter()
        reply = {"jsonrpc": "2.0", "id": 1, "result": {}}

        def settle(message: Any) -> None:
            got.append((message, threading.current_thread().name))
            waiter.message = message

        framer._deliver = settle  # noqa: SLF001 - the framer's one callback, swapped for this

        def answer() -> None:  # once the caller waits: from then on stdout is the caller's
            deadline = time.monotonic() + WAIT
            while not reader._waiting and time.monotonic() < deadline:  # noqa: SLF001
                time.sleep(0.001)
            os.write(out_w, _line(reply))

        server = threading.Thread(target=answer)
        server.start()
        reader.wait_for(waiter, time.monotonic() + WAIT)
        server.join(WAIT)
        assert waiter.message == reply
        assert got[-1] == (reply, threading.current_thread().name)  # read in this thread
    finally:
        reader.stop()
        os.write(stop_w, b"x")
        assert reader.join(WAIT)  # the thread ended on the stop pipe; the role is held
        reader.forget()
        for fd in (out_r, out_w, err_r, err_w, stop_r, stop_w):
            os.close(fd)
    assert _fds() == before  # its wake-up pipe and parking slots were closed by forget()


def test_the_reader_reports_stdout_eof_once_and_wakes_a_waiting_caller(no_leaks) -> None:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    stop_r, stop_w = os.pipe()
    eofs: list[str] = []
    reader = PipeReader(
        "eof", stdout_fd=out_r, stderr_fd=err_r, stop_fd=stop_r,
        framer=LineFramer("eof", 1 << 20, lambda m: None, lambda e: None),
        on_stderr=lambda c: None, on_stderr_end=lambda: None,
        on_eof=lambda: eofs.append(threading.current_thread().name),
    )  # fmt: skip
    reader.start()
    try:
        waiter = _Waiter()  # never settled: the EOF must end the wait, not the deadline
        closer = threading.Timer(0.2, os.close, (out_w,))
        closer.start()
        started = time.monotonic()
        reader.wait_for(waiter, started + WAIT)
        closer.join(WAIT)
        assert time.monotonic() - started < WAIT / 2
        assert reader.eof and len(eofs) == 1
    finally:
        reader.stop()
        os.write(stop_w, b"x")
        assert reader.join(WAIT)
        reader.forget()
        for fd in (out_r, err_r, err_w, stop_r, stop_w):
            os.close(fd)


def test_the_child_alone_runs_its_ladder_starting_with_the_writers_stdin_close(no_leaks) -> None:
    # A server that ignores stdin EOF and SIGTERM: the ladder needs all three steps.
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "sys.stderr.write('up\\n'); sys.stderr.flush(); time.sleep(60)"
    )
    steps: list[Any] = []
    child: ChildProcess

    def close_stdin(timeout: float | None) -> bool:
        proc = child.process
        assert proc is not None and proc.stdin is not None
        steps.append(("close_stdin", timeout, proc.poll()))
        proc.stdin.close()
        return True

    child = ChildProcess(
        [sys.executable, "-c", code], env=default_environment(), cwd=None, name="ladder",
        close_stdin=close_stdin, shutdown_timeout=0.3, stderr_tail_lines=5,
    )  # fmt: skip
    proc = child.start()
    try:
        assert proc.stderr is not None
        child.stderr_chunk(proc.stderr.readline())  # (blocking: the server wrote it first)
        assert list(child.tail) == ["up"]
        started = time.monotonic()
        child.shutdown()
        assert steps == [("close_stdin", 0.3, None)]  # first, while the server still ran
        assert proc.poll() is not None and proc.returncode < 0  # then the signals ended it
        assert time.monotonic() - started < 3 * 0.3 + 2.0  # three bounded waits (+ the group)
        assert child.exit_code(wait=0) == proc.returncode
    finally:
        if proc.poll() is None:
            child.kill()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
