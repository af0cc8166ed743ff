"""MCP tools for Google Gemini (google-genai): function declarations and responses.

Owns: ``FunctionDeclaration`` shaped dicts whose ``parameters`` use the OpenAPI subset
Gemini accepts, and, for dispatch, ``function_response`` parts.

The schema conversion: ``$ref`` inlined (a recursive one, once, then as its bare type),
``allOf`` of objects merged, ``oneOf`` read as ``anyOf``, a ``type`` list or an ``anyOf``
with ``null`` turned into ``nullable: true`` (several other types stay an ``anyOf``),
``const`` into a one-value ``enum``, ``enum`` kept only for strings (other values are
listed in the description), ``format`` kept only where Gemini knows it (``enum``,
``date-time``; ``float``, ``double``; ``int32``, ``int64``), ``examples`` as one
``example``, and everything else (``additionalProperties``, ``exclusiveMinimum``,
``$schema``, ``patternProperties`` ...) dropped. A tool without parameters gets no
``parameters``. ``json_schema=True`` gives the tool's JSON Schema untouched as
``parameters_json_schema`` instead (newer Gemini models accept it). A tool with an
``outputSchema`` also declares what its ``function_response`` holds: ``response`` (the
same conversion) or, with ``json_schema=True``, ``response_json_schema``, both an object
with ``output`` (the tool's ``outputSchema``) and ``error`` (a string), as results give.

Results: ``{"function_response": {"id", "name", "response", "parts"}}``; ``response`` is
``{"output": ...}`` (structured content, else the text) or ``{"error": ...}``; images,
audio and embedded PDFs go as ``inline_data`` parts (bytes).
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Mapping
from typing import Any

from ._core import (
    GEMINI_NAMES,
    Call,
    Entry,
    Outcome,
    as_dict,
    inline_refs,
    object_schema,
    parse_arguments,
    provider_names,
    toolset,
)

__all__ = ["to_gemini", "gemini_schema", "parse_call", "results", "prepare"]

_FORMATS = {
    "string": {"enum", "date-time"},
    "number": {"float", "double"},
    "integer": {"int32", "int64"},
}
_KEEP = ("title", "description", "minItems", "maxItems", "minLength", "maxLength", "pattern",
         "minimum", "maximum", "minProperties", "maxProperties", "default")  # fmt: skip


def _describe(node: dict[str, Any], note: str) -> None:
    node["description"] = f"{node['description']} ({note})" if node.get("description") else note


def _convert(node: Any) -> dict[str, Any]:
    if not isinstance(node, Mapping):
        return {}
    node = dict(node)
    if isinstance(node.get("allOf"), list):
        parts = [p for p in node.pop("allOf") if isinstance(p, Mapping)]
        if all(p.get("type", "object") == "object" for p in parts):
            for p in parts:
                node.setdefault("type", "object")
                node["properties"] = {
                    **(node.get("properties") or {}),
                    **(p.get("properties") or {}),
                }
                node["required"] = [*(node.get("required") or ()), *(p.get("required") or ())]
        elif parts:
            node = {**parts[0], **node}
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    out: dict[str, Any] = {k: copy.deepcopy(node[k]) for k in _KEEP if k in node}
    if "examples" in node and isinstance(node["examples"], list) and node["examples"]:
        out["example"] = node["examples"][0]
    elif "example" in node:
        out["example"] = node["example"]
    nullable = node.get("nullable") is True

    alternatives = node.get("anyOf")
    if isinstance(alternatives, list):
        alts = [a for a in alternatives if isinstance(a, Mapping)]
        if any(a.get("type") == "null" for a in alts):
            nullable = True
            alts = [a for a in alts if a.get("type") != "null"]
        converted = [_convert(a) for a in alts]
        if len(converted) == 1:
            merged = converted[0]
            merged.update({k: v for k, v in out.items() if k != "description"})
            if out.get("description"):
                merged["description"] = out["description"]
            out = merged
        elif converted:
            out["anyOf"] = converted
        if nullable:
            out["nullable"] = True
        return out

    types = node.get("type")
    type_list = (
        [types] if isinstance(types, str) else [t for t in types or () if isinstance(t, str)]
    )
    if "null" in type_list:
        nullable = True
        type_list = [t for t in type_list if t != "null"]
    if len(type_list) > 1:
        out["anyOf"] = [_convert({**node, "type": t}) for t in type_list]
        for sub in out["anyOf"]:
            sub.pop("description", None)
        if nullable:
            out["nullable"] = True
        return out
    kind = type_list[0] if type_list else None
    if kind is None and "const" in node:
        kind = "string" if isinstance(node["const"], str) else None
    if kind is None and isinstance(node.get("enum"), list) and node["enum"]:
        if all(isinstance(v, str) for v in node["enum"] if v is not None):
            kind = "string"
    if kind is None and isinstance(node.get("properties"), Mapping):
        kind = "object"
    if kind is not None:
        out["type"] = kind

    values = [node["const"]] if "const" in node else node.get("enum")
    if isinstance(values, list) and values:
        if None in values:
            nullable = True
            values = [v for v in values if v is not None]
        if kind == "string" and all(isinstance(v, str) for v in values):
            out["enum"] = list(values)
            out["format"] = "enum"
        elif values:
            _describe(out, "one of: " + ", ".join(repr(v) for v in values))
    fmt = node.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS.get(kind or "", ()) and "format" not in out:
        out["format"] = fmt
    if kind == "object":
        props = node.get("properties") if isinstance(node.get("properties"), Mapping) else {}
        out["properties"] = {k: _convert(v) for k, v in props.items()}
        required = [r for r in node.get("required") or () if r in props]
        if required:
            out["required"] = list(dict.fromkeys(required))
        if props:
            out["propertyOrdering"] = list(props)
    if kind == "array" and isinstance(node.get("items"), Mapping):
        out["items"] = _convert(node["items"])
    if nullable:
        out["nullable"] = True
    return out


def gemini_schema(schema: Any) -> dict[str, Any]:
    """A JSON Schema as the OpenAPI-subset ``Schema`` Gemini accepts (camelCase keys)."""
    return _convert(inline_refs(schema))


def to_gemini(source: Any, *, json_schema: bool = False, **filters: Any) -> list[dict[str, Any]]:
    """Function declarations for ``types.Tool(function_declarations=...)``.

    ``source``: a ``Session``, a ``Host`` or a ``ToolSet``; ``filters`` as ``ToolFilter``
    and ``qualified``. Names are mapped reversibly (letters, digits, ``_ . : -``, starting
    with a letter or ``_``, at most 64 characters).
    """
    tools = toolset(source, **filters)
    out: list[dict[str, Any]] = []
    for name, entry in provider_names(tools.entries(), GEMINI_NAMES).items():
        decl: dict[str, Any] = {"name": name}
        if entry.description:
            decl["description"] = entry.description
        schema = object_schema(entry.input_schema)
        if json_schema:
            decl["parameters_json_schema"] = schema
        elif schema.get("properties"):
            decl["parameters"] = gemini_schema(schema)
        output = entry.output_schema
        if output is not None:
            response = _response_schema(output)
            if json_schema:
                decl["response_json_schema"] = response
            else:
                decl["response"] = gemini_schema(response)
        out.append(decl)
    return out


def _response_schema(output: dict[str, Any]) -> dict[str, Any]:
    """The ``response`` a result gives: ``{"output": structuredContent}`` or ``{"error": text}``."""
    inner = {k: v for k, v in output.items() if k != "$schema"}
    return {
        "type": "object",
        "properties": {
            "output": inner,
            "error": {"type": "string", "description": "the tool's error message"},
        },
    }


# --------------------------------------------------------------------------- dispatch


def parse_call(call: Any) -> Call | None:
    """A ``FunctionCall`` (or a ``Part`` holding one, or their dicts); None otherwise."""
    data = as_dict(call)
    if not isinstance(data, Mapping):
        return None
    inner = data.get("function_call") or data.get("functionCall")
    if inner is not None:
        data = as_dict(inner)
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        return None
    if {"type", "function", "input", "call_id"} & set(data):
        return None  # another provider's call
    args, problem = parse_arguments(data.get("args"), json_text=False)
    return Call("gemini", data.get("id"), data["name"], args, problem, call)


def _coerce(value: Any, schema: Any) -> Any:
    """Whole floats to int where the schema says integer (Gemini sends numbers as floats)."""
    if not isinstance(schema, Mapping):
        return value
    types = schema.get("type")
    is_int = types == "integer" or isinstance(types, list) and "integer" in types
    if is_int and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        return {k: _coerce(v, props.get(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_coerce(v, schema.get("items")) for v in value]
    return value


def prepare(args: dict[str, Any], entry: Entry) -> dict[str, Any]:
    return _coerce(copy.deepcopy(args), inline_refs(entry.input_schema))


def _bytes(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _function_response(call: Call, outcome: Outcome) -> dict[str, Any]:
    inline = []
    for p in outcome.parts:
        binary = p.kind in ("image", "audio") or (
            p.kind == "resource" and p.mime == "application/pdf"
        )
        raw = _bytes(p.data) if binary and p.data else None
        if raw is not None:
            inline.append(
                {"inline_data": {"mime_type": p.mime or "application/octet-stream", "data": raw}}
            )
    if outcome.is_error:
        response: dict[str, Any] = {"error": Outcome(outcome.parts).text()}
    elif outcome.structured is not None:
        response = {"output": outcome.structured}
    else:
        response = {"output": outcome.text()}
    fr: dict[str, Any] = {"name": call.name, "response": response}
    if call.id:
        fr["id"] = call.id
    if inline:
        fr["parts"] = inline
    return {"function_response": fr}


def results(calls: list[Call], outcomes: list[Outcome], single: bool) -> Any:
    """``function_response`` parts, in call order (one part for a single call)."""
    out = [_function_response(c, o) for c, o in zip(calls, outcomes, strict=True)]
    return out[0] if single else out
