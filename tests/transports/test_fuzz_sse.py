"""Fuzz step: the SSE parser (``mcpsync.transports.http.sse``) against a reference model.

Hypothesis builds hostile event streams (deep ``[[[`` nesting and huge numbers in ``data``,
invalid UTF-8, lines ending in CR, LF or CRLF mixed, comments, ``retry``-only and ``id``-only
events, ids with NUL, unknown fields, a leading BOM, lines far over the size cap, no final
line end) and cuts each one into chunks at random byte offsets, always also right after
some CRs (a CRLF split over two chunks). The parser's events, last event id and retry must
equal a reference model written straight from the WHATWG event-stream interpretation rules
(plus the parser's documented cap), for every chunking; nothing may raise. Every event's data
then goes through ``jsonrpc.decode``, which may only answer or raise ``ProtocolError``.

Bounded: a fixed number of examples per test and a time budget (checked in the test body),
so the whole file takes well under 60 s on a loaded 2-CPU machine.
"""

from __future__ import annotations

import re
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpsync.errors import ProtocolError
from mcpsync.jsonrpc import decode
from mcpsync.transports.http.sse import EventTooLarge, SSEParser

BUDGET = 20.0  # seconds of examples per test; later examples return at once
FUZZ = settings(
    max_examples=250,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DEFAULT_CAP = 256 * 1024 * 1024
BOM = b"\xef\xbb\xbf"


# -- the reference model ------------------------------------------------------------------


def reference(stream: bytes, cap: int) -> tuple[list[tuple[Any, ...]], str | None, float | None]:
    """Events (``("event", type, data, id)`` or ``("too large",)``), the last event id and
    the retry (seconds) that the WHATWG rules give for ``stream``, with the parser's cap:
    a line longer than ``cap`` bytes is dropped, and an event with such a ``data`` line, or
    with data lines whose lengths (+1 each) add up to more than ``cap``, is reported as too
    large instead.
    """
    if stream.startswith(BOM):  # the UTF-8 decode step strips one leading BOM
        stream = stream[3:]
    lines = re.split(rb"\r\n|\r|\n", stream)[:-1]  # the last piece has no line end: ignored
    events: list[tuple[Any, ...]] = []
    data: list[bytes] = []
    size = 0
    kind = ""
    last_id: str | None = None
    retry: float | None = None
    too_large = False
    for line in lines:
        if not line:  # dispatch
            if too_large:
                events.append(("too large",))
            elif data:
                events.append(("event", kind or "message", b"\n".join(data), last_id))
            data, size, kind, too_large = [], 0, "", False
            continue
        if len(line) > cap:  # dropped; a data line makes its event too large
            if line.startswith(b"data:"):
                too_large, data, size = True, [], 0
            continue
        if line.startswith(b":"):
            continue
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            if too_large:
                continue
            data.append(value)
            size += len(value) + 1
            if size > cap:
                too_large, data, size = True, [], 0
        elif name == b"event":
            kind = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value and all(0x30 <= b <= 0x39 for b in value):
                ms = int(value.lstrip(b"0") or b"0") if len(value.lstrip(b"0")) <= 12 else 10**12
                retry = ms / 1000.0
    return events, last_id, retry


def run_parser(
    chunks: list[bytes], cap: int
) -> tuple[list[tuple[Any, ...]], str | None, float | None]:
    parser = SSEParser(cap)
    events: list[tuple[Any, ...]] = []
    for chunk in chunks:
        for event in parser.feed(chunk):
            if isinstance(event, EventTooLarge):
                events.append(("too large",))
            else:
                events.append(("event", event.event, event.data, event.id))
    result = (events, parser.last_event_id, parser.retry)
    parser.finish()
    return result


def split(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(stream)})
    return [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]


# -- hostile streams --------------------------------------------------------------------------

_message = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}'
payload = st.one_of(
    st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=30),  # invalid UTF-8, stray CR/LF/NUL
    st.integers(1, 120_000).map(lambda n: b"[" * n),  # deep nesting
    st.integers(1, 6_000).map(lambda n: b"-" + b"9" * n),  # huge numbers
    st.integers(1, 400).map(lambda n: b"1" * n + b"e" + b"9" * n),
    st.just(_message),
    st.builds(  # huge lines (over the small caps, not the default)
        lambda n, c: c * n, st.integers(1_000, 200_000), st.sampled_from([b"x", b"\xff", b"\r"])
    ),
)
retry_value = st.one_of(
    st.integers(0, 10**7).map(lambda n: str(n).encode()),
    st.text("0123456789", min_size=1, max_size=40).map(str.encode),
    st.integers(4_000, 20_000).map(lambda n: b"7" * n),  # past int()'s digit limit
    st.sampled_from([b"", b"-5", b"1.5", b" 100", b"\xd9\xa3"]),  # not ASCII digits
)
line = st.one_of(
    payload.map(lambda p: b"data: " + p),
    payload.map(lambda p: b"data:" + p),
    st.sampled_from([b"data", b"data:", b"data: ", b"", b"", b""]),  # blank lines dispatch
    payload.map(lambda p: b"event: " + p[:40]),
    st.sampled_from([b"event: endpoint", b"event:", b"event: message"]),
    payload.map(lambda p: b"id: " + p[:40]),
    st.sampled_from([b"id", b"id:", b"id: a\x00b", b"id: 7"]),
    retry_value.map(lambda v: b"retry: " + v),
    retry_value.map(lambda v: b"retry:" + v),
    payload.map(lambda p: b":" + p),  # comments, keep-alives
    st.builds(
        lambda n, v: n + b":" + v, st.sampled_from([b"Data", b" data", b"foo", b"ID"]), payload
    ),
)
terminator = st.sampled_from([b"\n", b"\r", b"\r\n"])
streams = st.builds(
    lambda bom, body, tail: (
        (BOM if bom else b"") + b"".join(text + end for text, end in body) + tail
    ),
    st.booleans(),
    st.lists(st.tuples(line, terminator), max_size=14),
    st.one_of(st.just(b""), line),  # a last line without its end
)
caps = st.sampled_from([DEFAULT_CAP, DEFAULT_CAP, 64, 1_000, 100_000])


class Budget:
    """Stops running new examples after ``BUDGET`` seconds, unless one has failed already
    (then every replay while Hypothesis shrinks it runs in full, so the failure is stable)."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.failed = False

    def spent(self) -> bool:
        if self.started is None:
            self.started = time.monotonic()
        return not self.failed and time.monotonic() - self.started > BUDGET

    def __enter__(self) -> Budget:
        return self

    def __exit__(self, kind: Any, *rest: Any) -> None:
        if kind is not None:
            self.failed = True


_model_budget, _decode_budget = Budget(), Budget()


@FUZZ
@given(stream=streams, cap=caps, data=st.data())
def test_parser_equals_the_reference_model_for_any_chunking(stream, cap, data):
    if _model_budget.spent():
        return
    with _model_budget:
        check_all_chunkings(stream, cap, data)


def check_all_chunkings(stream: bytes, cap: int, data: Any) -> None:
    expected = reference(stream, cap)
    assert run_parser([stream], cap) == expected  # all at once
    crs = [m.end() for m in re.finditer(rb"\r", stream)]
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12), label="cuts")
    if crs:  # split inside CRLF (and after lone CRs)
        cuts += data.draw(st.lists(st.sampled_from(crs), max_size=6), label="cr cuts")
    assert run_parser(split(stream, cuts), cap) == expected
    if len(stream) <= 400:  # one byte at a time
        assert run_parser([stream[i : i + 1] for i in range(len(stream))], cap) == expected


@FUZZ
@given(stream=streams)
def test_event_data_decodes_or_is_a_protocol_error(stream):
    if _decode_budget.spent():
        return
    with _decode_budget:
        events, _, _ = run_parser([stream], DEFAULT_CAP)
        for event in events:
            if event[0] != "event":
                continue
            try:
                message = decode(event[2])
            except ProtocolError:
                continue
            assert isinstance(message, (dict, list))


def test_reference_model_sanity():
    """The model itself on the standard's own examples (so a wrong model cannot pass)."""
    stream = b"data: YHOO\ndata: +2\ndata: 10\n\n: c\nid: 1\ndata\n\nretry: 1500\nid\n\n"
    assert reference(stream, DEFAULT_CAP) == (
        [("event", "message", b"YHOO\n+2\n10", None), ("event", "message", b"", "1")],
        "",
        1.5,
    )
    assert reference(b"data: a\r\rdata: b\r\n\r\ndata: c", DEFAULT_CAP)[0] == [
        ("event", "message", b"a", None),
        ("event", "message", b"b", None),
    ]
    assert reference(BOM + b"data: x\n\n" + BOM + b"data: y\n\n", DEFAULT_CAP)[0] == [
        ("event", "message", b"x", None)
    ]
    assert reference(b"data: " + b"x" * 70 + b"\n\ndata: ok\n\n", 64)[0] == [
        ("too large",),
        ("event", "message", b"ok", None),
    ]
    assert reference(b": " + b"x" * 70 + b"\ndata: ok\n\n", 64)[0] == [
        ("event", "message", b"ok", None)
    ]
