"""The fast path of the HTTP transports: a keep-alive pool of ``http.client`` connections.

Owns: ``_FastPool`` (one origin, HTTP or HTTPS, TLS set up as requests would), the
response object it returns (``_FastReply``: gzip/deflate, connection given back once read),
stale-socket detection, the proof that a request on a reused connection that turned out
dead never reached the server (``_Undelivered``: the caller sends it once more), the
request head (built and validated by ``http.client`` once per distinct set of headers,
then taken from the pool's cache) sent with a small body in one write (``_Conn``), the
request's deadline carried by its connection (``_Conn.deadline``: writing the request and
reading its reply whole end by it; the sockets' set-up and that bound are ``fastsocket``'s),
``close`` (the held connections shut
down: a call waiting for its reply fails at once), and ``_Buffered`` (a response over
content a hook already read).
Measured: ``requests.Session.post`` or urllib3 cost more per call than the whole exchange.

Many threads on one pool: each caller takes its own connection, writes its request and
reads its own reply on it (no thread hop, no lock: the idle deque is thread-safe). What
costs with several threads is every release of the GIL: a thread that releases it for a
system call that returns at once wakes a thread waiting for it, for nothing. So on Linux a
plain-HTTP connection is a blocking socket whose read and write timeouts are the kernel's
(``SO_RCVTIMEO``/``SO_SNDTIMEO``): one ``send`` and one ``recv`` per call, without the
``poll`` that Python puts before each operation on a socket with a timeout; and an idle
connection is checked with ``TCP_INFO`` (state, bytes received since it was put back),
which does not release the GIL, rather than with ``poll``. (TLS keeps Python's timeouts:
its reads on a blocking socket would retry a kernel timeout for ever.)
"""

from __future__ import annotations

import collections
import http.client
import io
import select
import socket
import ssl
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import requests

from .fastresponse import INFO_LEN, FastResponse, HeadLost, tcp_info
from .fastsocket import keep_alive, keep_within, send_within, set_timeouts, ssl_context

__all__ = ["_FastPool", "_FastReply", "_Buffered", "_ConnectTimeout", "_Conn", "_Undelivered"]


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
        "status", "headers", "_response", "_original_response", "_conn", "_pool", "_decoder",
    )  # fmt: skip

    def __init__(self, response: http.client.HTTPResponse, conn: _Conn, pool: _FastPool) -> None:
        self.status = response.status
        self.headers = response.msg  # case-insensitive get()
        self._response = response
        self._original_response = response  # for requests' cookie extraction
        self._conn: _Conn | None = conn
        self._pool = pool
        encoding = response.msg.get("content-encoding", "").strip().lower()
        self._decoder = None
        if encoding in ("gzip", "x-gzip"):
            self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._decoder = zlib.decompressobj()

    @property
    def connection(self) -> _Conn | None:
        return self._conn

    def read(self, amt: int | None = None, decode_content: bool = True) -> bytes:
        try:
            data = self._response.read(amt) if amt is not None else self._response.read()
        except BaseException:  # a timeout, a reset, a Ctrl-C: the connection is done for
            self.close()
            raise
        if self._response.isclosed():
            self.release_conn()
        return self._decoder.decompress(data) if self._decoder is not None and data else data

    def read1(self, amt: int = -1, decode_content: bool = True) -> bytes:
        while True:
            try:
                data = self._response.read1(amt)
            except BaseException:  # as in read()
                self.close()
                raise
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
    the server has closed or sent something on while it was idle is detected and replaced
    before use. Thread-safe without a lock: each caller takes a connection of its own.
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
        self._idle: collections.deque[_Conn] = collections.deque()
        self._busy: set[_Conn] = set()  # the ones callers hold: ``close`` ends their reads
        self.closed = False  # no connection is kept any more (``retire``)
        self.aborted = False  # and the held ones were cut (``close``): no new one is made
        self._context: ssl.SSLContext | None = None
        if self.scheme == "https":
            self._context = ssl_context(verify, cert)
        #: plain HTTP on Linux: kernel timeouts on blocking sockets, TCP_INFO checks
        self._kernel = self._context is None and _TCP_INFO is not None
        #: Linux (TLS too): TCP_INFO kept when a connection goes idle (``_Undelivered``)
        self._track = _TCP_INFO is not None
        #: request heads by (method, path, header items): built by http.client once
        self._heads: dict[tuple[Any, ...], bytes] = {}

    def _new(self) -> _Conn:
        conn = (
            _HTTPSConnection(
                self.host, self.port, timeout=self.connect_timeout, context=self._context
            )
            if self._context is not None
            else _Conn(self.host, self.port, timeout=self.connect_timeout)
        )
        conn.busy = self._busy
        return conn

    def get(self) -> _Conn:
        """An idle connection still good, or a new one, held (``_busy``) until put back or
        closed; ConnectionError after ``close`` (a call it cut is not sent again)."""
        if self.aborted:
            raise ConnectionError("the connection pool is closed")
        idle = self._idle
        while True:
            try:
                conn = idle.pop()
            except IndexError:
                conn = self._new()
                break
            sock = conn.sock
            if sock is not None and not (
                _stale(sock, conn.idle_info) if conn.kernel else _readable(sock)
            ):
                break
            conn.close()  # the server closed it (or sent junk) while idle
        self._busy.add(conn)
        if self.aborted:  # close() ran since the check above and did not see this one
            conn.close()
            raise ConnectionError("the connection pool is closed")
        return conn

    def put(self, conn: _Conn) -> None:
        self._busy.discard(conn)
        if not self.closed and len(self._idle) < self.maxsize:
            if conn.track and conn.sock is not None:
                conn.idle_info = _info(conn.sock)
            self._idle.append(conn)
            if self.closed:  # retired meanwhile: do not keep it
                self.drop_idle()
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
        extra: Mapping[str, str] | None = None,
        on_conn: Callable[[Callable[[], None]], None] | None = None,
        deadline: float | None = None,
    ) -> _FastReply:
        """One request on a pooled connection; ``on_sent`` runs once it is written, before
        its reply is read. ``extra``: headers of this request only (credentials: never
        cached), after ``headers``. ``on_conn(cut)`` gets the connection's ``abort`` once it
        is connected, before the request is written. Raises ``_Undelivered`` when the
        request provably never reached the server (see there): the caller may send it once
        more. ``deadline`` (``time.monotonic()``; default: ``read_timeout`` from now) bounds
        writing the request and reading its reply whole (``fastsocket``; of an event stream,
        its head only)."""
        if deadline is None and read_timeout is not None:
            deadline = time.monotonic() + read_timeout
        conn = self.get()
        reused = conn.sock is not None  # an idle keep-alive connection (checked by get())
        try:
            if not reused:
                try:
                    conn.connect()  # bounded by connect_timeout
                except TimeoutError as exc:
                    raise _ConnectTimeout() from exc
                conn.kernel, conn.track = self._kernel, self._track
                keep_alive(conn.sock)
                if self.aborted:  # close() ran while connecting: it had no socket to shut down
                    raise ConnectionError("the connection pool is closed")
            if conn.applied != read_timeout:
                conn.apply_timeout(read_timeout)
            if on_conn is not None:
                on_conn(conn.abort)  # from now on another thread may cut this request
            conn.deadline = deadline
            try:
                keep_within(conn, conn.sock, "sending the request")
                self._send(conn, method, path, headers, body, extra)
            except BlockingIOError as exc:  # SO_SNDTIMEO: the server does not read
                raise TimeoutError("timed out") from exc
            except OSError as exc:
                if reused and not isinstance(exc, TimeoutError):
                    raise self._undelivered("writing the request failed") from exc
                raise
            if _QUICKACK is not None:
                # ACK the reply at once: a server without TCP_NODELAY that writes headers
                # and body separately would otherwise stall ~40 ms on our delayed ACK.
                conn.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            if on_sent is not None:
                on_sent()
            try:
                response = conn.getresponse()
            except HeadLost as exc:  # EOF or a reset before the status line
                if reused and _never_acked(conn.idle_info, exc.info):
                    raise self._undelivered("the server never acknowledged it") from exc
                raise
            if conn.deadline is not None and _streams(response):
                conn.deadline = None  # a stream: each read bounded by the read timeout alone
                sock = response.raw_socket() if isinstance(response, FastResponse) else None
                if conn.applied != read_timeout and sock is not None:
                    set_timeouts(sock, read_timeout, conn.kernel)
                    conn.applied = read_timeout
        except BaseException:
            conn.close()
            raise
        return _FastReply(response, conn, self)

    def _undelivered(self, why: str) -> _Undelivered:
        """A reused connection was found dead with the request: drop the other idle ones
        too (opened to the same server process, they are as likely dead, and a reset one
        may not show it), so that the caller's one re-send goes out on a new connection."""
        self.drop_idle()
        return _Undelivered(f"a reused keep-alive connection was dead ({why})")

    def _send(
        self,
        conn: _Conn,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None,
        extra: Mapping[str, str] | None,
    ) -> None:
        """The request on ``conn``: its head from the cache (built on a miss), then the body."""
        heads = self._heads
        try:
            key: tuple[Any, ...] | None = (method, path, *headers.items())
            head = heads.get(key)  # type: ignore[arg-type]
        except TypeError:  # a value that does not hash: no caching
            key, head = None, None
        if head is None:
            head = conn.build_head(method, path, headers)
            if head is None:  # Content-Length or Transfer-Encoding of the caller's
                all_headers = {**headers, **extra} if extra else headers
                conn.request(method, path, body, all_headers)
                return
            if key is not None:
                if len(heads) >= _HEADS:
                    heads.clear()
                heads[key] = head
        if extra:
            head += conn.build_fields(extra)
        conn.send_request(method, head, body)

    def drop_idle(self) -> None:
        """Close every idle connection."""
        while self._idle:
            try:
                self._idle.pop().close()
            except IndexError:
                break

    def retire(self) -> None:
        """Keep no connection any more (the idle ones closed, the held ones closed when
        given back); the requests under way go on."""
        self.closed = True
        self.drop_idle()

    def close(self) -> None:
        """``retire``, and end the reads and writes of the connections callers hold: their
        sockets are shut down (not closed: the holder closes it, so no descriptor number is
        reused under a read), so a call waiting for a reply fails at once instead of at
        its read timeout, and is not sent again."""
        self.aborted = True
        self.retire()
        for conn in list(self._busy):  # (a copy made under the GIL: callers add and discard)
            conn.abort()


_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux only
#: a body up to this size goes out in the same write as the headers
_ONE_WRITE = 64 * 1024
#: request heads a pool keeps (distinct header sets: a handful per session)
_HEADS = 64
_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None) if sys.platform == "linux" else None
_TCP_ESTABLISHED = 1
#: struct tcp_info up to tcpi_bytes_received (Linux >= 4.1), which is at offset 128;
#: tcpi_bytes_acked (bytes we sent that the peer's TCP acknowledged) is at offset 120
_INFO_LEN = INFO_LEN
_ACKED = slice(120, 128)
_RECEIVED = slice(128, 136)
_RETRANS = slice(100, 104)  # tcpi_total_retrans
_BODY_METHODS = frozenset(("POST", "PUT", "PATCH"))
_CS_IDLE = http.client._CS_IDLE  # type: ignore[attr-defined]
_CS_REQ_SENT = http.client._CS_REQ_SENT  # type: ignore[attr-defined]
_UNSET = object()
#: http.client's own checks of a header field (putheader's)
_legal_name: Callable[[bytes], Any] = http.client._is_legal_header_name  # type: ignore[attr-defined]
_illegal_value: Callable[[bytes], Any] = http.client._is_illegal_header_value  # type: ignore[attr-defined]


class _Conn(http.client.HTTPConnection):
    """An ``http.client`` connection of the fast pool (plain HTTP; ``_HTTPSConnection``:
    TLS). Adds: the request head built once and sent with a small body in one ``send``
    (``http.client`` writes them apart: two system calls and two TCP segments per
    request, the server woken for each), and the kernel's timeouts (see the module doc)."""

    #: the read timeout set on the socket (``_UNSET``: none yet)
    applied: object = _UNSET
    #: a blocking socket with kernel timeouts, checked with TCP_INFO when idle
    kernel = False
    #: TCP_INFO is kept when the connection goes idle (Linux)
    track = False
    #: the raw TCP_INFO when the connection was put back in the pool (``track``)
    idle_info = b""
    busy: set[_Conn] | None = None  # its pool's held connections: left as it closes
    #: the deadline (``time.monotonic()``) of the request it carries (``fastsocket``)
    deadline: float | None = None

    def response_class(  # type: ignore[override]
        self, sock: Any, debuglevel: int = 0, method: Any = None, url: Any = None
    ) -> FastResponse:
        """The response: header fields without email.parser; read within ``deadline``."""
        return FastResponse(sock, debuglevel, method, url, bound=self)

    def close(self) -> None:
        busy = self.busy
        if busy is not None:
            busy.discard(self)
        super().close()

    def abort(self) -> None:
        """End another thread's read or write on it (shut down both ways; the holder closes)."""
        sock = self.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # not connected (yet, or any more)
                pass

    def apply_timeout(self, timeout: float | None) -> None:
        set_timeouts(self.sock, timeout, self.kernel)
        self.timeout = timeout
        self.applied = timeout

    def build_head(self, method: str, path: str, headers: Mapping[str, str]) -> bytes | None:
        """The request line and fields as ``request()`` would send them, validated by
        ``http.client`` (Host and Accept-Encoding unless given), up to the framing; None
        when the caller sets the framing (Content-Length, Transfer-Encoding) itself."""
        names = {name.lower() for name in headers}
        if "content-length" in names or "transfer-encoding" in names:
            return None
        self.putrequest(
            method, path, skip_host="host" in names, skip_accept_encoding="accept-encoding" in names
        )
        try:
            for name, value in headers.items():
                self.putheader(name, value)
            return b"\r\n".join(self._buffer) + b"\r\n"  # type: ignore[attr-defined]
        finally:
            self._reset()

    def build_fields(self, headers: Mapping[str, str]) -> bytes:
        """Header fields checked as ``putheader`` checks them, encoded the same way; the
        error names the field, never its value (a credential, for the auth's fields)."""
        lines = []
        for name, value in headers.items():
            if type(name) is not str or type(value) is not str:
                raise TypeError(f"header {name!r}: names and values must be strings")
            raw_name, raw_value = name.encode("ascii"), value.encode("latin-1")
            if _legal_name(raw_name) is None:
                raise ValueError(f"invalid header name {name!r}")
            if _illegal_value(raw_value) is not None:
                raise ValueError(f"invalid value for header {name!r} (a line break)")
            lines.append(b"%s: %s\r\n" % (raw_name, raw_value))
        return b"".join(lines)

    def _reset(self) -> None:
        del self._buffer[:]  # type: ignore[attr-defined]
        self._HTTPConnection__state = _CS_IDLE

    def send_request(self, method: str, head: bytes, body: bytes | None) -> None:
        """Send a request whose ``head`` came from ``build_head``; then ``getresponse()``."""
        previous = self._HTTPConnection__response
        if previous is not None and previous.isclosed():
            self._HTTPConnection__response = previous = None
        if self._HTTPConnection__state != _CS_IDLE:
            raise http.client.CannotSendRequest(self._HTTPConnection__state)
        self._method = method
        self._HTTPConnection__state = _CS_REQ_SENT
        if body is None:
            send_within(
                self, head + (b"Content-Length: 0\r\n\r\n" if method in _BODY_METHODS else b"\r\n")
            )
        elif len(body) <= _ONE_WRITE:
            send_within(self, b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
        else:
            send_within(self, b"%sContent-Length: %d\r\n\r\n" % (head, len(body)))
            send_within(self, body)

    _HTTPConnection__state: str
    _HTTPConnection__response: http.client.HTTPResponse | None


class _HTTPSConnection(_Conn, http.client.HTTPSConnection):
    pass


class _ConnectTimeout(TimeoutError):
    """Connecting (not reading) timed out."""


class _Undelivered(ConnectionError):
    """The request went out on a reused idle connection that turned out dead, and it
    provably never reached the server; sending it once more, on a new connection, is safe.

    Why that is not a silent re-send of a ``tools/call`` the server may have run: a server
    can only act on a request it has read whole. Two cases prove it did not:

    - the write failed (``EPIPE``, ``ECONNRESET``): the request did not leave in full,
      and a server does not run half a request (its body is framed by Content-Length);
    - the connection ended (EOF or a reset) before a single reply byte, the server's TCP
      never acknowledged a byte of this request, and nothing of it was sent twice (Linux
      ``TCP_INFO``: ``tcpi_bytes_acked`` and ``tcpi_total_retrans`` unchanged since the
      connection was put back in the pool). A request the server's kernel took into an
      open socket is acknowledged (a FIN sent after the server read it acknowledges it
      too), or, while that ACK is delayed, its server can only end silently (a host gone),
      and then only our retransmission meets a reset. So: the server had closed the socket
      before the request arrived (the keep-alive race: its FIN crossed our request, and it
      answered the request with a reset), or the connection no longer existed there when
      the request first arrived (a server host or process gone without a FIN, a new
      process on the port: a reset at once).

    Everything else is not re-sent: an EOF after the server acknowledged the request
    (it may have read it and died while running it: a ``tools/call`` may have run), a
    reset that met a retransmission (the first copy may have been read), a reset after
    any reply byte, a timeout, a fresh connection, and on a read failure a
    connection without a ``TCP_INFO`` record (not Linux; its write failures still count).
    TLS is the same: the proof is TCP's (a TLS record the server sent while the connection
    was idle counts as a reply byte: no re-send). The one case the rule cannot tell apart:
    a server that reads a request and then aborts the connection (a reset, ``SO_LINGER``
    0) within its delayed-ACK time, without answering. (urllib3 and Go check an idle
    connection before reuse, as ``get()`` does, and Go re-sends a request it wrote
    nothing of; this adds the acknowledgement as the proof for a request that was
    written.)
    """


_info = tcp_info


def _stale(sock: socket.socket, idle_info: bytes) -> bool:
    """``_readable`` without releasing the GIL (Linux, plain TCP): True if the peer closed
    the connection (state no longer ESTABLISHED) or sent something while it was idle."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _INFO_LEN)  # type: ignore[arg-type]
    except (OSError, ValueError):
        return True
    if not info or info[0] != _TCP_ESTABLISHED:
        return True
    if len(idle_info) < _INFO_LEN or len(info) < _INFO_LEN:
        return _readable(sock)  # an old kernel: ask poll
    return info[_RECEIVED] != idle_info[_RECEIVED]


def _never_acked(idle_info: bytes, info: bytes) -> bool:
    """True if, from ``idle_info`` (TCP_INFO when the connection was put back idle) to
    ``info`` (when it ended), the peer's TCP acknowledged no byte we sent, we sent nothing
    twice, and it sent no reply byte (a FIN counts one in tcpi_bytes_received); see
    ``_Undelivered``."""
    if len(info) < _INFO_LEN or len(idle_info) < _INFO_LEN:
        return False
    received = int.from_bytes(info[_RECEIVED], sys.byteorder)
    before = int.from_bytes(idle_info[_RECEIVED], sys.byteorder)
    return (
        info[_ACKED] == idle_info[_ACKED]
        and info[_RETRANS] == idle_info[_RETRANS]
        and 0 <= received - before <= 1
    )


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


def _streams(response: http.client.HTTPResponse) -> bool:
    """True for an event stream's head (``text/event-stream``)."""
    ctype = response.msg.get("content-type")
    return ctype is not None and ctype.lstrip()[:17].lower() == "text/event-stream"
