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
import re
from collections.abc import Callable
from typing import Any

from ..errors import ProtocolError
from ..jsonrpc import decode, excerpt

__all__ = ["MessageTooLarge", "LineFramer"]

#: how many non-JSON stdout lines ``stdout_noise()`` keeps
_NOISE_LINES = 20


# The top-level id of a response, from the first or last bytes of a line too long to parse:
# right after the opening brace's first members, or as the last member before the final brace.
_HEAD_ID = re.compile(rb'^\s*\{(?:[^{}\[\]]*?,)?\s*"id"\s*:\s*(-?\d+)\s*[,}]')
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*(-?\d+)\s*\}\s*$')


class MessageTooLarge(ProtocolError):
    """A line over ``max_message_bytes`` was discarded; ``request_id`` names the request it
    answered when that could be read from its first or last bytes (else None).

    Reported through ``on_error``: the connection fails that request with it at once."""

    def __init__(self, message: str, *, request_id: int | None) -> None:
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
    _discard_tail: bytes
    _discard_unreported: bool
    _noise: collections.deque[str]
    _report: Callable[[BaseException], None]
    _deliver: Callable[[Any], None]

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
                    found = _TAIL_ID.search((self._discard_tail + piece)[-512:])
                    self._report_too_large(int(found.group(1)) if found else None)
                self._discard_tail = b""
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
        found = _HEAD_ID.match(head)
        # A response whose id comes first (or a request): report now; else at its last bytes.
        self._discard_unreported = found is None and b'"method"' not in head
        if not self._discard_unreported:
            self._report_too_large(int(found.group(1)) if found else None)

    def _report_too_large(self, request_id: int | None) -> None:
        self._report(MessageTooLarge(
            f"server {self.name!r} sent a message over {self.max_message_bytes} bytes; it was discarded",
            request_id=request_id,
        ))  # fmt: skip

    def _deliver_line(self, line: bytes) -> None:
        if line.isspace() or not line:
            return
        if len(line) > self.max_message_bytes:  # whole, but its last piece took it over
            found = _HEAD_ID.match(line[:512]) or _TAIL_ID.search(line[-512:])
            self._report_too_large(int(found.group(1)) if found else None)
            return
        try:
            message = decode(line)
        except ProtocolError as exc:
            self._noise.append(excerpt(line, 200))
            self._report(ProtocolError(f"server {self.name!r} wrote to stdout: {exc}"))
            return
        self._deliver(message)
