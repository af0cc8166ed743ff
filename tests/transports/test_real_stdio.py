"""The session against real servers no one here wrote, over stdio.

- npm ``@modelcontextprotocol/server-everything`` (pinned in tests/node/package.json);
- a server built with the official ``mcp`` Python SDK (tests/servers/sdk_server.py).
"""

from __future__ import annotations

import base64
import threading

import pytest
from servers.launch import everything_stdio_argv, sdk_stdio_argv

import mcpsync

pytestmark = pytest.mark.real

SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled text"},
    "model": "test-model",
}


def handlers(seen: dict):
    def sample(params):
        seen["sampling"] = params
        return SAMPLED

    def elicit(params):
        seen["elicitation"] = params
        return {"action": "accept", "content": {"name": "Ann"}}

    return {
        "sampling_handler": sample,
        "elicitation_handler": elicit,
        "roots": ["file:///work/project"],
    }


def test_everything_server_over_stdio(no_leaks):
    seen: dict = {}
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30, **handlers(seen)) as s:
        assert s.server_info.name == "mcp-servers/everything"
        assert s.protocol_version == "2025-11-25"
        assert s.instructions
        tools = {t.name: t for t in s.list_tools()}
        assert {"echo", "get-sum", "trigger-sampling-request", "get-roots-list"} <= set(tools)

        assert s.call_tool("echo", {"message": "hi"}).content[0].text == "Echo: hi"
        assert "5" in s.call_tool("get-sum", {"a": 2, "b": 3}).content[0].text

        structured = s.call_tool("get-structured-content", {"location": "Chicago"})
        assert structured.structured_content  # checked against the tool's outputSchema

        image = s.call_tool("get-tiny-image", {}).content
        png = next(c for c in image if c.type == "image")
        assert base64.b64decode(png.data)[:4] == b"\x89PNG"

        progress = []
        s.call_tool(
            "trigger-long-running-operation",
            {"duration": 1, "steps": 3},
            on_progress=progress.append,
        )
        assert [p.progress for p in progress] == [1, 2, 3]

        sampled = s.call_tool("trigger-sampling-request", {"prompt": "say hi", "maxTokens": 10})
        assert "sampled text" in str(sampled.content)
        assert seen["sampling"].max_tokens == 10

        assert "file:///work/project" in str(s.call_tool("get-roots-list", {}).content)

        resources = s.list_resources()
        assert resources and s.read_resource(resources[0].uri).contents
        assert s.list_resource_templates()
        prompts = {p.name for p in s.list_prompts()}
        assert "simple-prompt" in prompts
        assert s.get_prompt("args-prompt", {"city": "Paris", "state": "TX"}).messages
        completion = s.complete(
            {"type": "ref/prompt", "name": "completable-prompt"}, "department", "E"
        )
        assert completion.completion.values

        s.set_logging_level("debug")
        s.ping()


def test_everything_server_subscriptions(no_leaks):
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30) as s:
        uri = str(s.list_resources()[0].uri)
        updated = threading.Event()
        s.subscribe_resource(uri, lambda u: updated.set())
        s.call_tool("toggle-subscriber-updates", {})
        assert updated.wait(20)
        s.unsubscribe_resource(uri)


def test_official_sdk_server_over_stdio(no_leaks):
    seen: dict = {}
    # era="legacy": this SDK server speaks both eras; auto-detection is tested in test_modern_*.
    with mcpsync.Session.connect(sdk_stdio_argv(), timeout=30, era="legacy", **handlers(seen)) as s:
        assert s.protocol_version == "2025-11-25"
        tools = {t.name for t in s.list_tools()}
        assert {"echo", "add", "long_running", "sample", "elicit", "list_roots"} <= tools
        assert s.call_tool("echo", {"message": "hey"}).content[0].text == "hey"
        assert s.call_tool("add", {"a": 1, "b": 2}).structured_content["sum"] == 3
        assert s.call_tool("fail", {}).is_error
        progress = []
        s.call_tool("long_running", {"duration": 0.3, "steps": 3}, on_progress=progress.append)
        assert len(progress) == 3
        assert "sampled text" in s.call_tool("sample", {"prompt": "x"}).content[0].text
        assert "Ann" in s.call_tool("elicit", {"message": "name?"}).content[0].text
        assert "file:///work/project" in s.call_tool("list_roots", {}).content[0].text
        logs = []
        s._on_log = logs.append  # observe routed log messages directly
        s.set_logging_level("debug")
        s.call_tool("log", {"level": "warning", "message": "careful"})
        s.ping()
        assert any(m.data == "careful" for m in logs)
        assert s.read_resource("demo://readme").contents
        assert s.get_prompt("greet", {"name": "Bo"}).messages
