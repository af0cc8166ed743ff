"""An in-process transport pair, for tests and for embedding a server in the same process.

Owns: ``memory_pair()``, two connected ``MemoryTransport`` ends. What one end sends, the
other end's reader thread delivers, in order. Messages are passed as JSON text, so the
pair catches anything a real wire would reject (non-JSON values, shared mutable dicts),
and decoded like any wire's (``jsonrpc.decode``: garbage is a ``ProtocolError`` reported
through ``on_error``, the stream goes on).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping
from typing import Any

from ..errors import ProtocolError, TransportError
from ..jsonrpc import decode, encode
from ..runtime.lifecycle import forked
from .base import Features, Message, OnClose, OnError, OnMessage, Transport

__all__ = ["MemoryTransport", "memory_pair"]

log = logging.getLogger("mcpsync.memory")
_CLOSE = object()


class MemoryTransport(Transport):
    """One end of an in-memory pair; create both with ``memory_pair()``."""

    kind = "memory"
    #: a peer in the same process may never answer a probe (like a pipe)
    features = Features(bounded_probe=True)

    def __init__(self, name: str) -> None:
        self.name = name
        self.peer: MemoryTransport | None = None
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._reader: threading.Thread | None = None
        self._closed = threading.Event()
        self._close_error: BaseException | None = None

    def describe(self) -> str:
        return f"memory: {self.name}"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        self._bind(on_message, on_close, on_error)
        self._reader = threading.Thread(
            target=self._pump,
            name=f"mcpsync-memory-reader[{self.name}]",
            daemon=True,
        )
        self._reader.start()

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        peer = self.peer
        if self._closed.is_set() or peer is None or peer._closed.is_set():
            self._check_owner()  # ForkedError in a forked child
            raise TransportError(f"memory transport {self.name!r} is closed")
        peer._inbox.put(encode(message))

    def close(self) -> None:
        if forked(self):  # in a child of os.fork(): this copy only; the peer hears nothing
            self.abandon()
            return
        self.abort(None)

    def abandon(self) -> None:
        """In a child of ``os.fork()``: this end is closed here; nothing reaches the peer."""
        closed = threading.Event()  # a fresh one: the old one's lock may be a lost thread's
        closed.set()
        self._closed = closed
        self._close_reported = True

    def abort(self, error: BaseException | None) -> None:
        """Close this end; the peer sees its stream end with ``error`` (tests simulate crashes)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._inbox.put(_CLOSE)
        peer = self.peer
        if peer is not None and not peer._closed.is_set():
            if error is not None and not isinstance(error, TransportError):
                error = TransportError(f"peer {self.name!r} failed: {error}")
            peer._close_error = error or TransportError(f"peer {self.name!r} closed the connection")
            peer._inbox.put(_CLOSE)
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)

    def _pump(self) -> None:
        while True:
            item = self._inbox.get()
            if item is _CLOSE:
                break
            try:
                message = decode(item)
            except ProtocolError as exc:
                self._report(ProtocolError(f"{self.describe()}: {exc}"))
                continue
            self._deliver(message)  # a callback's bug is logged, the reader goes on
        self._report_close(
            None if self._closed.is_set() and self._close_error is None else self._close_error
        )


def memory_pair(name: str = "memory") -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected ends: (client side, server side)."""
    client, server = MemoryTransport(f"{name}/client"), MemoryTransport(f"{name}/server")
    client.peer, server.peer = server, client
    return client, server
