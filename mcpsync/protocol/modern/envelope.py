"""The 2026-07-28 wire's vocabulary: ``_meta`` keys, limits, the per-request envelope.

Owns: the ``io.modelcontextprotocol/*`` keys, the method sets of the modern era (MRTR,
tasks, cacheable lists), the modern errors raised to callers, the client capabilities in
their 2026-07-28 shape, ``Envelope`` (what every modern request carries in ``_meta``;
``EraHooks.meta`` gives it to the connection), and the versions a -32022 error offers
(``supported_of``, ``newest_mutual_modern``). A leaf of ``protocol.modern``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ... import jsonrpc
from ...errors import ProtocolError
from ...transports.http.headers import InvalidToolHeaders
from ...versions import MODERN_VERSIONS, PROTOCOL_VERSION_KEY

__all__ = [
    "PROTOCOL_VERSION_KEY",
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "LOG_LEVEL_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "TASKS_EXTENSION",
    "MODERN_ERROR_CODES",
    "MRTR_METHODS",
    "TASK_METHODS",
    "CACHEABLE_METHODS",
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_PROBE_TIMEOUT",
    "LISTEN_TIMEOUT",
    "InputRequiredRoundsExceeded",
    "InvalidToolHeaders",
    "Envelope",
    "modern_capabilities",
    "dict_at",
    "mapping_at",
    "result_type",
    "dump",
    "supported_of",
    "newest_mutual_modern",
]

CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

#: JSON-RPC errors only a modern server sends: positive evidence of the modern era.
MODERN_ERROR_CODES = frozenset(
    {jsonrpc.HEADER_MISMATCH, -32021, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION}
)
#: Methods on which a server may answer ``input_required``.
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Methods on which a server may answer with a task (tasks extension).
TASK_METHODS = frozenset({"tools/call"})
#: Methods whose results carry cache hints and that the list caches keep.
CACHEABLE_METHODS = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)
#: Cap on ``input_required`` rounds for one call.
DEFAULT_MAX_ROUNDS = 10
#: stdio: how long the ``server/discover`` probe may go unanswered before ``initialize``
#: is sent beside it (at most half of ``connect_timeout``; the probe is not given up).
DEFAULT_PROBE_TIMEOUT = 5.0
#: A listen stream is re-opened after this long (it also bounds the idle read on HTTP).
LISTEN_TIMEOUT = 24 * 3600.0


class InputRequiredRoundsExceeded(ProtocolError):
    """The server kept answering ``input_required`` past the round limit."""


# -- the per-request envelope ------------------------------------------------------------


def modern_capabilities(capabilities: Mapping[str, Any], *, tasks: bool = True) -> dict[str, Any]:
    """Client capabilities in their 2026-07-28 shape (roots has no ``listChanged``)."""
    out: dict[str, Any] = {}
    for key, value in capabilities.items():
        if key == "roots":
            out["roots"] = {}
        else:
            out[key] = dict(value) if isinstance(value, Mapping) else value
    if tasks:
        extensions = dict(out.get("extensions") or {})
        extensions.setdefault(TASKS_EXTENSION, {})
        out["extensions"] = extensions
    return out


class Envelope:
    """What every modern request carries in ``_meta`` (the connection asks ``EraHooks.meta``)."""

    def __init__(
        self, version: str, capabilities: Mapping[str, Any], client_info: Mapping[str, Any]
    ) -> None:
        self.version = version
        self.capabilities = dict(capabilities)
        self.client_info = dict(client_info)
        #: per-request log level (``set_logging_level`` in the modern era); None = no logs
        self.log_level: str | None = None

    def __call__(self, method: str) -> dict[str, Any]:
        if method.startswith("notifications/"):
            return {}
        meta: dict[str, Any] = {
            PROTOCOL_VERSION_KEY: self.version,
            CLIENT_CAPABILITIES_KEY: self.capabilities,
            CLIENT_INFO_KEY: self.client_info,
        }
        if self.log_level is not None and method not in ("server/discover", "subscriptions/listen"):
            meta[LOG_LEVEL_KEY] = self.log_level
        return meta

    @property
    def tasks(self) -> bool:
        return TASKS_EXTENSION in (self.capabilities.get("extensions") or {})


def mapping_at(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` if it is a mapping, else an empty one (a peer may send anything there)."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def dict_at(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` if it is a JSON object, else an empty one (a peer may send anything there)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def result_type(result: Any) -> str:
    """A result's ``resultType`` ("complete" when absent; "invalid" when not a string)."""
    if isinstance(result, dict):
        kind = result.get("resultType", "complete")
        return kind if isinstance(kind, str) else "invalid"
    return "complete"


def dump(value: Any) -> Any:
    """A handler's answer as JSON data (a pydantic model dumped by alias)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


def supported_of(data: Any) -> list[str] | None:
    """The ``supported`` versions in a -32022 error's data, if it lists them."""
    supported = data.get("supported") if isinstance(data, dict) else None
    if isinstance(supported, list) and all(isinstance(v, str) for v in supported):
        return supported
    return None


def newest_mutual_modern(supported: Any, preferred: str | None = None) -> str | None:
    """The newest modern version both sides speak (``preferred`` first, if mutual)."""
    if preferred is not None and preferred in supported:
        return preferred
    for version in MODERN_VERSIONS:  # newest first
        if version in supported:
            return version
    return None
