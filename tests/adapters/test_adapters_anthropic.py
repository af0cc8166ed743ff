"""Anthropic Messages: ``tools`` and ``tool_result`` blocks, checked against the ``anthropic`` types."""

from __future__ import annotations

import json
import re

import pytest
from adapters_support import app_server, fits
from anthropic.types import (
    MessageParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
)
from servers.launch import demo_argv, everything_stdio_argv, sdk_stdio_argv

import mcpsync
from mcpsync import adapters

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
PDF = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"


def tool_use(block_id: str, name: str, arguments) -> ToolUseBlock:
    return ToolUseBlock.model_validate(
        {"type": "tool_use", "id": block_id, "name": name, "input": arguments}
    )


@pytest.fixture(scope="module")
def everything():
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30) as s:
        yield s


def check_tools(tools, session) -> None:
    originals = {t.name: t for t in session.list_tools()}
    assert len(tools) == len(originals)
    for tool in tools:
        fits(tool, ToolParam)

        assert NAME.match(tool["name"]) and tool["input_schema"]["type"] == "object"
        original = originals[tool["name"]]
        assert tool.get("description", "") == (original.description or "")
        expected = {k: v for k, v in original.input_schema.items() if k != "$schema"}
        expected.setdefault("properties", {})
        assert tool["input_schema"] == expected  # the JSON Schema is carried over as it is


@pytest.mark.real
def test_tools_from_server_everything_and_the_sdk_server_fit_the_sdk_types(everything):
    check_tools(adapters.to_anthropic(everything), everything)
    with mcpsync.Session.connect(sdk_stdio_argv(), timeout=30) as sdk:
        check_tools(adapters.to_anthropic(sdk), sdk)


def test_tools_from_the_demo_server_and_cache_control():
    with mcpsync.Session.connect(demo_argv(), timeout=30) as s:
        tools = adapters.to_anthropic(s, cache_control=True)
        check_tools([{k: v for k, v in t.items() if k != "cache_control"} for t in tools], s)
        fits(tools[-1], ToolParam)
        assert tools[-1]["cache_control"] == {"type": "ephemeral"}
        assert all("cache_control" not in t for t in tools[:-1])


@pytest.mark.real
def test_tool_results_map_every_content_kind(everything):
    blocks = adapters.dispatch(
        everything,
        [
            tool_use("t1", "get-tiny-image", {}),
            tool_use("t2", "get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
            tool_use("t3", "get-structured-content", {"location": "Chicago"}),
            tool_use("t4", "get-resource-links", {"count": 2}),
            tool_use("t5", "get-sum", {"a": 1, "b": 2}),
        ],
    )
    assert [b["tool_use_id"] for b in blocks] == ["t1", "t2", "t3", "t4", "t5"]
    for block in blocks:
        fits(block, ToolResultBlockParam)
        assert "is_error" not in block
    fits({"role": "user", "content": blocks}, MessageParam)
    image = next(c for c in blocks[0]["content"] if c["type"] == "image")
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"
    assert image["source"]["data"].startswith("iVBOR")
    text = blocks[1]["content"][1]["text"]
    assert text.startswith("[resource demo://resource/dynamic/text/2 (text/plain)]\nResource 2")
    assert json.loads(blocks[2]["content"][0]["text"])["humidity"] >= 0
    links = [c["text"] for c in blocks[3]["content"] if c["text"].startswith("[resource link:")]
    assert len(links) == 2
    assert blocks[4]["content"] == [{"type": "text", "text": "The sum of 1 and 2 is 3."}]


@pytest.mark.real
def test_is_error_and_a_bad_input_from_the_model():
    with mcpsync.Session.connect(sdk_stdio_argv(), timeout=30) as sdk:
        failed, unknown, not_object = adapters.dispatch(
            sdk,
            [
                tool_use("a", "fail", {}),
                tool_use("b", "fial", {}),
                {"type": "tool_use", "id": "c", "name": "echo", "input": "hello"},
            ],
        )
    for block in (failed, unknown, not_object):
        fits(block, ToolResultBlockParam)
        assert block["is_error"] is True
    assert "always fails" in failed["content"][0]["text"]
    assert "unknown tool 'fial'" in unknown["content"][0]["text"]
    assert "must be a JSON object" in not_object["content"][0]["text"]


def test_pdf_and_unreadable_images_and_a_message_with_text_blocks():
    tools = [{"name": "report", "inputSchema": {"type": "object"}}]
    result = {
        "content": [
            {"type": "text", "text": "Here it is."},
            {"type": "resource", "resource": {"uri": "file:///r.pdf", "mimeType": "application/pdf", "blob": PDF}},
            {"type": "image", "data": "Qk0=", "mimeType": "image/bmp"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        ]
    }  # fmt: skip
    server = app_server(tools, {"report": result})
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        # a whole assistant content list: text blocks are skipped, tool_use blocks run
        content = [{"type": "text", "text": "Let me look."}, tool_use("r1", "report", {})]
        (block,) = adapters.dispatch(s, content)
    fits(block, ToolResultBlockParam)
    kinds = [c["type"] for c in block["content"]]
    assert kinds == ["text", "document", "text", "text"]
    assert block["content"][1]["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": PDF,
    }
    assert "image/bmp" in block["content"][2]["text"] and "audio/wav" in block["content"][3]["text"]


# -- strict tool use ----------------------------------------------------------------------
FLIGHT = {
    "name": "book_flight",
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
            "when": {"type": "string", "format": "date-time"},
            "code": {"type": "string", "format": "iata"},
            "pay": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "legs": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "mode": {"const": "fast"},
        },
        "required": ["origin", "destination"],
    },
}
FREE = {
    "name": "store",
    "inputSchema": {
        "type": "object",
        "properties": {"data": {"type": "object", "additionalProperties": True}},
        "required": ["data"],
    },
}
NOARGS = {"name": "ping", "inputSchema": {"type": "object"}}


def _closed_everywhere(node) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, node
        for value in node.values():
            _closed_everywhere(value)
    elif isinstance(node, list):
        for value in node:
            _closed_everywhere(value)


def test_strict_tools_follow_the_strict_subset_and_keep_their_meaning():
    import jsonschema

    server = app_server([FLIGHT, FREE, NOARGS])
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        plain = {t["name"]: t for t in adapters.to_anthropic(s)}
        tools = {t["name"]: t for t in adapters.to_anthropic(s, strict=True)}
    for tool in tools.values():
        fits(tool, ToolParam)
    assert all("strict" not in t for t in plain.values())

    flight = tools["book_flight"]
    assert flight["strict"] is True
    schema = flight["input_schema"]
    _closed_everywhere(schema)
    assert "$defs" not in schema and "$ref" not in json.dumps(schema)  # inlined
    assert schema["required"] == ["origin", "destination"]  # optional ones stay optional
    props = schema["properties"]
    assert props["origin"]["properties"]["code"] == {
        "type": "string",
        "description": "minLength: 3, maxLength: 3",
    }
    assert props["seats"] == {"type": "integer", "description": "minimum: 1, default: 1"}
    assert props["class"]["enum"] == ["economy", "business"]
    assert props["when"]["format"] == "date-time"
    assert "format" not in props["code"] and "iata" in props["code"]["description"]
    assert props["pay"] == {"anyOf": [{"type": "string"}, {"type": "number"}]}
    assert props["legs"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "minItems: 2",
    }
    assert props["mode"] == {"const": "fast"}
    # what the tool accepts, the strict schema accepts too
    good = {"origin": {"code": "CDG"}, "destination": {"code": "JFK"}, "seats": 2, "pay": 3}
    jsonschema.validate(good, FLIGHT["inputSchema"])
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "extra": 1}, schema)  # closed

    # a free-form object cannot be strict: the tool is left as it is
    assert "strict" not in tools["store"] and tools["store"] == plain["store"]
    # no parameters: an empty closed object
    assert tools["ping"]["strict"] is True
    assert tools["ping"]["input_schema"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


@pytest.mark.real
def test_strict_tools_from_server_everything_fit_the_sdk_types(everything):
    import jsonschema

    tools = adapters.to_anthropic(everything, strict=True)
    originals = {t.name: t for t in everything.list_tools()}
    assert any(t.get("strict") for t in tools)
    for tool in tools:
        fits(tool, ToolParam)
        if tool.get("strict"):
            _closed_everywhere(tool["input_schema"])
            jsonschema.Draft202012Validator.check_schema(tool["input_schema"])
        else:  # left unchanged
            expected = {
                k: v for k, v in originals[tool["name"]].input_schema.items() if k != "$schema"
            }
            expected.setdefault("properties", {})
            assert tool["input_schema"] == expected
