"""The HTTP fast path writes a request's headers and a small body in one send (http.client
writes them apart: two system calls, two TCP segments, the server woken twice), a large
body still apart, and the server receives the same request either way."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mcpsync.transports.http.fastpool import _FastPool


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        reply = json.dumps({"length": len(body), "last": body[-10:].decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=httpd.serve_forever, name="test-echo-http", daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


class _Counting:
    """A socket that records each send and sendall, what each wrote (and otherwise is
    the socket)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.sends: list[bytes] = []

    def sendall(self, data: Any) -> None:
        self.sends.append(bytes(data))
        self._sock.sendall(data)

    def send(self, data: Any) -> int:
        count = self._sock.send(data)
        self.sends.append(bytes(data[:count]))
        return count

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _post(pool: _FastPool, body: bytes) -> tuple[dict[str, Any], list[bytes]]:
    conn = pool.get()
    conn.connect()
    counting = _Counting(conn.sock)
    conn.sock = counting  # type: ignore[assignment]
    pool.put(conn)
    reply = pool.urlopen(
        "POST", "/mcp", {"Content-Type": "application/json"}, body, read_timeout=10
    )
    assert reply.status == 200
    return json.loads(reply.read()), counting.sends


def test_a_small_body_goes_out_with_its_headers_in_one_send(server):
    pool = _FastPool(("http", *server), connect_timeout=5, verify=True, cert=None)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "y" * 100}).encode()
        answer, sends = _post(pool, body)
        assert answer == {"length": len(body), "last": body[-10:].decode()}
        assert len(sends) == 1
        head, _, rest = sends[0].partition(b"\r\n\r\n")
        assert head.startswith(b"POST /mcp HTTP/1.1\r\n")
        assert f"content-length: {len(body)}".encode() in head.lower()
        assert rest == body
    finally:
        pool.close()


def test_a_large_body_is_sent_apart_and_arrives_whole(server):
    pool = _FastPool(("http", *server), connect_timeout=5, verify=True, cert=None)
    try:
        body = b'{"data": "' + b"z" * 200_000 + b'"}'
        answer, sends = _post(pool, body)
        assert answer == {"length": len(body), "last": body[-10:].decode()}
        assert len(sends) >= 2 and b"".join(sends).endswith(body)
        assert sends[0].endswith(b"\r\n\r\n")  # the headers alone first
    finally:
        pool.close()


def test_a_close_while_connecting_sends_nothing_and_fails_at_once(server, monkeypatch):
    """``close()`` shuts down the sockets of the requests under way; a connection still being
    made has none yet. Its request must then not go out (it would wait for its reply until
    the read timeout, uncut): the pool refuses it as soon as the connection is made."""
    from mcpsync.transports.http import fastpool

    pool = _FastPool(("http", *server), connect_timeout=5, verify=True, cert=None)
    real_connect = fastpool._Conn.connect
    sent: list[bytes] = []

    def connect_while_closed(conn: Any) -> None:
        pool.close()  # another thread's close() lands while this connect is under way
        real_connect(conn)
        conn.sock = _Counting(conn.sock)  # type: ignore[assignment]
        sent.append(b"")  # connected
        conn.sock.sends = sent  # type: ignore[attr-defined]

    monkeypatch.setattr(fastpool._Conn, "connect", connect_while_closed)
    with pytest.raises(ConnectionError, match="pool is closed"):
        pool.urlopen("POST", "/mcp", {"Content-Type": "application/json"}, b"{}", read_timeout=60)
    assert sent == [b""]  # connected, and not one byte of the request written
    assert not pool._busy  # the connection was closed and let go
