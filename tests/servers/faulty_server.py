"""The demo server with injectable faults, for transport and session tests.

Owns: fault behaviour, kept out of ``mcpsync.demo_server``. Run as
``python tests/servers/faulty_server.py [demo flags] [fault flags]``:

--crash-on-call TOOL   write a few stderr lines, then exit 3 when TOOL is called
--exit-before-init     write one stderr line and exit 1 before reading anything
--garbage-stdout       write a non-JSON line to stdout before every message
--stderr-flood MB      write MB megabytes to stderr before serving (blocks if nobody drains it)
--never-answer         read every line until EOF, answer nothing
--huge-message MB      add a tool ``huge`` whose result text is MB megabytes
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mcpsync.demo_server import Call, DemoServer, build_arg_parser

__all__ = ["FaultyServer", "main", "CRASH_EXIT_CODE", "EARLY_EXIT_CODE", "GARBAGE_LINE"]

CRASH_EXIT_CODE = 3
EARLY_EXIT_CODE = 1
GARBAGE_LINE = b"this line is not JSON-RPC\n"


class FaultyServer(DemoServer):
    """DemoServer whose ``send`` can prepend garbage."""

    def __init__(self, *, garbage_stdout: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.garbage_stdout = garbage_stdout

    def send(self, message: dict[str, Any]) -> None:
        if self.garbage_stdout:
            with self._write_lock:
                self._out.write(GARBAGE_LINE)
        super().send(message)


def _crash(server: DemoServer, tool: str) -> None:
    def crash(call: Call, arguments: dict[str, Any]) -> None:
        for i in range(3):
            server.log(f"crashing on purpose in {tool} (line {i + 1})")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)

    spec = server.tools.get(tool)
    if spec is None:
        server.register_tool(tool, "Crashes the server.", {"type": "object"}, crash)
    else:
        spec.handler = crash
        spec.threaded = False


def main(argv: list[str] | None = None) -> int:
    parser = build_arg_parser()
    parser.prog = "faulty_server.py"
    parser.add_argument("--crash-on-call", metavar="TOOL")
    parser.add_argument("--exit-before-init", action="store_true")
    parser.add_argument("--garbage-stdout", action="store_true")
    parser.add_argument("--stderr-flood", type=float, default=0.0, metavar="MB")
    parser.add_argument("--never-answer", action="store_true")
    parser.add_argument("--huge-message", type=float, default=0.0, metavar="MB")
    args = parser.parse_args(argv)

    if args.exit_before_init:
        sys.stderr.write("faulty_server: exiting before initialize on purpose\n")
        sys.stderr.flush()
        return EARLY_EXIT_CODE
    if args.stderr_flood > 0:
        chunk = ("E" * 1023 + "\n").encode()
        remaining = int(args.stderr_flood * 1024 * 1024)
        err = sys.stderr.buffer
        while remaining > 0:
            err.write(chunk[: min(len(chunk), remaining)])
            remaining -= len(chunk)
        err.flush()
    if args.never_answer:
        sys.stderr.write("faulty_server: reading, never answering\n")
        sys.stderr.flush()
        while sys.stdin.buffer.readline():
            pass
        return 0

    server = FaultyServer(
        garbage_stdout=args.garbage_stdout,
        page_size=args.page_size,
        reverse_timeout=args.reverse_timeout,
        verbose=args.verbose,
    )
    if args.huge_message > 0:
        size = int(args.huge_message * 1024 * 1024)

        def huge(call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
            return {"content": [{"type": "text", "text": "h" * size}]}

        server.register_tool(
            "huge", f"Returns a {args.huge_message:g} MB text.", {"type": "object"}, huge
        )
    if args.crash_on_call:
        _crash(server, args.crash_on_call)
    server.log("faulty_server ready on stdio")
    return server.serve()


if __name__ == "__main__":
    sys.exit(main())
