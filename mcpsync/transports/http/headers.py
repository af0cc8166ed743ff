"""The HTTP header rules of MCP (the 2026-07-28 ``Mcp-*`` headers).

Owns: the Base64 form of header values and which ``params`` field ``Mcp-Name`` carries.
"""

from __future__ import annotations

import base64
import re
from typing import Any

__all__ = ["header_value", "_mcp_name"]

_PLAIN_HEADER = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?")


def header_value(value: str) -> str:
    """A header-safe form of ``value``: as is, or ``=?base64?...?=`` (2026-07-28 wire rules)."""
    if value == "" or (
        _PLAIN_HEADER.fullmatch(value)
        and not (value.startswith("=?base64?") and value.endswith("?="))
    ):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _mcp_name(method: str, params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    if method in ("tools/call", "prompts/get"):
        value = params.get("name")
    elif method == "resources/read":
        value = params.get("uri")
    else:
        return None
    return value if isinstance(value, str) else None
