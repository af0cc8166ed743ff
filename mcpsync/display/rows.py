"""MCP listings as rows of strings (tools, resources, templates, prompts, host status) and
rows as a plain-text table. Items that declare icons get an ``icon`` column (``icons``:
checked data icons as ``png 16x16``, https ones as their link; never fetched).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .icons import icon_text, safe_icons

__all__ = [
    "icon_source",
    "with_icons",
    "schema_arguments",
    "tool_rows",
    "resource_rows",
    "template_rows",
    "prompt_rows",
    "status_rows",
    "format_table",
]

# --------------------------------------------------------------------------- rows


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """Attribute (pydantic model) or key (raw dict), trying snake_case then camelCase names.

    A pydantic model is read through its declared fields only: a camelCase alias some
    library adds as a property (fastmcp's deprecated ``structuredContent``) is not touched."""
    fields = getattr(type(obj), "model_fields", None)  # a pydantic model class (not a transport)
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj and obj[name] is not None:
                return obj[name]
        elif isinstance(fields, Mapping) and name not in fields:
            continue
        else:
            value = getattr(obj, name, None)
            if value is not None:
                return value
    return default


def _first_line(text: str | None, limit: int = 0) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    if limit and len(line) > limit:
        line = line[: limit - 1] + "…"
    return line


def schema_arguments(schema: Mapping[str, Any] | None) -> str:
    """``"message*, count"``: the properties of an input schema, required ones starred."""
    if not isinstance(schema, Mapping):
        return ""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return ", ".join(f"{name}*" if name in required else name for name in props)


def icon_source(item: Any) -> Any:
    """What carries an item's icons: the item, or the tool inside a HostTool."""
    return _get(item, "tool", default=item) if _get(item, "server") is not None else item


def with_icons(rows: list[dict[str, str]], items: Sequence[Any]) -> list[dict[str, str]]:
    """``rows`` with an ``icon`` column when any of ``items`` declares a showable icon."""
    cells = [icon_text(safe_icons(icon_source(item))) for item in items]
    if any(cells):
        for row, cell in zip(rows, cells, strict=True):
            row["icon"] = cell
    return rows


def tool_rows(tools: Iterable[Any]) -> list[dict[str, str]]:
    """name, title, arguments, description for each tool (``mcp_types.Tool``, a dict, or a HostTool)."""
    tools = list(tools)
    rows = []
    for t in tools:
        server = _get(t, "server")
        tool = _get(t, "tool", default=t) if server is not None else t
        row = {
            "name": str(_get(t, "name", default="")),
            "title": str(
                _get(tool, "title", default="")
                or _get(_get(tool, "annotations"), "title", default="")
            ),
            "arguments": schema_arguments(_get(tool, "input_schema", "inputSchema")),
            "description": _first_line(_get(tool, "description")),
        }
        if server is not None:
            row = {
                "name": row["name"],
                "server": str(server),
                **{k: v for k, v in row.items() if k != "name"},
            }
        rows.append(row)
    return with_icons(rows, tools)


def resource_rows(resources: Iterable[Any]) -> list[dict[str, str]]:
    resources = list(resources)
    return with_icons(
        [
            {
                "uri": str(_get(r, "uri", default="")),
                "name": str(_get(r, "name", default="")),
                "mime_type": str(_get(r, "mime_type", "mimeType", default="")),
                "description": _first_line(_get(r, "description")),
            }
            for r in resources
        ],
        resources,
    )


def template_rows(templates: Iterable[Any]) -> list[dict[str, str]]:
    templates = list(templates)
    return with_icons(
        [
            {
                "uri_template": str(_get(r, "uri_template", "uriTemplate", default="")),
                "name": str(_get(r, "name", default="")),
                "mime_type": str(_get(r, "mime_type", "mimeType", default="")),
                "description": _first_line(_get(r, "description")),
            }
            for r in templates
        ],
        templates,
    )


def prompt_rows(prompts: Iterable[Any]) -> list[dict[str, str]]:
    prompts = list(prompts)
    rows = []
    for p in prompts:
        args = []
        for a in _get(p, "arguments", default=()) or ():
            name = str(_get(a, "name", default=""))
            args.append(f"{name}*" if _get(a, "required", default=False) else name)
        rows.append(
            {
                "name": str(_get(p, "name", default="")),
                "arguments": ", ".join(args),
                "description": _first_line(_get(p, "description")),
            }
        )
    return with_icons(rows, prompts)


def _error_line(err: BaseException | None, limit: int = 0) -> str:
    if err is None:
        return ""
    text = _first_line(str(err)) or type(err).__name__
    return _first_line(text, limit)


def status_rows(statuses: Iterable[Any]) -> list[dict[str, str]]:
    """Rows for :meth:`mcpsync.host.Host.status` (server, state, transport, version, tools, time, error)."""
    rows = []
    for s in statuses:
        seconds = getattr(s, "seconds", None)
        tools = getattr(s, "tools", None)
        rows.append(
            {
                "server": s.name,
                "state": s.state,
                "transport": s.transport,
                "version": s.protocol_version or "-",
                "tools": "-" if tools is None else str(tools),
                "time": "-" if seconds is None else f"{seconds * 1000:.0f} ms",
                "error": _error_line(s.error),
            }
        )
    return rows


def format_table(
    rows: Sequence[Mapping[str, str]], columns: Sequence[str] | None = None, *, max_width: int = 60
) -> str:
    """A plain fixed-width table (header, rule, rows); long cells are cut with an ellipsis."""
    if not rows:
        return "(none)"
    cols = list(columns or rows[0].keys())

    def cell(value: Any) -> str:
        text = " ".join(str(value if value is not None else "").split())
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    body = [[cell(r.get(c, "")) for c in cols] for r in rows]
    head = [c.upper().replace("_", " ") for c in cols]
    widths = [max(len(head[i]), *(len(b[i]) for b in body)) for i in range(len(cols))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)).rstrip() for b in body]
    return "\n".join(lines)
