"""HTTP session expiry under concurrency (issue 11, item 8), through ``Session.connect``.

The peer (``servers/http_expiring_server.py``, a separate process) follows the spec: a
POST with an expired session id gets 404, one without any session id gets 400, and it
expires the session after every 50 ``tools/call`` requests, 6 times. 8 threads x 45 calls
race those expiries. What must hold: one re-initialization per expiry, every call answered,
and no request ever sent without ``Mcp-Session-Id`` once the session had one.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest
import requests
from servers.launch import SERVERS_DIR, start_server
from test_http_transport import (
    Collector,
    Req,
    ScriptedServer,
    handshake,
    init_result,
    json_server,
    request,
)

import mcpsync
from mcpsync.errors import RequestTimeout, SessionExpired, TransportError
from mcpsync.transports.http.streamable import StreamableHTTPTransport

READY = r"http_expiring_server ready: http://127\.0\.0\.1:(\d+)/"
THREADS, CALLS, EXPIRE_EVERY, EXPIRIES = 8, 45, 50, 6


def expiring_server(expire_every: int, expiries: int) -> Any:
    argv = [sys.executable, str(SERVERS_DIR / "http_expiring_server.py")]
    argv += ["--expire-every", str(expire_every), "--expiries", str(expiries)]
    return start_server(argv, port=None, path="/mcp", ready_pattern=READY, timeout=30)


def stats(server: Any) -> dict[str, int]:
    reply = requests.get(f"http://127.0.0.1:{server.port}/stats", timeout=10)
    reply.raise_for_status()
    return reply.json()


def test_expiry_under_concurrency_reinitializes_once_per_expiry(no_leaks):
    with expiring_server(EXPIRE_EVERY, EXPIRIES) as server:
        with mcpsync.Session.connect(server.url, timeout=30, era="legacy") as s:
            assert s.call_tool("echo", {"message": "warm-up"}).content[0].text == "warm-up"
            failures: list[BaseException] = []
            wrong: list[tuple[str, str]] = []
            answered = [0] * THREADS
            start = threading.Barrier(THREADS)

            def worker(n: int) -> None:
                try:
                    start.wait(30)
                except threading.BrokenBarrierError as exc:
                    failures.append(exc)
                    return
                for i in range(CALLS):
                    text = f"{n}-{i}"
                    try:
                        got = s.call_tool("echo", {"message": text}).content[0].text
                    except Exception as exc:  # noqa: BLE001 - every failure is counted
                        failures.append(exc)
                        continue
                    if got != text:
                        wrong.append((text, got))
                    answered[n] += 1

            threads = [
                threading.Thread(target=worker, args=(n,), name=f"test-caller-{n}")
                for n in range(THREADS)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not any(t.is_alive() for t in threads), "callers still blocked after 120 s"
            counts = stats(server)
            print("server counters:", counts)
            assert failures == [], failures[:5]
            assert wrong == []
            assert sum(answered) == THREADS * CALLS
            assert counts["expiries"] == EXPIRIES
            assert s.reinitializations == EXPIRIES, (s.reinitializations, counts)
            assert counts["initializes"] == EXPIRIES + 1, counts
            assert counts["without_session"] == 0, counts
            assert counts["calls"] == THREADS * CALLS + 1, counts
            # still usable on the last session
            assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"


def test_waiting_for_a_reinitialization_is_bounded_and_close_ends_it(no_leaks):
    """Raw transport: the leader that never re-initializes holds nobody past their timeout;
    after that the next request leads; close() releases a waiting sender at once."""
    state = {"session": "sess-1"}

    def extra(req: Req, message: dict[str, Any]) -> bool:
        if message.get("method") == "initialize":
            req.send_json(init_result(message["id"]), headers={"Mcp-Session-Id": state["session"]})
            return True
        if req.headers.get("mcp-session-id") != state["session"]:
            req.send(404 if "mcp-session-id" in req.headers else 400, b"no")
            return True
        return False

    with ScriptedServer(json_server(extra)) as server:
        c = Collector()
        t = StreamableHTTPTransport(server.url, name="t")
        t.start(*c.callbacks())
        handshake(t, c)
        state["session"] = "sess-2"
        with pytest.raises(SessionExpired):
            t.send(request(2, "tools/list"))  # the leader; it does not re-initialize
        posts = len(server.posts())
        started = time.monotonic()
        with pytest.raises(RequestTimeout, match="not re-initialized"):
            t.send(request(3, "tools/list"), timeout=0.5)
        assert 0.4 < time.monotonic() - started < 5
        with pytest.raises(SessionExpired):
            t.send(request(4, "tools/list"))  # the next request leads
        assert len(server.posts()) == posts  # none of them went out without a session id

        outcome: list[BaseException] = []
        waiting = threading.Thread(
            target=lambda: _capture(outcome, t.send, request(5, "tools/list"), timeout=30),
            name="test-waiter",
        )
        waiting.start()
        deadline = time.monotonic() + 10
        # the waiter must be blocked in the transport before close(): look at the condition
        while not t._lifecycle.cond._waiters and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)  # polling another thread's state: there is no event to wait on
        assert t._lifecycle.cond._waiters  # type: ignore[attr-defined]
        started = time.monotonic()
        t.close()
        waiting.join(10)
        assert not waiting.is_alive() and time.monotonic() - started < 5
        assert isinstance(outcome[0], TransportError)
        assert all(r.headers.get("mcp-session-id") for r in server.posts()[1:])


def _capture(outcome: list[BaseException], fn: Any, *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - the test looks at it
        outcome.append(exc)
