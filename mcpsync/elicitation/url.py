"""URL elicitation: what a link request is, which links may be opened, and the -32042 flow.

Owns: ``URLRequest`` (one out-of-band request: message, URL, elicitation id, the domain a
person must see), ``openable`` (only ``https:`` links, and ``http:`` to a loopback host,
are ever handed to a browser), ``clean_text`` (server text with terminal control
characters removed), ``url_requests`` (the ``URLRequest`` values of a
``mcpsync.errors.URLElicitationRequired``, the 2025-11-25 error ``-32042`` that calls raise)
and ``url_required`` (the typed error from a plain ``ServerError``),
and ``retry_after_urls`` (show each URL through a handler, and call again only when the
person says every one is done).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from ..errors import ServerError, URLElicitationRequired

__all__ = [
    "URL_ELICITATION_REQUIRED",
    "URLElicitationRequired",
    "URLRequest",
    "clean_text",
    "openable",
    "retry_after_urls",
    "url_required",
    "url_requests",
]

#: the JSON-RPC error code of URLElicitationRequiredError (2025-11-25)
URL_ELICITATION_REQUIRED = -32042

T = TypeVar("T")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: Any, limit: int = 2000) -> str:
    """Server text safe to print: no control or bidi characters, at most ``limit`` chars."""
    out = _CONTROL.sub("", str(text if text is not None else ""))
    return out if len(out) <= limit else out[: limit - 1] + "…"


@dataclass(frozen=True)
class URLRequest:
    """One URL elicitation (``mode: "url"``)."""

    url: str
    message: str = ""
    elicitation_id: str = ""

    @property
    def domain(self) -> str:
        """The host a person should check before opening (IDNA-decoded when possible)."""
        host = urlsplit(self.url).hostname or ""
        try:
            return (
                host.encode("ascii").decode("idna")
                if host.startswith("xn--") or ".xn--" in host
                else host
            )
        except UnicodeError:
            return host

    @classmethod
    def of(cls, params: dict[str, Any]) -> URLRequest:
        return cls(
            url=str(params.get("url") or ""),
            message=str(params.get("message") or ""),
            elicitation_id=str(params.get("elicitationId") or ""),
        )


def openable(url: str) -> bool:
    """Whether ``url`` may be given to a browser: ``https:``, or ``http:`` to a loopback host;
    never ``javascript:``, ``file:``, ``data:`` or anything with credentials in it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.username or parts.password or not parts.hostname:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme == "http":
        host = parts.hostname
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return False


def url_requests(error: URLElicitationRequired) -> list[URLRequest]:
    """The ``URLRequest`` values a -32042 error carries, in the server's order."""
    return [URLRequest.of(item) for item in error.elicitations]


def url_required(error: BaseException) -> URLElicitationRequired | None:
    """The typed -32042 error for ``error`` (a ``ServerError`` from an older path too), or None."""
    if isinstance(error, URLElicitationRequired):
        return error
    if not isinstance(error, ServerError) or error.code != URL_ELICITATION_REQUIRED:
        return None
    typed = URLElicitationRequired(error.message, error.data, method=error.method)
    typed.__cause__ = error
    return typed


def retry_after_urls(
    call: Callable[[], T],
    ask: Callable[[URLRequest], str],
    *,
    attempts: int = 2,
) -> T:
    """``call()``; when it raises -32042, show each URL through ``ask`` (it returns the
    person's action: "accept" once done, "decline" or "cancel") and call again only if every
    one was accepted, at most ``attempts`` times in all. Otherwise the typed error is raised."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except ServerError as exc:
            typed = url_required(exc)
            if typed is None:
                raise
            requests = url_requests(typed)
            if attempt == attempts or not requests:
                raise typed from exc
            if any(ask(request) != "accept" for request in requests):
                raise typed from exc
    raise AssertionError("unreachable")  # pragma: no cover
