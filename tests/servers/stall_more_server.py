"""A stdlib-only legacy (2025-11-25) stdio server with tasks and an MCP App, that stalls at
one chosen step, for the rest of the timeout audit (tests/project/test_timeouts_audit_more.py).

Owns: the stdio stalls of the task and app timeouts (``Session.task(timeout=)``,
``TaskFuture.wait_task_id(timeout=)``, ``AppBridge(call_timeout=)``, ``apps.call(timeout=)``,
``apps.read_app_resource(timeout=)``).

    python tests/servers/stall_more_server.py

Capabilities: tools, resources, tasks (``tasks.requests.tools.call``, ``list``, ``cancel``).
Tools (each an app: ``_meta.ui.resourceUri``):

- ``echo {message}``: answers at once; its app ``ui://stall/ok`` reads at once.
- ``hang``: never answered (also when sent as a task: no ``CreateTaskResult``).
- ``slow`` (``taskSupport`` "optional"): with ``task``, a ``CreateTaskResult`` at once for a
  task that stays ``working``; every ``tasks/get`` and ``tasks/result`` is never answered.
- ``hang_app``: answers at once; its app ``ui://stall/hang`` is never read (``resources/read``
  of it is never answered).

Every request received is noted on stderr as ``got METHOD``.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

_write = threading.Lock()
MIME = "text/html;profile=mcp-app"
HTML = "<!doctype html><html><body>stall</body></html>"


def send(message: dict[str, Any]) -> None:
    with _write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def reply(rid: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def tool(name: str, uri: str, **extra: Any) -> dict[str, Any]:
    schema = {"type": "object"}
    return {"name": name, "inputSchema": schema, "_meta": {"ui": {"resourceUri": uri}}, **extra}


TOOLS = [
    tool("echo", "ui://stall/ok"),
    tool("hang", "ui://stall/ok", execution={"taskSupport": "optional"}),
    tool("slow", "ui://stall/ok", execution={"taskSupport": "optional"}),
    tool("hang_app", "ui://stall/hang"),
]


def handle(message: dict[str, Any], tasks: list[str]) -> None:
    method, rid = message.get("method"), message.get("id")
    if rid is None or method is None:
        return
    sys.stderr.write(f"got {method}\n")
    sys.stderr.flush()
    params = message.get("params") or {}
    if method == "initialize":
        caps: dict[str, Any] = {
            "tools": {},
            "resources": {},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        }
        reply(rid, {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": caps,
            "serverInfo": {"name": "stall-more", "version": "1"},
        })  # fmt: skip
    elif method == "server/discover":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
    elif method == "ping":
        reply(rid, {})
    elif method == "tools/list":
        reply(rid, {"tools": TOOLS})
    elif method == "tools/call":
        name = params.get("name")
        if name == "hang":
            return
        if name == "slow" and "task" in params:
            task_id = f"task-{len(tasks) + 1}"
            tasks.append(task_id)
            task = {
                "taskId": task_id,
                "status": "working",
                "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z",
                "ttl": 600000,
                "pollInterval": 100,
            }
            reply(rid, {"task": task})
            return
        text = str((params.get("arguments") or {}).get("message", name))
        reply(rid, {"content": [{"type": "text", "text": text}]})
    elif method in ("tasks/get", "tasks/result"):
        return  # never answered
    elif method == "tasks/cancel":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no"}})
    elif method == "resources/list":
        reply(rid, {"resources": []})
    elif method == "resources/read":
        uri = params.get("uri")
        if uri == "ui://stall/hang":
            return
        reply(rid, {"contents": [{"uri": uri, "mimeType": MIME, "text": HTML}]})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})


def main() -> int:
    tasks: list[str] = []
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message, tasks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
