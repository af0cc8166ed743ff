"""The interface an auth object declares to ride the fast HTTP path.

Owns: :class:`RequestAuth`. The HTTP transports know nothing of OAuth: an auth object
that subclasses this interface (``mcpsync.auth.OAuth`` does) gives the headers for each
request itself, so requests go over the fast keep-alive pool instead of through
``requests``' hook machinery. Any other ``requests`` auth object (``AuthBase``) keeps
going through ``requests`` as before. The check is nominal (``isinstance`` of this base
class), never an attribute probe. When the fast pool does not apply (a proxy, a caller's
``requests.Session``, cookies) the object is handed to ``requests``: so it should be a
``requests.auth.AuthBase`` too, as ``OAuth`` is.

The contract, per request of the transport:

1. ``request_headers(method, url, state)``: the headers to add (e.g. ``Authorization``
   and a fresh ``DPoP`` proof). Called once per send; a value it returns is never re-used.
   ``state`` is a dict the transport makes empty for each request and passes, the same
   one, to every call of both methods for that request and its re-sends.
2. For every reply with status 401 or 403, or carrying a ``DPoP-Nonce`` header, the
   transport calls ``answer(method, url, status, headers, sent, state)``. It may block
   (it runs the authorization flow, bounded by the object's own timeouts) and raises an
   ``mcpsync.errors.MCPSyncError`` (an ``AuthError``) when it gives up. True means:
   discard this reply and send the same request once more, with new ``request_headers``.
   The transport re-sends at most ``max_resends`` times per request, then returns the
   last reply as it is.
3. ``request_sent(method, url, state)``: called on the fast path after each attempt was
   written and before its reply is read (default: nothing). It must be quick and must
   not raise; an object may use the wait for work the next request needs (``OAuth``
   signs the next DPoP proof there while the server answers).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["RequestAuth", "ReplyHeaders"]


class ReplyHeaders(Protocol):
    """A reply's headers: a case-insensitive ``get`` (``http.client``'s and requests' have one)."""

    def get(self, name: str, /) -> Any: ...


class RequestAuth(abc.ABC):
    """Adds credentials to a request and answers the server's challenges (see module doc)."""

    @property
    def max_resends(self) -> int:
        """Re-sends per request the transport allows (an authorization, then a nonce, ...)."""
        return 4

    @property
    def flow_seconds(self) -> float | None:
        """Seconds spent so far in authorization flows run while answering challenges (a
        person approving, discovery, tokens), which a session's ``connect_timeout`` does
        not count; None (the default): this object runs none."""
        return None

    @abc.abstractmethod
    def request_headers(self, method: str, url: str, state: dict[str, Any]) -> Mapping[str, str]:
        """Headers for one request to ``url`` (empty for a URL the object does not guard)."""

    @abc.abstractmethod
    def answer(
        self,
        method: str,
        url: str,
        status: int,
        headers: ReplyHeaders,
        sent: Mapping[str, str],
        state: dict[str, Any],
    ) -> bool:
        """Handle a 401/403 reply or a ``DPoP-Nonce`` header; True: re-send the request.

        ``sent`` holds the headers ``request_headers`` gave for this attempt; ``state`` is
        the request's dict (see the module doc)."""

    def request_sent(self, method: str, url: str, state: dict[str, Any]) -> None:
        """The attempt whose headers ``request_headers`` gave is on the wire; its reply is
        not read yet (see the module doc). Default: nothing."""
        return None
