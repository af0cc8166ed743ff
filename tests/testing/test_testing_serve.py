"""mcpsync.testing.serve(): SDK and fastmcp server objects in-process, over the memory transport."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

import mcpsync
from mcpsync.testing import serve

pytestmark = pytest.mark.real


def _mcpserver():
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("calc")

    @app.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @app.tool()
    def boom() -> str:
        raise ValueError("kaput")

    @app.resource("note://hello")
    def hello() -> str:
        return "hello note"

    @app.prompt()
    def greet(name: str) -> str:
        return f"Hello {name}"

    return app


def _lowlevel():
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx, params):
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="shout",
                    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
                )
            ]
        )

    async def call_tool(ctx, params):
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text.upper())])

    return Server("low", on_list_tools=list_tools, on_call_tool=call_tool)


def _fastmcp():
    from fastmcp import FastMCP

    app = FastMCP("fast")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    return app


def _serve_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-serve")]


def test_mcpserver_tools_resources_prompts(no_leaks):
    with serve(_mcpserver()) as s:
        assert isinstance(s, mcpsync.Session) and s.transport.kind == "memory"
        assert _serve_threads() == ["mcpsync-serve[calc]"]
        assert {t.name for t in s.list_tools()} == {"add", "boom"}
        assert s.call_tool("add", {"a": 2, "b": 40}).structured_content == {"result": 42}
        failed = s.call_tool("boom")
        assert failed.is_error and "boom" in failed.content[0].text
        assert s.read_resource("note://hello").contents[0].text == "hello note"
        assert "Hello Ada" in s.get_prompt("greet", {"name": "Ada"}).messages[0].content.text
    assert s.closed and _serve_threads() == []


def test_lowlevel_server(no_leaks):
    s = serve(_lowlevel())
    try:
        assert [t.name for t in s.list_tools()] == ["shout"]
        assert s.call_tool("shout", {"text": "hi"}).content[0].text == "HI"
    finally:
        s.close()
    assert _serve_threads() == []


def test_fastmcp_server(no_leaks):
    with serve(_fastmcp()) as s:
        assert s.server_info.name == "fast"
        assert s.call_tool("add", {"a": 1, "b": 2}).content[0].text == "3"
    assert _serve_threads() == []


def test_many_calls_from_threads(no_leaks):
    with serve(_mcpserver()) as s:
        results: list[int] = []

        def work(i: int) -> None:
            for j in range(20):
                results.append(s.call_tool("add", {"a": i, "b": j}).structured_content["result"])

        threads = [threading.Thread(target=work, args=(i,), name=f"t{i}") for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(results) == sorted(i + j for i in range(4) for j in range(20))


def test_not_a_server():
    with pytest.raises(mcpsync.ConfigError, match="MCPServer"):
        serve(object())


def _stuck_mcpserver():
    """An MCPServer whose lifespan never ends: it never reads a message."""
    import contextlib

    import anyio
    from mcp.server.mcpserver import MCPServer

    @contextlib.asynccontextmanager
    async def stuck(app):
        await anyio.sleep(3600)
        yield {}

    return MCPServer("stuck", lifespan=stuck)


def test_a_server_that_never_starts_is_bounded_by_connect_timeout(no_leaks):
    """``serve(app, connect_timeout=2)`` on a server that never answers: the
    ``RequestTimeout`` within 2 + 0.5 s, and its loop thread gone (before: 7.0 s, the
    failure path waited the 5 s stop grace for a server that never read its stream)."""
    import time

    # what is not serve()'s to bound is paid before the clock: building the app (importing
    # the SDK's server) and a process's first serve() (mcpsync.session and the SDK's
    # modules imported on first use); under double CPU load these took 0.66 s in the clock
    with serve(_mcpserver(), connect_timeout=30):
        pass
    app = _stuck_mcpserver()
    started = time.monotonic()
    with pytest.raises(mcpsync.RequestTimeout, match="connect_timeout=2 s"):
        serve(app, connect_timeout=2)
    elapsed = time.monotonic() - started
    assert elapsed <= 2 + 0.5, f"{elapsed:.2f} s for connect_timeout=2"
    assert _serve_threads() == []


def _examples(text: str) -> list[str]:
    """The indented code blocks after ``Example (...)::`` and ```python fences."""
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    for m in re.finditer(r"Example \([^)]*\)::\n\n((?:    .*\n|\n)+)", text):
        blocks.append("\n".join(line[4:] for line in m.group(1).splitlines()))
    return blocks


def test_documented_examples_run(no_leaks):
    from mcpsync.testing import _serve

    readme = (Path(_serve.__file__).parent / "README.md").read_text()
    blocks = _examples(_serve.__doc__ or "") + [b for b in _examples(readme) if "serve(" in b]
    assert len(blocks) >= 4, blocks
    for code in blocks:
        exec(compile(code, "<example>", "exec"), {})
    assert _serve_threads() == []
