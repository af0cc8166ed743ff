"""A stdlib-only legacy (2025-11-25) stdio server that stalls at one chosen step, for the
timeout audit (tests/project/test_timeouts_audit.py).

Owns: the stdio stalls each timeout parameter of the public API is measured against.

    python tests/servers/stall_server.py [--hang METHOD ...] [--deaf]

``--hang METHOD``: never answer METHOD (repeatable; ``*`` for every request: a silent
server). ``server/discover`` is answered -32601 (a handshake-era server) unless hung.
``--deaf``: ignore SIGTERM and stdin EOF (a server that will not stop: close() must
escalate to SIGKILL).

Capabilities: tools, resources, prompts. Tools: ``echo {message}``; ``hang`` (never
answers); ``progress`` (never answers, but sends ``notifications/progress`` for the
request's token every 0.2 s until the client cancels). ``resources/read`` and
``prompts/get`` answer unless hung. Every request received is noted on stderr as
``got METHOD``, so a test can wait for the server to have read a request.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import Any

_write = threading.Lock()
_cancelled: set[Any] = set()


def send(message: dict[str, Any]) -> None:
    with _write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def reply(rid: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def progress_forever(rid: Any, token: Any) -> None:
    n = 0
    while rid not in _cancelled:
        n += 1
        params = {"progressToken": token, "progress": n}
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        time.sleep(0.2)  # the server's own pace: a progress report every 0.2 s


def handle(message: dict[str, Any], hang: set[str]) -> None:
    method, rid = message.get("method"), message.get("id")
    if method == "notifications/cancelled":
        _cancelled.add((message.get("params") or {}).get("requestId"))
        return
    if rid is None or method is None:
        return
    sys.stderr.write(f"got {method}\n")
    sys.stderr.flush()
    if "*" in hang or method in hang:
        return
    params = message.get("params") or {}
    if method == "server/discover":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not found"}})
    elif method == "initialize":
        reply(rid, {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
            "serverInfo": {"name": "stall", "version": "1"},
        })  # fmt: skip
    elif method == "ping":
        reply(rid, {})
    elif method == "tools/list":
        tools = [
            {"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "hang", "progress")
        ]
        reply(rid, {"tools": tools})
    elif method == "tools/call":
        name = params.get("name")
        if name == "echo":
            text = str((params.get("arguments") or {}).get("message", ""))
            reply(rid, {"content": [{"type": "text", "text": text}]})
        elif name == "progress":
            token = (params.get("_meta") or {}).get("progressToken")
            threading.Thread(target=progress_forever, args=(rid, token), daemon=True).start()
    elif method == "resources/read":
        uri = params.get("uri")
        reply(rid, {"contents": [{"uri": uri, "text": "r"}]})
    elif method == "prompts/get":
        reply(rid, {"messages": []})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not found"}})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang", action="append", default=[], metavar="METHOD")
    parser.add_argument("--deaf", action="store_true")
    args = parser.parse_args()
    if args.deaf:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    hang = set(args.hang)
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message, hang)
    while args.deaf:  # stdin closed: a deaf server lives on until SIGKILL
        time.sleep(3600)


if __name__ == "__main__":
    main()
