"""What the demo server offers besides tools: resources (static ones, a template, subscriptions),
the ``greet`` prompt, completions, and ``logging/setLevel``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .core import ServerCore
from .wire import (
    _ITEM_URI,
    GREET_NAMES,
    INVALID_PARAMS,
    ITEM_IDS,
    LOG_LEVELS,
    RESOURCE_NOT_FOUND,
    Call,
    RpcError,
)

__all__ = ["ContentServer"]


class ContentServer(ServerCore):
    """Resources, prompts, completion and logging on top of :class:`ServerCore`."""

    def _install(self) -> None:
        super()._install()
        self._methods.update(
            {
                "resources/list": self._resources_list,
                "resources/templates/list": self._templates_list,
                "resources/read": self._resources_read,
                "resources/subscribe": self._subscribe,
                "resources/unsubscribe": self._unsubscribe,
                "prompts/list": self._prompts_list,
                "prompts/get": self._prompts_get,
                "completion/complete": self._complete,
                "logging/setLevel": self._set_level,
            }
        )

    # resources
    _STATIC_RESOURCES: tuple[dict[str, Any], ...] = (
        {
            "uri": "demo://readme",
            "name": "readme",
            "mimeType": "text/markdown",
            "description": "About this server",
        },
        {
            "uri": "demo://data.json",
            "name": "data",
            "mimeType": "application/json",
            "description": "Some JSON",
        },
        {
            "uri": "demo://bytes.bin",
            "name": "bytes",
            "mimeType": "application/octet-stream",
            "description": "Bytes 0..255 (blob)",
        },
        {
            "uri": "demo://counter",
            "name": "counter",
            "mimeType": "text/plain",
            "description": "How often it was touched",
        },
    )
    _TEMPLATE = {
        "uriTemplate": "demo://item/{id}",
        "name": "item",
        "mimeType": "text/plain",
        "description": "One item by id (1-50 complete)",
    }

    def _resource_exists(self, uri: str) -> bool:
        return any(r["uri"] == uri for r in self._STATIC_RESOURCES) or bool(_ITEM_URI.match(uri))

    def _resources_list(self, call: Call) -> dict[str, Any]:
        return self._page(call, list(self._STATIC_RESOURCES), "resources")

    def _templates_list(self, call: Call) -> dict[str, Any]:
        return self._page(call, [self._TEMPLATE], "resourceTemplates")

    def _require_uri(self, call: Call) -> str:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, f"{call.method}: uri is required")
        if not self._resource_exists(uri):
            raise RpcError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        return uri

    def _resources_read(self, call: Call) -> dict[str, Any]:
        uri = self._require_uri(call)
        if uri == "demo://readme":
            content = {
                "uri": uri,
                "mimeType": "text/markdown",
                "text": "# mcpsync demo\n\nA pure-Python MCP server.\n",
            }
        elif uri == "demo://data.json":
            content = {
                "uri": uri,
                "mimeType": "application/json",
                "text": json.dumps({"answer": 42, "items": [1, 2, 3]}),
            }
        elif uri == "demo://bytes.bin":
            content = {"uri": uri, "mimeType": "application/octet-stream", "blob": _BYTES_B64}
        elif uri == "demo://counter":
            content = {"uri": uri, "mimeType": "text/plain", "text": str(self.touches.get(uri, 0))}
        else:
            item = _ITEM_URI.match(uri)
            assert item is not None
            content = {"uri": uri, "mimeType": "text/plain", "text": f"item {item.group(1)}"}
        return {"contents": [content]}

    def _subscribe(self, call: Call) -> dict[str, Any]:
        self.subscriptions.add(self._require_uri(call))
        return {}

    def _unsubscribe(self, call: Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "resources/unsubscribe: uri is required")
        self.subscriptions.discard(uri)
        return {}

    # prompts
    _GREET = {
        "name": "greet",
        "description": "Greet someone by name.",
        "arguments": [
            {"name": "name", "description": "Who to greet", "required": True},
            {"name": "style", "description": "formal or casual", "required": False},
        ],
    }

    def _prompts_list(self, call: Call) -> dict[str, Any]:
        return self._page(call, [self._GREET], "prompts")

    def _prompts_get(self, call: Call) -> dict[str, Any]:
        if call.params.get("name") != "greet":
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {call.params.get('name')}")
        arguments = call.params.get("arguments") or {}
        name = arguments.get("name") if isinstance(arguments, dict) else None
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "prompts/get greet: argument `name` is required")
        style = arguments.get("style", "casual")
        text = f"Please write a {style} greeting for {name}."
        return {
            "description": f"Greet {name}",
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }

    # completion
    def _complete(self, call: Call) -> dict[str, Any]:
        ref, argument = call.params.get("ref"), call.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise RpcError(INVALID_PARAMS, "completion/complete: ref and argument are required")
        arg_name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, "completion/complete: argument.value must be a string")
        if ref.get("type") == "ref/prompt" and ref.get("name") == "greet":
            pool: tuple[str, ...] = (
                GREET_NAMES
                if arg_name == "name"
                else ("casual", "formal")
                if arg_name == "style"
                else ()
            )
            values = [v for v in pool if v.lower().startswith(value.lower())]
        elif ref.get("type") == "ref/resource" and ref.get("uri") == self._TEMPLATE["uriTemplate"]:
            values = [v for v in ITEM_IDS if v.startswith(value)] if arg_name == "id" else []
        else:
            raise RpcError(INVALID_PARAMS, "completion/complete: unknown reference")
        return {
            "completion": {
                "values": values[:100],
                "total": len(values),
                "hasMore": len(values) > 100,
            }
        }

    # logging
    def _set_level(self, call: Call) -> dict[str, Any]:
        level = call.params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(
                INVALID_PARAMS, f"logging/setLevel: level must be one of {', '.join(LOG_LEVELS)}"
            )
        self.log_threshold = LOG_LEVELS.index(level)
        return {}


_BYTES_B64 = base64.b64encode(bytes(range(256))).decode()
