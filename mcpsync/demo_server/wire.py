"""The demo server's vocabulary: protocol versions, error codes, the data it serves, and the
small types every part uses (:class:`RpcError`, :class:`Call`, :class:`ToolSpec`, result and
schema builders).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .._version import __version__

__all__ = [
    "SUPPORTED_VERSIONS",
    "LATEST_VERSION",
    "LOG_LEVELS",
    "SERVER_NAME",
    "SERVER_VERSION",
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "RESOURCE_NOT_FOUND",
    "GREET_NAMES",
    "ITEM_IDS",
    "MAX_BIG_BYTES",
    "RpcError",
    "Call",
    "ToolSpec",
]

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = SUPPORTED_VERSIONS[-1]
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

SERVER_NAME = "mcpsync-demo"
SERVER_VERSION = __version__  # the demo server ships with mcpsync

# JSON-RPC / MCP error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002

GREET_NAMES = ("Ada", "Alan", "Alice", "Barbara", "Bob", "Carol", "Dave", "Eve", "Grace", "Linus")
ITEM_IDS = tuple(str(i) for i in range(1, 51))
MAX_BIG_BYTES = 512 * 1024 * 1024
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ITEM_URI = re.compile(r"^demo://item/([^/]+)$")


class RpcError(Exception):
    """A JSON-RPC error to send back (or one the client sent us)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class _Cancelled(Exception):
    """The request was cancelled by the client (or the server is shutting down)."""


@dataclass
class Call:
    """One in-flight client request, as seen by a tool handler."""

    id: Any
    method: str
    params: dict[str, Any]
    cancelled: threading.Event = field(default_factory=threading.Event)
    outgoing: set[int] = field(default_factory=set)

    @property
    def progress_token(self) -> Any:
        meta = self.params.get("_meta")
        return meta.get("progressToken") if isinstance(meta, dict) else None


@dataclass
class ToolSpec:
    """A tool: its ``tools/list`` definition, its handler, and where it runs."""

    definition: dict[str, Any]
    handler: Callable[[Call, dict[str, Any]], dict[str, Any] | None]
    threaded: bool = False  # True: runs on a worker thread (may wait on the client)


class _Pending:
    __slots__ = ("event", "result", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: Any = None
        self.error: dict[str, Any] | None = None


def _text(text: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
