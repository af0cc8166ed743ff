"""JSON-RPC 2.0 framing shared by every transport and the connection.

Owns: encoding one message to bytes, decoding bytes to messages, classifying a message
(request / notification / response), the standard error codes, and building error
responses. Uses the stdlib ``json`` only: the hot path never touches pydantic.
"""

from __future__ import annotations

import json
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
    "kind_of",
    "error_response",
    "excerpt",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

_loads = json.JSONDecoder().decode
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def encode(message: Any) -> bytes:
    """One message (or batch) as compact UTF-8 JSON, without a trailing newline."""
    return _dumps(message).encode("utf-8")


def excerpt(data: bytes | str, limit: int = 200) -> str:
    """A short printable piece of ``data`` for error messages."""
    if isinstance(data, bytes):
        data = data[: limit * 4].decode("utf-8", "replace")
    data = data.strip()
    return data if len(data) <= limit else data[:limit] + f"... ({len(data)} chars)"


def decode(data: bytes | str) -> Any:
    """Parse one JSON-RPC message or batch; raise ProtocolError on anything else."""
    try:
        message = _loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {excerpt(data)!r} ({exc})") from None
    if isinstance(message, dict):
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
