"""A stdlib-only legacy (2025-11-25) stdio server with bring-up faults, for tests/protocol/test_bringup.py.

Owns: the start-up behaviours a new user meets, one flag each:

--count FILE         append a line to FILE when the process starts (counts starts)
--start-delay S      sleep S seconds before reading stdin (a first npx/uvx download)
--banner TEXT        print TEXT to stdout at start (not JSON-RPC)
--stderr TEXT        print TEXT to stderr at start
--exit-at-start N    exit with status N at once (after --banner and --stderr)
--silent             read every line, answer nothing
--late-probe S       answer ``server/discover`` (with -32601) only S seconds later,
                     everything else at once; the tool ``after_late_probe`` answers
                     once that late answer is written

Tools: ``echo``; ``slow`` (``seconds``, ``every``): sends ``notifications/progress``
every ``every`` seconds while it runs when the request carries a progress token, then
answers ``done``; ``after_late_probe``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

_write = threading.Lock()


def send(message: dict) -> None:
    with _write:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def reply(rid, result) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def error(rid, code: int, text: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": text}})


def text(value: str) -> dict:
    return {"content": [{"type": "text", "text": value}]}


TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object"}},
    {"name": "slow", "inputSchema": {"type": "object"}},
    {"name": "after_late_probe", "inputSchema": {"type": "object"}},
]


def slow(rid, params: dict) -> None:
    arguments = params.get("arguments") or {}
    seconds, every = float(arguments.get("seconds", 1)), float(arguments.get("every", 0.2))
    token = (params.get("_meta") or {}).get("progressToken")
    end = time.monotonic() + seconds
    step = 0
    while time.monotonic() < end:
        time.sleep(min(every, max(end - time.monotonic(), 0)))
        step += 1
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": step}})  # fmt: skip
    reply(rid, text("done"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--banner")
    parser.add_argument("--exit-at-start", type=int)
    parser.add_argument("--stderr", default="")
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--late-probe", type=float)
    args = parser.parse_args()
    if args.count:
        with open(args.count, "a") as f:
            f.write("started\n")
    if args.banner:
        print(args.banner, flush=True)
    if args.stderr:
        print(args.stderr, file=sys.stderr, flush=True)
    if args.exit_at_start is not None:
        return args.exit_at_start
    time.sleep(args.start_delay)
    late_done = threading.Event()
    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if args.silent or rid is None:
            continue
        if method == "server/discover":
            if args.late_probe is not None:

                def late(rid=rid) -> None:
                    time.sleep(args.late_probe)
                    error(rid, -32601, "method not found")
                    late_done.set()

                threading.Thread(target=late, daemon=True).start()
            else:
                error(rid, -32601, "method not found")
        elif method == "initialize":
            reply(rid, {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "bringup", "version": "1"}})  # fmt: skip
        elif method == "ping":
            reply(rid, {})
        elif method == "tools/list":
            reply(rid, {"tools": TOOLS})
        elif method == "tools/call":
            name = message["params"]["name"]
            if name == "slow":
                threading.Thread(target=slow, args=(rid, message["params"]), daemon=True).start()
            elif name == "after_late_probe":
                late_done.wait(30)
                reply(rid, text("after"))
            else:
                reply(rid, text(str((message["params"].get("arguments") or {}).get("message"))))
        else:
            error(rid, -32601, "method not found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
