"""A 2025-11-25 stdio server with tasks kept on disk, so a task outlives the server process.

Usage: ``python tasks_server.py STORE_DIR``. One tool, ``slow`` (``execution.taskSupport``
"required"): ``tools/call`` with ``task`` makes a task (a JSON file in STORE_DIR) and answers
``CreateTaskResult`` at once. The task stays ``working`` until the file ``STORE_DIR/release``
exists (the test decides when it ends); then ``tasks/get`` says ``completed`` and
``tasks/result`` answers the ``CallToolResult`` ("done: <message>"). Every server started on
the same STORE_DIR sees the same tasks: kill one, start another, the task is still there.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any

STORE = sys.argv[1]
TOOL = {
    "name": "slow",
    "description": "finishes when the test releases it",
    "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
    "execution": {"taskSupport": "required"},
}


def task_of(task_id: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(STORE, f"task-{task_id}.json")) as f:
            stored: dict[str, Any] = json.load(f)
    except FileNotFoundError:
        return None
    done = os.path.exists(os.path.join(STORE, "release"))
    return {
        "taskId": task_id,
        "status": "completed" if done else "working",
        "ttl": 60000,
        "pollInterval": 20,
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
        "_message": stored["message"],
    }


def answer(msg: dict[str, Any]) -> dict[str, Any] | None:
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        caps = {
            "tools": {},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        }
        return {"protocolVersion": "2025-11-25", "capabilities": caps,
                "serverInfo": {"name": "tasks-on-disk", "version": "1"}}  # fmt: skip
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "ping":
        return {}
    if method == "tools/call" and "task" in params:
        task_id = uuid.uuid4().hex
        message = (params.get("arguments") or {}).get("message", "")
        with open(os.path.join(STORE, f"task-{task_id}.json"), "w") as f:
            json.dump({"message": message, "pid": os.getpid()}, f)
        task = task_of(task_id)
        assert task is not None
        task.pop("_message")
        return {"task": task}
    if method in ("tasks/get", "tasks/result"):
        task = task_of(params.get("taskId", ""))
        if task is None:
            raise LookupError(f"no task {params.get('taskId')!r}")
        message = task.pop("_message")
        if method == "tasks/get":
            return task
        if task["status"] != "completed":
            raise RuntimeError("tasks/result before the end (this server does not block)")
        return {"content": [{"type": "text", "text": f"done: {message}"}], "isError": False}
    raise NotImplementedError(method)


def main() -> None:
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg or "method" not in msg:
            continue
        try:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}
        except (LookupError, NotImplementedError, RuntimeError) as exc:
            code = -32601 if isinstance(exc, NotImplementedError) else -32602
            reply = {
                "jsonrpc": "2.0",
                "id": msg["id"],
                "error": {"code": code, "message": str(exc)},
            }
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
