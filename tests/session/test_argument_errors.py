"""A caller's own mistakes in arguments (a timeout that is no number of seconds, tool
arguments that are no mapping, a command given as one string) are refused at the call,
before anything is sent, with a message that names the argument and what to give."""

from __future__ import annotations

import math

import pytest
from fakes import FakeServer

import mcpsync
from mcpsync.errors import ConfigError


def _echo(message):
    return {"content": [{"type": "text", "text": "ok"}]}


def connect(**kwargs):
    server = FakeServer(handlers={"tools/call": _echo})
    return server, mcpsync.Session.connect(server.transport, connect_timeout=5, **kwargs)


@pytest.mark.parametrize("bad", [0, -1, math.nan])
def test_a_timeout_of_no_time_is_refused_before_anything_is_sent(bad, no_leaks):
    server, s = connect(timeout=5)
    with s:
        with pytest.raises(ConfigError, match=r"timeout must be more than 0 seconds.*got"):
            s.call_tool("echo", {}, timeout=bad)
        with pytest.raises(ConfigError, match=r"max_timeout must be more than 0"):
            s.call_tool("echo", {}, timeout=1, reset_timeout_on_progress=True, max_timeout=bad)
        assert [m for m in server.log if m.get("method") == "tools/call"] == []
        assert s.call_tool("echo", {}, timeout=5).content[0].text == "ok"  # usable


@pytest.mark.parametrize("bad", ["3", True, [3]])
def test_a_timeout_that_is_no_number_is_a_type_error(bad, no_leaks):
    server, s = connect(timeout=5)
    with s:
        with pytest.raises(TypeError, match=r"timeout must be a number of seconds or None"):
            s.submit_call_tool("echo", {}, timeout=bad)
        assert [m for m in server.log if m.get("method") == "tools/call"] == []


def test_connect_refuses_a_timeout_of_no_time_before_starting_anything(tmp_path):
    marker = tmp_path / "started"
    command = ["python3", "-c", f"open({str(marker)!r}, 'w')"]
    with pytest.raises(ConfigError, match="connect_timeout must be more than 0"):
        mcpsync.Session.connect(command, connect_timeout=0)
    with pytest.raises(ConfigError, match="timeout must be more than 0"):
        mcpsync.Session.connect(command, timeout=-5)
    assert not marker.exists()


def test_tool_arguments_that_are_no_mapping_are_a_type_error(no_leaks):
    server, s = connect(timeout=5)
    with s:
        with pytest.raises(
            TypeError,
            match=r"call_tool\('echo', arguments\): arguments must be a mapping.*not list",
        ):
            s.call_tool("echo", ["a", "b"])  # type: ignore[arg-type]
        assert [m for m in server.log if m.get("method") == "tools/call"] == []


def test_a_command_given_as_one_string_is_shown_as_a_list():
    with pytest.raises(ConfigError, match=r"as a list: \['python', '-m', 'server'\]"):
        mcpsync.Session.connect("python -m server")
    with pytest.raises(ConfigError, match=r"transport='streamable-http' takes a URL"):
        mcpsync.Session.connect(["python", "server.py"], transport="streamable-http")
