"""Streamable HTTP transport (MCP 2025-03-26 to 2025-11-25, and the 2026-07-28 wire).

Owns: the HTTP side of one MCP endpoint: one POST per message, the JSON or SSE reply,
``Mcp-Session-Id`` / ``MCP-Protocol-Version`` (and, on the 2026-07-28 wire, ``Mcp-Method``
/ ``Mcp-Name``) headers, the GET back-channel, resumption of broken SSE streams with
``Last-Event-ID``, DELETE on close, and translating every HTTP failure into the
``mcpsync.errors`` types. Also the HTTP plumbing the legacy HTTP+SSE transport reuses
(``HTTPClient``, ``translate_error``, ``safe_url``).

Threads and the hot path:
- ``send()`` POSTs in the calling thread. A JSON reply is read and delivered to
  ``on_message`` in that same thread before ``send()`` returns (no thread hop).
- An SSE reply is handed to a reader thread ``mcpsync-http-sse[name]``; it delivers each
  message, and when the stream ends before the response to its request arrived it
  reconnects with GET + ``Last-Event-ID`` after the server's ``retry`` delay (bounded).
  If that fails, ``on_error`` gets a ``ResponseLost`` naming the request id.
- After ``set_protocol_version()`` (i.e. after ``notifications/initialized``), the GET
  back-channel runs on ``mcpsync-http-get[name]``; a 405 means the server offers none.

Speed: ``requests.Session.post`` costs far more than the HTTP exchange itself. When this
transport owns its ``requests.Session``, has no ``auth``, no proxy and no cookies, it sends
through the session's own urllib3 connection pool (the one its ``HTTPAdapter`` manages, with
the same TLS settings), skipping the per-call ``Request``/``Response`` machinery. Otherwise
(a caller's session, an ``AuthBase``, a proxy, cookies) every request goes through
``requests.Session.request``, so adapters, proxies and response hooks (the OAuth 401
handler) all apply.
"""

from __future__ import annotations

import base64
import collections
import http.client
import io
import json
import logging
import os
import re
import select
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.cookies import extract_cookies_to_jar

from .._version import __version__
from ..errors import (
    ConfigError,
    ConnectError,
    DNSError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
    SessionExpired,
    TLSError,
    TransportError,
)
from ..jsonrpc import decode, encode, excerpt, parse_json
from ._sse import EventTooLarge, SSEParser
from .base import Message, OnClose, OnError, OnMessage, Transport

__all__ = [
    "StreamableHTTPTransport",
    "ResponseLost",
    "ReplyTooLarge",
    "response_id",
    "HTTPClient",
    "Target",
    "translate_error",
    "safe_url",
    "header_value",
    "status_error",
]

log = logging.getLogger("mcpsync.http")

USER_AGENT = f"mcpsync/{__version__} python-requests/{requests.__version__}"
ACCEPT_POST = "application/json, text/event-stream"
ACCEPT_SSE = "text/event-stream"
#: reconnection delay when a server gave no ``retry:`` (the SSE standard leaves it to the client)
DEFAULT_RETRY = 1.0
#: longest reconnection delay honoured (a server's ``retry:`` may ask for years)
MAX_RETRY_DELAY = 60.0
#: protocol versions from this one on have no sessions, no GET stream, no resumption
MODERN_FROM = "2026-07-28"
_READ_CHUNK = 256 * 1024
_ERROR_BODY_LIMIT = 64 * 1024
#: sends of one message that may each race a session expiry before it gives up
_MAX_RESENDS = 8
#: longest wait for a re-initialization when the request has no timeout
_REINIT_WAIT = 60.0
_STALE, _LEADER, _HANDSHAKE = "stale", "leader", "handshake"
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,1024}")
_PLAIN_HEADER = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?")


class ReplyTooLarge(ProtocolError):
    """An SSE event on the stream of request ``request_id`` was over ``max_event_bytes``.

    Reported through ``on_error`` (not raised); the connection fails that request with it
    at once. A JSON reply over the limit raises the plain ``ProtocolError`` from ``send()``.
    """

    def __init__(self, message: str, *, request_id: Any) -> None:
        self.request_id = request_id
        super().__init__(message)


class ResponseLost(TransportError):
    """The SSE stream that was to carry the response to ``request_id`` ended for good.

    Reported through ``on_error`` (not raised): the request was sent, but its response
    can no longer arrive (stream broken and not resumable, or resumption failed).
    """

    def __init__(self, message: str, *, request_id: Any) -> None:
        self.request_id = request_id
        super().__init__(message)


# -- helpers shared with the legacy transport ------------------------------------------


def safe_url(url: str) -> str:
    """``url`` for messages: no user-info, query values replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port:
        netloc += f":{parts.port}"
    query = "&".join(
        f"{p.split('=', 1)[0]}=***" if "=" in p else p for p in parts.query.split("&") if p
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def header_value(value: str) -> str:
    """A header-safe form of ``value``: as is, or ``=?base64?...?=`` (2026-07-28 wire rules)."""
    if value == "" or (
        _PLAIN_HEADER.fullmatch(value)
        and not (value.startswith("=?base64?") and value.endswith("?="))
    ):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it wraps (cause, context, urllib3 ``reason``, args)."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 20:
        e = todo.pop(0)
        if any(e is s for s in seen):
            continue
        seen.append(e)
        for nxt in (
            getattr(e, "reason", None),
            e.__cause__,
            e.__context__,
            *getattr(e, "args", ()),
        ):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return seen


def translate_error(exc: BaseException, what: str) -> MCPSyncError:
    """Map a requests/urllib3/socket failure during ``what`` to an mcpsync error type.

    The text names ``what`` (method and safe URL) and the innermost OS-level reason; it
    never carries the full URL of the failing request (urllib3 texts may) or a header.
    """
    if isinstance(exc, MCPSyncError):
        return exc
    chain = _causes(exc)

    def find(*types: type) -> BaseException | None:
        return next((e for e in chain if isinstance(e, types)), None)

    def reason(e: BaseException | None) -> str:
        inner = find(OSError) if e is None else e
        if isinstance(inner, OSError) and inner.strerror:
            return inner.strerror
        text = str(inner or exc)
        return text.split("(Caused by", 1)[0].strip()[:200] or type(exc).__name__

    tls = find(
        ssl.SSLError,
        ssl.CertificateError,
        urllib3.exceptions.SSLError,
        requests.exceptions.SSLError,
    )
    if tls is not None:
        inner = find(ssl.SSLError, ssl.CertificateError)
        detail = (
            getattr(inner, "verify_message", None)
            or getattr(inner, "reason", None)
            or str(inner or "")
        )
        return TLSError(f"{what}: TLS failure ({str(detail)[:200] or 'handshake failed'})")
    dns = find(socket.gaierror, urllib3.exceptions.NameResolutionError)
    if dns is not None:
        gai = find(socket.gaierror)
        return DNSError(
            f"{what}: host name did not resolve ({reason(gai) if gai else 'name resolution failed'})"
        )
    refused = find(ConnectionRefusedError)
    if refused is not None:
        return ConnectError(f"{what}: connection refused")
    new_conn = find(urllib3.exceptions.NewConnectionError)
    connect_timeout = next(
        (
            e
            for e in chain
            if isinstance(
                e, (urllib3.exceptions.ConnectTimeoutError, requests.exceptions.ConnectTimeout)
            )
            and not isinstance(e, urllib3.exceptions.NewConnectionError)
        ),
        None,
    )
    if connect_timeout is not None:
        return RequestTimeout(f"{what}: connecting timed out")
    if new_conn is not None:
        return ConnectError(f"{what}: cannot connect ({reason(None)})")
    if find(
        urllib3.exceptions.ReadTimeoutError,
        requests.exceptions.ReadTimeout,
        socket.timeout,
        TimeoutError,
    ):
        return RequestTimeout(f"{what}: no reply data within the read timeout")
    if find(ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        return ConnectError(f"{what}: connection reset by the server")
    if find(
        http.client.RemoteDisconnected, http.client.IncompleteRead, urllib3.exceptions.ProtocolError
    ):
        return ConnectError(f"{what}: the server closed the connection ({reason(None)})")
    if find(
        requests.exceptions.InvalidURL,
        requests.exceptions.MissingSchema,
        urllib3.exceptions.LocationValueError,
    ):
        return ConfigError(f"{what}: invalid URL")
    return ConnectError(f"{what}: {type(exc).__name__}: {reason(None)}")


_ID_SCAN = json.JSONDecoder().raw_decode
_WS = " \t\r\n"


def _top_keys(head: bytes) -> tuple[set[str], Any]:
    """The top-level keys of the JSON object whose text starts with ``head`` (as far as it
    goes) and its ``id`` when that is a complete string or integer (else None)."""
    keys: set[str] = set()
    rid: Any = None
    text = head.decode("utf-8", "ignore").lstrip(_WS)
    if not text.startswith("{"):
        return keys, rid
    depth, i, n, key_next = 0, 0, len(text), False
    while i < n:
        c = text[i]
        if c == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if end >= n:
                break  # cut off inside a string
            if depth == 1 and key_next:
                colon = end + 1
                while colon < n and text[colon] in _WS:
                    colon += 1
                if colon >= n or text[colon] != ":":
                    break
                key = text[i + 1 : end]
                keys.add(key)
                key_next = False
                i = colon + 1
                if key == "id":
                    while i < n and text[i] in _WS:
                        i += 1
                    try:
                        value, i = _ID_SCAN(text, i)
                    except ValueError:
                        break  # cut off, or not a plain value
                    if i >= n:
                        break  # a number may go on past the cut
                    if type(value) in (int, str):
                        rid = value
                continue
            i = end + 1
            continue
        if c in "{[":
            depth += 1
            key_next = depth == 1
        elif c in "}]":
            depth -= 1
        elif c == "," and depth == 1:
            key_next = True
        i += 1
    return keys, rid


def response_id(head: bytes) -> Any:
    """The id of the JSON-RPC response whose text starts with ``head``, or None.

    For a reply over the size limit, from its first bytes only: a response when its
    top-level keys include ``id`` (a string or integer) and ``result`` or ``error``, and no
    ``method``. Nested keys, and anything cut off, are not taken for the id.
    """
    keys, rid = _top_keys(head)
    if "method" in keys or rid is None or not ({"result", "error"} & keys):
        return None
    return rid


def _names_method(head: bytes) -> bool:
    """True when ``head`` starts a request or notification (a top-level ``method``)."""
    return "method" in _top_keys(head)[0]


def status_error(status: int, method: str, url: str, body: bytes) -> HTTPStatusError:
    """An ``HTTPStatusError`` with a short, printable body excerpt; ``.payload`` = parsed JSON or None."""
    payload = None
    if body[:1] in (b"{", b"["):
        try:
            payload = parse_json(body)
        except ProtocolError:  # garbage, invalid UTF-8, nesting too deep: the status says enough
            pass
    shown = safe_url(url)
    error = HTTPStatusError(
        status,
        shown,
        excerpt(body, 200) if body else "",
        message=f"HTTP {status} from {method} {shown}",
    )
    error.payload = payload  # type: ignore[attr-defined]
    return error


class Target(NamedTuple):
    """A URL, its path (with query) for the connection pool, and its origin."""

    url: str
    path: str
    origin: tuple[str, str, int]

    @classmethod
    def of(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"not an http(s) URL: {safe_url(url)!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(url, path, (parts.scheme, parts.hostname.lower(), port))


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
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=self.connect_timeout, context=self._context
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)

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
    ) -> _FastReply:
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


class HTTPClient:
    """One ``requests.Session`` (ours or the caller's) and the fast path around it.

    ``request()`` returns an open, unread response (``status``, ``headers`` with a
    case-insensitive ``get``, ``read``, ``read1``, ``close``, ``release_conn``) or raises a
    translated error. Same-origin 307/308 redirects are followed (at most 3).

    The fast path (``fast``): when the session is ours, there is no ``auth``, no proxy for
    the URL, no .netrc entry, and the session's adapter is a plain ``HTTPAdapter``, requests
    go over a small pool of keep-alive ``http.client`` connections set up with the TLS
    settings requests would use. A ``Set-Cookie`` reply moves everything to the requests
    path (the cookies go into the session's jar).
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None,
        http_session: requests.Session | None,
        auth: requests.auth.AuthBase | None,
        connect_timeout: float | None,
        verify: bool | str | None,
        cert: str | tuple[str, str] | None,
    ) -> None:
        self.target = Target.of(url)
        self.owned = http_session is None
        self.session = requests.Session() if http_session is None else http_session
        self.auth = auth
        self.verify = verify
        self.cert = cert
        self.connect_timeout = connect_timeout
        base = (
            {
                "User-Agent": USER_AGENT,
                "Accept-Encoding": "gzip, deflate",
                "Connection": "keep-alive",
            }
            if self.owned
            else {}
        )
        for key, value in (headers or {}).items():
            if (
                not isinstance(key, str)
                or not isinstance(value, str)
                or "\n" in value
                or "\r" in value
            ):
                raise ConfigError(f"header {key!r}: names and values must be single-line strings")
            base[key] = value
        self.headers = base
        self._pool: _FastPool | None = None
        self._cookie_request: requests.PreparedRequest | None = None
        if self.owned and auth is None:
            self._setup_fast_path()

    @property
    def fast(self) -> bool:
        """True while requests go over the fast pool."""
        return self._pool is not None

    def _setup_fast_path(self) -> None:
        url = self.target.url
        session = self.session
        try:
            settings = session.merge_environment_settings(url, {}, None, self.verify, self.cert)
            if requests.utils.select_proxy(url, settings["proxies"]):
                return  # a proxy applies: let requests handle it
            if session.trust_env and requests.utils.get_netrc_auth(url):
                return  # credentials from .netrc: requests adds them
            adapter = session.get_adapter(url)
            if (
                type(adapter) is not HTTPAdapter
                or getattr(HTTPAdapter.send, "__module__", "") != "requests.adapters"
            ):
                return  # a custom adapter, or HTTPAdapter.send patched (e.g. by a mocking library)
            # set before the pool: _send uses it once the pool sees a cookie
            self._cookie_request = requests.Request("GET", url).prepare()
            self._pool = _FastPool(
                self.target.origin,
                connect_timeout=self.connect_timeout,
                verify=settings["verify"] if settings["verify"] is not None else True,
                cert=settings["cert"],
            )
        except (
            OSError,
            ssl.SSLError,
        ) as exc:  # a CA bundle or client certificate that cannot be read
            raise ConfigError(f"TLS settings for {safe_url(url)}: {exc}") from None
        except requests.RequestException:
            return

    def request(
        self,
        method: str,
        target: Target,
        headers: Mapping[str, str],
        body: bytes | None = None,
        read_timeout: float | None = None,
    ) -> tuple[Any, Target]:
        """Send one request; return (open response, final target after redirects)."""
        for _ in range(4):
            response = self._send(method, target, headers, body, read_timeout)
            if response.status not in (307, 308):
                return response, target
            location = response.headers.get("location")
            _discard(response)
            if not location:
                break
            moved = Target.of(urljoin(target.url, location))
            if moved.origin != target.origin:
                raise HTTPStatusError(
                    response.status,
                    safe_url(target.url),
                    message=f"{method} {safe_url(target.url)} redirected to another origin ({safe_url(moved.url)}); not followed",
                )
            target = moved
        raise HTTPStatusError(
            response.status,
            safe_url(target.url),
            message=f"{method} {safe_url(target.url)}: too many redirects",
        )

    def _send(
        self,
        method: str,
        target: Target,
        headers: Mapping[str, str],
        body: bytes | None,
        read_timeout: float | None,
    ) -> Any:
        pool = self._pool
        try:
            if pool is not None and target.origin == self.target.origin:
                response = pool.urlopen(method, target.path, headers, body, read_timeout)
                if response.headers.get("set-cookie") is not None:
                    # Cookies (e.g. load-balancer stickiness): keep them, and from now on
                    # let requests send them.
                    cookie_request = self._cookie_request
                    if cookie_request is not None:  # always: it is set before the pool
                        extract_cookies_to_jar(self.session.cookies, cookie_request, response)
                    self._pool = None
                    pool.close()
                return response
            reply = self.session.request(
                method,
                target.url,
                data=body,
                headers=headers,
                auth=self.auth,
                timeout=(self.connect_timeout, read_timeout),
                stream=True,
                allow_redirects=False,
                verify=self.verify,
                cert=self.cert,
            )
            if reply._content_consumed:  # a response hook read it already
                return _Buffered(reply)
            return reply.raw
        except MCPSyncError:
            raise
        except _ConnectTimeout:
            raise RequestTimeout(f"{method} {safe_url(target.url)}: connecting timed out") from None
        except (
            requests.RequestException,
            urllib3.exceptions.HTTPError,
            OSError,
            http.client.HTTPException,
            ValueError,
        ) as exc:
            raise translate_error(exc, f"{method} {safe_url(target.url)}") from None

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        if self.owned:
            self.session.close()


def _discard(response: Any) -> None:
    """Release a response we do not need (small bodies are drained so the connection is reused)."""
    try:
        length = response.headers.get("content-length")
        if length is not None and int(length) <= 65536:
            response.read()
            response.release_conn()
        else:
            response.close()
    except Exception:  # noqa: BLE001 - best effort
        try:
            response.close()
        except Exception:  # noqa: BLE001
            pass


def read_limited(response: Any, limit: int, what: str) -> bytes:
    """The whole body, or ProtocolError when it is larger than ``limit`` bytes."""
    length = response.headers.get("content-length")
    try:
        if length is not None and length.isdigit():
            if int(length) > limit:
                response.close()
                raise ProtocolError(
                    f"{what}: reply of {length} bytes exceeds the {limit}-byte limit"
                )
            return response.read(decode_content=True)
        data = response.read(limit + 1, decode_content=True)
        if len(data) > limit:
            response.close()
            raise ProtocolError(f"{what}: reply exceeds the {limit}-byte limit")
        rest = response.read(decode_content=True)  # EOF: lets urllib3 reuse the connection
        return data + rest if rest else data
    except MCPSyncError:
        raise
    except (urllib3.exceptions.HTTPError, OSError, http.client.HTTPException, ValueError) as exc:
        raise translate_error(exc, what) from None


def shutdown_response(response: Any) -> None:
    """Make a blocked read on ``response`` return (from another thread): shut its socket down."""
    conn = getattr(response, "_conn", None) or getattr(response, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is None:  # released already: reach the socket through the body's file object
        inner = getattr(response, "_response", None) or getattr(response, "_fp", None)
        sock = getattr(getattr(getattr(inner, "fp", None), "raw", None), "_sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass


# -- the transport ---------------------------------------------------------------------


class _Stream:
    """One SSE stream being read: a POST reply (with its request id), or the GET back-channel."""

    __slots__ = ("kind", "request_id", "response", "thread", "answered", "resumed", "aborted")

    def __init__(self, kind: str, request_id: Any, response: Any) -> None:
        self.kind = kind
        self.request_id = request_id
        self.response = response
        self.thread: threading.Thread | None = None
        self.answered = False
        self.resumed = False
        self.aborted = False


class StreamableHTTPTransport(Transport):
    """MCP over Streamable HTTP: one POST per message; JSON or SSE replies; GET back-channel."""

    kind = "streamable-http"

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http_session: requests.Session | None = None,
        auth: requests.auth.AuthBase | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        verify: bool | str | None = None,
        cert: str | tuple[str, str] | None = None,
        max_event_bytes: int = 256 * 1024 * 1024,
        name: str | None = None,
        max_reconnects: int = 3,
        sse_read_timeout: float | None = 300.0,
        back_channel: bool = True,
    ) -> None:
        """``timeout``: read timeout for replies when ``send`` gives none (None: no limit);
        ``verify``/``cert``: as in requests (None: the session's setting);
        ``max_event_bytes``: largest JSON reply or SSE event accepted;
        ``max_reconnects``: consecutive failed reconnections before a stream is given up;
        ``sse_read_timeout``: idle limit on the GET back-channel before it reconnects quietly;
        ``back_channel``: open the GET stream after initialization.
        """
        self._http = HTTPClient(
            url,
            headers=headers,
            http_session=http_session,
            auth=auth,
            connect_timeout=connect_timeout,
            verify=verify,
            cert=cert,
        )
        self.target = self._http.target
        self.url = url
        self.name = name or (urlsplit(url).hostname or "server")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_event_bytes = max_event_bytes
        self.max_reconnects = max_reconnects
        self.sse_read_timeout = sse_read_timeout
        self.back_channel = back_channel
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._modern = False
        self._state_lock = threading.Lock()
        self._session_cond = threading.Condition(self._state_lock)
        self._expiry: str | None = None  # None, _STALE, _LEADER or _HANDSHAKE (see send)
        self._expired_id: str | None = None
        self._expiry_generation = 0
        self._streams: set[_Stream] = set()
        self._closing = threading.Event()
        self._started = False
        self._get_thread: threading.Thread | None = None
        self._get_unsupported = False
        self._init_headers: dict[str, str] = {}
        self._post_headers: dict[str, str] = {}
        self._post_session: str | None = None
        self._rebuild_headers()

    # -- Transport -------------------------------------------------------------------

    def describe(self) -> str:
        return f"streamable-http {safe_url(self.target.url)}"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        if self._closing.is_set():
            raise TransportError(f"{self.describe()}: transport is closed")
        self._bind(on_message, on_close, on_error)
        self._started = True
        self._maybe_open_back_channel()

    def set_protocol_version(self, version: str) -> None:
        with self._state_lock:
            self.protocol_version = version
            self._modern = version >= MODERN_FROM and version[:2] == "20"
            self._rebuild_headers()
            if self._expiry is _HANDSHAKE:  # a re-initialization is complete
                self._expiry = None
                self._session_cond.notify_all()
        self._maybe_open_back_channel()

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """POST one message. A JSON reply is delivered before this returns; an SSE reply is
        read on a reader thread. ``timeout`` bounds the wait for reply data (default: the
        transport's ``timeout``). ``headers`` adds per-message headers (e.g. ``Mcp-Param-*``).

        Raises ``SessionExpired`` (404 to a request that carried the session id: to one
        request per expiry, which is to re-initialize; the others wait for that and are
        re-sent with the new id), ``HTTPStatusError``, ``ConnectError``/``DNSError``/
        ``TLSError``, ``RequestTimeout``, or ``ProtocolError`` (a reply that is not JSON-RPC).
        """
        if self._closing.is_set():
            raise TransportError(f"{self.describe()}: transport is closed")
        method = message.get("method") if isinstance(message, dict) else None
        is_request = method is not None and "id" in message
        read_timeout = self.timeout if timeout is None else timeout
        if method == "initialize" or (
            method == "notifications/initialized" and self._expiry is not None
        ):
            self._send_handshake(message, method, read_timeout, headers)
            return
        for _ in range(_MAX_RESENDS):
            with self._state_lock:
                if self._expiry is None:
                    hdrs, sent_session = self._post_headers, self._post_session
                else:  # the session expired: wait for the re-initialization (or lead it)
                    hdrs, sent_session, read_timeout = self._await_session(
                        method, is_request, read_timeout
                    )
            if self._post(message, method, is_request, hdrs, sent_session, read_timeout, headers):
                return
        raise SessionExpired(
            f"{self.describe()}: the session expired {_MAX_RESENDS} times while sending {method}"
        )

    def _post(
        self,
        message: Message,
        method: str | None,
        is_request: bool,
        hdrs: Mapping[str, str],
        sent_session: str | None,
        read_timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> bool:
        """POST ``message`` once. True when done; False when it raced a session expiry that
        another request reported (send it again once the new session is up)."""
        request_id = message.get("id") if method is not None else None
        if self._modern and method is not None:
            hdrs = {**hdrs, "Mcp-Method": method}
            name = _mcp_name(method, message.get("params"))
            if name is not None:
                hdrs["Mcp-Name"] = header_value(name)
        if headers:
            hdrs = {**hdrs, **headers}
        response, target = self._http.request(
            "POST", self.target, hdrs, encode(message), read_timeout
        )
        if target is not self.target:
            self._moved(target)
        status = response.status
        what = f"POST {safe_url(target.url)}"
        if 200 <= status < 300:
            if method == "initialize":
                self._capture_session(response)
            if status == 202 or status == 204:
                _discard(response)
                return True
            ctype = response.headers.get("content-type", "").lower()
            if ctype.startswith(ACCEPT_SSE):
                if is_request:
                    self._start_stream(response, request_id, read_timeout)
                else:  # a stream for a notification or response: read whatever it carries
                    self._start_stream(response, None, read_timeout)
                return True
            data = read_limited(response, self.max_event_bytes, what)
            if not data or data.isspace():
                if is_request:
                    raise ProtocolError(f"{what}: empty {status} reply to {method}")
                return True
            if "json" not in ctype and ctype:
                if is_request:
                    raise ProtocolError(
                        f"{what}: unexpected Content-Type {ctype!r} in reply to {method}"
                    )
                return True
            reply = decode(data)  # ProtocolError on garbage: the caller learns at once
            self._deliver(reply)
            return True
        body = b""
        try:
            body = response.read(_ERROR_BODY_LIMIT, decode_content=True)
        except Exception:  # noqa: BLE001 - the status says enough
            pass
        finally:
            response.close()
        if status == 404 and sent_session is not None:
            if self._not_found(sent_session, is_request):
                return False
            raise SessionExpired(
                f"{what}: the server no longer knows session (HTTP 404); initialize again"
            )
        error = status_error(status, "POST", target.url, body)
        payload = error.payload  # type: ignore[attr-defined]
        if (
            is_request
            and status not in (401, 403)
            and isinstance(payload, dict)
            and payload.get("id") == request_id
            and ("error" in payload or "result" in payload)
        ):
            self._deliver(payload)  # a JSON-RPC answer carried by an HTTP error status
            return True
        raise error

    # -- session expiry: one re-initialization, everybody else waits for it --------------
    #
    # ``_expiry`` is None while the session is good. A 404 to a request that carried the
    # current session id makes that request the leader (_LEADER): it alone gets
    # ``SessionExpired``, and its connection re-initializes. Requests sent meanwhile, and
    # requests whose own 404 raced the leader's, wait here (bounded by their timeout) and
    # are then sent with the new ``Mcp-Session-Id``: none goes out without one. The
    # initialize reply moves to _HANDSHAKE (the new id is known), the 2xx to
    # ``notifications/initialized`` back to None. A failed re-initialization (or a leader
    # that never re-initializes) leaves _STALE: the next request to send leads anew.
    # Notifications and responses are not held: they belong to the old session (a
    # cancellation, an answer to its server request) and raise ``SessionExpired`` unsent.

    def _send_handshake(
        self,
        message: Message,
        method: str,
        read_timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        """``initialize`` (never with a session id), or ``notifications/initialized`` of a
        re-initialization; both move the expiry state on."""
        try:
            if method == "initialize":
                self._post(message, method, True, self._init_headers, None, read_timeout, headers)
            else:
                with self._state_lock:
                    hdrs, sent_session = self._post_headers, self._post_session
                if not self._post(
                    message, method, False, hdrs, sent_session, read_timeout, headers
                ):
                    raise SessionExpired(f"{self.describe()}: the new session expired at once")
        except BaseException:
            with self._state_lock:
                if self._expiry is _LEADER or self._expiry is _HANDSHAKE:
                    self._expiry = _STALE
                    self._session_cond.notify_all()
            raise
        with self._state_lock:
            if method == "initialize":
                if self._expiry is not None:
                    self._expiry = _HANDSHAKE
            elif self._expiry is _HANDSHAKE:
                self._expiry = None
                self._session_cond.notify_all()

    def _await_session(
        self, method: str | None, is_request: bool, read_timeout: float | None
    ) -> tuple[dict[str, str], str | None, float | None]:
        """Called with the state lock held while ``_expiry`` is set: the headers to send with
        once the new session is up, and what is left of ``read_timeout``; raises
        ``SessionExpired`` to the request that is to lead the re-initialization,
        ``RequestTimeout`` when it does not come in time."""
        if not is_request:
            raise SessionExpired(
                f"{self.describe()}: the session expired and is being re-initialized; "
                f"{method or 'the response'} was not sent"
            )
        bound = read_timeout if read_timeout is not None else _REINIT_WAIT
        deadline = time.monotonic() + bound
        generation = self._expiry_generation
        while True:
            if self._closing.is_set():
                raise TransportError(f"{self.describe()}: transport is closed")
            if self._expiry is None:
                left = None if read_timeout is None else max(deadline - time.monotonic(), 0.01)
                return self._post_headers, self._post_session, left
            if self._expiry is _STALE:
                self._expiry = _LEADER
                self._expiry_generation += 1
                raise SessionExpired(
                    f"{self.describe()}: the server no longer knows session; initialize again"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self._expiry_generation == generation:  # the leader did not get through
                    self._expiry = _STALE
                    self._session_cond.notify_all()
                raise RequestTimeout(
                    f"{self.describe()}: the expired session was not re-initialized within "
                    f"{bound:g} s; {method} not sent"
                )
            self._session_cond.wait(remaining)

    def _not_found(self, sent_session: str, is_request: bool) -> bool:
        """A 404 to a message sent with ``sent_session``. False: report ``SessionExpired``
        (this one leads, or it is not a request); True: wait for the new session and resend."""
        with self._state_lock:
            if self._expiry is None and self.session_id == sent_session:
                self._expired_id = sent_session
                self._expiry = _LEADER if is_request else _STALE
                self._expiry_generation += 1
                self.session_id = None  # until the re-initialization names the new one
                self._rebuild_headers()
                return False
            return is_request

    def abort_request(self, request_id: Any) -> bool:
        """Stop reading the SSE stream that carries ``request_id``'s response (on the
        2026-07-28 wire, closing it is the cancellation). True if there was one."""
        with self._state_lock:
            streams = [s for s in self._streams if s.request_id == request_id and s.kind == "post"]
        for stream in streams:
            stream.aborted = True
            shutdown_response(stream.response)
        return bool(streams)

    def close(self) -> None:
        first = not self._closing.is_set()
        self._closing.set()
        with self._state_lock:
            self._session_cond.notify_all()  # requests waiting for a re-initialization
            streams = list(self._streams)
            get_thread = self._get_thread
        for stream in streams:
            shutdown_response(stream.response)
        current = threading.current_thread()
        deadline = time.monotonic() + 3.0
        for thread in [s.thread for s in streams] + [get_thread]:
            if thread is None or thread is current or not thread.is_alive():
                continue
            thread.join(timeout=max(0.05, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("mcpsync: thread %s did not stop", thread.name)
        if first:
            self._delete_session()
            self._http.close()
        self._report_close(None)

    # -- headers and session state ---------------------------------------------------------

    def _rebuild_headers(self) -> None:
        """Called with the state lock held (or from __init__)."""
        base = {**self._http.headers, "Accept": ACCEPT_POST, "Content-Type": "application/json"}
        self._init_headers = dict(base)
        if self.protocol_version:
            base["MCP-Protocol-Version"] = self.protocol_version
            if self._modern:
                self._init_headers = dict(base)
        if self.session_id:
            base["Mcp-Session-Id"] = self.session_id
        self._post_headers = base
        self._post_session = self.session_id

    def _side_headers(self, accept: str, last_event_id: str | None = None) -> dict[str, str]:
        with self._state_lock:
            hdrs = {**self._http.headers, "Accept": accept}
            session_id = self.session_id
            if session_id is None and self._expiry is not None:
                session_id = self._expired_id  # not without one: a 404 ends this GET quietly
            if session_id:
                hdrs["Mcp-Session-Id"] = session_id
            if self.protocol_version:
                hdrs["MCP-Protocol-Version"] = self.protocol_version
        if last_event_id is not None:
            hdrs["Last-Event-ID"] = last_event_id
        return hdrs

    def _capture_session(self, response: Any) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id is None:
            return
        if not _SESSION_ID.fullmatch(session_id):
            log.warning("mcpsync: %s sent an invalid Mcp-Session-Id; ignoring it", self.describe())
            return
        with self._state_lock:
            self.session_id = session_id
            self._rebuild_headers()

    def _moved(self, target: Target) -> None:
        log.info(
            "mcpsync: %s moved to %s (HTTP redirect); using the new URL",
            safe_url(self.target.url),
            safe_url(target.url),
        )
        self.target = target

    # -- delivery ---------------------------------------------------------------------

    def _report(self, error: BaseException) -> None:
        if not self._closing.is_set():
            super()._report(error)

    # -- SSE streams ---------------------------------------------------------------------

    def _register(self, stream: _Stream) -> bool:
        with self._state_lock:
            if self._closing.is_set():
                return False
            self._streams.add(stream)
            return True

    def _start_stream(self, response: Any, request_id: Any, read_timeout: float | None) -> None:
        stream = _Stream("post", request_id, response)
        thread = threading.Thread(
            target=self._run_post_stream,
            args=(stream, read_timeout),
            name=f"mcpsync-http-sse[{self.name}]",
            daemon=True,  # a blocked read must not hang interpreter exit; close() joins it
        )
        stream.thread = thread
        if not self._register(stream):
            response.close()
            raise TransportError(f"{self.describe()}: transport is closed")
        thread.start()

    def _read_stream(
        self, stream: _Stream, parser: SSEParser, idle_limit: float | None
    ) -> BaseException | None:
        """Read ``stream.response`` to its end; deliver messages. Returns why it ended early (or None).

        Ends early on a read error, when a resumed stream delivered its response, when
        ``idle_limit`` seconds passed without a JSON-RPC message (keep-alives alone do not
        count), or when the transport closes.
        """
        response = stream.response
        read1 = response.read1
        rid = stream.request_id
        closing = self._closing
        last_message = time.monotonic()
        try:
            while not closing.is_set() and not stream.aborted:
                chunk = read1(_READ_CHUNK, decode_content=True)
                if not chunk:
                    return None
                for event in parser.feed(chunk):
                    if isinstance(event, EventTooLarge):
                        # Fail the request the reply was for now, not at its timeout: the
                        # one its first bytes name, else (on a request's own stream, unless
                        # it is a notification or a server request) the stream's request.
                        owner = response_id(event.head)
                        if (
                            owner is None
                            and rid is not None
                            and not stream.answered
                            and not _names_method(event.head)
                        ):
                            owner = rid
                        if owner is None:
                            self._report(ProtocolError(f"{self.describe()}: {event}"))
                            continue
                        self._report(
                            ReplyTooLarge(
                                f"{self.describe()}: reply to request {owner!r}: {event}",
                                request_id=owner,
                            )
                        )
                        if owner == rid and type(owner) is type(rid):
                            stream.answered = True  # nobody waits on this stream any more
                            return None
                        continue
                    if event.event != "message" or not event.data.strip():
                        continue  # priming events, other event types
                    try:
                        message = decode(event.data)
                    except ProtocolError as exc:
                        self._report(ProtocolError(f"{self.describe()}: SSE event data: {exc}"))
                        continue
                    last_message = time.monotonic()
                    if rid is not None and not stream.answered:
                        for item in message if isinstance(message, list) else (message,):
                            if "method" not in item and item.get("id") == rid:
                                stream.answered = True
                    self._deliver(message)
                if stream.answered and stream.resumed:
                    return None  # a resumption GET has done its job
                if idle_limit is not None and time.monotonic() - last_message > idle_limit:
                    return RequestTimeout(
                        f"{self.describe()}: no message on the SSE stream for {idle_limit:g} s"
                    )
            return None
        except Exception as exc:  # noqa: BLE001 - any read failure ends this stream
            if closing.is_set() or stream.aborted:
                return None
            return translate_error(exc, f"reading the SSE stream from {safe_url(self.target.url)}")
        finally:
            parser.finish()
            try:
                response.close()
            except Exception:  # noqa: BLE001
                pass

    def _run_post_stream(self, stream: _Stream, read_timeout: float | None) -> None:
        parser = SSEParser(self.max_event_bytes)
        failures = 0
        try:
            while True:
                seen_id = parser.last_event_id
                ended = self._read_stream(stream, parser, read_timeout)
                if (
                    stream.answered
                    or stream.request_id is None
                    or self._closing.is_set()
                    or stream.aborted
                ):
                    return
                # The stream ended before the response: resume it if the server made it resumable.
                if parser.last_event_id is None:
                    cause = ended or ConnectError("the stream ended without the response")
                    self._lost(stream, cause, "no event id to resume from")
                    return
                failures = 0 if parser.last_event_id != seen_id else failures + 1
                while True:
                    if failures >= self.max_reconnects:
                        self._lost(stream, ended, f"{failures} reconnection attempts failed")
                        return
                    delay = _retry_delay(parser)
                    if self._closing.wait(delay) or stream.aborted:
                        return
                    try:
                        response = self._open_get(parser.last_event_id, read_timeout)
                    except MCPSyncError as exc:
                        ended = exc
                        failures += 1
                        continue
                    if response.status != 200:
                        refused = status_error(response.status, "GET", self.target.url, b"")
                        _discard(response)
                        self._lost(stream, refused, "resumption refused")
                        return
                    break
                with self._state_lock:
                    stream.response = response
                    stream.resumed = True
                if self._closing.is_set():
                    shutdown_response(response)
        finally:
            with self._state_lock:
                self._streams.discard(stream)

    def _lost(self, stream: _Stream, cause: BaseException | None, why: str) -> None:
        reason = f": {cause}" if cause is not None else ""
        error = ResponseLost(
            f"{self.describe()}: the response to request {stream.request_id!r} can no longer arrive ({why}){reason}",
            request_id=stream.request_id,
        )
        error.__cause__ = cause
        self._report(error)

    def _open_get(self, last_event_id: str | None, read_timeout: float | None) -> Any:
        headers = self._side_headers(ACCEPT_SSE, last_event_id)
        response, _ = self._http.request("GET", self.target, headers, None, read_timeout)
        if response.status == 200 and not response.headers.get(
            "content-type", ""
        ).lower().startswith(ACCEPT_SSE):
            _discard(response)
            raise ProtocolError(
                f"GET {safe_url(self.target.url)}: 200 reply is not an event stream"
            )
        return response

    # -- the GET back-channel ----------------------------------------------------------------

    def _maybe_open_back_channel(self) -> None:
        with self._state_lock:
            if (
                not self.back_channel
                or not self._started
                or self.protocol_version is None
                or self._modern
                or self._get_unsupported
                or self._closing.is_set()
                or (self._get_thread is not None and self._get_thread.is_alive())
            ):
                return
            self._get_thread = threading.Thread(
                target=self._run_back_channel, name=f"mcpsync-http-get[{self.name}]", daemon=True
            )
            self._get_thread.start()

    def _run_back_channel(self) -> None:
        parser = SSEParser(self.max_event_bytes)
        failures = 0
        closing = self._closing
        while not closing.is_set():
            try:
                response = self._open_get(parser.last_event_id, self.sse_read_timeout)
            except MCPSyncError as exc:
                failures += 1
                if failures > self.max_reconnects:
                    log.warning("mcpsync: GET stream of %s given up: %s", self.describe(), exc)
                    return
                if closing.wait(_retry_delay(parser)):
                    return
                continue
            if response.status != 200:
                status = response.status
                _discard(response)
                if status == 405:
                    self._get_unsupported = True  # the server offers no GET stream
                    log.debug("mcpsync: %s offers no GET stream (405)", self.describe())
                else:
                    log.info(
                        "mcpsync: GET stream of %s refused with HTTP %s", self.describe(), status
                    )
                return
            stream = _Stream("get", None, response)
            stream.thread = threading.current_thread()
            if not self._register(stream):
                response.close()
                return
            seen = parser.last_event_id
            ended = self._read_stream(stream, parser, None)
            with self._state_lock:
                self._streams.discard(stream)
            if closing.is_set():
                return
            if isinstance(ended, RequestTimeout):
                failures = 0  # idle past sse_read_timeout: reconnect quietly
            elif parser.last_event_id != seen:
                failures = 0
            else:
                failures += 1
            if failures > self.max_reconnects:
                log.warning("mcpsync: GET stream of %s keeps ending; given up", self.describe())
                return
            if closing.wait(_retry_delay(parser)):
                return

    # -- close ---------------------------------------------------------------------------

    def _delete_session(self) -> None:
        with self._state_lock:
            session_id = self.session_id
        if session_id is None or self._modern:
            return
        headers = self._side_headers("application/json, text/event-stream")
        try:
            response, _ = self._http.request("DELETE", self.target, headers, None, 5.0)
            _discard(response)
            if response.status not in (200, 202, 204, 404, 405):
                log.debug(
                    "mcpsync: DELETE of session at %s answered %s", self.describe(), response.status
                )
        except MCPSyncError as exc:
            log.debug("mcpsync: DELETE of session at %s failed: %s", self.describe(), exc)


def _retry_delay(parser: SSEParser) -> float:
    """The server's reconnection delay (``retry:``), else the default; at most a minute."""
    retry = parser.retry
    return DEFAULT_RETRY if retry is None else min(retry, MAX_RETRY_DELAY)


def _mcp_name(method: str, params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    if method in ("tools/call", "prompts/get"):
        value = params.get("name")
    elif method == "resources/read":
        value = params.get("uri")
    else:
        return None
    return value if isinstance(value, str) else None
