"""Fuzz the stdio reader: hostile lines between valid messages, the stream cut at random bytes.

The real ``StdioTransport`` read step (what its reader thread does with each read of the
pipe: ``transport.framer.chunk``, which frames lines, decodes and delivers) reads from an
``os.pipe`` this test writes the pieces into, as a
server's stdout would deliver them. Hostile shapes: nesting deeper than any parser allows
(open and closed), integers over Python's digit limit, invalid UTF-8, garbage text, lines
over the size limit. Every valid message must be delivered, in order and equal; every bad
line reported once as a ``ProtocolError``; nothing raised; the reader still reads after.

Bounded: a fixed number of examples, no per-example deadline; the step takes a few seconds.
"""

from __future__ import annotations

import json
import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpsync.errors import ProtocolError
from mcpsync.transports.stdio import MessageTooLarge, StdioTransport

LIMIT = 200_000  # max_message_bytes of the transport under test

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def valid_message(draw) -> dict:
    n = draw(st.integers(0, 10**6))
    if draw(st.booleans()):
        return {"jsonrpc": "2.0", "id": n, "result": {"v": draw(json_values)}}
    return {
        "jsonrpc": "2.0",
        "method": "notifications/x",
        "params": {"n": n, "v": draw(json_values)},
    }


def _deep_open(depth: int) -> bytes:
    return b"[" * depth


def _deep_closed(depth: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":' + b"[" * depth + b"]" * depth + b"}"


def _huge_int(digits: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":2,"result":{"n":' + b"7" * digits + b"}}"


def _bad_utf8(junk: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":3,"result":"' + junk + b'"}'


def _oversize(size: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":4,"result":"' + b"x" * size + b'"}'


bad_line = st.one_of(
    st.integers(20_000, 150_000).map(_deep_open),
    st.integers(20_000, 50_000).map(_deep_closed),
    st.integers(5_000, 20_000).map(_huge_int),
    st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80"]).map(
        _bad_utf8
    ),
    st.binary(max_size=200).map(lambda b: b"#" + b.replace(b"\n", b"")),  # never JSON
    st.integers(LIMIT + 1, LIMIT + 50_000).map(_oversize),
)

item = st.one_of(valid_message().map(lambda m: ("ok", m)), bad_line.map(lambda b: ("bad", b)))


def _wire(message: dict) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    items=st.lists(item, min_size=1, max_size=12),
    cuts=st.lists(st.integers(1, 70_000), max_size=30),
)
def test_the_stdio_reader_survives_hostile_streams(items, cuts):
    delivered: list[dict] = []
    errors: list[BaseException] = []
    transport = StdioTransport([sys.executable, "-c", "pass"], max_message_bytes=LIMIT)
    transport._bind(delivered.append, lambda e: None, errors.append)  # noqa: SLF001
    read_end, write_end = os.pipe()  # the pipe stands in for the server's stdout
    try:
        stream = b"".join((_wire(v) if kind == "ok" else v) + b"\n" for kind, v in items)
        # Cut the stream at random byte boundaries (inside UTF-8 sequences, mid-line, ...);
        # each piece is at most 64 KiB, what one read takes from the pipe.
        pieces, position = [], 0
        for cut in cuts + [len(stream)] * (len(stream) // 60_000 + 1):
            end = min(position + min(cut, 65_536), len(stream))
            if end > position:
                pieces.append(stream[position:end])
                position = end
        assert b"".join(pieces) == stream
        for piece in pieces:
            os.write(write_end, piece)
            transport.framer.chunk(os.read(read_end, 65_536))  # what the reader thread runs
        expected = [v for kind, v in items if kind == "ok"]
        assert delivered == expected
        bad = [v for kind, v in items if kind == "bad"]
        assert len(errors) == len(bad), [str(e)[:80] for e in errors]
        assert all(isinstance(e, ProtocolError) for e in errors)
        oversize = [e for e in errors if isinstance(e, MessageTooLarge)]
        assert all(e.request_id == 4 for e in oversize)
        # the reader still reads
        os.write(write_end, b'{"jsonrpc":"2.0","id":9,"result":{}}\n')
        transport.framer.chunk(os.read(read_end, 65_536))
        assert delivered[-1] == {"jsonrpc": "2.0", "id": 9, "result": {}}
    finally:
        os.close(read_end)
        os.close(write_end)
