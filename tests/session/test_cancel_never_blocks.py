"""A timed-out or cancelled call never waits to tell the server (issue 31, bug A).

Over HTTP the POST of ``notifications/cancelled`` waits for the server's 202. Against a
server that never answers it, that POST went out in the caller's thread under the
transport's 60 s timeout: a call with ``timeout=1`` returned after the server gave up
(8 s here), ``Future.cancel()`` blocked as long, and an era probe's timeout stretched
``connect_timeout=2`` to ~63 s. The notification now goes out on a shared sender thread,
bounded by its own ``NOTICE_TIMEOUT``; ``close()`` stays within its own bound.
"""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from servers.stall_http import HOLD, StallHTTP, _Handler

import mcpsync
from mcpsync.errors import RequestTimeout
from mcpsync.rpc.connection import CLOSE_TIMEOUT
from mcpsync.rpc.sending import NOTICE_TIMEOUT

SLACK = 0.5


class _DeafToCancel(_Handler):
    """As the stall server, and a ``notifications/cancelled`` POST is read, never answered."""

    def _read(self) -> dict[str, Any] | None:
        message = super()._read()
        if message is not None and message.get("method") == "notifications/cancelled":
            # never answer; report how long the client kept the POST open (until it closed
            # the connection), within HOLD
            t0 = time.monotonic()
            sock = self.connection
            sock.settimeout(0.05)
            while not self.peer.stop.is_set() and time.monotonic() - t0 < HOLD:
                try:
                    if sock.recv(1, socket.MSG_PEEK) == b"":
                        cast(Any, self.peer).held.put(time.monotonic() - t0)
                        break
                except TimeoutError:
                    continue
                except OSError:
                    cast(Any, self.peer).held.put(time.monotonic() - t0)
                    break
            self.close_connection = True
            return None
        return message


@pytest.fixture
def peer() -> Iterator[StallHTTP]:
    with StallHTTP({"tools/call:hang": "silent"}) as server:
        server.server.RequestHandlerClass = type("Handler", (_DeafToCancel,), {"peer": server})
        cast(Any, server).held = queue.Queue()  # how long each notice's POST was kept open
        yield server


def _mcpsync_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("mcpsync-")}


def _wait_for(received: queue.Queue[str], method: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"the server never got {method}"
        if received.get(timeout=left) == method:
            return


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_a_timed_out_call_returns_within_its_bound(peer: StallHTTP, transport: str) -> None:
    before = _mcpsync_threads()
    url = peer.sse_url if transport == "sse" else peer.url
    session = mcpsync.Session.connect(url, transport=transport, connect_timeout=10, era="legacy")  # type: ignore[arg-type]
    try:
        t0 = time.monotonic()
        with pytest.raises(RequestTimeout):
            session.call_tool("hang", {}, timeout=1)
        elapsed = time.monotonic() - t0
        assert elapsed <= 1 + SLACK, f"call_tool(timeout=1) took {elapsed:.2f} s"
        _wait_for(peer.received, "notifications/cancelled")  # the server was still told
        echo = session.call_tool("echo", {"message": "on"}, timeout=10)  # still usable
        assert echo.content[0].text == "on"
    finally:
        t0 = time.monotonic()
        session.close()
        closing = time.monotonic() - t0
    # the notice's POST is still held by the server: close waits at most its own bound
    assert closing <= CLOSE_TIMEOUT + SLACK, f"close took {closing:.2f} s"
    deadline = time.monotonic() + NOTICE_TIMEOUT + SLACK
    while (left := _mcpsync_threads() - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"left behind: {sorted(t.name for t in left)}"


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_future_cancel_returns_at_once(peer: StallHTTP, transport: str) -> None:
    url = peer.sse_url if transport == "sse" else peer.url
    with mcpsync.Session.connect(
        url,
        transport=transport,  # type: ignore[arg-type]
        connect_timeout=10,
        era="legacy",
    ) as session:
        future = session.submit_call_tool("hang", {}, timeout=30)
        _wait_for(peer.received, "tools/call")
        t0 = time.monotonic()
        assert future.cancel()
        elapsed = time.monotonic() - t0
        assert elapsed <= 0.3, f"Future.cancel() took {elapsed:.2f} s"
        assert future.cancelled()
        _wait_for(peer.received, "notifications/cancelled")
        # a second notice while the first one's POST is held: still no wait
        second = session.submit_call_tool("hang", {}, timeout=30)
        _wait_for(peer.received, "tools/call")
        t0 = time.monotonic()
        assert second.cancel()
        assert time.monotonic() - t0 <= 0.3


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
def test_the_notice_itself_is_bounded(peer: StallHTTP, transport: str) -> None:
    # The server never answers the notice's POST: the sender gives up after NOTICE_TIMEOUT
    # (it closes the connection), not after the transport's 60 s; the session meanwhile
    # goes on as usual.
    url = peer.sse_url if transport == "sse" else peer.url
    with mcpsync.Session.connect(
        url,
        transport=transport,  # type: ignore[arg-type]
        connect_timeout=10,
        era="legacy",
    ) as session:
        with pytest.raises(RequestTimeout):
            session.call_tool("hang", {}, timeout=0.5)
        _wait_for(peer.received, "notifications/cancelled")
        t0 = time.monotonic()
        assert session.call_tool("echo", {"message": "x"}, timeout=5).content[0].text == "x"
        assert time.monotonic() - t0 <= 1.0
        held = cast(Any, peer).held.get(timeout=HOLD + 1)
    assert NOTICE_TIMEOUT - 0.1 <= held <= NOTICE_TIMEOUT + SLACK, f"POST kept {held:.2f} s"
