"""Picking up a task by its id: ``Session.task(task_id)`` in both eras.

Owns: ``pick_up`` (what ``Restarts.task`` calls) and ``TaskFuture``, the future of a task
followed in the 2025-11-25 era. A task outlives the request that made it: a session picks
it up after a restart, or another process does, from the id alone.

- 2026-07-28 era, tasks extension: ``protocol.modern.tasks.Tasks`` follows it (``tasks/get``
  polls; the result comes with the completed task), in a ``ModernFuture``.
- 2025-11-25 era (``capabilities.tasks`` of the server): ``tasks/get`` polls at the task's
  ``pollInterval`` until it is no longer working; then ``tasks/result`` fetches the outcome
  (the ``CallToolResult``, or the error the call ended with; for ``input_required`` it also
  carries the server's queued requests, answered by the session's handlers) and blocks
  until the task ends, bounded by its ``ttl``. ``cancelled`` raises ``RequestCancelled``;
  ``TaskFuture.cancel()`` sends ``tasks/cancel``.

Each request is bounded by ``timeout`` (the session's default); the poll waits end at once
on ``cancel()`` or when the session closes. Polling runs on a ``mcpsync-task[name]`` thread.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Any

from . import _typed
from ._guard import Guard
from .connection import DEFAULT, Default
from .errors import CapabilityError, MCPSyncError, ProtocolError, RequestCancelled
from .protocol import CallOptions, settle
from .protocol.modern import ModernEra, ModernFuture

#: a ``Session`` (not imported: the session module imports this one through ``_restart``)
Session = Any

__all__ = ["pick_up", "TaskFuture", "POLL_DEFAULT", "POLL_MAX"]

log = logging.getLogger("mcpsync")

#: seconds between polls when the task names no ``pollInterval``, and the most ever waited
POLL_DEFAULT, POLL_MAX = 1.0, 30.0
_TERMINAL_OR_INPUT = ("completed", "failed", "input_required")


class TaskFuture(Future):  # type: ignore[type-arg]
    """A 2025-11-25 task followed by id; resolves to its ``CallToolResult``.
    ``cancel()`` stops following it and sends ``tasks/cancel``."""

    def __init__(self, session: Session, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self._session = session
        self._cancel_requested = threading.Event()

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        self._cancel_requested.set()
        try:
            sent = self._session.connection.request("tasks/cancel", {"taskId": self.task_id})
            sent.add_done_callback(lambda f: f.cancelled() or f.exception())  # never raise
        except MCPSyncError as exc:
            log.warning("mcpsync: could not cancel task %s: %s", self.task_id, exc)
        return True


def pick_up(
    session: Session, task_id: str, timeout: float | None | Default = DEFAULT
) -> Future[Any]:
    """Follow the task ``task_id`` of ``session``'s server until it ends (see the module
    docstring); ``CapabilityError`` when the server agreed to no tasks."""
    era = session._era.inner if isinstance(session._era, Guard) else session._era
    if isinstance(era, ModernEra):
        if not era.envelope.tasks:
            raise CapabilityError(
                f"{session.name!r} did not agree to the tasks extension (2026-07-28 era); "
                "there is no task to pick up"
            )
        return _modern(session, era, task_id, timeout)
    if session.server_capabilities.tasks is None:
        raise CapabilityError(
            f"{session.name!r} declared no tasks capability (2025-11-25) nor the tasks "
            "extension (2026-07-28); there is no task to pick up"
        )
    handle = TaskFuture(session, task_id)
    _follow(session, handle, lambda: _legacy(session, handle, timeout))
    return handle


def _follow(session: Session, handle: Future[Any], run: Any) -> None:
    def follow() -> None:
        try:
            value = run()
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            settle(handle, exc)
        else:
            settle(handle, None, value)

    name = f"mcpsync-task[{session.name}]"
    threading.Thread(target=follow, name=name, daemon=True).start()


def _modern(
    session: Session, era: ModernEra, task_id: str, timeout: float | None | Default
) -> ModernFuture:
    handle = ModernFuture(era, "tools/call")
    handle._set_task_id(task_id)
    opts = CallOptions.of(timeout)

    def run() -> Any:
        first = era.tasks.get(task_id, opts.only_timeout())
        raw = era.tasks.run(first, opts, handle._cancel_requested)
        return _typed.tool_result(None, raw)

    _follow(session, handle, run)
    return handle


def _legacy(session: Session, handle: TaskFuture, timeout: float | None | Default) -> Any:
    task_id = handle.task_id
    started = time.monotonic()
    while True:
        conn = session.connection  # the current one: after a restart, the new server's
        task = conn.wait(conn.request("tasks/get", {"taskId": task_id}, timeout=timeout))
        if not isinstance(task, dict) or task.get("taskId") not in (None, task_id):
            raise ProtocolError(f"tasks/get for {task_id} returned something else")
        status = task.get("status")
        if status == "cancelled":
            note = task.get("statusMessage")
            raise RequestCancelled(f"task {task_id} was cancelled" + (f": {note}" if note else ""))
        if status in _TERMINAL_OR_INPUT:
            bound = _remaining(task, started, timeout)
            raw = conn.wait(conn.request("tasks/result", {"taskId": task_id}, timeout=bound))
            return _typed.tool_result(None, raw)
        if status != "working":
            raise ProtocolError(f"task {task_id} has unknown status {status!r}")
        interval = task.get("pollInterval")
        delay = (
            interval / 1000.0
            if isinstance(interval, (int, float)) and not isinstance(interval, bool)
            else POLL_DEFAULT
        )
        delay = min(max(delay, 0.0), POLL_MAX)
        if handle._cancel_requested.wait(delay):
            raise RequestCancelled(f"task {task_id} was cancelled")
        if session.closed:
            raise RequestCancelled(f"task {task_id}: the session is closed")


def _remaining(
    task: dict[str, Any], started: float, timeout: float | None | Default
) -> float | None | Default:
    """The bound of ``tasks/result``: it blocks until the task ends, so at least the time
    the task may still live (``ttl``, ms), never less than the call's own timeout."""
    ttl = task.get("ttl")
    if not isinstance(ttl, int) or isinstance(ttl, bool):
        return timeout
    left = max(ttl / 1000.0 - (time.monotonic() - started), 0.0) + 5.0
    if isinstance(timeout, (int, float)):
        return max(float(timeout), left)
    return left if timeout is not None else None
