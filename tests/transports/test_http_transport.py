"""The Streamable HTTP transport: raw JSON-RPC through it, against mocks, a scripted local
server (for exact wire behaviour and faults) and real servers (official SDK, server-everything);
then end to end through ``mcpsync.Session``.

Also owns the test helpers the legacy SSE tests reuse: ``Collector`` (callbacks with bounded
waits) and ``ScriptedServer`` (a tiny HTTP/1.1 server whose replies each test writes).
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests
import responses
from servers.launch import everything_http, kill_group, sdk_server_http

import mcpsync
from mcpsync.errors import (
    ConnectError,
    DNSError,
    HTTPStatusError,
    ProtocolError,
    RequestTimeout,
    SessionExpired,
    TLSError,
    TransportError,
)
from mcpsync.transports.http.client import safe_url
from mcpsync.transports.http.headers import encode_header_value, mcp_name
from mcpsync.transports.http.sse import EventTooLarge, SSEParser
from mcpsync.transports.http.streamable import ResponseLost, StreamableHTTPTransport

VERSION = "2025-11-25"


# -- helpers (also used by test_legacy_sse_transport.py) ---------------------------------


class Collector:
    """Transport callbacks that record everything; bounded waits on what arrived."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.threads: list[str] = []
        self.errors: list[BaseException] = []
        self.closed: list[BaseException | None] = []
        self.cond = threading.Condition()
        self.reply: Callable[[dict[str, Any]], None] | None = None

    def on_message(self, message: dict[str, Any]) -> None:
        with self.cond:
            self.messages.append(message)
            self.threads.append(threading.current_thread().name)
            self.cond.notify_all()
        if self.reply is not None and "method" in message and "id" in message:
            self.reply(message)

    def on_close(self, error: BaseException | None) -> None:
        with self.cond:
            self.closed.append(error)
            self.cond.notify_all()

    def on_error(self, error: BaseException) -> None:
        with self.cond:
            self.errors.append(error)
            self.cond.notify_all()

    def callbacks(self) -> tuple[Any, Any, Any]:
        return self.on_message, self.on_close, self.on_error

    def _wait(self, find: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                found = find()
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"no {what} within {timeout} s; messages {self.messages[-5:]!r}, "
                        f"errors {self.errors!r}, closed {self.closed!r}"
                    )
                self.cond.wait(remaining)

    def wait(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any]:
        return self._wait(
            lambda: next((m for m in self.messages if predicate(m)), None), timeout, "message"
        )

    def response(self, rid: Any, timeout: float = 10.0) -> dict[str, Any]:
        return self.wait(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def error(self, kind: type = BaseException, timeout: float = 10.0) -> BaseException:
        return self._wait(
            lambda: next((e for e in self.errors if isinstance(e, kind)), None), timeout, "error"
        )

    def close_event(self, timeout: float = 10.0) -> list[BaseException | None]:
        return self._wait(lambda: list(self.closed) or None, timeout, "on_close")


def initialize_message(rid: Any = 1, version: str = VERSION) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"sampling": {}, "roots": {"listChanged": True}, "elicitation": {}},
            "clientInfo": {"name": "mcpsync-tests", "version": "0"},
        },
    }


def handshake(transport: Any, collector: Collector, version: str = VERSION) -> dict[str, Any]:
    """initialize + notifications/initialized + set_protocol_version, as raw messages."""
    transport.send(initialize_message(1, version))
    result = collector.response(1)["result"]
    transport.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    transport.set_protocol_version(result["protocolVersion"])
    return result


def request(rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def open_connections(port: int) -> list[Any]:
    """This process's TCP connections to 127.0.0.1:``port`` (to check close() left none)."""
    import psutil

    return [c for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port]


def mcpsync_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-")]


class Req:
    """One request the scripted server received."""

    def __init__(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        self.method = handler.command
        self.path = handler.path
        self.headers = {k.lower(): v for k, v in handler.headers.items()}
        self.body = body
        self.time = time.monotonic()
        self.handler = handler

    def json(self) -> Any:
        return json.loads(self.body)

    # writing replies
    def send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        h = self.handler
        h.send_response(status)
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()

    def send_json(self, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send(
            status,
            json.dumps(obj).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )

    def start_sse(self, headers: dict[str, str] | None = None) -> None:
        """An event-stream reply without length: it ends when the connection closes."""
        h = self.handler
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.flush()
        h.close_connection = True

    def write(self, data: bytes) -> None:
        self.handler.wfile.write(data)
        self.handler.wfile.flush()

    def event(
        self,
        message: Any = None,
        *,
        id: str | None = None,
        retry: int | None = None,
        data: str | None = None,
    ) -> None:
        lines = []
        if id is not None:
            lines.append(f"id: {id}")
        if retry is not None:
            lines.append(f"retry: {retry}")
        if message is not None:
            lines.append("event: message")
            lines.append("data: " + json.dumps(message))
        elif data is not None:
            lines.extend("data: " + line for line in data.split("\n"))
        self.write(("\n".join(lines) + "\n\n").encode())

    def reset(self) -> None:
        """Abort the connection with a TCP RST."""
        sock = self.handler.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.handler.close_connection = True
        sock.close()


class ScriptedServer:
    """A local HTTP/1.1 server; ``handler(req)`` writes each reply. Use as a context manager.

    Every request is recorded in ``requests``. ``stop`` is set on exit so handlers that
    hold a stream open can wait on it (bounded) and end.
    """

    def __init__(self, handler: Callable[[Req], None]) -> None:
        self.handler = handler
        self.requests: list[Req] = []
        self.stop = threading.Event()
        self.cond = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()  # headers and body go out in separate writes: no Nagle delay
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Req(self, body)
                with outer.cond:
                    outer.requests.append(req)
                    outer.cond.notify_all()
                try:
                    outer.handler(req)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    self.close_connection = True

            do_GET = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="test-http-server", daemon=True
        )

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def wait_for(self, predicate: Callable[[Req], bool], timeout: float = 10.0) -> Req:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for req in self.requests:
                    if predicate(req):
                        return req
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"server saw no such request in {timeout} s: {[(r.method, r.headers) for r in self.requests]}"
                    )
                self.cond.wait(remaining)

    def posts(self) -> list[Req]:
        return [r for r in self.requests if r.method == "POST"]


def init_result(rid: Any, version: str = VERSION) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "scripted", "version": "1"},
        },
    }


def json_server(
    extra: Callable[[Req, dict[str, Any]], bool] | None = None,
    *,
    session: str | None = "sess-1",
    get_status: int = 405,
) -> Callable[[Req], None]:
    """A handler: initialize (with a session id), 202 for notifications, echo results as JSON."""

    def handle(req: Req) -> None:
        if req.method == "GET":
            req.send(get_status)
            return
        if req.method == "DELETE":
            req.send(200)
            return
        message = req.json()
        if extra is not None and extra(req, message):
            return
        if "id" not in message or "method" not in message:
            req.send(202)
            return
        if message["method"] == "initialize":
            req.send_json(
                init_result(message["id"]), headers={"Mcp-Session-Id": session} if session else None
            )
            return
        req.send_json(
            {"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message.get("params")}}
        )

    return handle


def transport_for(url: str, fast: bool = True, **options: Any) -> StreamableHTTPTransport:
    if not fast:
        options["http_session"] = requests.Session()
    options.setdefault("name", "t")
    transport = StreamableHTTPTransport(url, **options)
    assert transport._http.fast is fast
    return transport


# -- the SSE parser ------------------------------------------------------------------------


def test_sse_parser_fields_comments_line_endings_and_priming():
    parser = SSEParser()
    stream = (
        b": keep-alive\r\n\r\n"  # a comment alone dispatches nothing
        b"id: e1\rretry: 250\rdata:\r\r"  # priming event: CR line ends, empty data
        b'event: message\r\nid: e2\r\ndata: {"a":\r\ndata:  1}\r\n\r\n'  # multi-line data; one space stripped
        b"data\n\n"  # a field with no colon: empty data
        b"event: other\ndata: x\nid: e3\x00bad\n\n"  # an id with NULL is ignored
    )
    events = []
    for i in range(len(stream)):  # one byte at a time: CRLF split across chunks too
        events.extend(parser.feed(stream[i : i + 1]))
    assert [(e.event, e.data, e.id) for e in events] == [
        ("message", b"", "e1"),
        ("message", b'{"a":\n 1}', "e2"),
        ("message", b"", "e2"),
        ("other", b"x", "e2"),
    ]
    assert parser.last_event_id == "e2"
    assert parser.retry == 0.25
    assert json.loads(events[1].data) == {"a": 1}


def test_sse_parser_large_event_linear_and_cap():
    big = b"x" * (12 * 1024 * 1024)
    parser = SSEParser(max_event_bytes=64 * 1024 * 1024)
    data = b"data: " + big + b"\n\n"
    started = time.perf_counter()
    events = [e for i in range(0, len(data), 65536) for e in parser.feed(data[i : i + 65536])]
    assert len(events) == 1 and events[0].data == big
    assert time.perf_counter() - started < 2.0
    small = SSEParser(max_event_bytes=1000)
    out = list(small.feed(b"data: " + b"y" * 5000 + b"\nid: 7\n\n" + b"data: ok\n\n"))
    assert isinstance(out[0], EventTooLarge) and out[0].limit == 1000
    assert out[1].data == b"ok" and small.last_event_id == "7"
    chunked = SSEParser(max_event_bytes=1000)
    out = [
        e for i in range(0, 5000, 100) for e in chunked.feed((b"data: " + b"z" * 4994)[i : i + 100])
    ]
    out += list(chunked.feed(b"\n\ndata: next\n\n"))
    assert isinstance(out[0], EventTooLarge) and out[1].data == b"next"


def test_header_value_and_safe_url():
    assert encode_header_value("get_weather") == "get_weather"
    assert encode_header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert encode_header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert encode_header_value("line1\nline2") == "=?base64?bGluZTEKbGluZTI=?="
    assert encode_header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
    # TAB is a control character: the spec's value rule sends it as Base64 (one encoder).
    assert encode_header_value("a\tb") == "=?base64?YQli?="
    assert (
        safe_url("https://user:pw@host:8443/mcp?token=abc&x") == "https://host:8443/mcp?token=***&x"
    )


# -- wire behaviour against a scripted server, on both paths ---------------------------------


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "requests-path"])
def test_json_replies_headers_session_and_close(no_leaks, fast):
    with ScriptedServer(json_server()) as server:
        c = Collector()
        t = transport_for(server.url, fast, headers={"X-Custom": "yes"})
        t.start(*c.callbacks())
        result = handshake(t, c)
        assert result["serverInfo"]["name"] == "scripted"
        # JSON replies are delivered in the calling thread, before send() returns
        t.send(request(2, "tools/list"))
        assert c.messages[-1]["id"] == 2
        assert c.threads[-1] == threading.current_thread().name
        init, notif, listing = server.posts()[:3]
        for req in (init, notif, listing):
            assert req.headers["accept"] == "application/json, text/event-stream"
            assert req.headers["content-type"] == "application/json"
            assert req.headers["x-custom"] == "yes"
        assert "mcp-session-id" not in init.headers and "mcp-protocol-version" not in init.headers
        assert notif.headers["mcp-session-id"] == "sess-1"
        assert listing.headers["mcp-session-id"] == "sess-1"
        assert listing.headers["mcp-protocol-version"] == VERSION
        get = server.wait_for(lambda r: r.method == "GET")  # the back-channel was tried: 405
        assert get.headers["accept"] == "text/event-stream"
        assert get.headers["mcp-session-id"] == "sess-1"
        t.close()
        t.close()  # idempotent
        delete = server.wait_for(lambda r: r.method == "DELETE")
        assert delete.headers["mcp-session-id"] == "sess-1"
        assert c.closed == [None]
        assert len([r for r in server.requests if r.method == "GET"]) == 1  # 405: never again
        if not fast:  # the caller's session keeps its pool until the caller closes it
            assert open_connections(server.port)
            t._http.session.close()
        assert open_connections(server.port) == []
        with pytest.raises(TransportError):
            t.send(request(3, "ping"))


def test_keep_alive_connection_is_reused():
    with ScriptedServer(json_server()) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        ports = set()

        def record(req: Req, message: dict[str, Any]) -> bool:
            ports.add(req.handler.client_address[1])
            return False

        server.handler = json_server(record)
        for i in range(20):
            t.send(request(i, "ping"))
        assert len(ports) == 1
        t.close()


def test_batch_reply_notification_202_and_garbage(no_leaks):
    def extra(req: Req, message: dict[str, Any]) -> bool:
        if message.get("method") == "batch":
            req.send_json(
                [
                    {"jsonrpc": "2.0", "method": "notifications/x"},
                    {"jsonrpc": "2.0", "id": message["id"], "result": {}},
                ]
            )
            return True
        if message.get("method") == "garbage":
            req.send(200, b"<html>not json</html>", {"Content-Type": "application/json"})
            return True
        if message.get("method") == "wrongtype":
            req.send(200, b"hello", {"Content-Type": "text/plain"})
            return True
        return False

    with ScriptedServer(json_server(extra)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        t.send(request(5, "batch"))
        assert [m.get("method", m.get("id")) for m in c.messages] == ["notifications/x", 5]
        t.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})  # 202
        t.send({"jsonrpc": "2.0", "id": "srv-1", "result": {}})  # a response to the server: 202
        assert len(c.messages) == 2
        with pytest.raises(ProtocolError, match="not JSON"):
            t.send(request(6, "garbage"))
        with pytest.raises(ProtocolError, match="Content-Type"):
            t.send(request(7, "wrongtype"))
        t.close()


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "requests-path"])
def test_http_errors(no_leaks, fast):
    def extra(req: Req, message: dict[str, Any]) -> bool:
        method = message.get("method")
        if method == "boom":
            req.send(
                500,
                b"Internal error: database on fire " + b"x" * 5000,
                {"Content-Type": "text/plain"},
            )
        elif method == "rpc-error-400":  # 2026-07-28 style: a JSON-RPC error with an HTTP 400
            req.send_json(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {
                        "code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": ["2026-07-28"]},
                    },
                },
                status=400,
            )
        elif method == "plain-400":
            req.send_json(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32000, "message": "Bad Request: no session"},
                },
                status=400,
            )
        elif method == "denied":
            req.send_json(
                {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32001, "message": "no"}},
                status=401,
            )
        else:
            return False
        return True

    with ScriptedServer(json_server(extra)) as server:
        c = Collector()
        t = transport_for(server.url, fast, headers={"Authorization": "Bearer s3cr3t-token"})
        t.start(*c.callbacks())
        with pytest.raises(HTTPStatusError) as info:
            t.send(request(1, "boom"))
        err = info.value
        assert err.status == 500 and err.url == server.url
        assert "database on fire" in err.body_excerpt and len(err.body_excerpt) < 300
        assert "s3cr3t" not in str(err) and "s3cr3t" not in repr(err)
        t.send(request(2, "rpc-error-400"))  # delivered as the answer to request 2
        assert c.response(2)["error"]["code"] == -32022
        with pytest.raises(HTTPStatusError) as info:
            t.send(request(3, "plain-400"))
        assert info.value.status == 400 and info.value.payload["error"]["code"] == -32000
        with pytest.raises(HTTPStatusError) as info:
            t.send(request(4, "denied"))
        assert info.value.status == 401
        t.close()


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "requests-path"])
def test_404_with_session_id_raises_session_expired(no_leaks, fast):
    state = {"session": "sess-1"}

    def extra(req: Req, message: dict[str, Any]) -> bool:
        if message.get("method") == "initialize":
            req.send_json(init_result(message["id"]), headers={"Mcp-Session-Id": state["session"]})
            return True
        if req.headers.get("mcp-session-id") == "sess-1" and state["session"] == "sess-2":
            req.send(404, b"Session not found")
            return True
        return False

    with ScriptedServer(json_server(extra)) as server:
        c = Collector()
        t = transport_for(server.url, fast)
        t.start(*c.callbacks())
        handshake(t, c)
        assert t.session_id == "sess-1"
        state["session"] = "sess-2"  # the server forgets sess-1
        with pytest.raises(SessionExpired):
            t.send(request(2, "tools/list"))
        assert t.session_id is None
        # a notification while the session is being re-initialized is not sent (old session's)
        sent = len(server.posts())
        with pytest.raises(SessionExpired):
            t.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        assert len(server.posts()) == sent
        t.send(initialize_message(3))  # the session re-initializes; the new id is used from now on
        assert "mcp-session-id" not in server.posts()[-1].headers
        assert t.session_id == "sess-2"
        t.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert server.posts()[-1].headers["mcp-session-id"] == "sess-2"
        t.send(request(4, "tools/list"))
        assert server.posts()[-1].headers["mcp-session-id"] == "sess-2"
        t.close()


def test_404_without_session_id_is_a_status_error(no_leaks):
    with ScriptedServer(lambda req: req.send(404, b"no such endpoint")) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        with pytest.raises(HTTPStatusError) as info:
            t.send(initialize_message())
        assert info.value.status == 404
        t.close()


def test_redirect_same_origin_is_followed_and_adopted(no_leaks):
    inner = json_server()

    def handle(req: Req) -> None:
        if req.path == "/mcp":
            req.send(307, b"", {"Location": "/mcp/"})
        else:
            inner(req)

    with ScriptedServer(handle) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(request(2, "ping"))
        assert [r.path for r in server.posts()] == ["/mcp", "/mcp/", "/mcp/", "/mcp/"]
        t.close()


def test_modern_wire_headers(no_leaks):
    with ScriptedServer(json_server(session=None)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        t.set_protocol_version("2026-07-28")  # the modern era: set before the first request
        t.send(
            request(1, "tools/call", {"name": "get_weather", "arguments": {}}),
            headers={"Mcp-Param-Region": "us-west1"},
        )
        t.send(request(2, "resources/read", {"uri": "file:///x/ü.txt"}))
        t.send(request(3, "tools/list"))
        call, read, listing = server.posts()
        assert call.headers["mcp-protocol-version"] == "2026-07-28"
        assert (
            call.headers["mcp-method"] == "tools/call" and call.headers["mcp-name"] == "get_weather"
        )
        assert call.headers["mcp-param-region"] == "us-west1"
        assert read.headers["mcp-name"] == encode_header_value("file:///x/ü.txt")
        assert listing.headers["mcp-method"] == "tools/list" and "mcp-name" not in listing.headers
        t.close()
        assert [r.method for r in server.requests] == ["POST"] * 3  # no GET stream, no DELETE


def test_mcp_name_rule_once():
    assert mcp_name("tools/call", {"name": "t"}) == "t"
    assert mcp_name("prompts/get", {"name": "p"}) == "p"
    assert mcp_name("resources/read", {"uri": "file:///a"}) == "file:///a"
    assert mcp_name("tasks/get", {"taskId": "task-1"}) == "task-1"
    assert mcp_name("tools/list", {"name": "t"}) is None
    assert mcp_name("tools/call", {"name": 3}) is None
    assert mcp_name("tools/call", None) is None


def test_modern_wire_mcp_name_encoded_and_for_tasks(no_leaks):
    with ScriptedServer(json_server(session=None)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        t.set_protocol_version("2026-07-28")
        t.send(request(1, "tools/call", {"name": "a\tb", "arguments": {}}))
        t.send(request(2, "tasks/get", {"taskId": "task-7"}))
        call, task = server.posts()
        assert call.headers["mcp-name"] == "=?base64?YQli?="
        assert task.headers["mcp-method"] == "tasks/get" and task.headers["mcp-name"] == "task-7"
        t.close()


# -- SSE replies, resumption, the GET back-channel -------------------------------------------


def sse_server(
    on_call: Callable[[Req, dict[str, Any]], None], on_get: Callable[[Req], None] | None = None
) -> Callable[[Req], None]:
    """initialize as JSON (with session), anything else with a request id -> on_call."""
    inner = json_server()

    def handle(req: Req) -> None:
        if req.method == "GET" and on_get is not None:
            on_get(req)
            return
        if req.method == "POST":
            message = req.json()
            if "id" in message and message.get("method") not in (None, "initialize"):
                on_call(req, message)
                return
        inner(req)

    return handle


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "requests-path"])
def test_sse_reply_delivers_in_order_on_a_named_reader(no_leaks, fast):
    def on_call(req: Req, message: dict[str, Any]) -> None:
        req.start_sse()
        req.write(b": keep-alive\n\n")
        req.event(id="p1", data="")  # priming
        for i in range(3):
            req.event(
                {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i}},
                id=f"e{i}",
            )
        req.write(
            b'event: message\ndata: {"jsonrpc": "2.0",\ndata: "id": '
            + json.dumps(message["id"]).encode()
            + b', "result": {"ok": true}}\n\n'
        )

    with ScriptedServer(sse_server(on_call)) as server:
        c = Collector()
        t = transport_for(server.url, fast)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(request("r-1", "tools/call", {"name": "x"}))
        assert c.response("r-1")["result"] == {"ok": True}
        got = [
            m
            for m in c.messages
            if m.get("method") == "notifications/progress" or m.get("id") == "r-1"
        ]
        assert [m.get("params", {}).get("progress", "done") for m in got] == [0, 1, 2, "done"]
        assert set(c.threads[-4:]) == {"mcpsync-http-sse[t]"}
        t.close()
        assert c.errors == []


def test_sse_retry_resumes_with_get_and_last_event_id(no_leaks):
    """The conformance suite's sse-retry scenario, reproduced: priming event with retry 500,
    stream closed after 50 ms without the result; the client must GET with Last-Event-ID
    after 450-700 ms and read the result there."""
    state: dict[str, Any] = {}

    def on_call(req: Req, message: dict[str, Any]) -> None:
        state["pending"] = message["id"]
        req.start_sse({"Mcp-Session-Id": "sess-1"})
        req.event(id="event-1", retry=500, data="")
        server.stop.wait(0.05)
        state["closed_at"] = time.monotonic()
        req.handler.close_connection = True

    def on_get(req: Req) -> None:
        req.start_sse({"Mcp-Session-Id": "sess-1"})
        if "last-event-id" not in req.headers:  # the back-channel: stays open, quiet
            req.event(id="event-0", retry=500, data="")
            server.stop.wait(30)
            return
        req.event(id="event-2", retry=500, data="")
        req.event(
            {
                "jsonrpc": "2.0",
                "id": state["pending"],
                "result": {"content": [{"type": "text", "text": "done"}]},
            },
            id="event-3",
        )
        server.stop.wait(30)  # the stream stays open; the client must not wait for its end

    with ScriptedServer(sse_server(on_call, on_get)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        handshake(t, c)
        server.wait_for(lambda r: r.method == "GET")
        t.send(request(7, "tools/call", {"name": "test_reconnection", "arguments": {}}))
        assert c.response(7, timeout=5)["result"]["content"][0]["text"] == "done"
        resume = server.wait_for(lambda r: r.method == "GET" and "last-event-id" in r.headers)
        assert resume.headers["last-event-id"] == "event-1"
        assert resume.headers["mcp-session-id"] == "sess-1"
        assert resume.headers["mcp-protocol-version"] == VERSION
        delay = resume.time - state["closed_at"]
        assert 0.45 <= delay <= 1.0, delay  # the suite: 450-700 ms SUCCESS, up to 1 s WARNING
        deadline = time.monotonic() + 5  # the resumption GET is closed once it delivered
        while "mcpsync-http-sse[t]" in mcpsync_threads() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "mcpsync-http-sse[t]" not in mcpsync_threads()
        t.close()
        assert c.errors == []


def test_stream_lost_without_event_id_or_when_resumption_refused(no_leaks):
    def on_call(req: Req, message: dict[str, Any]) -> None:
        req.start_sse()
        if message["id"] == 2:
            req.event(id="e1", retry=10, data="")  # resumable, but GET is refused (405)
        req.event(
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "info", "data": "x"},
            }
        )

    with ScriptedServer(sse_server(on_call)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(request(1, "tools/call", {"name": "x"}))
        lost = c.error(ResponseLost, timeout=5)
        assert lost.request_id == 1 and "no event id" in str(lost)
        t.send(request(2, "tools/call", {"name": "x"}))
        deadline = time.monotonic() + 5
        while len(c.errors) < 2 and time.monotonic() < deadline:
            with c.cond:
                c.cond.wait(0.1)
        lost2 = c.errors[1]
        assert isinstance(lost2, ResponseLost) and lost2.request_id == 2
        assert isinstance(lost2.__cause__, HTTPStatusError) and lost2.__cause__.status == 405
        t.close()


def test_keep_alive_only_stream_ends_by_the_request_timeout(no_leaks):
    def on_call(req: Req, message: dict[str, Any]) -> None:
        req.start_sse()
        while not server.stop.is_set():
            req.write(b": ping\n\n")
            server.stop.wait(0.05)

    with ScriptedServer(sse_server(on_call)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        handshake(t, c)
        started = time.monotonic()
        t.send(request(9, "tools/call", {"name": "slow"}), timeout=0.5)
        lost = c.error(ResponseLost, timeout=5)
        assert lost.request_id == 9 and isinstance(lost.__cause__, RequestTimeout)
        assert time.monotonic() - started < 3
        t.close()


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "requests-path"])
def test_close_stops_a_blocked_reader_promptly(no_leaks, fast):
    def on_call(req: Req, message: dict[str, Any]) -> None:
        req.start_sse()
        req.event(id="e1", data="")
        server.stop.wait(30)

    with ScriptedServer(sse_server(on_call)) as server:
        c = Collector()
        t = transport_for(server.url, fast, sse_read_timeout=None)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(request(3, "tools/call", {"name": "never"}), timeout=None)
        server.wait_for(lambda r: r.method == "POST" and b'"never"' in r.body)
        assert "mcpsync-http-sse[t]" in mcpsync_threads()
        started = time.monotonic()
        t.close()
        assert time.monotonic() - started < 2
        assert mcpsync_threads() == [] and c.closed == [None] and c.errors == []


def test_abort_request_stops_its_stream(no_leaks):
    def on_call(req: Req, message: dict[str, Any]) -> None:
        req.start_sse()
        req.event(id="e1", data="")
        server.stop.wait(30)

    with ScriptedServer(sse_server(on_call)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(request(4, "tools/call", {"name": "never"}))
        server.wait_for(lambda r: b'"never"' in r.body)
        assert t.abort_request(4) and not t.abort_request(99)
        deadline = time.monotonic() + 5
        while "mcpsync-http-sse[t]" in mcpsync_threads() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "mcpsync-http-sse[t]" not in mcpsync_threads()
        assert c.errors == []  # an aborted request is not reported as lost
        t.close()


def test_back_channel_delivers_server_requests_and_reconnects(no_leaks):
    gets: list[Req] = []

    def on_get(req: Req) -> None:
        gets.append(req)
        req.start_sse()
        if len(gets) == 1:
            req.event(id="g1", retry=50, data="")
            req.event({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}, id="g2")
            return  # the server closes the stream; the client reconnects after 50 ms
        req.event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, id="g3")
        server.stop.wait(30)

    with ScriptedServer(sse_server(lambda req, m: None, on_get)) as server:
        c = Collector()
        t = transport_for(server.url)
        c.reply = lambda m: t.send({"jsonrpc": "2.0", "id": m["id"], "result": {"roots": []}})
        t.start(*c.callbacks())
        handshake(t, c)
        c.wait(lambda m: m.get("method") == "roots/list")
        assert "mcpsync-http-get[t]" in c.threads
        server.wait_for(lambda r: r.method == "POST" and r.body and r.json().get("id") == "srv-1")
        c.wait(lambda m: m.get("method") == "notifications/tools/list_changed")
        assert gets[1].headers["last-event-id"] == "g2"
        t.close()


# -- faults ------------------------------------------------------------------------------------


def test_connection_refused_dns_and_timeouts(no_leaks, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    for fast in (True, False):
        t = transport_for(f"http://127.0.0.1:{port}/mcp", fast)
        t.start(*Collector().callbacks())
        with pytest.raises(ConnectError, match="refused") as info:
            t.send(initialize_message())
        assert type(info.value) is ConnectError
        t.close()

    real_getaddrinfo = socket.getaddrinfo

    def fake_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "mcp.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    for fast in (True, False):
        t = transport_for("http://mcp.invalid/mcp", fast)
        t.start(*Collector().callbacks())
        with pytest.raises(DNSError, match="did not resolve"):
            t.send(initialize_message())
        t.close()

    def silent(req: Req) -> None:
        server.stop.wait(10)

    with ScriptedServer(silent) as server:
        for fast in (True, False):
            t = transport_for(server.url, fast, timeout=0.3)
            t.start(*Collector().callbacks())
            started = time.monotonic()
            with pytest.raises(RequestTimeout) as info:
                t.send(initialize_message())
            assert isinstance(info.value, TimeoutError)
            assert time.monotonic() - started < 2
            t.close()


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


@pytest.mark.parametrize("fast", [True, False], ids=["fast-path", "requests-path"])
def test_tls_failure_and_custom_ca(no_leaks, tls_files, fast):
    cert_path, key_path = tls_files
    with ScriptedServer(json_server()) as server:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_path, key_path)
        server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
        url = f"https://127.0.0.1:{server.port}/mcp"
        t = transport_for(url, fast)
        t.start(*Collector().callbacks())
        with pytest.raises(TLSError, match="TLS"):
            t.send(initialize_message())
        t.close()
        c = Collector()
        t = transport_for(url, fast, verify=cert_path)
        t.start(*c.callbacks())
        handshake(t, c)
        t.close()


def test_connection_reset_during_json_and_sse_replies(no_leaks):
    def on_call(req: Req, message: dict[str, Any]) -> None:
        if message["method"] == "ping":
            req.send_json({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            return
        if message["params"]["name"] == "json":
            h = req.handler
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "1000")
            h.end_headers()
            h.wfile.write(b'{"jsonrpc": "2.0", "id": ')
            h.wfile.flush()
        else:
            req.start_sse()
            req.event(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": "x"},
                }
            )
        req.reset()

    with ScriptedServer(sse_server(on_call)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        handshake(t, c)
        with pytest.raises(ConnectError):
            t.send(request(2, "tools/call", {"name": "json"}))
        t.send(request(3, "tools/call", {"name": "sse"}))
        lost = c.error(ResponseLost, timeout=5)
        assert lost.request_id == 3 and isinstance(lost.__cause__, ConnectError)
        t.send(request(4, "ping"))  # the transport still works
        assert c.response(4)
        t.close()


def test_large_replies_json_and_sse(no_leaks):
    text = "x" * (11 * 1024 * 1024)

    def on_call(req: Req, message: dict[str, Any]) -> None:
        reply = {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {"content": [{"type": "text", "text": text}]},
        }
        if message["params"]["name"] == "json":
            req.send_json(reply)
        else:
            req.start_sse()
            req.event(reply, id="big")

    with ScriptedServer(sse_server(on_call)) as server:
        c = Collector()
        t = transport_for(server.url)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(request(2, "tools/call", {"name": "json"}))
        t.send(request(3, "tools/call", {"name": "sse"}))
        assert c.response(2)["result"]["content"][0]["text"] == text
        assert c.response(3)["result"]["content"][0]["text"] == text
        t.close()
        small = transport_for(server.url, max_event_bytes=1024 * 1024)
        c2 = Collector()
        small.start(*c2.callbacks())
        with pytest.raises(ProtocolError, match="limit"):
            small.send(request(4, "tools/call", {"name": "json"}))
        small.send(request(5, "tools/call", {"name": "sse"}))
        assert "exceeded" in str(c2.error(ProtocolError, timeout=10))
        small.close()


# -- mocked with `responses` (the requests path, as a caller's session or auth would use) ------


def test_responses_mock_and_auth_hooks(no_leaks):
    url = "http://mcp.example/mcp"

    class TokenAuth(requests.auth.AuthBase):
        """Adds a bearer token; on 401 'refreshes' it and re-sends, like HTTPDigestAuth."""

        def __init__(self) -> None:
            self.token = "old-token"
            self.refreshes = 0

        def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
            r.headers["Authorization"] = f"Bearer {self.token}"
            r.register_hook("response", self.handle_401)
            return r

        def handle_401(self, r: requests.Response, **kwargs: Any) -> requests.Response:
            if r.status_code != 401 or self.refreshes:
                return r
            self.refreshes += 1
            self.token = "new-token"
            r.content  # noqa: B018 - consume, so the connection can be reused
            prep = r.request.copy()
            prep.headers["Authorization"] = f"Bearer {self.token}"
            retried = r.connection.send(prep, **kwargs)
            retried.history.append(r)
            retried.request = prep
            return retried

    def reply(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        if request.headers.get("Authorization") != "Bearer new-token":
            return 401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}, ""
        message = json.loads(request.body)
        if message.get("method") == "initialize":
            return (
                200,
                {"Content-Type": "application/json", "Mcp-Session-Id": "m-1"},
                json.dumps(init_result(message["id"])),
            )
        if "id" not in message:
            return 202, {}, ""
        return (
            200,
            {"Content-Type": "application/json"},
            json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}),
        )

    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.POST, url, callback=reply)
        mock.add(responses.GET, url, status=405)
        mock.add(responses.DELETE, url, status=405)
        auth = TokenAuth()
        c = Collector()
        t = StreamableHTTPTransport(url, auth=auth, name="t")
        assert not t._http.fast  # auth: every request goes through requests (hooks run)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(request(2, "tools/list"))
        assert c.response(2)["result"] == {}
        assert auth.refreshes == 1
        sent = [call.request for call in mock.calls if call.request.method == "POST"]
        assert sent[-1].headers["Authorization"] == "Bearer new-token"
        assert sent[-1].headers["Mcp-Session-Id"] == "m-1"
        t.close()
        auth.token, auth.refreshes = "wrong", 1  # no more refreshes: the 401 stands
        t = StreamableHTTPTransport(url, auth=auth, name="t")
        t.start(*Collector().callbacks())
        with pytest.raises(HTTPStatusError) as info:
            t.send(initialize_message())
        assert info.value.status == 401 and "wrong" not in str(info.value)
        t.close()


def test_callers_session_is_used_and_not_closed(no_leaks):
    session = requests.Session()
    session.headers["X-From-Session"] = "1"
    with ScriptedServer(json_server()) as server:
        c = Collector()
        t = StreamableHTTPTransport(server.url, http_session=session, name="t")
        assert not t._http.fast
        t.start(*c.callbacks())
        handshake(t, c)
        assert server.posts()[0].headers["x-from-session"] == "1"
        t.close()
        assert session.adapters  # still usable: not closed by the transport
        session.close()


# -- real servers ----------------------------------------------------------------------------


@pytest.mark.real
@pytest.mark.parametrize(
    "mode",
    [{}, {"json_response": True}, {"stateless": True}, {"stateless": True, "json_response": True}],
    ids=["sse", "json", "stateless-sse", "stateless-json"],
)
def test_official_sdk_server_raw(no_leaks, mode):
    with sdk_server_http(**mode) as server:
        c = Collector()
        t = StreamableHTTPTransport(server.url, name="sdk")
        c.reply = lambda m: t.send(
            {"jsonrpc": "2.0", "id": m["id"], "result": {"roots": [{"uri": "file:///r"}]}}
        )
        t.start(*c.callbacks())
        result = handshake(t, c)
        assert result["serverInfo"]["name"] == "mcpsync-sdk-test-server"
        assert (t.session_id is None) == bool(mode.get("stateless"))
        t.send(request(2, "tools/list"))
        assert "echo" in [tool["name"] for tool in c.response(2)["result"]["tools"]]
        t.send(request(3, "tools/call", {"name": "echo", "arguments": {"message": "hi"}}))
        assert c.response(3)["result"]["content"][0]["text"] == "hi"
        t.send(
            request(
                4,
                "tools/call",
                {
                    "name": "long_running",
                    "arguments": {"duration": 0.2, "steps": 2},
                    "_meta": {"progressToken": "p4"},
                },
            )
        )
        assert "2 steps" in c.response(4)["result"]["content"][0]["text"]
        if not mode.get("json_response"):  # progress needs a stream
            assert [
                m["params"]["progress"]
                for m in c.messages
                if m.get("method") == "notifications/progress"
            ] == [1, 2]
        if not mode.get("stateless"):  # server-to-client requests need a session
            t.send(request(5, "tools/call", {"name": "list_roots", "arguments": {}}))
            assert "file:///r" in c.response(5)["result"]["content"][0]["text"]
        t.close()
        assert c.errors == [] and c.closed == [None]
        assert open_connections(server.port) == []


@pytest.mark.real
def test_official_sdk_server_session_dropped_and_multi_mb_reply(no_leaks):
    with sdk_server_http() as server:
        c = Collector()
        t = StreamableHTTPTransport(server.url, name="sdk")
        t.start(*c.callbacks())
        handshake(t, c)
        big = "y" * (3 * 1024 * 1024)  # the SDK refuses request bodies over 4 MB
        t.send(request(2, "tools/call", {"name": "echo", "arguments": {"message": big}}))
        assert c.response(2, timeout=60)["result"]["content"][0]["text"] == big
        old = t.session_id
        # the server drops the session (another client deletes it)
        gone = requests.delete(
            server.url, headers={"Mcp-Session-Id": old, "MCP-Protocol-Version": VERSION}, timeout=10
        )
        assert gone.status_code == 200
        with pytest.raises(SessionExpired):
            t.send(request(3, "tools/list"))
        assert t.session_id is None
        t.send(initialize_message(4))
        assert c.response(4)["result"]["serverInfo"]
        assert t.session_id not in (None, old)
        t.close()


@pytest.mark.real
def test_official_sdk_server_killed_mid_stream(no_leaks):
    with sdk_server_http(resumable=True) as server:
        c = Collector()
        t = StreamableHTTPTransport(server.url, name="sdk", max_reconnects=2)
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(
            request(
                2,
                "tools/call",
                {
                    "name": "long_running",
                    "arguments": {"duration": 30, "steps": 30},
                    "_meta": {"progressToken": 2},
                },
            )
        )
        c.wait(lambda m: m.get("method") == "notifications/progress")
        started = time.monotonic()
        kill_group(server.proc)
        lost = c.error(ResponseLost, timeout=15)
        assert lost.request_id == 2 and isinstance(lost.__cause__, ConnectError)
        assert time.monotonic() - started < 10
        with pytest.raises(ConnectError):
            t.send(request(3, "ping"))
        t.close()


@pytest.mark.real
def test_official_sdk_server_resumes_after_a_reset_connection(no_leaks):
    """The SDK's event store replays a stream after Last-Event-ID; we drop our side mid-call."""
    with sdk_server_http(resumable=True) as server:
        c = Collector()
        t = StreamableHTTPTransport(server.url, name="sdk")
        t.start(*c.callbacks())
        handshake(t, c)
        t.send(
            request(
                2,
                "tools/call",
                {
                    "name": "long_running",
                    "arguments": {"duration": 1.0, "steps": 4},
                    "_meta": {"progressToken": 2},
                },
            )
        )
        c.wait(lambda m: m.get("method") == "notifications/progress")
        with t._streams_lock:
            (stream,) = [s for s in t._streams if s.request_id == 2]
        from mcpsync.transports.http.client import shutdown_response

        shutdown_response(stream.response)  # the network drops the POST stream
        assert "4 steps" in c.response(2, timeout=15)["result"]["content"][0]["text"]
        progress = [
            m["params"]["progress"]
            for m in c.messages
            if m.get("method") == "notifications/progress"
        ]
        assert progress == [1, 2, 3, 4]  # nothing lost, nothing twice
        t.close()
        assert c.errors == []


@pytest.mark.real
def test_everything_server_raw(no_leaks):
    with everything_http() as server:
        c = Collector()
        t = StreamableHTTPTransport(server.url, name="everything")
        t.start(*c.callbacks())
        result = handshake(t, c)
        assert result["serverInfo"]["name"]
        t.send(request(2, "tools/list"))
        assert "echo" in [tool["name"] for tool in c.response(2)["result"]["tools"]]
        t.send(request(3, "tools/call", {"name": "echo", "arguments": {"message": "hi"}}))
        assert c.response(3)["result"]["content"][0]["text"] == "Echo: hi"
        assert "mcpsync-http-get[everything]" in mcpsync_threads()
        t.close()
        assert c.errors == [] and c.closed == [None]


# -- end to end through mcpsync.Session -------------------------------------------------------


@pytest.mark.real
@pytest.mark.parametrize("json_response", [False, True], ids=["sse", "json"])
def test_session_over_official_sdk_server(no_leaks, json_response):
    with sdk_server_http(json_response=json_response) as server:
        with mcpsync.Session.connect(
            server.url,
            sampling_handler=lambda p: {
                "role": "assistant",
                "content": {"type": "text", "text": "sampled"},
                "model": "m",
            },
            elicitation_handler=lambda p: {"action": "accept", "content": {"name": "Ann"}},
            roots=[{"uri": "file:///work"}],
            timeout=30,
            era="legacy",  # initialize, session id, server-to-client requests
        ) as s:
            assert s.transport.kind == "streamable-http" and s.protocol_version == VERSION
            assert {"echo", "add", "sample"} <= {tool.name for tool in s.list_tools()}
            assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
            if (
                not json_response
            ):  # the SDK sends request-related server requests on the POST stream only
                assert s.call_tool("sample", {"prompt": "p"}).content[0].text == "sampled"
                assert "Ann" in s.call_tool("elicit", {"message": "name?"}).content[0].text
            # roots/list is not tied to a request: it comes over the GET back-channel,
            # which opens in the background after initialization
            assert s.transport.wait_back_channel(30)
            assert "file:///work" in s.call_tool("list_roots", {}).content[0].text
            seen = []
            s.call_tool("long_running", {"duration": 0.2, "steps": 2}, on_progress=seen.append)
            if not json_response:
                assert [p.progress for p in seen] == [1, 2]
            futures = [s.submit_call_tool("echo", {"message": str(i)}) for i in range(20)]
            assert [f.result(timeout=30).content[0].text for f in futures] == [
                str(i) for i in range(20)
            ]


@pytest.mark.real
def test_connect_returns_with_the_get_back_channel_open(no_leaks):
    # A server may send a request over the GET stream as soon as initialization is done
    # (the conformance suite's elicitation scenario does): bring-up waits for the server to
    # answer the GET (up to back_channel_wait), so nothing it sends there is lost.
    with sdk_server_http(json_response=True) as server:
        transport = StreamableHTTPTransport(server.url, back_channel_wait=60)
        with mcpsync.Session.connect(
            transport, timeout=30, era="legacy", roots=[{"uri": "file:///at-once"}]
        ) as s:
            assert transport.wait_back_channel(0)  # open already: no waiting here
            assert "file:///at-once" in s.call_tool("list_roots", {}).content[0].text


@pytest.mark.real
def test_session_reinitializes_when_the_server_drops_it(no_leaks):
    with sdk_server_http(json_response=True) as server:
        with mcpsync.Session.connect(server.url, timeout=30, era="legacy") as s:
            old = s.transport.session_id
            requests.delete(
                server.url,
                headers={"Mcp-Session-Id": old, "MCP-Protocol-Version": VERSION},
                timeout=10,
            )
            assert s.call_tool("echo", {"message": "again"}).content[0].text == "again"
            assert s.transport.session_id not in (None, old)
            assert s.reinitializations == 1


@pytest.mark.real
def test_session_modern_era_over_official_sdk_server(no_leaks):
    with sdk_server_http(stateless=True) as server:
        with mcpsync.Session.connect(server.url, timeout=30) as s:
            assert s.era == "modern" and s.protocol_version >= "2026-07-28"
            assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
            assert s.transport.session_id is None
            assert "mcpsync-http-get[127.0.0.1]" not in mcpsync_threads()  # no GET stream


@pytest.mark.real
def test_session_over_everything_server(no_leaks):
    with everything_http() as server:
        with mcpsync.Session.connect(server.url, timeout=30) as s:
            assert s.transport.kind == "streamable-http"
            assert s.call_tool("echo", {"message": "hi"}).content[0].text == "Echo: hi"
            assert s.call_tool("get-sum", {"a": 2, "b": 3}).content[0].text


def test_session_over_scripted_sse_retry(no_leaks):
    state: dict[str, Any] = {}

    def on_call(req: Req, message: dict[str, Any]) -> None:
        if message["method"] == "tools/list":
            req.send_json(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "tools": [{"name": "test_reconnection", "inputSchema": {"type": "object"}}]
                    },
                }
            )
            return
        state["pending"] = message["id"]
        req.start_sse()
        req.event(id="event-1", retry=200, data="")

    def on_get(req: Req) -> None:
        if "last-event-id" not in req.headers:
            req.send(405)
            return
        req.start_sse()
        req.event(
            {
                "jsonrpc": "2.0",
                "id": state["pending"],
                "result": {"content": [{"type": "text", "text": "resumed"}]},
            },
            id="event-2",
        )

    with ScriptedServer(sse_server(on_call, on_get)) as server:
        with mcpsync.Session.connect(server.url, timeout=10) as s:
            assert s.call_tool("test_reconnection", {}).content[0].text == "resumed"


def test_session_falls_back_to_legacy_only_on_400_404_405(no_leaks):
    with ScriptedServer(lambda req: req.send(500, b"broken")) as server:
        with pytest.raises(HTTPStatusError) as info:
            mcpsync.Session.connect(server.url, connect_timeout=5)
        assert info.value.status == 500
        assert [r.method for r in server.requests] == ["POST"]


# -- speed --------------------------------------------------------------------------------------


def _bench_server() -> ScriptedServer:
    body_cache: dict[Any, bytes] = {}

    def handle(req: Req) -> None:
        rid = json.loads(req.body).get("id")
        body = (
            body_cache.get(rid) or json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}).encode()
        )
        req.send(200, body, {"Content-Type": "application/json"})

    return ScriptedServer(handle)


@pytest.mark.slow
def test_fast_path_is_not_slower_than_requests(no_leaks):
    """Sanity bound (the machine is shared): the fast path beats requests.Session.post."""
    import http.client

    with _bench_server() as server:
        t = transport_for(server.url)
        sink: list[Any] = []
        t.start(sink.append, lambda e: None)
        session = requests.Session()

        def rate(fn: Callable[[int], None], n: int = 300) -> float:
            fn(0)
            started = time.perf_counter()
            for i in range(n):
                fn(i)
            return n / (time.perf_counter() - started)

        conn = http.client.HTTPConnection("127.0.0.1", server.port)

        def bare(i: int) -> None:
            conn.request(
                "POST",
                "/mcp",
                json.dumps(request(i, "ping")).encode(),
                {"Content-Type": "application/json"},
            )
            json.loads(conn.getresponse().read())

        ours = max(rate(lambda i: t.send(request(i, "ping"))) for _ in range(3))
        theirs = max(
            rate(lambda i: session.post(server.url, json=request(i, "ping")).json())
            for _ in range(3)
        )
        base = max(rate(bare) for _ in range(3))
        print(f"\nbare {base:.0f}/s, transport {ours:.0f}/s, requests.post {theirs:.0f}/s")
        assert ours > theirs
        conn.close()
        session.close()
        t.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
