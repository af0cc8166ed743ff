"""JSONC, as VS Code and Cursor write it: JSON with ``//`` and ``/* */`` comments and trailing
commas (outside strings), parsed with the standard ``json`` module after stripping them.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigError

__all__ = ["parse_jsonc"]

# --------------------------------------------------------------------------- JSONC


def parse_jsonc(text: str, source: str = "<string>") -> Any:
    """Parse JSON that may carry ``//`` and ``/* */`` comments and trailing commas (VS Code)."""
    cleaned = _strip_trailing_commas(_strip_comments(text))
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


def _strip_comments(text: str) -> str:
    """Replace comments with spaces (newlines kept, so error positions stay true)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _strip_trailing_commas(text: str) -> str:
    chars = list(text)
    in_str = False
    i, n = 0, len(chars)
    while i < n:
        c = chars[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == ",":
            j = i + 1
            while j < n and chars[j] in " \t\r\n":
                j += 1
            if j < n and chars[j] in "}]":
                chars[i] = " "
        i += 1
    return "".join(chars)
