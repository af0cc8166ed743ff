"""What every provider adapter shares: the tool catalog, names, schemas, results, calls.

Owns:

* :class:`ToolSet`: the tools a model may use, from a ``Session`` or a ``Host`` (exposed
  names across servers) after a :class:`~mcpsync.filters.ToolFilter`, each knowing the
  session that runs it.
* Names: :class:`NameRule` (a provider's length and character limits) and a reversible
  mapping: a name that fits is kept; one that does not is cleaned and shortened with a
  hash of the original (``a_long_na_3f2a9c1d``), so the same tool always gets the same
  provider name and a call maps back to exactly one tool.
* Schemas: ``$ref`` inlining, ``type`` lists, the null-stripping of optional arguments a
  strict-mode model sent as ``null``.
* Results: a ``CallToolResult`` as neutral :class:`Part` items (text, image, audio, text
  or binary resource, resource link) plus structured content and ``isError``.
* Calls: :class:`Call`, a provider's tool call parsed (id, name, arguments or the reason
  they are unusable), and :func:`run_calls`, which runs several at once on their
  sessions (``submit_call_tool``) and returns outcomes in call order.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, MCPSyncError
from ..filters import ToolFilter

__all__ = [
    "ToolSet",
    "Entry",
    "NameRule",
    "Part",
    "Outcome",
    "Call",
    "toolset",
    "inline_refs",
    "object_schema",
    "NotStrict",
    "merge_all_of",
    "drop_optional_nulls",
    "parts_of",
    "run_calls",
    "as_dict",
]

log = logging.getLogger("mcpsync.adapters")


def as_dict(obj: Any) -> Any:
    """A provider SDK object (pydantic) or a plain mapping, as plain Python data."""
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, Mapping):
        return {k: v for k, v in obj.items()}
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="python", exclude_none=True, by_alias=False)
    if hasattr(obj, "__dict__"):
        return {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    return obj


# --------------------------------------------------------------------------- names


@dataclass(frozen=True)
class NameRule:
    """A provider's rule for function names."""

    provider: str
    max_length: int = 64
    allowed: str = r"A-Za-z0-9_-"  # a regex character class body
    first: str | None = None  # character class the first character must be in, if any

    def fits(self, name: str) -> bool:
        if not name or len(name) > self.max_length:
            return False
        if re.fullmatch(f"[{self.allowed}]+", name) is None:
            return False
        return self.first is None or re.match(f"[{self.first}]", name) is not None

    def convert(self, name: str) -> str:
        """``name`` if it fits; else a cleaned prefix plus 8 hex digits of its SHA-256."""
        if self.fits(name):
            return name
        clean = re.sub(f"[^{self.allowed}]", "_", name)
        if self.first is not None and not re.match(f"[{self.first}]", clean):
            clean = "_" + clean
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        return clean[: self.max_length - 9].rstrip("_") + "_" + digest


OPENAI_NAMES = NameRule("openai")
ANTHROPIC_NAMES = NameRule("anthropic")
GEMINI_NAMES = NameRule("gemini", allowed=r"A-Za-z0-9_.:-", first=r"A-Za-z_")


# --------------------------------------------------------------------------- catalog


@dataclass(frozen=True)
class Entry:
    """One tool a model may call: its exposed name, its Tool, and how to run it."""

    name: str  # the Session's tool name, or the Host's exposed (bare or qualified) name
    tool: Any  # mcp_types.Tool
    server: str | None
    qualified: str
    tool_name: str  # the name the server knows
    session: Callable[[], Any] = field(repr=False, compare=False)

    @property
    def description(self) -> str:
        return getattr(self.tool, "description", None) or getattr(self.tool, "title", None) or ""

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = getattr(self.tool, "input_schema", None)
        return dict(schema) if isinstance(schema, Mapping) else {"type": "object"}

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The tool's ``outputSchema`` (what its ``structuredContent`` holds), if it has one."""
        schema = getattr(self.tool, "output_schema", None)
        return dict(schema) if isinstance(schema, Mapping) else None


class ToolSet:
    """The tools offered to a model: a source (``Session`` or ``Host``) and a filter.

    Every adapter function accepts a ToolSet wherever it accepts a source, so one filter
    serves both the definitions given to the model and the dispatch of its calls (a call
    to a tool the filter hides becomes an error result, never a call).
    ``qualified=True`` names every Host tool ``server__tool`` (default: the Host's exposed
    names, bare where the server owns the name).
    """

    def __init__(
        self,
        source: Any,
        *,
        filter: ToolFilter | None = None,
        qualified: bool = False,
    ) -> None:
        if isinstance(source, ToolSet):
            filter = filter or source.filter
            qualified = qualified or source.qualified
            source = source.source
        if not hasattr(source, "list_tools") or not hasattr(source, "submit_call_tool"):
            raise ConfigError(
                f"expected an mcpsync Session, Host or ToolSet, got {type(source).__name__}"
            )
        self.source: Any = source
        self.filter: ToolFilter = filter or ToolFilter()
        self.qualified: bool = qualified

    def __repr__(self) -> str:
        return f"<ToolSet {self.source!r} {self.filter!r}>"

    def _all(self) -> list[Entry]:
        from ..host import Host

        source = self.source
        if isinstance(source, Host):
            host: Host = source
            out = []
            for ht in host.list_tools():
                server = ht.server
                out.append(
                    Entry(
                        name=ht.qualified if self.qualified else ht.name,
                        tool=ht.tool,
                        server=server,
                        qualified=ht.qualified,
                        tool_name=ht.tool_name,
                        session=functools.partial(host.session, server),
                    )
                )
            return out
        return [Entry(t.name, t, None, t.name, t.name, lambda: source) for t in source.list_tools()]

    def entries(self) -> list[Entry]:
        """The tools that pass the filter, source order."""
        return [e for e in self._all() if self.filter.allows(_Named(e))]

    def lookup(self, name: str, rule: NameRule) -> tuple[Entry | None, str]:
        """The tool a provider-side ``name`` maps back to, or (None, why not)."""
        every = self._all()
        names = provider_names(every, rule)
        entry = names.get(name)
        if entry is None:
            entry = next((e for e in every if e.name == name or e.qualified == name), None)
        if entry is None:
            visible = sorted(n for n, e in names.items() if self.filter.allows(_Named(e)))
            shown = ", ".join(visible[:30]) + (" ..." if len(visible) > 30 else "")
            return None, f"unknown tool {name!r}; available tools: {shown or 'none'}"
        why = self.filter.why_not(_Named(entry))
        if why is not None:
            return None, f"tool {name!r} is not available: {why}"
        return entry, ""


@dataclass(frozen=True)
class _Named:
    """An Entry seen by the filter like a HostTool (names + tool)."""

    entry: Entry

    @property
    def tool(self) -> Any:
        return self.entry.tool

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def qualified(self) -> str:
        return self.entry.qualified


def toolset(source: Any, **filters: Any) -> ToolSet:
    """A ToolSet from a source and optional filter keywords (see ``ToolFilter.of``);
    keywords given narrow (or replace, for the same keyword) a ToolSet's own filter."""
    qualified = bool(filters.pop("qualified", False))
    given = {k: v for k, v in filters.items() if v is not None and v != ()}
    if not given.get("app_only", True):
        given.pop("app_only")
    if isinstance(source, ToolSet) and not given and not qualified:
        return source
    base = source.filter if isinstance(source, ToolSet) else ToolFilter()
    merged: dict[str, Any] = {
        "include": base.include,
        "exclude": base.exclude,
        "read_only": base.read_only,
        "destructive": base.destructive,
        "app_only": base.app_only,
    }
    merged.update(given)
    return ToolSet(source, filter=ToolFilter.of(**merged), qualified=qualified)


def provider_names(entries: Iterable[Entry], rule: NameRule) -> dict[str, Entry]:
    """provider name -> entry; ConfigError if two tools would get the same provider name."""
    out: dict[str, Entry] = {}
    for e in entries:
        pname = rule.convert(e.name)
        other = out.get(pname)
        if other is not None and other is not e:
            raise ConfigError(
                f"tools {other.name!r} and {e.name!r} both map to the {rule.provider} name {pname!r}"
            )
        out[pname] = e
    return out


# --------------------------------------------------------------------------- schemas


def inline_refs(schema: Any, *, max_depth: int = 8) -> Any:
    """``schema`` with local ``$ref``s (``#/$defs/...``, ``#/definitions/...``) replaced by
    their targets; a recursive reference (or one deeper than ``max_depth``) keeps only its
    target's ``type`` and ``description``."""
    if not isinstance(schema, Mapping):
        return schema
    root = schema

    def target(ref: str) -> Any:
        if not ref.startswith("#/"):
            return None
        node: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def walk(node: Any, depth: int, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(n, depth, seen) for n in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str):
            found = target(ref)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            if found is None or ref in seen or depth >= max_depth:
                resolved: dict[str, Any] = {}  # cut: the target's type and description only
                if isinstance(found, Mapping):
                    resolved.update(
                        {
                            k: found[k]
                            for k in ("type", "description")
                            if isinstance(found.get(k), str)
                        }
                    )
            else:
                resolved = dict(walk(found, depth + 1, (*seen, ref)))
            resolved.update(walk(rest, depth, seen))
            return resolved
        return {
            k: walk(v, depth, seen) for k, v in node.items() if k not in ("$defs", "definitions")
        }

    return walk(schema, 0, ())


class NotStrict(Exception):
    """A schema has a part a provider's strict mode cannot express (its tool stays as it is)."""


def merge_all_of(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``allOf`` of object schemas merged in (properties, required);
    :class:`NotStrict` for an ``allOf`` of anything else. Strict modes take no ``allOf``."""
    for part in node.pop("allOf"):
        if not isinstance(part, Mapping) or part.get("type", "object") != "object":
            raise NotStrict("allOf of non-objects")
        node.setdefault("type", "object")
        node.setdefault("properties", {}).update(part.get("properties") or {})
        node["required"] = sorted(set(node.get("required") or ()) | set(part.get("required") or ()))
    return node


def object_schema(schema: Any) -> dict[str, Any]:
    """A tool's input schema as a JSON object schema (``type: object`` with ``properties``)."""
    out = copy.deepcopy(dict(schema)) if isinstance(schema, Mapping) else {}
    out.pop("$schema", None)
    out["type"] = "object"
    if not isinstance(out.get("properties"), Mapping):
        out["properties"] = {}
    return out


def _types_of(schema: Mapping[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    found: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key) or ():
            if isinstance(sub, Mapping):
                found |= _types_of(sub) or {"any"}
    return found


def admits_null(schema: Any) -> bool:
    """Whether ``schema`` accepts JSON null (or is unconstrained)."""
    if not isinstance(schema, Mapping):
        return True
    types = _types_of(schema)
    if not types:
        return "enum" not in schema and "const" not in schema or None in (schema.get("enum") or ())
    return "null" in types or "any" in types or schema.get("nullable") is True


def drop_optional_nulls(args: Any, schema: Any) -> Any:
    """Remove ``null`` values of optional properties whose schema does not accept null.

    Strict mode makes every property required and nullable; the model then sends null
    for "not given". The server should see the property absent (its default applies).
    """
    if not isinstance(args, dict) or not isinstance(schema, Mapping):
        return args
    schema = inline_refs(schema)
    props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
    required = set(schema.get("required") or ())
    out = {}
    for key, value in args.items():
        sub = props.get(key)
        if value is None and key not in required and sub is not None and not admits_null(sub):
            continue
        if isinstance(value, dict) and isinstance(sub, Mapping):
            value = drop_optional_nulls(value, sub)
        elif isinstance(value, list) and isinstance(sub, Mapping):
            items = sub.get("items")
            value = [drop_optional_nulls(v, items) for v in value]
        out[key] = value
    return out


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Part:
    """One content block of a tool result, provider-neutral.

    ``kind``: "text" (``text``), "image" / "audio" (``data`` base64, ``mime``),
    "resource" (embedded: ``uri``, ``mime``, and ``text`` or base64 ``data``),
    "link" (a resource link: ``uri``, ``name``, ``mime``, ``text`` = description).
    """

    kind: str
    text: str | None = None
    data: str | None = None
    mime: str | None = None
    uri: str | None = None
    name: str | None = None

    def describe(self) -> str:
        """A line a model can read in place of a block its API cannot carry."""
        if self.kind == "link":
            what = f"resource link: {self.name or self.uri} <{self.uri}>"
            if self.mime:
                what += f" ({self.mime})"
            if self.text:
                what += f": {self.text}"
            return f"[{what}]"
        size = len(self.data or "") * 3 // 4
        where = f" {self.uri}" if self.uri else ""
        return f"[{self.kind}{where} ({self.mime or 'unknown type'}, about {size} bytes)]"

    @property
    def data_url(self) -> str:
        return f"data:{self.mime or 'application/octet-stream'};base64,{self.data or ''}"


@dataclass
class Outcome:
    """A finished tool call as the model should see it."""

    parts: list[Part]
    structured: Any = None
    is_error: bool = False

    @classmethod
    def error(cls, message: str) -> Outcome:
        return cls([Part("text", text=message)], None, True)

    def texts(self) -> list[str]:
        return [p.text for p in self.parts if p.kind == "text" and p.text is not None]

    def text(self, *, describe: bool = True, with_structured: bool = True) -> str:
        """Every block as text (non-text ones described), JSON of structured content
        when no text block carries it; an error prefixed so the model cannot miss it."""
        lines = []
        for p in self.parts:
            if p.kind == "text":
                lines.append(p.text or "")
            elif p.kind == "resource" and p.text is not None:
                lines.append(f"[resource {p.uri} ({p.mime or 'text'})]\n{p.text}")
            elif describe:
                lines.append(p.describe())
        if with_structured and self.structured is not None and not self.texts():
            lines.append(json.dumps(self.structured, ensure_ascii=False, default=str))
        body = "\n".join(lines)
        return f"Error: {body}" if self.is_error else body


def parts_of(result: Any) -> Outcome:
    """A ``CallToolResult`` (model or dict) as an :class:`Outcome`."""
    data = (
        result.model_dump(by_alias=True, exclude_none=True, mode="json")
        if hasattr(result, "model_dump")
        else dict(result)
    )
    parts: list[Part] = []
    for block in data.get("content") or ():
        kind = block.get("type")
        if kind == "text":
            parts.append(Part("text", text=block.get("text", "")))
        elif kind in ("image", "audio"):
            parts.append(Part(kind, data=block.get("data", ""), mime=block.get("mimeType")))
        elif kind == "resource":
            res = block.get("resource") or {}
            parts.append(
                Part(
                    "resource",
                    text=res.get("text"),
                    data=res.get("blob"),
                    mime=res.get("mimeType"),
                    uri=res.get("uri"),
                )
            )
        elif kind == "resource_link":
            parts.append(
                Part(
                    "link",
                    uri=block.get("uri"),
                    name=block.get("title") or block.get("name"),
                    mime=block.get("mimeType"),
                    text=block.get("description"),
                )
            )
        else:  # a block type from a newer protocol: keep it readable
            parts.append(Part("text", text=json.dumps(block, ensure_ascii=False, default=str)))
    return Outcome(parts, data.get("structuredContent"), bool(data.get("isError")))


# --------------------------------------------------------------------------- calls


@dataclass
class Call:
    """A provider's tool call, parsed. ``problem`` set: the arguments cannot be used."""

    provider: str  # "chat", "responses", "anthropic", "gemini"
    id: str | None
    name: str
    arguments: dict[str, Any] | None
    problem: str | None = None
    raw: Any = field(default=None, repr=False)


def parse_arguments(
    raw: Any, *, json_text: bool = True
) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments from a JSON string (``json_text``: OpenAI's form) or a mapping;
    (None, problem) when unusable."""
    if raw is None or (json_text and raw == ""):
        return {}, None
    if json_text and isinstance(raw, str | bytes):
        try:
            value = json.loads(raw)
        except ValueError as exc:
            return None, f"the arguments are not valid JSON ({exc}); send a JSON object"
    else:
        value = as_dict(raw)
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def _wait(future: Future[Any]) -> Any:
    from ..protocol.modern import ModernFuture

    if isinstance(future, ModernFuture):
        return future.wait()
    return future.result()


def run_calls(
    tools: ToolSet,
    calls: list[Call],
    rule: NameRule,
    *,
    prepare: Callable[[dict[str, Any], Entry], dict[str, Any]] | None = None,
    call_options: Mapping[str, Any] | None = None,
) -> list[Outcome]:
    """Run ``calls`` concurrently on their sessions; outcomes in call order.

    Unusable arguments, unknown or hidden tools and MCP errors (server error, timeout,
    a server that went away) become error outcomes the model can read.
    """
    pending: list[Future[Any] | Outcome] = []
    options = dict(call_options or {})
    try:
        for call in calls:
            if call.problem is not None:
                pending.append(Outcome.error(f"tool {call.name!r} was not called: {call.problem}"))
                continue
            entry, why = tools.lookup(call.name, rule)
            if entry is None:
                pending.append(Outcome.error(why))
                continue
            args = call.arguments or {}
            if prepare is not None:
                args = prepare(args, entry)
            try:
                pending.append(entry.session().submit_call_tool(entry.tool_name, args, **options))
            except MCPSyncError as exc:
                pending.append(_failed(call, exc))
        outcomes = []
        for call, item in zip(calls, pending, strict=True):
            if isinstance(item, Outcome):
                outcomes.append(item)
                continue
            try:
                outcomes.append(parts_of(_wait(item)))
            except MCPSyncError as exc:
                outcomes.append(_failed(call, exc))
        return outcomes
    except BaseException:  # Ctrl-C: nothing keeps running on the servers
        for item in pending:
            if isinstance(item, Future):
                item.cancel()
        raise


def _failed(call: Call, exc: MCPSyncError) -> Outcome:
    log.info("tool call %s failed: %s: %s", call.name, type(exc).__name__, exc)
    return Outcome.error(f"tool {call.name!r} failed: {type(exc).__name__}: {exc}")
