"""Edge cases of the session machinery, against a scripted server over the in-memory pair."""

from __future__ import annotations

import os
import signal
import threading

import pytest
from fakes import FakeServer

import mcpsync
from mcpsync.errors import (
    CapabilityError,
    ProtocolError,
    ServerError,
    SessionClosed,
    TransportError,
    VersionMismatch,
)


def connect(server: FakeServer, **kwargs):
    return mcpsync.Session.connect(server.transport, timeout=5, connect_timeout=5, **kwargs)


def test_handshake_exposes_what_was_agreed(no_leaks):
    server = FakeServer(capabilities={"tools": {"listChanged": True}, "logging": {}})
    with connect(server) as s:
        init = server.expect("initialize")
        assert init["params"]["protocolVersion"] == "2025-11-25"
        assert init["params"]["clientInfo"]["name"] == "mcpsync"
        assert init["params"]["capabilities"] == {}
        server.expect("notifications/initialized")
        assert s.protocol_version == "2025-11-25"
        assert s.server_info.name == "fake"
        assert s.server_capabilities.tools.list_changed is True
        assert set(s.phases) >= {"transport", "initialize", "total"}


def test_older_supported_version_is_accepted(no_leaks):
    with connect(FakeServer(version="2024-11-05")) as s:
        assert s.protocol_version == "2024-11-05"


def test_unsupported_version_closes_and_names_both_sides(no_leaks):
    server = FakeServer(version="1999-01-01")
    with pytest.raises(VersionMismatch) as info:
        connect(server)
    assert "1999-01-01" in str(info.value) and "2025-11-25" in str(info.value)
    with pytest.raises(TransportError):  # the client hung up
        server.client_end.send({"jsonrpc": "2.0", "method": "x"})


def test_handlers_decide_advertised_client_capabilities(no_leaks):
    server = FakeServer()
    with connect(
        server, sampling_handler=lambda p: {}, elicitation_handler=lambda p: {}, roots=["file:///w"]
    ):
        caps = server.expect("initialize")["params"]["capabilities"]
    assert caps == {
        "roots": {"listChanged": True},
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
    }


def test_unadvertised_server_capability_raises_without_sending(no_leaks):
    server = FakeServer(capabilities={"tools": {}})
    with connect(server) as s:
        with pytest.raises(CapabilityError, match="prompts"):
            s.list_prompts()
        with pytest.raises(CapabilityError, match="resources.subscribe"):
            s.subscribe_resource("x://y", lambda uri: None)
        assert not any(
            m.get("method", "").startswith(("prompts/", "resources/")) for m in server.log
        )


def test_lax_mode_sends_anyway(no_leaks):
    server = FakeServer(capabilities={}, handlers={"prompts/list": lambda m: {"prompts": []}})
    with connect(server, strict=False) as s:
        assert s.list_prompts() == []


def test_server_request_for_unadvertised_capability_gets_an_error(no_leaks):
    server = FakeServer()
    with connect(server):
        answer = server.request("sampling/createMessage", {"messages": [], "maxTokens": 5})
        assert answer["error"]["code"] == -32601


def test_sampling_handler_gets_typed_params_and_its_result_is_sent(no_leaks):
    seen = []

    def sample(params):
        seen.append(params)
        return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}

    server = FakeServer()
    with connect(server, sampling_handler=sample):
        answer = server.request(
            "sampling/createMessage",
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 5,
            },
        )
    assert answer["result"]["content"]["text"] == "ok"
    assert seen[0].max_tokens == 5


def test_handler_exception_becomes_json_rpc_error(no_leaks):
    def boom(params):
        raise RuntimeError("no model here")

    server = FakeServer()
    with connect(server, sampling_handler=boom):
        answer = server.request("sampling/createMessage", {"messages": [], "maxTokens": 5})
    assert answer["error"]["code"] == -32603 and "no model here" in answer["error"]["message"]


def test_server_error_keeps_code_message_and_data(no_leaks):
    def fail(message):
        server.send(
            {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32602, "message": "bad", "data": {"x": 1}},
            }
        )

    server = FakeServer(handlers={"tools/call": fail})
    with connect(server) as s:
        with pytest.raises(ServerError) as info:
            s.call_tool("t", {})
    assert (info.value.code, info.value.message, info.value.data, info.value.method) == (
        -32602,
        "bad",
        {"x": 1},
        "tools/call",
    )


def test_list_tools_follows_every_page_and_caches_until_list_changed(no_leaks):
    pages = {
        None: ({"name": "a", "inputSchema": {"type": "object"}}, "p2"),
        "p2": ({"name": "b", "inputSchema": {"type": "object"}}, None),
    }

    def list_tools(message):
        tool, cursor = pages[(message.get("params") or {}).get("cursor")]
        return {"tools": [tool], **({"nextCursor": cursor} if cursor else {})}

    server = FakeServer(
        capabilities={"tools": {"listChanged": True}}, handlers={"tools/list": list_tools}
    )
    with connect(server) as s:
        changed = threading.Event()
        s.on_tools_changed(changed.set)
        assert [t.name for t in s.list_tools()] == ["a", "b"]
        assert [t.name for t in s.list_tools()] == ["a", "b"]
        assert sum(m.get("method") == "tools/list" for m in server.log) == 2  # cached
        server.notify("notifications/tools/list_changed")
        assert changed.wait(5)
        s.list_tools()
        assert sum(m.get("method") == "tools/list" for m in server.log) == 4


def test_output_schema_is_enforced(no_leaks):
    tool = {
        "name": "t",
        "inputSchema": {"type": "object"},
        "outputSchema": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
    }
    results = iter(
        [
            {"content": [], "structuredContent": {"n": 1}},
            {"content": [], "structuredContent": {"n": "x"}},
            {"content": []},
        ]
    )
    server = FakeServer(
        handlers={"tools/list": lambda m: {"tools": [tool]}, "tools/call": lambda m: next(results)}
    )
    with connect(server) as s:
        s.list_tools()
        assert s.call_tool("t").structured_content == {"n": 1}
        with pytest.raises(ProtocolError, match="outputSchema"):
            s.call_tool("t")
        with pytest.raises(ProtocolError, match="no structuredContent"):
            s.call_tool("t")


def test_no_extra_tools_list_on_first_call(no_leaks):
    server = FakeServer(handlers={"tools/call": lambda m: {"content": []}})
    with connect(server) as s:
        s.call_tool("t")
    assert not any(m.get("method") == "tools/list" for m in server.log)


def test_timeout_raises_and_tells_the_server(no_leaks):
    server = FakeServer(handlers={"tools/call": lambda m: None})  # never answers
    with connect(server) as s:
        with pytest.raises(mcpsync.RequestTimeout) as info:
            s.call_tool("slow", timeout=0.3)
        assert isinstance(info.value, TimeoutError)
        call = server.expect("tools/call")
        cancelled = server.expect("notifications/cancelled")
        assert cancelled["params"]["requestId"] == call["id"]


def test_future_cancel_tells_the_server(no_leaks):
    server = FakeServer(handlers={"tools/call": lambda m: None})
    with connect(server) as s:
        future = s.submit_call_tool("slow")
        call = server.expect("tools/call")
        assert future.cancel()
        assert server.expect("notifications/cancelled")["params"]["requestId"] == call["id"]


def test_ctrl_c_while_waiting_cancels_the_call(no_leaks):
    server = FakeServer(handlers={"tools/call": lambda m: None})
    with connect(server) as s:
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                s.call_tool("slow", timeout=10)
        finally:
            timer.join()
        call = server.expect("tools/call")
        assert server.expect("notifications/cancelled")["params"]["requestId"] == call["id"]
        # the session is still usable
        server.handlers["ping"] = lambda m: {}
        s.ping()


def test_progress_resets_timeout_up_to_a_hard_maximum(no_leaks):
    def slow_with_progress(message):
        token = message["params"]["_meta"]["progressToken"]
        for i in range(4):
            server.notify(
                "notifications/progress", {"progressToken": token, "progress": i, "total": 4}
            )
            done.wait(0.2)
        return {"content": [{"type": "text", "text": "done"}]}

    done = threading.Event()
    server = FakeServer(handlers={"tools/call": slow_with_progress})
    seen = []
    with connect(server) as s:
        result = s.call_tool(
            "t", timeout=0.5, on_progress=seen.append, reset_timeout_on_progress=True, max_timeout=5
        )
        assert result.content[0].text == "done"
        assert [p.progress for p in seen] == [0, 1, 2, 3] and seen[0].total == 4


def test_dead_transport_fails_every_pending_call_at_once(no_leaks):
    server = FakeServer(handlers={"tools/call": lambda m: None})
    with connect(server) as s:
        futures = [s.submit_call_tool("t") for _ in range(5)]
        for _ in futures:
            server.expect("tools/call")
        server.crash()
        for future in futures:
            with pytest.raises(TransportError, match="crashed"):
                future.result(timeout=5)
        with pytest.raises(mcpsync.MCPSyncError):
            s.call_tool("t")


def test_stray_response_is_reported_not_swallowed(no_leaks):
    server = FakeServer(handlers={"ping": lambda m: {}})
    with connect(server) as s:
        server.reply(424242, {})
        s.ping()  # ordered after the stray response on the same stream
        assert any("424242" in str(e) for e in s.connection.protocol_errors)


def test_log_messages_go_to_logging(caplog, no_leaks):
    server = FakeServer(capabilities={"logging": {}}, handlers={"ping": lambda m: {}})
    with caplog.at_level("DEBUG", logger="mcpsync.server"), connect(server, name="fk") as s:
        server.notify(
            "notifications/message", {"level": "error", "logger": "db", "data": "disk full"}
        )
        s.ping()
        s.close()
    records = [r for r in caplog.records if r.name == "mcpsync.server.fk.db"]
    assert records and records[0].levelname == "ERROR" and records[0].getMessage() == "disk full"


def test_calls_after_close_raise_session_closed(no_leaks):
    s = connect(FakeServer())
    s.close()
    s.close()  # idempotent
    with pytest.raises(SessionClosed):
        s.ping()


def test_a_transport_reported_lost_reply_fails_its_call_at_once(no_leaks):
    class Lost(mcpsync.TransportError):
        def __init__(self, request_id):
            super().__init__(f"reply to {request_id} lost")
            self.request_id = request_id

    server = FakeServer(handlers={"tools/call": lambda m: None})
    with connect(server) as s:
        future = s.submit_call_tool("t", timeout=30)
        call = server.expect("tools/call")
        s.connection._on_wire_error(Lost(call["id"]))  # as the HTTP transport reports it
        with pytest.raises(Lost):
            future.result(timeout=5)
        server.handlers["ping"] = lambda m: {}
        s.ping()


def test_tool_results_are_plain_mcp_types_models_for_every_content_block(no_leaks):
    import mcp_types

    blocks = [
        {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5}},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
        {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///a", "name": "a"},
        {"type": "resource", "resource": {"uri": "file:///b", "text": "b"}},
        {"type": "resource", "resource": {"uri": "file:///c", "blob": "aGk="}},
    ]
    raw = {"content": blocks, "structuredContent": {"n": 1}, "isError": False, "_meta": {"k": 1}}
    server = FakeServer(handlers={"tools/call": lambda m: raw})
    with connect(server) as s:
        result = s.call_tool("t")
    assert type(result) is mcp_types.CallToolResult
    assert result == mcp_types.CallToolResult.model_validate(raw)
    assert [type(b).__name__ for b in result.content] == [
        "TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource",
        "EmbeddedResource",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ([{"type": "text"}], "content.0"),
        ([{"type": "text", "text": "ok"}, {"type": "video", "url": "x"}], "content.1"),
        ("not a list", "content"),
    ],
)
def test_an_invalid_tool_result_says_where(content, where, no_leaks):
    server = FakeServer(handlers={"tools/call": lambda m: {"content": content}})
    with connect(server) as s:
        with pytest.raises(ProtocolError, match="invalid CallToolResult") as info:
            s.call_tool("t")
        assert where in str(info.value)


def test_an_invalid_tool_result_with_valid_blocks_names_the_field(no_leaks):
    # The blocks validate, the model refuses another field: the error names that field (and
    # no validated block model), for call and submit.
    raw = {"content": [{"type": "text", "text": "ok"}], "isError": "neither"}
    server = FakeServer(handlers={"tools/call": lambda m: dict(raw)})
    with connect(server) as s:
        for attempt in (lambda: s.call_tool("t"), lambda: s.submit_call_tool("t").result(10)):
            with pytest.raises(ProtocolError, match="invalid CallToolResult") as info:
                attempt()
            text = str(info.value)
            assert "isError" in text
            assert "neither" in text and "TextContent(" not in text
