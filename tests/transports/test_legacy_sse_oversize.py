"""A reply over the size limit on the legacy HTTP+SSE stream fails its call at once.

Every reply of a 2024-11-05 server comes over the one event stream, so the only way to
know whose reply an event over ``max_event_bytes`` was is its data: its first bytes
(``{"jsonrpc":"2.0","id":7,...``, the Python SDK's order) or, when a huge ``result`` comes
first, its last bytes (``...},"jsonrpc":"2.0","id":7}``, the TypeScript SDK's order, so
``mcp-server-everything``'s). Either way the call fails with ``ReplyTooLarge`` naming the
size and the limit, long before its 60 s timeout (the test waits on the error with a
bound of its own, never on a clock), and the session keeps working. When the id cannot be
known the event is reported as a ``ProtocolError`` (logged), as the other transports do.
The parser's ``EventTooLarge.tail`` is checked against a reference for any chunking.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from servers.launch import everything_sse, sdk_server_sse
from test_fuzz_sse import BOM, caps, split, streams
from test_legacy_sse_transport import LegacyServer

import mcpsync
from mcpsync.errors import RequestTimeout
from mcpsync.transports.http.legacy_sse import LegacySSETransport
from mcpsync.transports.http.sse import EventTooLarge, ReplyTooLarge, SSEParser, reply_id

LIMIT = 100_000
BIG = "z" * 150_000
BOUND = 30.0  # the test's own bound on the error's arrival (the call's timeout is 60 s)


def call_bounded(session: mcpsync.Session, name: str, arguments: dict[str, Any]) -> Any:
    """``session.call_tool(name, arguments, timeout=60)`` in a thread; what it returned or
    raised. Fails the test if it is still waiting after ``BOUND`` seconds (the session is
    closed then, which ends the call)."""
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(session.call_tool(name, arguments, timeout=60))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)
        done.set()

    thread = threading.Thread(target=run, name="test-call", daemon=True)
    thread.start()
    if not done.wait(BOUND):
        session.close()
        thread.join(10)
        pytest.fail(f"the call was still waiting after {BOUND:g} s: it waits for its timeout")
    thread.join(10)
    return outcome[0]


def assert_too_large(error: Any) -> None:
    assert isinstance(error, ReplyTooLarge), repr(error)
    assert isinstance(error.request_id, int)
    text = str(error)
    assert f"exceeded {LIMIT} bytes" in text and re.search(r"\(\d{6,} bytes or more\)", text)
    assert f"reply to request {error.request_id!r}" in text


# -- a scripted 2024-11-05 server writing the big reply in several shapes ---------------------


def _result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


SHAPES = {
    # the TypeScript SDK's order: the result, then jsonrpc, then the id
    "id-last": lambda rid, r: (
        b"data: " + json.dumps({"result": r, "jsonrpc": "2.0", "id": rid}).encode()
    ),
    "id-then-jsonrpc": lambda rid, r: (
        b"data: "
        + json.dumps({"result": r, "id": rid, "jsonrpc": "2.0"}, separators=(",", ":")).encode()
    ),
    # pretty-printed: one data line per JSON line, the id on the last but one
    "many-data-lines": lambda rid, r: b"\n".join(
        b"data: " + line.encode()
        for line in json.dumps({"jsonrpc": "2.0", "result": r, "id": rid}, indent=2).split("\n")
    ),
    "error-id-last": lambda rid, r: (
        b"data:"
        + json.dumps({"jsonrpc": "2.0", "error": {"code": -1, "message": BIG}, "id": rid}).encode()
    ),
    # the Python SDK's order: the id first
    "id-first": lambda rid, r: (
        b"data: " + json.dumps({"jsonrpc": "2.0", "id": rid, "result": r}).encode()
    ),
}


class ShapedServer(LegacyServer):
    """Answers ``tools/call`` with ``{"big": <shape>}`` by a 150 kB reply in that shape,
    ``{"request": true}`` by a 150 kB server request carrying the call's id, then the real
    reply, and ``{"unknown": true}`` by a big reply whose id cannot be read from its ends."""

    def answer(self, message: dict[str, Any]) -> Any:
        reply = super().answer(message)
        if message.get("method") != "tools/call":
            return reply
        arguments = message["params"]["arguments"]
        rid = message["id"]
        if "big" in arguments:
            return b"event: message\n" + SHAPES[arguments["big"]](rid, _result(BIG)) + b"\n\n"
        if arguments.get("request"):
            request = {"method": "sampling/createMessage", "params": {"x": BIG}}
            big = json.dumps({**request, "jsonrpc": "2.0", "id": rid}).encode()
            return b"data: " + big + b"\n\n" + b"data: " + json.dumps(reply).encode() + b"\n\n"
        if arguments.get("unknown"):
            body = {"result": _result(BIG), "id": rid, "_meta": {"after": "the id"}}
            return b"data: " + json.dumps(body).encode() + b"\n\n"
        return reply

    def push(self, message: Any, session: str | None = None) -> None:
        if isinstance(message, bytes):
            (self.streams[session] if session else self.outbox).put(message)
        else:
            super().push(message, session)


def small_session(url: str) -> mcpsync.Session:
    transport = LegacySSETransport(url, max_event_bytes=LIMIT, name="small")
    return mcpsync.Session.connect(transport, timeout=60)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_big_reply_fails_its_call_at_once_and_the_session_goes_on(no_leaks, shape):
    with ShapedServer() as server, small_session(server.url) as s:
        assert s.call_tool("echo", {"message": "before"}).content[0].text == "before"
        assert_too_large(call_bounded(s, "echo", {"message": "x", "big": shape}))
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"


def test_a_big_server_request_with_the_calls_id_does_not_fail_the_call(no_leaks, caplog):
    caplog.set_level(logging.WARNING, logger="mcpsync")
    with ShapedServer() as server, small_session(server.url) as s:
        result = call_bounded(s, "echo", {"message": "the real reply", "request": True})
        assert not isinstance(result, BaseException), repr(result)
        assert result.content[0].text == "the real reply"
    assert [r for r in caplog.records if f"exceeded {LIMIT} bytes" in r.getMessage()]


def test_a_big_reply_whose_id_cannot_be_read_is_reported(no_leaks, caplog):
    caplog.set_level(logging.WARNING, logger="mcpsync")
    with ShapedServer() as server, small_session(server.url) as s:
        with pytest.raises(RequestTimeout):
            s.call_tool("echo", {"message": "x", "unknown": True}, timeout=1.0)
        (record,) = [r for r in caplog.records if f"exceeded {LIMIT} bytes" in r.getMessage()]
        assert record.levelno == logging.WARNING and "reply to request" not in record.getMessage()
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"


# -- real servers -----------------------------------------------------------------------------


@pytest.mark.real
def test_everything_server_big_reply_with_its_id_last(no_leaks):
    with everything_sse() as server, small_session(server.url) as s:
        assert s.call_tool("echo", {"message": "hi"}).content[0].text == "Echo: hi"
        assert_too_large(call_bounded(s, "echo", {"message": BIG}))
        assert s.call_tool("echo", {"message": "again"}).content[0].text == "Echo: again"


@pytest.mark.real
def test_official_sdk_server_big_reply_with_its_id_first(no_leaks):
    with sdk_server_sse() as server, small_session(server.url) as s:
        assert_too_large(call_bounded(s, "echo", {"message": BIG}))
        assert s.call_tool("echo", {"message": "again"}).content[0].text == "again"


# -- whose reply: the rule, and the parser's tail ----------------------------------------------


@pytest.mark.parametrize(
    ("head", "tail", "expected"),
    [
        (b'{"result":{"content":[{"text":"', b'zzzz"}]},"jsonrpc":"2.0","id":7}', 7),
        (b'{"result":{"text":"', b'zz"},"id":"a\\"b","jsonrpc":"2.0"}\n', 'a"b'),
        (b'{"jsonrpc":"2.0","id":3,"result":{"x":"', b'zz"},"id":9}', 3),  # the head's
        (b'{"error":{"message":"', b'z"},"id":-4}', -4),
        (b'{"result":{"x":"', b'zz","id":5}}', None),  # a nested id is not the reply's
        (b'{"result":{"x":"', b'z"},"id":5,"_meta":{"a":1}}', None),  # a container after it
        (b'{"method":"sampling/createMessage","params":{"x":"', b'z"},"id":5}', None),
        (b'{"params":{"x":"', b'z"},"method":"m","id":5}', None),  # not a response
        (b'{"result":{"x":"', b'z"},"id":true}', None),
        (b'{"result":{"x":"', b'z"},"id":5.0}', None),
        (b'{"result":{"x":"', b'\\"id\\":5}', None),  # cut off inside a string
        (b'{"result":{"x":"', b"12}", None),  # cut off in a value
        (b'{"result":{"x":"', b'z"},"id":5]', None),
        (b'{"result":{"x":"', b"", None),
    ],
)
def test_reply_id_reads_a_top_level_id_from_either_end(head, tail, expected):
    found = reply_id(head, tail)
    assert found == expected and type(found) is type(expected)


def reference_tails(stream: bytes, cap: int) -> list[bytes]:
    """The last 512 bytes of the data (every ``data`` line, also those over the cap,
    joined with LF) of each event the parser reports as too large, straight from the
    event-stream rules (``test_fuzz_sse.reference`` says which events those are)."""
    if stream.startswith(BOM):
        stream = stream[3:]
    tails: list[bytes] = []
    values: list[bytes] = []
    size, too_large = 0, False
    for line in re.split(rb"\r\n|\r|\n", stream)[:-1]:
        if not line:
            if too_large:
                tails.append(b"\n".join(values)[-512:])
            values, size, too_large = [], 0, False
            continue
        if len(line) > cap:
            if line.startswith(b"data:"):
                too_large = True
                values.append(line[6:] if line[5:6] == b" " else line[5:])
            continue
        name, colon, value = line.partition(b":")
        if name == b"data":
            value = value[1:] if value[:1] == b" " else value
            values.append(value)
            size += len(value) + 1
            too_large = too_large or size > cap
    return tails


def parser_tails(chunks: list[bytes], cap: int) -> list[bytes]:
    parser = SSEParser(cap)
    return [e.tail for c in chunks for e in parser.feed(c) if isinstance(e, EventTooLarge)]


FUZZ = settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@FUZZ
@given(stream=streams, cap=caps, cuts=st.lists(st.integers(0, 400_000), max_size=12))
def test_the_tail_of_a_too_large_event_for_any_chunking(stream, cap, cuts):
    expected = reference_tails(stream, cap)
    assert parser_tails([stream], cap) == expected
    assert parser_tails(split(stream, cuts), cap) == expected
    if len(stream) <= 3_000:
        assert parser_tails([stream[i : i + 1] for i in range(len(stream))], cap) == expected


@FUZZ
@given(
    rid=st.one_of(st.integers(-(2**40), 2**40), st.text(max_size=20)),
    text=st.text(max_size=3_000),
    indent=st.sampled_from([None, 0, 2]),  # 0 and 2: one data line per JSON line
    cap=st.sampled_from([64, 300, 1_000]),
    cuts=st.lists(st.integers(0, 8_000), max_size=8),
)
def test_an_id_after_the_result_is_found_for_any_chunking(rid, text, indent, cap, cuts):
    reply = {"result": _result(text + "z" * cap), "jsonrpc": "2.0", "id": rid}
    lines = json.dumps(reply, indent=indent).split("\n")
    stream = b"".join(b"data: " + line.encode() + b"\n" for line in lines) + b"\n"
    for chunks in ([stream], split(stream, cuts)):
        parser = SSEParser(cap)
        (event,) = [e for c in chunks for e in parser.feed(c)]
        assert isinstance(event, EventTooLarge)
        assert reply_id(event.head, event.tail) == rid
