"""The HTTP header rules of MCP's 2026-07-28 wire, each written once.

Owns: the Base64 form of a header value (``=?base64?...?=``), which ``params`` field
``Mcp-Name`` mirrors, the standard headers of one POST (``MCP-Protocol-Version``,
``Mcp-Method``, ``Mcp-Name``), and the ``x-mcp-header`` declarations of a tool with the
``Mcp-Param-*`` headers they give for one call. The Streamable HTTP transport and the
modern era both use these (the era to check and to fill a tool's declarations).

The value rule (spec, Streamable HTTP "Value Encoding"): a value is sent as is only when
every character is printable ASCII (0x20-0x7E) without leading or trailing whitespace and
it does not look like the sentinel itself; anything else, control characters (TAB
included), CR/LF and non-ASCII alike, is sent as Base64 of its UTF-8 bytes.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from ...errors import ConfigError, ProtocolError
from ...versions import MODERN_VERSIONS, PROTOCOL_VERSION_KEY

__all__ = [
    "InvalidToolHeaders",
    "encode_header_value",
    "mcp_name",
    "standard_headers",
    "header_declarations",
    "param_headers",
]


class InvalidToolHeaders(ProtocolError):
    """A tool's ``x-mcp-header`` declarations are invalid: the tool is not offered or called."""


_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SAFE_INT = 2**53 - 1
_PRIMITIVES = ("string", "integer", "boolean")
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_SENTINEL = re.compile(r"^=\?base64\?.*\?=$", re.DOTALL)


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: as is, or ``=?base64?...?=`` when it is not plain ASCII.

    Base64 is used for anything outside visible ASCII and space (including tabs and
    other control characters), leading or trailing whitespace, and values that look
    like the sentinel themselves.
    """
    plain = (
        value == value.strip()
        and all(0x20 <= ord(ch) <= 0x7E for ch in value)
        and not _SENTINEL.match(value)
    )
    if plain:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


#: Which ``params`` field ``Mcp-Name`` mirrors, per method.
_NAME_FIELD = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
}


def mcp_name(method: str, params: Any) -> str | None:
    """The value ``Mcp-Name`` carries for a request (not yet encoded), or None for none:
    the tool or prompt name, the resource URI, the task id of a ``tasks/*`` method."""
    if not isinstance(params, Mapping):
        return None
    field = _NAME_FIELD.get(method) or ("taskId" if method.startswith("tasks/") else None)
    value = params.get(field) if field is not None else None
    return value if isinstance(value, str) else None


def _mapping_at(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` if it is a mapping, else an empty one (a peer may send anything there)."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def standard_headers(message: Mapping[str, Any]) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` for one modern POST.

    The version comes from the message's ``_meta`` (so header and body always agree);
    nothing is returned for a message without a modern version (legacy traffic).
    """
    params = _mapping_at(message, "params")
    meta = _mapping_at(params, "_meta")
    version = meta.get(PROTOCOL_VERSION_KEY)
    method = message.get("method")
    if (
        not isinstance(version, str)
        or version not in MODERN_VERSIONS
        or not isinstance(method, str)
    ):
        return {}
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    name = mcp_name(method, params)
    if name is not None:
        headers["Mcp-Name"] = encode_header_value(name)
    return headers


def header_declarations(input_schema: Any) -> dict[str, tuple[tuple[str, ...], str]]:
    """The ``x-mcp-header`` declarations of a tool: header name -> (property path, type).

    Raises ``InvalidToolHeaders`` (saying why) when any declaration breaks the rules:
    empty or not an HTTP token, not on a statically reachable property (a chain of
    ``properties`` only), not a single primitive type (string, integer, boolean), or
    not case-insensitively unique.
    """
    found: list[tuple[tuple[str, ...], bool, Any, Any]] = []  # (path, reachable, value, schema)

    def scan(node: Any, reachable: bool, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key == "x-mcp-header":
                found.append((path, reachable and bool(path), value, node))
            elif key in _DATA_KEYWORDS:
                continue
            elif key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    scan(sub, reachable, (*path, str(name)))
            elif isinstance(value, dict):
                if key in ("$defs", "definitions", "patternProperties", "dependentSchemas"):
                    for sub in value.values():
                        scan(sub, False, path)
                else:
                    scan(value, False, path)
            elif isinstance(value, list):
                for sub in value:
                    scan(sub, False, path)

    scan(input_schema, True, ())
    decls: dict[str, tuple[tuple[str, ...], str]] = {}
    seen: set[str] = set()
    for path, reachable, value, schema in found:
        where = "/".join(path) or "(root)"
        if not isinstance(value, str) or not value:
            raise InvalidToolHeaders(f"x-mcp-header at {where} is empty or not a string")
        if not _TOKEN.match(value):
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} at {where} is not a valid HTTP header name"
            )
        if not reachable:
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} at {where} is not on a property reachable through 'properties'"
            )
        kind = schema.get("type")
        if kind not in _PRIMITIVES:
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} at {where} is on type {kind!r}; only string, integer, boolean are allowed"
            )
        if value.lower() in seen:
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} is declared more than once (names are case-insensitive)"
            )
        seen.add(value.lower())
        decls[value] = (path, kind)
    return decls


def param_headers(
    decls: Mapping[str, tuple[tuple[str, ...], str]], arguments: Any
) -> dict[str, str]:
    """``Mcp-Param-*`` headers for one call: values at the declared paths, encoded; absent/null omitted."""
    headers: dict[str, str] = {}
    for name, (path, kind) in decls.items():
        value: Any = arguments
        for step in path:
            value = value.get(step) if isinstance(value, Mapping) else None
            if value is None:
                break
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            if abs(value) > _SAFE_INT:
                raise ConfigError(
                    f"argument for header Mcp-Param-{name} is outside the safe integer range"
                )
            text = str(value)
        elif isinstance(value, float) and value.is_integer() and kind == "integer":
            text = str(int(value))
        else:
            text = str(value)
        headers[f"Mcp-Param-{name}"] = encode_header_value(text)
    return headers
