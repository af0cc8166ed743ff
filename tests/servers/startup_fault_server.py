"""A stdlib-only legacy (2025-11-25) stdio server that misbehaves during bring-up, for
tests/session/test_connect_bound.py, tests/protocol/test_probe_crash.py and tests/session/test_server_stderr.py.

Owns: one flag per bring-up fault a user meets:

--count FILE         append "start <pid>" to FILE when the process starts, and
                     "discover" / "initialize" for each of those requests it reads
--silent             read every line, answer nothing
--no-initialize      answer ``server/discover`` (-32601, a handshake-era server) and every
                     other request, but never ``initialize``
--keep-running       do not exit at stdin EOF (the shutdown ladder must signal it)
--ignore-term        ignore SIGTERM (the ladder must reach SIGKILL)
--stderr TEXT        write TEXT (``\\n`` for line breaks) to stderr at start, then serve
--old-sdk            die of ``server/discover``, saying so at once: a traceback naming the
                     method on stderr, then deaf until the next line arrives, then exit 1
--old-sdk-quiet      die of ``server/discover`` as mcp 1.6.0 really does (PyPI chroma-mcp
                     0.2.6 on it, measured): nothing at all until the next line arrives
                     (its stdin is read in a worker thread the failed session cannot
                     cancel), then that traceback, then exit 1
--old-sdk-survives   the same traceback on ``server/discover``, left unanswered, and then
                     serve on (``initialize`` works)
--silent-if-restarted  with --count: a process that finds a start noted before its own
                     answers nothing (the fresh process of a restart hangs)

Tools: ``echo``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

TRACEBACK = """Traceback (most recent call last):
  File "mcp/shared/session.py", line 324, in _receive_loop
    validated_request = self._receive_request_type.model_validate(
pydantic_core._pydantic_core.ValidationError: 18 validation errors for ClientRequest
  Input should be 'initialize' [type=literal_error, input_value='server/discover', input_type=str]"""


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def note(path: str | None, text: str) -> None:
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count")
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--no-initialize", action="store_true")
    parser.add_argument("--keep-running", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    parser.add_argument("--stderr", default="")
    parser.add_argument("--old-sdk", action="store_true")
    parser.add_argument("--old-sdk-survives", action="store_true")
    parser.add_argument("--old-sdk-quiet", action="store_true")
    parser.add_argument("--silent-if-restarted", action="store_true")
    args = parser.parse_args()
    if args.silent_if_restarted and args.count and os.path.exists(args.count):
        args.silent = True
    note(args.count, f"start {os.getpid()}")
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.stderr:
        sys.stderr.write(args.stderr.replace("\\n", "\n") + "\n")
        sys.stderr.flush()
    initialized = False
    for line in sys.stdin:
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        if method in ("server/discover", "initialize"):
            note(args.count, method.split("/")[-1])
        if args.silent or rid is None:
            continue
        if (
            method == "server/discover"
            and (args.old_sdk or args.old_sdk_survives or args.old_sdk_quiet)
            and not initialized
        ):
            if args.old_sdk_quiet:
                sys.stdin.readline()  # deaf and silent until the next line, then the traceback
            sys.stderr.write(TRACEBACK + "\n")
            sys.stderr.flush()
            if args.old_sdk_survives:
                continue
            if args.old_sdk_quiet:
                return 1
            sys.stdin.readline()  # its session died: deaf until the next line, then gone
            return 1
        if method == "initialize":
            if args.no_initialize:
                continue
            initialized = True
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "startup-fault", "version": "1"}}})  # fmt: skip
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}}]}})  # fmt: skip
        elif method == "tools/call":
            text = (message.get("params") or {}).get("arguments", {}).get("message", "")
            send({"jsonrpc": "2.0", "id": rid,
                  "result": {"content": [{"type": "text", "text": text}]}})  # fmt: skip
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid,
                  "error": {"code": -32601, "message": f"method not found: {method}"}})  # fmt: skip
    if args.keep_running:
        threading.Event().wait()  # stdin closed; only a signal ends it
    return 0


if __name__ == "__main__":
    sys.exit(main())
