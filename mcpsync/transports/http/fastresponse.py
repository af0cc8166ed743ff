"""Reading an HTTP/1.x response head quickly, for the fast pool.

Owns: ``FastResponse``, an ``http.client.HTTPResponse`` whose header fields are parsed
here rather than by ``email.parser`` (which costs about as much as the rest of a loopback
round trip put together); everything else (the status line, body framing: length,
chunked, keep-alive; reading) is ``http.client``'s own. The fields land in a regular
``http.client.HTTPMessage``, stored as ``email``'s compat32 policy stores them (the name
as sent, the value without its leading blanks and line end), so ``get``, ``get_all``,
``items`` and cookie extraction read them as before. A head this parser does not take
as plainly well-formed (a folded continuation line, a line that is no ``name: value``
field) is parsed by ``email`` exactly as ``http.client`` would. Used by ``fastpool``.

Also owns reading a socket whose read timeout is the kernel's (``SO_RCVTIMEO`` on a
blocking socket, see ``fastpool``): Python's socket file takes the ``EAGAIN`` that ends
such a wait for "no data yet" and returns nothing, which ``http.client`` would read as
the server closing; here it is a timeout, as on a socket with Python's own timeout.

Each read keeps within the deadline of the request it belongs to, when its connection
carries one (``fastsocket``): a reply trickled a byte at a time ends at the request's
timeout, not after one read timeout per byte.

And the connection's TCP record when it ends before the response head (``HeadLost``, with
Linux ``TCP_INFO`` taken before ``http.client`` closes the socket): ``fastpool`` reads
from it whether the request ever reached the server.
"""

from __future__ import annotations

import email.parser
import http.client
import io
import re
import socket
import sys
from typing import Any

from .fastsocket import keep_within

__all__ = ["FastResponse", "HeadLost", "parse_head", "tcp_info", "INFO_LEN"]

_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None) if sys.platform == "linux" else None
#: struct tcp_info up to tcpi_bytes_received (Linux >= 4.1), which is at offset 128
INFO_LEN = 136


def tcp_info(sock: socket.socket) -> bytes:
    """The raw struct tcp_info of ``sock`` (b"" when the kernel does not say)."""
    if _TCP_INFO is None:
        return b""
    try:
        return sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, INFO_LEN)
    except (OSError, ValueError):
        return b""


class HeadLost(ConnectionError):
    """The connection ended (EOF or a reset) before the response head was read whole.

    ``info``: the connection's raw TCP_INFO at that moment (b"": not known); the
    original error is the ``__cause__``."""

    def __init__(self, message: str, info: bytes) -> None:
        super().__init__(message)
        self.info = info


#: a header field name as ``email``'s parser takes it: printable, no blank, no colon
_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")
_END = (b"\r\n", b"\n", b"")


def parse_head(lines: list[bytes]) -> http.client.HTTPMessage:
    """The header fields of ``lines`` (as ``http.client._read_headers`` returns them)."""
    message = http.client.HTTPMessage()
    fields = message._headers  # type: ignore[attr-defined]  # email.message.Message's list
    fullmatch = _NAME.fullmatch
    for raw in lines:
        if raw in _END:
            break
        line = raw.decode("iso-8859-1")
        name, colon, value = line.partition(":")
        if not colon or fullmatch(name) is None:
            return _email_head(lines)  # folded, or not a field: email's reading, as ever
        fields.append((name, value.lstrip(" \t").rstrip("\r\n")))
    return message


def _email_head(lines: list[bytes]) -> http.client.HTTPMessage:
    text = b"".join(lines).decode("iso-8859-1")
    parsed = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(text)
    return parsed  # type: ignore[return-value]


class _TimedSocketIO(socket.SocketIO):
    """A socket's raw reader where ``EAGAIN`` (a kernel timeout) raises ``TimeoutError``;
    with a ``bound`` (the pool connection), each read is kept within its request's
    deadline (``fastsocket.keep_within``)."""

    bound: Any = None

    def readinto(self, b: Any) -> int | None:
        bound = self.bound
        if bound is not None and bound.deadline is not None:
            keep_within(bound, self._sock, "reading the reply")  # type: ignore[attr-defined]
        count = super().readinto(b)
        if count is None:  # EAGAIN: never "no data yet" on a blocking socket
            self._timeout_occurred = True  # as SocketIO marks a timeout
            raise TimeoutError("timed out")
        return count


class _Reader:
    """What ``HTTPResponse`` takes its file from: ``makefile`` as ``socket.makefile("rb")``
    makes it, over ``_TimedSocketIO``."""

    __slots__ = ("sock", "bound")

    def __init__(self, sock: socket.socket, bound: Any = None) -> None:
        self.sock = sock
        self.bound = bound

    def makefile(self, mode: str) -> io.BufferedReader:
        sock = self.sock
        raw = _TimedSocketIO(sock, "rb")
        raw.bound = self.bound
        sock._io_refs += 1  # type: ignore[attr-defined]  # socket.makefile's count: close waits for it
        return io.BufferedReader(raw, io.DEFAULT_BUFFER_SIZE)


class FastResponse(http.client.HTTPResponse):
    """``http.client.HTTPResponse`` with the header fields read by ``parse_head``; ``bound``:
    the pool connection whose request's deadline every read of it is kept within."""

    def __init__(
        self,
        sock: Any,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
        bound: Any = None,
    ) -> None:
        reader = _Reader(sock, bound) if isinstance(sock, socket.socket) else sock
        super().__init__(reader, debuglevel, method, url)  # type: ignore[arg-type]

    def raw_socket(self) -> socket.socket | None:
        """The socket this response reads from (None: read to its end already)."""
        raw = self.fp.raw if isinstance(self.fp, io.BufferedReader) else None
        return raw._sock if isinstance(raw, _TimedSocketIO) else None  # type: ignore[attr-defined]

    def begin(self) -> None:
        if self.headers is not None:
            return  # begun already
        try:
            while True:  # interim 1xx "100 Continue" heads are skipped
                version, status, reason = self._read_status()  # type: ignore[attr-defined]
                if status != http.client.CONTINUE:
                    break
                http.client._read_headers(self.fp)  # type: ignore[attr-defined]
        except ConnectionError as exc:  # http.client closes the socket when this is raised
            raw = self.fp.raw if isinstance(self.fp, io.BufferedReader) else None
            info = tcp_info(raw._sock) if isinstance(raw, _TimedSocketIO) else b""
            raise HeadLost(str(exc) or type(exc).__name__, info) from exc
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = parse_head(http.client._read_headers(self.fp))  # type: ignore[attr-defined]
        # Body framing, by HTTP/1.1's rules (RFC 9112 section 6.3).
        coding = self.headers.get("transfer-encoding")
        self.chunked = bool(coding) and coding.lower() == "chunked"
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        no_body = status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED)
        if no_body or 100 <= status < 200 or self._method == "HEAD":  # type: ignore[attr-defined]
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # no length, not chunked: the body ends with the connection
