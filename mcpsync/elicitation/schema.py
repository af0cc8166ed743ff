"""A form elicitation's requested schema as fields a person can fill in, and their checks.

Owns: ``FormField`` (one top-level property: its kind — ``string``, ``number``,
``integer``, ``boolean``, ``enum``, ``multi`` —, title, description, required, default,
choices, bounds, format), ``form_fields`` (the schema's properties in order; a property
outside the 2025-11-25 primitive subset is a ``SchemaUnsupported``), ``parse_answer``
(typed text -> value, or ``ValueError`` with a sentence a person understands) and
``check_content`` (a whole answer against the fields). Pure: no I/O, no dependency.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import MCPSyncError

__all__ = [
    "FormField",
    "SchemaUnsupported",
    "check_content",
    "form_fields",
    "params_dict",
    "parse_answer",
]

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+\Z")
_TRUE = {"y", "yes", "true", "t", "1", "on"}
_FALSE = {"n", "no", "false", "f", "0", "off"}


class SchemaUnsupported(MCPSyncError, ValueError):
    """The requested schema is not a flat object of primitive properties."""


@dataclass(frozen=True)
class FormField:
    """One field of a form elicitation."""

    name: str
    kind: str  # "string" | "number" | "integer" | "boolean" | "enum" | "multi"
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    #: (value, label) pairs of an enum / multi-select field
    choices: tuple[tuple[str, str], ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    format: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def label(self) -> str:
        return self.title or self.name


def params_dict(params: Any) -> dict[str, Any]:
    """An elicitation's params as a plain dict (an ``mcp_types`` model or a mapping)."""
    dump = getattr(params, "model_dump", None)
    if callable(dump):
        data: dict[str, Any] = dump(by_alias=True, exclude_none=True, mode="json")
        return data
    return dict(params or {})


def _choices(prop: Mapping[str, Any]) -> tuple[tuple[str, str], ...] | None:
    if isinstance(prop.get("oneOf"), list):
        return tuple(
            (str(o.get("const")), str(o.get("title") or o.get("const"))) for o in prop["oneOf"]
        )
    if isinstance(prop.get("enum"), list):
        names = prop.get("enumNames") if isinstance(prop.get("enumNames"), list) else None
        values = [str(v) for v in prop["enum"]]
        if names and len(names) == len(values):
            return tuple(zip(values, map(str, names), strict=True))
        return tuple((v, v) for v in values)
    return None


def form_fields(schema: Mapping[str, Any] | None) -> list[FormField]:
    """The fields of a requested schema, in the order the server wrote them."""
    schema = schema or {}
    props = schema.get("properties") or {}
    if schema.get("type", "object") != "object" or not isinstance(props, Mapping):
        raise SchemaUnsupported("the requested schema is not an object with properties")
    required = set(schema.get("required") or ())
    out: list[FormField] = []
    for name, prop in props.items():
        if not isinstance(prop, Mapping):
            raise SchemaUnsupported(f"property {name!r} is not a schema")
        kind = prop.get("type")
        common: dict[str, Any] = {
            "name": str(name),
            "title": str(prop.get("title") or ""),
            "description": str(prop.get("description") or ""),
            "required": name in required,
            "default": prop.get("default"),
        }
        if kind == "array":
            items: Mapping[str, Any] = (
                prop["items"] if isinstance(prop.get("items"), Mapping) else {}
            )
            choices = _choices({"oneOf": items["anyOf"]} if "anyOf" in items else items)
            if not choices:
                raise SchemaUnsupported(f"array property {name!r} has no enum items")
            out.append(FormField(kind="multi", choices=choices, min_items=prop.get("minItems"),
                                 max_items=prop.get("maxItems"), **common))  # fmt: skip
        elif kind == "string" and (choices := _choices(prop)) is not None:
            out.append(FormField(kind="enum", choices=choices, **common))
        elif kind == "string":
            out.append(FormField(kind="string", min_length=prop.get("minLength"),
                                 max_length=prop.get("maxLength"), format=prop.get("format"),
                                 **common))  # fmt: skip
        elif kind in ("number", "integer"):
            out.append(FormField(kind=str(kind), minimum=prop.get("minimum"),
                                 maximum=prop.get("maximum"), **common))  # fmt: skip
        elif kind == "boolean":
            out.append(FormField(kind="boolean", **common))
        else:
            raise SchemaUnsupported(f"property {name!r} has unsupported type {kind!r}")
    return out


def _check_string(f: FormField, value: str) -> str:
    if f.min_length is not None and len(value) < f.min_length:
        raise ValueError(f"at least {f.min_length} characters")
    if f.max_length is not None and len(value) > f.max_length:
        raise ValueError(f"at most {f.max_length} characters")
    if f.format == "email" and not _EMAIL.match(value):
        raise ValueError("an email address, like name@example.com")
    if f.format == "uri":
        parts = urlsplit(value)
        if not parts.scheme or not (parts.netloc or parts.path):
            raise ValueError("a URI, like https://example.com/")
    if f.format == "date":
        try:
            _dt.date.fromisoformat(value)
        except ValueError:
            raise ValueError("a date, like 2025-11-25") from None
    if f.format == "date-time":
        try:
            _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("a date and time, like 2025-11-25T14:30:00Z") from None
    return value


def _check_number(f: FormField, value: float) -> None:
    if f.minimum is not None and value < f.minimum:
        raise ValueError(f"at least {f.minimum:g}")
    if f.maximum is not None and value > f.maximum:
        raise ValueError(f"at most {f.maximum:g}")


def parse_answer(f: FormField, text: str) -> Any:
    """The value typed for ``f`` (already stripped of the line end); ``ValueError`` in words."""
    text = text.strip()
    if f.kind == "string":
        return _check_string(f, text)
    if f.kind == "integer":
        try:
            value: Any = int(text)
        except ValueError:
            raise ValueError("a whole number, like 42") from None
        _check_number(f, value)
        return value
    if f.kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise ValueError("a number, like 3.5") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("a finite number")
        _check_number(f, value)
        return (
            int(value)
            if value.is_integer() and "." not in text and "e" not in text.lower()
            else value
        )
    if f.kind == "boolean":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError("yes or no")
    if f.kind == "enum":
        return _choice(f, text)
    if f.kind == "multi":
        picked = [_choice(f, part) for part in re.split(r"\s*,\s*", text) if part]
        if len(set(picked)) != len(picked):
            raise ValueError("each choice once")
        _check_items(f, picked)
        return picked
    raise ValueError(f"unsupported field kind {f.kind!r}")


def _check_items(f: FormField, picked: list[str]) -> None:
    if f.min_items is not None and len(picked) < f.min_items:
        raise ValueError(f"at least {f.min_items} choices")
    if f.max_items is not None and len(picked) > f.max_items:
        raise ValueError(f"at most {f.max_items} choices")


def _choice(f: FormField, text: str) -> str:
    values = [v for v, _ in f.choices]
    if text in values:
        return text
    for v, label in f.choices:
        if text.lower() == label.lower():
            return v
    if text.isdigit() and 1 <= int(text) <= len(values):  # the number shown beside it
        return values[int(text) - 1]
    raise ValueError("one of " + ", ".join(values))


def check_content(fields: list[FormField], content: Mapping[str, Any]) -> dict[str, str]:
    """Problems with a whole answer: field name -> what is wrong (empty when it is fine)."""
    problems: dict[str, str] = {}
    for f in fields:
        if f.name not in content or content[f.name] in (None, ""):
            if f.required:
                problems[f.name] = "required"
            continue
        value = content[f.name]
        try:
            if f.kind == "boolean" and not isinstance(value, bool):
                raise ValueError("yes or no")
            if f.kind in ("number", "integer"):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError("a number")
                if f.kind == "integer" and not float(value).is_integer():
                    raise ValueError("a whole number")
                _check_number(f, float(value))
            elif f.kind == "multi":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError("a list of choices")
                for v in value:
                    _choice(f, v)
                _check_items(f, value)
            elif f.kind in ("string", "enum"):
                if not isinstance(value, str):
                    raise ValueError("text")
                parse_answer(f, value)
        except ValueError as exc:
            problems[f.name] = str(exc)
    return problems
