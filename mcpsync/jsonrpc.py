"""JSON-RPC 2.0 framing shared by every transport and the connection.

Owns: encoding one message to bytes, decoding bytes to messages, classifying a message
(request / notification / response), the standard error codes, and building error
responses. Encodes and decodes with the stdlib ``json`` until ``_typed`` has imported
pydantic (``use_fast_codec``); then pydantic-core's ``to_json`` and ``from_json`` go first
(about 0.8 us and 0.4 us less per message), and the stdlib handles whatever they refuse, so
what is accepted and every error message stay the stdlib's (``import mcpsync`` still
imports no pydantic). One encoding rule either way: JSON values, plus what pydantic
serializes (datetime/date/time as ISO 8601, UUID, Decimal, Enum, set, UTF-8 bytes, pydantic
models by alias, dataclasses); NaN and Infinity are refused (ValueError, not JSON), any
other object too (TypeError "... is not JSON serializable").
"""

from __future__ import annotations

import json
import json.encoder
import json.scanner
from typing import Any

from .errors import ProtocolError

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "HEADER_MISMATCH",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "encode",
    "decode",
    "parse_json",
    "kind_of",
    "error_response",
    "excerpt",
    "use_fast_codec",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

_loads = json.JSONDecoder().decode


def _jsonable(value: Any) -> Any:
    """The stdlib encoder's ``default``: a value that is not JSON as pydantic-core serializes
    it (the fast encoder's rule), else TypeError."""
    try:
        from pydantic_core import to_jsonable_python

        return to_jsonable_python(value, by_alias=True)
    except (ImportError, ValueError):  # (PydanticSerializationError: unknown to pydantic too)
        pass
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_dumps = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_jsonable
).encode

# The C encoder and scanner behind ``json``, called directly: the same output as _dumps and
# _loads without their Python-level wrappers (about 2 us less per message). No circular
# reference check: a circular structure ends in RecursionError instead.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_c_encode_basestring = getattr(json.encoder, "c_encode_basestring", None)
_c_make_scanner = getattr(json.scanner, "c_make_scanner", None)
_c_encode = (
    _c_make_encoder(None, _jsonable, _c_encode_basestring, None, ":", ",", False, False, False)
    if _c_make_encoder is not None and _c_encode_basestring is not None
    else None
)
_c_scan = _c_make_scanner(json.JSONDecoder()) if _c_make_scanner is not None else None
#: pydantic-core's ``from_json`` and ``to_json`` once pydantic is imported (module docstring)
_fast: Any = None
_fast_encode: Any = None


def use_fast_codec() -> None:
    """Let ``encode`` and ``parse_json`` try pydantic-core first (once pydantic is loaded)."""
    global _fast, _fast_encode
    try:
        from pydantic_core import from_json, to_json
    except ImportError:  # pragma: no cover - pydantic is a dependency
        return
    _fast, _fast_encode = from_json, to_json


def encode(message: Any) -> bytes:
    """One message (or batch) as compact UTF-8 JSON, without a trailing newline."""
    fast = _fast_encode
    if fast is not None:
        try:
            data: bytes = fast(message, by_alias=True)
        except ValueError:  # not serializable, too deep, circular: the stdlib path says why
            pass
        else:
            # NaN and Infinity come out as bare constants (not JSON): the stdlib path refuses
            # them. (A string holding these words takes that path too, with the same result.)
            if data.find(b"NaN") < 0 and data.find(b"Infinity") < 0:
                return data
    if _c_encode is not None:
        return "".join(_c_encode(message, 0)).encode("utf-8")
    return _dumps(message).encode("utf-8")


def excerpt(data: bytes | str, limit: int = 200) -> str:
    """A short printable piece of ``data`` for error messages."""
    if isinstance(data, bytes):
        data = data[: limit * 4].decode("utf-8", "replace")
    data = data.strip()
    return data if len(data) <= limit else data[:limit] + f"... ({len(data)} chars)"


def parse_json(data: bytes | str, what: str = "not JSON") -> Any:
    """Parse one JSON value from a peer; every way it can fail is a ``ProtocolError``.

    The one safe decode for bytes from the wire (stdio lines, HTTP bodies, SSE ``data:``):
    invalid UTF-8, invalid JSON, an integer too long to convert and nesting too deep for the
    parser (``RecursionError``, e.g. a 100,000-deep ``[[[``) all become a ``ProtocolError``
    whose message starts with ``what``, so a hostile peer never raises anything else.
    """
    if _fast is not None:
        try:
            return _fast(data)  # the same values as json's for what both accept
        except ValueError:
            pass  # refused (or not JSON): the stdlib decoder decides and says why
    message: Any = None
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        if _c_scan is not None:  # fast path: a value right at the start, only whitespace after it
            try:
                message, end = _c_scan(text, 0)
            except (StopIteration, ValueError):
                message = None
            else:
                if end != len(text) and not text[end:].isspace():
                    message = None
        if message is None:  # the full decoder: leading whitespace, and its error messages
            message = _loads(text)
    except ValueError as exc:  # includes UnicodeDecodeError and JSONDecodeError
        raise ProtocolError(f"{what}: {excerpt(data)!r} ({exc})") from None
    except RecursionError:
        raise ProtocolError(f"{what}: nested too deeply to parse: {excerpt(data, 40)!r}") from None
    return message


def decode(data: bytes | str) -> Any:
    """Parse one JSON-RPC message or batch; raise ProtocolError on anything else."""
    if _fast is not None:  # parse_json's fast path, inlined (every message read)
        try:
            message = _fast(data)
        except ValueError:
            message = parse_json(data)
    else:
        message = parse_json(data)
    if type(message) is dict:
        return message
    if isinstance(message, list) and all(isinstance(m, dict) for m in message):
        return message
    raise ProtocolError(f"not a JSON-RPC message: {excerpt(data)!r}")


def kind_of(message: dict[str, Any]) -> str:
    """'request', 'notification', 'response' or 'invalid'."""
    if "method" in message:
        return "request" if "id" in message else "notification"
    if "id" in message and ("result" in message or "error" in message):
        return "response"
    return "invalid"


def error_response(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response to ``request_id``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
