"""One request in flight, and the helpers a close needs.

Owns: ``Progress`` (one progress report), ``CallOptions`` (a call's timeout and progress
options, one value from the Session down to ``Connection.request``/``call``;
``DEFAULT_OPTIONS`` when none is given), ``_Call`` (a request's deadlines, progress
callback and outcome slots), ``RequestFuture`` (the future ``Connection.request`` returns:
its ``call`` is declared), ``CallFuture`` and ``call_of`` (a future derived from another,
and the request that bounds either), ``server_error`` and ``_Call.settle_reply`` (a
response as the outcome to settle), ``fail_all`` (every pending call at once),
``ProgressTable`` and ``report_progress`` (who hears a progress token's reports), and
``join_until``/``warn_alive`` (join threads until one shared deadline; name those left).
The deadlines themselves are watched by the shared timer (``_shared.TIMER``).
The protocol layer uses ``CallOptions``, ``CallFuture`` and ``call_of``; the rest is
``mcpsync.rpc.connection``'s (``Progress`` is public there).
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, Final, NamedTuple, Protocol

from .. import jsonrpc
from ..errors import (
    ConfigError,
    ProtocolError,
    RequestCancelled,
    ServerError,
    URLElicitationRequired,
)
from ..telemetry import Finish
from ..transports.base import Message

__all__ = [
    "CallFuture",
    "CallOptions",
    "DEFAULT",
    "DEFAULT_OPTIONS",
    "Default",
    "Progress",
    "fail_all",
    "report_progress",
    "ProgressTable",
    "join_until",
    "warn_alive",
    "RequestFuture",
    "call_of",
    "server_error",
]

log = logging.getLogger("mcpsync")

# concurrent.futures' states of a done future
_DONE_STATES = frozenset({"CANCELLED", "CANCELLED_AND_NOTIFIED", "FINISHED"})
_NEVER = float("inf")


class Default(enum.Enum):
    """The type of ``DEFAULT``, the value of an argument that was not given: a call's
    ``timeout=DEFAULT`` is the connection's ``default_timeout`` (``None``: no limit)."""

    DEFAULT = "DEFAULT"

    def __repr__(self) -> str:  # how help() and the docs show the default
        return "DEFAULT"


#: "not given": a call's timeout is then the connection's default (reads well in help())
DEFAULT: Final = Default.DEFAULT


def join_until(threads: Any, deadline: float) -> list[threading.Thread]:
    """Join ``threads`` until one shared ``deadline`` (``time.monotonic()``); the ones still
    alive (the calling thread and never-started threads are skipped)."""
    current = threading.current_thread()
    alive = []
    for thread in threads:
        if thread is current or thread.ident is None:
            continue
        thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():
            alive.append(thread)
    return alive


def warn_alive(name: str, alive: list[threading.Thread], seconds: float) -> None:
    """Log one warning naming the threads that outlived a close."""
    if alive:
        log.warning(
            "mcpsync: %s: %d thread(s) still alive %.1f s after close: %s",
            name,
            len(alive),
            seconds,
            ", ".join(sorted(t.name for t in alive)),
        )


class Progress(NamedTuple):
    """One progress report for a request in flight."""

    progress: float
    total: float | None = None
    message: str | None = None


def seconds(what: str, value: Any) -> None:
    """Check a timeout argument: a number of seconds > 0, or None (no limit); else
    ``TypeError`` or ``ConfigError`` (a ``ValueError``) naming ``what``. Not on the hot path:
    only a timeout that is given is checked."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{what} must be a number of seconds or None (no limit), not {type(value).__name__}"
        )
    if not value > 0:  # also NaN
        raise ConfigError(
            f"{what} must be more than 0 seconds, or None for no limit; got {value!r}"
        )


def _ignore_progress(progress: Progress) -> None:
    """The progress callback of a call that wants only ``reset_timeout_on_progress``:
    with it the request carries a progress token, and each report restarts the timer."""


class CallOptions:
    """The four options of one call, made once by the Session and passed down as one value
    to ``Connection.request``/``call``.

    ``timeout`` (seconds, None = no limit; ``DEFAULT``: the connection's default);
    ``on_progress`` hears the call's progress reports (the request then carries a progress
    token); with ``reset_timeout_on_progress`` each report restarts the timeout, but never
    past ``max_timeout`` from the start (default: 10 x timeout).
    """

    __slots__ = ("timeout", "on_progress", "reset_timeout_on_progress", "max_timeout")

    def __init__(
        self,
        timeout: float | None | Default = DEFAULT,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
    ) -> None:
        if timeout is not DEFAULT:
            seconds("timeout", timeout)
        seconds("max_timeout", max_timeout)
        if reset_timeout_on_progress and on_progress is None:
            on_progress = _ignore_progress  # the token that lets progress reset the timer
        self.timeout = timeout
        self.on_progress = on_progress
        self.reset_timeout_on_progress = reset_timeout_on_progress
        self.max_timeout = max_timeout

    @classmethod
    def of(
        cls,
        timeout: float | None | Default = DEFAULT,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
    ) -> CallOptions:
        """The options, sharing ``DEFAULT_OPTIONS`` when none is given (the hot path)."""
        if (
            timeout is DEFAULT
            and on_progress is None
            and not reset_timeout_on_progress
            and max_timeout is None
        ):
            return DEFAULT_OPTIONS
        return cls(timeout, on_progress, reset_timeout_on_progress, max_timeout)

    def only_timeout(self) -> CallOptions:
        """The same timeout without progress (polls and follow-up requests)."""
        return CallOptions(self.timeout)

    def __repr__(self) -> str:
        return (
            f"CallOptions(timeout={self.timeout!r}, on_progress={self.on_progress!r}, "
            f"reset_timeout_on_progress={self.reset_timeout_on_progress}, max_timeout={self.max_timeout!r})"
        )


#: the options of a call that names none (shared: the hot path makes no object)
DEFAULT_OPTIONS = CallOptions()


class _Call:
    """One request in flight: its deadlines, its progress callback, and where its outcome goes.

    The outcome goes to ``future`` (``request()``), or, for a blocking ``call()``, into this
    object's own slots (``finished``/``value``/``error``): the waiting caller then needs no
    Future, no condition variable and no lock. Whoever pops the call from the pending table
    settles it, so each call is settled once.
    """

    __slots__ = ("id", "method", "future", "on_progress", "timeout", "deadline", "hard_deadline", "reset",
                 "finished", "value", "error", "event", "ordered", "parked", "params",
                 "finish")  # fmt: skip

    def __init__(self, rid: int, method: str, future: Future[Any] | None) -> None:
        self.id = rid
        self.method = method
        self.future = future
        self.on_progress: Callable[[Progress], None] | None = None
        self.timeout = _NEVER
        self.deadline = _NEVER
        self.hard_deadline = _NEVER
        self.reset = False
        self.finished = False
        self.value: Any = None
        self.error: BaseException | None = None
        self.event: threading.Event | None = None  # set by a waiter that cannot read itself
        #: settle behind the notifications queued before the reply (False: made on the dispatcher)
        self.ordered = True
        #: the reply, while it waits in the dispatch queue behind earlier notifications
        self.parked: Message | None = None
        #: the request's params as sent (the cancel rule looks at them), set by the connection
        self.params: dict[str, Any] | None = None
        #: ends its telemetry span with the outcome (``mcpsync.telemetry``; None: none)
        self.finish: Finish | None = None

    def done(self) -> bool:
        """Duck-typed like ``Future.done()`` for the transport's read loop."""
        return self.finished if self.future is None else self.future.done()

    def settle(self, value: Any, error: BaseException | None = None) -> bool:
        """Record the outcome; False when it was settled (or cancelled) already."""
        if self.finish is not None:
            self.end_span(value, error)
        future = self.future
        if future is not None:
            try:
                if error is None:
                    future.set_result(value)
                else:
                    future.set_exception(error)
            except InvalidStateError:
                return False
            return True
        if self.finished:
            return False
        self.value, self.error = value, error
        self.finished = True  # after value/error: a reader that sees this sees them
        event = self.event  # read after `finished` (the waiter sets event, then checks finished)
        if event is not None:
            event.set()
        return True

    def end_span(self, value: Any, error: BaseException | None) -> None:
        """End the call's telemetry span with its outcome (once; before the caller wakes)."""
        finish, self.finish = self.finish, None
        if finish is not None:
            try:
                finish(value, error)
            except Exception:  # noqa: BLE001 - telemetry never fails a call
                log.debug("mcpsync: ending the span of %s failed", self.method, exc_info=True)

    def settle_reply(self, message: Message) -> None:
        """Settle from the response ``message``: its result, its error, or neither."""
        if "result" in message and message.get("error") is None:
            self.settle(message["result"])
        elif (error := message.get("error")) is not None:
            self.settle(None, server_error(error, self.method))
        else:
            self.settle(
                None, ProtocolError(f"response to {self.method} has neither result nor error")
            )


class ProgressListener:
    """A progress callback for a token that outlives its request (``ProgressTable.listen``)."""

    __slots__ = ("on_progress",)
    reset = False  # (no deadline of its own to restart)

    def __init__(self, on_progress: Callable[[Progress], None]) -> None:
        self.on_progress: Callable[[Progress], None] | None = on_progress


class ProgressTable(dict[Any, "_Call | ProgressListener"]):
    """Progress tokens -> who hears their reports: a request's own call while it is pending
    (the connection registers it and drops it when it resolves), or a listener that outlives
    the request that named the token (a 2025-11-25 task: its token stays valid for the task's
    lifetime, past the ``CreateTaskResult``)."""

    def listen(self, token: str | int, on_progress: Callable[[Progress], None]) -> None:
        """Send the reports for ``token`` to ``on_progress`` until ``stop(token)``."""
        self[token] = ProgressListener(on_progress)

    def stop(self, token: str | int) -> None:
        """No more reports for ``token`` (a no-op if nobody listens)."""
        self.pop(token, None)


def report_progress(calls: ProgressTable, params: dict[str, Any]) -> None:
    """Hand a ``notifications/progress`` to its call's callback (and restart its timeout)."""
    call = calls.get(params.get("progressToken"))
    if call is None or call.on_progress is None:
        return
    if call.reset and type(call) is _Call and call.timeout != _NEVER:
        call.deadline = min(time.monotonic() + call.timeout, call.hard_deadline)
    call.on_progress(
        Progress(params.get("progress", 0), params.get("total"), params.get("message"))
    )


def fail_all(pending: dict[Any, _Call], error: BaseException) -> None:
    """Settle every call still in the ``pending`` table with ``error``, emptying it."""
    while pending:
        try:
            _, call = pending.popitem()
        except KeyError:
            break
        call.settle(None, error)


class CallFuture(Future):  # type: ignore[type-arg]
    """A future whose outcome one request in flight bounds: ``call`` is that request (its
    id and deadline; ``Connection.wait`` waits until that deadline), or None when no request
    bounds it (e.g. a page from a cache). The engine's own futures are ``RequestFuture``s;
    a future derived from another (a typed result, a list of pages, a modern call over
    several requests) is a ``CallFuture`` that takes its source's call (``call_of``)."""

    call: _Call | None = None


def call_of(future: Future[Any]) -> _Call | None:
    """The request that bounds ``future`` (see ``CallFuture``); None for any other future."""
    return future.call if isinstance(future, CallFuture) else None


class Canceller(Protocol):
    """What a ``RequestFuture`` needs of its connection: retire a cancelled call."""

    def _on_cancelled(self, call: _Call) -> None: ...


class RequestFuture(CallFuture):
    """The future of one request (``Connection.request``): ``cancel()`` retires it and
    tells the server."""

    call: _Call
    connection: Canceller

    def done(self) -> bool:
        # Read without the condition lock (callers poll this in their read loop); a
        # stale answer only costs one more turn of that loop.
        return self._state in _DONE_STATES  # type: ignore[attr-defined]

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        self.connection._on_cancelled(self.call)
        return True


def server_error(error: Any, method: str) -> BaseException:
    if not isinstance(error, dict):
        return ProtocolError(f"malformed error in response to {method}: {error!r}")
    code = error.get("code")
    message = error.get("message", "")
    if code == -32800:  # the server cancelled the request (REQUEST_CANCELLED in some SDKs)
        return RequestCancelled(f"{method} was cancelled by the server: {message}")
    if code == -32042:  # URL elicitation required (2025-11-25): typed, with its URLs
        return URLElicitationRequired(str(message), error.get("data"), method=method)
    return ServerError(
        code if isinstance(code, int) else jsonrpc.INTERNAL_ERROR,
        str(message),
        error.get("data"),
        method=method,
    )
