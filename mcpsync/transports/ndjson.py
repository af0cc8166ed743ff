"""Newline-delimited JSON framing of a stdio server's stdout.

Owns: cutting the byte stream into lines (in linear time, across chunks), the size cap
(a line over ``max_message_bytes`` is dropped unread up to its newline and reported as
``MessageTooLarge``, naming the request it answered when its first or last bytes say
so), decoding each line (``jsonrpc.decode``: garbage is a ``ProtocolError``, kept as a
"noise" line for error messages), and delivering the message. ``LineFramer`` is a member
of the stdio reader (``reader.PipeReader``): only the reader thread feeds it; what it finds
goes out through the two callbacks it was built with.
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
    """Cuts a stdout byte stream into JSON-RPC messages (see the module docstring).

    ``deliver(message)`` gets each decoded message (a dict, or a batch list; it must not
    raise), ``report(error)`` each ``ProtocolError`` (garbage, a line over the cap).
    """

    def __init__(
        self,
        name: str,
        max_message_bytes: int,
        deliver: Callable[[Any], None],
        report: Callable[[BaseException], None],
    ) -> None:
        self.name = name
        self.max_message_bytes = max_message_bytes
        self._deliver = deliver
        self._report = report
        #: the last non-JSON lines (excerpts), oldest first
        self.noise: collections.deque[str] = collections.deque(maxlen=_NOISE_LINES)
        self._parts: list[bytes] = []
        self._part_bytes = 0
        self._discarding = False
        self._discard_head = b""  # the first bytes of the line being discarded
        self._discard_tail = b""  # the last bytes of the line being discarded
        self._discard_unreported = False

    def chunk(self, chunk: bytes) -> None:
        """Take one chunk read from stdout (any size, cut anywhere)."""
        if chunk[-1:] == b"\n" and not self._parts and not self._discarding:
            # whole lines only (line() holds each to the size cap, as feed() does)
            if chunk.find(b"\n") == len(chunk) - 1:
                self.line(chunk)  # exactly one: the sequential case
            else:
                line = self.line  # several: many threads' replies at once
                for piece in chunk.split(b"\n")[:-1]:
                    line(piece)
        else:
            self.feed(chunk)

    def feed(self, chunk: bytes) -> None:
        """Take a chunk in the general case: a line may begin or end in another chunk."""
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
            self.line(piece)

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

    def line(self, line: bytes) -> None:
        """Decode and deliver one complete line (without its newline)."""
        if len(line) > self.max_message_bytes:  # whole, but its last piece took it over
            if not line.isspace():
                self._report_too_large(reply_id(line[:512], line[-512:]))
            return
        try:
            message = decode(line)
        except ProtocolError as exc:
            if not line or line.isspace():  # a blank line is no message, and no noise
                return
            self.noise.append(excerpt(line, 200))
            self._report(ProtocolError(f"server {self.name!r} wrote to stdout: {exc}"))
            return
        self._deliver(message)
