"""Futures are futures in every era and on every transport (issue 31, point 3).

Against a server built with the official SDK (``servers/submit_sdk_server.py``: mcp 2.3.0,
which speaks the 2026-07-28 wire by default and the initialize handshake when asked), over
stdio, Streamable HTTP (SSE replies, the SDK's default, and JSON replies) and legacy
HTTP+SSE, in each era the transport carries: every ``submit_*`` returns at once, three 1 s
calls overlap, ``cancel()`` returns True at once and the server is told as the era and
transport prescribe (``notifications/cancelled``; on the 2026-07-28 HTTP wire the reply
stream is closed), and the session goes on working. The server's ``nap`` tool reports to a
TCP witness when it starts, ends, or is cancelled.

Before the fix (2026-07-28 over Streamable HTTP): ``submit_call_tool`` returned after the
reply (3.00 s for a 3 s tool), three 1 s calls took 3.0 s, ``cancel()`` returned False.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from servers.launch import SDK_READY, SERVERS_DIR, start_server

import mcpsync
from mcpsync.protocol.choose import Caches

SERVER = str(SERVERS_DIR / "submit_sdk_server.py")
AT_ONCE = 0.5  # a submit_* returns within this (seconds)
WAIT = 20.0


class Witness:
    """A TCP listener on 127.0.0.1 collecting the server's one-line reports."""

    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._accept, name="test-witness", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while chunk := conn.recv(4096):
                        data += chunk
                except OSError:
                    pass
            with self._cond:
                self._lines += data.decode().splitlines()
                self._cond.notify_all()

    def wait_for(self, line: str, timeout: float = WAIT) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: line in self._lines, timeout)

    def seen(self, line: str) -> bool:
        with self._cond:
            return line in self._lines

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(5)


@dataclass
class Place:
    """Where a session of one test case goes: a stdio argv or a URL, and the era."""

    name: str
    target: Any
    era: str
    #: the server can tell that it was cancelled (not a 2026-07-28 JSON reply: the SDK
    #: does not watch the connection while it runs such a request)
    sees_cancel: bool = True


@pytest.fixture(scope="module")
def witness() -> Iterator[Witness]:
    w = Witness()
    yield w
    w.close()


def _http(witness: Witness, *extra: str) -> Any:
    argv = [sys.executable, SERVER, "--witness", str(witness.port), *extra, "--port", "0"]
    path = "/sse" if extra[0] == "sse" else "/mcp"
    return start_server(argv, port=None, path=path, ready_pattern=SDK_READY, timeout=60)


@pytest.fixture(scope="module")
def http_server(witness: Witness) -> Iterator[Any]:
    with _http(witness, "http") as server:
        yield server


@pytest.fixture(scope="module")
def http_json_server(witness: Witness) -> Iterator[Any]:
    argv = [sys.executable, SERVER, "--witness", str(witness.port), "http", "--port", "0", "--json"]
    with start_server(argv, port=None, path="/mcp", ready_pattern=SDK_READY, timeout=60) as s:
        yield s


@pytest.fixture(scope="module")
def sse_server(witness: Witness) -> Iterator[Any]:
    with _http(witness, "sse") as server:
        yield server


CASES = [
    "stdio-legacy",
    "stdio-modern",
    "http-legacy",
    "http-modern",
    "http-json-legacy",
    "http-json-modern",
    "sse-legacy",
]


@pytest.fixture(params=CASES)
def place(request: Any, witness: Witness) -> Place:
    kind, era = request.param.rsplit("-", 1)
    if kind == "stdio":
        target: Any = [sys.executable, SERVER, "--witness", str(witness.port), "stdio"]
    else:
        fixture = {"http": "http_server", "http-json": "http_json_server", "sse": "sse_server"}
        target = request.getfixturevalue(fixture[kind]).url
    return Place(request.param, target, era, sees_cancel=request.param != "http-json-modern")


def connect(place: Place) -> mcpsync.Session:
    session = mcpsync.Session.connect(
        place.target, era=place.era, timeout=WAIT, connect_timeout=60, _caches=Caches()
    )
    assert session.era == place.era, session.era_reason
    return session


def test_submits_return_at_once_and_overlap(place: Place, no_leaks: None) -> None:
    with connect(place) as s:
        started = time.monotonic()
        futures = [s.submit_call_tool("nap", {"seconds": 1, "tag": f"{place.name}-{n}"})
                   for n in range(3)]  # fmt: skip
        submitted = time.monotonic() - started
        results = [f.result(WAIT) for f in futures]
        took = time.monotonic() - started
        print(f"{place.name}: 3 submits {submitted:.3f} s, all answered {took:.2f} s")
        assert submitted < AT_ONCE, f"3 submit_call_tool took {submitted:.2f} s"
        assert [r.content[0].text for r in results] == ["slept 1 s"] * 3
        assert took < 2.0, f"three 1 s calls took {took:.2f} s: they did not overlap"


def test_cancel_tells_the_server(place: Place, witness: Witness, no_leaks: None) -> None:
    tag = f"{place.name}-cancel"
    with connect(place) as s:
        started = time.monotonic()
        future = s.submit_call_tool("nap", {"seconds": 30, "tag": tag})
        assert time.monotonic() - started < AT_ONCE
        assert witness.wait_for(f"started {tag}"), "the server never started the call"
        started = time.monotonic()
        assert future.cancel() is True
        took = time.monotonic() - started
        print(f"{place.name}: cancel() {took:.3f} s")
        assert took < AT_ONCE
        assert future.cancelled()
        if place.sees_cancel:
            assert witness.wait_for(f"cancelled {tag}"), "the server was not told"
        # the session goes on working, and a new call is answered at once
        started = time.monotonic()
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"
        assert time.monotonic() - started < 5
        assert not witness.seen(f"done {tag}")


def test_every_submit_returns_a_future_at_once(place: Place, no_leaks: None) -> None:
    with connect(place) as s:
        started = time.monotonic()
        futures = {
            "ping": s.submit_ping(),
            "tools": s.submit_list_tools(),
            "call": s.submit_call_tool("echo", {"message": "hi"}),
            "resources": s.submit_list_resources(),
            "templates": s.submit_list_resource_templates(),
            "read": s.submit_read_resource("demo://readme"),
            "prompts": s.submit_list_prompts(),
            "prompt": s.submit_get_prompt("greet", {"name": "Ada"}),
            "complete": s.submit_complete({"type": "ref/prompt", "name": "greet"}, "name", "A"),
        }
        submitted = time.monotonic() - started
        done = {name: f.result(WAIT) for name, f in futures.items()}
        assert submitted < AT_ONCE, f"nine submits took {submitted:.2f} s"
        assert "nap" in {t.name for t in done["tools"]}
        assert done["call"].content[0].text == "hi"
        assert "demo://readme" in {str(r.uri) for r in done["resources"]}
        assert done["read"].contents[0].text.startswith("# SDK test server")
        assert "greet" in {p.name for p in done["prompts"]}
        assert "Ada" in done["prompt"].messages[0].content.text
        assert "Ada" in done["complete"].completion.values


def test_legacy_sse_submit_does_not_wait_for_the_posts_answer(no_leaks: None) -> None:
    """Legacy HTTP+SSE: the reply comes on the stream, but the POST itself waits for the
    server's 202; a server that holds it must not hold the caller of ``submit_*``."""
    from test_legacy_sse_transport import LegacyServer

    release = threading.Event()

    class Holding(LegacyServer):
        def handle(self, req: Any) -> None:
            if req.method == "POST" and req.json().get("method") == "tools/call":
                release.wait(WAIT)  # the 202 is held until the test lets it go
            super().handle(req)

    with Holding() as server:
        with mcpsync.Session.connect(server.url, transport="sse", timeout=WAIT) as s:
            started = time.monotonic()
            future = s.submit_call_tool("echo", {"message": "held"})
            took = time.monotonic() - started
            release.set()
            assert future.result(WAIT).content[0].text == "held"
            print(f"legacy SSE, 202 held: submit returned after {took:.3f} s")
            assert took < AT_ONCE


# -- with a restart policy: a future made while the server is being restarted ---------------


def restarting_session(calls: list[str]) -> tuple[mcpsync.Session, Any, threading.Event]:
    """A session over scripted servers (``test_restart.Fakes``) whose restart's bring-up
    waits for the test (``release``); ``calls`` gets the tools each new server ran."""
    from test_restart import Fakes

    def echo(message: dict[str, Any]) -> dict[str, Any]:
        calls.append(message["params"]["arguments"]["message"])
        return {"content": [{"type": "text", "text": message["params"]["arguments"]["message"]}]}

    fakes = Fakes(handlers={"tools/call": echo})
    release, making = threading.Event(), threading.Event()
    first = fakes()

    def slow_make() -> Any:
        making.set()  # only the restart calls it (connect got the first one itself)
        release.wait(WAIT)
        return fakes()

    session = mcpsync.Session.connect(
        first, restart=mcpsync.RestartPolicy(make_transport=slow_make, backoff=0),
        timeout=WAIT, connect_timeout=5, _caches=Caches(), era="legacy",
    )  # fmt: skip
    fakes.crash(0)
    assert making.wait(WAIT), "the restart did not begin"
    return session, fakes, release


def test_a_future_made_during_a_restart_returns_at_once(no_leaks: None) -> None:
    calls: list[str] = []
    s, _, release = restarting_session(calls)
    try:
        started = time.monotonic()
        future = s.submit_call_tool("echo", {"message": "later"})
        took = time.monotonic() - started
        cancelled = s.submit_call_tool("echo", {"message": "never"})
        assert cancelled.cancel() is True
        print(f"submit while restarting: {took:.3f} s")
        assert took < AT_ONCE and not future.done()
        release.set()
        assert future.result(WAIT).content[0].text == "later"
        assert calls == ["later"]  # the cancelled one was never sent
    finally:
        release.set()
        s.close()


def test_a_future_made_during_a_restart_keeps_its_timeout(no_leaks: None) -> None:
    calls: list[str] = []
    s, _, release = restarting_session(calls)
    try:
        started = time.monotonic()
        future = s.submit_call_tool("echo", {"message": "late"}, timeout=0.5)
        assert time.monotonic() - started < AT_ONCE
        with pytest.raises(mcpsync.RequestTimeout, match="still being restarted"):
            future.result(WAIT)
        took = time.monotonic() - started
        print(f"timeout 0.5 while restarting: RequestTimeout after {took:.2f} s")
        assert took < 0.5 + 0.5
        release.set()
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"
        assert calls == ["after"]  # the timed-out one was never sent
    finally:
        release.set()
        s.close()
