"""jsonrpc's fast decoder (pydantic-core's from_json, on once pydantic is imported) accepts
exactly what the stdlib decoder accepts, with the same values, and fails the same way."""

from __future__ import annotations

import json

import pytest

from mcpsync import jsonrpc
from mcpsync import typed as _typed
from mcpsync.errors import ProtocolError

ACCEPTED = [
    b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}',
    b'  {"a": 1}  \n',
    b'{"a":NaN,"b":Infinity,"c":-Infinity,"d":1e400}',
    b'{"a":123456789012345678901234567890,"b":-0,"c":1.5e3}',
    b'{"a":1,"a":2}',  # the last one wins, as in json
    '{"\u00e9":"\\u0000\\n\u2603"}'.encode(),
    b'{"lone":"\\ud800"}',  # a lone surrogate escape: from_json refuses it, json takes it
    b"[" * 300 + b"]" * 300,  # deeper than from_json goes: json takes it
    b"null",
    b"[1,2,3]",
]

REFUSED = [
    b'{"a":"x\ty"}',
    b'{"a":01}',
    b'{"a":1,}',
    b"{'a':1}",
    b'\xef\xbb\xbf{"a":1}',
    b'{"a":1} x',
    b"\xff\xfe",
    b'{"a":' + b"7" * 5000 + b"}",  # an integer too long to convert
    b"[" * 100_000,
    b"",
]


@pytest.fixture(autouse=True)
def fast_decoder():
    _typed.types()  # imports pydantic, which turns the fast decoder on
    assert jsonrpc._fast is not None  # noqa: SLF001 - the decoder under test is in use


@pytest.mark.parametrize("data", ACCEPTED)
def test_the_fast_decoder_gives_the_stdlib_values(data):
    got = jsonrpc.parse_json(data)
    expected = json.loads(data.decode("utf-8"))
    assert repr(got) == repr(expected)  # (repr: NaN != NaN)
    assert [type(v) for v in _leaves(got)] == [type(v) for v in _leaves(expected)]


@pytest.mark.parametrize("data", REFUSED)
def test_the_fast_decoder_fails_as_the_stdlib_one_does(data):
    with pytest.raises(ProtocolError) as fast:
        jsonrpc.parse_json(data, "bad line")
    saved, jsonrpc._fast = jsonrpc._fast, None  # noqa: SLF001 - the stdlib path alone
    try:
        with pytest.raises(ProtocolError) as stdlib:
            jsonrpc.parse_json(data, "bad line")
    finally:
        jsonrpc._fast = saved  # noqa: SLF001
    assert str(fast.value) == str(stdlib.value)


def _leaves(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


@pytest.mark.parametrize("data", REFUSED)
def test_decode_with_the_fast_decoder_fails_as_parse_json_does(data):
    with pytest.raises(ProtocolError) as decoded:
        jsonrpc.decode(data)
    with pytest.raises(ProtocolError) as parsed:
        jsonrpc.parse_json(data)
    assert str(decoded.value) == str(parsed.value)


@pytest.mark.parametrize("data", [d for d in ACCEPTED if d.lstrip()[:1] == b"{"])
def test_decode_with_the_fast_decoder_gives_the_stdlib_message(data):
    assert repr(jsonrpc.decode(data)) == repr(json.loads(data.decode("utf-8")))
