"""A small, fast MCP Streamable HTTP endpoint (stateless, JSON responses) on the stdlib.

Owns: the HTTP peer of ``benchmarks/bench.py``. It answers ``POST /mcp`` with one
``application/json`` body per JSON-RPC request (``202 Accepted`` for notifications and
responses), never opens an SSE stream (``GET`` and ``DELETE`` get ``405``) and issues no
``Mcp-Session-Id``: the stateless JSON mode of the Streamable HTTP transport. Methods:
``initialize``, ``ping``, ``tools/list`` and ``tools/call`` with the demo server's ``echo``
and ``big`` {size_bytes} tools.

It parses HTTP/1.1 by hand (request line, headers, ``Content-Length`` or chunked body,
keep-alive) on a thread per connection, and writes each ``big`` result from a cached
encoding without copying it, so that the client, not this server, dominates a benchmark.

Run: ``python benchmarks/http_server.py [--port N]``; once listening it prints one line on
stdout, ``listening http://127.0.0.1:<port>/mcp``, and serves until killed or stdin closes.
"""

from __future__ import annotations

import argparse
import json
import socket
import socketserver
import sys
import threading
from typing import Any

__all__ = ["MCPHandler", "serve", "main"]

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
PATH = "/mcp"
MAX_BIG_BYTES = 512 * 1024 * 1024

_TOOLS = [
    {
        "name": "echo",
        "description": "Echo the message back.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
    {
        "name": "big",
        "description": "Return a text of exactly `size_bytes` bytes.",
        "inputSchema": {
            "type": "object",
            "properties": {"size_bytes": {"type": "integer", "minimum": 0}},
            "required": ["size_bytes"],
        },
    },
]

_big_cache: dict[int, bytes] = {}
_big_lock = threading.Lock()


def _big_result(size: int) -> bytes:
    """The encoded ``result`` object of ``big`` (cached: the 4 most recent sizes)."""
    with _big_lock:
        cached = _big_cache.get(size)
        if cached is None:
            cached = b'{"content":[{"type":"text","text":"' + b"x" * size + b'"}]}'
            if len(_big_cache) >= 4:
                _big_cache.pop(next(iter(_big_cache)))
            _big_cache[size] = cached
        return cached


def _text(text: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def _dispatch(message: dict[str, Any]) -> Any:
    """The ``result`` for a request: a dict, raw encoded bytes, or a ``("error", ...)`` tuple."""
    method = message.get("method")
    params = message.get("params") or {}
    if method == "tools/call":
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "echo":
            text = args.get("message")
            return _text(text) if isinstance(text, str) else _text("bad message", is_error=True)
        if name == "big":
            size = args.get("size_bytes")
            if (
                not isinstance(size, int)
                or isinstance(size, bool)
                or not 0 <= size <= MAX_BIG_BYTES
            ):
                return _text("big: bad size_bytes", is_error=True)
            return _big_result(size)
        return ("error", -32602, f"Unknown tool: {name}")
    if method == "ping":
        return {}
    if method == "initialize":
        offered = params.get("protocolVersion")
        version = offered if offered in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[-1]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcpsync-bench-http", "version": "0.1.0"},
        }
    if method == "tools/list":
        return {"tools": _TOOLS}
    return ("error", -32601, f"Method not found: {method}")


class MCPHandler(socketserver.StreamRequestHandler):
    """One keep-alive HTTP/1.1 connection."""

    disable_nagle_algorithm = True
    rbufsize = 65536

    def handle(self) -> None:
        rfile, sock = self.rfile, self.connection
        try:
            while True:
                request_line = rfile.readline(65537)
                if not request_line:
                    return
                if request_line in (b"\r\n", b"\n"):
                    continue
                try:
                    method, target, version = request_line.decode("latin-1").split()
                except ValueError:
                    self._respond(sock, 400, b"", close=True)
                    return
                length = 0
                chunked = False
                close = version == "HTTP/1.0"
                while True:
                    line = rfile.readline(65537)
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"transfer-encoding":
                        chunked = b"chunked" in value.lower()
                    elif name == b"connection":
                        token = value.strip().lower()
                        close = token == b"close" or (close and token != b"keep-alive")
                body = (
                    self._read_chunked(rfile) if chunked else rfile.read(length) if length else b""
                )
                if target.split("?", 1)[0] != PATH:
                    self._respond(sock, 404, b"", close=close)
                elif method != "POST":
                    self._respond(sock, 405, b"", close=close, extra=b"Allow: POST\r\n")
                else:
                    self._post(sock, body, close)
                if close:
                    return
        except (ConnectionError, OSError, ValueError):
            return

    @staticmethod
    def _read_chunked(rfile: Any) -> bytes:
        parts = []
        while True:
            size = int(rfile.readline(65537).split(b";", 1)[0], 16)
            if size == 0:
                while rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(rfile.read(size))
            rfile.readline(65537)

    def _post(self, sock: socket.socket, body: bytes, close: bool) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            error = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32700, "message": "Parse error"},
            }
            self._respond(sock, 400, json.dumps(error).encode(), close=close)
            return
        if not isinstance(message, dict):
            error = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "No batches"},
            }
            self._respond(sock, 400, json.dumps(error).encode(), close=close)
            return
        if "method" not in message or "id" not in message:  # a notification or a response
            self._respond(sock, 202, b"", close=close)
            return
        rid = json.dumps(message["id"]).encode()
        result = _dispatch(message)
        if isinstance(result, bytes):  # a cached big result: written without a copy
            head = b'{"jsonrpc":"2.0","id":' + rid + b',"result":'
            self._respond(sock, 200, head, close=close, tail=(result, b"}"))
            return
        if isinstance(result, tuple):
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": result[1], "message": result[2]},
            }
        else:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self._respond(sock, 200, json.dumps(reply, separators=(",", ":")).encode(), close=close)

    @staticmethod
    def _respond(
        sock: socket.socket,
        status: int,
        body: bytes,
        *,
        close: bool,
        extra: bytes = b"",
        tail: tuple[bytes, ...] = (),
    ) -> None:
        reason = {
            200: b"OK",
            202: b"Accepted",
            400: b"Bad Request",
            404: b"Not Found",
            405: b"Method Not Allowed",
        }
        length = len(body) + sum(len(t) for t in tail)
        head = b"HTTP/1.1 %d %s\r\n" % (status, reason.get(status, b"Error"))
        if status == 200:
            head += b"Content-Type: application/json\r\n"
        head += b"Content-Length: %d\r\n%s%s\r\n" % (
            length,
            extra,
            b"Connection: close\r\n" if close else b"",
        )
        sock.sendall(head + body)
        for part in tail:
            sock.sendall(part)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


def serve(port: int = 0, host: str = "127.0.0.1") -> _Server:
    """Bind and return the server (not yet serving)."""
    return _Server((host, port), MCPHandler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = serve(args.port)
    port = server.server_address[1]
    thread = threading.Thread(
        target=server.serve_forever, name="mcpsync-bench-http[serve]", daemon=True
    )
    thread.start()
    print(f"listening http://127.0.0.1:{port}{PATH}", flush=True)
    try:
        sys.stdin.read()  # serve until the parent closes our stdin (or kills us)
    except KeyboardInterrupt:
        pass
    server.shutdown()
    server.server_close()
    thread.join(timeout=2.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
