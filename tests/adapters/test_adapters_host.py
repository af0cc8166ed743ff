"""Adapters over a Host: qualified names across servers, shortened reversibly, calls routed
to the owning server, concurrently across servers."""

from __future__ import annotations

import re
import threading

import pytest
from adapters_support import app_server
from anthropic.types import ToolUseBlock
from google.genai import types
from servers.launch import demo_argv, everything_stdio_argv

import mcpsync
from mcpsync import adapters

LONG = "analytics-warehouse.production-eu-west-1"
TOOL = {"name": "run_query_against_the_reporting_database", "inputSchema": {"type": "object"}}
ECHO = {"name": "echo", "inputSchema": {"type": "object", "properties": {"m": {"type": "string"}}}}


@pytest.fixture
def two_fakes():
    servers = {"small": app_server([ECHO]), LONG: app_server([ECHO, TOOL])}

    def connect(**kwargs):
        return mcpsync.Session.connect(servers[kwargs["name"]].transport, name=kwargs["name"])

    config = {name: {"command": "unused"} for name in servers}
    with mcpsync.Host(config, connect=connect) as host:
        yield host, servers


def test_qualified_long_names_fit_every_api_and_route_back(two_fakes):
    host, servers = two_fakes
    exposed = [t.name for t in host.list_tools()]
    assert exposed == ["echo", f"{LONG}__echo", TOOL["name"]]
    openai_names = [t["function"]["name"] for t in adapters.to_openai(host)]
    assert openai_names[0] == "echo" and openai_names[2] == TOOL["name"]
    long_echo = openai_names[1]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", long_echo) and long_echo != f"{LONG}__echo"
    assert long_echo.startswith("analytics-warehouse_production-eu-west-1__echo_")
    gemini_names = [d["name"] for d in adapters.to_gemini(host)]
    assert gemini_names[1] == f"{LONG}__echo"  # dots are fine for Gemini, and it fits
    out = adapters.dispatch(
        host,
        [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"m": "1"}'},
            },
            {
                "id": "b",
                "type": "function",
                "function": {"name": long_echo, "arguments": '{"m": "2"}'},
            },
        ],
    )
    assert [m["content"] for m in out] == ['{"m": "1"}', '{"m": "2"}']
    assert [c["arguments"] for c in servers["small"].calls] == [{"m": "1"}]
    assert [c["arguments"] for c in servers[LONG].calls] == [{"m": "2"}]
    part = adapters.dispatch(host, types.FunctionCall(name=f"{LONG}__echo", args={"m": "3"}))
    assert part["function_response"]["response"] == {"output": '{"m": "3"}'}


def test_qualified_everywhere(two_fakes):
    host, servers = two_fakes
    names = [t["name"] for t in adapters.to_anthropic(host, qualified=True)]
    assert names[0] == "small__echo" and names[2].startswith("analytics-warehouse_production")
    assert all(len(n) <= 64 for n in names)
    block = adapters.dispatch(
        adapters.tools(host, qualified=True),
        ToolUseBlock(type="tool_use", id="t", name=names[2], input={}),
    )
    assert "is_error" not in block
    assert [c["name"] for c in servers[LONG].calls] == [TOOL["name"]]


def test_calls_to_different_servers_of_one_turn_overlap():
    arrived = threading.Barrier(2, timeout=10)

    def wait(params):
        arrived.wait()
        return {"content": [{"type": "text", "text": "done"}]}

    servers = {"one": app_server([ECHO], {"echo": wait}), "two": app_server([ECHO], {"echo": wait})}

    def connect(**kwargs):
        return mcpsync.Session.connect(
            servers[kwargs["name"]].transport, name=kwargs["name"], timeout=15
        )

    with mcpsync.Host({n: {"command": "unused"} for n in servers}, connect=connect) as host:
        calls = [{"type": "function_call", "call_id": c, "name": n, "arguments": "{}"}
                 for c, n in (("1", "echo"), ("2", "two__echo"))]  # fmt: skip
        out = adapters.dispatch(host, calls)
    assert [i["output"] for i in out] == ["done", "done"] and not arrived.broken


@pytest.mark.real
def test_a_host_with_server_everything_and_the_demo():
    config = {
        "everything": {"command": everything_stdio_argv()[0], "args": everything_stdio_argv()[1:]},
        "demo": {
            "command": demo_argv()[0],
            "args": demo_argv()[1:],
            "excludeTools": ["sample", "elicit"],
        },
    }
    with mcpsync.Host(config) as host:
        tools = adapters.to_openai(host, api="responses")
        names = [t["name"] for t in tools]
        assert "demo__echo" in names and "echo" in names and "demo__sample" not in names
        out = adapters.dispatch(
            host,
            [
                {
                    "type": "function_call",
                    "call_id": "1",
                    "name": "echo",
                    "arguments": '{"message": "e"}',
                },
                {
                    "type": "function_call",
                    "call_id": "2",
                    "name": "demo__echo",
                    "arguments": '{"message": "d"}',
                },
                {
                    "type": "function_call",
                    "call_id": "3",
                    "name": "add",
                    "arguments": '{"a": 1, "b": 2}',
                },
            ],
        )
    assert [i["output"] for i in out] == ["Echo: e", "d", "3"]


def test_whole_replies_of_each_sdk_are_dispatched():
    from anthropic.types import Message
    from openai.types.chat import ChatCompletionMessage
    from openai.types.responses import Response

    server = app_server([ECHO])
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        message = Message.model_validate({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "Let me echo."},
                        {"type": "tool_use", "id": "t1", "name": "echo", "input": {"m": "a"}}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        })  # fmt: skip
        assert [b["tool_use_id"] for b in adapters.dispatch(s, message)] == ["t1"]
        response = Response.model_validate({
            "id": "resp_1", "object": "response", "created_at": 0, "model": "m",
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "echo", "arguments": '{"m": "b"}'},
                {"type": "function_call", "call_id": "c2", "name": "echo", "arguments": '{"m": "c"}'},
            ],
        })  # fmt: skip
        assert [i["output"] for i in adapters.dispatch(s, response)] == ['{"m": "b"}', '{"m": "c"}']
        reply = types.GenerateContentResponse(
            candidates=[
                types.Candidate(
                    content=types.Content(
                        role="model",
                        parts=[
                            types.Part(text="ok"),
                            types.Part(
                                function_call=types.FunctionCall(name="echo", args={"m": "d"})
                            ),
                        ],
                    )
                )
            ]  # fmt: skip
        )
        (part,) = adapters.dispatch(s, reply)
        assert part["function_response"]["response"] == {"output": '{"m": "d"}'}
        (part,) = adapters.dispatch(s, reply.candidates[0].content)
        assert part["function_response"]["name"] == "echo"
        assert adapters.dispatch(s, {"role": "assistant", "content": "no calls"}) == []
        final = ChatCompletionMessage.model_validate({"role": "assistant", "content": "done"})
        assert adapters.dispatch(s, final) == []  # a last reply without calls: nothing to run
        blocks = {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t2", "name": "echo", "input": {}}],
        }
        assert [b["tool_use_id"] for b in adapters.dispatch(s, blocks)] == ["t2"]
    assert [c["arguments"].get("m") for c in server.calls] == ["a", "b", "c", "d", "d", None]
    with pytest.raises(mcpsync.ConfigError, match="not a tool call"):
        adapters.dispatch(s, {"type": "text", "text": "hi"})


def test_a_timeout_or_a_dead_server_becomes_an_error_result_not_an_exception():
    holder: dict = {}

    def crash(params):
        holder["server"].crash()  # the connection drops while the call runs

    tools = [
        ECHO,
        {"name": "never", "inputSchema": {"type": "object"}},
        {"name": "crash", "inputSchema": {"type": "object"}},
    ]
    server = app_server(
        tools, {"never": lambda params: None, "crash": crash}
    )  # never: no reply at all
    holder["server"] = server
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        timed_out, echoed = adapters.dispatch(
            s,
            [
                {"type": "function_call", "call_id": "1", "name": "never", "arguments": "{}"},
                {
                    "type": "function_call",
                    "call_id": "2",
                    "name": "echo",
                    "arguments": '{"m": "x"}',
                },
            ],
            timeout=0.5,
        )
        assert timed_out["output"].startswith("Error: tool 'never' failed: RequestTimeout")
        assert echoed["output"] == '{"m": "x"}'
        (block,) = adapters.dispatch(
            s, [{"type": "tool_use", "id": "t", "name": "crash", "input": {}}]
        )
        assert block["is_error"] is True and "failed" in block["content"][0]["text"]
        (after,) = adapters.dispatch(
            s, [{"type": "tool_use", "id": "u", "name": "echo", "input": {}}]
        )
        assert after["is_error"] is True  # the session is gone: still a result, not an exception
