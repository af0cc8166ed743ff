"""The near-zero-cost stdio MCP server of ``benchmarks/scale.py`` (hundreds at once).

Owns: a server that costs as little as a Python process can: run with ``python -S -E``
(no site, no environment), it imports only ``sys`` and ``json``, answers ``initialize``,
``ping``, ``tools/list`` (one tool, ``echo``) and ``tools/call echo``; any other request gets
-32601 (method not found); notifications are ignored. It exits at EOF on stdin.
"""

import json
import sys

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
TOOL = {
    "name": "echo",
    "description": "Echo the message back.",
    "inputSchema": {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    },
}


def answer(message):
    method = message.get("method")
    params = message.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tiny", "version": "1"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call" and params.get("name") == "echo":
        text = str((params.get("arguments") or {}).get("message", ""))
        return {"content": [{"type": "text", "text": text}]}
    return None


def main():
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue  # a notification or a response
        result = answer(message)
        if result is None:
            error = {"code": -32601, "message": "method not found"}
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        else:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
