"""A stdio MCP server (2025-11-25, no SDK) that stops reading its stdin for a while.

For tests/session/test_call_bound.py. Tools: ``pause {"seconds": S}`` answers, then reads nothing
from stdin for S seconds (a client's big write stalls on the full pipe), saying so on
stderr, then reads on;
``trickle {"every": S}`` writes its reply (about 80 bytes) a byte every S seconds;
``echo {"message": M}`` answers with the length of M (``len=N``).
"""

from __future__ import annotations

import json
import sys
import time


def reply(rid: object, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    try:
        for line in sys.stdin:
            message = json.loads(line)
            method, rid = message.get("method"), message.get("id")
            if rid is None:
                continue
            params = message.get("params") or {}
            if method == "initialize":
                reply(rid, {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "pause-reading", "version": "1"},
                })  # fmt: skip
            elif method == "tools/call" and params.get("name") == "pause":
                reply(rid, {"content": [{"type": "text", "text": "paused"}]})
                seconds = float(params["arguments"]["seconds"])
                sys.stderr.write(f"pausing: not reading stdin for {seconds:g} s\n")
                sys.stderr.flush()
                time.sleep(seconds)
            elif method == "tools/call" and params.get("name") == "trickle":
                text = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": []}}) + "\n"
                for char in text:
                    sys.stdout.write(char)
                    sys.stdout.flush()
                    time.sleep(float(params["arguments"]["every"]))
            elif method == "tools/call":
                size = len(str((params.get("arguments") or {}).get("message", "")))
                reply(rid, {"content": [{"type": "text", "text": f"len={size}"}]})
            elif method == "ping":
                reply(rid, {})
            else:
                error = {"code": -32601, "message": f"no {method}"}
                sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")
                sys.stdout.flush()
    except (BrokenPipeError, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()
