"""Showing MCP things to people: plain-text tables for the terminal, HTML/Markdown for notebooks.

Owns: turning tools, resources, prompts, tool results, resource contents, prompt results,
host status rows and errors into rows, text tables and notebook renderings, plus a progress
bar that draws in a notebook (via ``IPython.display`` handles, when IPython is importable)
or as text. IPython stays optional: it is imported lazily, only by the progress bar.

Notebook use::

    from mcpsync import display
    display.tools_table(session.list_tools())      # renders as a table in Jupyter
    display.result(session.call_tool("add", {"a": 1, "b": 2}))
    session.call_tool("long_running", {}, on_progress=display.progress_bar("long_running"))

Every ``display.*`` renderer returns a :class:`Rendered` object: Jupyter calls its
``_repr_html_`` / ``_repr_markdown_``; ``str()`` gives the plain-text form; ``.html``
is the HTML string. HTML output escapes everything the server sent.
"""

from __future__ import annotations

import base64
import html
import json
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

__all__ = [
    "Rendered",
    "schema_arguments",
    "tool_rows",
    "resource_rows",
    "template_rows",
    "prompt_rows",
    "status_rows",
    "content_items",
    "format_table",
    "result_text",
    "tools_table",
    "resources_table",
    "templates_table",
    "prompts_table",
    "status_table",
    "result",
    "error",
    "progress_bar",
    "ProgressBar",
    "TextProgress",
]

# --------------------------------------------------------------------------- rows


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    """Attribute (pydantic model) or key (raw dict), trying snake_case then camelCase names."""
    for name in names:
        if isinstance(obj, Mapping):
            if name in obj and obj[name] is not None:
                return obj[name]
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


def tool_rows(tools: Iterable[Any]) -> list[dict[str, str]]:
    """name, title, arguments, description for each tool (``mcp_types.Tool``, a dict, or a HostTool)."""
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
    return rows


def resource_rows(resources: Iterable[Any]) -> list[dict[str, str]]:
    return [
        {
            "uri": str(_get(r, "uri", default="")),
            "name": str(_get(r, "name", default="")),
            "mime_type": str(_get(r, "mime_type", "mimeType", default="")),
            "description": _first_line(_get(r, "description")),
        }
        for r in resources
    ]


def template_rows(templates: Iterable[Any]) -> list[dict[str, str]]:
    return [
        {
            "uri_template": str(_get(r, "uri_template", "uriTemplate", default="")),
            "name": str(_get(r, "name", default="")),
            "mime_type": str(_get(r, "mime_type", "mimeType", default="")),
            "description": _first_line(_get(r, "description")),
        }
        for r in templates
    ]


def prompt_rows(prompts: Iterable[Any]) -> list[dict[str, str]]:
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
    return rows


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
    rows: Sequence[Mapping[str, str]], columns: Sequence[str] | None, caption: str
) -> str:
    cap = f"<caption style='text-align:left;font-weight:bold'>{_e(caption)}</caption>"
    if not rows:
        return f"<table class='mcpsync' style='{_STYLE}'>{cap}<tr><td><i>none</i></td></tr></table>"
    cols = list(columns or rows[0].keys())
    head = "".join(
        f"<th style='text-align:left;padding:2px 8px'>{_e(c.replace('_', ' '))}</th>" for c in cols
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td style='text-align:left;padding:2px 8px;vertical-align:top'>{_e(r.get(c, ''))}</td>"
            for c in cols
        )
        + "</tr>"
        for r in rows
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
    rows: list[dict[str, str]], caption: str, columns: Sequence[str] | None = None
) -> Rendered:
    return Rendered(
        _html_table(rows, columns, caption),
        f"{caption}\n{format_table(rows, columns)}",
        _md_table(rows, columns, caption),
    )


def tools_table(tools: Iterable[Any]) -> Rendered:
    """Tools (from a Session or a Host) as a table."""
    rows = tool_rows(tools)
    return _table(rows, f"Tools ({len(rows)})")


def resources_table(resources: Iterable[Any]) -> Rendered:
    rows = resource_rows(resources)
    return _table(rows, f"Resources ({len(rows)})")


def templates_table(templates: Iterable[Any]) -> Rendered:
    rows = template_rows(templates)
    return _table(rows, f"Resource templates ({len(rows)})")


def prompts_table(prompts: Iterable[Any]) -> Rendered:
    rows = prompt_rows(prompts)
    return _table(rows, f"Prompts ({len(rows)})")


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


# --------------------------------------------------------------------------- progress


def _fraction(progress: Any) -> tuple[float, float | None, str]:
    value = float(_get(progress, "progress", default=0) or 0)
    total = _get(progress, "total")
    message = _get(progress, "message", default="") or ""
    return value, (float(total) if total else None), str(message)


class TextProgress:
    """A progress reporter for terminals: redraws one line on a TTY, else prints one line per report.

    Use it as ``on_progress=``; call :meth:`finish` when the call returns.
    """

    def __init__(self, label: str = "", stream: IO[str] | None = None, width: int = 24) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        self._drawn = 0
        self.reports = 0

    def line(self, progress: Any) -> str:
        value, total, message = _fraction(progress)
        prefix = f"{self.label} " if self.label else ""
        if total:
            frac = max(0.0, min(1.0, value / total))
            filled = int(round(frac * self.width))
            bar = "#" * filled + "-" * (self.width - filled)
            text = f"{prefix}[{bar}] {value:g}/{total:g}"
        else:
            text = f"{prefix}{value:g}"
        return f"{text} {message}".rstrip()

    def __call__(self, progress: Any) -> None:
        text = self.line(progress)
        with self._lock:
            self.reports += 1
            if self.tty:
                pad = max(0, self._drawn - len(text))
                self.stream.write("\r" + text + " " * pad)
                self._drawn = len(text)
            else:
                self.stream.write(text + "\n")
            self.stream.flush()

    def finish(self) -> None:
        with self._lock:
            if self.tty and self._drawn:
                self.stream.write("\n")
                self.stream.flush()
                self._drawn = 0


class ProgressBar:
    """A notebook progress bar (an HTML ``<progress>`` updated in place through an IPython
    display handle); falls back to :class:`TextProgress` when IPython is not importable or
    no notebook frontend is active.
    """

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.reports = 0
        self._handle: Any = None
        self._text: TextProgress | None = None
        self._lock = threading.Lock()
        try:
            from IPython import get_ipython  # optional dependency: imported lazily
            from IPython.display import display
        except ImportError:
            self._text = TextProgress(label)
            return
        shell = get_ipython()
        if shell is None or "Terminal" in type(shell).__name__:
            self._text = TextProgress(label)
            return
        self._handle = display(self._render(None), display_id=True)

    def html(self, progress: Any) -> str:
        label = f"<b>{_e(self.label)}</b> " if self.label else ""
        if progress is None:
            return f"<div class='mcpsync-progress'>{label}<progress></progress> waiting</div>"
        value, total, message = _fraction(progress)
        if total:
            bar = f"<progress value='{value:g}' max='{total:g}'></progress> {value:g}/{total:g}"
        else:
            bar = f"<progress></progress> {value:g}"
        return f"<div class='mcpsync-progress'>{label}{bar} {_e(message)}</div>"

    def __call__(self, progress: Any) -> None:
        with self._lock:
            self.reports += 1
            if self._text is not None:
                self._text(progress)
            elif self._handle is not None:
                self._handle.update(self._render(progress))

    def _render(self, progress: Any) -> Rendered:
        """HTML for notebooks, with a text form for text-only frontends and nbconvert."""
        text = (
            TextProgress(self.label).line(progress)
            if progress is not None
            else f"{self.label} waiting"
        )
        return Rendered(self.html(progress), text.strip())

    def finish(self) -> None:
        if self._text is not None:
            self._text.finish()


def progress_bar(label: str = "") -> ProgressBar:
    """A progress callback for ``on_progress=``: a bar in notebooks, a text line elsewhere."""
    return ProgressBar(label)
