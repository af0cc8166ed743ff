"""Newline-delimited JSON framing of a stdio server's stdout.

Owns: cutting the byte stream into lines (in linear time, across chunks), the size cap
(a line over ``max_message_bytes`` is dropped unread up to its newline and reported as
``MessageTooLarge``, naming the request it answered when its first or last bytes say
so), decoding each line (``jsonrpc.decode``: garbage is a ``ProtocolError``, kept as a
"noise" line for error messages), and delivering the message. A mixin of
``StdioTransport`` (it works on its line buffer, which the reader role guards).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from ..errors import ProtocolError
from ..jsonrpc import decode, excerpt
from .replyid import _names_method, reply_id, response_id

__all__ = ["MessageTooLarge", "LineFramer"]

#: how many non-JSON stdout lines ``stdout_noise()`` keeps
_NOISE_LINES = 20


class MessageTooLarge(ProtocolError):
    """A line over ``max_message_bytes`` was discarded; ``request_id`` names the request it
    answered when that could be read from its first or last bytes (else None).

    Reported through ``on_error``: the connection fails that request with it at once."""

    def __init__(self, message: str, *, request_id: Any) -> None:
        self.request_id = request_id
        super().__init__(message)


class LineFramer:
    """The stdout half of ``StdioTransport`` (see the module docstring)."""

    # set by the transport's __init__ (and, for the two callbacks, by ``Transport``)
    name: str
    max_message_bytes: int
    _parts: list[bytes]
    _part_bytes: int
    _discarding: bool
    _discard_head: bytes
    _discard_tail: bytes
    _discard_unreported: bool
    _noise: collections.deque[str]
    _report: Callable[[BaseException], None]
    _deliver: Callable[[Any], None]
    _callback_failed: Callable[[], None]
    _on_message: Callable[[Any], None] | None

    def _feed(self, chunk: bytes) -> None:
        start = 0
        limit = self.max_message_bytes
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                rest = chunk[start:]
                if rest and not self._discarding:
                    self._parts.append(rest)
                    self._part_bytes += len(rest)
                    if self._part_bytes > limit:
                        self._too_large(b"".join(self._parts)[:512])
                elif rest:
                    self._discard_tail = (self._discard_tail + rest)[-512:]
                return
            piece = chunk[start:newline]
            start = newline + 1
            if self._discarding:
                self._discarding = False
                if self._discard_unreported:  # the id may be the last member: `..., "id": 7}`
                    tail = (self._discard_tail + piece)[-512:]
                    self._report_too_large(reply_id(self._discard_head, tail))
                self._discard_head = self._discard_tail = b""
                continue
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts.clear()
                self._part_bytes = 0
            self._deliver_line(piece)

    def _too_large(self, head: bytes) -> None:
        """The line being read went over the limit: drop it up to its newline, and say so."""
        self._parts.clear()
        self._part_bytes = 0
        self._discarding = True
        self._discard_tail = b""
        self._discard_head = head
        found = response_id(head)  # the one rule for every transport (``replyid``)
        # A response whose id comes first (or a request): report now; else at its last bytes.
        self._discard_unreported = found is None and not _names_method(head)
        if not self._discard_unreported:
            self._report_too_large(found)

    def _report_too_large(self, request_id: Any) -> None:
        self._report(MessageTooLarge(
            f"server {self.name!r} sent a message over {self.max_message_bytes} bytes; it was discarded",
            request_id=request_id,
        ))  # fmt: skip

    def _deliver_line(self, line: bytes) -> None:
        if len(line) > self.max_message_bytes:  # whole, but its last piece took it over
            if not line.isspace():
                self._report_too_large(reply_id(line[:512], line[-512:]))
            return
        try:
            message = decode(line)
        except ProtocolError as exc:
            if not line or line.isspace():  # a blank line is no message, and no noise
                return
            self._noise.append(excerpt(line, 200))
            self._report(ProtocolError(f"server {self.name!r} wrote to stdout: {exc}"))
            return
        if type(message) is dict and self._on_message is not None:
            try:  # one message (the usual case): straight to on_message
                self._on_message(message)
            except Exception:  # noqa: BLE001 - as _deliver: a callback's bug is logged
                self._callback_failed()
        else:
            self._deliver(message)
