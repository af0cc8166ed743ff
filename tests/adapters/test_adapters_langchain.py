"""LangChain: StructuredTools with a real sync func and an async coroutine (a worker thread)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest
from adapters_support import app_server
from servers.launch import everything_stdio_argv

import mcpsync
from mcpsync import adapters

langchain_tools = pytest.importorskip("langchain_core.tools")
from langchain_core.messages import ToolCall, ToolMessage  # noqa: E402


def test_sync_and_async_calls_and_errors_reach_the_model():
    def add(params):
        a, b = params["arguments"]["a"], params["arguments"]["b"]
        return {
            "content": [{"type": "text", "text": str(a + b)}],
            "structuredContent": {"sum": a + b},
        }

    tools = [
        {"name": "add", "description": "Add two numbers.",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}},
        {"name": "boom", "inputSchema": {"type": "object"}},
    ]  # fmt: skip
    server = app_server(
        tools,
        {"add": add, "boom": {"content": [{"type": "text", "text": "it broke"}], "isError": True}},
    )
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        add_tool, boom = adapters.to_langchain(s)
        assert isinstance(add_tool, langchain_tools.StructuredTool)
        assert add_tool.name == "add" and add_tool.description == "Add two numbers."
        assert add_tool.args_schema["required"] == ["a", "b"]
        assert add_tool.func is not None and add_tool.coroutine is not None
        assert add_tool.invoke({"a": 2, "b": 3}) == "5"
        # as a model's tool call: a ToolMessage with the CallToolResult as artifact
        message = add_tool.invoke(
            ToolCall(name="add", args={"a": 1, "b": 1}, id="call-1", type="tool_call")
        )
        assert (
            isinstance(message, ToolMessage)
            and message.content == "2"
            and message.tool_call_id == "call-1"
        )
        assert message.artifact.structured_content == {"sum": 2}

        async def run() -> object:
            return await add_tool.ainvoke({"a": 10, "b": 5})

        assert asyncio.run(run()) == "15"
        error = boom.invoke(ToolCall(name="boom", args={}, id="call-2", type="tool_call"))
        assert isinstance(error, ToolMessage) and error.status == "error"
        assert "it broke" in error.content
    assert [c["name"] for c in server.calls] == ["add", "add", "add", "boom"]


def test_async_calls_run_concurrently_in_threads():
    arrived = threading.Barrier(3, timeout=10)

    def slow(params):
        arrived.wait()
        return {"content": [{"type": "text", "text": params["arguments"]["message"]}]}

    echo = {
        "name": "echo",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
    }
    server = app_server([echo], {"echo": slow})
    with mcpsync.Session.connect(server.transport, timeout=15) as s:
        (tool,) = adapters.to_langchain(s)

        async def three() -> list:
            return await asyncio.gather(*(tool.ainvoke({"message": f"m{i}"}) for i in range(3)))

        assert asyncio.run(three()) == ["m0", "m1", "m2"]


@pytest.mark.real
def test_tools_of_server_everything_with_an_image():
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30) as s:
        tools = {t.name: t for t in adapters.to_langchain(s, include="get-*")}
        assert set(tools) == {t.name for t in s.list_tools() if t.name.startswith("get-")}
        content = tools["get-tiny-image"].invoke({})
        assert [b["type"] for b in content] == ["text", "image"]
        assert content[1]["mime_type"] == "image/png" and content[1]["base64"].startswith("iVBOR")


def test_without_langchain_a_clear_error(tmp_path):
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "import mcpsync.adapters as a\n"
        "class S:\n"
        "    def list_tools(self): return []\n"
        "    def submit_call_tool(self, *a, **k): pass\n"
        "try:\n"
        "    a.to_langchain(S())\n"
        "except mcpsync.ConfigError as e:\n"
        "    print('ERR', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import mcpsync\n" + code],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        "ERR to_langchain needs langchain-core: pip install 'mcpsync[langchain]'" in out.stdout
    ), out.stderr
