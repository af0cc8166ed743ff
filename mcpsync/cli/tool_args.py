"""``KEY=VALUE`` words on the command line -> a tool's arguments, typed by its inputSchema
(``$ref`` chains, ``allOf``, ``anyOf``, ``const``, ``additionalProperties``); used by
``mcpsync call`` and ``mcpsync smoke --call``.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from typing import Any

from .arguments import UsageError

__all__ = ["tool_arguments"]

# --------------------------------------------------------------------------- k=v tool arguments


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _schema_types(schema: Any, root: Any, depth: int = 0) -> set[str] | None:
    """The JSON types a (sub)schema allows, or None when it does not constrain them."""
    if not isinstance(schema, dict) or depth > 32:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):  # a local reference ($defs, definitions)
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        return _schema_types(target, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)} or None
    for key in ("anyOf", "oneOf"):
        subs = schema.get(key)
        if isinstance(subs, list) and subs:
            found: set[str] = set()
            for sub in subs:
                types = _schema_types(sub, root, depth + 1)
                if types is None:
                    return None  # one branch takes anything: so does the union
                found |= types
            return found
    if "const" in schema:
        return {_json_type(schema["const"])}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return {_json_type(v) for v in schema["enum"]}
    for sub in schema.get("allOf") or []:
        types = _schema_types(sub, root, depth + 1)
        if types is not None:
            return types
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    """JSON without NaN/Infinity (a server could not read them back)."""
    return json.loads(text, parse_constant=_no_constants)


def _coerce(key: str, raw: str, schema: Any, root: Any) -> Any:
    """One ``key=raw`` value, typed as the property's schema says (strings stay strings)."""
    types = _schema_types(schema, root)
    if types is None:  # the schema does not say: JSON when it parses, else the text
        try:
            return _loads(raw)
        except ValueError:
            return raw
    if "null" in types and raw == "null":
        return None
    if "boolean" in types and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    if types & {"integer", "number", "array", "object"}:
        try:
            value = _loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, int) and not isinstance(value, bool) and types & {"integer", "number"}:
            return value
        if isinstance(value, float):
            if "number" in types:
                return value
            if "integer" in types and value.is_integer():
                return int(value)
        if isinstance(value, list) and "array" in types:
            return value
        if isinstance(value, dict) and "object" in types:
            return value
    if "string" in types:
        enum = schema.get("enum") if isinstance(schema, dict) else None
        if isinstance(enum, list) and raw not in enum and all(isinstance(e, str) for e in enum):
            raise UsageError(
                f"{key}={raw!r} is not one of {', '.join(enum)}{_did_you_mean(raw, enum)}"
            )
        return raw
    wanted = " or ".join(sorted(types))
    hint = ""
    if types & {"array", "object"}:
        hint = f" (give JSON, e.g. {key}='[1, 2]' or {key}='{{\"k\": 1}}')"
    raise UsageError(f"{key}={raw!r}: the tool wants {wanted} here{hint}")


def tool_arguments(tool: str, items: Sequence[str], input_schema: Any) -> dict[str, Any]:
    """``KEY=VALUE`` words as tool arguments, typed by the tool's ``inputSchema``.

    A string property keeps the text as given (``message=123`` is ``"123"``); integer,
    number, boolean, null, array and object properties (also in ``type`` lists,
    ``anyOf``/``oneOf``, ``enum``/``const`` and local ``$ref``) are parsed, arrays and
    objects as JSON. A name the schema does not list, or a value of the wrong type, is a
    :class:`UsageError` with a did-you-mean.
    """
    schema = input_schema if isinstance(input_schema, dict) else {}
    props = schema.get("properties")
    props = props if isinstance(props, dict) else None
    extra = schema.get("additionalProperties")
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"expected tool arguments as KEY=VALUE, got {item!r}")
        if props is not None and key in props:
            out[key] = _coerce(key, raw, props[key], schema)
        elif props is None or extra is True:
            out[key] = _coerce(key, raw, None, schema)
        elif isinstance(extra, dict):
            out[key] = _coerce(key, raw, extra, schema)
        elif not props:
            raise UsageError(f"tool {tool!r} takes no arguments (got {key}=...)")
        else:
            raise UsageError(
                f"tool {tool!r} has no argument {key!r}{_did_you_mean(key, list(props))}"
                f" (its arguments: {', '.join(props)})"
            )
    return out
