"""JSON-RPC framing: the fast decode path agrees with the full decoder, errors stay clear."""

from __future__ import annotations

import json

import pytest

from mcpsync import jsonrpc
from mcpsync.errors import ProtocolError


@pytest.mark.parametrize(
    "wire",
    [
        b'{"jsonrpc":"2.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{}}\n',
        b'{"jsonrpc":"2.0","id":1,"result":{}}\r\n',
        b'  \t{"jsonrpc":"2.0","method":"x"}  \n',  # leading whitespace: the full decoder
        '{"id":"\u00e9","result":{"text":"caf\u00e9 \u2603"}}'.encode(),
        b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"y"}]',
        b'{"a":[1,2.5,-3e-2,true,false,null,"\\u0041"]}',
    ],
)
def test_decode_matches_json_loads(wire):
    assert jsonrpc.decode(wire) == json.loads(wire)
    assert jsonrpc.decode(wire.decode()) == json.loads(wire)


@pytest.mark.parametrize(
    ("wire", "says"),
    [
        (b'{"id":1} trailing', "Extra data"),
        (b'{"id":1}{"id":2}', "Extra data"),
        (b"{'id': 1}", "not JSON"),
        (b'{"id":', "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"", "not JSON"),
        (b"42", "not a JSON-RPC message"),
        (b"null", "not a JSON-RPC message"),
        (b'[{"id":1}, 2]', "not a JSON-RPC message"),
    ],
)
def test_decode_rejects_what_is_not_a_message(wire, says):
    with pytest.raises(ProtocolError, match=says):
        jsonrpc.decode(wire)


def test_encode_is_compact_utf8_and_refuses_what_json_cannot_carry():
    message = {"jsonrpc": "2.0", "id": 7, "params": {"text": "caf\u00e9", "n": [1, 2.5, None]}}
    assert jsonrpc.encode(message) == json.dumps(
        message, ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")
    with pytest.raises(ValueError):
        jsonrpc.encode({"x": float("nan")})
    with pytest.raises(TypeError, match="not JSON serializable"):
        jsonrpc.encode({"x": object()})


@pytest.mark.parametrize(
    ("wire", "says"),
    [
        (b"[" * 100_000, "nested too deeply"),
        (b'{"id":1,"result":' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (b'{"a":' * 100_000, "nested too deeply"),
        (b'{"id":1,"result":' + b"9" * 10_000 + b"}", "not JSON"),  # over int's digit limit
        (b'{"id":1,"result":"\xc3\x28"}', "not JSON"),  # invalid UTF-8 inside a string
        (b"\xed\xa0\x80", "not JSON"),  # a UTF-8-encoded surrogate
    ],
)
def test_hostile_input_is_always_a_protocol_error(wire, says):
    # parse_json is the one safe decode every transport uses (stdio lines, HTTP bodies, SSE).
    with pytest.raises(ProtocolError, match=says):
        jsonrpc.parse_json(wire)
    with pytest.raises(ProtocolError, match=says):
        jsonrpc.decode(wire)


def test_parse_json_returns_any_value_and_names_what_failed():
    assert jsonrpc.parse_json(b' {"a": [1, 2]} ') == {"a": [1, 2]}
    assert jsonrpc.parse_json("[1, 2]") == [1, 2]
    with pytest.raises(ProtocolError, match="^SSE event data is not JSON"):
        jsonrpc.parse_json(b"{", what="SSE event data is not JSON")
