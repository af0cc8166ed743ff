"""Cookies on the fast HTTP path: a server's ``Set-Cookie`` goes into the session's jar and
each later request carries the jar's ``Cookie`` header for its URL (domain, path, expiry
by ``http.cookiejar``), still over the pooled connections, so a session behind a
load balancer with sticky sessions keeps the fast path, and ``close()`` still ends the
calls other threads wait in at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from servers.launch import tasks_http

import mcpsync
from mcpsync.errors import SessionClosed
from mcpsync.transports.http.client import HTTPClient, Target, discard
from mcpsync.transports.http.requestauth import RequestAuth

#: what each path's reply sets
SETS = {
    "/set": ["a=1; Path=/", "scoped=2; Path=/other"],
    "/expire": ["a=; Max-Age=0; Path=/"],
    "/secure": ["s=3; Path=/; Secure"],
}


@pytest.fixture
def cookie_server() -> Iterator[tuple[str, list[tuple[str, list[str]]], list[str | None]]]:
    """A local HTTP server that records each request's path and ``Cookie`` fields."""
    seen: list[tuple[str, list[str]]] = []
    authorizations: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append((self.path, self.headers.get_all("Cookie") or []))
            authorizations.append(self.headers.get("Authorization"))
            self.send_response(200)
            for value in SETS.get(self.path, []):
                self.send_header("Set-Cookie", value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen, authorizations
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class Bearer(RequestAuth):
    """A fixed token, as mcpsync's OAuth adds its own (the fast path with auth)."""

    def request_headers(self, method: str, url: str, state: dict[str, Any]) -> dict[str, str]:
        return {"Authorization": "Bearer t"}

    def answer(self, *args: Any) -> bool:
        return False


def _client(base: str, auth: RequestAuth | None = None) -> HTTPClient:
    return HTTPClient(
        f"{base}/mcp", headers=None, http_session=None, auth=auth,
        connect_timeout=10, verify=None, cert=None,
    )  # fmt: skip


def _post(client: HTTPClient, base: str, path: str, headers: dict[str, str] | None = None) -> None:
    response, _ = client.request("POST", Target.of(base + path), headers or {}, b"{}", 10)
    discard(response)


def test_set_cookies_are_sent_by_path_and_expire_on_the_fast_path(cookie_server):
    base, seen, _ = cookie_server
    client = _client(base)
    try:
        assert client.fast
        _post(client, base, "/mcp")
        _post(client, base, "/set")
        _post(client, base, "/mcp")
        _post(client, base, "/other")
        _post(client, base, "/secure")  # a Secure cookie from plain HTTP: not kept
        _post(client, base, "/mcp")
        _post(client, base, "/expire")
        _post(client, base, "/mcp")
        assert client.fast  # the cookies did not move the session off the pooled path
    finally:
        client.close()
    assert seen == [
        ("/mcp", []),
        ("/set", []),
        ("/mcp", ["a=1"]),
        ("/other", ["scoped=2; a=1"]),  # the longer path first, as http.cookiejar orders
        ("/secure", ["a=1"]),
        ("/mcp", ["a=1"]),
        ("/expire", ["a=1"]),
        ("/mcp", []),
    ]


def test_the_callers_own_cookie_header_is_sent_as_it_is(cookie_server):
    base, seen, _ = cookie_server
    client = _client(base)
    try:
        _post(client, base, "/set")
        _post(client, base, "/mcp", {"cookie": "mine=1"})
        _post(client, base, "/mcp")
    finally:
        client.close()
    assert seen[1:] == [("/mcp", ["mine=1"]), ("/mcp", ["a=1"])]


def test_cookies_ride_with_a_request_auth_on_the_fast_path(cookie_server):
    base, seen, authorizations = cookie_server
    client = _client(base, Bearer())
    try:
        assert client.fast
        _post(client, base, "/set")
        _post(client, base, "/mcp")
        assert client.fast
    finally:
        client.close()
    assert seen == [("/set", []), ("/mcp", ["a=1"])]
    assert authorizations == ["Bearer t", "Bearer t"]


@pytest.fixture
def sticky_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The on-disk tasks server over HTTP behind a "sticky" balancer: the first reply sets
    a cookie, and from then on a request without it is refused (403)."""
    with tasks_http(tmp_path, "--sticky") as url:
        yield url, tmp_path


def _calls(store: Path, tool: str) -> int:
    lines = [
        line for log in store.glob("requests-*.jsonl") for line in log.read_text().splitlines()
    ]
    return sum(f'"name": "{tool}"' in line for line in lines)


def test_a_session_behind_a_sticky_balancer_keeps_the_fast_path_and_close_cuts_its_calls(
    no_leaks, sticky_server
):
    url, store = sticky_server
    session = mcpsync.Session.connect(url, timeout=60)  # a read timeout far beyond the test
    try:
        assert session.call_tool("quick", {"message": "hi"}).content[0].text
        assert [t.name for t in session.list_tools()]  # each with the cookie, or a 403
        http = session.connection.transport._http
        assert http.fast and [c.name for c in http.session.cookies] == ["lb"]
        failed: list[BaseException] = []
        ended = threading.Event()

        def held() -> None:
            try:
                session.call_tool("quick", {"message": "x", "hold": str(store / "never")})
            except BaseException as exc:  # noqa: BLE001 - checked below
                failed.append(exc)
            ended.set()

        thread = threading.Thread(target=held)
        thread.start()
        pause = threading.Event()
        deadline = time.monotonic() + 30
        while _calls(store, "quick") < 2 and time.monotonic() < deadline:
            pause.wait(0.01)  # the server read the held call
        assert _calls(store, "quick") == 2
        closed_at = time.monotonic()
        session.close()
        assert ended.wait(10), "close() did not end the held call"
        took = time.monotonic() - closed_at
        thread.join(10)
        assert len(failed) == 1 and isinstance(failed[0], SessionClosed), failed
        assert took < 10
    finally:
        session.close()
