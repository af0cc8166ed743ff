"""Server-Sent Events shared by the HTTP transports: the parser and the one read loop.

Owns: ``read_events`` (read a stream, report too-large events naming whose reply they
were (``transports.replyid``: from their first bytes, else their last), skip priming events, decode,
deliver), ``ReplyTooLarge``, and ``SSEParser``: turning the bytes of a
``text/event-stream`` body into events, incrementally and in linear time, following the WHATWG event-stream interpretation rules: lines end in CRLF,
LF or CR; ``:`` starts a comment (keep-alives); ``data`` lines are joined with LF;
``id`` sets the last event id as soon as it is read, even in an event that is never
dispatched; ``retry`` sets the reconnection delay, likewise; an event without any ``data``
line is not dispatched, one with an empty ``data`` line is (with empty data; callers skip
it), such as the "priming" event MCP servers send (``id: x`` + ``data:``).

Why not sseclient-py (1.9.0; measured by ``benchmarks/sse_parsers.py``, figures in
docs/development.md "Dependencies"): it does dispatch the priming event, with its id, but it reports ``id`` and
``retry`` only on dispatched events, so a ``retry``-only or ``id``-only event is lost; it
ends an event only on LF LF, CR CR or CRLF CRLF, so a blank line whose ending differs from
the line before it (``data: a`` LF, then CRLF) merges two events into one;
and it joins a long line by repeated ``bytes`` concatenation (a 10 MB ``data:`` line: about
9x our time and 3x our peak memory). This parser also keeps event data as bytes
(``json.loads`` takes bytes), and caps one event at ``max_event_bytes``.

Hostile streams: one leading UTF-8 byte order mark is skipped (as the standard's decoder
does); a line longer than ``max_event_bytes`` is dropped unread, and when it is a ``data``
line, or when data lines add up to more, the event is "too large" whatever the chunking
(reported as an ``EventTooLarge`` where it ends, with the first 256 and the last 512
bytes of its data); a ``retry`` of more than 12 digits counts as 10^12 ms. ``feed`` never
raises. ``tests/transports/test_fuzz_sse.py`` checks all of it against a reference model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ...errors import ProtocolError
from ...jsonrpc import decode
from ..replyid import _names_method as _names_method  # re-exported: streamable's
from ..replyid import reply_id, response_id

__all__ = [
    "SSEEvent",
    "SSEParser",
    "EventTooLarge",
    "ReplyTooLarge",
    "response_id",
    "reply_id",
    "read_events",
    "READ_CHUNK",
]

_BOM = b"\xef\xbb\xbf"
#: bytes asked of the socket per read of an event stream
READ_CHUNK = 256 * 1024
_HEAD = 256  # bytes of a too-large event's data kept for EventTooLarge.head
_TAIL = 512  # bytes of its end kept for EventTooLarge.tail
_MAX_RETRY_DIGITS = 12  # 10^12 ms is 31 years: longer values count as that


class SSEEvent(NamedTuple):
    """One dispatched event: its type (default ``message``), data (bytes) and id."""

    event: str
    data: bytes
    id: str | None


class EventTooLarge(Exception):
    """One event grew past the parser's limit; the parser skips it and goes on.

    ``head``: the first bytes (up to 256) of its data, ``tail`` its last bytes (up to 512),
    so a caller can tell whose reply it was (``reply_id`` below). ``size``: the bytes of it
    seen (at least that many).
    """

    def __init__(self, size: int, limit: int, head: bytes = b"", tail: bytes = b"") -> None:
        self.size = size
        self.limit = limit
        self.head = head
        self.tail = tail
        super().__init__(
            f"an SSE event exceeded {limit} bytes ({size} bytes or more) and was discarded"
        )


def _last(pieces: list[bytes], sep: bytes = b"\n", n: int = _TAIL) -> bytes:
    """The last ``n`` bytes of ``sep.join(pieces)``, joining only the pieces it needs."""
    picked: list[bytes] = []
    size = -len(sep)
    for piece in reversed(pieces):
        picked.append(piece[-n:])
        size += len(piece) + len(sep)
        if size >= n:
            break
    return sep.join(reversed(picked))[-n:]


def _value(line: bytes) -> bytes:
    """A ``data:`` line's value (the field name and one leading space taken off)."""
    value = line[5:]
    return value[1:] if value[:1] == b" " else value


class SSEParser:
    """Incremental event-stream parser: ``feed(chunk)`` yields complete events.

    State that outlives one event: ``last_event_id`` (what to send as ``Last-Event-ID``
    on reconnection) and ``retry`` (the server's reconnection delay, in seconds).
    ``feed`` yields an ``EventTooLarge`` instance (not raised) for an event over the cap,
    so a caller can report it and keep reading.
    """

    __slots__ = (
        "max_event_bytes",
        "last_event_id",
        "retry",
        "_parts",
        "_part_bytes",
        "_data",
        "_data_bytes",
        "_event",
        "_pending_cr",
        "_oversize",
        "_skip_line",
        "_at_start",
        "_head",
        "_big_head",
        "_big_tail",
        "_tail_line",
    )

    def __init__(self, max_event_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_event_bytes = max_event_bytes
        self.last_event_id: str | None = None
        self.retry: float | None = None
        self._parts: list[bytes] = []  # an incomplete line, in pieces (no quadratic joins)
        self._part_bytes = 0
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event = ""
        self._pending_cr = False  # the last chunk ended in CR: a following LF belongs to it
        self._oversize = 0  # > 0 while skipping the rest of an event over the cap
        self._skip_line = False  # the current line overflowed: drop it up to its end
        self._at_start = True  # nothing of this stream read yet: a BOM may come
        self._head = b""  # the first bytes while they may still be a split BOM
        self._big_head = b""  # the start of the data of an event over the cap
        self._big_tail = b""  # the end of it so far
        self._tail_line = False  # the line being skipped is a data line: its end is data

    def feed(self, chunk: bytes) -> Iterator[SSEEvent | EventTooLarge]:
        """Parse ``chunk``; yield every event it completes."""
        if not chunk:
            return
        if self._at_start:
            chunk = self._skip_bom(chunk)
            if not chunk:
                return
        if self._pending_cr:
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n")
            if chunk[-1:] == b"\r":
                self._pending_cr = True
            chunk = chunk.replace(b"\r", b"\n")
        start = 0
        find = chunk.find
        while True:
            end = find(b"\n", start)
            if end < 0:
                if start < len(chunk):
                    self._add_partial(chunk[start:] if start else chunk)
                return
            if self._parts:
                self._parts.append(chunk[start:end])
                line = b"".join(self._parts)
                self._parts.clear()
                self._part_bytes = 0
            else:
                line = chunk[start:end]
            start = end + 1
            if self._skip_line:  # the rest of a line that overflowed the cap
                self._skip_line = False
                if self._tail_line:
                    self._tail_line = False
                    self._big_tail = (self._big_tail + line[-_TAIL:])[-_TAIL:]
            elif not line:
                event = self._dispatch()
                if event is not None:
                    yield event
            elif len(line) > self.max_event_bytes:  # the same verdict as when it came in pieces
                if line.startswith(b"data:"):
                    self._too_large(len(line), line[: _HEAD + 6], _value(line)[-_TAIL:])
            else:
                self._field(line)

    def finish(self) -> None:
        """The stream ended: an event without its final blank line is dropped (per spec)."""
        self._parts.clear()
        self._part_bytes = 0
        self._skip_line = False
        self._tail_line = False
        self._pending_cr = False
        self._at_start = True  # a resumed stream is a new body: it may start with a BOM
        self._head = b""
        self._reset_event()

    # -- internals -------------------------------------------------------------------

    def _skip_bom(self, chunk: bytes) -> bytes:
        head = self._head + chunk if self._head else chunk
        if len(head) < 3 and _BOM.startswith(head):
            self._head = head  # maybe a BOM split over chunks: wait for more
            return b""
        self._at_start = False
        self._head = b""
        return head[3:] if head.startswith(_BOM) else head

    def _too_large(self, size: int, line_head: bytes = b"", line_tail: bytes | None = None) -> None:
        """The current event is over the cap: drop its data, report it at its end.
        ``line_head``: the start of the ``data:`` line that went over (not in ``_data``);
        ``line_tail``: the end of that line's value as far as it was read."""
        if self._oversize:  # the end of its data so far: who it was for, if the id is last
            if line_tail is not None:
                self._big_tail = _last([self._big_tail, line_tail])
        else:
            self._big_tail = _last(self._data if line_tail is None else [*self._data, line_tail])
        if not self._oversize:  # keep the start of its data: who it was for
            head = bytearray()
            pieces = list(self._data[:_HEAD])
            if line_head:
                value = line_head[5:]
                pieces.append(value[1:] if value[:1] == b" " else value)
            for piece in pieces:
                if head:
                    head += b"\n"
                head += piece[: _HEAD - len(head)]
                if len(head) >= _HEAD:
                    break
            self._big_head = bytes(head)
        self._oversize += size
        self._data.clear()
        self._data_bytes = 0

    def _add_partial(self, piece: bytes) -> None:
        if self._skip_line:
            if self._oversize:
                self._oversize += len(piece)
            if self._tail_line:
                self._big_tail = (self._big_tail + piece[-_TAIL:])[-_TAIL:]
            return
        self._parts.append(piece)
        self._part_bytes += len(piece)
        if self._part_bytes > self.max_event_bytes:  # a line over the cap: never kept whole
            start = b"".join(self._parts[: _HEAD + 6])[: _HEAD + 6]  # pieces are not empty
            if start[:5] == b"data:":
                end = _last(self._parts, b"", _TAIL + 6)
                if len(end) >= self._part_bytes:  # the whole line: take its field name off
                    end = _value(end)
                self._too_large(self._part_bytes, start, end[-_TAIL:])
                self._tail_line = True
            self._skip_line = True
            self._parts.clear()
            self._part_bytes = 0

    def _field(self, line: bytes) -> None:
        if line[0] == 0x3A:  # ':' a comment (keep-alive)
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
        if name == b"data":
            if self._oversize:
                self._oversize += len(value)
                self._big_tail = _last([self._big_tail, value])
                return
            self._data.append(value)
            self._data_bytes += len(value) + 1
            if self._data_bytes > self.max_event_bytes:
                self._too_large(self._data_bytes)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:  # the spec ignores ids containing NULL
                self.last_event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():  # ASCII digits only (bytes)
                digits = value.lstrip(b"0")
                if len(digits) > _MAX_RETRY_DIGITS:
                    self.retry = 1e9  # 10^12 ms
                else:
                    self.retry = int(digits or b"0") / 1000.0
        # other field names are ignored

    def _dispatch(self) -> SSEEvent | EventTooLarge | None:
        if self._oversize:
            error = EventTooLarge(
                self._oversize, self.max_event_bytes, self._big_head, self._big_tail
            )
            self._oversize = 0
            self._big_head = b""
            self._big_tail = b""
            self._reset_event()
            return error
        if not self._data:
            self._event = ""  # data-less events (priming, retry-only) are not dispatched
            return None
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        event = SSEEvent(self._event or "message", data, self.last_event_id)
        self._reset_event()
        return event

    def _reset_event(self) -> None:
        self._data.clear()
        self._data_bytes = 0
        self._event = ""
        self._oversize = 0
        self._big_head = b""
        self._big_tail = b""


# -- whose reply a too-large event was -----------------------------------------------------


class ReplyTooLarge(ProtocolError):
    """An SSE event on the stream of request ``request_id`` was over ``max_event_bytes``.

    Reported through ``on_error`` (not raised); the connection fails that request with it
    at once. A JSON reply over the limit raises the plain ``ProtocolError`` from ``send()``.
    """

    def __init__(self, message: str, *, request_id: Any) -> None:
        self.request_id = request_id
        super().__init__(message)


# -- the read loop both HTTP transports run --------------------------------------------------


def read_events(
    response: Any,
    parser: SSEParser,
    *,
    what: str,
    deliver: Callable[[Any], None],
    report: Callable[[BaseException], None],
    stop: Callable[[], bool],
    owner: Callable[[EventTooLarge], Any] | None = None,
    claimed: Callable[[Any], bool] | None = None,
    on_message: Callable[[Any], None] | None = None,
    on_other: Callable[[SSEEvent], None] | None = None,
    after_chunk: Callable[[], bool] | None = None,
) -> None:
    """Read the event stream ``response`` until it ends or ``stop()``; deliver each message.

    Per event: a too-large one is reported (``ReplyTooLarge`` naming the request whose
    reply it was, by ``owner`` (default: ``reply_id`` of its first and last bytes), else a plain
    ``ProtocolError``), and reading ends when ``claimed(owner)`` says so; an event of
    another type than ``message`` goes to ``on_other``; empty data (priming events) is
    skipped; data that is not JSON-RPC is reported; a message is shown to ``on_message``,
    then delivered. After each chunk ``after_chunk()`` may end reading (True) or raise.
    Read failures propagate. The parser is finished and the response closed on the way out.
    """
    read1 = response.read1
    try:
        while not stop():
            chunk = read1(READ_CHUNK, decode_content=True)
            if not chunk:
                return
            for event in parser.feed(chunk):
                if isinstance(event, EventTooLarge):
                    found = owner(event) if owner is not None else reply_id(event.head, event.tail)
                    if found is None:
                        report(ProtocolError(f"{what}: {event}"))
                        continue
                    report(
                        ReplyTooLarge(
                            f"{what}: reply to request {found!r}: {event}", request_id=found
                        )
                    )
                    if claimed is not None and claimed(found):
                        return
                    continue
                if event.event != "message":
                    if on_other is not None:
                        on_other(event)
                    continue
                if not event.data.strip():
                    continue  # a priming event
                try:
                    message = decode(event.data)
                except ProtocolError as exc:
                    report(ProtocolError(f"{what}: SSE event data: {exc}"))
                    continue
                if on_message is not None:
                    on_message(message)
                deliver(message)
            if after_chunk is not None and after_chunk():
                return
    finally:
        parser.finish()
        try:
            response.close()
        except Exception:  # noqa: BLE001 - closing a broken response: nothing to say
            pass
