"""What the engine and the session call on a session's telemetry: the declared interface.

Owns: ``Instrument`` (the one object a ``Connection`` is given at construction when telemetry
is on; None when it is off or ``opentelemetry-api`` is not installed), ``Finish`` (ends one
request's span and records its duration), ``Served`` (marks a server-to-client request as
failed inside its SERVER span) and ``Telemetry`` (the options ``connect(telemetry=...)``
takes). Nothing here imports OpenTelemetry: ``mcpsync.telemetry.otel`` implements these.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Finish", "Instrument", "Served", "Telemetry"]


@dataclass(frozen=True)
class Telemetry:
    """How a session reports itself through OpenTelemetry (``connect(telemetry=...)``).

    ``tracer_provider`` / ``meter_provider``: the providers to use (None: the global ones
    the application configured, read at each request, as libraries with native
    instrumentation do). ``capture_content``: also record tool arguments and results on the
    ``tools/call`` spans (off by default: they may hold secrets).

    >>> Telemetry(capture_content=True).capture_content
    True
    """

    tracer_provider: Any = None
    meter_provider: Any = None
    capture_content: bool = False


class Finish(Protocol):
    """Ends one request's (or notification's) CLIENT span with its outcome: the raw result,
    or the error the call fails with; records ``mcp.client.operation.duration``."""

    def __call__(self, value: Any, error: BaseException | None) -> None: ...


class Served(Protocol):
    """Inside a server-to-client request's SERVER span: the handler failed with a JSON-RPC
    error ``code`` (the reply sent) and ``message``."""

    def __call__(self, code: int, message: str) -> None: ...


class Instrument(Protocol):
    """One session's telemetry, asked by the engine (``rpc.connection``, ``rpc.served``)
    and the session (bring-up, close). Every method is called only when telemetry is on."""

    def request(
        self, method: str, rid: int, params: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, Finish | None]:
        """Start the CLIENT span of request ``rid`` in the caller's context: the params to
        send (trace context injected into ``_meta``; the user's own keys kept) and the
        ``Finish`` to call once with its outcome (None: nothing to end)."""
        ...

    def notification(
        self, method: str, params: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, Finish | None]:
        """As ``request`` for a notification (its span ends once it is sent)."""
        ...

    def serving(
        self, method: str, rid: Any, params: dict[str, Any]
    ) -> AbstractContextManager[Served]:
        """The SERVER span a server-to-client request is handled in, whose parent is the
        context extracted from its ``_meta`` (a malformed ``traceparent`` is ignored)."""
        ...

    def connecting(self, name: str) -> AbstractContextManager[None]:
        """The ``connect`` span the whole bring-up of a session runs in."""
        ...

    def phase(self, name: str) -> AbstractContextManager[None]:
        """A span for one phase of the bring-up (``transport``, ``handshake``)."""
        ...

    def bind(self, kind: str, url: str | None, session_id: Callable[[], str | None]) -> None:
        """The transport the session uses: ``kind`` (``stdio`` or an HTTP kind), its URL,
        and where the current ``Mcp-Session-Id`` is read."""
        ...

    def agreed(self, protocol_version: str, phases: dict[str, float]) -> None:
        """The bring-up agreed ``protocol_version``; ``phases`` as ``Session.phases``."""
        ...

    def session_ended(self, error: BaseException | None) -> None:
        """The session ended: closed, its server gone with no restart to follow, or its
        restart policy gave up (``error``: why, when not by ``close()``); records
        ``mcp.client.session.duration``; once."""
        ...
