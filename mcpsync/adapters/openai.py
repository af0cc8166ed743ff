"""MCP tools for the OpenAI APIs: Chat Completions ``tools`` and Responses function tools.

Owns: the function definitions (``ChatCompletionFunctionToolParam`` /
``FunctionToolParam`` shaped dicts), strict mode, and the tool-result items
(``role: "tool"`` messages; ``function_call_output`` items) for dispatch.

Strict mode (``strict=True``): every object gets ``additionalProperties: false``, every
property is listed in ``required`` and the optional ones become nullable (the model sends
``null`` for "not given"; dispatch removes those nulls again so the server's defaults
apply), ``oneOf`` becomes ``anyOf``, ``allOf`` of objects is merged, ``$ref`` is inlined,
and keywords strict mode rejects (``default``, ``minLength``, ``patternProperties``,
unknown ``format`` values ...) are dropped. A schema strict mode cannot express (a free
form object or value, an array without ``items``) keeps its tool non-strict
(``strict: false``) instead of being changed into something else.

Chat Completions tool messages carry text only: images and other binary blocks are
described in the tool message, and when ``dispatch`` runs a list of calls, images follow
in one extra ``user`` message after the tool messages.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Literal

from ._core import (
    OPENAI_NAMES,
    Call,
    Entry,
    NotStrict,
    Outcome,
    as_dict,
    drop_optional_nulls,
    inline_refs,
    merge_all_of,
    object_schema,
    parse_arguments,
    provider_names,
    toolset,
)

__all__ = ["to_openai", "strict_schema", "parse_call", "results", "prepare"]

# keywords strict mode accepts (https://platform.openai.com/docs/guides/structured-outputs)
_STRICT_KEYS = {
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "anyOf", "description", "title", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
}  # fmt: skip
_STRICT_FORMATS = {
    "date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
}  # fmt: skip


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    t = schema.get("type")
    if "anyOf" in schema:
        if not any(isinstance(s, Mapping) and s.get("type") == "null" for s in schema["anyOf"]):
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
    elif isinstance(t, str):
        if t != "null":
            schema["type"] = [t, "null"]
    elif isinstance(t, list):
        if "null" not in t:
            schema["type"] = [*t, "null"]
    else:  # an enum or const without a type: either it, or null
        return {"anyOf": [schema, {"type": "null"}]}
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = [*schema["enum"], None]
    return schema


def _strict_node(node: Any) -> dict[str, Any]:
    if not isinstance(node, Mapping) or not node:
        raise NotStrict("a value of any type")
    node = dict(node)
    if "allOf" in node:
        node = merge_all_of(node)
    if "oneOf" in node:
        node["anyOf"] = node.pop("oneOf")
    if node.get("format") not in _STRICT_FORMATS:
        node.pop("format", None)
    out = {k: v for k, v in node.items() if k in _STRICT_KEYS}
    if "default" in node and isinstance(node["default"], str | int | float | bool):
        default = json.dumps(node["default"])  # dropped: the model still learns it
        out["description"] = (
            f"{out['description']} (default: {default})"
            if out.get("description")
            else f"default: {default}"
        )
    if "anyOf" in out:
        out["anyOf"] = [_strict_node(s) for s in out["anyOf"]]
        return out
    types = out.get("type")
    type_list = [types] if isinstance(types, str) else list(types or ())
    if not type_list and "enum" not in out and "const" not in out:
        raise NotStrict("a value of any type")
    if "object" in type_list:
        extra = node.get("additionalProperties")
        props = node.get("properties") or {}
        if extra not in (None, False):
            raise NotStrict("an object with free-form keys")
        required = set(node.get("required") or ())
        new_props = {}
        for key, sub in props.items():
            converted = _strict_node(sub)
            if key not in required:
                converted = _nullable(converted)
            new_props[key] = converted
        out["properties"] = new_props
        out["required"] = list(new_props)
        out["additionalProperties"] = False
    if "array" in type_list:
        if not isinstance(node.get("items"), Mapping):
            raise NotStrict("an array without an items schema")
        out["items"] = _strict_node(node["items"])
    return out


def strict_schema(schema: Any) -> dict[str, Any] | None:
    """``schema`` rewritten for OpenAI strict mode, or None if strict mode cannot express it."""
    try:
        return _strict_node(object_schema(inline_refs(schema)))
    except NotStrict:
        return None


def _definition(entry: Entry, name: str, strict: bool) -> tuple[dict[str, Any], bool]:
    params: dict[str, Any] | None = None
    if strict:
        params = strict_schema(entry.input_schema)
    is_strict = params is not None
    if params is None:
        params = object_schema(entry.input_schema)
    fn: dict[str, Any] = {"name": name, "description": entry.description, "parameters": params}
    return fn, is_strict


def to_openai(
    source: Any,
    api: Literal["chat", "responses"] = "chat",
    *,
    strict: bool = False,
    **filters: Any,
) -> list[dict[str, Any]]:
    """Function tools for ``client.chat.completions.create(tools=...)`` (``api="chat"``) or
    ``client.responses.create(tools=...)`` (``api="responses"``).

    ``source``: a ``Session``, a ``Host`` or a ``ToolSet``; ``filters`` as ``ToolFilter``
    (``include``, ``exclude``, ``read_only``, ``destructive``, ``app_only``) and
    ``qualified``. Names longer than 64 characters or with other characters than
    ``A-Za-z0-9_-`` are mapped reversibly (``dispatch`` maps them back).
    """
    if api not in ("chat", "responses"):
        raise ValueError(f"api must be 'chat' or 'responses', got {api!r}")
    tools = toolset(source, **filters)
    out: list[dict[str, Any]] = []
    for name, entry in provider_names(tools.entries(), OPENAI_NAMES).items():
        fn, is_strict = _definition(entry, name, strict)
        if api == "chat":
            if strict:
                fn["strict"] = is_strict
            out.append({"type": "function", "function": fn})
        else:
            out.append({"type": "function", **fn, "strict": is_strict})
    return out


# --------------------------------------------------------------------------- dispatch


def parse_call(call: Any) -> Call | None:
    """A Chat ``ChatCompletionMessageToolCall`` or a Responses ``function_call`` item; None
    if ``call`` is neither."""
    data = as_dict(call)
    if not isinstance(data, Mapping):
        return None
    if data.get("type") == "function_call" and "call_id" in data:
        args, problem = parse_arguments(data.get("arguments"))
        return Call("responses", data["call_id"], data.get("name") or "", args, problem, call)
    function = data.get("function")
    if function is not None and "id" in data:
        fn = as_dict(function)
        args, problem = parse_arguments(fn.get("arguments"))
        return Call("chat", data["id"], fn.get("name") or "", args, problem, call)
    if data.get("type") == "custom" and "id" in data:
        name = (as_dict(data.get("custom")) or {}).get("name") or ""
        return Call("chat", data["id"], name, None, "custom tools are not MCP tools", call)
    return None


def prepare(args: dict[str, Any], entry: Entry) -> dict[str, Any]:
    """Arguments as the server should get them (strict mode's nulls for absent removed)."""
    return drop_optional_nulls(copy.deepcopy(args), entry.input_schema)


def _images(outcome: Outcome) -> list[Any]:
    return [p for p in outcome.parts if p.kind == "image" and p.data]


def _chat_message(call: Call, outcome: Outcome, images_follow: bool) -> dict[str, Any]:
    text = outcome.text()
    if images_follow and _images(outcome):
        text += "\n(the images are attached in the next user message)"
    return {"role": "tool", "tool_call_id": call.id or "", "content": text}


def _responses_item(call: Call, outcome: Outcome) -> dict[str, Any]:
    binary = [
        p
        for p in outcome.parts
        if p.data and (p.kind == "image" or (p.kind == "resource" and p.mime == "application/pdf"))
    ]
    if not binary:
        return {"type": "function_call_output", "call_id": call.id or "", "output": outcome.text()}
    items: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            items.append({"type": "input_text", "text": "\n".join(texts)})
            texts.clear()

    if outcome.is_error:
        texts.append("Error:")
    for p in outcome.parts:
        if p.kind == "image" and p.data:
            flush()
            items.append({"type": "input_image", "image_url": p.data_url, "detail": "auto"})
        elif p.kind == "resource" and p.data and p.mime == "application/pdf":
            flush()
            filename = (p.uri or "document.pdf").rstrip("/").rsplit("/", 1)[-1] or "document.pdf"
            items.append({"type": "input_file", "file_data": p.data_url, "filename": filename})
        else:
            texts.append(Outcome([p]).text())
    if outcome.structured is not None and not outcome.texts():
        texts.append(Outcome([], outcome.structured).text())
    flush()
    return {"type": "function_call_output", "call_id": call.id or "", "output": items}


def results(calls: list[Call], outcomes: list[Outcome], single: bool) -> Any:
    """The items to append to the conversation, in call order."""
    out: list[dict[str, Any]] = []
    extra: list[dict[str, Any]] = []
    for call, outcome in zip(calls, outcomes, strict=True):
        if call.provider == "responses":
            out.append(_responses_item(call, outcome))
            continue
        out.append(_chat_message(call, outcome, images_follow=not single))
        images = _images(outcome)
        if images and not single:
            extra.append({"type": "text", "text": f"Images returned by tool call {call.id}:"})
            extra += [{"type": "image_url", "image_url": {"url": p.data_url}} for p in images]
    if extra:
        out.append({"role": "user", "content": extra})
    return out[0] if single else out
