"""Renderings for notebooks and terminals: :class:`Rendered` (HTML, Markdown, text), the
``*_table`` functions, :func:`result` and :func:`error`. HTML escapes all server text;
an ``icon`` column shows checked ``data:`` icons inline and ``https:`` icons as links,
fetched only with ``fetch_icons=True`` (``icons``).
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .content import _is_error, _part_text, _visible_parts, content_items, result_text
from .icons import fetch_icon, icon_html, safe_icons
from .rows import (
    _get,
    format_table,
    icon_source,
    prompt_rows,
    resource_rows,
    status_rows,
    template_rows,
    tool_rows,
)

__all__ = [
    "Rendered",
    "tools_table",
    "resources_table",
    "templates_table",
    "prompts_table",
    "status_table",
    "result",
    "error",
]

# --------------------------------------------------------------------------- notebook


class Rendered:
    """Something that shows well in Jupyter (``_repr_html_``/``_repr_markdown_``) and in a terminal."""

    def __init__(self, html_text: str, text: str, markdown: str | None = None) -> None:
        self.html = html_text
        self.text = text
        self.markdown = markdown if markdown is not None else f"```\n{text}\n```"

    def _repr_html_(self) -> str:
        return self.html

    def _repr_markdown_(self) -> str:
        return self.markdown

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


_STYLE = "border-collapse:collapse;font-family:var(--jp-code-font-family,monospace);font-size:90%"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_table(
    rows: Sequence[Mapping[str, str]],
    columns: Sequence[str] | None,
    caption: str,
    icons: Sequence[str] | None = None,
) -> str:
    cap = f"<caption style='text-align:left;font-weight:bold'>{_e(caption)}</caption>"
    if not rows:
        return f"<table class='mcpsync' style='{_STYLE}'>{cap}<tr><td><i>none</i></td></tr></table>"
    cols = list(columns or rows[0].keys())
    head = "".join(
        f"<th style='text-align:left;padding:2px 8px'>{_e(c.replace('_', ' '))}</th>" for c in cols
    )

    def cell(i: int, r: Mapping[str, str], c: str) -> str:
        inner = (
            icons[i] if c == "icon" and icons is not None else _e(r.get(c, ""))
        )  # icon_html escapes
        return f"<td style='text-align:left;padding:2px 8px;vertical-align:top'>{inner}</td>"

    body = "".join(
        "<tr>" + "".join(cell(i, r, c) for c in cols) + "</tr>" for i, r in enumerate(rows)
    )
    return f"<table class='mcpsync' style='{_STYLE}'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(
    rows: Sequence[Mapping[str, str]], columns: Sequence[str] | None, caption: str
) -> str:
    if not rows:
        return f"**{caption}**: none"
    cols = list(columns or rows[0].keys())
    lines = [f"**{caption}**", "", "| " + " | ".join(c.replace("_", " ") for c in cols) + " |"]
    lines.append("|" + "---|" * len(cols))
    lines += ["| " + " | ".join(_md_cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def _table(
    rows: list[dict[str, str]],
    caption: str,
    columns: Sequence[str] | None = None,
    items: Sequence[Any] | None = None,
    fetch_icons: bool = False,
) -> Rendered:
    icons = None
    if items is not None and rows and "icon" in rows[0]:
        icons = []
        for item in items:
            found = safe_icons(icon_source(item))
            if fetch_icons:  # the opt-in: https icons read (bounded) and shown inline
                found = [fetch_icon(i) or i for i in found]
            icons.append(icon_html(found))
    return Rendered(
        _html_table(rows, columns, caption, icons),
        f"{caption}\n{format_table(rows, columns)}",
        _md_table(rows, columns, caption),
    )


def tools_table(tools: Iterable[Any], *, fetch_icons: bool = False) -> Rendered:
    """Tools (from a Session or a Host) as a table. ``fetch_icons``: read https icons to
    show them inline (off: they are links, and nothing is fetched)."""
    items = list(tools)
    rows = tool_rows(items)
    return _table(rows, f"Tools ({len(rows)})", items=items, fetch_icons=fetch_icons)


def resources_table(resources: Iterable[Any], *, fetch_icons: bool = False) -> Rendered:
    items = list(resources)
    rows = resource_rows(items)
    return _table(rows, f"Resources ({len(rows)})", items=items, fetch_icons=fetch_icons)


def templates_table(templates: Iterable[Any], *, fetch_icons: bool = False) -> Rendered:
    items = list(templates)
    rows = template_rows(items)
    return _table(rows, f"Resource templates ({len(rows)})", items=items, fetch_icons=fetch_icons)


def prompts_table(prompts: Iterable[Any], *, fetch_icons: bool = False) -> Rendered:
    items = list(prompts)
    rows = prompt_rows(items)
    return _table(rows, f"Prompts ({len(rows)})", items=items, fetch_icons=fetch_icons)


def status_table(statuses: Iterable[Any]) -> Rendered:
    """``Host.status()`` as a table."""
    rows = status_rows(statuses)
    return _table(rows, f"Servers ({len(rows)})")


def _part_html(part: Mapping[str, Any]) -> str:
    kind = part["kind"]
    if kind == "text":
        return f"<pre style='white-space:pre-wrap;margin:2px 0'>{_e(part['text'])}</pre>"
    if kind == "image":
        mime = (
            part["mime_type"]
            if part["mime_type"].startswith("image/")
            else "application/octet-stream"
        )
        data = part["data"] if _is_base64(part["data"]) else ""
        return f"<img alt='image {_e(mime)}' src='data:{_e(mime)};base64,{data}' style='max-width:100%'/>"
    if kind == "audio":
        mime = (
            part["mime_type"]
            if part["mime_type"].startswith("audio/")
            else "application/octet-stream"
        )
        data = part["data"] if _is_base64(part["data"]) else ""
        return f"<audio controls src='data:{_e(mime)};base64,{data}'></audio>"
    if kind == "resource":
        head = f"<div><b>resource</b> <code>{_e(part['uri'])}</code> {_e(part['mime_type'])}</div>"
        if "text" in part:
            return head + f"<pre style='white-space:pre-wrap;margin:2px 0'>{_e(part['text'])}</pre>"
        if part["mime_type"].startswith("image/") and _is_base64(part["blob"]):
            return (
                head
                + f"<img alt='{_e(part['uri'])}' src='data:{_e(part['mime_type'])};base64,{part['blob']}' style='max-width:100%'/>"
            )
        return head + f"<div><i>{part['size']} bytes</i></div>"
    if kind == "resource_link":
        label = part["name"] or part["uri"]
        return f"<div><b>link</b> <code>{_e(part['uri'])}</code> {_e(label)} {_e(part['description'])}</div>"
    if kind == "structured":
        return f"<pre style='margin:2px 0'>{_e(json.dumps(part['value'], indent=2, ensure_ascii=False))}</pre>"
    if kind == "message":
        return f"<div><b>{_e(part['role'])}</b></div>" + _part_html(part["part"])
    return (
        f"<pre style='margin:2px 0'>{_e(json.dumps(part.get('value'), ensure_ascii=False))}</pre>"
    )


def _is_base64(data: Any) -> bool:
    if not isinstance(data, str):
        return False
    try:
        base64.b64decode(data, validate=True)
    except ValueError:
        return False
    return True


def result(obj: Any) -> Rendered:
    """A tool result, resource contents or prompt result: text, images inline, structured JSON."""
    parts = content_items(obj)
    failed = _is_error(obj)
    border = "#d33" if failed else "#888"
    title = "Tool error" if failed else "Result"
    if _get(obj, "messages") is not None:
        title = "Prompt" + (f": {_get(obj, 'description')}" if _get(obj, "description") else "")
    elif _get(obj, "contents") is not None and _get(obj, "content") is None:
        title = "Resource contents"
    inner = "".join(_part_html(p) for p in _visible_parts(parts)) or "<i>empty</i>"
    html_text = (
        f"<div class='mcpsync-result' style='border-left:3px solid {border};padding-left:8px'>"
        f"<div style='font-weight:bold'>{_e(title)}</div>{inner}</div>"
    )
    text = result_text(obj)
    if failed:
        text = f"[tool error]\n{text}"
    md_parts = []
    for p in parts:
        if p["kind"] == "image" and _is_base64(p["data"]):
            md_parts.append(f"![image](data:{p['mime_type']};base64,{p['data']})")
        elif p["kind"] == "text":
            md_parts.append(p["text"])
        else:
            md_parts.append(f"```\n{_part_text(p)}\n```")
    markdown = f"**{title}**\n\n" + "\n\n".join(md_parts)
    return Rendered(html_text, text, markdown)


def error(exc: BaseException) -> Rendered:
    """An exception, with the details mcpsync errors carry (exit code, stderr tail, HTTP status)."""
    lines = [f"{type(exc).__name__}: {exc}"]
    for attr in ("code", "status", "exit_code"):
        value = getattr(exc, attr, None)
        if value is not None and f"{value}" not in lines[0]:
            lines.append(f"{attr}: {value}")
    data = getattr(exc, "data", None)
    if data is not None:
        lines.append("data: " + json.dumps(data, ensure_ascii=False, default=str))
    text = "\n".join(lines)
    html_text = (
        "<div class='mcpsync-error' style='border-left:3px solid #d33;padding-left:8px'>"
        f"<b>{_e(type(exc).__name__)}</b><pre style='white-space:pre-wrap;margin:2px 0'>{_e(text)}</pre></div>"
    )
    return Rendered(html_text, text, f"**{type(exc).__name__}**\n\n```\n{text}\n```")
