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
from typing import Any

import requests
from servers.launch import SERVERS_DIR, start_server

import mcpsync

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
