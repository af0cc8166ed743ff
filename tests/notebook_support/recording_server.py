"""The demo server, plus a record of every ``notifications/cancelled`` it received.

Owns: :class:`RecordingServer`, used by the kernel-interrupt test in ``tests/notebooks/test_notebooks.py``
to show that the server was told when a call was cancelled (notebook 04 writes its own copy,
so that it needs nothing from ``tests/``).
It adds one tool, ``cancellations``, whose result lists what arrived (request id, reason,
and whether that request was still running here, i.e. whether work was actually stopped).

Run: ``python tests/notebook_support/recording_server.py [demo server flags]``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from mcpsync.demo_server import Call, DemoServer, build_arg_parser

__all__ = ["RecordingServer", "main"]


class RecordingServer(DemoServer):
    """DemoServer that remembers the cancellations it received (in arrival order)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cancellations: list[dict[str, Any]] = []
        self._record_lock = threading.Lock()
        self.register_tool(
            "cancellations",
            "What notifications/cancelled this server received: request id, reason, "
            "and whether that request was still running.",
            {"type": "object", "properties": {}},
            self._tool_cancellations,
            output_schema={
                "type": "object",
                "properties": {"cancelled": {"type": "array", "items": {"type": "object"}}},
                "required": ["cancelled"],
            },
        )

    def _on_notification(self, method: Any, params: Any) -> None:
        if method == "notifications/cancelled" and isinstance(params, dict):
            rid = params.get("requestId")
            with self._state_lock:
                running = rid in self._inflight
            with self._record_lock:
                self.cancellations.append(
                    {"requestId": rid, "reason": params.get("reason"), "was_running": running}
                )
            self.log(f"cancelled request {rid!r} ({params.get('reason')}); running: {running}")
        super()._on_notification(method, params)

    def _tool_cancellations(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        with self._record_lock:
            record = {"cancelled": list(self.cancellations)}
        return {
            "content": [{"type": "text", "text": json.dumps(record)}],
            "structuredContent": record,
        }


def main(argv: list[str] | None = None) -> int:
    parser = build_arg_parser()
    parser.prog = "recording_server.py"
    args = parser.parse_args(argv)
    server = RecordingServer(
        page_size=args.page_size, reverse_timeout=args.reverse_timeout, verbose=args.verbose
    )
    server.log(f"recording server ready on stdio (pid {os.getpid()})")
    return server.serve()


if __name__ == "__main__":
    sys.exit(main())
