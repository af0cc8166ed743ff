"""A 2025-11-25 stdio server with tasks kept on disk, so a task outlives the server process.

Usage: ``python tasks_server.py STORE_DIR [--no-tasks] [--http [--sticky]]`` (``--http``: over
Streamable HTTP instead of stdio, see ``serve_http``). Tools, by ``execution.taskSupport``:

- ``slow`` ("required"): ``tools/call`` with ``task`` makes a task (a JSON file in STORE_DIR)
  and answers ``CreateTaskResult`` at once; without ``task`` it answers -32601 (the spec's
  MUST). The task stays ``working`` until the file ``STORE_DIR/release`` exists (the test
  decides when it ends); then ``tasks/get`` says ``completed`` and ``tasks/result`` answers
  the ``CallToolResult`` ("done: <message>"). ``{"announce": true}`` in the arguments: a
  ``notifications/message`` "created <taskId>" follows the ``CreateTaskResult``. A call whose
  ``_meta`` has a ``progressToken``: ``notifications/progress`` for that token follow the
  ``CreateTaskResult`` (progress 1) and every ``tasks/get`` of the task (2, 3, ...; message
  "working" or "completed"): the spec keeps the token valid for the task's lifetime.
- ``counted`` ("optional", with an ``outputSchema`` {n: integer}): plainly or as a task
  (completed at once); the result's ``structuredContent`` is ``{"n": <the argument n>}``,
  so a string ``n`` breaks the schema.
- ``quick`` (no ``execution``: "forbidden"): a plain call answers "quick: <message>"; with
  ``task`` it answers -32601.

Any tool: ``{"hold": PATH}`` in the arguments: the server reads nothing more until PATH
exists (its stdin pipe fills up), then answers; ``{"silent": true}``: never answered.
Notifications are logged too (``notifications/cancelled`` among them).

``tasks/cancel`` marks a task cancelled (-32602 once it is terminal). Every request the
server reads is appended to ``STORE_DIR/requests-<pid>.jsonl`` (method, params) before it
is answered, so a test sees what was sent. ``--no-tasks``: no ``tasks`` capability, and
``task`` in a ``tools/call`` is ignored (answered plainly, as the spec says a receiver that
does not take tasks must). Every server started on the same STORE_DIR sees the same tasks:
kill one, start another, the task is still there.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

STORE = sys.argv[1]
TASKS = "--no-tasks" not in sys.argv[2:]
TOOLS = [
    {
        "name": "slow",
        "description": "finishes when the test releases it",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "counted",
        "description": "returns {n} (task or not)",
        "inputSchema": {"type": "object", "properties": {"n": {}}},
        "outputSchema": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"],
        },
        "execution": {"taskSupport": "optional"},
    },
    {
        "name": "quick",
        "description": "answers at once, never as a task",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
    },
]
SUPPORT = {t["name"]: (t.get("execution") or {}).get("taskSupport", "forbidden") for t in TOOLS}


class MethodNotFound(Exception):
    pass


def path_of(task_id: str) -> str:
    return os.path.join(STORE, f"task-{task_id}.json")


def stored(task_id: str) -> dict[str, Any] | None:
    try:
        with open(path_of(task_id)) as f:
            data: dict[str, Any] = json.load(f)
    except FileNotFoundError:
        return None
    return data


def status_of(data: dict[str, Any]) -> str:
    if data.get("cancelled"):
        return "cancelled"
    if data["tool"] != "slow" or os.path.exists(os.path.join(STORE, "release")):
        return "completed"
    return "working"


def task_of(task_id: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "taskId": task_id,
        "status": status_of(data),
        "ttl": data.get("ttl") or 60000,
        "pollInterval": 20,
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
    }


def outcome(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if tool == "slow":
        return {"content": [{"type": "text", "text": f"done: {arguments.get('message', '')}"}]}
    if tool == "counted":
        n = arguments.get("n")
        return {"content": [{"type": "text", "text": str(n)}], "structuredContent": {"n": n}}
    return {"content": [{"type": "text", "text": f"quick: {arguments.get('message', '')}"}]}


def progress(token: Any, n: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": n, "message": message}}  # fmt: skip


def answer(msg: dict[str, Any], later: list[dict[str, Any]]) -> dict[str, Any] | None:
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        caps: dict[str, Any] = {"tools": {}, "logging": {}}
        if TASKS:
            caps["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        return {"protocolVersion": "2025-11-25", "capabilities": caps,
                "serverInfo": {"name": "tasks-on-disk", "version": "1"}}  # fmt: skip
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "ping":
        return {}
    if method == "tools/call":
        tool, arguments = params.get("name"), params.get("arguments") or {}
        if tool not in SUPPORT:
            raise LookupError(f"no tool {tool!r}")
        as_task = TASKS and "task" in params
        if not as_task:
            if TASKS and SUPPORT[tool] == "required":
                raise MethodNotFound(f"tool {tool!r} must be called as a task")
            return outcome(tool, arguments)
        if SUPPORT[tool] == "forbidden":
            raise MethodNotFound(f"tool {tool!r} cannot be called as a task")
        task_id = uuid.uuid4().hex
        ttl = (params.get("task") or {}).get("ttl")
        token = (params.get("_meta") or {}).get("progressToken")
        data = {"tool": tool, "arguments": arguments, "ttl": ttl, "pid": os.getpid(),
                "token": token, "reported": 1}  # fmt: skip
        with open(path_of(task_id), "w") as f:
            json.dump(data, f)
        if token is not None:
            later.append(progress(token, 1, "created"))
        if arguments.get("announce"):
            later.append({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "info", "data": f"created {task_id}"}})  # fmt: skip
        return {"task": task_of(task_id, data)}
    if method in ("tasks/get", "tasks/result", "tasks/cancel"):
        task_id = params.get("taskId", "")
        data = stored(task_id)
        if data is None:
            raise LookupError(f"no task {task_id!r}")
        task = task_of(task_id, data)
        if method == "tasks/get":
            if data.get("token") is not None:
                data["reported"] += 1
                with open(path_of(task_id), "w") as f:
                    json.dump(data, f)
                later.append(progress(data["token"], data["reported"], task["status"]))
            return task
        if method == "tasks/cancel":
            if task["status"] != "working":
                raise LookupError(f"task {task_id} is {task['status']}: not cancelled")
            data["cancelled"] = True
            with open(path_of(task_id), "w") as f:
                json.dump(data, f)
            return task_of(task_id, data)
        if task["status"] != "completed":
            raise RuntimeError("tasks/result before the end (this server does not block)")
        result = outcome(data["tool"], data["arguments"])
        result["_meta"] = {"io.modelcontextprotocol/related-task": {"taskId": task_id}}
        return result
    raise MethodNotFound(method)


def handle(msg: dict[str, Any], record: Callable[[str], None]) -> list[dict[str, Any]]:
    """What the server writes for one message read: the reply (a request's) then the
    notifications that follow it; nothing for a notification or a response. ``record``
    appends one line to the request log."""
    if "method" in msg:  # requests and notifications (notifications/cancelled among them)
        record(json.dumps({"method": msg["method"], "params": msg.get("params")}) + "\n")
    if "id" not in msg or "method" not in msg:
        return []
    arguments = (msg.get("params") or {}).get("arguments") or {}
    hold = arguments.get("hold")
    if hold:  # hold the line: read nothing more until that file exists (stdin fills up)
        while not os.path.exists(hold):
            time.sleep(0.01)
    if arguments.get("silent"):
        return []  # never answered
    later: list[dict[str, Any]] = []
    try:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg, later)}
    except (LookupError, MethodNotFound, RuntimeError) as exc:
        code = -32601 if isinstance(exc, MethodNotFound) else -32602
        reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": code, "message": str(exc)}}
    return [reply, *later]


def main() -> None:
    log = open(os.path.join(STORE, f"requests-{os.getpid()}.jsonl"), "a")  # noqa: SIM115
    lock = threading.Lock()

    def record(line: str) -> None:
        with lock:  # (HTTP: one handler thread per request)
            log.write(line)
            log.flush()

    if "--http" in sys.argv[2:]:
        serve_http(record)
        return
    for line in sys.stdin:
        for out in handle(json.loads(line), record):
            print(json.dumps(out), flush=True)


def serve_http(record: Callable[[str], None]) -> None:
    """``--http``: the same server over Streamable HTTP (2025-11-25), stateless, every reply
    a JSON body (the notifications that follow a reply over stdio are left out); a held
    request holds its own POST. Prints ``URL <url>`` once listening; ends when stdin closes.
    ``--sticky``: as behind a load balancer with sticky sessions, a reply to a request without
    its cookie sets it, and once it was set a request without it is refused (403)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sticky = "--sticky" in sys.argv[2:]
    cookie_set = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: Any = None) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            if sticky and "lb=node-1" not in (self.headers.get("Cookie") or ""):
                self.send_header("Set-Cookie", "lb=node-1; Path=/; HttpOnly")
                cookie_set.set()
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(405)  # no GET stream

        def do_DELETE(self) -> None:
            self._send(405)

        def do_POST(self) -> None:
            msg = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            cookies = self.headers.get_all("Cookie") or []
            if sticky and cookie_set.is_set() and cookies != ["lb=node-1"]:
                self._send(403, {"error": f"no sticky cookie (Cookie: {cookies})"})
                return
            out = handle(msg, record)
            if out:
                self._send(200, out[0])
            elif "id" in msg and "method" in msg:
                return  # silent: never answered (the client's read times out)
            else:
                self._send(202)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"URL http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    sys.stdin.read()  # until the test closes our stdin
    server.shutdown()


if __name__ == "__main__":
    main()
