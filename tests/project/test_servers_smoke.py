"""Every test peer starts and answers initialize: raw stdio JSON lines and raw HTTP (requests)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

import pytest
import requests
from servers.launch import (
    StdioPeer,
    demo_argv,
    everything_http,
    everything_sse,
    everything_stdio_argv,
    sdk_server_http,
    sdk_server_sse,
    sdk_stdio_argv,
)

VERSION = "2025-11-25"
KNOWN_VERSIONS = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
TIMEOUT = (5, 15)  # connect, read: every HTTP wait is bounded
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def initialize_request(rid: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "mcpsync-smoke", "version": "0"},
        },
    }


def sse_events(response: requests.Response) -> Iterator[tuple[str, str]]:
    """(event, data) pairs from an SSE response, as they arrive."""
    event, data = "message", []
    for line in response.iter_lines(chunk_size=None, decode_unicode=True):
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("event:"):
            event = line[6:].strip()


def post(
    http: requests.Session, url: str, message: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[requests.Response, dict[str, Any] | None]:
    """POST one message (Streamable HTTP); return the response and the JSON-RPC reply, if any."""
    response = http.post(
        url, json=message, headers={**ACCEPT, **(headers or {})}, timeout=TIMEOUT, stream=True
    )
    with response:
        response.raise_for_status()
        ctype = response.headers.get("Content-Type", "")
        if "id" not in message or response.status_code == 202:
            return response, None
        if ctype.startswith("application/json"):
            return response, response.json()
        assert ctype.startswith("text/event-stream"), ctype
        for _event, data in sse_events(response):
            if not data.strip():
                continue  # a priming event (id only, for resumption)
            reply = json.loads(data)
            if reply.get("id") == message["id"] and "method" not in reply:
                return response, reply
    raise AssertionError("the SSE stream ended without a reply")


def check_initialize(result: dict[str, Any], server_name: str | None = None) -> None:
    assert result["protocolVersion"] in KNOWN_VERSIONS
    assert "tools" in result["capabilities"]
    if server_name:
        assert result["serverInfo"]["name"] == server_name


def streamable_http_round_trip(url: str, *, stateful: bool, server_name: str | None = None) -> None:
    with requests.Session() as http:
        response, reply = post(http, url, initialize_request())
        assert reply is not None
        check_initialize(reply["result"], server_name)
        headers = {"MCP-Protocol-Version": reply["result"]["protocolVersion"]}
        session_id = response.headers.get("Mcp-Session-Id")
        assert bool(session_id) == stateful
        if session_id:
            headers["Mcp-Session-Id"] = session_id
        accepted, _ = post(
            http, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers
        )
        assert accepted.status_code == 202
        _, listed = post(http, url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers)
        assert listed is not None and "echo" in [t["name"] for t in listed["result"]["tools"]]
        _, echoed = post(
            http,
            url,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": "hi"}},
            },
            headers,
        )
        assert echoed is not None and "hi" in echoed["result"]["content"][0]["text"]
        if session_id:
            assert http.delete(url, headers=headers, timeout=TIMEOUT).status_code in (200, 204)


def legacy_sse_round_trip(url: str, server_name: str | None = None) -> None:
    with requests.Session() as http:
        with http.get(
            url, headers={"Accept": "text/event-stream"}, stream=True, timeout=TIMEOUT
        ) as stream:
            assert stream.status_code == 200
            events = sse_events(stream)
            event, endpoint = next(events)
            assert event == "endpoint"
            post_url = urljoin(url, endpoint)
            for rid, message in enumerate([initialize_request(), None, None], start=1):
                if message is None:
                    message = {"jsonrpc": "2.0", "id": rid, "method": "tools/list"}
                    if rid == 2:
                        http.post(
                            post_url,
                            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                            timeout=TIMEOUT,
                        ).raise_for_status()
                message["id"] = rid
                assert http.post(post_url, json=message, timeout=TIMEOUT).status_code in (200, 202)
                for event, data in events:
                    reply = json.loads(data)
                    if event == "message" and reply.get("id") == rid:
                        break
                else:
                    raise AssertionError("SSE stream ended")
                if rid == 1:
                    check_initialize(reply["result"], server_name)
                else:
                    assert "echo" in [t["name"] for t in reply["result"]["tools"]]


# ---------------------------------------------------------------- stdio
def test_demo_server_stdio() -> None:
    with StdioPeer(demo_argv()) as peer:
        check_initialize(peer.initialize(VERSION), "mcpsync-demo")


@pytest.mark.real
def test_sdk_server_stdio() -> None:
    with StdioPeer(sdk_stdio_argv()) as peer:
        check_initialize(peer.initialize(VERSION), "mcpsync-sdk-test-server")
        added = peer.result("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        assert added["structuredContent"] == {"sum": 3}
        assert peer.wait_stderr("sdk_server ready: stdio")


@pytest.mark.real
def test_everything_stdio() -> None:
    with StdioPeer(everything_stdio_argv()) as peer:
        check_initialize(peer.initialize(VERSION, timeout=60))
        tools = [t["name"] for t in peer.result("tools/list")["tools"]]
        assert "echo" in tools


# ---------------------------------------------------------------- Streamable HTTP
@pytest.mark.real
def test_sdk_server_http_stateful_sse_replies() -> None:
    with sdk_server_http() as server:
        assert server.url.endswith("/mcp")
        streamable_http_round_trip(server.url, stateful=True, server_name="mcpsync-sdk-test-server")


@pytest.mark.real
def test_sdk_server_http_stateless_json() -> None:
    with sdk_server_http(stateless=True, json_response=True) as server:
        with requests.Session() as http:
            response, _ = post(http, server.url, initialize_request())
            assert response.headers["Content-Type"].startswith("application/json")
        streamable_http_round_trip(
            server.url, stateful=False, server_name="mcpsync-sdk-test-server"
        )


@pytest.mark.real
def test_everything_streamable_http() -> None:
    with everything_http() as server:
        streamable_http_round_trip(server.url, stateful=True)


# ---------------------------------------------------------------- legacy HTTP+SSE
@pytest.mark.real
def test_sdk_server_legacy_sse() -> None:
    with sdk_server_sse() as server:
        legacy_sse_round_trip(server.url, server_name="mcpsync-sdk-test-server")


@pytest.mark.real
def test_everything_legacy_sse() -> None:
    with everything_sse() as server:
        legacy_sse_round_trip(server.url)


def test_launch_cleans_up_the_process_group() -> None:
    with StdioPeer(demo_argv()) as peer:
        peer.initialize(VERSION)
        proc = peer.proc
    assert proc.poll() is not None
