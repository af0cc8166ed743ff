"""OpenAI Chat Completions and Responses: tool definitions, strict mode, dispatch.

Definitions and results are checked against the ``openai`` package's own types
(TypedDict params followed key by key, pydantic models validated), offline.
"""

from __future__ import annotations

import json
import re
import threading

import jsonschema
import pytest
from adapters_support import app_server, fits
from openai.types.chat import (
    ChatCompletionFunctionToolParam,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import (
    FunctionToolParam,
    ResponseFunctionToolCall,
    ResponseInputItemParam,
)
from openai.types.shared import FunctionDefinition
from servers.launch import demo_argv, everything_stdio_argv, sdk_stdio_argv

import mcpsync
from mcpsync import adapters

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

COMPLEX = {
    "name": "book.flight/with-a-name-that-is-far-too-long-for-any-provider-to-accept-as-is",
    "description": "Book a flight.",
    "inputSchema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "Airport": {
                "type": "object",
                "properties": {"code": {"type": "string", "minLength": 3, "maxLength": 3}},
                "required": ["code"],
            }
        },
        "properties": {
            "origin": {"$ref": "#/$defs/Airport"},
            "destination": {"$ref": "#/$defs/Airport"},
            "seats": {"type": "integer", "minimum": 1, "default": 1},
            "class": {"type": "string", "enum": ["economy", "business"]},
            "note": {"type": ["string", "null"]},
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "format": "uri"},
            "pay": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "mode": {"const": "fast"},
        },
        "required": ["origin", "destination"],
    },
}
FREEFORM = {
    "name": "store",
    "description": "Store any JSON.",
    "inputSchema": {
        "type": "object",
        "properties": {"data": {"type": "object", "additionalProperties": True}},
        "required": ["data"],
    },
}


def chat_call(call_id: str, name: str, arguments: str) -> ChatCompletionMessageFunctionToolCall:
    return ChatCompletionMessageFunctionToolCall.model_validate(
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    )


def responses_call(call_id: str, name: str, arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall.model_validate(
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}
    )


@pytest.fixture(scope="module")
def everything():
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30) as s:
        yield s


@pytest.fixture(scope="module")
def sdk():
    with mcpsync.Session.connect(sdk_stdio_argv(), timeout=30) as s:
        yield s


@pytest.fixture
def fake():
    server = app_server([COMPLEX, FREEFORM])
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        yield s, server


def check_chat_tools(tools: list, source) -> None:
    assert tools
    for tool in tools:
        fits(tool, ChatCompletionFunctionToolParam)
        FunctionDefinition.model_validate(tool["function"])
        assert NAME.match(tool["function"]["name"])
        assert tool["function"]["parameters"]["type"] == "object"
    names = {t.name: t for t in source.list_tools()}
    for tool in tools:
        original = names.get(tool["function"]["name"])
        if original is not None:
            assert tool["function"]["description"] == (original.description or "")


@pytest.mark.real
def test_chat_tools_from_server_everything_fit_the_sdk_types(everything):
    tools = adapters.to_openai(everything)
    check_chat_tools(tools, everything)
    by_name = {t["function"]["name"]: t["function"] for t in tools}
    assert by_name["get-sum"]["parameters"]["required"] == ["a", "b"]
    assert "$schema" not in by_name["get-sum"]["parameters"]
    assert "strict" not in by_name["get-sum"]


@pytest.mark.real
def test_responses_tools_from_the_sdk_server_fit_the_sdk_types(sdk):
    tools = adapters.to_openai(sdk, api="responses")
    assert [t["name"] for t in tools] == [t.name for t in sdk.list_tools()]
    for tool in tools:
        fits(tool, FunctionToolParam)
        assert tool["strict"] is False and tool["type"] == "function"
    add = next(t for t in tools if t["name"] == "add")
    assert add["description"] == "Add two numbers (structured output)."


def test_the_demo_server_tools_fit_both_apis():
    with mcpsync.Session.connect(demo_argv(), timeout=30) as s:
        check_chat_tools(adapters.to_openai(s, strict=True), s)
        for tool in adapters.to_openai(s, api="responses", strict=True):
            fits(tool, FunctionToolParam)
            assert tool["strict"] is True


def _walk_objects(schema):
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "object" in (schema.get("type") or []):
            yield schema
        for value in schema.values():
            yield from _walk_objects(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk_objects(value)


def test_strict_mode_rewrites_the_schema_by_the_rules(fake):
    session, _ = fake
    tools = adapters.to_openai(session, api="responses", strict=True)
    by_desc = {t["description"]: t for t in tools}
    book = by_desc["Book a flight."]
    fits(book, FunctionToolParam)
    assert book["strict"] is True
    params = book["parameters"]
    for obj in _walk_objects(params):
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    text = json.dumps(params)
    for word in ("$ref", "$defs", "$schema", "minLength", '"default"', "oneOf", '"uri"'):
        assert word not in text, word
    props = params["properties"]
    assert props["origin"]["properties"]["code"] == {"type": "string"}
    assert props["seats"]["type"] == ["integer", "null"]  # optional: nullable
    assert props["seats"]["description"] == "default: 1"  # the dropped default, in words
    assert props["class"]["enum"] == ["economy", "business", None]
    assert props["note"]["type"] == ["string", "null"]
    assert props["when"]["format"] == "date-time"
    assert props["pay"]["anyOf"][-1] == {"type": "null"}
    assert props["mode"] == {"anyOf": [{"const": "fast"}, {"type": "null"}]}
    # what a strict model sends validates, and so does the original's minimal call
    sent = {"origin": {"code": "AMS"}, "destination": {"code": "SFO"}, "seats": None,
            "class": None, "note": None, "when": None, "site": None, "pay": 12, "mode": None}  # fmt: skip
    jsonschema.validate(sent, params)
    # a schema strict mode cannot express keeps its tool non-strict, unchanged
    store = by_desc["Store any JSON."]
    assert store["strict"] is False
    assert store["parameters"]["properties"]["data"]["additionalProperties"] is True


def test_a_long_name_maps_reversibly_and_strict_nulls_are_dropped(fake):
    session, server = fake
    tools = adapters.to_openai(session, strict=True)
    name = next(
        t["function"]["name"] for t in tools if t["function"]["description"] == "Book a flight."
    )
    assert NAME.match(name) and name.startswith("book_flight_with")
    assert adapters.to_openai(session, strict=True)[0]["function"]["name"] == name  # stable
    args = {"origin": {"code": "AMS"}, "destination": {"code": "SFO"}, "seats": None,
            "class": None, "note": None, "when": None, "site": None, "pay": None, "mode": None}  # fmt: skip
    message = adapters.dispatch(session, chat_call("call_1", name, json.dumps(args)))
    fits(message, ChatCompletionToolMessageParam)
    assert message["tool_call_id"] == "call_1"
    assert server.calls[-1]["name"] == COMPLEX["name"]
    # optional nulls the original schema does not allow are gone; "note" allows null
    assert server.calls[-1]["arguments"] == {
        "origin": {"code": "AMS"},
        "destination": {"code": "SFO"},
        "note": None,
    }


def test_malformed_calls_become_results_the_model_reads(fake):
    session, server = fake
    before = len(server.calls)
    out = adapters.dispatch(
        session,
        [
            chat_call("c1", "store", '{"data": '),  # truncated JSON
            chat_call("c2", "no_such_tool", "{}"),
            chat_call("c3", "store", "[1, 2]"),  # not an object
            chat_call("c4", "store", '{"data": {"k": 1}}'),
        ],
    )
    assert [m["tool_call_id"] for m in out] == ["c1", "c2", "c3", "c4"]
    for m in out:
        fits(m, ChatCompletionToolMessageParam)
    assert out[0]["content"].startswith("Error: ") and "not valid JSON" in out[0]["content"]
    assert "unknown tool 'no_such_tool'" in out[1]["content"] and "store" in out[1]["content"]
    assert "must be a JSON object" in out[2]["content"]
    assert json.loads(out[3]["content"]) == {"data": {"k": 1}}
    assert len(server.calls) == before + 1  # only the good one reached the server


def test_a_turn_of_calls_runs_concurrently_results_in_order():
    arrived = threading.Barrier(3, timeout=10)

    def slow(params):
        arrived.wait()  # all three must be in flight at once, or this breaks
        return {"content": [{"type": "text", "text": params["arguments"]["message"]}]}

    echo = {
        "name": "echo",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
    }
    server = app_server([echo], {"echo": slow})
    with mcpsync.Session.connect(server.transport, timeout=15) as s:
        message = ChatCompletionMessage.model_validate(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "echo", "arguments": json.dumps({"message": f"m{i}"})},
                    }
                    for i in range(3)
                ],  # fmt: skip
            }
        )
        out = adapters.dispatch(s, message)
    assert [(m["tool_call_id"], m["content"]) for m in out] == [
        ("c0", "m0"),
        ("c1", "m1"),
        ("c2", "m2"),
    ]
    assert not arrived.broken


@pytest.mark.real
def test_chat_results_from_server_everything_images_follow_as_a_user_message(everything):
    out = adapters.dispatch(
        everything,
        [chat_call("c1", "get-tiny-image", "{}"), chat_call("c2", "get-sum", '{"a": 2, "b": 3}')],
    )
    assert [m["role"] for m in out] == ["tool", "tool", "user"]
    fits(out[0], ChatCompletionToolMessageParam)
    fits(out[2], ChatCompletionUserMessageParam)
    assert "[image (image/png" in out[0]["content"] and "next user message" in out[0]["content"]
    assert "5" in out[1]["content"]
    image = out[2]["content"][1]
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith(
        "data:image/png;base64,iVBOR"
    )
    # one call: just its tool message, the image described
    single = adapters.dispatch(everything, chat_call("c3", "get-tiny-image", "{}"))
    assert single["role"] == "tool" and "[image (image/png" in single["content"]


@pytest.mark.real
def test_responses_results_carry_images_resources_and_structured_content(everything):
    calls = [
        responses_call("r1", "get-tiny-image", "{}"),
        responses_call("r2", "get-resource-reference", '{"resourceType": "Text", "resourceId": 2}'),
        responses_call("r3", "get-structured-content", '{"location": "Chicago"}'),
        responses_call("r4", "get-resource-links", "{}"),
    ]
    out = adapters.dispatch(everything, calls)
    for item in out:
        fits(item, ResponseInputItemParam)
        assert item["type"] == "function_call_output"
    assert [i["call_id"] for i in out] == ["r1", "r2", "r3", "r4"]
    kinds = [part["type"] for part in out[0]["output"]]
    assert "input_image" in kinds and "input_text" in kinds
    assert (
        "[resource demo://resource/dynamic/text/2 (text/plain)]\nResource 2: " in out[1]["output"]
    )
    assert set(json.loads(out[2]["output"])) == {"temperature", "conditions", "humidity"}
    assert out[3]["output"].count("[resource link:") == 3  # the default count


@pytest.mark.real
def test_strict_optional_null_reaches_the_server_as_absent(everything):
    # strict mode: the model must send "count": null; the server then applies its default (3)
    tools = adapters.to_openai(everything, api="responses", strict=True)
    links = next(t for t in tools if t["name"] == "get-resource-links")
    assert links["parameters"]["properties"]["count"]["type"] == ["number", "null"]
    out = adapters.dispatch(
        everything, responses_call("r", "get-resource-links", '{"count": null}')
    )
    assert out["output"].count("[resource link:") == 3


@pytest.mark.real
def test_is_error_from_the_sdk_server_is_marked(sdk):
    (message,) = adapters.dispatch(sdk, [chat_call("c1", "fail", "{}")])
    assert message["content"] == "Error: Error executing tool fail: this tool always fails"
    item = adapters.dispatch(sdk, responses_call("r1", "fail", "{}"))
    assert item["output"].startswith("Error: ") and "always fails" in item["output"]
    ok = adapters.dispatch(sdk, responses_call("r2", "add", '{"a": 1, "b": 2.5}'))
    assert json.loads(ok["output"]) == {"sum": 3.5}


def test_the_type_check_used_here_refuses_wrong_shapes():
    from adapters_support import Misfit

    with pytest.raises(Misfit, match="bogus"):
        fits(
            {"type": "function", "function": {"name": "x", "bogus": 1}},
            ChatCompletionFunctionToolParam,
        )
    with pytest.raises(Misfit, match="tool_call_id"):
        fits({"role": "tool", "content": "x"}, ChatCompletionToolMessageParam)
    with pytest.raises(Misfit):
        fits(
            {"type": "function_call_output", "call_id": "a", "output": [{"type": "image"}]},
            ResponseInputItemParam,
        )


def test_import_mcpsync_does_not_load_the_adapters():
    import subprocess
    import sys

    code = (
        "import sys, mcpsync\n"
        "assert 'mcpsync.adapters' not in sys.modules\n"
        "from mcpsync import adapters\n"
        "assert adapters.to_openai is adapters.openai.to_openai\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic', 'google')]\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
