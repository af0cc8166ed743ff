"""The fast pool's sockets and request heads, against a raw loopback server.

Plain HTTP on Linux goes over blocking sockets with the kernel's timeouts (no ``poll``
before each send and recv, which would release the GIL for nothing with many threads):
a server that stalls in the head, in the body or by not reading still ends the request
with a timeout, never as "the server closed the connection"; an idle connection the
server closed or sent junk on is replaced (checked with ``TCP_INFO``); the request head
built once per header set is the one ``http.client`` would send, validated as it
validates, with per-request (credential) fields never cached; 8 threads on one pool each
get their own reply.
"""

from __future__ import annotations

import json
import select
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcpsync.errors import RequestTimeout
from mcpsync.transports.http.fastpool import _FastPool
from mcpsync.transports.http.streamable import StreamableHTTPTransport

linux = pytest.mark.skipif(sys.platform != "linux", reason="kernel timeouts: Linux only")

Handler = Callable[[socket.socket, bytes, bytes, int], bool]


def _read_request(conn: socket.socket, buffer: bytearray) -> tuple[bytes, bytes] | None:
    """One request (head, body) from ``conn``; None at EOF."""
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    buffer[:] = rest[length:]
    return head, rest[:length]


class RawServer:
    """Accepts on 127.0.0.1; ``handler(conn, head, body, index)`` answers each request
    (False: close the connection). Records each request's head and client port."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.heads: list[bytes] = []
        self.ports: list[int] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, name="test-raw-accept", daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, address = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            thread = threading.Thread(
                target=self._serve, args=(conn, address[1]), name="test-raw-conn", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, port: int) -> None:
        buffer = bytearray()
        try:
            while not self.stop.is_set():
                request = _read_request(conn, buffer)
                if request is None:
                    return
                head, body = request
                with self._lock:
                    self.heads.append(head)
                    self.ports.append(port)
                    index = len(self.heads) - 1
                if not self.handler(conn, head, body, index):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
        except OSError:
            pass
        self.listener.close()
        with self._lock:
            for conn in self._conns:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._accepter.join(5)
        for thread in self._threads:
            thread.join(5)


def _reply(conn: socket.socket, body: bytes) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    )


def _echo(conn: socket.socket, head: bytes, body: bytes, index: int) -> bool:
    _reply(conn, body or b"{}")
    return True


@pytest.fixture
def raw() -> Iterator[Callable[[Handler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        server = RawServer(handler)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _pool(server: RawServer) -> _FastPool:
    return _FastPool(("http", "127.0.0.1", server.port), connect_timeout=5, verify=True, cert=None)


def _fields(head: bytes) -> list[tuple[str, str]]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return [(n.strip().lower(), v.strip()) for n, _, v in (line.partition(":") for line in lines)]


def _transport(
    server: RawServer, timeout: float, on_message: Callable[[Any], None] = lambda m: None
) -> StreamableHTTPTransport:
    transport = StreamableHTTPTransport(
        f"http://127.0.0.1:{server.port}/mcp", timeout=timeout, back_channel=False, name="t"
    )
    transport.start(on_message, lambda error: None)
    return transport


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.mark.parametrize("stall", ["head", "body"])
def test_a_stalled_reply_is_a_timeout_not_a_closed_connection(no_leaks, raw, stall):
    release = threading.Event()

    def handler(conn: socket.socket, head: bytes, body: bytes, index: int) -> bool:
        if stall == "body":  # the head and part of the body, then nothing
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            conn.sendall(b"Content-Length: 100\r\n\r\n" + b'{"jsonrpc":')
        release.wait(10)
        return False

    server = raw(handler)
    transport = _transport(server, timeout=0.3)
    try:
        assert transport._http.fast
        with pytest.raises(RequestTimeout):
            transport.send(PING)
    finally:
        release.set()
        transport.close()


def test_a_server_that_does_not_read_ends_the_send_with_a_timeout(no_leaks):
    release = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept_and_never_read() -> None:
        conn, _ = listener.accept()
        held.append(conn)
        release.wait(30)
        conn.close()

    acceptor = threading.Thread(target=accept_and_never_read, name="test-deaf", daemon=True)
    acceptor.start()
    transport = StreamableHTTPTransport(
        f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", timeout=0.3, back_channel=False
    )
    transport.start(lambda message: None, lambda error: None)
    big = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"x": "y" * 32_000_000}}
    try:
        with pytest.raises(RequestTimeout):  # the socket buffers fill, then nothing moves
            transport.send(big)
    finally:
        release.set()
        transport.close()
        acceptor.join(10)
        listener.close()


@linux
def test_an_idle_connection_the_server_closed_is_replaced(raw):
    closed = threading.Event()

    def handler(conn: socket.socket, head: bytes, body: bytes, index: int) -> bool:
        _reply(conn, b'{"n": %d}' % index)
        if index == 0:  # keep-alive by the headers, and yet closed right after
            conn.shutdown(socket.SHUT_WR)
            closed.set()
            return False
        return True

    server = raw(handler)
    pool = _pool(server)
    try:
        first = pool.urlopen("POST", "/mcp", {}, b"{}", read_timeout=5)
        assert json.loads(first.read()) == {"n": 0}
        assert closed.wait(5)
        (idle,) = pool._idle
        assert select.select([idle.sock], [], [], 5)[0]  # the FIN is here
        second = pool.urlopen("POST", "/mcp", {}, b"{}", read_timeout=5)
        assert json.loads(second.read()) == {"n": 1}
        assert len(set(server.ports)) == 2  # a new connection, the closed one dropped
    finally:
        pool.close()


@linux
def test_an_idle_connection_the_server_sent_junk_on_is_replaced(raw):
    def handler(conn: socket.socket, head: bytes, body: bytes, index: int) -> bool:
        _reply(conn, b'{"n": %d}' % index)
        return True

    server = raw(handler)
    pool = _pool(server)
    try:
        first = pool.urlopen("POST", "/mcp", {}, b"{}", read_timeout=5)
        assert json.loads(first.read()) == {"n": 0}
        (idle,) = pool._idle
        with server._lock:
            (server_side,) = server._conns
        server_side.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\njunk!")  # unasked
        assert select.select([idle.sock], [], [], 5)[0]
        second = pool.urlopen("POST", "/mcp", {}, b"{}", read_timeout=5)
        assert json.loads(second.read()) == {"n": 1}  # not the junk "reply"
        assert len(set(server.ports)) == 2
        third = pool.urlopen("POST", "/mcp", {}, b"{}", read_timeout=5)
        assert json.loads(third.read()) == {"n": 2}
        assert len(set(server.ports)) == 2  # a clean idle connection is reused
    finally:
        pool.close()


def test_the_cached_head_is_what_http_client_sends_and_per_request_fields_are_not_cached(raw):
    server = raw(_echo)
    pool = _pool(server)
    base = {"Content-Type": "application/json", "X-Custom": "one"}
    try:
        for i in range(3):
            reply = pool.urlopen(
                "POST", "/mcp?a=1", base, b'{"i": %d}' % i, 5, extra={"DPoP": f"proof-{i}"}
            )
            assert json.loads(reply.read()) == {"i": i}
        other = pool.urlopen("POST", "/mcp", {**base, "X-Custom": "two"}, b"{}", 5)
        other.read()
        get = pool.urlopen("GET", "/mcp", {"Accept": "text/event-stream"}, None, 5)
        get.read()
    finally:
        pool.close()
    host = f"127.0.0.1:{server.port}"
    for i in range(3):
        assert server.heads[i].split(b"\r\n")[0] == b"POST /mcp?a=1 HTTP/1.1"
        assert sorted(_fields(server.heads[i])) == sorted(
            [
                ("host", host),
                ("accept-encoding", "identity"),
                ("content-type", "application/json"),
                ("x-custom", "one"),
                ("dpop", f"proof-{i}"),  # each request its own: never re-sent
                ("content-length", str(len(b'{"i": %d}' % i))),
            ]
        )
    assert ("x-custom", "two") in _fields(server.heads[3])
    assert server.heads[4].split(b"\r\n")[0] == b"GET /mcp HTTP/1.1"
    assert "content-length" not in dict(_fields(server.heads[4]))


def test_head_validation_holds_on_every_request_and_callers_framing_is_kept(raw):
    server = raw(_echo)
    pool = _pool(server)
    try:
        for _ in range(2):  # a bad header never lands in the cache
            with pytest.raises(ValueError):
                pool.urlopen("POST", "/mcp", {"X-Bad": "a\r\nInjected: 1"}, b"{}", 5)
        with pytest.raises(ValueError) as info:  # a credential field: its value never shown
            pool.urlopen("POST", "/mcp", {}, b"{}", 5, extra={"DPoP": "secret\nInjected: 1"})
        assert "DPoP" in str(info.value) and "secret" not in str(info.value)
        given = pool.urlopen(
            "POST", "/mcp", {"Content-Length": "2", "Host": "example.test"}, b"{}", 5
        )
        assert json.loads(given.read()) == {}
    finally:
        pool.close()
    assert all(b"Injected" not in head for head in server.heads)
    fields = _fields(server.heads[-1])
    assert fields.count(("content-length", "2")) == 1 and ("host", "example.test") in fields


def test_eight_threads_on_one_pool_each_read_their_own_reply(raw):
    server = raw(_echo)
    pool = _pool(server)
    errors: list[str] = []
    start = threading.Barrier(8)

    def run(i: int) -> None:
        try:
            start.wait(10)
            for n in range(100):
                body = json.dumps({"t": i, "n": n}).encode()
                reply = pool.urlopen("POST", "/mcp", {"Content-Type": "application/json"}, body, 5)
                got = json.loads(reply.read())
                if got != {"t": i, "n": n}:
                    errors.append(f"thread {i} call {n}: got {got}")
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(repr(exc))

    threads = [threading.Thread(target=run, args=(i,), name=f"test-caller[{i}]") for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    pool.close()
    assert errors == [] and len(server.heads) == 800
    assert len(set(server.ports)) <= 8  # connections reused, at most one per thread at once


def test_connection_close_and_chunked_replies_are_read_whole(raw):
    def handler(conn: socket.socket, head: bytes, body: bytes, index: int) -> bool:
        if index == 0:  # the body is read after http.client let go of the connection
            payload = b'{"close": true, "pad": "' + b"p" * 20000 + b'"}'
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(payload)
            )
            conn.sendall(payload)
            return False
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'{"chunked": ', b"true}"):
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        conn.sendall(b"0\r\n\r\n")
        return True

    server = raw(handler)
    pool = _pool(server)
    try:
        first = pool.urlopen("POST", "/mcp", {}, b"{}", read_timeout=5)
        assert json.loads(first.read())["close"] is True
        assert list(pool._idle) == []  # not kept: the server said close
        second = pool.urlopen("POST", "/mcp", {}, b"{}", read_timeout=5)
        assert json.loads(second.read()) == {"chunked": True}
        assert len(pool._idle) == 1 and len(set(server.ports)) == 2
    finally:
        pool.close()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_ctrl_c_in_a_blocked_read_interrupts_it_and_the_transport_goes_on(no_leaks, raw):
    arrived = threading.Event()
    release = threading.Event()

    def handler(conn: socket.socket, head: bytes, body: bytes, index: int) -> bool:
        if b'"stall"' in body:
            arrived.set()
            release.wait(30)
            return False
        _reply(conn, b'{"jsonrpc": "2.0", "id": 2, "result": {}}')
        return True

    def interrupt() -> None:
        if arrived.wait(20):  # the request is on the wire; the caller blocks in its read
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]

    server = raw(handler)
    seen: list[Any] = []
    transport = _transport(server, timeout=30, on_message=seen.append)
    helper = threading.Thread(target=interrupt, name="test-ctrl-c", daemon=True)
    helper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            transport.send({"jsonrpc": "2.0", "id": 1, "method": "stall"})
        release.set()
        transport.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert seen == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    finally:
        release.set()
        helper.join(20)
        transport.close()
