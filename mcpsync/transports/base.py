"""The transport contract: move JSON-RPC messages, nothing else.

Owns: the ``Transport`` interface every transport implements. A transport knows bytes,
framing and connection management; it knows nothing of request ids, futures or
capabilities — correlation lives in ``mcpsync.session``.

Threading contract:
- ``start(on_message, on_close)`` opens the stream and starts the transport's own reader
  thread(s). ``on_message(msg)`` is called with each decoded message (a dict) in wire
  order per stream; ``on_close(error)`` is called exactly once when the transport can
  deliver nothing more (``error`` is None after ``close()``, else a TransportError that
  says why, e.g. ``ServerExited`` with exit code and stderr tail).
- ``on_error(exc)`` (optional third callback) reports garbage on the wire
  (a ``ProtocolError``) without ending the stream.
- ``send(msg)`` may be called from any thread, concurrently. It may deliver replies to
  ``on_message`` before it returns (HTTP reads a JSON reply in the calling thread).
  It raises a ``TransportError`` when the message could not be sent.
- ``close()`` is idempotent, bounded in time, and leaves no thread, process or file
  descriptor behind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

__all__ = ["Transport", "Message", "OnMessage", "OnClose", "OnError"]

Message = dict[str, Any]
OnMessage = Callable[[Message], None]
OnClose = Callable[[BaseException | None], None]
OnError = Callable[[BaseException], None]


class Transport(ABC):
    """Moves JSON-RPC messages between this client and one server."""

    #: short name for reports: "stdio", "streamable-http", "sse", "memory"
    kind: str = "abstract"

    @abstractmethod
    def start(self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None) -> None:
        """Open the connection and start reading."""

    @abstractmethod
    def send(self, message: Message, *, timeout: float | None = None) -> None:
        """Send one message. ``timeout`` bounds the write (and, on HTTP, the reply)."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection; idempotent and bounded."""

    def set_protocol_version(self, version: str) -> None:  # noqa: B027 - optional hook
        """Called once the protocol version is agreed (HTTP sends it as a header)."""

    def describe(self) -> str:
        """One line for reports and error messages (no secrets)."""
        return self.kind
