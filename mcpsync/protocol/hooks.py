"""The protocol side of the engine's hooks: ``EraHooks``.

Owns: ``EraHooks``, the ``rpc.hooks.WireHooks`` that ``Session.connect`` gives each
``Connection`` it makes, and that the era chosen by the handshake configures: the modern
bring-up (``choose``) installs its ``Envelope`` (the ``_meta`` of every request),
``ModernEra`` over Streamable HTTP makes closing the response stream the cancellation, and
``LegacyEra.on_expired`` installs the re-initialization of an expired HTTP session. The
engine only asks the three ``WireHooks`` questions; nothing is set on the ``Connection``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..rpc.hooks import WireHooks

if TYPE_CHECKING:
    from ..rpc.connection import Connection

__all__ = ["EraHooks", "RequestEnvelope"]


class RequestEnvelope(Protocol):
    """What the era reads of the 2026-07-28 request envelope (``modern.envelope.Envelope``,
    declared here because ``modern`` imports this module): the ``_meta`` of a method, the
    agreed version, the log level it carries, and whether the server offers tasks."""

    version: str
    log_level: str | None

    def __call__(self, method: str) -> dict[str, Any]: ...

    @property
    def tasks(self) -> bool: ...


class EraHooks(WireHooks):
    """One connection's hooks, as its era set them (all unset: the engine's defaults)."""

    __slots__ = ("envelope", "abort", "expired")

    def __init__(self) -> None:
        #: the 2026-07-28 request envelope (``_meta``); set by the modern bring-up
        self.envelope: RequestEnvelope | None = None
        #: cancels a request by closing its stream (2026-07-28 Streamable HTTP: no
        #: ``notifications/cancelled``); set by ``ModernEra``
        self.abort: Callable[[int], Any] | None = None
        #: re-initializes after the server forgot the HTTP session; ``LegacyEra.on_expired``
        self.expired: Callable[[], None] | None = None

    @staticmethod
    def of(conn: Connection) -> EraHooks:
        """``conn``'s hooks, which an era configures; ``Session.connect`` makes every
        connection with an ``EraHooks`` (a TypeError for one made without)."""
        hooks = conn.hooks
        if not isinstance(hooks, EraHooks):
            raise TypeError(
                f"the connection to {conn.name!r} was made without EraHooks "
                "(Connection(..., hooks=EraHooks())): no era can configure it"
            )
        return hooks

    def meta(self, method: str) -> dict[str, Any] | None:
        envelope = self.envelope
        return None if envelope is None else envelope(method)

    def cancel(self, request_id: int) -> bool:
        abort = self.abort
        if abort is None:
            return False
        abort(request_id)
        return True

    def reinitialize(self) -> bool:
        expired = self.expired
        if expired is None:
            return False
        expired()
        return True
