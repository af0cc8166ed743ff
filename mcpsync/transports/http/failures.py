"""Failures of the HTTP transports, as ``mcpsync.errors`` types and fit for messages.

Owns: ``safe_url`` (a URL for messages: no user-info, query values hidden),
``translate_error`` (a requests/urllib3/socket failure, or the fast path's
``DeadlinePassed``, as an ``mcpsync.errors`` type naming what was being done and the
innermost reason), and ``status_error`` (an ``HTTPStatusError`` with a printable excerpt of
the body). ``client`` re-exports all three.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3

from ...errors import (
    ConfigError,
    ConnectError,
    DNSError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
    TLSError,
)
from ...jsonrpc import excerpt, parse_json
from .fastsocket import DeadlinePassed

__all__ = ["safe_url", "translate_error", "status_error"]


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
        hint = (
            "; a private CA: verify=<CA bundle> (mcpsync --cacert FILE)"
            if isinstance(inner, ssl.SSLCertVerificationError)
            else ""
        )
        return TLSError(f"{what}: TLS failure ({str(detail)[:200] or 'handshake failed'}{hint})")
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
    passed = find(DeadlinePassed)
    if passed is not None:  # the fast path's bound on the whole request
        return RequestTimeout(f"{what}: {passed}")
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


def status_error(status: int, method: str, url: str, body: bytes) -> HTTPStatusError:
    """An ``HTTPStatusError`` with a short, printable body excerpt; ``.payload`` = parsed JSON or None."""
    payload = None
    if body[:1] in (b"{", b"["):
        try:
            payload = parse_json(body)
        except ProtocolError:  # garbage, invalid UTF-8, nesting too deep: the status says enough
            pass
    shown = safe_url(url)
    return HTTPStatusError(
        status,
        shown,
        excerpt(body, 200) if body else "",
        message=f"HTTP {status} from {method} {shown}",
        payload=payload,
    )
