"""Tool results and resource contents as parts and plain text: text, images, audio, embedded
and linked resources, ``structuredContent``, ``isError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .rows import _first_line, _get

__all__ = ["content_items", "result_text"]

# --------------------------------------------------------------------------- content


def _decoded_size(data: str | None) -> int:
    if not data:
        return 0
    return len(data) * 3 // 4 - data[-2:].count("=")


def content_items(obj: Any) -> list[dict[str, Any]]:
    """Normalise what a result carries into a list of parts.

    Each part is a dict with ``kind`` in ``text``, ``image``, ``audio``, ``resource`` (embedded
    text or blob), ``resource_link``, ``structured``, ``message`` (prompt messages, with
    ``role`` and a nested ``part``) or ``other``. Works on ``CallToolResult``,
    ``ReadResourceResult``, ``GetPromptResult`` and their raw dict forms.
    """
    parts: list[dict[str, Any]] = []
    messages = _get(obj, "messages")
    if messages is not None:
        for m in messages:
            inner = content_items({"content": [_get(m, "content")]})
            for part in inner:
                parts.append(
                    {"kind": "message", "role": str(_get(m, "role", default="")), "part": part}
                )
        return parts
    contents = _get(obj, "contents")
    if contents is not None and _get(obj, "content") is None:
        for c in contents:
            parts.append(_resource_part(c))
        return parts
    for block in _get(obj, "content", default=()) or ():
        kind = _get(block, "type", default="")
        if kind == "text":
            parts.append({"kind": "text", "text": str(_get(block, "text", default=""))})
        elif kind in ("image", "audio"):
            data = _get(block, "data", default="")
            parts.append(
                {
                    "kind": kind,
                    "mime_type": str(_get(block, "mime_type", "mimeType", default="")),
                    "data": data,
                    "size": _decoded_size(data),
                }
            )
        elif kind == "resource":
            parts.append(_resource_part(_get(block, "resource", default={})))
        elif kind == "resource_link":
            parts.append(
                {
                    "kind": "resource_link",
                    "uri": str(_get(block, "uri", default="")),
                    "name": str(_get(block, "name", default="")),
                    "mime_type": str(_get(block, "mime_type", "mimeType", default="")),
                    "description": _first_line(_get(block, "description")),
                }
            )
        else:
            dumped = (
                block.model_dump(mode="json", by_alias=True, exclude_none=True)
                if hasattr(block, "model_dump")
                else block
            )
            parts.append({"kind": "other", "type": str(kind), "value": dumped})
    structured = _get(obj, "structured_content", "structuredContent")
    if structured is not None:
        parts.append({"kind": "structured", "value": structured})
    return parts


def _resource_part(c: Any) -> dict[str, Any]:
    uri = str(_get(c, "uri", default=""))
    mime = str(_get(c, "mime_type", "mimeType", default=""))
    text = _get(c, "text")
    if text is not None:
        return {"kind": "resource", "uri": uri, "mime_type": mime, "text": str(text)}
    blob = _get(c, "blob", default="")
    return {
        "kind": "resource",
        "uri": uri,
        "mime_type": mime,
        "blob": blob,
        "size": _decoded_size(blob),
    }


def _is_error(obj: Any) -> bool:
    return bool(_get(obj, "is_error", "isError", default=False))


def _part_text(part: Mapping[str, Any]) -> str:
    kind = part["kind"]
    if kind == "text":
        return part["text"]
    if kind in ("image", "audio"):
        return f"[{kind} {part['mime_type'] or '?'}, {part['size']} bytes]"
    if kind == "resource":
        head = (
            f"[resource {part['uri']}"
            + (f" {part['mime_type']}" if part["mime_type"] else "")
            + "]"
        )
        if "text" in part:
            return f"{head}\n{part['text']}"
        return f"{head[:-1]}, {part['size']} bytes]"
    if kind == "resource_link":
        return f"[link {part['uri']}" + (f" ({part['name']})" if part["name"] else "") + "]"
    if kind == "structured":
        return json.dumps(part["value"], indent=2, ensure_ascii=False)
    if kind == "message":
        return f"{part['role']}: {_part_text(part['part'])}"
    return json.dumps(part.get("value"), ensure_ascii=False)


def _visible_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Structured content is shown only when no text part carries the result already."""
    if any(p["kind"] == "text" for p in parts):
        return [p for p in parts if p["kind"] != "structured"]
    return parts


def result_text(obj: Any) -> str:
    """Plain text of a tool result, resource contents or prompt result.

    Structured content is shown as JSON only when no text part carries it already.
    """
    lines = [_part_text(p) for p in _visible_parts(content_items(obj))]
    text = "\n".join(lines)
    description = _get(obj, "description")
    if _get(obj, "messages") is not None and description:
        text = f"{description}\n{text}" if text else str(description)
    return text
