"""Both eras over stdio against real servers: the official SDK (modern) and legacy peers.

``era="auto"`` must pick modern for the official-SDK servers (mcp 2.3.0 answers
``server/discover``) and legacy for the demo server and server-everything, and the same
user code must work on either.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from servers.launch import (
    SERVERS_DIR,
    demo_argv,
    everything_stdio_argv,
    have_everything,
    sdk_stdio_argv,
)

import mcpsync
from mcpsync.protocol import choose
from mcpsync.protocol.choose import Caches

pytestmark = pytest.mark.real


def modern_sdk_argv() -> list[str]:
    return [sys.executable, str(SERVERS_DIR / "modern_sdk_server.py"), "stdio"]


_caches = Caches()


@pytest.fixture(autouse=True)
def caches() -> Caches:
    """Fresh era-verdict and hint caches for each test: every connect() below gets them."""
    global _caches
    _caches = Caches()
    return _caches


def connect(target: Any, **kwargs: Any) -> mcpsync.Session:
    kwargs.setdefault("_caches", _caches)
    return mcpsync.Session.connect(target, **kwargs)


@pytest.mark.parametrize(
    ("argv", "era", "why"),
    [
        pytest.param(modern_sdk_argv, "modern", "server/discover answered", id="modern-sdk"),
        pytest.param(sdk_stdio_argv, "modern", "server/discover answered", id="dual-era-sdk"),
        pytest.param(demo_argv, "legacy", "-32601", id="demo"),
        pytest.param(
            everything_stdio_argv,
            "legacy",
            "-32601",
            id="everything",
            marks=pytest.mark.skipif(not have_everything(), reason="npm peers not installed"),
        ),  # fmt: skip
    ],
)
def test_auto_picks_the_era_of_each_server(no_leaks, argv, era, why):
    with connect(argv(), timeout=30) as s:
        assert s.era == era, s.era_reason
        assert why in s.era_reason
        assert s.protocol_version == ("2026-07-28" if era == "modern" else "2025-11-25")
        assert s.list_tools()


def user_code(argv: list[str]) -> str:
    """What a user writes once; it must not care which era the server speaks."""
    seen: dict = {}
    logged = threading.Event()
    updated = threading.Event()
    changed = threading.Event()

    def sampling(params):
        seen["sampling"] = params
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled text"},
            "model": "m",
        }

    def elicitation(params):
        seen["elicitation"] = params.message
        return {"action": "accept", "content": {"name": "Ann"}}

    def on_log(params):
        if params.data == "careful":
            logged.set()

    with connect(
        argv, timeout=30, sampling_handler=sampling, elicitation_handler=elicitation,
        roots=["file:///work/project"], on_log=on_log,
    ) as s:  # fmt: skip
        tools = {t.name for t in s.list_tools()}
        assert {
            "echo",
            "add",
            "long_running",
            "sample",
            "elicit",
            "list_roots",
            "log",
            "fail",
        } <= tools
        assert s.call_tool("echo", {"message": "hey"}).content[0].text == "hey"
        assert s.call_tool("add", {"a": 1, "b": 2}).structured_content["sum"] == 3
        assert s.call_tool("fail", {}).is_error
        progress = []
        s.call_tool("long_running", {"duration": 0.3, "steps": 3}, on_progress=progress.append)
        assert [p.progress for p in progress] == [1, 2, 3]
        assert "sampled text" in s.call_tool("sample", {"prompt": "say hi"}).content[0].text
        assert "Ann" in s.call_tool("elicit", {"message": "Who are you?"}).content[0].text
        assert seen["elicitation"] == "Who are you?"
        assert "file:///work/project" in s.call_tool("list_roots", {}).content[0].text
        s.set_logging_level("debug")
        s.call_tool("log", {"level": "warning", "message": "careful"})
        assert logged.wait(10)
        assert s.read_resource("demo://readme").contents
        assert s.get_prompt("greet", {"name": "Bo"}).messages
        s.subscribe_resource("demo://readme", lambda uri: updated.set())
        s.call_tool("touch_resource", {"uri": "demo://readme"})
        assert updated.wait(10)
        s.unsubscribe_resource("demo://readme")
        s.on_tools_changed(changed.set)
        s.call_tool("add_tool", {"name": "newcomer"})
        assert changed.wait(10)
        assert "newcomer" in {t.name for t in s.list_tools()}
        future = s.submit_call_tool("long_running", {"duration": 30, "steps": 30})
        assert future.cancel()
        s.ping()
        return s.era


@pytest.mark.parametrize(
    ("argv", "era"),
    [
        pytest.param(modern_sdk_argv, "modern", id="modern-sdk"),
        pytest.param(demo_argv, "legacy", id="demo"),
    ],
)
def test_the_same_user_code_runs_on_both_eras(no_leaks, argv, era):
    assert user_code(argv()) == era


def test_multi_round_input_against_the_sdk(no_leaks):
    answers = iter(
        [
            {"action": "accept", "content": {"name": "Ann"}},
            {"action": "accept", "content": {"colour": "red"}},
        ]
    )
    asked = []

    def elicitation(params):
        asked.append(params.message)
        return next(answers)

    with connect(modern_sdk_argv(), timeout=30, elicitation_handler=elicitation) as s:
        assert (
            s.submit_call_tool("ask_twice", {}).result(timeout=30).content[0].text
            == "Ann likes red"
        )
    assert asked == ["What is your name?", "Ann, what is your favourite colour?"]


def test_declined_input_is_the_servers_business(no_leaks):
    with connect(
        modern_sdk_argv(), timeout=30, elicitation_handler=lambda p: {"action": "decline"}
    ) as s:
        result = s.call_tool("ask_name", {})
        assert result.is_error  # the SDK turns a declined required answer into a tool error


def test_forced_modern_fails_cleanly_on_a_legacy_server(no_leaks):
    with pytest.raises(mcpsync.HandshakeError, match="does not speak 2026-07-28"):
        connect(demo_argv(), era="modern", timeout=30)


def test_forced_legacy_on_the_dual_era_sdk_server(no_leaks):
    with connect(sdk_stdio_argv(), era="legacy", timeout=30) as s:
        assert (s.era, s.protocol_version) == ("legacy", "2025-11-25")
        assert s.call_tool("echo", {"message": "old school"}).content[0].text == "old school"


def test_the_verdict_is_remembered_for_the_process(no_leaks):
    with connect(demo_argv(), timeout=30) as first:
        assert "-32601" in first.era_reason
        assert first.phases["probe"] > 0  # one round trip, mostly the server starting up
    with connect(demo_argv(), timeout=30) as second:
        assert second.era == "legacy" and "remembered" in second.era_reason
        assert "probe" not in second.phases
    with connect(modern_sdk_argv(), timeout=30) as third:
        assert third.era == "modern"
    with connect(modern_sdk_argv(), timeout=30) as fourth:
        assert (
            fourth.era == "modern"
        )  # modern still asks server/discover: it is where capabilities come from


@pytest.mark.parametrize("mode", [[], ["--hang"]], ids=["exits", "goes-deaf"])
def test_a_server_killed_by_the_probe_is_started_again_as_legacy(no_leaks, monkeypatch, mode):
    monkeypatch.setattr(choose, "DEFAULT_PROBE_TIMEOUT", 0.5)
    argv = [sys.executable, str(SERVERS_DIR / "modern_crashy_legacy_server.py"), *mode]
    with connect(argv, timeout=30) as s:
        assert s.era == "legacy"
        assert "stopped after the server/discover probe" in s.era_reason
        assert s.call_tool("echo", {"message": "second life"}).content[0].text == "second life"
    with connect(argv, timeout=30) as s:  # remembered: no probe, no restart
        assert s.era == "legacy" and "remembered" in s.era_reason


def test_a_modern_call_longer_than_a_second(no_leaks):
    # The blocking wait polls its future once a second; on Python 3.10 that poll raises
    # concurrent.futures.TimeoutError, which is not the builtin TimeoutError.
    with connect(modern_sdk_argv(), timeout=30) as s:
        assert s.era == "modern"
        seen = []
        result = s.call_tool("long_running", {"duration": 1.5, "steps": 3}, on_progress=seen.append)
        assert not result.is_error and len(seen) == 3
