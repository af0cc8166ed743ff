"""The HTTP plumbing both HTTP transports share.

Owns: ``HTTPClient`` (one ``requests.Session``, ours or the caller's, and the fast pool
around it; one deadline per request, ``read_timeout`` from its start, on both paths),
``Target``, and reading (within that deadline), discarding and aborting responses.
Re-exports ``safe_url``, ``translate_error`` and ``status_error`` (``failures``).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ..._version import __version__
from ...errors import (
    ConfigError,
    ConnectError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
)
from ..base import Transport
from .cookies import Cookies
from .failures import safe_url, status_error, translate_error
from .fastpool import _Buffered, _ConnectTimeout, _FastPool, _FastReply, _Undelivered
from .fastresponse import HeadLost
from .fastsocket import DeadlinePassed
from .requestauth import RequestAuth

__all__ = [
    "HTTPClient",
    "HTTPTransport",
    "Target",
    "translate_error",
    "safe_url",
    "status_error",
    "read_limited",
    "read_error_body",
    "discard",
    "shutdown_response",
    "USER_AGENT",
    "ACCEPT_POST",
    "ACCEPT_SSE",
]

USER_AGENT = f"mcpsync/{__version__} python-requests/{requests.__version__}"
ACCEPT_POST = "application/json, text/event-stream"
ACCEPT_SSE = "text/event-stream"
#: bytes of an error reply's body read for its message
ERROR_BODY_LIMIT = 64 * 1024


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


class HTTPClient:
    """One ``requests.Session`` (ours or the caller's) and the fast path around it.

    ``request()`` returns an open, unread response (``status``, ``headers`` with a
    case-insensitive ``get``, ``read``, ``read1``, ``close``, ``release_conn``) or raises a
    translated error. Same-origin 307/308 redirects are followed (at most 3).

    The fast path (``fast``): when the session is ours, there is no ``auth`` or it is a
    :class:`~.requestauth.RequestAuth` (mcpsync's ``OAuth``: it adds its headers and
    answers challenges itself, a re-send at a time), no proxy for the URL, no .netrc entry,
    and the session's adapter is a plain ``HTTPAdapter``, requests go over a small pool of
    keep-alive ``http.client`` connections set up with the TLS settings requests would use.
    Any other ``auth`` goes through requests. Cookies stay on the fast path: a
    ``Set-Cookie`` reply's cookies go into the session's jar (``http.cookiejar``'s rules:
    domain, path, expiry, ``Secure``), and each request carries the jar's ``Cookie`` header
    for its URL, unless the caller's headers have one (as requests does).
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
        self._cookies = Cookies(self.session.cookies)  # kept and sent on the fast path
        self._request_auth = auth if isinstance(auth, RequestAuth) else None
        if self.owned and (auth is None or self._request_auth is not None):
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
        on_conn: Callable[[Callable[[], None]], None] | None = None,
    ) -> tuple[Any, Target]:
        """Send one request; return (open response, final target after redirects).
        ``on_conn(cut)``: on the fast path, given each connection's ``abort`` once it is
        connected and before the request is written (another thread may then cut it).
        On the fast path ``read_timeout`` also bounds the whole exchange: writing the request
        (and its re-sends: redirects, auth) and reading a reply that is not an event stream,
        to its end (``RequestTimeout``; the connection is dropped)."""
        deadline = None if read_timeout is None else time.monotonic() + read_timeout
        for _ in range(4):
            response = self._send(method, target, headers, body, read_timeout, on_conn, deadline)
            if response.status not in (307, 308):
                return response, target
            location = response.headers.get("location")
            discard(response)
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
        on_conn: Callable[[Callable[[], None]], None] | None = None,
        deadline: float | None = None,
    ) -> Any:
        pool = self._pool
        try:
            if pool is not None and target.origin == self.target.origin:
                cookies = self._cookies
                cookie = cookies.field(target.url, headers) if cookies.active else None
                if self._request_auth is None:
                    try:
                        response = pool.urlopen(
                            method, target.path, headers, body, read_timeout, None, cookie,
                            on_conn, deadline,
                        )  # fmt: skip
                    except _Undelivered:  # never reached the server: once more, a new connection
                        response = pool.urlopen(
                            method, target.path, headers, body, read_timeout, None, cookie,
                            on_conn, deadline,
                        )  # fmt: skip
                else:
                    response = self._send_with_auth(
                        self._request_auth, pool, method, target, headers, body, read_timeout,
                        cookie, on_conn, deadline,
                    )  # fmt: skip
                if response.headers.get("set-cookie") is not None:
                    # Cookies (e.g. load-balancer stickiness): kept, sent from now on
                    cookies.keep(target.url, response)
                return response
            connect, read = self.connect_timeout, read_timeout
            if deadline is not None:  # urllib3 writes the body under the connect timeout
                left = max(deadline - time.monotonic(), 0.001)
                connect = left if connect is None else min(connect, left)
                read = left if read is None else min(read, left)
            reply = self.session.request(
                method,
                target.url,
                data=body,
                headers=headers,
                auth=self.auth,
                timeout=(connect, read),
                stream=True,
                allow_redirects=False,
                verify=self.verify,
                cert=self.cert,
            )
            if reply._content_consumed:  # a response hook read it already
                return _Buffered(reply)
            raw = reply.raw
            ctype = raw.headers.get("content-type") or ""
            if deadline is not None and not ctype.lstrip().lower().startswith(ACCEPT_SSE):
                raw._mcpsync_deadline = deadline  # its body is read within it (``_read``)
            return raw
        except MCPSyncError:
            raise
        except _ConnectTimeout:
            raise RequestTimeout(f"{method} {safe_url(target.url)}: connecting timed out") from None
        except HeadLost as exc:  # the fast pool's: the connection ended before a reply head
            reset = isinstance(exc.__cause__, ConnectionResetError) and not isinstance(
                exc.__cause__, http.client.RemoteDisconnected
            )
            raise ConnectError(
                f"{method} {safe_url(target.url)}: the server "
                f"{'reset' if reset else 'closed'} the connection before its reply; it may have "
                "received the request, so it was not sent again"
            ) from None
        except (
            requests.RequestException,
            urllib3.exceptions.HTTPError,
            OSError,
            http.client.HTTPException,
            ValueError,
        ) as exc:
            raise translate_error(exc, f"{method} {safe_url(target.url)}") from None

    @staticmethod
    def _send_with_auth(
        auth: RequestAuth,
        pool: _FastPool,
        method: str,
        target: Target,
        headers: Mapping[str, str],
        body: bytes | None,
        read_timeout: float | None,
        cookie: Mapping[str, str] | None = None,
        on_conn: Callable[[Callable[[], None]], None] | None = None,
        deadline: float | None = None,
    ) -> Any:
        """The fast path with a RequestAuth: its headers on each send, its answer to a
        401/403 or ``DPoP-Nonce`` reply, at most ``auth.max_resends`` re-sends. ``cookie``:
        the jar's ``Cookie`` field, sent with each."""
        state: dict[str, Any] = {}
        sent = partial(auth.request_sent, method, target.url, state)
        undelivered = False
        for resends in range(auth.max_resends + 1):
            while True:
                added = auth.request_headers(method, target.url, state)
                base: Mapping[str, str]
                extra: Mapping[str, str] | None
                if added and any(name in headers for name in added):
                    # the auth's value replaces the caller's
                    base, extra = {**headers, **added}, cookie
                else:
                    base, extra = headers, added  # the pool caches the head of ``headers`` alone
                    if cookie:
                        extra = {**extra, **cookie} if extra else cookie
                try:
                    response = pool.urlopen(
                        method, target.path, base, body, read_timeout, sent, extra, on_conn,
                        deadline,
                    )  # fmt: skip
                except _Undelivered:
                    if undelivered:
                        raise
                    undelivered = True  # never reached the server: once more, new headers
                    continue
                break
            status = response.status
            if status != 401 and status != 403 and response.headers.get("dpop-nonce") is None:
                return response
            try:
                again = auth.answer(method, target.url, status, response.headers, added, state)
            except BaseException:
                response.close()
                raise
            if not again or resends == auth.max_resends:
                return response
            discard(response)
        return response  # not reached: the loop returns

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        if self.owned:
            self.session.close()


def discard(response: Any) -> None:
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


def _read(response: Any, amt: int | None = None) -> bytes:
    """``response.read(amt)`` (None: to the end), decoded; a reply of the requests path
    that carries its request's deadline (``_mcpsync_deadline``) is read a piece at a time,
    its socket's timeout cut to what is left before each, so a reply the server trickles
    ends at the deadline (``DeadlinePassed``; the response is closed), not after one read
    timeout per piece. (The fast path's replies bound their reads themselves.)"""
    deadline = (
        None if type(response) is _FastReply else getattr(response, "_mcpsync_deadline", None)
    )
    if deadline is None:
        if amt is None:
            return response.read(decode_content=True)
        return response.read(amt, decode_content=True)
    sock = _socket_of(response)
    parts: list[bytes] = []
    got = 0
    try:
        while amt is None or got < amt:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DeadlinePassed("the request's timeout ran out while reading the reply")
            if sock is not None:
                sock.settimeout(left)
            size = 65536 if amt is None else min(65536, amt - got)
            piece = response.read1(size, decode_content=True)
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
    except BaseException:
        response.close()  # never reused
        raise
    return b"".join(parts)


def read_error_body(response: Any) -> bytes:
    """At most ``ERROR_BODY_LIMIT`` bytes of an error reply's body (b"" when it cannot be
    read: the status says enough); the response is closed."""
    try:
        return _read(response, ERROR_BODY_LIMIT)
    except Exception:  # noqa: BLE001 - the status says enough
        return b""
    finally:
        response.close()


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
            return _read(response)
        data = _read(response, limit + 1)
        if len(data) > limit:
            response.close()
            raise ProtocolError(f"{what}: reply exceeds the {limit}-byte limit")
        rest = _read(response)  # EOF: lets urllib3 reuse the connection
        return data + rest if rest else data
    except MCPSyncError:
        raise
    except (urllib3.exceptions.HTTPError, OSError, http.client.HTTPException, ValueError) as exc:
        raise translate_error(exc, what) from None


def _socket_of(response: Any) -> Any:
    """The socket ``response`` reads from (None: not found)."""
    conn = getattr(response, "_conn", None) or getattr(response, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is None:  # released already: reach the socket through the body's file object
        inner = getattr(response, "_response", None) or getattr(response, "_fp", None)
        sock = getattr(getattr(getattr(inner, "fp", None), "raw", None), "_sock", None)
    return sock


def shutdown_response(response: Any) -> None:
    """Make a blocked read on ``response`` return (from another thread): shut its socket down."""
    sock = _socket_of(response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass


class HTTPTransport(Transport):
    """What both HTTP transports share: one ``HTTPClient``, the target URL, the name and
    the bounds, and the closing flag (reports of garbage are dropped once closing)."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None,
        http_session: requests.Session | None,
        auth: requests.auth.AuthBase | None,
        timeout: float | None,
        connect_timeout: float | None,
        verify: bool | str | None,
        cert: str | tuple[str, str] | None,
        max_event_bytes: int,
        name: str | None,
        sse_read_timeout: float | None,
    ) -> None:
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
        self.sse_read_timeout = sse_read_timeout
        self._closing = threading.Event()

    def _report(self, error: BaseException) -> None:
        if not self._closing.is_set():
            super()._report(error)
