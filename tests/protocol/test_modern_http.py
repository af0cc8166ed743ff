"""Both eras over HTTP against real servers: the official SDK (modern, dual-era) and legacy peers.

``era="auto"`` must pick modern for the official-SDK servers and legacy for
server-everything (Streamable HTTP and HTTP+SSE) and the SDK's HTTP+SSE endpoint, and the
same user code as over stdio must work. Header checks (``Mcp-Param-*``, -32020 -> re-list
and retry), stream-closing cancellation and ``subscriptions/listen`` are exercised against
the SDK server, which validates the headers itself.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from servers.launch import (
    SERVERS_DIR,
    RunningServer,
    everything_http,
    everything_sse,
    have_everything,
    sdk_server_http,
    sdk_server_sse,
    start_server,
)
from test_modern_stdio import user_code

import mcpsync
from mcpsync.protocol.choose import Caches

pytest.importorskip("mcpsync.transports.http.streamable")
pytestmark = pytest.mark.real

needs_everything = pytest.mark.skipif(not have_everything(), reason="npm peers not installed")


@contextmanager
def modern_sdk_http(*, json_response: bool = False) -> Iterator[RunningServer]:
    argv = [sys.executable, str(SERVERS_DIR / "modern_sdk_server.py"), "http", "--port", "0"]
    argv += ["--json"] * json_response
    ready = r"modern_sdk_server ready: http://127\.0\.0\.1:(\d+)/mcp"
    with start_server(argv, port=None, path="/mcp", ready_pattern=ready) as server:
        yield server


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
    ("launch", "era", "kind", "why"),
    [
        pytest.param(modern_sdk_http, "modern", "streamable-http", "server/discover answered", id="modern-sdk"),
        pytest.param(lambda: modern_sdk_http(json_response=True), "modern", "streamable-http", "server/discover answered", id="modern-sdk-json"),
        pytest.param(sdk_server_http, "modern", "streamable-http", "server/discover answered", id="dual-era-sdk"),
        pytest.param(everything_http, "legacy", "streamable-http", "HTTP 400", id="everything", marks=needs_everything),
        pytest.param(sdk_server_sse, "legacy", "sse", "HTTP+SSE", id="sdk-sse"),
        pytest.param(everything_sse, "legacy", "sse", "HTTP+SSE", id="everything-sse", marks=needs_everything),
    ],
)  # fmt: skip
def test_auto_picks_the_era_of_each_http_server(no_leaks, launch, era, kind, why):
    with launch() as server, connect(server.url, timeout=30) as s:
        assert (s.era, s.transport.kind) == (era, kind), s.era_reason
        assert why in s.era_reason
        assert s.list_tools()
        assert s.call_tool("echo", {"message": "hi"}).content[0].text.endswith("hi")


def test_the_same_user_code_runs_over_http(no_leaks):
    with modern_sdk_http() as server:
        assert user_code(server.url) == "modern"


def test_param_headers_and_header_mismatch_recovery(no_leaks):
    with modern_sdk_http() as server, connect(server.url, timeout=30) as s:
        # Not listed yet: the first call goes without Mcp-Param-Region, the SDK answers
        # -32020, the client lists the tools and retries with the header.
        assert (
            s.call_tool("regional", {"region": "Zürich ", "query": "q"}).content[0].text
            == "Zürich : q"
        )
        # the -32020 made the client list the tools: the header declaration it now sends by
        (regional,) = [t for t in s.list_tools() if t.name == "regional"]
        declared = {p.get("x-mcp-header") for p in regional.input_schema["properties"].values()}
        assert "Region" in declared
        assert s.call_tool("regional", {"region": "eu", "query": "q"}).content[0].text == "eu: q"


def test_multi_round_input_over_http(no_leaks):
    answers = iter(
        [
            {"action": "accept", "content": {"name": "Ann"}},
            {"action": "accept", "content": {"colour": "red"}},
        ]
    )
    with modern_sdk_http() as server, connect(
        server.url, timeout=30, elicitation_handler=lambda p: next(answers)
    ) as s:  # fmt: skip
        assert (
            s.submit_call_tool("ask_twice", {}).result(timeout=30).content[0].text
            == "Ann likes red"
        )


def test_cancel_closes_the_response_stream(no_leaks):
    with modern_sdk_http() as server, connect(server.url, timeout=30) as s:
        aborted = []
        original = s.transport.abort_request

        def abort(request_id):
            aborted.append(request_id)
            return original(request_id)

        s.transport.abort_request = abort
        s.connection.hooks.abort = abort  # the era's cancellation, through the wrapper
        started = threading.Event()
        future = s.submit_call_tool(
            "long_running", {"duration": 30, "steps": 300}, on_progress=lambda p: started.set()
        )
        assert started.wait(10)
        assert future.cancel()
        assert aborted and aborted == [future._current.call.id]
        assert s.call_tool("echo", {"message": "still fine"}).content[0].text == "still fine"


def test_listen_stream_over_http(no_leaks):
    with modern_sdk_http() as server, connect(server.url, timeout=30) as s:
        updated = threading.Event()
        changed = threading.Event()
        s.subscribe_resource("demo://readme", lambda uri: updated.set())
        s.on_tools_changed(changed.set)
        s.call_tool("touch_resource", {"uri": "demo://readme"})
        assert updated.wait(10)
        s.call_tool("add_tool", {"name": "late"})
        assert changed.wait(10)
        assert "late" in {t.name for t in s.list_tools()}
