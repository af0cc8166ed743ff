"""The YAML frontmatter of a ``SKILL.md``: split it off and parse it (a safe YAML subset).

Owns: ``split_frontmatter`` (the ``---`` delimited block at the top of the file),
``parse_yaml`` (the subset skills use: block mappings and sequences by indentation, flow
``[...]`` / ``{...}`` collections of scalars, plain / single / double quoted scalars,
``|`` and ``>`` block scalars, comments; scalars resolved as the YAML 1.2 core schema
does: ``null``/``~``, ``true``/``false``, integers, floats, else strings) and
``same_value`` (JSON equality: ``True`` is not ``1``).

Anything outside the subset (anchors, aliases, tags, directives, complex keys, several
documents) raises ``FrontmatterError`` rather than being guessed at: a skill whose
frontmatter cannot be read with certainty is not loaded. No dependency: the parser
builds only dicts, lists, strings, numbers, booleans and None, and executes nothing.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import MCPSyncError

__all__ = ["FrontmatterError", "parse_yaml", "same_value", "split_frontmatter"]

_MAX_DEPTH = 32
_MAX_LINES = 10_000

_INT = re.compile(r"[-+]?[0-9]+\Z")
_OCT = re.compile(r"0o[0-7]+\Z")
_HEX = re.compile(r"0x[0-9a-fA-F]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")
_KEY = re.compile(
    r"""(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"\[\]{},&*!|>%@`?:-][^:#]*?|-[^\s:#][^:#]*?)\s*:(?:\s+|\Z)"""
)


class FrontmatterError(MCPSyncError, ValueError):
    """The frontmatter is missing or is not YAML this parser reads with certainty."""


def split_frontmatter(text: str) -> tuple[str, str]:
    """``(yaml_text, body)`` of a SKILL.md; ``FrontmatterError`` without a leading block."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        raise FrontmatterError("SKILL.md does not begin with a '---' frontmatter block")
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise FrontmatterError("SKILL.md frontmatter block is not closed by '---'")


def same_value(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: booleans are not numbers, 1 == 1.0, order of keys ignored."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# -- scalars --------------------------------------------------------------------------------


def _resolve(plain: str) -> Any:
    """A plain scalar resolved by the YAML 1.2 core schema."""
    if plain in ("", "~", "null", "Null", "NULL"):
        return None
    if plain in ("true", "True", "TRUE"):
        return True
    if plain in ("false", "False", "FALSE"):
        return False
    if _INT.match(plain):
        return int(plain)
    if _OCT.match(plain):
        return int(plain[2:], 8)
    if _HEX.match(plain):
        return int(plain[2:], 16)
    if _FLOAT.match(plain):
        return float(plain)
    lowered = plain.lower()
    if lowered in (".inf", "+.inf"):
        return math.inf
    if lowered == "-.inf":
        return -math.inf
    if lowered == ".nan":
        return math.nan
    return plain


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", '"': '"', "\\": "\\", "/": "/",
            " ": " ", "b": "\b", "f": "\f", "e": "\x1b", "a": "\a", "v": "\v"}  # fmt: skip


def _double_quoted(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
                raise FrontmatterError(f"bad escape \\{nxt}{digits} in a quoted string")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise FrontmatterError(f"unknown escape \\{nxt} in a quoted string")
    return "".join(out)


def _strip_comment(text: str) -> str:
    """``text`` without a trailing ``# comment`` (a ``#`` after whitespace, outside quotes)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in ("'", '"') and (i == 0 or text[i - 1] in " \t[{,:"):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text.rstrip()


def _scalar(text: str) -> Any:
    """One inline scalar (after comments were stripped)."""
    text = text.strip()
    if not text:
        return None
    first = text[0]
    if first in "&*!%@`":
        raise FrontmatterError(f"YAML feature not supported in frontmatter: {text[:20]!r}")
    if first == '"':
        if len(text) < 2 or not text.endswith('"') or _unescaped_quote(text[1:-1]):
            raise FrontmatterError(f"unterminated double-quoted string: {text[:40]!r}")
        return _double_quoted(text[1:-1])
    if first == "'":
        inner = text[1:-1]
        if len(text) < 2 or not text.endswith("'") or "'" in inner.replace("''", ""):
            raise FrontmatterError(f"unterminated single-quoted string: {text[:40]!r}")
        return inner.replace("''", "'")
    if first in "[{":
        value, rest = _flow(text, 0, 0)
        if text[rest:].strip():
            raise FrontmatterError(f"text after a flow collection: {text[rest:][:20]!r}")
        return value
    if first in "|>":
        raise FrontmatterError("block scalar indicator in an inline position")
    if ": " in text or text.endswith(":"):
        raise FrontmatterError(f"a plain scalar cannot contain ': ' here: {text[:40]!r}")
    return _resolve(text)


def _unescaped_quote(body: str) -> bool:
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
            continue
        if body[i] == '"':
            return True
        i += 1
    return False


def _flow(text: str, i: int, depth: int) -> tuple[Any, int]:
    """A flow collection ``[...]`` or ``{...}`` of scalars/collections starting at ``text[i]``."""
    if depth > _MAX_DEPTH:
        raise FrontmatterError("frontmatter nests too deeply")
    opener = text[i]
    closer = "]" if opener == "[" else "}"
    items: list[Any] = []
    mapping: dict[str, Any] = {}
    i += 1
    while True:
        while i < len(text) and text[i] in " \t":
            i += 1
        if i >= len(text):
            raise FrontmatterError(f"unterminated flow collection {opener}")
        if text[i] == closer:
            return (items if opener == "[" else mapping), i + 1
        if text[i] in "[{":
            value, i = _flow(text, i, depth + 1)
            key = None
        else:
            j, quote = i, ""
            while j < len(text):
                ch = text[j]
                if quote:
                    if ch == "\\" and quote == '"':
                        j += 2
                        continue
                    if ch == quote:
                        quote = ""
                elif ch in "'\"" and j == i:
                    quote = ch
                elif ch in ",]}" or (ch == ":" and opener == "{"):
                    break
                j += 1
            token = text[i:j]
            i = j
            key = None
            if opener == "{" and i < len(text) and text[i] == ":":
                parsed_key = _scalar(token)
                key = parsed_key if isinstance(parsed_key, str) else str(token.strip())
                i += 1
                while i < len(text) and text[i] in " \t":
                    i += 1
                if i < len(text) and text[i] in "[{":
                    value, i = _flow(text, i, depth + 1)
                else:
                    j = i
                    while j < len(text) and text[j] not in ",}":
                        j += 1
                    value, i = _scalar(text[i:j]), j
            else:
                value = _scalar(token)
        if opener == "[":
            items.append(value)
        else:
            if key is None:
                raise FrontmatterError("a flow mapping entry has no key")
            if key in mapping:
                raise FrontmatterError(f"duplicate key {key!r}")
            mapping[key] = value
        while i < len(text) and text[i] in " \t":
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1


# -- block structure ------------------------------------------------------------------------


class _Lines:
    def __init__(self, text: str) -> None:
        raw = text.splitlines()
        if len(raw) > _MAX_LINES:
            raise FrontmatterError("frontmatter is too long")
        self.lines: list[tuple[int, str, str]] = []  # (indent, content, raw line)
        for line in raw:
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise FrontmatterError("tabs are not allowed in YAML indentation")
            stripped = line.strip()
            if stripped.startswith("%") or stripped in ("---", "..."):
                raise FrontmatterError("YAML directives and document markers are not supported")
            self.lines.append(
                (len(line) - len(line.lstrip(" ")), _strip_comment(line).strip(), line)
            )
        self.pos = 0

    def skip_blank(self) -> None:
        while self.pos < len(self.lines) and not self.lines[self.pos][1]:
            self.pos += 1

    def peek(self) -> tuple[int, str, str] | None:
        self.skip_blank()
        return self.lines[self.pos] if self.pos < len(self.lines) else None


def parse_yaml(text: str) -> Any:
    """Parse a frontmatter block (see the module docstring for the subset)."""
    lines = _Lines(text)
    first = lines.peek()
    if first is None:
        return None
    value = _node(lines, first[0], 0)
    if lines.peek() is not None:
        raise FrontmatterError(f"unexpected indentation near {lines.peek()[1][:40]!r}")  # type: ignore[index]
    return value


def _node(lines: _Lines, indent: int, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise FrontmatterError("frontmatter nests too deeply")
    head = lines.peek()
    assert head is not None
    if head[1] == "-" or head[1].startswith("- "):
        return _sequence(lines, indent, depth)
    if _KEY.match(head[1]):
        return _mapping(lines, indent, depth)
    lines.pos += 1
    return _scalar(head[1])


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _value_after(lines: _Lines, rest: str, indent: int, depth: int) -> Any:
    """The value after ``key:`` or ``-`` (at column ``indent``): inline, block scalar, nested."""
    if rest[:1] in ("|", ">"):
        return _block_scalar(lines, rest, indent)
    if rest:
        return _scalar(rest)
    nxt = lines.peek()
    if nxt is None or nxt[0] < indent:
        return None
    if nxt[0] == indent:  # "key:" then "- item" at the key's own column
        return _sequence(lines, indent, depth + 1) if _is_item(nxt[1]) else None
    return _node(lines, nxt[0], depth + 1)


def _mapping(lines: _Lines, indent: int, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while (line := lines.peek()) is not None and line[0] == indent:
        match = _KEY.match(line[1])
        if not match:
            raise FrontmatterError(f"expected 'key: value', found {line[1][:40]!r}")
        raw_key = match.group("key").strip()
        key = _scalar(raw_key) if raw_key[:1] in "'\"" else raw_key
        if not isinstance(key, str):
            raise FrontmatterError(f"unsupported mapping key {raw_key!r}")
        if key in out:
            raise FrontmatterError(f"duplicate key {key!r}")
        lines.pos += 1
        rest = line[1][match.end() :].strip()
        out[key] = _value_after(lines, rest, indent, depth)
    line = lines.peek()
    if line is not None and line[0] > indent:
        raise FrontmatterError(f"unexpected indentation near {line[1][:40]!r}")
    return out


def _sequence(lines: _Lines, indent: int, depth: int) -> list[Any]:
    out: list[Any] = []
    while (line := lines.peek()) is not None and line[0] == indent and _is_item(line[1]):
        after = line[1][1:]
        rest = after.strip()
        if rest and _KEY.match(rest):  # "- key: value" opens a mapping indented past the dash
            inner = indent + 1 + len(after) - len(after.lstrip(" "))
            lines.lines[lines.pos] = (inner, rest, " " * inner + rest)
            out.append(_mapping(lines, inner, depth + 1))
            continue
        lines.pos += 1
        if not rest:
            nxt = lines.peek()
            out.append(_node(lines, nxt[0], depth + 1) if nxt and nxt[0] > indent else None)
        else:
            out.append(_value_after(lines, rest, indent, depth))
    line = lines.peek()
    if line is not None and line[0] > indent:
        raise FrontmatterError(f"unexpected indentation near {line[1][:40]!r}")
    return out


def _block_scalar(lines: _Lines, header: str, indent: int) -> str:
    match = re.fullmatch(r"([|>])([1-9])?([+-])?|([|>])([+-])([1-9])", header)
    if not match:
        raise FrontmatterError(f"unsupported block scalar header {header!r}")
    style = match.group(1) or match.group(4)
    chomp = match.group(3) or match.group(5) or ""
    explicit = match.group(2) or match.group(6)
    body: list[str] = []
    block_indent = indent + int(explicit) if explicit else None
    while lines.pos < len(lines.lines):
        raw = lines.lines[lines.pos][2]
        if raw.strip() == "":
            body.append("")
            lines.pos += 1
            continue
        here = len(raw) - len(raw.lstrip(" "))
        if block_indent is None:
            if here <= indent:
                break
            block_indent = here
        if here < block_indent:
            break
        body.append(raw[block_indent:])
        lines.pos += 1
    trailing = 0
    while body and body[-1] == "":
        body.pop()
        trailing += 1
    if style == "|":
        text = "\n".join(body)
    else:
        text = _fold(body)
    if not body:
        return ""
    if chomp == "-":
        return text
    if chomp == "+":
        return text + "\n" * (trailing + 1)
    return text + "\n"


def _fold(body: list[str]) -> str:
    """Folded (``>``) content: lines joined by spaces; blank and more-indented lines kept."""
    out: list[str] = []
    for i, line in enumerate(body):
        if i > 0:
            prev = body[i - 1]
            if line == "":
                out.append("\n")
                continue
            indented = line.startswith((" ", "\t")) or prev.startswith((" ", "\t"))
            if prev != "":
                out.append("\n" if indented else " ")
        out.append(line)
    return "".join(out)
