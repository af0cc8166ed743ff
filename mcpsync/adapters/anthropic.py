"""MCP tools for the Anthropic Messages API: ``tools`` and ``tool_result`` blocks.

Owns: ``ToolParam`` shaped dicts (``name``, ``description``, ``input_schema``: the
tool's JSON Schema as it is, ``type: object`` ensured) and, for dispatch, the
``tool_result`` blocks (``ToolResultBlockParam``) that go, all of one turn together, in the
next ``user`` message. Text blocks stay text; images of the types Claude reads (JPEG,
PNG, GIF, WebP) become base64 ``image`` blocks; an embedded PDF becomes a ``document``
block; embedded text resources become text; other binary blocks and resource links are
described in text; ``isError`` becomes ``is_error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._core import (
    ANTHROPIC_NAMES,
    Call,
    Outcome,
    as_dict,
    object_schema,
    parse_arguments,
    provider_names,
    toolset,
)

__all__ = ["to_anthropic", "parse_call", "results"]

_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


def to_anthropic(
    source: Any, *, cache_control: bool = False, **filters: Any
) -> list[dict[str, Any]]:
    """Tools for ``client.messages.create(tools=...)``.

    ``source``: a ``Session``, a ``Host`` or a ``ToolSet``; ``filters`` as ``ToolFilter``
    and ``qualified``. ``cache_control=True`` marks the last tool as a prompt-cache
    breakpoint (``{"type": "ephemeral"}``). Names are mapped reversibly to
    ``^[A-Za-z0-9_-]{1,64}$``.
    """
    tools = toolset(source, **filters)
    out: list[dict[str, Any]] = []
    for name, entry in provider_names(tools.entries(), ANTHROPIC_NAMES).items():
        tool: dict[str, Any] = {"name": name, "input_schema": object_schema(entry.input_schema)}
        if entry.description:
            tool["description"] = entry.description
        out.append(tool)
    if cache_control and out:
        out[-1]["cache_control"] = {"type": "ephemeral"}
    return out


def parse_call(call: Any) -> Call | None:
    """An Anthropic ``tool_use`` block (``ToolUseBlock`` or its dict); None otherwise."""
    data = as_dict(call)
    if not isinstance(data, Mapping) or data.get("type") != "tool_use":
        return None
    args, problem = parse_arguments(data.get("input"), json_text=False)
    return Call("anthropic", data.get("id"), data.get("name") or "", args, problem, call)


def _content(outcome: Outcome) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for p in outcome.parts:
        if p.kind == "image" and p.data and p.mime in _IMAGE_TYPES:
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": p.mime, "data": p.data},
                }
            )
        elif p.kind == "resource" and p.data and p.mime == "application/pdf":
            doc: dict[str, Any] = {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": p.data},
            }
            if p.uri:
                doc["title"] = p.uri
            blocks.append(doc)
        else:
            text = Outcome([p]).text()
            if text:
                blocks.append({"type": "text", "text": text})
    if outcome.structured is not None and not outcome.texts():
        blocks.append({"type": "text", "text": Outcome([], outcome.structured).text()})
    return blocks


def results(calls: list[Call], outcomes: list[Outcome], single: bool) -> Any:
    """``tool_result`` blocks, in call order (one block for a single call)."""
    out = []
    for call, outcome in zip(calls, outcomes, strict=True):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": call.id or "",
            "content": _content(outcome),
        }
        if outcome.is_error:
            block["is_error"] = True
        out.append(block)
    return out[0] if single else out
