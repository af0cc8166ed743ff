"""Tool filters: globs on Session.connect, Host, config entries and the CLI; annotation and
app-only filters in the adapters."""

from __future__ import annotations

import json

import pytest
from adapters_support import app_server
from servers.launch import demo_argv, everything_stdio_argv, sdk_stdio_argv

import mcpsync
from mcpsync import adapters, cli
from mcpsync.errors import ConfigError
from mcpsync.filters import (
    NameFilter,
    ToolExcluded,
    ToolFilter,
    is_destructive,
    is_model_visible,
    is_read_only,
)

TOOLS = [
    {"name": "read_file", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "write_file", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": False}},
    {"name": "delete_file", "inputSchema": {"type": "object"}},  # MCP defaults: destructive
    {"name": "show_chart", "inputSchema": {"type": "object"},
     "_meta": {"ui": {"resourceUri": "ui://chart", "visibility": ["app"]}}},
    {"name": "chart_data", "inputSchema": {"type": "object"},
     "_meta": {"ui": {"resourceUri": "ui://chart", "visibility": ["model", "app"]}}},
]  # fmt: skip


def names(items) -> list[str]:
    return [getattr(i, "name", None) or i["name"] for i in items]


# --------------------------------------------------------------------------- rules


def test_annotation_defaults_follow_the_spec():
    by_name = {t["name"]: t for t in TOOLS}
    assert [is_read_only(by_name[n]) for n in ("read_file", "write_file", "delete_file")] == [
        True,
        False,
        False,
    ]
    assert [is_destructive(by_name[n]) for n in ("read_file", "write_file", "delete_file")] == [
        False,
        False,
        True,
    ]
    assert not is_model_visible(by_name["show_chart"]) and is_model_visible(by_name["chart_data"])
    assert is_model_visible(by_name["read_file"])


def test_tool_filter_rules():
    assert names(ToolFilter().apply(TOOLS)) == [
        "read_file",
        "write_file",
        "delete_file",
        "chart_data",
    ]
    assert names(ToolFilter(app_only=True).apply(TOOLS)) == names(TOOLS)
    assert names(ToolFilter.of(include="*_file", exclude=["delete_*"]).apply(TOOLS)) == [
        "read_file",
        "write_file",
    ]
    assert names(ToolFilter(read_only=True).apply(TOOLS)) == ["read_file"]
    assert names(ToolFilter(destructive=False).apply(TOOLS)) == ["read_file", "write_file"]
    assert names(ToolFilter(destructive=True).apply(TOOLS)) == ["delete_file", "chart_data"]
    assert NameFilter.of() is None
    with pytest.raises(ConfigError, match="include_tools"):
        NameFilter.of(include=[3])
    with pytest.raises(ConfigError):
        NameFilter.of(exclude={"a": 1})


# --------------------------------------------------------------------------- Session.connect


def test_session_connect_filters_list_and_refuses_calls_without_sending():
    server = app_server(TOOLS)
    with mcpsync.Session.connect(
        server.transport, include_tools=["*_file", "chart_*"], exclude_tools="delete_*"
    ) as s:
        assert names(s.list_tools()) == ["read_file", "write_file", "chart_data"]
        assert names(s.list_tools(refresh=True)) == ["read_file", "write_file", "chart_data"]
        assert names(s.submit_list_tools().result(timeout=10)) == [
            "read_file",
            "write_file",
            "chart_data",
        ]
        with pytest.raises(ToolExcluded, match="delete_file.*exclude delete_"):
            s.call_tool("delete_file")
        with pytest.raises(ToolExcluded):
            s.submit_call_tool("show_chart")
        assert s.call_tool("read_file", {"path": "x"}).content[0].text == '{"path": "x"}'
    assert [c["name"] for c in server.calls] == ["read_file"]
    assert isinstance(ToolExcluded("x"), LookupError) and isinstance(
        ToolExcluded("x"), mcpsync.MCPSyncError
    )


def test_session_connect_rejects_a_wrong_filter_before_starting():
    with pytest.raises(ConfigError, match="exclude_tools"):
        mcpsync.Session.connect(demo_argv(), exclude_tools=[""])


@pytest.mark.real
def test_session_filters_on_the_sdk_server_modern_era():
    with mcpsync.Session.connect(
        sdk_stdio_argv(), timeout=30, exclude_tools=["elicit", "sample", "l*"]
    ) as s:
        assert s.era == "modern"
        assert names(s.list_tools()) == ["echo", "add", "fail", "touch_resource"]
        with pytest.raises(ToolExcluded):
            s.call_tool("log", {"level": "info", "message": "x"})
        assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"


# --------------------------------------------------------------------------- config, Host


def test_config_entry_keys():
    config = mcpsync.load_config(
        {
            "mcpServers": {
                "a": {"command": "x", "includeTools": ["e*", "add"], "excludeTools": "elicit"},
                "b": {"url": "http://127.0.0.1:1/mcp", "includeTools": "${TOOLS:-echo}"},
                "bad": {"command": "x", "excludeTools": [1]},
                "bad2": {"command": "x", "includeTools": {"a": 1}},
            }
        }  # fmt: skip
    )
    a, b = config["a"], config["b"]
    assert a.include_tools == ("e*", "add") and a.exclude_tools == ("elicit",)
    assert b.include_tools == ("echo",)
    kw = a.connect_kwargs()
    assert kw["include_tools"] == ["e*", "add"] and kw["exclude_tools"] == ["elicit"]
    assert "include_tools" not in mcpsync.parse_entry("c", {"command": "x"}).connect_kwargs()
    errors = {e.entry: e for e in config.errors}
    assert errors["bad"].field == "excludeTools" and errors["bad2"].field == "includeTools"
    assert "include_tools=['e*', 'add']" in repr(a)


def test_host_filters_per_server_from_entries_and_arguments():
    config = {
        "demo": {"command": demo_argv()[0], "args": demo_argv()[1:], "includeTools": ["e*", "add"]},
        "other": {"command": demo_argv()[0], "args": demo_argv()[1:]},
        "third": {"command": demo_argv()[0], "args": demo_argv()[1:], "excludeTools": "*"},
    }
    with mcpsync.Host(config, include_tools={"*": ["echo", "fail"], "demo": ["add"]}) as host:
        listed = names(host.list_tools())
        # demo: the host's list replaces the entry's; other: "*"; third: "*" replaces nothing
        # of excludeTools (the host gave no exclude list), so third shows nothing
        assert listed == ["add", "echo", "fail"]
        assert {t.name: t.server for t in host.list_tools()} == {
            "add": "demo",
            "echo": "other",
            "fail": "other",
        }
        with pytest.raises(mcpsync.UnknownTool):
            host.call_tool("demo__echo")
        with pytest.raises(ToolExcluded):
            host.session("demo").call_tool("echo", {"message": "x"})
        assert host.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
    with pytest.raises(ConfigError, match="include_tools"):
        mcpsync.Host(config, include_tools=["echo"])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- CLI


def test_cli_flags(capsys):
    code = cli.main(
        [
            "tools",
            "--json",
            "--include-tools",
            "e*",
            "--exclude-tools",
            "elicit",
            "--",
            *demo_argv(),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert [t["name"] for t in json.loads(out)] == ["echo"]


# --------------------------------------------------------------------------- adapters


def test_adapters_offer_no_app_only_tools_and_refuse_their_calls():
    server = app_server(TOOLS)
    with mcpsync.Session.connect(server.transport) as s:
        assert [t["name"] for t in adapters.to_anthropic(s)] == [
            "read_file",
            "write_file",
            "delete_file",
            "chart_data",
        ]
        block = adapters.dispatch(
            s, {"type": "tool_use", "id": "t", "name": "show_chart", "input": {}}
        )
        assert block["is_error"] and "app-only" in block["content"][0]["text"]
        assert server.calls == []  # nothing reached the server
        assert names(s.list_tools()) == names(TOOLS)  # the app itself still sees it
        assert "show_chart" in [t["function"]["name"] for t in adapters.to_openai(s, app_only=True)]


def test_one_toolset_filters_definitions_and_dispatch():
    server = app_server(TOOLS)
    with mcpsync.Session.connect(server.transport) as s:
        safe = adapters.tools(s, destructive=False, exclude="chart_*")
        assert [t["name"] for t in adapters.to_gemini(safe)] == ["read_file", "write_file"]
        assert [t["name"] for t in adapters.to_openai(safe, api="responses", read_only=True)] == [
            "read_file"
        ]
        refused = adapters.dispatch(
            safe,
            {"type": "function_call", "call_id": "c", "name": "delete_file", "arguments": "{}"},
        )
        assert "may be destructive" in refused["output"] and refused["output"].startswith("Error: ")
        done = adapters.dispatch(
            safe, {"type": "function_call", "call_id": "d", "name": "write_file", "arguments": "{}"}
        )
        assert done["output"] == "{}"
    assert [c["name"] for c in server.calls] == ["write_file"]


@pytest.mark.real
def test_annotation_filters_on_server_everything():
    with mcpsync.Session.connect(everything_stdio_argv(), timeout=30) as s:
        every = [t.name for t in s.list_tools()]
        read_only = [t["name"] for t in adapters.to_anthropic(s, read_only=True)]
        writers = [t["name"] for t in adapters.to_anthropic(s, read_only=False)]
        assert (
            "echo" in read_only and "get-sum" in read_only and "toggle-simulated-logging" in writers
        )
        assert sorted(read_only + writers) == sorted(every)
        # server-everything marks every tool destructiveHint: false
        assert [t["name"] for t in adapters.to_anthropic(s, destructive=False)] == every
        assert [
            t["name"]
            for t in adapters.to_openai(s, "responses", include="get-*", exclude="get-env")
        ] == [n for n in every if n.startswith("get-") and n != "get-env"]
