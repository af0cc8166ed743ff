"""The fast path of the HTTP transports: a keep-alive pool of ``http.client`` connections.

Owns: ``_FastPool`` (one origin, HTTP or HTTPS, TLS set up as requests would), the
response object it returns (``_FastReply``: gzip/deflate, connection given back once read),
stale-socket detection, headers and a small body in one write (``_OneWrite``), and
``_Buffered`` (a response over content a hook already read).
Measured: ``requests.Session.post`` or urllib3 cost more per call than the whole exchange.
"""

from __future__ import annotations

import collections
import http.client
import io
import os
import select
import socket
import ssl
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import requests

from .fastresponse import FastResponse

__all__ = ["_FastPool", "_FastReply", "_Buffered", "_ConnectTimeout"]


class _Buffered:
    """A response-like object over content a response hook already read."""

    def __init__(self, response: requests.Response) -> None:
        self.status = response.status_code
        self.headers = response.headers
        self._body = io.BytesIO(response.content)

    def read(self, amt: int | None = None, decode_content: bool = True) -> bytes:
        return self._body.read(amt)

    def read1(self, amt: int = -1, decode_content: bool = True) -> bytes:
        return self._body.read1(amt)

    def close(self) -> None:
        self._body.close()

    def release_conn(self) -> None:
        pass


class _FastReply:
    """An ``http.client`` response from the fast pool, with the urllib3-style methods we use.

    Gives its connection back to the pool once the body was read to the end (and the
    server did not ask to close it); decodes gzip/deflate bodies.
    """

    __slots__ = (
        "status",
        "headers",
        "_response",
        "_original_response",
        "_conn",
        "_pool",
        "_decoder",
    )

    def __init__(
        self, response: http.client.HTTPResponse, conn: http.client.HTTPConnection, pool: _FastPool
    ) -> None:
        self.status = response.status
        self.headers = response.msg  # case-insensitive get()
        self._response = response
        self._original_response = response  # for requests' cookie extraction
        self._conn: http.client.HTTPConnection | None = conn
        self._pool = pool
        encoding = response.msg.get("content-encoding", "").strip().lower()
        self._decoder = None
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj()

    @property
    def connection(self) -> http.client.HTTPConnection | None:
        return self._conn

    def read(self, amt: int | None = None, decode_content: bool = True) -> bytes:
        data = self._response.read(amt) if amt is not None else self._response.read()
        if self._response.isclosed():
            self.release_conn()
        return self._decoder.decompress(data) if self._decoder is not None and data else data

    def read1(self, amt: int = -1, decode_content: bool = True) -> bytes:
        while True:
            data = self._response.read1(amt)
            if not data:
                self.release_conn()
                return data
            if self._decoder is None:
                return data
            data = self._decoder.decompress(data)
            if data:  # else: a compressed piece that decoded to nothing yet; read on
                return data

    def release_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._response.isclosed() and not self._response.will_close:
            self._pool.put(conn)
        else:
            conn.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        self._response.close()
        if conn is not None:
            conn.close()


class _FastPool:
    """Keep-alive ``http.client`` connections to one origin (HTTP or HTTPS).

    Configured from what the requests session would use (verify, CA bundle, client
    certificate); picked only when nothing else of requests applies. A pooled connection
    the server has closed is detected (readable while idle) and replaced before use.
    """

    def __init__(
        self,
        origin: tuple[str, str, int],
        *,
        connect_timeout: float | None,
        verify: bool | str,
        cert: str | tuple[str, str] | None,
        maxsize: int = 10,
    ) -> None:
        self.scheme, self.host, self.port = origin
        self.connect_timeout = connect_timeout
        self.maxsize = maxsize
        self._idle: collections.deque[http.client.HTTPConnection] = collections.deque()
        self.closed = False
        self._context: ssl.SSLContext | None = None
        if self.scheme == "https":
            self._context = _ssl_context(verify, cert)

    def _new(self) -> http.client.HTTPConnection:
        if self._context is not None:
            return _HTTPSConnection(
                self.host, self.port, timeout=self.connect_timeout, context=self._context
            )
        return _HTTPConnection(self.host, self.port, timeout=self.connect_timeout)

    def get(self) -> http.client.HTTPConnection:
        idle = self._idle
        while True:
            try:
                conn = idle.pop()
            except IndexError:
                return self._new()
            sock = conn.sock
            if sock is not None and not _readable(sock):
                return conn
            conn.close()  # the server closed it (or sent junk) while idle

    def put(self, conn: http.client.HTTPConnection) -> None:
        if not self.closed and len(self._idle) < self.maxsize:
            self._idle.append(conn)
            if self.closed:  # close() ran meanwhile: do not keep it
                self.close()
        else:
            conn.close()

    def urlopen(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None,
        read_timeout: float | None,
        on_sent: Callable[[], None] | None = None,
    ) -> _FastReply:
        """One request on a pooled connection; ``on_sent`` runs once it is written, before
        its reply is read."""
        conn = self.get()
        try:
            if conn.sock is None:
                try:
                    conn.connect()  # bounded by connect_timeout
                except TimeoutError as exc:
                    raise _ConnectTimeout() from exc
            if conn.timeout != read_timeout:
                conn.timeout = read_timeout
                conn.sock.settimeout(read_timeout)
            conn.request(method, path, body, headers)
            if _QUICKACK is not None:
                # ACK the reply at once: a server without TCP_NODELAY that writes headers
                # and body separately would otherwise stall ~40 ms on our delayed ACK.
                conn.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            if on_sent is not None:
                on_sent()
            response = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        return _FastReply(response, conn, self)

    def close(self) -> None:
        self.closed = True
        while self._idle:
            try:
                self._idle.pop().close()
            except IndexError:
                break


_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only
#: a body up to this size goes out in the same write as the headers
_ONE_WRITE = 64 * 1024


class _OneWrite:
    """Headers and a small body in one ``send``: ``http.client`` writes them separately,
    two system calls and two TCP segments per request (the server wakes for each)."""

    _buffer: list[bytes]
    send: Any

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if type(message_body) is bytes and len(message_body) <= _ONE_WRITE and not encode_chunked:
            self._buffer.extend((b"", b""))
            data = b"\r\n".join(self._buffer) + message_body
            del self._buffer[:]
            self.send(data)
            return
        super()._send_output(message_body, encode_chunked)  # type: ignore[misc]


class _HTTPConnection(_OneWrite, http.client.HTTPConnection):
    response_class = FastResponse  # the header fields without email.parser (fastresponse)


class _HTTPSConnection(_OneWrite, http.client.HTTPSConnection):
    response_class = FastResponse


class _ConnectTimeout(TimeoutError):
    """Connecting (not reading) timed out."""


def _readable(sock: socket.socket) -> bool:
    """True if an idle socket has something to read: EOF (closed by the peer) or junk."""
    try:
        if _poll is not None:  # poll: no FD_SETSIZE limit
            poller = _poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


_poll = getattr(select, "poll", None)


def _ssl_context(verify: bool | str, cert: str | tuple[str, str] | None) -> ssl.SSLContext:
    """An SSL context with requests' semantics for ``verify`` and ``cert``."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        bundle = verify if isinstance(verify, str) else requests.utils.DEFAULT_CA_BUNDLE_PATH
        if os.path.isdir(bundle):
            context = ssl.create_default_context(capath=bundle)
        else:
            context = ssl.create_default_context(cafile=bundle)
    if cert:
        if isinstance(cert, (tuple, list)):
            context.load_cert_chain(cert[0], cert[1])
        else:
            context.load_cert_chain(cert)
    return context
