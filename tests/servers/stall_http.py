"""In-process HTTP MCP peers (stdlib only) that stall one chosen step, for the timeout audit
(tests/project/test_timeouts_audit.py).

Owns: the HTTP stalls the audit measures bounds against: a handshake-era (2025-11-25)
server over Streamable HTTP (``/mcp``) and over legacy HTTP+SSE (``/sse`` + ``/messages``)
that answers ``server/discover`` with -32601, ``initialize``, ``tools/list`` and the tool
``echo``, and stalls what ``stalls`` names:

- ``stalls[METHOD or "tools/call:TOOL"] = "silent"``: read the request, never answer;
- ``= "trickle"``: Streamable HTTP: a JSON reply, one byte every 0.2 s;
- ``= "keepalive"``: Streamable HTTP: an SSE stream of comments every 0.2 s, never the reply;
- ``unread_body_over``: a POST whose body is larger than this many bytes is never read
  (the server holds the connection, as one that stopped reading would);
- ``get``: the Streamable GET back-channel: ``"405"`` (none, the default), ``"silent"``
  (no response headers ever), ``"idle"`` (headers, then nothing). ``gets`` is a queue of the
  monotonic times of the GETs.

Every stalled handler waits on ``stop`` (bounded), set by ``close()``. ``silent_tcp()``
is a port that completes TCP connections (the kernel's backlog) but never accepts,
reads or answers.
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["StallHTTP", "StallWeb", "silent_tcp"]

#: no stall lasts longer than this: then the connection is closed (the tests' bounds are 1-2 s,
#: so a client that ignores its bound fails at about HOLD s instead of hanging the run)
HOLD = 8.0


class StallHTTP:
    def __init__(
        self,
        stalls: dict[str, str] | None = None,
        *,
        unread_body_over: int | None = None,
        get: str = "405",
    ) -> None:
        self.stalls = dict(stalls or {})
        self.unread_body_over = unread_body_over
        self.get = get
        self.gets: queue.Queue[float] = queue.Queue()  # the monotonic time of each GET
        self.stop = threading.Event()
        self.received: queue.Queue[str] = queue.Queue()  # methods, as they are read
        self._streams: dict[str, queue.Queue[bytes | None]] = {}
        handler = type("Handler", (_Handler,), {"peer": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="test-stall-http", daemon=True
        )
        self.thread.start()
        base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url, self.sse_url = base + "/mcp", base + "/sse"

    def close(self) -> None:
        self.stop.set()
        for q in list(self._streams.values()):
            q.put(None)
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def __enter__(self) -> StallHTTP:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the server says ------------------------------------------------------------

    def stall_of(self, message: dict[str, Any]) -> str | None:
        method = message.get("method")
        if method == "tools/call":
            tool = (message.get("params") or {}).get("name")
            return self.stalls.get(f"tools/call:{tool}") or self.stalls.get(method)
        return self.stalls.get(str(method))

    @staticmethod
    def answer(message: dict[str, Any]) -> dict[str, Any]:
        rid, method = message.get("id"), message.get("method")
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stall-http", "version": "1"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {
                "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "hang")]
            }
        elif method == "tools/call" and params.get("name") == "echo":
            text = str((params.get("arguments") or {}).get("message", ""))
            result = {"content": [{"type": "text", "text": text}]}
        else:
            return {
                "jsonrpc": "2.0",
                "id": rid,
                "error": {"code": -32601, "message": f"no {method}"},
            }
        return {"jsonrpc": "2.0", "id": rid, "result": result}


class _Handler(BaseHTTPRequestHandler):
    peer: StallHTTP
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _hold(self) -> None:
        self.peer.stop.wait(HOLD)
        self.close_connection = True

    def _send(
        self, status: int, body: bytes = b"", ctype: str = "application/json", **headers: str
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _read(self) -> dict[str, Any] | None:
        """The request's JSON body, or None when it is left unread (the server stalls)."""
        length = int(self.headers.get("Content-Length") or 0)
        if self.peer.unread_body_over is not None and length > self.peer.unread_body_over:
            self.peer.received.put("<unread body>")
            self._hold()
            return None
        message = json.loads(self.rfile.read(length) or b"{}")
        self.peer.received.put(str(message.get("method")))
        return message

    def do_DELETE(self) -> None:
        self._send(200)

    def do_GET(self) -> None:
        if self.path.startswith("/sse"):
            return self._legacy_stream()
        self.peer.gets.put(time.monotonic())
        if self.peer.get == "405":
            return self._send(405)
        if self.peer.get == "silent":
            return self._hold()
        self.send_response(200)  # "idle": headers, then nothing
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.flush()
        self._hold()

    def do_POST(self) -> None:
        if self.path.startswith("/messages"):
            return self._legacy_post()
        message = self._read()
        if message is None:
            return
        if "id" not in message or "method" not in message:
            return self._send(202)
        stall = self.peer.stall_of(message)
        if stall == "silent":
            return self._hold()
        reply = json.dumps(self.peer.answer(message)).encode()
        if stall == "trickle":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply) + 4096))
            self.end_headers()
            padded = reply + b" " * 4096
            give_up = time.monotonic() + HOLD
            with contextlib.suppress(OSError):
                for i in range(len(padded)):
                    if self.peer.stop.wait(0.2) or time.monotonic() > give_up:
                        break
                    self.wfile.write(padded[i : i + 1])
                    self.wfile.flush()
            self.close_connection = True
            return
        if stall == "keepalive":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            give_up = time.monotonic() + HOLD
            with contextlib.suppress(OSError):
                while not self.peer.stop.wait(0.2) and time.monotonic() < give_up:
                    self.wfile.write(b": still working\n\n")
                    self.wfile.flush()
            self.close_connection = True
            return
        headers = {"Mcp-Session-Id": "stall-1"} if message["method"] == "initialize" else {}
        self._send(200, reply, **headers)

    # -- legacy HTTP+SSE -------------------------------------------------------------------

    def _legacy_stream(self) -> None:
        key = str(len(self.peer._streams) + 1)
        stream: queue.Queue[bytes | None] = queue.Queue()
        self.peer._streams[key] = stream
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if self.peer.stalls.get("endpoint") == "silent":
            self.wfile.write(b": hello\n\n")
            self.wfile.flush()
            return self._hold()
        self.wfile.write(f"event: endpoint\ndata: /messages?session_id={key}\n\n".encode())
        self.wfile.flush()
        deadline = time.monotonic() + 600  # the session's stream: until close(), bounded
        with contextlib.suppress(OSError):
            while time.monotonic() < deadline and not self.peer.stop.is_set():
                try:
                    data = stream.get(timeout=0.5)
                except queue.Empty:
                    continue
                if data is None:
                    break
                self.wfile.write(b"event: message\ndata: " + data + b"\n\n")
                self.wfile.flush()
        self.close_connection = True

    def _legacy_post(self) -> None:
        key = self.path.partition("session_id=")[2]
        message = self._read()
        if message is None:
            return
        self._send(202)
        if "id" not in message or "method" not in message:
            return
        if self.peer.stall_of(message) is not None:
            return  # accepted, never answered on the stream
        stream = self.peer._streams.get(key)
        if stream is not None:
            stream.put(json.dumps(self.peer.answer(message)).encode())


@contextlib.contextmanager
def silent_tcp() -> Iterator[str]:
    """A URL whose port completes TCP connections but never accepts, reads or answers (for
    ``HOLD`` s: then the port closes, which resets the connections still waiting)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    give_up = threading.Timer(HOLD, sock.close)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        give_up.start()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        give_up.cancel()
        sock.close()


class _WebHandler(BaseHTTPRequestHandler):
    """``StallWeb``'s: the paths in ``stalled`` stall (``mode``), the others answer 404;
    a POST to ``/mcp`` answers 401 naming ``/prm`` as its protected resource metadata."""

    web: StallWeb
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _plain(self, status: int, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        prm = f"{self.web.base}/prm"
        self._plain(401, WWW_Authenticate=f'Bearer resource_metadata="{prm}"')

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        self.web.requested.put(path)
        if self.web.stalled is not None and path not in self.web.stalled:
            return self._plain(404)
        if self.web.mode == "silent":
            self.web.stop.wait(HOLD)
            self.close_connection = True
            return
        body = b'{"pad": "' + b"x" * 4096 + b'"}'  # "trickle": one byte every 0.2 s
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        give_up = time.monotonic() + HOLD
        with contextlib.suppress(OSError):
            for i in range(len(body)):
                if self.web.stop.wait(0.2) or time.monotonic() > give_up:
                    break
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
        self.close_connection = True


class StallWeb:
    """A plain web server for the URLs mcpsync fetches on a server's word (cards, OAuth
    metadata, icons): GETs of ``stalled`` paths (None: every path) get ``mode``:
    ``"silent"`` (no response ever) or ``"trickle"`` (a JSON body, one byte every 0.2 s);
    other paths 404. ``requested`` is a queue of the paths asked for. Stalls end after
    ``HOLD`` s."""

    def __init__(self, mode: str = "trickle", stalled: set[str] | None = None) -> None:
        self.mode, self.stalled = mode, stalled
        self.stop = threading.Event()
        self.requested: queue.Queue[str] = queue.Queue()
        handler = type("WebHandler", (_WebHandler,), {"web": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="test-stall-web", daemon=True
        )
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> StallWeb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
