"""The demo server (mcpsync/demo_server/) speaks MCP: raw JSON lines, and the official SDK client."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from typing import Any

import pytest
from servers.launch import StdioPeer, demo_argv, faulty_argv

from mcpsync.demo_server import SUPPORTED_VERSIONS

ALL_CAPS = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}


@pytest.fixture
def peer() -> Any:
    with StdioPeer(demo_argv()) as p:
        p.initialize(capabilities=ALL_CAPS)
        yield p


def call(
    peer: StdioPeer, name: str, arguments: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    return peer.result("tools/call", {"name": name, "arguments": arguments or {}}, **kw)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


# ---------------------------------------------------------------- lifecycle
@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_initialize_answers_each_supported_version(version: str) -> None:
    with StdioPeer(demo_argv()) as p:
        result = p.initialize(version)
        assert result["protocolVersion"] == version
        caps = result["capabilities"]
        assert caps["tools"] == {"listChanged": True}
        assert caps["resources"] == {"subscribe": True, "listChanged": True}
        assert caps["prompts"] == {"listChanged": True} and caps["logging"] == {}
        assert ("completions" in caps) == (version >= "2025-03-26")
        assert result["serverInfo"]["name"] == "mcpsync-demo"


def test_unknown_version_gets_the_newest() -> None:
    with StdioPeer(demo_argv()) as p:
        assert p.initialize("1999-01-01")["protocolVersion"] == SUPPORTED_VERSIONS[-1]


def test_requests_before_initialize_are_rejected_but_ping_works() -> None:
    with StdioPeer(demo_argv()) as p:
        assert p.result("ping") == {}
        reply = p.request("tools/list")
        assert reply["error"]["code"] == -32600
        p.initialize()
        assert p.request("initialize", {"protocolVersion": "2025-11-25"})["error"]["code"] == -32600


def test_eof_on_stdin_exits_promptly() -> None:
    with StdioPeer(demo_argv()) as p:
        p.initialize()
        started = time.monotonic()
        p.close_stdin()
        assert p.wait(5) == 0
        assert time.monotonic() - started < 3
        assert "ready on stdio" in p.stderr_text()


# ---------------------------------------------------------------- errors
def test_json_rpc_errors(peer: StdioPeer) -> None:
    assert peer.request("no/such/method")["error"]["code"] == -32601
    assert peer.request("tools/call", {"name": "nope"})["error"]["code"] == -32602
    assert peer.request("tools/call", {"name": "echo", "arguments": [1]})["error"]["code"] == -32602
    assert peer.request("tools/list", {"cursor": "bogus"})["error"]["code"] == -32602
    assert peer.request("prompts/get", {"name": "greet"})["error"]["code"] == -32602
    assert peer.request("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
    missing = peer.request("resources/read", {"uri": "demo://missing"})
    assert missing["error"]["code"] == -32002 and missing["error"]["data"] == {
        "uri": "demo://missing"
    }
    peer.send_raw(b"{not json\n")
    assert peer.wait_for(lambda m: m.get("error", {}).get("code") == -32700)["id"] is None
    peer.send_raw(b"[]\n")
    assert peer.wait_for(lambda m: m.get("error", {}).get("code") == -32600)["id"] is None
    peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}})
    peer.send({"jsonrpc": "2.0", "id": {"odd": 1}, "result": {}})  # a response nobody asked for
    assert peer.result("ping") == {}  # still serving


# ---------------------------------------------------------------- tools
def test_tools_list_paginates_with_page_size() -> None:
    with StdioPeer(demo_argv("--page-size", "3")) as p:
        p.initialize()
        names, cursor, pages = [], None, 0
        while True:
            page = p.result("tools/list", {"cursor": cursor} if cursor else {})
            assert len(page["tools"]) <= 3
            names += [t["name"] for t in page["tools"]]
            pages += 1
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        expected = {"echo", "add", "long_running", "sample", "elicit", "list_roots", "fail", "big"}
        expected |= {"add_tool", "log", "touch_resource"}
        assert set(names) == expected and len(names) == len(expected)
        assert pages == -(-len(expected) // 3)


def test_echo_add_fail_big(peer: StdioPeer) -> None:
    assert text_of(call(peer, "echo", {"message": "héllo"})) == "héllo"
    added = call(peer, "add", {"a": 2, "b": 3.5})
    assert added["structuredContent"] == {"sum": 5.5} and json.loads(text_of(added)) == 5.5
    assert call(peer, "add", {"a": "x", "b": 1})["isError"] is True
    failed = call(peer, "fail")
    assert failed["isError"] is True and failed["content"][0]["type"] == "text"
    assert len(text_of(call(peer, "big", {"size_bytes": 1_000_000}))) == 1_000_000
    assert text_of(call(peer, "big", {"size_bytes": 0})) == ""


def test_output_schema_and_structured_content_follow_the_version() -> None:
    with StdioPeer(demo_argv()) as p:
        p.initialize("2025-03-26")
        add = next(t for t in p.result("tools/list")["tools"] if t["name"] == "add")
        assert "outputSchema" not in add and "title" not in add
        assert "structuredContent" not in call(p, "add", {"a": 1, "b": 1})
    with StdioPeer(demo_argv()) as p:
        p.initialize("2025-06-18")
        add = next(t for t in p.result("tools/list")["tools"] if t["name"] == "add")
        assert add["outputSchema"]["properties"]["sum"] == {"type": "number"}


def test_long_running_reports_progress_in_order(peer: StdioPeer) -> None:
    rid = peer.send_request(
        "tools/call",
        {
            "name": "long_running",
            "arguments": {"duration": 0.2, "steps": 4},
            "_meta": {"progressToken": "tok"},
        },
    )
    reply = peer.response(rid)
    assert "long_running done" in text_of(reply["result"])
    progress = [m["params"] for m in peer.drain() if m.get("method") == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3, 4]
    assert all(p["progressToken"] == "tok" and p["total"] == 4 for p in progress)


def test_cancelled_request_gets_no_response_and_others_keep_flowing(peer: StdioPeer) -> None:
    rid = peer.send_request(
        "tools/call",
        {
            "name": "long_running",
            "arguments": {"duration": 30, "steps": 30},
            "_meta": {"progressToken": 7},
        },
    )
    peer.notification("notifications/progress")  # it is running
    assert text_of(call(peer, "echo", {"message": "meanwhile"})) == "meanwhile"
    peer.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
    assert peer.result("ping") == {}
    # EOF makes the server join its workers and exit: everything it will ever say is then on stdout
    peer.close_stdin()
    assert peer.wait(10) == 0
    leftovers = peer.read_to_eof()
    assert not [m for m in leftovers if m.get("id") == rid]


def test_sampling_round_trip_is_concurrent_with_other_requests(peer: StdioPeer) -> None:
    rid = peer.send_request("tools/call", {"name": "sample", "arguments": {"prompt": "Say hi"}})
    sampling = peer.server_request("sampling/createMessage")
    assert sampling["params"]["messages"][0]["content"] == {"type": "text", "text": "Say hi"}
    assert sampling["params"]["maxTokens"] == 100
    # while the server waits for our answer, it still serves other requests
    assert text_of(call(peer, "echo", {"message": "still here"})) == "still here"
    peer.respond(
        sampling["id"],
        {"role": "assistant", "content": {"type": "text", "text": "hi!"}, "model": "fake"},
    )
    assert text_of(peer.response(rid)["result"]) == "hi!"


def test_sampling_error_from_client_becomes_tool_error(peer: StdioPeer) -> None:
    rid = peer.send_request("tools/call", {"name": "sample", "arguments": {"prompt": "x"}})
    sampling = peer.server_request("sampling/createMessage")
    peer.send(
        {"jsonrpc": "2.0", "id": sampling["id"], "error": {"code": -1, "message": "user declined"}}
    )
    result = peer.response(rid)["result"]
    assert result["isError"] is True and "user declined" in text_of(result)


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_elicitation_form(version: str) -> None:
    with StdioPeer(demo_argv()) as p:
        p.initialize(version, ALL_CAPS)
        rid = p.send_request(
            "tools/call", {"name": "elicit", "arguments": {"message": "Who are you?"}}
        )
        request = p.server_request("elicitation/create")
        params = request["params"]
        assert params["message"] == "Who are you?"
        assert params["requestedSchema"]["type"] == "object"
        assert params.get("mode") == ("form" if version >= "2025-11-25" else None)
        p.respond(request["id"], {"action": "accept", "content": {"name": "Ada", "confirm": True}})
        result = p.response(rid)["result"]
        expected = {"action": "accept", "content": {"name": "Ada", "confirm": True}}
        assert json.loads(text_of(result)) == expected and result["structuredContent"] == expected


def test_list_roots(peer: StdioPeer) -> None:
    rid = peer.send_request("tools/call", {"name": "list_roots"})
    request = peer.server_request("roots/list")
    roots = [{"uri": "file:///tmp/project", "name": "project"}]
    peer.respond(request["id"], {"roots": roots})
    assert json.loads(text_of(peer.response(rid)["result"])) == roots


def test_reverse_requests_need_client_capabilities() -> None:
    with StdioPeer(demo_argv()) as p:
        p.initialize(capabilities={})
        for tool, args in (
            ("sample", {"prompt": "x"}),
            ("elicit", {"message": "x"}),
            ("list_roots", {}),
        ):
            result = call(p, tool, args)
            assert result["isError"] is True and "capability" in text_of(result)
        assert not [m for m in p.drain() if "method" in m and "id" in m]  # no request was sent


def test_add_tool_notifies_list_changed(peer: StdioPeer) -> None:
    result = call(peer, "add_tool", {"name": "dyn_tool"})
    assert not result.get("isError")
    peer.notification("notifications/tools/list_changed")
    assert "dyn_tool" in [t["name"] for t in peer.result("tools/list")["tools"]]
    assert text_of(call(peer, "dyn_tool", {"x": 1})) == 'dyn_tool called with {"x": 1}'
    assert call(peer, "add_tool", {"name": "dyn_tool"})["isError"] is True


def test_logging_respects_set_level(peer: StdioPeer) -> None:
    call(peer, "log", {"level": "info", "message": "before"})
    first = peer.notification("notifications/message")["params"]
    assert first == {"level": "info", "logger": "demo", "data": "before"}
    assert peer.result("logging/setLevel", {"level": "warning"}) == {}
    assert "suppressed" in text_of(call(peer, "log", {"level": "info", "message": "hidden"}))
    call(peer, "log", {"level": "error", "message": "shown"})
    shown = peer.notification("notifications/message")["params"]
    assert shown["level"] == "error" and shown["data"] == "shown"
    assert not [m for m in peer.drain() if m.get("method") == "notifications/message"]


# ---------------------------------------------------------------- resources, prompts, completion
def test_resources_list_read_and_template(peer: StdioPeer) -> None:
    uris = {r["uri"] for r in peer.result("resources/list")["resources"]}
    assert {"demo://readme", "demo://data.json", "demo://bytes.bin", "demo://counter"} <= uris
    templates = peer.result("resources/templates/list")["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "demo://item/{id}"
    readme = peer.result("resources/read", {"uri": "demo://readme"})["contents"][0]
    assert readme["mimeType"] == "text/markdown" and readme["text"].startswith("# ")
    blob = peer.result("resources/read", {"uri": "demo://bytes.bin"})["contents"][0]
    assert base64.b64decode(blob["blob"]) == bytes(range(256))
    item = peer.result("resources/read", {"uri": "demo://item/17"})["contents"][0]
    assert item == {"uri": "demo://item/17", "mimeType": "text/plain", "text": "item 17"}


def test_subscribe_touch_unsubscribe(peer: StdioPeer) -> None:
    assert peer.result("resources/subscribe", {"uri": "demo://counter"}) == {}
    call(peer, "touch_resource", {"uri": "demo://counter"})
    assert peer.notification("notifications/resources/updated")["params"] == {
        "uri": "demo://counter"
    }
    assert peer.result("resources/read", {"uri": "demo://counter"})["contents"][0]["text"] == "1"
    assert peer.result("resources/unsubscribe", {"uri": "demo://counter"}) == {}
    # the notification is written before the tool's response, so its absence now is final
    assert "no subscribers" in text_of(call(peer, "touch_resource", {"uri": "demo://counter"}))
    assert not [m for m in peer.drain() if m.get("method") == "notifications/resources/updated"]
    assert call(peer, "touch_resource", {"uri": "demo://nope"})["isError"] is True
    assert peer.request("resources/subscribe", {"uri": "demo://nope"})["error"]["code"] == -32002


def test_prompts(peer: StdioPeer) -> None:
    prompts = peer.result("prompts/list")["prompts"]
    assert [p["name"] for p in prompts] == ["greet"]
    assert {"name": "name", "description": "Who to greet", "required": True} in prompts[0][
        "arguments"
    ]
    got = peer.result("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
    assert got["messages"][0]["role"] == "user" and "Ada" in got["messages"][0]["content"]["text"]
    assert peer.request("prompts/get", {"name": "nope", "arguments": {}})["error"]["code"] == -32602


def test_completion(peer: StdioPeer) -> None:
    prompt = peer.result(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "name", "value": "al"},
        },
    )["completion"]
    assert (
        prompt["values"] == ["Alan", "Alice"]
        and prompt["total"] == 2
        and prompt["hasMore"] is False
    )
    item = peer.result(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "demo://item/{id}"},
            "argument": {"name": "id", "value": "4"},
        },
    )["completion"]
    assert item["values"] == ["4", "40", "41", "42", "43", "44", "45", "46", "47", "48", "49"]
    bad = peer.request(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "x", "value": ""}},
    )
    assert bad["error"]["code"] == -32602


# ---------------------------------------------------------------- fault server (tests/servers)
def test_faulty_crash_on_call() -> None:
    with StdioPeer(faulty_argv("--crash-on-call", "echo")) as p:
        p.initialize()
        p.send_request("tools/call", {"name": "echo", "arguments": {"message": "x"}})
        assert p.wait(10) == 3
        p.read_to_eof()
        assert "crashing on purpose" in p.stderr_text()


def test_faulty_exit_before_init_and_garbage() -> None:
    with StdioPeer(faulty_argv("--exit-before-init")) as p:
        assert p.wait(10) == 1
    with StdioPeer(faulty_argv("--garbage-stdout")) as p:
        assert p.initialize()["serverInfo"]["name"] == "mcpsync-demo"
        assert p.garbage and p.garbage[0].startswith(b"this line is not JSON")


def test_faulty_stderr_flood_never_answer_and_huge() -> None:
    with StdioPeer(faulty_argv("--stderr-flood", "2")) as p:
        p.initialize()  # only possible because StdioPeer drains stderr
        # the flood was written before the reply; the drain thread may still be reading it
        assert p.wait_stderr_bytes(2 * 1024 * 1024) >= 2 * 1024 * 1024
    with StdioPeer(faulty_argv("--never-answer")) as p:
        rid = p.send_request("ping")
        with pytest.raises(TimeoutError):
            p.response(rid, timeout=0.5)
    with StdioPeer(faulty_argv("--huge-message", "3")) as p:
        p.initialize()
        huge = call(p, "huge", timeout=30)
        assert len(text_of(huge)) == 3 * 1024 * 1024


# ---------------------------------------------------------------- the official SDK client
@pytest.mark.real
@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_official_sdk_client_drives_the_demo_server(mode: str) -> None:
    import mcp_types as types
    from mcp import Client, StdioServerParameters

    progress: list[float] = []
    logs: list[Any] = []

    async def sampling(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        text = params.messages[0].content.text  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo: {text}"),
            model="fake",
        )

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def scenario() -> None:
        server = StdioServerParameters(
            command=sys.executable, args=["-m", "mcpsync.demo_server", "--page-size", "4"]
        )
        async with Client(
            server,
            mode=mode,
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
            logging_callback=on_log,
            read_timeout_seconds=30,
        ) as client:
            assert client.protocol_version == SUPPORTED_VERSIONS[-1]
            assert client.server_info is not None and client.server_info.name == "mcpsync-demo"
            names: list[str] = []
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                names += [t.name for t in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert {"echo", "add", "long_running", "sample", "elicit", "touch_resource"} <= set(
                names
            )

            added = await client.call_tool("add", {"a": 20, "b": 22})
            assert added.structured_content == {"sum": 42}
            echo = await client.call_tool("echo", {"message": "sdk"})
            assert echo.content[0].text == "sdk"  # type: ignore[union-attr]
            failed = await client.call_tool("fail", {})
            assert failed.is_error

            done = await client.call_tool(
                "long_running", {"duration": 0.1, "steps": 3}, progress_callback=on_progress
            )
            assert not done.is_error and progress == [1, 2, 3]
            sampled = await client.call_tool("sample", {"prompt": "ping?"})
            assert sampled.content[0].text == "echo: ping?"  # type: ignore[union-attr]
            elicited = await client.call_tool("elicit", {"message": "name?"})
            assert elicited.structured_content == {"action": "accept", "content": {"name": "Grace"}}
            rooted = await client.call_tool("list_roots", {})
            assert json.loads(rooted.content[0].text)[0]["uri"] == "file:///work"  # type: ignore[union-attr]

            await client.set_logging_level("debug")
            await client.call_tool("log", {"level": "notice", "message": "from sdk test"})
            await client.send_ping()  # the log notification precedes this answer on the wire
            assert [(log.level, log.data) for log in logs] == [("notice", "from sdk test")]

            resources = await client.list_resources()
            assert "demo://readme" in {str(r.uri) for r in resources.resources}
            blob = await client.read_resource("demo://bytes.bin")
            assert base64.b64decode(blob.contents[0].blob) == bytes(range(256))  # type: ignore[union-attr]
            templates = await client.list_resource_templates()
            assert templates.resource_templates[0].uri_template == "demo://item/{id}"
            item = await client.read_resource("demo://item/3")
            assert item.contents[0].text == "item 3"  # type: ignore[union-attr]
            await client.subscribe_resource("demo://counter")

            prompt = await client.get_prompt("greet", {"name": "Linus"})
            assert "Linus" in prompt.messages[0].content.text  # type: ignore[union-attr]
            completion = await client.complete(
                types.PromptReference(type="ref/prompt", name="greet"),
                {"name": "name", "value": "B"},
            )
            assert completion.completion.values == ["Barbara", "Bob"]
            completion = await client.complete(
                types.ResourceTemplateReference(type="ref/resource", uri="demo://item/{id}"),
                {"name": "id", "value": "5"},
            )
            assert completion.completion.values == ["5", "50"]

    asyncio.run(asyncio.wait_for(scenario(), 60))
