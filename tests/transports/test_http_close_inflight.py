"""``close()`` of an HTTP session ends the calls other threads wait in at once: each caller
reads its own reply on a pooled connection, and closing the pool shuts those sockets down,
so a call whose server holds the reply fails with ``SessionClosed`` now, not at its read
timeout; and no connection to the server is left open afterwards."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psutil
import pytest
from servers.launch import tasks_http

import mcpsync


@pytest.fixture
def held_server(tmp_path: Path):
    """The on-disk tasks server over HTTP: a call with ``{"hold": PATH}`` is answered once
    PATH exists (never, here)."""
    with tasks_http(tmp_path) as url:
        yield url, tmp_path


def _connections_to(port: int) -> list[str]:
    return [
        c.status
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == port
    ]


def _calls(store: Path, tool: str) -> int:
    """How many ``tools/call`` of ``tool`` the server has read."""
    lines = [
        line for log in store.glob("requests-*.jsonl") for line in log.read_text().splitlines()
    ]
    return sum(f'"name": "{tool}"' in line for line in lines)


@pytest.mark.parametrize("callers", [1, 4])
def test_close_ends_the_calls_waiting_for_a_held_reply_at_once(no_leaks, held_server, callers):
    url, store = held_server
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    session = mcpsync.Session.connect(url, timeout=60)  # a read timeout far beyond the test
    session.list_tools()
    assert session.connection.transport._http.fast  # the pooled path (requests' has no pool here)
    outcomes: list[tuple[BaseException | None, float]] = []
    lock = threading.Lock()

    def call() -> None:
        error: BaseException | None = None
        try:
            session.call_tool("quick", {"message": "x", "hold": str(store / "never")})
        except BaseException as exc:  # noqa: BLE001 - checked below
            error = exc
        with lock:
            outcomes.append((error, time.monotonic()))

    threads = [threading.Thread(target=call) for _ in range(callers)]
    for thread in threads:
        thread.start()
    pause = threading.Event()
    deadline = time.monotonic() + 30
    while _calls(store, "quick") < callers and time.monotonic() < deadline:
        pause.wait(0.01)  # the server read every call and holds their replies from here on
    assert _calls(store, "quick") == callers
    closed_at = time.monotonic()
    session.close()
    for thread in threads:
        thread.join(20)
    assert not any(thread.is_alive() for thread in threads)
    assert len(outcomes) == callers
    for error, at in outcomes:
        assert isinstance(error, mcpsync.SessionClosed), repr(error)
        assert at - closed_at < 5.0  # not the 60 s read timeout
    deadline = time.monotonic() + 10
    while "ESTABLISHED" in _connections_to(port) and time.monotonic() < deadline:
        pause.wait(0.01)
    assert "ESTABLISHED" not in _connections_to(port)  # every socket closed, none left open
