"""The restart policy against real servers: npm ``mcp-server-everything`` (stdio) killed
mid-session comes back with its resource subscription, and the demo HTTP server restarted
on the same port (the new process answers 404 for the old session id, or nothing at all
while it is down). Waits are on Events and ``on_restart``, bounded.
"""

from __future__ import annotations

import sys
import threading

import psutil
import pytest
from servers.launch import everything_stdio_argv, have_everything
from test_restart import LogWatch

import mcpsync
from mcpsync import RestartEvent, RestartPolicy, ServerRestarted
from mcpsync.demo_server.http import DemoHTTPServer
from mcpsync.errors import ConnectError, ServerExited, SessionExpired

WAIT = 30.0


class Restarts:
    def __init__(self) -> None:
        self.events: list[RestartEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: RestartEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait(self, count: int = 1, timeout: float = WAIT) -> RestartEvent:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.events) >= count, timeout), self.events
            return self.events[count - 1]


@pytest.mark.real
@pytest.mark.skipif(not have_everything(), reason="npm peers not installed")
def test_everything_killed_mid_session_comes_back_with_its_subscription(no_leaks):
    seen = Restarts()
    policy = RestartPolicy(backoff=0.1, on_restart=seen)
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30, restart=policy) as s:
        uri = str(s.list_resources()[0].uri)
        updates: list[str] = []
        updated = threading.Event()

        def on_update(u: str) -> None:
            updates.append(u)
            updated.set()

        s.subscribe_resource(uri, on_update)
        first = s.transport.process.pid  # type: ignore[attr-defined]
        node = psutil.Process(first)
        node.kill()
        node.wait(10)
        event = seen.wait()
        assert event.ok is True and isinstance(event.reason, ServerExited)
        assert f"subscription {uri}" in event.reopened and event.problems == []
        assert s.restarts == 1 and not s.closed
        assert s.transport.process.pid != first  # type: ignore[attr-defined]
        # server-everything sends updates only for URIs subscribed on *this* process: the
        # toggle starts them ("once immediately"), so an update proves the re-subscription
        assert updates == []
        s.call_tool("toggle-subscriber-updates", {})
        assert updated.wait(WAIT)
        assert updates[0] == uri
        s.call_tool("toggle-subscriber-updates", {})  # stop the 5 s timer


def went_away(error: BaseException) -> bool:
    """Connection refused, or the reply stream lost because of it (the server stopping
    while the request was under way: the demo server may answer 404 while it stops)."""
    return isinstance(error, ConnectError) or isinstance(error.__cause__, ConnectError)


def _restart_on_same_port(server: DemoHTTPServer) -> DemoHTTPServer:
    port = server.port
    server.stop()
    return DemoHTTPServer(port=port).start()


def test_http_server_restarted_on_the_same_port_404_initializes_again(no_leaks):
    seen = Restarts()
    policy = RestartPolicy(backoff=0.05, on_restart=seen)
    server = DemoHTTPServer().start()
    try:
        s = mcpsync.Session.connect(server.url, era="legacy", timeout=10, restart=policy)
        with s:
            s.subscribe_resource("demo://readme", lambda uri: None)
            s.set_logging_level("error")
            server = _restart_on_same_port(server)
            # the new process does not know the session id: 404, initialized again, the
            # call re-sent (the server never ran it), the subscription re-opened on a worker
            assert s.call_tool("echo", {"message": "again"}).content[0].text == "again"
            event = seen.wait()
            assert isinstance(event.reason, SessionExpired) and event.ok is True
            assert event.reopened == ["subscription demo://readme", "log level error"]
            # 2: when a keep-alive connection to the old process failed the first initialize
            assert s.restarts == 1 and s.reinitializations in (1, 2)
            text = s.call_tool("touch_resource", {"uri": "demo://readme"}).content[0].text
            assert "notified 1 subscriber" in text
    finally:
        server.stop()


def test_http_server_down_then_up_restarts_after_failed_attempts(no_leaks):
    seen = Restarts()
    policy = RestartPolicy(backoff=0.05, max_backoff=0.2, max_attempts=50, on_restart=seen)
    server = DemoHTTPServer().start()
    port = server.port
    failed_attempt = LogWatch("failed")
    try:
        s = mcpsync.Session.connect(server.url, timeout=10, connect_timeout=5, restart=policy)
        with s:
            s.subscribe_resource("demo://readme", lambda uri: None)
            server.stop()
            with pytest.raises(ServerRestarted) as info:  # unreachable: nothing ran
                s.call_tool("echo", {"message": "lost"})
            assert went_away(info.value.reason)
            # bring the server back once a restart attempt failed against the closed port
            assert failed_attempt.wait(WAIT)
            server = DemoHTTPServer(port=port).start()
            event = seen.wait()
            assert event.ok is True and event.failures
            assert went_away(event.reason)
            assert all(isinstance(f, ConnectError) for f in event.failures)
            assert "subscription demo://readme" in event.reopened
            assert s.call_tool("echo", {"message": "back"}).content[0].text == "back"
    finally:
        failed_attempt.remove()
        server.stop()


@pytest.mark.real
def test_official_sdk_modern_server_killed_comes_back_with_its_listen_stream(no_leaks):
    from servers.launch import SERVERS_DIR

    from mcpsync.protocol.choose import Caches

    argv = [sys.executable, str(SERVERS_DIR / "modern_sdk_server.py"), "stdio"]
    seen = Restarts()
    policy = RestartPolicy(backoff=0.05, on_restart=seen)
    with mcpsync.Session.connect(
        argv, era="modern", timeout=30, restart=policy, _caches=Caches()
    ) as s:
        assert s.era == "modern"
        updated, changed = threading.Event(), threading.Event()
        s.subscribe_resource("demo://readme", lambda uri: updated.set())
        s.on_tools_changed(changed.set)
        first = s.transport.process.pid  # type: ignore[attr-defined]
        psutil.Process(first).kill()
        event = seen.wait()
        assert event.ok and event.problems == []
        assert event.reopened == ["list changes: tools", "subscription demo://readme"]
        assert s.transport.process.pid != first  # type: ignore[attr-defined]
        # the new process reports both only to a listen stream that asked for them
        s.call_tool("touch_resource", {"uri": "demo://readme"})
        assert updated.wait(WAIT)
        s.call_tool("add_tool", {"name": "fresh"})
        assert changed.wait(WAIT)
        assert "fresh" in {t.name for t in s.list_tools()}


@pytest.mark.real
def test_official_sdk_modern_http_server_restarted_on_its_port(no_leaks):
    from servers.launch import SERVERS_DIR, free_port, start_server

    from mcpsync.protocol.choose import Caches

    port = free_port()
    argv = [sys.executable, str(SERVERS_DIR / "modern_sdk_server.py"), "http", "--port", str(port)]
    seen = Restarts()
    failed_attempt = LogWatch("failed")
    policy = RestartPolicy(backoff=0.05, max_backoff=0.2, max_attempts=100, on_restart=seen)
    updated = threading.Event()
    try:
        with start_server(argv, port=port, path="/mcp", ready_pattern="ready") as server:
            s = mcpsync.Session.connect(
                server.url, era="modern", timeout=10, connect_timeout=5, restart=policy,
                _caches=Caches(),
            )  # fmt: skip
            s.subscribe_resource("demo://readme", lambda uri: updated.set())
        # the server is gone (its process group killed): a call cannot reach it
        try:
            with pytest.raises(ServerRestarted) as info:
                s.call_tool("echo", {"message": "lost"})
            assert went_away(info.value.reason)
            assert failed_attempt.wait(WAIT)  # an attempt met the closed port
            with start_server(argv, port=port, path="/mcp", ready_pattern="ready"):
                event = seen.wait()
                assert (
                    event.ok and event.failures and "subscription demo://readme" in event.reopened
                )
                assert s.era == "modern"
                s.call_tool("touch_resource", {"uri": "demo://readme"})
                assert updated.wait(WAIT)  # on the listen stream opened with the new process
                s.close()
        finally:
            s.close()
    finally:
        failed_attempt.remove()
