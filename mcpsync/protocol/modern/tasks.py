"""The tasks extension (``io.modelcontextprotocol/tasks``) of the modern era.

Owns: ``Tasks``: following a call the server turned into a task (``tasks/get`` polls
at the server's ``pollIntervalMs``, ``tasks/update`` with input responses, the ``ttlMs``
bound) and ``tasks/cancel``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ... import jsonrpc
from ...errors import MCPSyncError, ProtocolError, RequestCancelled, RequestTimeout, ServerError
from ...rpc.connection import Connection
from .. import CallOptions
from .envelope import dict_at

__all__ = ["Tasks"]

log = logging.getLogger("mcpsync")

_TASK_POLL_DEFAULT = 1.0
_TASK_POLL_MAX = 30.0


class Tasks:
    """Runs tasks for one modern era (``send``: one request with its headers, as a future)."""

    def __init__(
        self,
        conn: Connection,
        name: str,
        send: Callable[[str, dict[str, Any] | None, CallOptions], Future[Any]],
        fulfil: Callable[[Any], dict[str, Any]],
        closing: threading.Event,
    ) -> None:
        self._conn = conn
        self.name = name
        self._send = send
        self._fulfil = fulfil
        self._closing = closing

    def run(
        self,
        task: dict[str, Any],
        opts: CallOptions,
        cancel_requested: threading.Event | None,
        on_task_id: Callable[[str], None] | None = None,
    ) -> Any:
        """Follow ``task`` until it ends; its result, or the error it ended with."""
        task_id = task.get("taskId")
        if not isinstance(task_id, str):
            raise ProtocolError(f"{self.name!r} created a task without a taskId")
        if on_task_id is not None:
            on_task_id(task_id)
        answered: set[str] = set()
        started = time.monotonic()
        poll = opts.only_timeout()
        try:
            while True:
                status = task.get("status")
                if status == "completed":
                    result = task.get("result")
                    if not isinstance(result, dict):
                        raise ProtocolError(f"task {task_id} completed without a result object")
                    return result
                if status == "failed":
                    error = dict_at(task, "error")
                    code = error.get("code")
                    raise ServerError(
                        code if isinstance(code, int) else jsonrpc.INTERNAL_ERROR,
                        str(error.get("message", "task failed")),
                        error.get("data"),
                        method="tools/call",
                    )
                if status == "cancelled":
                    note = task.get("statusMessage")
                    raise RequestCancelled(
                        f"task {task_id} was cancelled" + (f": {note}" if note else "")
                    )
                if status == "input_required":
                    requests = dict_at(task, "inputRequests")
                    pending = {k: v for k, v in requests.items() if k not in answered}
                    if pending:
                        responses = self._fulfil(pending)
                        self._conn.wait(
                            self._send(
                                "tasks/update",
                                {"taskId": task_id, "inputResponses": responses},
                                poll,
                            )
                        )
                        answered.update(pending)
                        task = self.get(task_id, poll)
                        continue
                elif status != "working":
                    raise ProtocolError(f"task {task_id} has unknown status {status!r}")
                ttl = task.get("ttlMs")
                if (
                    isinstance(ttl, int)
                    and not isinstance(ttl, bool)
                    and time.monotonic() - started > ttl / 1000.0 + 5.0
                ):
                    raise RequestTimeout(
                        f"task {task_id} on {self.name!r} outlived its ttlMs ({ttl} ms)"
                    )
                interval = task.get("pollIntervalMs")
                delay = (
                    interval / 1000.0
                    if isinstance(interval, (int, float)) and interval >= 0
                    else _TASK_POLL_DEFAULT
                )
                delay = min(delay, _TASK_POLL_MAX)
                if cancel_requested is not None:
                    if cancel_requested.wait(delay):
                        raise RequestCancelled(f"task {task_id} was cancelled")
                elif self._closing.wait(delay):
                    raise RequestCancelled(f"task {task_id}: the session is closing")
                task = self.get(task_id, poll)
        except KeyboardInterrupt:
            self.cancel(task_id)
            raise

    def get(self, task_id: str, opts: CallOptions) -> dict[str, Any]:
        task = self._conn.wait(self._send("tasks/get", {"taskId": task_id}, opts))
        if not isinstance(task, dict) or task.get("taskId") not in (None, task_id):
            raise ProtocolError(f"tasks/get for {task_id} returned something else")
        return task

    def cancel(self, task_id: str) -> None:
        """Send ``tasks/cancel`` without waiting for the acknowledgement."""
        try:
            future = self._conn.request("tasks/cancel", {"taskId": task_id}, timeout=10.0)
            future.add_done_callback(
                lambda f: f.cancelled() or f.exception()
            )  # retrieve, never raise
        except MCPSyncError as exc:
            log.warning("mcpsync: could not cancel task %s on %s: %s", task_id, self.name, exc)
