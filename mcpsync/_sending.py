"""Sending one request: on a shared sender thread, and what a failed send means.

Owns: ``send_later`` (a future's request sent on a ``mcpsync-send[shared]`` worker,
``_shared.SENDS``, where the transport's ``send()`` waits for the server, i.e. HTTP, whose
POST waits for its reply's head or reads a JSON reply whole: ``request()`` then returns at
once and calls overlap; a call cancelled, timed out or failed before its turn is never sent)
and ``send_failed`` (the first send of a request raised: after ``SessionExpired`` the
connection re-initializes and sends it once more; Ctrl-C cancels the call and tells the
server; any other error fails the call). Used by ``mcpsync.connection`` only, which hands
itself in (``Sender``): nothing here imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ._calls import _Call
from ._shared import SENDS
from .errors import (
    MCPSyncError,
    RequestCancelled,
    SessionExpired,
    SessionKeptExpiring,
    TransportError,
)
from .transports.base import Message, Transport

__all__ = ["Sender", "send_later", "send_failed"]

log = logging.getLogger("mcpsync")

_NO_EXTRA: Mapping[str, Any] = {}  # no extra send() arguments (never mutated)


class Sender(Protocol):
    """What sending needs of the connection."""

    name: str
    transport: Transport
    reinitialize: Callable[[], None] | None
    _pending: dict[Any, _Call]

    def _retire(self, call: _Call, error: BaseException) -> None: ...
    def _reinitialize_once(self) -> None: ...
    def _send_cancelled(self, call: _Call, reason: str) -> None: ...


class _Outgoing:
    """A future's request waiting for a shared sender thread (``SENDS`` runs ``drain``)."""

    __slots__ = ("conn", "call", "message", "timeout", "headers")

    def __init__(
        self,
        conn: Sender,
        call: _Call,
        message: Message,
        timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        self.conn = conn
        self.call = call
        self.message = message
        self.timeout = timeout
        self.headers = headers

    def drain(self) -> bool:
        conn, call = self.conn, self.call
        if conn._pending.get(call.id) is not call:
            return False  # cancelled, timed out, or the connection ended: nothing to send
        extra = {"headers": self.headers} if self.headers else _NO_EXTRA
        try:
            conn.transport.send(self.message, timeout=self.timeout, **extra)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller via the call
            try:
                send_failed(conn, exc, self.message, call, self.timeout, self.headers)
            except BaseException:  # noqa: BLE001 - a sender thread goes on
                log.exception("mcpsync: sending %s to %s failed", call.method, conn.name)
        return False  # one request: nothing more to do


def send_later(
    conn: Sender,
    call: _Call,
    message: Message,
    timeout: float | None,
    headers: Mapping[str, str] | None,
) -> None:
    """Send ``message`` (``call``'s request, already pending) on a shared sender thread."""
    SENDS.schedule(_Outgoing(conn, call, message, timeout, headers))


def send_failed(
    conn: Sender,
    exc: BaseException,
    message: Message,
    call: _Call,
    timeout: float | None,
    headers: Mapping[str, str] | None,
) -> None:
    """The first send of a request raised: re-initialize and re-send once, or fail the call."""
    extra = {"headers": headers} if headers else _NO_EXTRA
    if isinstance(exc, SessionExpired):
        if (
            conn.reinitialize is None
            or call.method == "initialize"
            or isinstance(exc, SessionKeptExpiring)  # the transport's bounds: given up
        ):
            conn._retire(call, exc)
            return
        try:
            conn._reinitialize_once()
            conn.transport.send(message, timeout=timeout, **extra)
        except BaseException as again:  # noqa: BLE001 - handed to the caller via the call
            conn._retire(call, again)
    elif isinstance(exc, MCPSyncError):
        conn._retire(call, exc)
    elif isinstance(exc, KeyboardInterrupt):
        # Ctrl-C while sending (stdio defers it to the message boundary: the request went
        # out): cancel this call, tell the server, and let the interrupt go on.
        if conn._pending.pop(call.id, None) is not None:
            call.settle(None, RequestCancelled(f"{call.method} was cancelled (Ctrl-C)"))
            conn._send_cancelled(call, "cancelled by the client")
        raise exc
    else:
        conn._retire(call, TransportError(f"sending {call.method} failed: {exc!r}"))
        if not isinstance(exc, Exception):
            raise exc
