"""Whose reply a JSON-RPC text is, from its first or its last bytes only.

Owns: ``response_id`` (the top-level ``id`` of a response from the start of its text),
``reply_id`` (from the start, else from the last top-level members: servers built on the
TypeScript SDK write ``{"result": ..., "jsonrpc": "2.0", "id": 7}``), ``_names_method``
(a request or notification). For a message over the size limit, whose text is never
kept whole: one rule for every transport — the SSE parser hands the first 256 and the last
512 bytes of such an event (``http.sse.EventTooLarge``), the stdio framer a too-long line's
first and last 512 (``ndjson``). Nested keys, and anything cut off, are never taken for the id.
A leaf: the standard library only.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["response_id", "reply_id"]

_ID_SCAN = json.JSONDecoder().raw_decode
_WS = " \t\r\n"


def _top_keys(head: bytes) -> tuple[set[str], Any]:
    """The top-level keys of the JSON object whose text starts with ``head`` (as far as it
    goes) and its ``id`` when that is a complete string or integer (else None)."""
    keys: set[str] = set()
    rid: Any = None
    text = head.decode("utf-8", "ignore").lstrip(_WS)
    if not text.startswith("{"):
        return keys, rid
    depth, i, n, key_next = 0, 0, len(text), False
    while i < n:
        c = text[i]
        if c == '"':
            end = i + 1
            while end < n and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            if end >= n:
                break  # cut off inside a string
            if depth == 1 and key_next:
                colon = end + 1
                while colon < n and text[colon] in _WS:
                    colon += 1
                if colon >= n or text[colon] != ":":
                    break
                key = text[i + 1 : end]
                keys.add(key)
                key_next = False
                i = colon + 1
                if key == "id":
                    while i < n and text[i] in _WS:
                        i += 1
                    try:
                        value, i = _ID_SCAN(text, i)
                    except ValueError:
                        break  # cut off, or not a plain value
                    if i >= n:
                        break  # a number may go on past the cut
                    if type(value) in (int, str):
                        rid = value
                continue
            i = end + 1
            continue
        if c in "{[":
            depth += 1
            key_next = depth == 1
        elif c in "}]":
            depth -= 1
        elif c == "," and depth == 1:
            key_next = True
        i += 1
    return keys, rid


def response_id(head: bytes) -> Any:
    """The id of the JSON-RPC response whose text starts with ``head``, or None.

    For a reply over the size limit, from its first bytes only: a response when its
    top-level keys include ``id`` (a string or integer) and ``result`` or ``error``, and no
    ``method``. Nested keys, and anything cut off, are not taken for the id.
    """
    keys, rid = _top_keys(head)
    if "method" in keys or rid is None or not ({"result", "error"} & keys):
        return None
    return rid


def _string_start(text: str, end: int) -> int:
    """The index of the quote opening the JSON string whose closing quote is at ``end``,
    or -1 (not within ``text``, or a run of backslashes reaching its start: unknown)."""
    i = text.rfind('"', 0, end)
    while i >= 0:
        slashes = i
        while slashes > 0 and text[slashes - 1] == "\\":
            slashes -= 1
        if slashes == 0 and i > 0:
            return -1  # the backslashes may go on before the cut
        if (i - slashes) % 2 == 0:  # not escaped
            return i
        i = text.rfind('"', 0, slashes)
    return -1


def _tail_id(tail: bytes) -> Any:
    """The ``id`` of the JSON object whose text ends with ``tail``, when it is one of the
    scalar top-level members after the last container (``..., "id": 7}``, ``..., "id": 7,
    "jsonrpc": "2.0"}``) and a string or integer; None when a ``method`` comes first, when
    a container or the cut is met, or for anything else."""
    text = tail.decode("utf-8", "ignore").rstrip(_WS)
    if not text.endswith("}"):
        return None
    i = len(text) - 1  # a closing brace or a comma: a member ends before it
    while True:
        end = len(text[:i].rstrip(_WS)) - 1  # the last character of the member's value
        if end <= 0:
            return None
        if text[end] == '"':
            start = _string_start(text, end)
        elif text[end] in "}]":
            return None  # a container: what comes before may be nested
        else:
            start = end
            while start > 0 and text[start - 1] not in _WS + ":,{[":
                start -= 1
        if start <= 0:
            return None
        try:
            value = json.loads(text[start : end + 1])
        except ValueError:
            return None
        colon = len(text[:start].rstrip(_WS)) - 1
        if colon <= 0 or text[colon] != ":":
            return None
        key_end = len(text[:colon].rstrip(_WS)) - 1
        if key_end <= 0 or text[key_end] != '"':
            return None
        key_start = _string_start(text, key_end)
        if key_start <= 0:
            return None
        try:
            key = json.loads(text[key_start : key_end + 1])
        except ValueError:
            return None
        if key == "method":
            return None
        if key == "id":
            return value if type(value) in (int, str) else None
        i = len(text[:key_start].rstrip(_WS)) - 1
        if i <= 0 or text[i] != ",":
            return None  # the object's opening brace (no id), or not JSON


def reply_id(head: bytes, tail: bytes = b"") -> Any:
    """The id of the JSON-RPC response whose data starts with ``head`` and ends with
    ``tail``: ``response_id(head)``; else, when the head's top-level keys say a response
    (``result`` or ``error``, no ``method``), the id its last members give (``_tail_id``),
    as stdio reads a too-long line's last bytes. None if unknown.
    """
    found = response_id(head)
    if found is not None or not tail:
        return found
    keys = _top_keys(head)[0]
    if "method" in keys or not ({"result", "error"} & keys):
        return None
    return _tail_id(tail)


def _names_method(head: bytes) -> bool:
    """True when ``head`` starts a request or notification (a top-level ``method``)."""
    return "method" in _top_keys(head)[0]
