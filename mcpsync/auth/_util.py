"""Small helpers shared by the auth modules: URL origins, transport security, redaction.

Owns: nothing stateful. Kept private; the public API is in ``mcpsync.auth``.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from ..errors import AuthError
from ..transports.http.fetch import NOT_JSON, Deadline, fetch, load_json

__all__ = [
    "log",
    "origin",
    "same_origin",
    "is_loopback_url",
    "require_secure",
    "redact",
    "canonical_server_url",
    "get_json",
    "short",
]

log = logging.getLogger("mcpsync.auth")

_DEFAULT_PORTS = {"http": 80, "https": 443}


@functools.lru_cache(maxsize=256)  # asked twice per request on the fast path
def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with scheme/host lower-cased and default ports filled in."""
    p = urlsplit(url)
    scheme = (p.scheme or "").lower()
    host = (p.hostname or "").lower()
    try:
        port = p.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        port = None
    return scheme, host, port


def same_origin(a: str, b: str) -> bool:
    return origin(a) == origin(b)


def is_loopback_url(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_secure(url: str, what: str, allow_insecure: bool) -> None:
    """Refuse plain-http authorization endpoints except on loopback (or when allowed)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https":
        return
    if scheme == "http" and (allow_insecure or is_loopback_url(url)):
        return
    raise AuthError(f"refusing {what} {short(url)}: authorization endpoints must use https")


def short(url: str) -> str:
    """The URL without query and fragment (for messages: queries may carry state or codes)."""
    try:
        p = urlsplit(url)
        return urlunsplit((p.scheme, p.netloc, p.path, "", ""))
    except ValueError:
        return "<invalid url>"


def redact(text: str, secrets: list[str | None] | tuple[str | None, ...]) -> str:
    """Replace every occurrence of a secret in text (e.g. an AS echoing a code)."""
    for s in secrets:
        if s and len(s) >= 4 and s in text:
            text = text.replace(s, "[redacted]")
    return text


def canonical_server_url(url: str) -> str:
    """The MCP server URL as a resource identifier: lower-case scheme/host, no fragment,
    no query, no trailing slash on an empty path (RFC 8707 / MCP canonical URI)."""
    p = urlsplit(url)
    scheme = p.scheme.lower()
    netloc = p.netloc
    if p.hostname:
        host = p.hostname.lower()
        if ":" in host:  # IPv6
            host = f"[{host}]"
        netloc = host + (f":{p.port}" if p.port else "")
    path = p.path
    if path == "/":
        path = ""
    return urlunsplit((scheme, netloc, path, "", ""))


def get_json(
    http: requests.Session,
    url: str,
    *,
    timeout: float,
    what: str,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """GET a JSON document within ``timeout`` (the whole GET, its redirects and its body:
    ``mcpsync.transports.http.fetch``'s rules). Returns (status, document-or-None); raises
    AuthError on network failure, the timeout, a body over 1 MiB or nested deeper than 64
    levels. Non-JSON 200 replies give (200, None)."""
    reply = fetch(
        http, url, deadline=Deadline.checked(timeout), what=what, error=AuthError,
        headers=headers, max_redirects=0,
    )  # fmt: skip
    if reply.status == 0:
        raise AuthError(f"could not fetch {what} from {short(url)}: {reply.problem}")
    if reply.status != 200:
        return reply.status, None
    document = load_json(reply.body, what=what, url=url, error=AuthError, lenient=True)
    return 200, None if document is NOT_JSON else document
