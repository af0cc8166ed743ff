"""The era a Session with a restart policy holds: every call through the current era, with
the server's death turned into ``ServerRestarted``.

Owns: ``Guard`` (an ``Era`` that delegates to the era of the current bring-up, waits while
a restart is under way, tells the restart policy when a call saw the server die, and
re-sends reads after the restart when the policy allows it), ``Guarded`` (the future it
returns, settled with the translated error or the re-sent read's outcome), ``Gate`` (what
the guard needs from ``_restart.Restarter``), ``READ_METHODS`` and ``is_death``.

A call in flight when the server died fails with ``ServerRestarted`` (never re-sent when it
is not a read, e.g. ``tools/call``); a call made while the restart runs waits for it (bounded
by the call's timeout) and goes out on the new connection. A future made then (``submit_*``)
is returned at once and sent when the restart is done (``Deferred``; its timeout is watched
by the shared timer).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from ..errors import (
    ConnectError,
    RequestTimeout,
    ServerRestarted,
    SessionClosed,
    TLSError,
    TransportError,
)
from ..protocol import UNSET, CallOptions, Convert, Derived, Era, settle
from ..protocol.modern import ModernFuture
from ..rpc.calls import Default
from ..rpc.connection import Connection
from ..rpc.shared import TIMER

__all__ = ["Deferred", "Gate", "Guard", "Guarded", "READ_METHODS", "is_death"]

#: requests that only read: re-sent after a restart when ``RestartPolicy(retry_reads=True)``
READ_METHODS = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "tasks/get",
        "tasks/list",
    }
)


def is_death(
    conn: Connection, error: BaseException, known: BaseException | None = None
) -> BaseException | None:
    """Why the server behind ``conn`` is gone, if ``error`` (a failed call) shows it: the
    connection ended by itself (a stdio exit, an event stream that ended), or an HTTP
    server could not be reached (``ConnectError``, TLS failures excepted, or a reply stream
    that ended because of one). ``known``: why the restart policy retired ``conn`` (its
    pending calls then end with ``SessionClosed``). None otherwise."""
    if isinstance(error, SessionClosed) and not isinstance(error, TransportError):
        return known  # closed by the restart that replaced it; None: by the caller
    if conn.closed and conn.close_error is not None:
        return conn.close_error
    if isinstance(error, ServerRestarted):  # worded already (a re-initialization that failed)
        return error.reason
    for what in (error, error.__cause__):  # a reply stream lost because the server went away
        if isinstance(what, ConnectError) and not isinstance(what, TLSError):
            return error
    return None


class Gate(Protocol):
    """What the guard asks of the restart policy (``_restart.Restarter``)."""

    retry_reads: bool
    #: the log level last asked for (re-sent after a restart)
    level: str | None

    @property
    def phase(self) -> str:
        """ "ready", "restarting", "failed" or "stopped"."""

    def reason_of(self, conn: Connection) -> BaseException | None:
        """Why a restart retired ``conn`` (None: it did not)."""

    def ready(self, timeout: float | None) -> tuple[Era, Connection]:
        """The current era and connection; waits (bounded) while a restart runs."""

    def died(self, conn: Connection, reason: BaseException, method: str) -> ServerRestarted:
        """``conn``'s server is gone: start a restart (once) and word the in-flight error."""

    def after_restart(self, callback: Callable[[Era | None, BaseException | None], None]) -> None:
        """Run ``callback(era, None)`` once the restart is done, ``(None, error)`` if it failed."""

    def bound(self) -> float:
        """Seconds a restart may take in all (backoffs and bring-ups)."""

    def threads(self) -> list[threading.Thread]:
        """The restart threads alive, for the close join."""


def _timeout_of(opts: CallOptions | None, conn: Connection) -> float | None:
    """The call's timeout in seconds (None: no limit); the connection's when it names none."""
    if opts is None or isinstance(opts.timeout, Default):
        return conn.default_timeout
    return opts.timeout


class Guarded(Derived):
    """A guarded call's future: the source's outcome, a death as ``ServerRestarted``, or,
    for a read the policy re-sends, the outcome of the same read after the restart."""

    def __init__(
        self,
        source: Future[Any],
        gate: Gate,
        era: Era,
        conn: Connection,
        method: str,
        again: Callable[[Era], Future[Any]] | None,
    ) -> None:
        self.era, self.method = era, method
        self._gate, self._watched, self._again = gate, conn, again
        super().__init__(source, _same, conn)

    @property
    def source(self) -> Future[Any]:
        return self._source

    @property
    def task_id(self) -> str | None:
        """The task the server made of this call (modern era, tasks extension), else None."""
        return self._source.task_id if isinstance(self._source, ModernFuture) else None

    def _resolve(self, source: Future[Any]) -> None:
        error = None if source.cancelled() else source.exception()
        watched = self._watched
        reason = (
            is_death(watched, error, self._gate.reason_of(watched))
            if isinstance(error, TransportError | SessionClosed)
            else None
        )
        if reason is None:
            super()._resolve(source)
            return
        restarted = self._gate.died(self._watched, reason, self.method)
        if self._again is None:
            settle(self, restarted)
            return
        again = self._again

        def resend(era: Era | None, failure: BaseException | None) -> None:
            if era is None:
                settle(self, failure or restarted)
                return
            try:
                follow = again(era)
            except BaseException as exc:  # noqa: BLE001 - delivered through the future
                settle(self, exc)
                return
            follow.add_done_callback(self._copy)

        self._gate.after_restart(resend)

    def _copy(self, follow: Future[Any]) -> None:
        if follow.cancelled():
            Future.cancel(self)
        elif (error := follow.exception()) is not None:
            settle(self, error)
        else:
            settle(self, None, follow.result())

    def result(self, timeout: float | None = None) -> Any:
        if self._source.done():  # settled, or waiting for a re-sent read: a plain wait
            return Future.result(self, timeout)
        return super().result(timeout)


def _same(value: Any) -> Any:
    return value


class Deferred(Future):  # type: ignore[type-arg]
    """A future made while a restart runs: sent once it is done, or failed with
    ``RequestTimeout`` when the call's timeout passes first (on the shared timer: its
    ``deadline``); ``cancel()`` before it went out sends nothing, after it cancels the call."""

    def __init__(self, timeout: float | None) -> None:
        super().__init__()
        self.deadline = float("inf") if timeout is None else time.monotonic() + timeout
        self.timeout = timeout
        self._source: Future[Any] | None = None
        self._table = {0: self} if timeout is not None else {}
        if self._table:
            TIMER.attach(id(self), self._table, self._expire)
            TIMER.schedule(self.deadline)

    def _expire(self, _: Any) -> bool:
        self._leave_timer()
        settle(
            self, RequestTimeout(f"the server is still being restarted after {self.timeout:g} s")
        )
        return True

    def _leave_timer(self) -> None:
        if self._table:
            self._table.clear()
            TIMER.detach(id(self))

    def follow(self, source: Future[Any]) -> None:
        """The call went out: its outcome is this future's."""
        self._leave_timer()
        self._source = source
        if self.done():  # cancelled meanwhile
            source.cancel()
            return
        source.add_done_callback(self._copy)

    def _copy(self, source: Future[Any]) -> None:
        if source.cancelled():
            Future.cancel(self)
        elif (error := source.exception()) is not None:
            settle(self, error)
        else:
            settle(self, None, source.result())

    def cancel(self) -> bool:
        source = self._source
        if source is not None:
            source.cancel()
        self._leave_timer()
        return super().cancel()


class Guard(Era):
    """The Session's era while a restart policy is on; ``inner`` is the current bring-up's."""

    name = "legacy"
    bringup_phase = "initialize"

    def __init__(self, gate: Gate, inner: Era, conn: Connection) -> None:
        self._gate = gate
        self.inner = inner
        self.conn = conn
        self.agreement = inner.agreement

    def install(self, inner: Era, conn: Connection) -> None:
        """The restart brought up ``inner`` over ``conn``."""
        self.inner, self.conn, self.agreement = inner, conn, inner.agreement

    def _now(self, opts: CallOptions | None = None) -> tuple[Era, Connection]:
        return self._gate.ready(_timeout_of(opts, self.conn))

    def _guarded(self, method: str, opts: CallOptions | None, run: Callable[[Era], Any]) -> Any:
        """``run(era)`` on the current era; a death raises ``ServerRestarted``, or runs a
        read once more on the restarted era when the policy re-sends reads."""
        era, conn = self._now(opts)
        try:
            return run(era)
        except (TransportError, SessionClosed) as exc:
            reason = is_death(conn, exc, self._gate.reason_of(conn))
            if reason is None:
                raise
            restarted = self._gate.died(conn, reason, method)
            if not (self._gate.retry_reads and method in READ_METHODS):
                raise restarted from exc
        era, conn = self._now(opts)  # waits for the restart (bounded)
        try:
            return run(era)
        except (TransportError, SessionClosed) as exc:
            reason = is_death(conn, exc, self._gate.reason_of(conn))
            if reason is None:
                raise
            raise self._gate.died(conn, reason, method) from exc

    def _future(
        self,
        method: str,
        opts: CallOptions | None,
        send: Callable[[Era], Future[Any]],
    ) -> Future[Any]:
        if self._gate.phase == "restarting":  # returned at once: sent once the restart is done
            return self._deferred(method, opts, send)
        era, conn = self._now(opts)
        again = send if self._gate.retry_reads and method in READ_METHODS else None
        try:
            source = send(era)
        except (TransportError, SessionClosed) as exc:
            reason = is_death(conn, exc, self._gate.reason_of(conn))
            if reason is None:
                raise
            restarted = self._gate.died(conn, reason, method)
            if again is None:
                raise restarted from exc
            era, conn = self._now(opts)
            source = send(era)
        return Guarded(source, self._gate, era, conn, method, again)

    def _deferred(
        self, method: str, opts: CallOptions | None, send: Callable[[Era], Future[Any]]
    ) -> Deferred:
        out = Deferred(_timeout_of(opts, self.conn))

        def go(era: Era | None, failure: BaseException | None) -> None:
            if out.done():  # timed out or cancelled meanwhile: nothing is sent
                return
            if era is None:
                settle(out, failure or SessionClosed("the restart ended the session"))
                return
            try:
                out.follow(self._future(method, opts, send))
            except BaseException as exc:  # noqa: BLE001 - delivered through the future
                settle(out, exc)

        self._gate.after_restart(go)
        return out

    # -- the Era interface -------------------------------------------------------------

    def call(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> Any:
        return self._guarded(method, opts, lambda era: era.call(method, params, convert, opts))

    def submit(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> Future[Any]:
        return self._future(method, opts, lambda era: era.submit(method, params, convert, opts))

    def page(
        self, method: str, params: dict[str, Any] | None, timeout: float | None | Default = UNSET
    ) -> Future[Any]:
        return self._future(method, None, lambda era: era.page(method, params, timeout))

    def wait(self, future: Future[Any]) -> Any:
        if isinstance(future, Guarded):
            try:
                future.era.wait(future.source)  # reads its reply (stdio) in this thread
            except KeyboardInterrupt:
                future.cancel()
                raise
            except BaseException:  # noqa: BLE001, S110 - the guarded future holds the outcome
                pass
            return future.result(timeout=self._gate.bound())
        return self._guarded("request", None, lambda era: era.wait(future))

    def subscribe(self, uri: str, timeout: float | None) -> None:
        self._guarded("resources/subscribe", None, lambda era: era.subscribe(uri, timeout))

    def unsubscribe(self, uri: str, timeout: float | None) -> None:
        self._guarded("resources/unsubscribe", None, lambda era: era.unsubscribe(uri, timeout))

    def set_log_level(self, level: str) -> None:
        self._gate.level = level  # asked again of a restarted server
        self._guarded("logging/setLevel", None, lambda era: era.set_log_level(level))

    def watch(self, timeout: float | None) -> None:
        self._now()[0].watch(timeout)

    def roots_changed(self) -> None:
        self._guarded("notifications/roots/list_changed", None, lambda era: era.roots_changed())

    def invalidate(self, *methods: str) -> None:
        self.inner.invalidate(*methods)

    def cached(self, method: str) -> list[Any] | None:
        return self.inner.cached(method)

    def on_notification(self, method: str, params: dict[str, Any]) -> bool:
        return self.inner.on_notification(method, params)

    def on_expired(self, reinitialize: Callable[[], None]) -> None:
        self.inner.on_expired(reinitialize)

    def stop(self) -> None:
        self.inner.stop()

    def threads(self) -> list[threading.Thread]:
        return [*self.inner.threads(), *self._gate.threads()]
