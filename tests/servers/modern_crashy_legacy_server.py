"""A legacy stdio server that dies on any request before ``initialize`` (like mcp 1.3.0 did).

Owns: a minimal, stdlib-only 2025-11-25 server for the modern-era tests: the
``server/discover`` probe makes it exit with status 1 (with ``--hang`` it first stays
silent until the next message arrives, as mcp 1.3.0 does), so a client must start it again
and go straight to ``initialize``. Tools: ``echo``.
"""

from __future__ import annotations

import json
import sys


def reply(rid, result) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> int:
    hang = "--hang" in sys.argv
    initialized = False
    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method == "initialize":
            initialized = True
            reply(rid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "crashy", "version": "1"}})  # fmt: skip
        elif not initialized and rid is not None:
            print(f"crashy: request {method!r} before initialize", file=sys.stderr, flush=True)
            if not hang:
                return 1
            sys.stdin.readline()  # its session died: silent until the next message, then gone
            return 1
        elif method == "tools/list":
            reply(rid, {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
        elif method == "tools/call":
            text = message["params"].get("arguments", {}).get("message", "")
            reply(rid, {"content": [{"type": "text", "text": text}]})
        elif rid is not None:
            sys.stdout.write(
                json.dumps(
                    {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "nope"}}
                )
                + "\n"
            )
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
