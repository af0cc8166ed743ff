"""Tasks in both eras: started by ``call_tool(task=...)``, or picked up by id (``Session.task``).

Owns: ``decide`` (whether a ``tools/call`` goes as a task: the ``task=`` argument, the tool's
``execution.taskSupport``, the server's ``tasks.requests.tools.call``), ``start`` and ``call``
(a task-augmented ``tools/call``, as a future or blocking), ``pick_up`` (what
``Session.task`` calls), ``TaskFuture``, the future of a 2025-11-25 task, and
``finish_sending`` (``Session.close`` lets a Ctrl-C'd creating request's sender hand over
its reply first, so the ``tasks/cancel`` goes out). A task
outlives the request that made it: a session picks it up after a restart, or another
process does, from the id alone.

- 2026-07-28 era, tasks extension: the server decides per request whether a call becomes a
  task (no per-request flag, no ttl on the wire); ``protocol.modern.tasks.Tasks`` follows it
  (``tasks/get`` polls; the result comes with the completed task), in a ``ModernFuture``.
- 2025-11-25 era (``capabilities.tasks`` of the server): the call carries ``task``
  (``TaskMetadata``: ``ttl`` in ms) and is answered by a ``CreateTaskResult``; from then on
  a started task and a picked-up one are followed by the same loop: ``tasks/get`` polls at
  the task's ``pollInterval`` until it is no longer working; then ``tasks/result`` fetches
  the outcome (the ``CallToolResult``, or the error the call ended with; for
  ``input_required`` it also carries the server's queued requests, answered by the
  session's handlers) and blocks until the task ends, bounded by its ``ttl``.
  ``cancelled`` raises ``RequestCancelled``; ``TaskFuture.cancel()`` sends ``tasks/cancel``
  (never ``notifications/cancelled``: the spec's rule for task-augmented requests).
  The polls go through the session's era: with a restart policy, a task followed while its
  server restarts is polled again on the new server (it is known by id).

Each request is bounded by ``timeout`` (the session's default); polling by the task's
``ttl`` (+5 s); the poll waits end at once on ``cancel()`` or when the session closes.
Polling runs on a ``mcpsync-task[name]`` thread.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from typing import Any, TypeAlias

from .. import typed as _typed
from ..errors import (
    CapabilityError,
    ConfigError,
    MCPSyncError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    ServerRestarted,
)
from ..protocol import CallOptions, settle
from ..protocol.modern import ModernEra, ModernFuture
from ..protocol.modern.envelope import TASKS_EXTENSION
from ..rpc.calls import join_until
from ..rpc.connection import CLOSE_TIMEOUT, DEFAULT, Default, Progress
from .guard import Guard

#: a ``Session`` (not imported: the session module imports this one through ``_restart``)
Session = Any
#: what ``call_tool(task=...)`` takes: None (the tool decides), True/False, or a ttl in seconds
TaskOption: TypeAlias = "bool | float | None"
Convert = Callable[[Any], Any]

__all__ = [
    "decide",
    "tool_call_parts",
    "start",
    "call",
    "pick_up",
    "TaskFuture",
    "TaskOption",
    "finish_sending",
    "POLL_DEFAULT",
    "POLL_MAX",
]

log = logging.getLogger("mcpsync")

#: seconds between polls when the task names no ``pollInterval``, and the most ever waited
POLL_DEFAULT, POLL_MAX = 1.0, 30.0
_TERMINAL_OR_INPUT = ("completed", "failed", "input_required")
#: how often a poll that met a server restart is retried before its error is kept
_RESTARTS_FOLLOWED = 3


def _same(raw: Any) -> Any:
    return raw


def _era_of(session: Session) -> Any:
    return session._era.inner if isinstance(session._era, Guard) else session._era


class TaskFuture(Future):  # type: ignore[type-arg]
    """A 2025-11-25 task; resolves to its ``CallToolResult``.

    ``task_id`` names the task: set at once for a task picked up by id, and as soon as the
    ``CreateTaskResult`` came for one started by ``submit_call_tool(task=...)`` (None until
    then, and for good if the server ran the call as a plain request); ``wait_task_id()``
    blocks for it. ``cancel()`` stops following it and sends ``tasks/cancel`` (at once, or
    when the ``CreateTaskResult`` comes)."""

    def __init__(self, session: Session, task_id: str | None) -> None:
        super().__init__()
        self.task_id = task_id
        self._session = session
        self._cancel_requested = threading.Event()
        self._lock = threading.Lock()
        self._cancel_sent = False
        self._answered = threading.Event()  # the server answered the creating call
        if task_id is not None:
            self._answered.set()

    def wait_task_id(self, timeout: float | None = None) -> str | None:
        """The task's id once the server answered the call (None: a plain result, the call
        failed, or ``timeout`` seconds passed first)."""
        self._answered.wait(timeout)
        return self.task_id

    def _created(self, task_id: str | None) -> None:
        """The creating call was answered (``task_id`` None: not with a task)."""
        with self._lock:
            if self.task_id is None:
                self.task_id = task_id
            send = self.task_id is not None and self._cancel_requested.is_set()
            send = send and not self._cancel_sent
            self._cancel_sent = self._cancel_sent or send
        self._answered.set()
        if send:
            self._send_cancel()

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        with self._lock:
            self._cancel_requested.set()
            send = self.task_id is not None and not self._cancel_sent
            self._cancel_sent = self._cancel_sent or send  # once: here or in _created
        if send:
            self._send_cancel()
        return True

    def _send_cancel(self) -> None:
        try:
            sent = self._session.connection.request("tasks/cancel", {"taskId": self.task_id})
            sent.add_done_callback(lambda f: f.cancelled() or f.exception())  # never raise
        except MCPSyncError as exc:
            log.warning("mcpsync: could not cancel task %s: %s", self.task_id, exc)


# -- starting a task -------------------------------------------------------------------


def _ttl_member(name: str, task: bool | float) -> dict[str, Any]:
    """The ``task`` member of the params: ``{}`` (the server's default ttl) or ``{"ttl": ms}``."""
    if task is True:
        return {}
    if isinstance(task, (int, float)) and not isinstance(task, bool):
        if math.isfinite(task) and task > 0:
            return {"ttl": max(1, round(task * 1000))}
    raise ConfigError(
        f"call_tool({name!r}, task={task!r}): task is None, True, False or a ttl in seconds (> 0)"
    )


def decide(session: Session, name: str, tool: Any, task: TaskOption) -> dict[str, Any] | None:
    """The ``task`` member (``TaskMetadata``) to send with ``tools/call name``, or None for a
    plain call; ``CapabilityError`` (nothing sent) when the server or the tool forbids what
    ``task`` asks. ``tool``: the listed ``Tool``, None when the tools were not listed (its
    ``taskSupport`` is then unknown: only the server's capability is checked).

    2025-11-25: ``task=None`` calls a tool whose ``taskSupport`` is "required" as a task,
    the others plainly; ``task=True`` or a ttl needs ``tasks.requests.tools.call`` of the
    server and a tool that is not "forbidden" (absent means forbidden); ``task=False`` is a
    plain call, refused for a "required" tool. 2026-07-28: the server decides (tasks
    extension); ``task=True``/ttl needs the extension agreed, nothing goes on the wire, the
    ttl is not sendable; None is returned. ``strict=False`` sessions skip the checks."""
    member = None if task is None or task is False else _ttl_member(name, task)
    era = _era_of(session)
    caps = session._handshake.capabilities if session._handshake is not None else {}
    if isinstance(era, ModernEra):
        offered = caps.get("extensions") if isinstance(caps, dict) else None
        agreed = era.envelope.tasks and isinstance(offered, dict) and TASKS_EXTENSION in offered
        if member is not None and session.strict and not agreed:
            raise CapabilityError(
                f"call_tool({name!r}, task=...): {session.name!r} and this client did not "
                f"both offer the tasks extension ({TASKS_EXTENSION}, 2026-07-28 era); "
                "nothing was sent"
            )
        return None  # the modern server turns a call into a task by itself
    execution = getattr(tool, "execution", None)
    support = getattr(execution, "task_support", None)
    tasks = caps.get("tasks") if isinstance(caps, dict) else None
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    declared = isinstance(tools, dict) and tools.get("call") is not None
    lax = not session.strict
    if task is None:
        if support != "required":
            return None
        if not declared and not lax:
            raise CapabilityError(
                f"tool {name!r} of {session.name!r} must be called as a task (execution."
                "taskSupport 'required'), but the server declares no tasks.requests.tools.call "
                "capability; nothing was sent"
            )
        return {}
    if task is False:
        if support == "required" and not lax:
            raise CapabilityError(
                f"tool {name!r} of {session.name!r} must be called as a task (execution."
                "taskSupport 'required'); call_tool(task=False) sends nothing"
            )
        return None
    if lax:
        return member
    if not declared:
        raise CapabilityError(
            f"call_tool({name!r}, task=...): {session.name!r} declares no "
            "tasks.requests.tools.call capability (task-augmented tools/call); nothing was sent"
        )
    if tool is not None and support in (None, "forbidden"):
        said = "'forbidden'" if support else "absent, which means 'forbidden'"
        raise CapabilityError(
            f"tool {name!r} of {session.name!r} cannot run as a task (execution.taskSupport "
            f"{said}); nothing was sent"
        )
    return member


def tool_call_parts(
    session: Session, name: str, tool: Any, task: TaskOption, params: dict[str, Any]
) -> tuple[dict[str, Any], Convert, dict[str, Any] | None]:
    """``Session._tool_call`` for a call that may go as a task (``task`` given, or a listed
    tool with ``execution``): the params (with ``task`` when it goes as one), the converter
    of its result, and the ``task`` member (None: a plain call)."""
    member = decide(session, name, tool, task)
    if member is not None:
        params["task"] = member
    if tool is None or not tool.output_schema:
        return params, _typed.plain_tool_result, member
    return params, functools.partial(_typed.tool_result, tool), member


def start(
    session: Session,
    params: dict[str, Any],
    convert: Convert,
    *,
    timeout: float | None | Default = DEFAULT,
    on_progress: Callable[[Progress], None] | None = None,
    reset_timeout_on_progress: bool = False,
    max_timeout: float | None = None,
    handle: TaskFuture | None = None,
) -> TaskFuture:
    """Send the task-augmented ``tools/call`` ``params`` (with its ``task`` member) and follow
    the task it makes; the future resolves to ``convert`` of its ``CallToolResult``.

    ``on_progress`` hears the progress the server reports for the task's whole life (the
    spec: the request's ``progressToken`` stays valid until the task ends, past the
    ``CreateTaskResult``): the token is this call's own, heard until the future resolves.
    ``reset_timeout_on_progress`` restarts nothing here (each request of a task has its
    own timeout; the task's life is bounded by its ttl). ``handle``: the future to use
    (``call`` makes it first, so that a Ctrl-C landing inside this function still cancels
    the task)."""
    handle = handle if handle is not None else TaskFuture(session, None)
    progress = session.connection.progress  # (of this connection, also after a restart)
    token: str | None = None
    if on_progress is not None:
        token = f"mcpsync-task-{os.urandom(16).hex()}"
        params = {**params, "_meta": {**(params.get("_meta") or {}), "progressToken": token}}
        progress.listen(token, on_progress)

    def created(f: Future[Any]) -> None:  # as the reply is read: task_id set at once
        raw = None if f.cancelled() or f.exception() is not None else f.result()
        handle._created(_created_id(raw))

    def send() -> Future[Any]:
        sent = session._submit(
            "tools/call", params, _same, timeout=timeout, max_timeout=max_timeout
        )
        sent.add_done_callback(created)
        return sent

    try:
        creating = _send_uncut(session, send)
    except BaseException as exc:
        if token is not None:
            progress.stop(token)
        if isinstance(exc, KeyboardInterrupt):  # tasks/cancel once the CreateTaskResult comes
            handle.cancel()
        raise

    def run() -> Any:
        try:
            return follow()
        finally:
            if token is not None:
                progress.stop(token)

    def follow() -> Any:
        try:
            raw = session._wait(creating)  # bounded by the call's timeout
        finally:
            if creating.done():
                created(creating)
            else:
                handle._created(None)
        task = raw.get("task") if isinstance(raw, dict) else None
        if task is None and isinstance(raw, dict) and "content" in raw:
            # the server ran it as a plain request: what a receiver that does not take
            # tasks for tools/call must do (the spec); its result is the outcome
            return convert(raw)
        if not isinstance(task, dict) or _created_id(raw) is None:
            raise ProtocolError(
                f"{session.name!r} answered a task-augmented tools/call with neither a "
                "CreateTaskResult (task.taskId) nor a CallToolResult"
            )
        if handle._cancel_requested.is_set():  # tasks/cancel went out in _created
            raise RequestCancelled(f"task {handle.task_id} was cancelled")
        return _legacy(session, handle, timeout, convert, task)

    _follow(session, handle, run)
    return handle


#: the ``mcpsync-task-send`` threads still under way, per session (``finish_sending``)
_SENDING: weakref.WeakKeyDictionary[Any, set[threading.Thread]] = weakref.WeakKeyDictionary()
_SENDING_LOCK = threading.Lock()


def finish_sending(session: Session, timeout: float = CLOSE_TIMEOUT) -> None:
    """``Session.close`` calls this first: wait (at most ``timeout`` s) for the
    ``mcpsync-task-send`` threads of ``session`` that a Ctrl-C left behind, so that the
    ``tasks/cancel`` that Ctrl-C asked for goes out before the transport closes.

    Such a thread hands the creating request's future over only once ``send()`` returned;
    the reply (with the task id) may be read by another thread before that, and the caller
    may go on and close the session while this thread waits for a CPU (measured under load:
    1 run in 15, the cancel then failed with "session is closed" and the task lived on
    until its ttl). A thread still writing the request to a server that does not read
    holds the close for at most ``timeout``; the transport's close then ends its write."""
    with _SENDING_LOCK:
        threads = list(_SENDING.get(session, ()))
    if threads:
        join_until(threads, time.monotonic() + timeout)


def _send_uncut(session: Session, send: Callable[[], Future[Any]]) -> Future[Any]:
    """``send()`` the creating request so that a Ctrl-C in the main thread cannot cut it:
    its reply carries the task id, and with it the ``tasks/cancel`` the Ctrl-C asks for.

    A transport may write the request and read its reply in the sending thread (an HTTP
    POST and its JSON body; a stdio write that waits for the pipe to drain), and a
    KeyboardInterrupt raised there would leave the request half-written or its reply
    unread. So the main thread sends from a thread of its own (``mcpsync-task-send``) and
    waits for it: a Ctrl-C ends only that wait; the request goes on (bounded by its
    timeout) and its reply resolves it as usual. Other threads get no SIGINT: they send
    directly."""
    if threading.current_thread() is not threading.main_thread():
        return send()
    outcome: Future[Future[Any]] = Future()

    def run() -> None:
        try:
            outcome.set_result(send())  # (send() attaches the callback that cancels)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome.set_exception(exc)
        finally:
            with _SENDING_LOCK:
                _SENDING.get(session, set()).discard(thread)

    thread = threading.Thread(target=run, name=f"mcpsync-task-send[{session.name}]", daemon=True)
    with _SENDING_LOCK:  # before start(): a Ctrl-C inside start() leaves it known
        _SENDING.setdefault(session, set()).add(thread)
    thread.start()
    return outcome.result()  # bounded as the request is (its timeout)


def _created_id(raw: Any) -> str | None:
    task = raw.get("task") if isinstance(raw, dict) else None
    task_id = task.get("taskId") if isinstance(task, dict) else None
    return task_id if isinstance(task_id, str) else None


def call(session: Session, params: dict[str, Any], convert: Convert, **options: Any) -> Any:
    """``start`` and block for the result; Ctrl-C cancels this task (``tasks/cancel``) and
    re-raises. Bounded as the task is (each request by the timeout, the polls by its ttl)."""
    handle = TaskFuture(session, None)
    try:
        # inside the try: a Ctrl-C while start() still runs (starting the follower thread
        # waits for it, long on a loaded machine) cancels the task too: tasks/cancel goes out
        # at once, or when the CreateTaskResult comes
        start(session, params, convert, handle=handle, **options)
        # Wait for it to be done, then take its outcome: a RequestTimeout outcome is a
        # TimeoutError too, as result(timeout=) signals "not yet" (that loop never ended).
        while not futures_wait((handle,), timeout=1.0).done:
            pass
        return handle.result()
    except KeyboardInterrupt:
        handle.cancel()
        raise


# -- picking a task up by id -----------------------------------------------------------


def pick_up(
    session: Session, task_id: str, timeout: float | None | Default = DEFAULT
) -> Future[Any]:
    """Follow the task ``task_id`` of ``session``'s server until it ends (see the module
    docstring); ``CapabilityError`` when the server agreed to no tasks."""
    era = _era_of(session)
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
    convert = _typed.plain_tool_result  # the tool is not known from the id
    _follow(session, handle, lambda: _legacy(session, handle, timeout, convert))
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


def _legacy(
    session: Session,
    handle: TaskFuture,
    timeout: float | None | Default,
    convert: Convert,
    task: dict[str, Any] | None = None,
) -> Any:
    """Follow the 2025-11-25 task of ``handle`` (``task``: its state, if known) to its end."""
    task_id = handle.task_id
    assert task_id is not None
    opts = CallOptions.of(timeout)
    started = time.monotonic()
    restarts = 0
    while True:
        try:
            if task is None:
                task = session._era.call("tasks/get", {"taskId": task_id}, _same, opts)
                if not isinstance(task, dict) or task.get("taskId") not in (None, task_id):
                    raise ProtocolError(f"tasks/get for {task_id} returned something else")
            status = task.get("status")
            if status == "cancelled":
                note = task.get("statusMessage")
                raise RequestCancelled(
                    f"task {task_id} was cancelled" + (f": {note}" if note else "")
                )
            if status in _TERMINAL_OR_INPUT:
                bound = CallOptions.of(_remaining(task, started, timeout))
                raw = session._era.call("tasks/result", {"taskId": task_id}, _same, bound)
                return convert(raw)
        except ServerRestarted:  # the server restarted under a poll: ask the new one
            restarts += 1
            if restarts > _RESTARTS_FOLLOWED or session.closed:
                raise
            task = None
            continue
        if status != "working":
            raise ProtocolError(f"task {task_id} has unknown status {status!r}")
        ttl = task.get("ttl")
        if isinstance(ttl, int) and not isinstance(ttl, bool):
            if time.monotonic() - started > ttl / 1000.0 + 5.0:
                raise RequestTimeout(
                    f"task {task_id} on {session.name!r} outlived its ttl ({ttl} ms)"
                )
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
        task = None


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
