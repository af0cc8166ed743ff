"""An MCP server over HTTP/1.1 (raw sockets, in the test process) that stalls the wire.

Owns: ``CallBoundHTTP``, for tests/session/test_call_bound.py: Streamable HTTP on ``/mcp`` (JSON
replies, a session id) and the 2024-11-05 HTTP+SSE transport (``GET /sse``, then POSTs to
``/messages``), keep-alive connections, answering ``initialize``, ``ping``,
``tools/list`` and ``tools/call``. How it misbehaves:

- a request whose body is over ``STALL_BODY`` bytes: it reads 64 KiB of it and then stops
  reading that connection (held open until ``stop()``): the client's write stalls;
- ``tools/call`` of ``trickle``: a JSON reply of ``TRICKLE_BYTES`` bytes, 1 byte every
  ``every`` seconds (``trickle_head``: the status line and header fields too; over legacy
  SSE the POST's 202 reply is the one trickled; ``trickle_sse``: an SSE reply whose head
  comes at once, then its one event a byte at a time);
- any other tool: its name echoed at once.

``served`` lists the methods answered, ``stalled`` is set once a body was left unread,
``connections`` counts the connections accepted, ``calls`` lists each ``tools/call`` (or
body left unread) with the number of the connection it came on. Every wait is on the stop event:
``stop()`` ends every connection at once and joins every thread it started.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

__all__ = ["CallBoundHTTP", "STALL_BODY", "TRICKLE_BYTES"]

STALL_BODY = 1 << 20
TRICKLE_BYTES = 2000
_MAX_HEAD = 64 * 1024


class CallBoundHTTP:
    def __init__(self, every: float = 0.2) -> None:
        self.every = every
        self.served: list[str] = []
        self.stalled = threading.Event()
        self.connections = 0
        self.calls: list[tuple[str, int]] = []  # (tool, or "unread body"; connection number)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._conns: set[socket.socket] = set()
        self._sse: socket.socket | None = None  # the legacy event stream
        self._sse_lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.sse_url = f"http://127.0.0.1:{self.port}/sse"
        self._accepter = threading.Thread(
            target=self._accept, name="test-call-bound-http", daemon=True
        )
        self._accepter.start()

    def __enter__(self) -> CallBoundHTTP:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._accepter.join(5)
        self._listener.close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in threads:
            thread.join(5)
        assert not any(t.is_alive() for t in threads), "a call-bound-http thread is stuck"

    # -- serving ------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                thread = threading.Thread(
                    target=self._serve, args=(conn, self.connections),
                    name="test-call-bound-conn", daemon=True,
                )  # fmt: skip
                self._conns.add(conn)
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        buffered = b""
        try:
            conn.settimeout(30)
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buffered:
                    piece = conn.recv(65536)
                    if not piece or len(buffered) > _MAX_HEAD:
                        return
                    buffered += piece
                head, _, buffered = buffered.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                fields = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (x.partition(":") for x in lines[1:])
                }
                length = int(fields.get("content-length", "0"))
                if length > STALL_BODY:
                    while len(buffered) < 64 * 1024:
                        piece = conn.recv(65536)
                        if not piece:
                            return
                        buffered += piece
                    self.calls.append(("unread body", number))
                    self.stalled.set()
                    self._stop.wait()  # never read the rest
                    return
                while len(buffered) < length:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    buffered += piece
                body, buffered = buffered[:length], buffered[length:]
                if not self._answer(conn, method, path, body, number):
                    return
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _answer(
        self, conn: socket.socket, method: str, path: str, body: bytes, number: int
    ) -> bool:
        """Answer one request; False when the connection is to end (the event stream)."""
        if method == "GET" and path.startswith("/sse"):
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-cache\r\n\r\nevent: endpoint\ndata: /messages?s=1\n\n"
            )
            with self._sse_lock:
                self._sse = conn
            self._stop.wait()
            return False
        if method == "GET":
            self._send(conn, 405, b"")
            return True
        if method == "DELETE":
            self._send(conn, 200, b"")
            return True
        message = json.loads(body)
        rid, name = message.get("id"), message.get("method")
        self.served.append(str(name))
        legacy = path.startswith("/messages")
        if rid is None:
            self._send(conn, 202, b"")
            return True
        result: dict[str, Any]
        tool = str((message.get("params") or {}).get("name"))
        if name == "tools/call":
            self.calls.append((tool, number))
        if name == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "call-bound-http", "version": "1"},
            }
        elif name == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "trickle")]
            result = {"tools": tools}
        elif name == "tools/call":
            text = "x" * TRICKLE_BYTES if tool.startswith("trickle") else tool
            result = {"content": [{"type": "text", "text": text}]}
        elif name == "server/discover":
            error = {"code": -32601, "message": "no server/discover"}
            reply = json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode()
            self._send(conn, 200, reply)
            return True
        else:
            result = {}
        reply = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
        trickle = name == "tools/call" and tool in ("trickle", "trickle_head")
        if legacy:  # the reply goes over the event stream; the POST gets 202
            self._send(conn, 202, b"", trickle=trickle, whole=True)
            with self._sse_lock:
                stream = self._sse
            if stream is not None:
                stream.sendall(b"event: message\ndata: " + reply + b"\n\n")
            return True
        if name == "tools/call" and tool == "trickle_sse":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            event = b"event: message\ndata: " + reply + b"\n\n"
            for i in range(len(event)):
                conn.sendall(event[i : i + 1])
                if self._stop.wait(self.every):
                    break
            return False  # the stream ends with the connection
        extra = {"Mcp-Session-Id": "stall-1"} if name == "initialize" else {}
        self._send(conn, 200, reply, extra, trickle=trickle, whole=tool == "trickle_head")
        return True

    def _send(
        self,
        conn: socket.socket,
        status: int,
        body: bytes,
        extra: dict[str, str] | None = None,
        *,
        trickle: bool = False,
        whole: bool = False,
    ) -> None:
        fields = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        fields.update(extra or {})
        head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
        data = head.encode("latin-1") + b"\r\n" + body
        if not trickle:
            conn.sendall(data)
            return
        start = 0 if whole else len(data) - len(body)
        conn.sendall(data[:start])
        for i in range(start, len(data)):
            conn.sendall(data[i : i + 1])
            if self._stop.wait(self.every):
                return
