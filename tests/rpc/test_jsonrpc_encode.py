"""jsonrpc.encode: pydantic-core's ``to_json`` first once pydantic is imported, the stdlib
encoder before that and for whatever ``to_json`` refuses; one rule either way (same JSON
values, the same refusals)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from collections.abc import Iterator

import pytest

from mcpsync import jsonrpc
from mcpsync import typed as _typed


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: float


def _model():
    return _typed.types().TextContent(type="text", text="hi")  # fields with aliases: _meta


PLAIN = [
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}},
    {"text": "caf\u00e9 \u2603 \u2028", "ctl": '\x00\x1f"\\/', "n": [1, 2.5, -0.0, None, True]},
    {"big": 123456789012345678901234567890, "small": 1e-7, "e": 1e16, "f": 0.1},
    {"words": "NaN and Infinity are fine inside strings", "NaN": "-Infinity"},
    {"tuple": (1, 2), "nested": {"a": [{"b": []}, {}]}, "1": "key"},
    [{"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "method": "x"}],
]

LENIENT = [  # not JSON values, serialized as pydantic does, on both paths
    {"when": datetime.datetime(2026, 12, 1, 17, 54, 0, tzinfo=datetime.timezone.utc)},
    {"day": datetime.date(2026, 12, 1), "id": uuid.UUID(int=7), "d": decimal.Decimal("1.50")},
    {"color": Color.RED, "set": {3}, "bytes": b"utf-8 text", "point": Point(1, 2.5)},
    {"model": "see _model()"},
]


@pytest.fixture(params=["fast", "stdlib"])
def path(request) -> Iterator[str]:
    _typed.types()  # imports pydantic: the fast encoder is on
    assert jsonrpc._fast_encode is not None  # noqa: SLF001 - the encoder under test is in use
    if request.param == "fast":
        yield "fast"
        return
    saved, jsonrpc._fast_encode = jsonrpc._fast_encode, None  # noqa: SLF001
    try:
        yield "stdlib"
    finally:
        jsonrpc._fast_encode = saved  # noqa: SLF001


@pytest.mark.parametrize("message", PLAIN)
def test_json_values_encode_compact_and_as_the_stdlib_does(message, path):
    data = jsonrpc.encode(message)
    expected = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(data) == json.loads(expected)
    assert b"\n" not in data and b": " not in data and b", " not in data  # compact, one line
    data.decode("utf-8")  # UTF-8, not escaped ASCII
    if "caf\u00e9" in str(message):
        assert "caf\u00e9".encode() in data


@pytest.mark.parametrize("index", range(len(LENIENT)))
def test_what_pydantic_serializes_is_encoded_alike_on_both_paths(index, path):
    message = LENIENT[index] if index < 3 else {"model": _model()}
    got = json.loads(jsonrpc.encode(message))
    from pydantic_core import to_jsonable_python

    assert got == to_jsonable_python(message, by_alias=True)
    if index == 3:
        assert "_meta" in got["model"] and "meta" not in got["model"]  # by alias


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), -float("inf"), [1, {"x": float("nan")}]]
)
def test_nan_and_infinity_are_refused_on_both_paths(value, path):
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        jsonrpc.encode({"jsonrpc": "2.0", "id": 1, "params": {"v": value}})


@pytest.mark.parametrize("value", [object(), {"x": [object()]}, b"\xff not UTF-8", {"f": len}])
def test_other_objects_are_refused_with_a_type_error_on_both_paths(value, path):
    with pytest.raises(TypeError, match="is not JSON serializable"):
        jsonrpc.encode({"params": value})


def test_a_circular_structure_is_refused(path):
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises((RecursionError, ValueError)):
        jsonrpc.encode(loop)


def test_nesting_deeper_than_to_json_goes_still_encodes(path):
    deep: list = []
    for _ in range(600):  # past pydantic-core's serialization depth, within the stdlib's
        deep = [deep]
    assert jsonrpc.encode(deep) == b"[" * 601 + b"]" * 601
