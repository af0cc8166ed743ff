"""A small raw MCP server (stdlib only) that misbehaves on request, for the stdio robustness tests.

Owns: hostile wire behaviour the demo server cannot show. Run as
``python tests/servers/hostile_server.py MODE [MODE ...]``; it answers ``initialize``, ``ping``,
``tools/list`` (one tool per name below) and ``tools/call``. Tools (every mode has them):

- ``echo {message}``: replies with the text;
- ``deep {depth}``: writes a ``depth``-deep ``[[[...`` line, then the reply;
- ``deep_idle {depth}``: replies, then (0.2 s later, the client idle) writes a deep line,
  then exits 5 another 0.3 s later;
- ``log_before {message}``: a log notification, then the reply, in one write;
- ``notify_before``: progress-free notifications of four kinds (log message, tools
  list_changed, resources updated, a custom one), then the reply, in one write;
- ``loggers {count}``: ``count`` log notifications with distinct ``logger`` names, then the reply;
- ``flood {count}``: replies at once, then writes ``count`` log notifications whose ``data`` is
  ``n`` (0, 1, 2, ...) from a background thread, interleaved with replies to other calls;
- ``flood_done``: replies with the number of flood notifications written so far;
- ``wrong_ids``: first a reply with the call's id as a float (``7.0``), and one with
  ``"id": true`` and one with ``"id": "<id>"``, each with text "wrong", then the real reply;
- ``big {bytes}``: a reply whose text is ``bytes`` long;
- ``stop_reading``: replies, then never reads stdin again (sleeps until killed);
- ``sleep {seconds}``: replies after ``seconds``;
- ``bad_input``: replies with the number of stdin lines that were not JSON (spliced writes).

Modes (start-up behaviour):

- ``noise``: prints ``Starting weather server on port 8000...`` and two more non-JSON lines on
  stdout before anything else;
- ``true_id_init``: answers ``initialize`` first with ``"id": true`` (a bogus result), then
  properly;
- ``stderr_hello``: writes ``hello from stderr`` on stderr at start;
- ``grandchild``: starts a grandchild that calls ``setsid()`` and keeps the server's stderr open
  for 30 s (printing its pid on stderr first).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

__all__ = ["main"]

TOOLS = ["echo", "deep", "deep_idle", "log_before", "notify_before", "loggers", "flood",
         "flood_done", "wrong_ids", "big", "stop_reading", "sleep", "bad_input"]  # fmt: skip

_out = sys.stdout.buffer
_lock = threading.Lock()
_flooded = [0]
_bad_input = [0]


def _write(*messages: Any) -> None:
    data = b"".join(
        (m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages
    )
    with _lock:
        _out.write(data)
        _out.flush()


def _reply(rid: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def _log(data: Any, logger: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"level": "warning", "data": data}
    if logger is not None:
        params["logger"] = logger
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": params}


def _flood(count: int) -> None:
    for n in range(count):
        _write(_log(n, "flood"))
        _flooded[0] = n + 1


def _call(rid: Any, name: str, args: dict[str, Any]) -> None:
    if name == "echo":
        _write(_reply(rid, str(args.get("message", ""))))
    elif name == "deep":
        _write(b"[" * int(args.get("depth", 100_000)), _reply(rid, "after deep"))
    elif name == "deep_idle":
        _write(_reply(rid, "ok"))
        time.sleep(0.2)
        _write(b"[" * int(args.get("depth", 100_000)))
        time.sleep(0.3)
        sys.stdout.flush()
        os._exit(5)
    elif name == "log_before":
        _write(_log(args.get("message", "")), _reply(rid, "logged"))
    elif name == "notify_before":
        _write(
            _log("before"),
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "demo://x"},
            },
            {"jsonrpc": "2.0", "method": "notifications/custom", "params": {"n": 1}},
            _reply(rid, "notified"),
        )
    elif name == "loggers":
        count = int(args.get("count", 1))
        for start in range(0, count, 500):
            _write(*(_log(i, f"name-{i}") for i in range(start, min(start + 500, count))))
        _write(_reply(rid, "logged"))
    elif name == "flood":
        _write(_reply(rid, "flooding"))
        threading.Thread(target=_flood, args=(int(args.get("count", 1000)),), daemon=True).start()
    elif name == "flood_done":
        _write(_reply(rid, str(_flooded[0])))
    elif name == "wrong_ids":
        wrong = [float(rid), True, str(rid)]
        _write(*(_reply(w, "wrong") for w in wrong), _reply(rid, "right"))
    elif name == "big":
        _write(_reply(rid, "x" * int(args.get("bytes", 1))))
    elif name == "stop_reading":
        _write(_reply(rid, "not reading any more"))
        time.sleep(3600)
    elif name == "bad_input":
        _write(_reply(rid, str(_bad_input[0])))
    elif name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        _write(_reply(rid, "slept"))
    else:
        _write({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such tool"}})


def main(modes: list[str]) -> int:
    if "noise" in modes:
        _write(b"Starting weather server on port 8000...", b"loading model", b"ready!")
    if "stderr_hello" in modes:
        print("hello from stderr", file=sys.stderr, flush=True)
    if "grandchild" in modes:
        code = "import os, sys, time; os.setsid(); print(os.getpid(), file=sys.stderr, flush=True); time.sleep(30)"
        subprocess.Popen([sys.executable, "-c", code])  # inherits our stderr
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            _bad_input[0] += 1
            continue
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            }
            if "true_id_init" in modes:
                bogus = {**result, "protocolVersion": "1999-01-01"}
                _write({"jsonrpc": "2.0", "id": True, "result": bogus})
            _write({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
            _write({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            params = message.get("params") or {}
            name, args = params.get("name", ""), params.get("arguments") or {}
            if name in ("sleep", "flood_done"):
                threading.Thread(target=_call, args=(rid, name, args), daemon=True).start()
            else:
                _call(rid, name, args)
        else:
            _write({"jsonrpc": "2.0", "id": rid, "result": {}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
