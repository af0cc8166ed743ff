"""Gemini: function declarations in the OpenAPI subset, ``function_response`` parts,
checked with ``google.genai.types`` (pydantic models, ``extra="forbid"``)."""

from __future__ import annotations

import json
import re

import pytest
from adapters_support import app_server
from google.genai import types
from servers.launch import demo_argv, everything_stdio_argv, sdk_stdio_argv

import mcpsync
from mcpsync import adapters

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
# what the Gemini API's Schema accepts in function declarations (camelCase REST names)
SUBSET = {
    "type", "format", "title", "description", "nullable", "enum", "items", "properties",
    "required", "minItems", "maxItems", "minLength", "maxLength", "pattern", "minimum",
    "maximum", "minProperties", "maxProperties", "anyOf", "propertyOrdering", "default",
    "example",
}  # fmt: skip

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "definitions": {
        "Point": {
            "type": "object",
            "description": "A point.",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
        "Tree": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/definitions/Tree"}}},
        },
    },
    "properties": {
        "at": {"$ref": "#/definitions/Point"},
        "tree": {"$ref": "#/definitions/Tree"},
        "label": {"type": ["string", "null"], "maxLength": 10},
        "mode": {"const": "fast"},
        "level": {"type": "integer", "enum": [1, 2, 3], "description": "How hard."},
        "size": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "either": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "both": {
            "allOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "integer"}}},
            ]
        },  # fmt: skip
        "link": {"type": "string", "format": "uri", "examples": ["https://x.org"]},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "format": "double"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
        "extra": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["at", "mode"],
    "additionalProperties": False,
}


def keys_used(schema, found=None):
    found = set() if found is None else found
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key == "properties":
                for sub in value.values():
                    keys_used(sub, found)
            elif key in ("items",):
                keys_used(value, found)
            elif key == "anyOf":
                for sub in value:
                    keys_used(sub, found)
    return found


def check(declarations, session=None):
    assert declarations
    for decl in declarations:
        types.FunctionDeclaration.model_validate(decl)
        assert NAME.match(decl["name"])
        for key in ("parameters", "response"):
            if key in decl:
                assert keys_used(decl[key]) <= SUBSET, keys_used(decl[key]) - SUBSET
    types.Tool.model_validate({"function_declarations": declarations})
    if session is not None:
        originals = {t.name: t for t in session.list_tools()}
        for decl in declarations:
            assert decl.get("description", "") == (originals[decl["name"]].description or "")


def originals_output(session) -> dict:
    return {t.name: t.output_schema for t in session.list_tools() if t.output_schema}


@pytest.fixture(scope="module")
def everything():
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30) as s:
        yield s


@pytest.mark.real
def test_declarations_from_server_everything_and_the_sdk_server(everything):
    declarations = adapters.to_gemini(everything)
    check(declarations, everything)
    by_name = {d["name"]: d for d in declarations}
    assert "parameters" not in by_name["get-tiny-image"]  # no arguments: no parameters
    location = by_name["get-structured-content"]["parameters"]["properties"]["location"]
    assert location["format"] == "enum" and location["enum"] == [
        "New York",
        "Chicago",
        "Los Angeles",
    ]
    # a tool with an outputSchema says what its function_response holds
    output = originals_output(everything)["get-structured-content"]
    response = by_name["get-structured-content"]["response"]
    assert set(response["properties"]) == {"output", "error"}
    assert set(response["properties"]["output"]["properties"]) == set(output["properties"])
    assert all(
        "response" not in d for n, d in by_name.items() if n not in originals_output(everything)
    )
    raw = {d["name"]: d for d in adapters.to_gemini(everything, json_schema=True)}
    assert raw["get-structured-content"]["response_json_schema"]["properties"]["output"] == {
        k: v for k, v in output.items() if k != "$schema"
    }
    types.FunctionDeclaration.model_validate(raw["get-structured-content"])
    gzip = by_name["gzip-file-as-resource"]["parameters"]["properties"]["data"]
    assert "format" not in gzip  # "uri" is not a Gemini format
    with mcpsync.Session.connect(sdk_stdio_argv(), timeout=30) as sdk:
        check(adapters.to_gemini(sdk), sdk)


def test_declarations_from_the_demo_server():
    with mcpsync.Session.connect(demo_argv(), timeout=30) as s:
        check(adapters.to_gemini(s), s)
        raw = adapters.to_gemini(s, json_schema=True)
        for decl in raw:
            types.FunctionDeclaration.model_validate(decl)
            assert decl["parameters_json_schema"]["type"] == "object"


def test_the_schema_conversion_rules():
    server = app_server([{"name": "draw/shape v2", "description": "Draw.", "inputSchema": SCHEMA}])
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        (decl,) = adapters.to_gemini(s)
    check([decl])
    assert NAME.match(decl["name"]) and decl["name"].startswith("draw_shape_v2_")
    p = decl["parameters"]
    props = p["properties"]
    assert p["required"] == ["at", "mode"] and p["propertyOrdering"] == list(SCHEMA["properties"])
    assert props["at"] == {
        "description": "A point.",
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
        "propertyOrdering": ["x", "y"],
    }
    # a recursive $ref is inlined once; the repeat keeps its type only
    children = props["tree"]["properties"]["children"]
    assert children == {"type": "array", "items": {"type": "object", "properties": {}}}
    assert props["label"] == {"maxLength": 10, "type": "string", "nullable": True}
    assert props["mode"] == {"type": "string", "enum": ["fast"], "format": "enum"}
    assert props["level"]["type"] == "integer" and "enum" not in props["level"]
    assert props["level"]["description"] == "How hard. (one of: 1, 2, 3)"
    assert props["size"] == {"type": "integer", "default": None, "nullable": True}
    assert props["either"] == {"anyOf": [{"type": "string"}, {"type": "number"}]}
    assert set(props["both"]["properties"]) == {"a", "b"} and props["both"]["required"] == ["a"]
    assert props["link"] == {"type": "string", "example": "https://x.org"}
    assert props["ratio"] == {"type": "number", "format": "double"}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "minItems": 1}
    assert props["extra"] == {"type": "object", "properties": {}}
    text = json.dumps(p)
    for word in (
        "$ref",
        "definitions",
        "additionalProperties",
        "exclusiveMinimum",
        "uniqueItems",
        "oneOf",
    ):
        assert word not in text, word


@pytest.mark.real
def test_function_calls_run_and_answer_with_function_responses(everything):
    calls = [
        types.FunctionCall(id="g1", name="get-sum", args={"a": 2, "b": 5}),
        types.Part(function_call=types.FunctionCall(name="get-tiny-image", args={})),
        {"name": "get-structured-content", "args": {"location": "Chicago"}},
        types.FunctionCall(name="no-such-tool", args={}),
        types.Part(text="thinking aloud"),  # not a call: skipped
    ]
    parts = adapters.dispatch(everything, calls)
    assert len(parts) == 4
    for part in parts:
        types.Part.model_validate(part)
    types.Content.model_validate({"role": "user", "parts": parts})
    first, image, structured, unknown = (p["function_response"] for p in parts)
    assert first["id"] == "g1" and first["name"] == "get-sum"
    assert first["response"] == {"output": "The sum of 2 and 5 is 7."}
    inline = image["parts"][0]["inline_data"]
    assert inline["mime_type"] == "image/png" and inline["data"][:4] == b"\x89PNG"
    assert "id" not in image
    assert set(structured["response"]["output"]) == {"temperature", "conditions", "humidity"}
    assert "unknown tool 'no-such-tool'" in unknown["response"]["error"]


def test_whole_floats_become_integers_and_errors_use_the_error_key():
    tools = [
        {
            "name": "big",
            "inputSchema": {
                "type": "object",
                "properties": {"n": {"type": "integer"}, "x": {"type": "number"}},
            },
        }
    ]
    server = app_server(tools)
    failing = app_server(
        tools, {"big": {"content": [{"type": "text", "text": "too big"}], "isError": True}}
    )
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        part = adapters.dispatch(s, types.FunctionCall(name="big", args={"n": 3.0, "x": 3.0}))
        assert server.calls[-1]["arguments"] == {"n": 3, "x": 3.0}
        assert isinstance(server.calls[-1]["arguments"]["n"], int)
        assert part["function_response"]["response"] == {"output": '{"n": 3, "x": 3.0}'}
    with mcpsync.Session.connect(failing.transport, timeout=10) as s:
        part = adapters.dispatch(s, {"function_call": {"name": "big", "args": {"n": 1}}})
        types.Part.model_validate(part)
        assert part["function_response"]["response"] == {"error": "too big"}
