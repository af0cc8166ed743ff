"""The legacy HTTP+SSE transport (2024-11-05 servers): raw JSON-RPC through it against a
scripted server (endpoint event, faults) and real servers (official SDK, server-everything),
then end to end through ``mcpsync.Session`` (explicit and as the fallback of a URL)."""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

import pytest
import requests
from servers.launch import everything_sse, kill_group, sdk_server_sse
from test_http_transport import (
    Collector,
    Req,
    ScriptedServer,
    handshake,
    init_result,
    initialize_message,
    mcpsync_threads,
    request,
)

import mcpsync
from mcpsync.errors import (
    ConnectError,
    HTTPStatusError,
    ProtocolError,
    RequestTimeout,
    TransportError,
)
from mcpsync.transports.http.legacy_sse import LegacySSETransport

LEGACY = "2024-11-05"


class LegacyServer:
    """A scripted 2024-11-05 server: each GET /sse opens a stream with its own session;
    POST /messages?session=N answers 202 and puts the reply on that session's stream.
    ``answer(message)`` makes the reply (or None); ``push``/``outbox`` feed the latest stream."""

    def __init__(
        self, endpoint: str = "/messages?session={n}", *, send_endpoint: bool = True
    ) -> None:
        self.endpoint = endpoint
        self.send_endpoint = send_endpoint
        self.streams: dict[str, queue.Queue[bytes | None]] = {}
        self.server = ScriptedServer(self.handle)
        self.post_status = 202

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/sse"

    @property
    def outbox(self) -> queue.Queue[bytes | None]:
        return self.streams[str(len(self.streams))]

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        if "id" not in message or "method" not in message:
            return None
        if message["method"] == "initialize":
            return init_result(message["id"], LEGACY)
        if message["method"] == "tools/list":
            return {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]},
            }
        text = (message.get("params") or {}).get("arguments", {}).get("message", "")
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"content": [{"type": "text", "text": text}]},
        }

    def push(self, message: Any, session: str | None = None) -> None:
        box = self.streams[session] if session else self.outbox
        box.put(b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n")

    def handle(self, req: Req) -> None:
        if req.method == "GET" and req.path == "/sse":
            session = str(len(self.streams) + 1)
            box: queue.Queue[bytes | None] = queue.Queue()
            self.streams[session] = box
            req.start_sse()
            if self.send_endpoint:
                req.write(
                    b"event: endpoint\ndata: " + self.endpoint.format(n=session).encode() + b"\n\n"
                )
            while not self.server.stop.is_set():
                try:
                    data = box.get(timeout=0.1)
                except queue.Empty:
                    continue
                if data is None:
                    return  # the server ends the stream
                req.write(data)
            return
        if req.method == "POST" and req.path.startswith("/messages"):
            if self.post_status != 202:
                req.send(self.post_status, b"server exploded")
                return
            req.send(202, b"Accepted")
            reply = self.answer(req.json())
            if reply is not None:
                self.push(reply, req.path.rsplit("=", 1)[1])
            return
        req.send(405 if req.path == "/sse" else 404, b"no")

    def __enter__(self) -> LegacyServer:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for box in self.streams.values():
            box.put(None)
        self.server.__exit__(*exc)


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "requests-path"])
def test_endpoint_post_and_stream_delivery(no_leaks, fast):
    with LegacyServer() as server:
        c = Collector()
        session = None if fast else requests.Session()
        t = LegacySSETransport(
            server.url, name="legacy", headers={"X-Custom": "1"}, http_session=session
        )
        assert t._http.fast is fast
        t.start(*c.callbacks())
        assert (
            t.endpoint is not None
            and t.endpoint.url == f"http://127.0.0.1:{server.server.port}/messages?session=1"
        )
        result = handshake(t, c, LEGACY)
        assert result["protocolVersion"] == LEGACY
        t.send(request(2, "tools/call", {"name": "echo", "arguments": {"message": "hi"}}))
        assert c.response(2)["result"]["content"][0]["text"] == "hi"
        assert set(c.threads) == {"mcpsync-sse-reader[legacy]"}
        get = server.server.requests[0]
        assert get.method == "GET" and get.headers["accept"] == "text/event-stream"
        post = server.server.posts()[0]
        assert (
            post.headers["content-type"] == "application/json" and post.headers["x-custom"] == "1"
        )
        server.push(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "x"},
            }
        )
        c.wait(lambda m: m.get("method") == "notifications/message")
        t.close()
        t.close()
        assert c.closed == [None] and c.errors == []
        with pytest.raises(TransportError):
            t.send(request(3, "ping"))
        if session is not None:
            session.close()


def test_endpoint_on_another_origin_is_refused(no_leaks):
    with LegacyServer(endpoint="http://evil.example/messages") as server:
        t = LegacySSETransport(server.url, name="legacy")
        with pytest.raises(ProtocolError, match="origin"):
            t.start(*Collector().callbacks())
        assert mcpsync_threads() == []
        t.close()


def test_no_endpoint_event_within_connect_timeout(no_leaks):
    with LegacyServer(send_endpoint=False) as server:
        c = Collector()
        t = LegacySSETransport(server.url, name="legacy", connect_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(RequestTimeout, match="endpoint"):
            t.start(*c.callbacks())
        assert time.monotonic() - started < 2.5
        assert mcpsync_threads() == []
        t.close()
        assert c.closed == []  # start() failed: the caller got the exception, not on_close


def test_http_errors_on_get_and_post(no_leaks):
    with LegacyServer() as server:
        t = LegacySSETransport(f"http://127.0.0.1:{server.server.port}/nope", name="legacy")
        with pytest.raises(HTTPStatusError) as info:
            t.start(*Collector().callbacks())
        assert info.value.status == 404
        t.close()
        c = Collector()
        t = LegacySSETransport(server.url, name="legacy")
        t.start(*c.callbacks())
        server.post_status = 500
        with pytest.raises(HTTPStatusError) as info:
            t.send(initialize_message(1, LEGACY))
        assert info.value.status == 500 and "exploded" in info.value.body_excerpt
        t.close()


def test_stream_end_closes_the_transport_once(no_leaks):
    with LegacyServer() as server:
        c = Collector()
        t = LegacySSETransport(server.url, name="legacy")
        t.start(*c.callbacks())
        handshake(t, c, LEGACY)
        server.outbox.put(None)  # the server ends the event stream
        (error,) = c.close_event()
        assert isinstance(error, ConnectError)
        with pytest.raises(ConnectError, match="ended"):
            t.send(request(2, "ping"))
        t.close()
        assert len(c.closed) == 1


def test_large_message_and_keep_alive_comments(no_leaks):
    with LegacyServer() as server:
        c = Collector()
        t = LegacySSETransport(server.url, name="legacy")
        t.start(*c.callbacks())
        handshake(t, c, LEGACY)
        for _ in range(3):
            server.outbox.put(b": keep-alive\n\n")
        big = "z" * (11 * 1024 * 1024)
        t.send(request(2, "tools/call", {"name": "echo", "arguments": {"message": big}}))
        assert c.response(2, timeout=30)["result"]["content"][0]["text"] == big
        t.close()


def test_session_over_scripted_legacy_server(no_leaks):
    with LegacyServer() as server:
        with mcpsync.Session.connect(server.url, timeout=10) as s:  # POST /sse -> 405: fallback
            assert s.transport.kind == "sse"
            assert s.call_tool("echo", {"message": "yo"}).content[0].text == "yo"
        with mcpsync.Session.connect(server.url, transport="sse", timeout=10) as s:
            assert s.protocol_version == LEGACY
            assert [r.method for r in server.server.requests[-3:]] == ["GET", "POST", "POST"]


def test_session_call_times_out_on_a_keep_alive_only_stream(no_leaks):
    with LegacyServer() as server:
        server.answer_original = server.answer
        server.answer = lambda m: (
            None if m.get("method") == "tools/call" else server.answer_original(m)
        )  # type: ignore[method-assign]
        with mcpsync.Session.connect(server.url, transport="sse", timeout=10) as s:
            for _ in range(5):
                server.outbox.put(b": ping\n\n")
            started = time.monotonic()
            with pytest.raises(RequestTimeout):
                s.call_tool("echo", {"message": "never"}, timeout=0.5)
            assert time.monotonic() - started < 3


# -- real servers ------------------------------------------------------------------------------


@pytest.mark.real
def test_official_sdk_server_raw(no_leaks):
    with sdk_server_sse() as server:
        c = Collector()
        t = LegacySSETransport(server.url, name="sdk")
        c.reply = lambda m: t.send(
            {"jsonrpc": "2.0", "id": m["id"], "result": {"roots": [{"uri": "file:///r"}]}}
        )
        t.start(*c.callbacks())
        result = handshake(t, c, LEGACY)
        assert result["serverInfo"]["name"] == "mcpsync-sdk-test-server"
        t.send(request(2, "tools/list"))
        assert "echo" in [tool["name"] for tool in c.response(2)["result"]["tools"]]
        t.send(request(3, "tools/call", {"name": "list_roots", "arguments": {}}))
        assert "file:///r" in c.response(3)["result"]["content"][0]["text"]
        t.send(
            request(
                4,
                "tools/call",
                {"name": "log", "arguments": {"level": "warning", "message": "careful"}},
            )
        )
        c.response(4)
        assert any(m.get("method") == "notifications/message" for m in c.messages)
        t.close()
        assert c.errors == [] and c.closed == [None]


@pytest.mark.real
def test_official_sdk_server_killed(no_leaks):
    with sdk_server_sse() as server:
        c = Collector()
        t = LegacySSETransport(server.url, name="sdk")
        t.start(*c.callbacks())
        handshake(t, c, LEGACY)
        kill_group(server.proc)
        (error,) = c.close_event(timeout=10)
        assert isinstance(error, ConnectError)
        with pytest.raises(ConnectError):
            t.send(request(2, "ping"))
        t.close()


@pytest.mark.real
def test_everything_server_raw(no_leaks):
    with everything_sse() as server:
        c = Collector()
        t = LegacySSETransport(server.url, name="everything")
        t.start(*c.callbacks())
        handshake(t, c, LEGACY)
        t.send(request(2, "tools/call", {"name": "echo", "arguments": {"message": "hi"}}))
        assert c.response(2)["result"]["content"][0]["text"] == "Echo: hi"
        t.close()
        assert c.errors == [] and c.closed == [None]


@pytest.mark.real
def test_session_over_real_legacy_servers(no_leaks):
    with sdk_server_sse() as server:
        with mcpsync.Session.connect(
            server.url,
            sampling_handler=lambda p: {
                "role": "assistant",
                "content": {"type": "text", "text": "sampled"},
                "model": "m",
            },
            timeout=30,
        ) as s:
            assert s.transport.kind == "sse"
            assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
            assert s.call_tool("sample", {"prompt": "p"}).content[0].text == "sampled"
            seen = []
            s.call_tool("long_running", {"duration": 0.2, "steps": 2}, on_progress=seen.append)
            assert [p.progress for p in seen] == [1, 2]
    with everything_sse() as server:
        with mcpsync.Session.connect(server.url, transport="sse", timeout=30) as s:
            assert s.call_tool("echo", {"message": "hi"}).content[0].text == "Echo: hi"
    assert not [t for t in threading.enumerate() if t.name.startswith("mcpsync-sse")]
