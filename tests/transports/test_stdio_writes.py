"""Combined stdio writes (transports/stdio.py): many threads sending at once share writes,
and the server still sees every message whole and in one piece; a request queued behind a
write the server does not take fails with WriteTimeout at once, not at its own timeout."""

from __future__ import annotations

import sys
import threading
import time

from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.transports.stdio import StdioTransport

HOSTILE = [sys.executable, str(SERVERS_DIR / "hostile_server.py")]
THREADS = 8
CALLS = 60


def text(result) -> str:
    return result.content[0].text


def test_concurrent_sends_reach_the_server_whole_and_each_reply_its_caller(no_leaks):
    # Messages from a few bytes to several pipe buffers: writes that combine, and writes that
    # only part-fit (the rest waits in poll) while other threads queue behind them.
    sizes = [1, 40, 3000, 70_000, 200_000]
    with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=60) as s:
        errors: list[str] = []
        start = threading.Barrier(THREADS)

        def run(i: int) -> None:
            try:
                start.wait(10)
                for n in range(CALLS):
                    tag = f"t{i}-c{n}-"
                    message = tag + "x" * sizes[(i + n) % len(sizes)]
                    got = text(s.call_tool("echo", {"message": message}))
                    if got != message:
                        errors.append(f"{tag}: got {got[:40]!r}... ({len(got)} chars)")
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(f"thread {i}: {exc!r}")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        # no line the server read was two messages spliced, or a message cut short
        assert text(s.call_tool("bad_input", {})) == "0"


def test_a_request_queued_behind_a_stalled_write_fails_with_write_timeout(no_leaks):
    transport = StdioTransport([*HOSTILE], shutdown_timeout=0.5)
    s = mcpsync.Session.connect(transport, era="legacy", timeout=60)
    try:
        assert text(s.call_tool("stop_reading", {})) == "not reading any more"
        outcome: dict[str, BaseException] = {}

        def call(key: str, message: str, timeout: float) -> None:
            try:
                s.call_tool("echo", {"message": message}, timeout=timeout)
            except BaseException as exc:  # noqa: BLE001 - checked below
                outcome[key] = exc

        first = threading.Thread(target=call, args=("first", "x" * (1024 * 1024), 2.0))
        first.start()
        deadline = time.monotonic() + 10
        while not transport._write_lock.locked() and time.monotonic() < deadline:  # noqa: SLF001
            threading.Event().wait(0.01)
        assert transport._write_lock.locked()  # noqa: SLF001 - the first write is stuck
        # queued behind it (its sender does not wait for the lock): it fails when the
        # first write gives up, long before its own 60 s
        second = threading.Thread(target=call, args=("second", "small", 60.0))
        second.start()
        first.join(30)
        second.join(30)
        assert not first.is_alive() and not second.is_alive()
        assert isinstance(outcome.get("first"), mcpsync.RequestTimeout), outcome
        assert isinstance(outcome.get("second"), mcpsync.WriteTimeout), outcome
        assert "did not read its stdin" in str(outcome["second"])
    finally:
        s.close()
