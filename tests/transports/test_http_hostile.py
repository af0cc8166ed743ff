"""Hostile HTTP servers through the public API (issue 11, items 5 and the size-limit point).

Each test runs ``mcpsync.Session.connect`` against a small scripted server on 127.0.0.1 that
misbehaves in one way: a 100,000-deep ``[[[`` SSE event in front of the real reply, a deep
JSON body, a reply over a lowered size limit. What must hold: the garbage is a
``ProtocolError`` (reported, or raised by the call it belongs to), the stream goes on, the
next reply arrives, and a reply that cannot be accepted fails its call at once.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
import requests
from test_http_transport import Req, ScriptedServer, sse_server
from test_legacy_sse_transport import LegacyServer

import mcpsync
from mcpsync.auth import OAuth
from mcpsync.auth.discovery import discover_protected_resource
from mcpsync.errors import AuthError, HTTPStatusError, ProtocolError
from mcpsync.transports.http.legacy_sse import LegacySSETransport
from mcpsync.transports.http.sse import response_id
from mcpsync.transports.http.streamable import StreamableHTTPTransport

DEEP = b"[" * 100_000
TOOLS = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}


def text_result(rid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def tools_list(req: Req, message: dict[str, Any]) -> bool:
    if message["method"] == "tools/list":
        req.send_json({"jsonrpc": "2.0", "id": message["id"], "result": TOOLS})
        return True
    return False


def protocol_warnings(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


# -- deep nesting ---------------------------------------------------------------------------


def test_deep_sse_event_is_a_protocol_error_and_the_reply_behind_it_arrives(no_leaks, caplog):
    caplog.set_level(logging.WARNING, logger="mcpsync")

    def on_call(req: Req, message: dict[str, Any]) -> None:
        if tools_list(req, message):
            return
        req.start_sse()
        req.write(b"event: message\ndata: " + DEEP + b"\n\n")  # garbage first, same stream
        req.event(text_result(message["id"], "after the garbage"))

    with ScriptedServer(sse_server(on_call)) as server:
        with mcpsync.Session.connect(server.url, timeout=10, era="legacy") as s:
            started = time.monotonic()
            result = s.call_tool("t", {})
            assert result.content[0].text == "after the garbage"
            assert time.monotonic() - started < 5  # delivered, not waited out
            # the session is still good for more calls on new streams
            assert s.call_tool("t", {}).content[0].text == "after the garbage"
    warnings = protocol_warnings(caplog, "nested too deeply")
    assert warnings, [r.getMessage() for r in caplog.records]
    assert not protocol_warnings(caplog, "can no longer arrive")  # no ResponseLost


def test_deep_json_reply_is_a_protocol_error_naming_the_problem(no_leaks):
    def on_call(req: Req, message: dict[str, Any]) -> None:
        if tools_list(req, message):
            return
        if message["params"]["arguments"].get("status") == 500:
            req.send(500, DEEP, {"Content-Type": "application/json"})
        else:
            req.send(200, DEEP, {"Content-Type": "application/json"})

    with ScriptedServer(sse_server(on_call)) as server:
        with mcpsync.Session.connect(server.url, timeout=10, era="legacy") as s:
            with pytest.raises(ProtocolError, match="nested too deeply"):
                s.call_tool("t", {})
            # an error status with a deep body: the status error, its body excerpt intact
            with pytest.raises(HTTPStatusError) as info:
                s.call_tool("t", {"status": 500})
            assert info.value.status == 500
            assert "RecursionError" not in str(info.value)
            assert info.value.payload is None  # type: ignore[attr-defined]
            # and the session still works
            assert s.list_tools()[0].name == "t"


class _DeepLegacy(LegacyServer):
    """A 2024-11-05 server that puts a deep event on the stream before each tools/call reply."""

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if message.get("method") == "tools/call":
            self.outbox.put(b"event: message\ndata: " + DEEP + b"\n\n")
        return super().answer(message)


def test_legacy_sse_deep_event_is_a_protocol_error_and_the_stream_goes_on(no_leaks, caplog):
    caplog.set_level(logging.WARNING, logger="mcpsync")
    with _DeepLegacy() as server:
        with mcpsync.Session.connect(server.url, timeout=10, transport="sse") as s:
            for text in ("one", "two"):
                assert s.call_tool("echo", {"message": text}).content[0].text == text
    assert protocol_warnings(caplog, "nested too deeply")


# -- lowered size limit ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["sse", "json", "json-unsized"])
def test_reply_over_a_lowered_size_limit_fails_its_call_at_once(no_leaks, shape):
    big = "x" * 200_000

    def on_call(req: Req, message: dict[str, Any]) -> None:
        if tools_list(req, message):
            return
        reply = text_result(message["id"], big if message["params"]["arguments"] else "small")
        if shape == "sse":
            req.start_sse()
            req.event(reply, id="e1")  # resumable: a lost reply must not wait on a resumption
            server.stop.wait(20)  # keep the stream open: only the size error may end the call
            return
        body = json.dumps(reply).encode()
        if shape == "json":
            req.send(200, body, {"Content-Type": "application/json"})
            return
        h = req.handler  # no Content-Length: the size is only found by reading
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(body)
        h.close_connection = True

    with ScriptedServer(sse_server(on_call)) as server:
        transport = StreamableHTTPTransport(server.url, max_event_bytes=100_000, name="small")
        with mcpsync.Session.connect(transport, timeout=15, era="legacy") as s:
            assert s.call_tool("t", {}).content[0].text == "small"
            started = time.monotonic()
            with pytest.raises(ProtocolError, match="100000"):
                s.call_tool("t", {"big": True})
            assert time.monotonic() - started < 5, "the call waited for its timeout"
            assert s.call_tool("t", {}).content[0].text == "small"


# -- OAuth metadata redirects --------------------------------------------------------------------


def test_oauth_metadata_redirect_to_another_origin_is_refused(no_leaks):
    """A guarded server whose metadata URL redirects to a third party: the flow stops with an
    AuthError naming both origins, and the third party sees no request at all."""
    with ScriptedServer(lambda req: req.send_json({"resource": "x"})) as other:
        third_party = f"http://127.0.0.1:{other.port}"

        def guarded(req: Req) -> None:
            if req.method == "POST":
                prm = f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
                req.send(401, b"", {"WWW-Authenticate": f'Bearer resource_metadata="{prm}"'})
            elif req.path.startswith("/.well-known/"):
                req.send(302, b"", {"Location": f"{third_party}/prm"})
            else:
                req.send(404)

        with ScriptedServer(guarded) as server:
            here = f"http://127.0.0.1:{server.port}"

            def never(url: str) -> str:
                raise AssertionError("no authorization may start")

            with pytest.raises(AuthError) as info:
                mcpsync.Session.connect(
                    server.url, auth=OAuth(redirect=never), era="legacy", timeout=10
                )
            assert third_party in str(info.value) and here in str(info.value)
            assert "another origin" in str(info.value)
        assert other.requests == []


def test_oauth_metadata_same_origin_redirect_is_followed(no_leaks):
    def handle(req: Req) -> None:
        if req.path == "/.well-known/oauth-protected-resource/mcp":
            req.send(307, b"", {"Location": "/meta/prm.json"})
        elif req.path == "/meta/prm.json":
            assert "authorization" not in req.headers
            req.send_json({"resource": server.url, "authorization_servers": [server.url]})
        else:
            req.send(404)

    with ScriptedServer(handle) as server, requests.Session() as http:
        found = discover_protected_resource(http, server.url, None, timeout=10)
        assert found is not None and found.authorization_servers == [server.url]
        assert [r.path for r in server.requests][:2] == [
            "/.well-known/oauth-protected-resource/mcp",
            "/meta/prm.json",
        ]


def test_oversized_notification_on_a_request_stream_does_not_fail_the_call(no_leaks, caplog):
    caplog.set_level(logging.WARNING, logger="mcpsync")

    def on_call(req: Req, message: dict[str, Any]) -> None:
        if tools_list(req, message):
            return
        req.start_sse()
        log_params = {"level": "info", "data": "y" * 200_000}
        req.event({"jsonrpc": "2.0", "method": "notifications/message", "params": log_params})
        req.event(text_result(message["id"], "after the big log"))

    with ScriptedServer(sse_server(on_call)) as server:
        transport = StreamableHTTPTransport(server.url, max_event_bytes=100_000, name="small")
        with mcpsync.Session.connect(transport, timeout=15, era="legacy") as s:
            assert s.call_tool("t", {}).content[0].text == "after the big log"
    assert protocol_warnings(caplog, "exceeded 100000 bytes")


class _BigLegacy(LegacyServer):
    """Answers ``tools/call`` with ``{"big": true}`` by a 200 kB text."""

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        reply = super().answer(message)
        if message.get("method") == "tools/call" and message["params"]["arguments"].get("big"):
            assert reply is not None
            reply["result"]["content"][0]["text"] = "z" * 200_000
        return reply


def test_legacy_reply_over_a_lowered_size_limit_fails_its_call_at_once(no_leaks):
    with _BigLegacy() as server:
        transport = LegacySSETransport(server.url, max_event_bytes=100_000, name="small")
        with mcpsync.Session.connect(transport, timeout=15) as s:
            assert s.call_tool("echo", {"message": "small"}).content[0].text == "small"
            started = time.monotonic()
            with pytest.raises(ProtocolError, match="100000"):
                s.call_tool("echo", {"message": "x", "big": True})
            assert time.monotonic() - started < 5, "the call waited for its timeout"
            assert s.call_tool("echo", {"message": "again"}).content[0].text == "again"


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"id":9', 7),
        (b'  {"id" : "a\\"b" , "error" : {"code"', 'a"b'),
        (b'{"result":{"id":3,"x":"', None),  # a nested id is not the reply's
        (b'{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{', None),
        (b'{"jsonrpc":"2.0","error":{"code":1},"id":12', None),  # may go on: 123...
        (b'{"id":true,"result":1', None),
        (b'[{"id":1,"result":', None),
        (b"\xff\xfe garbage", None),
    ],
)
def test_response_id_reads_only_a_complete_top_level_id(head, expected):
    assert response_id(head) == expected
