"""Sending one request: on a shared sender thread, and what a failed send means.

Owns: ``send_later`` (a future's request sent on a ``mcpsync-send[shared]`` worker,
``_shared.SENDS``, where the transport's ``send()`` waits for the server, i.e. HTTP, whose
POST waits for its reply's head or reads a JSON reply whole: ``request()`` then returns at
once and calls overlap; a call cancelled, timed out or failed before its turn is never sent;
with telemetry on, in the caller's ``contextvars`` context)
and ``send_failed`` (the first send of a request raised: after ``SessionExpired`` the
connection re-initializes and sends it once more; Ctrl-C cancels the call and tells the
server; any other error fails the call), and ``notify_later`` (a notification sent on such a
worker, within ``NOTICE_TIMEOUT``: a call that timed out or was cancelled tells the server
without making its caller wait for a silent server's answer to that POST). Used by ``mcpsync.rpc.connection`` only, which hands
itself in (``Sender``): nothing here imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextvars import Context
from typing import Any, Protocol

from ..errors import (
    MCPSyncError,
    RequestCancelled,
    SessionExpired,
    SessionKeptExpiring,
    TransportError,
)
from ..transports.base import Message, Transport
from .calls import _Call
from .shared import SENDS

__all__ = ["Sender", "send_later", "send_failed", "notify_later", "NOTICE_TIMEOUT"]

log = logging.getLogger("mcpsync")

_NO_EXTRA: Mapping[str, Any] = {}  # no extra send() arguments (never mutated)
#: the bound of a notification sent by ``notify_later`` (seconds): under the close's own
#: deadline (``connection.CLOSE_TIMEOUT``, 3 s), so a silent server holds no sender past it
NOTICE_TIMEOUT = 2.0


class Sender(Protocol):
    """What sending needs of the connection."""

    name: str
    transport: Transport
    _pending: dict[Any, _Call]

    def _retire(self, call: _Call, error: BaseException) -> None: ...
    def reinitialize_once(self) -> bool: ...
    def _send_cancelled(self, call: _Call, reason: str) -> None: ...
    def notify(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> None: ...
    @property
    def closed(self) -> bool: ...


class _Outgoing:
    """A future's request waiting for a shared sender thread (``SENDS`` runs ``drain``)."""

    __slots__ = ("conn", "call", "message", "timeout", "headers", "context")

    def __init__(
        self,
        conn: Sender,
        call: _Call,
        message: Message,
        timeout: float | None,
        headers: Mapping[str, str] | None,
        context: Context | None,
    ) -> None:
        self.conn = conn
        self.call = call
        self.message = message
        self.timeout = timeout
        self.headers = headers
        self.context = context

    def drain(self) -> bool:
        if self.context is not None:  # the caller's (telemetry: an OAuth step's span, say)
            return self.context.run(self._drain)
        return self._drain()

    def _drain(self) -> bool:
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


class _Notice:
    """A notification waiting for a shared sender thread (``SENDS`` runs ``drain``)."""

    __slots__ = ("conn", "method", "params")

    def __init__(self, conn: Sender, method: str, params: dict[str, Any] | None) -> None:
        self.conn = conn
        self.method = method
        self.params = params

    def drain(self) -> bool:
        conn = self.conn
        if conn.closed:
            return False  # the connection ended first: nobody to tell
        try:
            conn.notify(self.method, self.params, timeout=NOTICE_TIMEOUT)
        except MCPSyncError as exc:  # a silent or gone server: the caller has moved on
            log.debug("mcpsync: %s to %s not delivered: %s", self.method, conn.name, exc)
        except Exception:  # noqa: BLE001 - a sender thread goes on
            log.exception("mcpsync: sending %s to %s failed", self.method, conn.name)
        return False


def notify_later(conn: Sender, method: str, params: dict[str, Any] | None) -> None:
    """Send a notification on a shared sender thread, bounded by ``NOTICE_TIMEOUT``."""
    SENDS.schedule(_Notice(conn, method, params))


def send_later(
    conn: Sender,
    call: _Call,
    message: Message,
    timeout: float | None,
    headers: Mapping[str, str] | None,
    context: Context | None = None,
) -> None:
    """Send ``message`` (``call``'s request, already pending) on a shared sender thread, in
    ``context`` when given (the caller's ``contextvars``, with telemetry on)."""
    SENDS.schedule(_Outgoing(conn, call, message, timeout, headers, context))


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
        # never for initialize itself, nor once the transport's bounds gave up
        if call.method == "initialize" or isinstance(exc, SessionKeptExpiring):
            conn._retire(call, exc)
            return
        try:
            if not conn.reinitialize_once():  # the hooks cannot: the request fails with it
                conn._retire(call, exc)
                return
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
