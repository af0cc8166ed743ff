"""A Streamable HTTP MCP server (2025-11-25, JSON replies) that expires its session on a schedule.

Run: ``python http_expiring_server.py --expire-every N --expiries K``. It prints
``http_expiring_server ready: http://127.0.0.1:<port>/mcp`` on stderr once it listens.

Spec-following session handling: ``initialize`` (without ``Mcp-Session-Id``) opens a new
session and names it in the reply; a later POST must carry the current session id: an
expired or unknown one gets 404, none at all gets 400. After the current session has
answered N ``tools/call`` requests it expires (K times in all). With ``--forget-at-once`` every
session expires at once, every time: each request after ``initialize`` gets 404 (and is not
run); notifications are still accepted; with ``--gather N`` too, the first N requests are
held until all N have come (at most 10 s), so that N callers are under way at once however
loaded the machine is. ``GET /stats`` (not MCP)
returns the counters as JSON: initializes, calls answered, 404s sent, requests that came
without a session id, expiries.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

VERSION = "2025-11-25"


class State:
    def __init__(
        self, expire_every: int, expiries: int, forget_at_once: bool = False, gather: int = 0
    ) -> None:
        self.expire_every = expire_every
        self.forget_at_once = forget_at_once
        self.gather = gather
        self.gathered = threading.Condition()
        self.arrived = 0
        self.max_expiries = expiries
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.current: str | None = None
        self.calls_in_session = 0
        self.stats = {
            "initializes": 0,
            "calls": 0,
            "not_found": 0,
            "without_session": 0,
            "expiries": 0,
        }


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(
            self, status: int, body: Any = None, headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/stats":
                with state.lock:
                    self._send(200, dict(state.stats))
                return
            if self.headers.get("Mcp-Session-Id") is None:
                with state.lock:
                    state.stats["without_session"] += 1
                self._send(400, {"error": "Mcp-Session-Id required"})
                return
            self._send(405)  # no GET stream

        def do_DELETE(self) -> None:
            self._send(200)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            message = json.loads(self.rfile.read(length))
            session = self.headers.get("Mcp-Session-Id")
            method = message.get("method")
            if state.gather and "id" in message and method != "initialize":
                with state.gathered:
                    state.arrived += 1
                    if state.arrived <= state.gather:
                        state.gathered.notify_all()
                        state.gathered.wait_for(lambda: state.arrived >= state.gather, 10)
            with state.lock:
                if method == "initialize":
                    sid = f"session-{next(state.ids)}"
                    state.current = sid
                    state.calls_in_session = 0
                    state.stats["initializes"] += 1
                    result = {
                        "protocolVersion": VERSION,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "expiring", "version": "1"},
                    }
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                    self._send(200, reply, {"Mcp-Session-Id": sid})
                    return
                if session is None:
                    state.stats["without_session"] += 1
                    self._send(
                        400,
                        {
                            "jsonrpc": "2.0",
                            "id": None,
                            "error": {"code": -32600, "message": "Mcp-Session-Id required"},
                        },
                    )
                    return
                if session != state.current or (state.forget_at_once and "id" in message):
                    state.stats["not_found"] += 1
                    self._send(
                        404,
                        {
                            "jsonrpc": "2.0",
                            "id": None,
                            "error": {"code": -32001, "message": "Session not found"},
                        },
                    )
                    return
                if "id" not in message:
                    self._send(202)
                    return
                if method == "tools/list":
                    tools = [{"name": "echo", "inputSchema": {"type": "object"}}]
                    self._send(
                        200, {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}}
                    )
                    return
                if method != "tools/call":
                    self._send(200, {"jsonrpc": "2.0", "id": message["id"], "result": {}})
                    return
                state.stats["calls"] += 1
                state.calls_in_session += 1
                if (
                    state.calls_in_session >= state.expire_every
                    and state.stats["expiries"] < state.max_expiries
                ):
                    state.current = None  # this session is gone: its id now gets 404
                    state.stats["expiries"] += 1
                text = str(message["params"]["arguments"].get("message", ""))
                content = [{"type": "text", "text": text}]
                self._send(
                    200, {"jsonrpc": "2.0", "id": message["id"], "result": {"content": content}}
                )

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # a backlog of 5 (the default) drops the SYNs of many threads connecting at once:
    # each such connect then waits ~1 s for the retransmission
    request_queue_size = 128


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--expire-every", type=int, default=50)
    parser.add_argument("--expiries", type=int, default=6)
    parser.add_argument("--forget-at-once", action="store_true")
    parser.add_argument("--gather", type=int, default=0)
    args = parser.parse_args()
    state = State(args.expire_every, args.expiries, args.forget_at_once, args.gather)
    server = Server(("127.0.0.1", 0), make_handler(state))
    port = server.server_address[1]
    print(f"http_expiring_server ready: http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
