"""mcpsync.display: tables, results, errors and progress for notebooks and terminals."""

from __future__ import annotations

import base64
import io
import json
import sys
import types
from html.parser import HTMLParser
from pathlib import Path

import mcp_types
import pytest

from mcpsync import display
from mcpsync.errors import ServerError, ServerExited

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
DEMO = [sys.executable, "-m", "mcpsync.demo_server"]


class _Collect(HTMLParser):
    """Parses HTML (so tests check structure, not string fragments) and checks tags balance."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in ("img", "br"):
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> in {self.stack}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(html_text: str) -> _Collect:
    p = _Collect()
    p.feed(html_text)
    p.close()
    assert p.stack == [], f"unclosed tags {p.stack}"
    return p


def tool(name: str, description: str = "", **schema_props) -> mcp_types.Tool:
    return mcp_types.Tool.model_validate(
        {
            "name": name,
            "description": description,
            "inputSchema": {
                "type": "object",
                "properties": schema_props,
                "required": list(schema_props)[:1],
            },
        }
    )


def test_tools_table_html_markdown_text():
    tools = [
        tool("echo", "Echo it.\nSecond line", message={"type": "string"}, n={}),
        tool("x<y>", "<script>alert(1)</script>"),
    ]
    r = display.tools_table(tools)
    doc = parse(r._repr_html_())
    assert [t for t, _ in doc.tags].count("tr") == 3  # header + 2 rows
    cells = [s for s in doc.text if s.strip()]
    assert (
        "Tools (2)" in cells and "echo" in cells and "message*, n" in cells and "Echo it." in cells
    )
    assert "<script>alert(1)</script>" in cells  # as text, escaped in the markup
    assert "<script>" not in r.html and "&lt;script&gt;" in r.html
    assert "Second line" not in r.html
    md = r._repr_markdown_()
    assert md.splitlines()[2] == "| name | title | arguments | description |"
    assert "| echo |  | message*, n | Echo it. |" in md
    assert str(r).splitlines()[1].split() == ["NAME", "TITLE", "ARGUMENTS", "DESCRIPTION"]


def test_empty_table_and_raw_dicts():
    assert "none" in display.tools_table([]).html
    rows = display.tool_rows(
        [{"name": "a", "inputSchema": {"properties": {"q": {}}, "required": ["q"]}}]
    )
    assert rows == [{"name": "a", "title": "", "arguments": "q*", "description": ""}]


def test_result_text_image_structured():
    result = mcp_types.CallToolResult.model_validate(
        {
            "content": [
                {"type": "text", "text": "sum is <3>"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
            ],
            "structuredContent": {"sum": 3},
        }
    )
    r = display.result(result)
    doc = parse(r.html)
    imgs = [a for t, a in doc.tags if t == "img"]
    assert imgs == [
        {"alt": "image image/png", "src": f"data:image/png;base64,{PNG}", "style": "max-width:100%"}
    ]
    pres = "".join(doc.text)
    assert "sum is <3>" in pres and '"sum": 3' not in pres  # the text part carries the result
    assert "border-left:3px solid #888" in r.html
    # text form: structured JSON is skipped when a text part is present
    assert str(r) == f"sum is <3>\n[image image/png, {len(base64.b64decode(PNG))} bytes]"
    assert f"![image](data:image/png;base64,{PNG})" in r._repr_markdown_()


def test_result_error_and_structured_only():
    failed = mcp_types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": "nope"}], "isError": True}
    )
    r = display.result(failed)
    assert "#d33" in r.html and "Tool error" in r.html and str(r) == "[tool error]\nnope"
    only = display.result({"content": [], "structuredContent": {"a": [1, 2]}})
    assert json.loads(str(only)) == {"a": [1, 2]}


def test_result_bad_base64_is_not_injected():
    r = display.result(
        {"content": [{"type": "image", "data": "x' onerror='alert(1)", "mimeType": "image/png"}]}
    )
    doc = parse(r.html)
    (img,) = [a for t, a in doc.tags if t == "img"]
    assert img["src"] == "data:image/png;base64," and "onerror" not in img


def test_resource_contents_and_links():
    rr = mcp_types.ReadResourceResult.model_validate(
        {
            "contents": [
                {"uri": "demo://a", "mimeType": "text/plain", "text": "hello"},
                {
                    "uri": "demo://b",
                    "mimeType": "application/octet-stream",
                    "blob": base64.b64encode(b"abc").decode(),
                },
                {"uri": "demo://c.png", "mimeType": "image/png", "blob": PNG},
            ]
        }
    )
    r = display.result(rr)
    doc = parse(r.html)
    assert "Resource contents" in doc.text
    assert "3 bytes" in "".join(doc.text)
    assert [a["src"] for t, a in doc.tags if t == "img"] == [f"data:image/png;base64,{PNG}"]
    assert str(r).splitlines()[:2] == ["[resource demo://a text/plain]", "hello"]
    link = display.result({"content": [{"type": "resource_link", "uri": "file:///x", "name": "x"}]})
    assert str(link) == "[link file:///x (x)]"


def test_prompt_result():
    gp = mcp_types.GetPromptResult.model_validate(
        {
            "description": "Greet",
            "messages": [{"role": "user", "content": {"type": "text", "text": "Hi Ada"}}],
        }
    )
    r = display.result(gp)
    assert str(r) == "Greet\nuser: Hi Ada"
    doc = parse(r.html)
    assert "Prompt: Greet" in doc.text and "user" in doc.text


def test_error_rendering():
    e = ServerError(-32602, "bad <params>", data={"field": "x"}, method="tools/call")
    r = display.error(e)
    doc = parse(r.html)
    text = "".join(doc.text)
    assert "ServerError" in text and "bad <params>" in text and '"field": "x"' in text
    assert "code: -32602" not in str(r)  # already in the message
    exited = display.error(ServerExited("server died", exit_code=3, stderr_tail="oops"))
    assert "exit code 3" in str(exited) and "oops" in exited.html


def test_status_table_from_host_rows():
    from mcpsync.host import ServerStatus

    rows = [
        ServerStatus(
            "a", "ready", "stdio", "python -m a", "2025-11-25", None, 3, 0.0123, None, False
        ),
        ServerStatus(
            "b", "failed", "stdio", "b", None, None, None, 0.5, RuntimeError("boom\nmore"), False
        ),
    ]
    r = display.status_table(rows)
    assert display.status_rows(rows)[0]["time"] == "12 ms"
    doc = parse(r.html)
    assert "boom" in doc.text and "more" not in "".join(doc.text)


def test_text_progress_plain_and_tty():
    stream = io.StringIO()
    bar = display.TextProgress("job", stream, width=10)
    bar(display_progress(1, 4, "one"))
    bar(display_progress(2, None, None))
    bar.finish()
    assert stream.getvalue() == "job [##--------] 1/4 one\njob 2\n"

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    bar = display.TextProgress("", tty, width=4)
    bar(display_progress(1, 2, "half way"))
    bar(display_progress(2, 2, None))
    bar.finish()
    assert tty.getvalue() == "\r[##--] 1/2 half way\r[####] 2/2" + " " * 9 + "\n"


def display_progress(progress, total, message):
    from mcpsync import Progress

    return Progress(progress, total, message)


def test_progress_bar_uses_ipython_display_handle(monkeypatch: pytest.MonkeyPatch):
    updates: list[str] = []

    class Handle:
        def update(self, obj):
            updates.append(obj._repr_html_())

    class HTML:
        def __init__(self, data):
            self.data = data

    def fake_display(obj, display_id=False):
        assert display_id is True
        updates.append(obj._repr_html_())
        assert "<progress" not in repr(obj)  # a text form for text-only frontends
        return Handle()

    class ZMQInteractiveShell:
        pass

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: ZMQInteractiveShell()
    ipy_display = types.ModuleType("IPython.display")
    ipy_display.HTML = HTML
    ipy_display.display = fake_display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipy_display)

    bar = display.progress_bar("upload <big>")
    bar(display_progress(3, 10, "chunk 3"))
    bar.finish()
    assert len(updates) == 2 and "waiting" in updates[0]
    doc = parse(updates[1])
    assert ("progress", {"value": "3", "max": "10"}) in doc.tags
    assert "upload <big>" in doc.text and "chunk 3" in "".join(doc.text)


def test_progress_bar_without_ipython_falls_back_to_text(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "IPython", None)  # import fails
    bar = display.progress_bar("t")
    bar(display_progress(1, 2, None))
    bar.finish()
    assert "t [" in capsys.readouterr().err


def test_real_session_renders():
    import mcpsync

    with mcpsync.Session.connect(DEMO) as s:
        tools = display.tools_table(s.list_tools())
        assert "Tools (11)" in tools.html
        r = display.result(s.call_tool("add", {"a": 2, "b": 3}))
        assert str(r) == "5"
        prompts = display.prompts_table(s.list_prompts())
        assert "name*, style" in prompts.html
        res = display.resources_table(s.list_resources())
        assert "demo://readme" in res.html
        assert "demo://item/{id}" in display.templates_table(s.list_resource_templates()).html


@pytest.mark.slow
def test_in_a_real_notebook_kernel(tmp_path: Path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    code = f"""
import mcpsync
from mcpsync import display
s = mcpsync.Session.connect({DEMO!r})
bar = display.progress_bar("lr")
s.call_tool("long_running", {{"duration": 0.2, "steps": 2}}, on_progress=bar)
display.tools_table(s.list_tools())
"""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code), nbformat.v4.new_code_cell("s.close()")]
    nbclient.NotebookClient(
        nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[0].outputs
    html_outputs = [
        o["data"]["text/html"] for o in outputs if "data" in o and "text/html" in o["data"]
    ]
    assert any("mcpsync-progress" in h for h in html_outputs)  # the bar was displayed
    assert any("Tools (11)" in h for h in html_outputs)
