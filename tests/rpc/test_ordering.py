"""Notification order as a guarantee: what the server sent before a response has reached its
callbacks by the time the call (or its future) that the response completes returns.

Over stdio (a raw server writes four notifications and the reply in one write), over the
in-memory pair, and over streamable HTTP (the official SDK server's ``log`` tool). Each test
repeats the round many times while two busy-loop processes keep both CPUs loaded: without the
guarantee the dispatch thread loses that race every few rounds.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from fakes import FakeServer
from servers.launch import SERVERS_DIR, sdk_server_http

import mcpsync

HOSTILE = [sys.executable, str(SERVERS_DIR / "hostile_server.py")]
KINDS = [
    "notifications/message",
    "notifications/tools/list_changed",
    "notifications/resources/updated",
    "notifications/custom",
]


@pytest.fixture
def cpu_load() -> Iterator[None]:
    """Two busy loops (one per CPU of the test machine), killed after the test."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(5)


class Seen:
    """Records every notification a session's callbacks see, by kind."""

    def __init__(self, session: mcpsync.Session) -> None:
        self.methods: list[str] = []
        self.logs: list[object] = []
        self.tools_changed = 0
        session.on_notification(lambda method, params: self.methods.append(method))
        session.on_tools_changed(self._changed)
        session._on_log = self.logs.append  # noqa: SLF001 - the log callback, as connect(on_log=) sets

    def _changed(self) -> None:
        self.tools_changed += 1

    def clear(self) -> None:
        self.methods.clear()
        self.logs.clear()
        self.tools_changed = 0


def test_stdio_blocking_calls_see_every_notification_sent_before_their_reply(cpu_load, no_leaks):
    with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=20) as s:
        seen = Seen(s)
        for round_ in range(300):
            seen.clear()
            assert s.call_tool("notify_before", {}).content[0].text == "notified"
            assert seen.methods == KINDS, f"round {round_}: {seen.methods}"
            assert len(seen.logs) == 1 and seen.tools_changed == 1


def test_stdio_futures_resolve_after_the_notifications_before_their_reply(cpu_load, no_leaks):
    with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=20) as s:
        seen = Seen(s)
        for round_ in range(100):
            seen.clear()
            futures = [s.submit_call_tool("notify_before", {}) for _ in range(3)]
            # Each future: done only once the four notifications before its reply were delivered.
            done = futures[0].result(timeout=20)
            assert done.content[0].text == "notified"
            assert seen.methods[:4] == KINDS, f"round {round_}: {seen.methods}"
            for future in futures[1:]:
                future.result(timeout=20)
            assert seen.methods == KINDS * 3, f"round {round_}: {seen.methods}"


def test_a_call_from_inside_a_notification_callback_does_not_deadlock(no_leaks):
    # The dispatch thread itself calls: its reply cannot wait for the dispatch queue.
    with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=20) as s:
        answers: list[str] = []
        done = threading.Event()

        def on_change() -> None:
            # Only the first time: the call below makes the server send list_changed again,
            # which would run this callback again (and append again) while the test reads.
            if not done.is_set():
                answers.append(s.call_tool("notify_before", {}, timeout=5).content[0].text)
                done.set()

        s.on_tools_changed(on_change)
        s.call_tool("notify_before", {})
        assert done.wait(10)
        assert answers == ["notified"]


def _notify_then_reply(server: FakeServer):
    def handler(message):
        server.notify("notifications/message", {"level": "info", "data": "before"})
        server.notify("notifications/tools/list_changed")
        server.notify("notifications/resources/updated", {"uri": "demo://x"})
        server.notify("notifications/custom", {"n": 1})
        return {"content": [{"type": "text", "text": "notified"}]}

    return handler


def test_memory_calls_and_futures_see_every_notification_first(cpu_load, no_leaks):
    server = FakeServer(capabilities={"tools": {"listChanged": True}, "logging": {}})
    server.handlers["tools/call"] = _notify_then_reply(server)
    with mcpsync.Session.connect(server.transport, timeout=20, connect_timeout=20) as s:
        seen = Seen(s)
        for round_ in range(200):
            seen.clear()
            if round_ % 2:
                s.submit_call_tool("x", {}).result(timeout=20)
            else:
                s.call_tool("x", {})
            assert seen.methods == KINDS, f"round {round_}: {seen.methods}"


@pytest.mark.real
def test_http_log_messages_arrive_before_the_call_returns(cpu_load, no_leaks):
    with sdk_server_http() as server:
        with mcpsync.Session.connect(server.url, timeout=30, era="legacy") as s:
            logs: list[object] = []
            s._on_log = logs.append  # noqa: SLF001
            s.set_logging_level("debug")
            for round_ in range(60):
                logs.clear()
                s.call_tool("log", {"level": "warning", "message": f"careful {round_}"})
                assert [m.data for m in logs] == [f"careful {round_}"], f"round {round_}"
