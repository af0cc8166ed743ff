"""Every exception mcpsync raises, under one root.

Owns: the exception hierarchy. Each layer translates its low-level errors (OSError,
requests exceptions, JSON errors) into one of these at its boundary, so callers can
catch ``MCPSyncError`` for everything, or a builtin (``TimeoutError``,
``ConnectionError``, ``ValueError``) through the mixins.

Security: no exception text may carry a token, a client secret or an authorization code.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "STDERR_TAIL",
    "MCPSyncError",
    "ConfigError",
    "UnsafePathError",
    "LockTimeout",
    "TransportError",
    "ServerExited",
    "ServerRestarted",
    "RestartLimitReached",
    "ConnectError",
    "DNSError",
    "TLSError",
    "HTTPStatusError",
    "SessionExpired",
    "SessionKeptExpiring",
    "ProtocolError",
    "HandshakeError",
    "VersionMismatch",
    "CapabilityError",
    "RequestTimeout",
    "WriteTimeout",
    "RequestCancelled",
    "ServerError",
    "URLElicitationRequired",
    "SessionClosed",
    "ForkedError",
    "CassetteError",
    "CassetteMismatch",
    "AuthError",
    "AuthServerUnreachable",
    "TokenError",
    "InvalidGrant",
    "UnauthorizedClient",
    "InvalidScope",
    "AccessDenied",
    "ExpiredToken",
]


class MCPSyncError(Exception):
    """Root of every error mcpsync raises."""


class ConfigError(MCPSyncError, ValueError):
    """A configuration entry or argument is wrong; the message names where and what."""


class UnsafePathError(ConfigError):
    """A folder or file mcpsync keeps per-user data in is not safe to use: owned by another
    user, writable by group or others, or a symbolic link; nothing was read or written.
    ``path`` is the folder or file, ``reason`` what is wrong with it."""

    def __init__(self, message: str, *, path: str = "", reason: str = "") -> None:
        self.path = path
        self.reason = reason
        super().__init__(message)


class LockTimeout(MCPSyncError, TimeoutError):
    """A lock shared with other threads and processes (a token store's ``.lock`` file) was
    not obtained within its bound; ``path`` names the lock file, ``timeout`` the bound."""

    def __init__(self, message: str, *, path: str = "", timeout: float = 0.0) -> None:
        self.path = path
        self.timeout = timeout
        super().__init__(message)


class TransportError(MCPSyncError, ConnectionError):
    """The byte stream to the server failed or ended."""

    #: set by the bring-up when a stdio server died of the ``server/discover`` probe: the
    #: caller starts it once more, now remembered as a legacy server
    restart_legacy: bool = False


#: the heading under which a message carries a server's last stderr lines (errors, bring-up
#: failures, the pytest plugin; the command line drops the section when it showed them live)
STDERR_TAIL = "--- last stderr lines ---"


class ServerExited(TransportError):
    """A stdio server process ended; carries its exit code and its last stderr lines."""

    def __init__(
        self, message: str, *, exit_code: int | None = None, stderr_tail: str = ""
    ) -> None:
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail
        full = message
        if exit_code is not None:
            full += f" (exit code {exit_code})"
        if stderr_tail:
            full += f"\n{STDERR_TAIL}\n" + stderr_tail
        super().__init__(full)


class ServerRestarted(ServerExited):
    """The server stopped (a stdio exit, an HTTP server unreachable) while this call was in
    flight, and the session's restart policy brings it up again; the call was not re-sent.
    ``reason``: the error that ended it (also ``__cause__``); ``method``: the call's method."""

    def __init__(self, message: str, *, reason: BaseException, method: str | None = None) -> None:
        self.reason = reason
        self.method = method
        exited = reason if isinstance(reason, ServerExited) else None
        super().__init__(
            message,
            exit_code=exited.exit_code if exited else None,
            stderr_tail=exited.stderr_tail if exited else "",
        )


class ConnectError(TransportError):
    """The server could not be reached (connection refused, reset before a reply)."""


class DNSError(ConnectError):
    """The server's host name did not resolve."""


class TLSError(ConnectError):
    """The TLS handshake or certificate verification failed."""


class HTTPStatusError(TransportError):
    """An HTTP reply with an unexpected status; carries status, URL and a body excerpt."""

    #: the reply's body parsed as JSON, when it was JSON (an HTTP transport sets it), else None
    payload: Any = None

    def __init__(
        self,
        status: int,
        url: str,
        body_excerpt: str = "",
        message: str = "",
        *,
        payload: Any = None,
    ) -> None:
        self.status = status
        self.url = url
        self.body_excerpt = body_excerpt
        self.payload = payload
        text = message or f"HTTP {status} from {url}"
        if body_excerpt:
            text += f": {body_excerpt}"
        super().__init__(text)


class SessionExpired(TransportError):
    """The server no longer knows our HTTP session (404 on a request with a session id)."""


class SessionKeptExpiring(SessionExpired):
    """The HTTP session expired again after each re-initialization: given up, nothing
    more is re-initialized for this request. ``reasons``: the expiries it met, oldest
    first (bounds: ``transports.http.session``)."""

    def __init__(self, message: str, reasons: list[SessionExpired]) -> None:
        super().__init__(message)
        self.reasons = reasons


class ProtocolError(MCPSyncError):
    """The peer broke the protocol: garbage on the wire, a malformed message, a bad result."""


class HandshakeError(MCPSyncError):
    """Bring-up failed after bytes could flow (initialize or discovery)."""


class VersionMismatch(HandshakeError):
    """Client and server share no protocol version."""

    def __init__(self, client_versions: tuple[str, ...] | list[str], server_version: str) -> None:
        self.client_versions = tuple(client_versions)
        self.server_version = server_version
        super().__init__(
            f"server chose protocol version {server_version!r}; "
            f"this client supports {', '.join(self.client_versions)}"
        )


class CapabilityError(MCPSyncError):
    """A method needs a capability the peer did not advertise; nothing was sent."""


class RequestTimeout(MCPSyncError, TimeoutError):
    """No response within the request's timeout; the server was sent a cancellation."""


class WriteTimeout(RequestTimeout, TransportError):
    """The server did not take the request off its input in time (a stdio server that stopped
    reading stdin): the call's timeout ran out while writing. Both a ``RequestTimeout`` (and so
    a ``TimeoutError``) and a ``TransportError``."""


class RequestCancelled(MCPSyncError):
    """The request was cancelled by the caller (cancel(), Ctrl-C) or by the server."""


class ServerError(MCPSyncError):
    """The server answered with a JSON-RPC error; keeps code, message and data."""

    def __init__(
        self, code: int, message: str, data: Any = None, *, method: str | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.data = data
        self.method = method
        where = f" to {method}" if method else ""
        super().__init__(f"server error {code}{where}: {message}")


class URLElicitationRequired(ServerError):
    """-32042 (2025-11-25): the server needs the person to open one or more URLs first.

    ``elicitations``: the URL requests the error carries (dicts with ``url``, ``message``,
    ``elicitationId``), in the server's order; ``urls`` their URLs. The message names each
    URL without its query or fragment. ``mcpsync.elicitation.retry_after_urls`` shows them
    to a person and calls again once every one is done.
    """

    def __init__(self, message: str, data: Any = None, *, method: str | None = None) -> None:
        super().__init__(-32042, message, data, method=method)
        items = data.get("elicitations") if isinstance(data, dict) else None
        self.elicitations: list[dict[str, Any]] = [
            dict(i) for i in items or [] if isinstance(i, dict) and isinstance(i.get("url"), str)
        ]
        if self.elicitations:
            shown = ", ".join(u.split("?", 1)[0].split("#", 1)[0][:200] for u in self.urls)
            self.args = (f"{self.args[0]} (open: {shown})",)

    @property
    def urls(self) -> list[str]:
        return [str(i["url"]) for i in self.elicitations]


class SessionClosed(MCPSyncError):
    """The session was closed (by the caller or because its transport ended)."""


class ForkedError(SessionClosed):
    """A session, host or transport used in a child of ``os.fork()``: it belongs to the
    process that opened it (``owner_pid``); this one (``pid``) shares its pipes and sockets
    but none of its threads. Open a new one in the child (``mcpsync.runtime.lifecycle``)."""

    def __init__(self, what: str, owner_pid: int, pid: int) -> None:
        self.owner_pid = owner_pid
        self.pid = pid
        super().__init__(
            f"{what} was opened in process {owner_pid}; it cannot be used after os.fork() "
            f"in process {pid}: open a new one in the child (close() here releases only "
            "this process's copies)"
        )


class CassetteError(MCPSyncError, ValueError):
    """A recorded session (``mcpsync.testing.Cassette``) cannot be used: a missing file where
    replay needs one, a line that is not what was written (``path`` and ``line`` name it, 0:
    the whole file), or another format version; the message says what to do."""

    def __init__(self, message: str, *, path: str = "", line: int = 0) -> None:
        self.path = path
        self.line = line
        super().__init__(message)


class CassetteMismatch(MCPSyncError):
    """A replayed session sent a request the cassette has no answer for. ``request``: the
    method and params sent (normalized); ``nearest``: the closest recorded request (None:
    the cassette has none of that method or none at all); ``path``: the cassette file."""

    def __init__(
        self, message: str, *, request: Any = None, nearest: Any = None, path: str = ""
    ) -> None:
        self.request = request
        self.nearest = nearest
        self.path = path
        super().__init__(message)


class RestartLimitReached(ServerExited, SessionClosed):
    """The restart policy gave up: ``max_attempts`` bring-ups in a row failed or died soon
    after. The session stays closed; ``reasons`` keeps every error of that run, oldest first."""

    def __init__(self, message: str, *, reasons: list[BaseException]) -> None:
        self.reasons = list(reasons)
        super().__init__(message)


class AuthError(MCPSyncError):
    """The authorization flow failed or was refused; never carries a secret."""


class AuthServerUnreachable(AuthError):
    """A token request got no answer: the connection was refused or reset, or it timed out.

    Nothing was refused: the token and its refresh token are kept (in the token store too),
    and no authorization is started in their place; the call that needed the token fails
    with this error, and a later call tries the refresh again."""


class TokenError(AuthError):
    """An authorization server (or enterprise IdP) refused a token request (RFC 6749 5.2).

    ``error`` is its OAuth error code, ``step`` the request that failed ("jwt-bearer",
    "token-exchange", "device_code", ...), ``status`` the HTTP status. Grants of a workload
    or enterprise identity are never retried with another grant after one of these."""

    #: OAuth error code -> subclass; filled by the subclasses below
    by_code: ClassVar[dict[str, type[TokenError]]] = {}

    def __init__(self, message: str, *, error: str, step: str, status: int | None = None) -> None:
        self.error = error
        self.step = step
        self.status = status
        super().__init__(message)

    def __init_subclass__(cls, code: str = "", **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if code:
            TokenError.by_code[code] = cls

    @staticmethod
    def of(message: str, *, error: str, step: str, status: int | None = None) -> TokenError:
        """The subclass for ``error`` (TokenError itself for other codes)."""
        cls = TokenError.by_code.get(error, TokenError)
        return cls(message, error=error, step=step, status=status)


class InvalidGrant(TokenError, code="invalid_grant"):
    """The grant was refused: an assertion expired, had the wrong audience or a bad
    signature; a code, refresh token or device code no longer valid."""


class UnauthorizedClient(TokenError, code="unauthorized_client"):
    """The client (or workload) may not use this grant type at this authorization server."""


class InvalidScope(TokenError, code="invalid_scope"):
    """The requested scope is not permitted for this grant."""


class AccessDenied(TokenError, code="access_denied"):
    """The person declined the authorization (device flow)."""


class ExpiredToken(TokenError, code="expired_token"):
    """The device code expired before the person approved (device flow)."""
