"""MCP tools for the Anthropic Messages API: ``tools`` and ``tool_result`` blocks.

Owns: ``ToolParam`` shaped dicts (``name``, ``description``, ``input_schema``: the
tool's JSON Schema as it is, ``type: object`` ensured) and, for dispatch, the
``tool_result`` blocks (``ToolResultBlockParam``) that go, all of one turn together, in the
next ``user`` message. Text blocks stay text; images of the types Claude reads (JPEG,
PNG, GIF, WebP) become base64 ``image`` blocks; an embedded PDF becomes a ``document``
block; embedded text resources become text; other binary blocks and resource links are
described in text; ``isError`` becomes ``is_error``.

Strict tool use (``strict=True``: Claude's input then always matches the schema): the
schema is rewritten into the subset strict mode takes: every object closed
(``additionalProperties: false``; ``required`` kept as it is, optional properties stay
optional), ``$ref`` inlined, ``oneOf`` read as ``anyOf``, ``allOf`` of objects merged,
``enum`` / ``const`` of plain values, string ``format`` only where strict mode knows it,
``minItems`` only 0 or 1; the keywords it does not take (``minimum``, ``maxLength``,
``pattern``, ``default`` ...) move into the description in words, so the model still
learns them. A schema strict mode cannot express (a free-form object, a value of any
type, an array without ``items``) leaves that tool without ``strict``, unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._core import (
    ANTHROPIC_NAMES,
    Call,
    NotStrict,
    Outcome,
    as_dict,
    inline_refs,
    merge_all_of,
    object_schema,
    parse_arguments,
    provider_names,
    toolset,
)

__all__ = ["to_anthropic", "strict_schema", "parse_call", "results"]

_IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


_KEEP = {"type", "properties", "required", "items", "enum", "const", "anyOf", "description",
         "title", "format", "minItems"}  # fmt: skip
_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4",
            "ipv6", "uuid"}  # fmt: skip
_PLAIN = (str, int, float, bool, type(None))


def _strict_node(node: Any) -> dict[str, Any]:
    if not isinstance(node, Mapping) or not node:
        raise NotStrict("a value of any type")
    node = dict(node)
    if "allOf" in node:
        node = merge_all_of(node)
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    out: dict[str, Any] = {}
    words: dict[str, Any] = {}  # what strict mode does not take, said in the description
    for key, value in node.items():
        if key in ("additionalProperties", "$schema", "$defs", "definitions", "$id"):
            continue
        plain = key not in ("enum", "const") or (
            all(isinstance(v, _PLAIN) for v in value)
            if key == "enum"
            else isinstance(value, _PLAIN)
        )
        keep = key in _KEEP and plain
        if key == "format" and value not in _FORMATS:
            keep = False
        if key == "minItems" and value not in (0, 1):
            keep = False
        if keep:
            out[key] = value
        elif key not in ("enum", "const") and isinstance(value, (*_PLAIN, list)):
            words[key] = value
        elif key in ("enum", "const"):
            raise NotStrict("an enum of objects")
    if words:
        said = ", ".join(f"{k}: {json.dumps(v)}" for k, v in words.items())
        out["description"] = f"{out['description']} ({said})" if out.get("description") else said
    if "anyOf" in out:
        out["anyOf"] = [_strict_node(s) for s in out["anyOf"]]
        return out
    types = out.get("type")
    type_list = [types] if isinstance(types, str) else list(types or ())
    if not type_list and "enum" not in out and "const" not in out:
        raise NotStrict("a value of any type")
    if "object" in type_list:
        if node.get("additionalProperties") not in (None, False):
            raise NotStrict("an object with free-form keys")
        props = node.get("properties") or {}
        if not props:
            raise NotStrict("a free-form object")
        out["properties"] = {key: _strict_node(sub) for key, sub in props.items()}
        out["additionalProperties"] = False
    if "array" in type_list:
        if not isinstance(node.get("items"), Mapping):
            raise NotStrict("an array without an items schema")
        out["items"] = _strict_node(node["items"])
    return out


def strict_schema(schema: Any) -> dict[str, Any] | None:
    """``schema`` rewritten for Anthropic strict tool use, or None if it cannot express it."""
    try:
        root = object_schema(inline_refs(schema))
        if not root.get("properties") and root.get("additionalProperties") in (None, False):
            # no parameters: an empty closed object
            return {"type": "object", "properties": {}, "additionalProperties": False}
        return _strict_node(root)
    except NotStrict:
        return None


def to_anthropic(
    source: Any, *, strict: bool = False, cache_control: bool = False, **filters: Any
) -> list[dict[str, Any]]:
    """Tools for ``client.messages.create(tools=...)``.

    ``source``: a ``Session``, a ``Host`` or a ``ToolSet``; ``filters`` as ``ToolFilter``
    and ``qualified``. ``strict=True``: strict tool use (``"strict": true``, the schema in
    the subset strict mode takes; a tool whose schema it cannot express is left as it is,
    without ``strict``). ``cache_control=True`` marks the last tool as a prompt-cache
    breakpoint (``{"type": "ephemeral"}``). Names are mapped reversibly to
    ``^[A-Za-z0-9_-]{1,64}$``.
    """
    tools = toolset(source, **filters)
    out: list[dict[str, Any]] = []
    for name, entry in provider_names(tools.entries(), ANTHROPIC_NAMES).items():
        schema = object_schema(entry.input_schema)
        closed = strict_schema(entry.input_schema) if strict else None
        tool: dict[str, Any] = {"name": name, "input_schema": closed or schema}
        if closed is not None:
            tool["strict"] = True
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
