"""A bounded fetch of a small document a server named: the wire rules, written once.

Owns: ``Deadline`` (one point in time for a whole operation: every place it tries, every
redirect, every read), ``fetch`` (one HTTP request and its reply body, bounded by that
deadline WHILE the body is read, the body capped while it is read, redirects counted and
each one checked by the caller before it is followed) and ``load_json`` (a document parsed
with a nesting limit). Used wherever mcpsync GETs (or POSTs to) a URL on a server's word:
Server Cards and catalogs (``mcpsync.cards``), protected resource and authorization server
metadata (``mcpsync.auth.discovery``), client registration (``mcpsync.auth.registration``).

Every failure is raised as the caller's own typed error (``error``, e.g. ``CardError`` or
``AuthError``; ``timeout_error`` for the deadline), with a message naming what was fetched,
where, and what was wrong. A place that cannot be reached at all (refused, reset, DNS) is not
an error here: ``Fetched.status`` is 0 and ``Fetched.problem`` says why, so a caller that
tries several places can go on to the next one.

How the deadline holds with ``requests``: each request is sent with connect and read timeouts
of the time left; once the headers are in, the body is read one network read at a time
(``read1``) with the socket's timeout set to the time left before each read, so a server
that trickles its body (one byte every half second: each read returns, none times out) is cut
at the deadline, not after the whole body. The status line and headers are read within the
deadline too: ``headbound.send_bounded`` cuts the connection when it passes (with requests'
plain adapter; a caller's own adapter bounds them per read).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests
import urllib3.exceptions

from ...errors import ConfigError, MCPSyncError
from .headbound import send_bounded

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "NOT_JSON",
    "Deadline",
    "Fetched",
    "fetch",
    "load_json",
    "read_body",
    "short",
]

#: the size cap of a document (cards, catalogs, metadata): checked while it is read
MAX_BYTES = 1024 * 1024
#: nesting deeper than this is refused (real documents nest a handful of levels)
MAX_DEPTH = 64
_REDIRECTS = (301, 302, 303, 307, 308)
_CHUNK = 64 * 1024

ErrorType = Callable[[str], MCPSyncError]


class Deadline:
    """One deadline for a whole operation (``timeout`` seconds from now)."""

    __slots__ = ("at", "timeout")

    def __init__(self, timeout: float) -> None:
        self.timeout = float(timeout)
        self.at = time.monotonic() + self.timeout

    @classmethod
    def checked(cls, timeout: Any, name: str = "timeout") -> Deadline:
        """A deadline ``timeout`` seconds from now; ``ConfigError`` unless that is a finite
        number of seconds above 0."""
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise ConfigError(f"{name} must be a number of seconds above 0, not {timeout!r}")
        return cls(timeout)

    def left(self) -> float:
        """Seconds left (0 or less once it has passed)."""
        return self.at - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.left() <= 0

    def words(self) -> str:
        """``timeout=2 s``: how messages name the bound."""
        return f"timeout={self.timeout:g} s"


def short(url: str) -> str:
    """The URL without query and fragment (for messages)."""
    try:
        p = urlsplit(url)
        return urlunsplit((p.scheme, p.netloc, p.path, "", ""))
    except ValueError:
        return "<invalid url>"


@dataclass(frozen=True)
class Fetched:
    """A reply: ``status`` 0 when the place could not be reached (``problem`` says why).
    ``headers`` is case-insensitive (requests' own mapping)."""

    url: str
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    problem: str = ""


def _timed_out(deadline: Deadline, what: str, url: str, error: ErrorType) -> MCPSyncError:
    return error(f"{what} at {short(url)}: not read within {deadline.words()}")


def _socket(response: requests.Response) -> Any:
    """The reply's socket when requests/urllib3 expose it (None under mocks, other adapters)."""
    connection = getattr(response.raw, "connection", None)
    return getattr(connection, "sock", None)


def read_body(
    response: requests.Response,
    url: str,
    *,
    deadline: Deadline,
    max_bytes: int,
    what: str,
    error: ErrorType,
    timeout_error: ErrorType,
) -> bytes:
    """The body of ``response`` (sent with ``stream=True``), read within ``deadline`` one
    network read at a time, and at most ``max_bytes`` of it (else ``error``)."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise error(f"{what} at {short(url)} is larger than {max_bytes} bytes; not read")
    raw = response.raw
    sock = _socket(response)
    read1 = getattr(raw, "read1", None)
    body = bytearray()
    while True:
        left = deadline.left()
        if left <= 0:
            raise _timed_out(deadline, what, url, timeout_error)
        broken = ""
        try:
            if sock is not None:
                sock.settimeout(left)
            piece = read1(_CHUNK) if read1 is not None else raw.read(_CHUNK)
        except (urllib3.exceptions.HTTPError, requests.RequestException, OSError) as exc:
            broken = type(exc).__name__
        if broken:  # raised here, not in the except: no exception rides along as __context__
            if deadline.expired:
                raise _timed_out(deadline, what, url, timeout_error)
            raise error(f"could not read {what} from {short(url)}: {broken}")
        if not piece:
            return bytes(body)
        body += piece
        if len(body) > max_bytes:
            raise error(f"{what} at {short(url)} is larger than {max_bytes} bytes; not read")


def fetch(
    http: requests.Session,
    url: str,
    *,
    deadline: Deadline,
    what: str,
    error: ErrorType,
    timeout_error: ErrorType | None = None,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    json_body: Any = None,
    data: Mapping[str, str] | str | None = None,
    max_bytes: int = MAX_BYTES,
    max_redirects: int = 3,
    check_redirect: Callable[[str, str], None] | None = None,
    body_for: Collection[int] | None = (200,),
) -> Fetched:
    """Send one request to ``url`` (a body as ``json_body`` or form ``data``) and read its
    reply within ``deadline``.

    Redirects (at most ``max_redirects``; 0: a redirect is returned as it is) are followed
    after ``check_redirect(current, target)`` had its say (it raises to refuse one); a
    redirect to anything but http(s), or from https to http, is always refused. The body is
    read for the statuses in ``body_for`` (None: every status), up to ``max_bytes``. Raises
    ``error`` (too large, a broken body, a refused redirect, too many redirects) or
    ``timeout_error`` (the deadline, whenever it passes); returns status 0 when the place
    cannot be reached.
    """
    timeout_error = timeout_error or error
    sent = {"Accept": "application/json", "Accept-Encoding": "identity", **(headers or {})}
    current = url
    for _ in range(max_redirects + 1):
        left = deadline.left()
        if left <= 0:
            raise _timed_out(deadline, what, current, timeout_error)
        unreachable: requests.RequestException | None = None
        try:
            reply = send_bounded(
                http, method, current, by=deadline.at, headers=sent, json_body=json_body,
                data=data, timeout=(left, left),
            )  # fmt: skip
        except requests.RequestException as exc:  # it holds the request (a body, a secret):
            unreachable = exc  # kept out of the error's __context__, dropped below
        if unreachable is not None:
            timed_out = deadline.expired or isinstance(unreachable, requests.Timeout)
            problem, unreachable = type(unreachable).__name__, None
            if timed_out:
                raise _timed_out(deadline, what, current, timeout_error)
            return Fetched(current, 0, problem=problem)
        with reply as response:
            status = response.status_code
            location = response.headers.get("Location")
            if status in _REDIRECTS and location and max_redirects > 0:
                target = urljoin(current, location)
                scheme, was = urlsplit(target).scheme.lower(), urlsplit(current).scheme.lower()
                if scheme not in ("http", "https") or (was == "https" and scheme != "https"):
                    raise error(f"{what} at {short(current)}: refusing a redirect to {target!r}")
                if check_redirect is not None:
                    check_redirect(current, target)
                current = target
                if method == "POST" and status in (301, 302, 303):
                    method, json_body, data = "GET", None, None
                continue
            body = b""
            if body_for is None or status in body_for:
                body = read_body(
                    response, current, deadline=deadline, max_bytes=max_bytes, what=what,
                    error=error, timeout_error=timeout_error,
                )  # fmt: skip
            return Fetched(current, status, response.headers, body)
    raise error(f"{what} at {short(url)}: more than {max_redirects} redirects")


def _depth(document: Any) -> int:
    """How deeply ``document`` nests (walked without recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


#: what ``load_json(..., lenient=True)`` returns for a body that is not JSON
NOT_JSON: Any = object()


def load_json(body: bytes, *, what: str, url: str, error: ErrorType, lenient: bool = False) -> Any:
    """The JSON value in ``body``. Nesting deeper than ``MAX_DEPTH`` (including too deep for
    the parser itself) raises ``error``; a body that is not JSON raises ``error`` too, or
    returns ``NOT_JSON`` when ``lenient`` (e.g. an HTML page at a well-known path)."""
    # every error is raised outside the except: the parser's exception holds the whole
    # document (a registration reply holds a client secret) and must not ride along
    problem = ""
    try:
        document = json.loads(body.decode("utf-8"))
    except RecursionError:
        problem = "deep"
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, an integer too long
        problem = str(exc)[:200]
    if problem and problem != "deep":
        if lenient:
            return NOT_JSON
        raise error(f"{what} at {short(url)} is not valid JSON ({problem})")
    if problem == "deep" or _depth(document) > MAX_DEPTH:
        raise error(f"{what} at {short(url)} is nested deeper than {MAX_DEPTH} levels; refused")
    return document
