"""The restart policy at work: a session that brings its server up again when it dies.

Owns: ``Restarter`` (one per session with a ``RestartPolicy``, see ``_restart_policy``:
sees the death through ``Connection.on_closed`` or through a call that failed, brings the
session up again on a named ``mcpsync-restart[name]`` thread with the same target,
capabilities and handlers, re-opens what was open, and gives up after ``max_attempts`` in a
row, keeping every reason; in a child of ``os.fork()``, brings up the child's own
connection), and ``attach`` (what ``Session.connect`` calls). The Session holds its
``Restarter`` as a member and reads ``restarts``, ``restart_history``, ``restarting``,
``restart_policy`` and ``restart_failure`` from it. ``RestartPolicy`` and
``RestartEvent`` are re-exported from here.

What is re-opened: resource subscriptions, list-changed interest (the modern era's
``subscriptions/listen`` stream), the log level; the tool cache is forgotten. Calls in flight
when the server died fail with ``ServerRestarted`` (``_guard``); reads are re-sent only with
``retry_reads=True``. An HTTP session the server forgot (404) is initialized again in place
(the request that met the 404 is re-sent: the server never ran it) and counts as a restart.

Also owns ``heal_expiry``: with or without a policy, an HTTP transport gets the
connection's re-initialization as its ``reinitialize_session`` hook, so that a request
whose re-send meets another expiry is initialized again, bounded (see
``transports.http.session``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from .. import telemetry as _telemetry
from .. import typed as _typed
from ..errors import (
    ConfigError,
    HTTPStatusError,
    MCPSyncError,
    RequestTimeout,
    RestartLimitReached,
    ServerRestarted,
    SessionClosed,
    SessionExpired,
    TransportError,
)
from ..protocol import Era
from ..rpc.connection import CLOSE_TIMEOUT, Connection, join_until
from ..runtime import lifecycle as _lifecycle
from ..transports.base import Transport
from . import bringup as _bringup
from .forksafe import own_session
from .guard import Guard, is_death
from .restart_policy import RestartEvent, RestartPolicy, words

#: a ``mcpsync.session.Session`` (not imported: the session module imports this one)
Session = Any

__all__ = ["RestartPolicy", "RestartEvent", "Restarter", "attach", "heal_expiry"]

log = logging.getLogger("mcpsync")

_READY, _RESTARTING, _FAILED, _STOPPED = "ready", "restarting", "failed", "stopped"

#: serialises the bring-up of forked sessions in a child (made afresh in every child)
_CHILD_LOCK = threading.Lock()


def _fresh_child_lock() -> None:
    global _CHILD_LOCK
    _CHILD_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_fresh_child_lock)


class Restarter:
    """Keeps one Session alive under a ``RestartPolicy``."""

    def __init__(
        self,
        session: Session,
        policy: RestartPolicy,
        select: Callable[[float | None], list[Callable[[], Transport]]],
        connection_for: Callable[[Transport], Connection],
        connect_timeout: float | None,
    ) -> None:
        self.policy = policy
        self.retry_reads = policy.retry_reads
        self.level: str | None = None
        self.history: list[RestartEvent] = []
        self.count = 0
        self._session = session
        self._name = session.name
        self._select = select
        self._connection_for = connection_for
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._state = _READY
        self._ready = threading.Event()
        self._ready.set()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._starting: Connection | None = None
        self._threads: set[threading.Thread] = set()
        self._retired: weakref.WeakKeyDictionary[Connection, BaseException] = (
            weakref.WeakKeyDictionary()
        )
        self._later: list[Callable[[Era | None, BaseException | None], None]] = []
        self._streak = 0  # bring-up attempts since the server last stayed up reset_after s
        self._run_reasons: list[BaseException] = []
        self._up_since = time.monotonic()
        self.guard = Guard(self, session._era, session._conn)

    # -- what the guard and the Session ask --------------------------------------------

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    @property
    def phase(self) -> str:
        """ "ready", "restarting" (a bring-up under way), "failed" or "stopped"."""
        return self._state

    def reasons(self) -> list[BaseException]:
        """The errors of the restart run under way (or the one that gave up), oldest
        first: the death, then each failed bring-up attempt. Empty when ready."""
        with self._lock:
            if self._state == _RESTARTING and self.history and self.history[-1].ok is None:
                event = self.history[-1]
                return [event.reason, *event.failures]
        failure = self._failure
        if self._state == _FAILED and isinstance(failure, RestartLimitReached):
            return list(failure.reasons)
        return []

    @property
    def restarting(self) -> bool:
        """True while a bring-up is under way (calls made now wait for it)."""
        return self._state == _RESTARTING

    @property
    def finished(self) -> bool:
        """Closed by the caller, or given up: nothing will bring the session back."""
        return self._state in (_FAILED, _STOPPED)

    def bound(self) -> float:
        per = self._connect_timeout if self._connect_timeout is not None else 60.0
        waits = sum(self.policy.delay(n) for n in range(1, self.policy.max_attempts + 1))
        return waits + per * self.policy.max_attempts + 5.0

    def reason_of(self, conn: Connection) -> BaseException | None:
        with self._lock:
            return self._retired.get(conn)

    def ready(self, timeout: float | None) -> tuple[Era, Connection]:
        guard = self.guard
        conn = guard.conn
        if self._state == _READY and conn.closed and conn.close_error is not None:
            self.trigger(conn, conn.close_error)  # died before the callback came: wait for it
        if not self._ready.is_set():
            bound = self.bound() if timeout is None else min(timeout, self.bound())
            if not self._ready.wait(bound):
                raise RequestTimeout(f"{self._name!r} is still being restarted after {bound:g} s")
        if self._state == _FAILED:
            assert self._failure is not None
            raise self._failure
        if self._state == _STOPPED:
            raise SessionClosed(f"session with {self._name!r} was closed")
        return guard.inner, guard.conn

    def died(self, conn: Connection, reason: BaseException, method: str) -> ServerRestarted:
        self.trigger(conn, reason)
        return ServerRestarted(
            f"{method} to {self._name!r} was in flight when the server stopped "
            f"({words(reason)}); the restart policy brings it up again and the call "
            "was not re-sent",
            reason=reason,
            method=method,
        )

    def after_restart(self, callback: Callable[[Era | None, BaseException | None], None]) -> None:
        with self._lock:
            if self._state == _RESTARTING:
                self._later.append(callback)
                return
            state, failure, era = self._state, self._failure, self.guard.inner
        if state == _READY:
            callback(era, None)
        else:
            callback(None, failure or SessionClosed(f"session with {self._name!r} was closed"))

    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return [t for t in self._threads if t.is_alive()]

    def stop(self) -> None:
        """The caller closes the session: no restart starts or finishes after this; a
        bring-up under way is ended (its server stopped) and its thread joined (bounded)."""
        with self._lock:  # a transport start in progress finishes first (a spawn: bounded)
            if self._state == _STOPPED:
                return
            if self._state != _FAILED:
                self._state = _STOPPED
            self._stop.set()
            starting, self._starting = self._starting, None
            threads = list(self._threads)
            later, self._later = self._later, []
        self._ready.set()
        if starting is not None:
            starting.close()
        join_until(threads, time.monotonic() + CLOSE_TIMEOUT)
        closed = SessionClosed(f"session with {self._name!r} was closed")
        for callback in later:
            callback(None, closed)

    # -- death ---------------------------------------------------------------------------

    def watch(self, conn: Connection) -> None:
        """Hear of ``conn``'s death (it may have died already: then at once)."""
        conn.on_closed(functools.partial(self.trigger, conn))

    def trigger(self, conn: Connection, reason: BaseException) -> None:
        """``conn``'s server is gone: start one restart (the first to notice wins)."""
        with self._lock:
            if self._state != _READY or conn is not self.guard.conn:
                return  # under way, given up, closed, or an old connection
            self._state = _RESTARTING
            self._retired[conn] = reason
            self._ready.clear()
            # in the history with the state: a status read now names the death as the reason
            event = RestartEvent(reason=reason, at=time.time(), number=len(self.history) + 1)
            self.history.append(event)
            thread = threading.Thread(
                target=self._run, args=(conn, event), name=f"mcpsync-restart[{self._name}]",
                daemon=True,
            )  # fmt: skip
            self._threads.add(thread)
        thread.start()

    def _run(self, dead: Connection, event: RestartEvent) -> None:
        started = time.monotonic()
        reason = event.reason
        log.warning("mcpsync: %s stopped (%s); restarting it", self._name, words(reason))
        try:
            old = self.guard.inner
            old.stop()
            dead.close(also=old.threads)  # its threads and process, before the new one starts
            if started - self._up_since >= self.policy.reset_after:
                self._streak, self._run_reasons = 0, []
            self._run_reasons.append(reason)
            while not self._stop.is_set():
                if self._streak >= self.policy.max_attempts:
                    self._give_up(event, started)
                    return
                self._streak += 1
                if self._stop.wait(self.policy.delay(self._streak)):
                    break
                try:
                    conn = self._bring_up()
                except Exception as exc:  # noqa: BLE001 - kept as a reason, tried again
                    if self._stop.is_set():
                        break
                    event.failures.append(exc)
                    self._run_reasons.append(exc)
                    log.warning("mcpsync: restart of %s failed: %s", self._name, words(exc))
                    continue
                if self._finish(event, conn, started):
                    return
                break
            self._stopped(event, started)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _bring_up(self) -> Connection:
        """A new connection over the target's transports, initialized on the same Session
        (its Interest, tools, handlers and capabilities); unwound on failure. With telemetry,
        inside a ``connect`` span of its own (``mcpsync.telemetry``)."""
        with _telemetry.connecting(self._session._conn.instrument, self._name):
            return self._bring_up_over_candidates()

    def _bring_up_over_candidates(self) -> Connection:
        timeout = self._connect_timeout
        deadline = time.monotonic() + timeout if timeout is not None else None
        session = self._session
        candidates = self._select(deadline)
        if self.policy.make_transport is not None:
            candidates = [self.policy.make_transport]
        handlers = dict(session._conn.request_handlers)  # bound to this session
        last: BaseException | None = None
        for position, make in enumerate(candidates):
            if position and deadline is not None and time.monotonic() >= deadline:
                raise RequestTimeout(f"restart of {self._name!r} took over {timeout:g} s") from last
            chosen = make()
            conn = self._connection_for(chosen)  # a connection as connect() makes one
            heal_expiry(conn)
            conn.request_handlers = handlers
            conn.notification_handler = session._on_notification
            with self._lock:  # close() waits for a start under way, then ends it
                if self._stop.is_set():
                    chosen.close()
                    raise SessionClosed(f"session with {self._name!r} was closed")
                self._starting = conn
                session._conn = conn
                with _telemetry.phase(conn.instrument, "transport"):  # as connect()'s phases
                    conn.start()
            try:
                with _telemetry.phase(conn.instrument, "handshake"):
                    session._initialize(deadline=deadline)
                _typed.warm()
            except HTTPStatusError as exc:
                conn.close()
                last = exc
                if exc.status in (400, 404, 405) and position + 1 < len(candidates):
                    continue
                raise
            except BaseException as exc:
                conn.close()
                _bringup.explain_failure(exc, chosen)
                raise
            return conn
        assert last is not None
        raise last

    def _finish(self, event: RestartEvent, conn: Connection, started: float) -> bool:
        """Put the new era in place, re-open what was open, let calls through."""
        session = self._session
        with self._lock:
            self._starting = None
            if self._stop.is_set():
                stopped = True
            else:
                stopped = False
                era = session._era
                era.on_expired(self._expired)
                self.guard.install(era, conn)
                session._era = self.guard
        if stopped:
            session._era.stop()
            conn.close(also=session._era.threads)
            return False
        self._reopen(era, event)
        with self._lock:
            if self._state != _RESTARTING:
                return True  # closed meanwhile: stop() ran the waiting callbacks
            self._state = _READY
            self._up_since = time.monotonic()
            self.count += 1
            event.ok, event.seconds = True, time.monotonic() - started
            later, self._later = self._later, []
        self._ready.set()
        log.warning("mcpsync: %s is back (restart %d)", self._name, self.count)
        for callback in later:
            callback(era, None)
        self._announce(event)
        self.watch(conn)  # after the announcement: a death at once is the next event
        return True

    def _give_up(self, event: RestartEvent, started: float) -> None:
        reasons = list(self._run_reasons)
        lines = "\n".join(f"  {n}. {words(r)}" for n, r in enumerate(reasons, 1))
        failure = RestartLimitReached(
            f"{self._name!r}: the restart policy gave up after {self._streak} bring-up attempts "
            f"in a row (max_attempts={self.policy.max_attempts}); the session stays closed. "
            f"Reasons, oldest first:\n{lines}",
            reasons=reasons,
        )
        with self._lock:
            if self._state != _RESTARTING:
                return
            self._state, self._failure = _FAILED, failure
            event.ok, event.seconds = False, time.monotonic() - started
            later, self._later = self._later, []
        self._ready.set()
        log.error("mcpsync: %s", failure)
        instrument = self._session._conn.instrument
        if instrument is not None:  # the session ends here, closed or not
            instrument.session_ended(failure)
        for callback in later:
            callback(None, failure)
        self._announce(event)

    def _stopped(self, event: RestartEvent, started: float) -> None:
        event.ok, event.seconds = False, time.monotonic() - started
        self._announce(event)

    def _announce(self, event: RestartEvent) -> None:
        if self.policy.on_restart is None:
            return
        try:
            self.policy.on_restart(event)
        except Exception:
            log.exception("mcpsync: on_restart callback for %s failed", self._name)

    # -- a forked child -----------------------------------------------------------------

    def in_child(self) -> None:
        """The session is used in a child of ``os.fork()``: bring up this process's own
        connection (a new server process for stdio; the parent's is never touched: its
        copies were abandoned at the fork) and re-open what was open."""
        session = self._session
        with _CHILD_LOCK:
            if not _lifecycle.forked(session):
                return  # another thread of this child did it
            # the parent's threads are not here: fresh primitives, nothing under way
            self._lock = threading.Lock()
            self._ready, self._stop = threading.Event(), threading.Event()
            self._ready.set()
            self._threads, self._later, self._starting = set(), [], None
            self._retired = weakref.WeakKeyDictionary()
            self._state, self._failure = _READY, None
            started = time.monotonic()
            reason = _lifecycle.error(session)
            event = RestartEvent(reason=reason, at=time.time(), number=len(self.history) + 1)
            self.history = [*self.history, event]
            self.count = 0  # this process's count
            conn = self._bring_up()
            era = session._era
            era.on_expired(self._expired)
            self.guard.install(era, conn)
            session._era = self.guard
            own_session(session)  # this process's from now on
            self._reopen(era, event)
            self.count, self._up_since = 1, time.monotonic()
            event.ok, event.seconds = True, time.monotonic() - started
        log.info(
            "mcpsync: %s used after os.fork(): brought up in process %d", self._name, os.getpid()
        )
        self._announce(event)
        self.watch(conn)

    # -- re-opening ---------------------------------------------------------------------

    def _reopen(self, era: Era, event: RestartEvent) -> None:
        session = self._session
        session._tools.forget()
        timeout = session._conn.default_timeout
        interest = session._interest
        kinds = interest.kinds()
        if kinds:
            era.watch(timeout)  # modern: the listen stream; legacy: the server sends anyway
            event.reopened.append("list changes: " + ", ".join(kinds))
        for uri in interest.uris():
            try:
                session._require("resources/subscribe")
                era.subscribe(uri, timeout)
            except MCPSyncError as exc:
                event.problems.append(f"subscription {uri}: {words(exc)}")
                log.warning("mcpsync: %s: subscription %s not re-opened: %s", self._name, uri, exc)
            else:
                event.reopened.append(f"subscription {uri}")
        if self.level is not None:
            try:
                era.set_log_level(self.level)
            except MCPSyncError as exc:
                event.problems.append(f"log level {self.level}: {words(exc)}")
            else:
                event.reopened.append(f"log level {self.level}")

    def _expired(self) -> None:
        """The HTTP session expired (404): initialize again on the same connection (in the
        caller whose request met the 404, which is then re-sent), re-open on a worker."""
        session = self._session
        conn = session._conn
        for attempt in (1, 2):
            try:
                session._reinitialize()
                break
            except TransportError as exc:
                # a restarted server: a keep-alive connection to the old process may fail the
                # first initialize where the pool cannot prove it undelivered (no TCP_INFO:
                # not Linux; the requests path); it is safe to send again (it makes a new
                # session); then the server went away meanwhile: a full restart
                if attempt == 2 or is_death(conn, exc) is None:
                    raise self.died(conn, exc, "initialize") from exc
                log.info("mcpsync: %s: initialize again after %s", self._name, words(exc))
        era = session._era
        with self._lock:
            if self._state != _READY:
                return
            self.guard.install(era, session._conn)
            session._era = self.guard
            self.count += 1
            self._up_since = time.monotonic()
        reason = SessionExpired(f"{self._name!r} answered 404 for the HTTP session")
        event = RestartEvent(reason=reason, at=time.time(), number=len(self.history) + 1, ok=True)
        self.history.append(event)

        def reopen() -> None:
            try:
                self._reopen(era, event)
                self._announce(event)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        thread = threading.Thread(target=reopen, name=f"mcpsync-restart[{self._name}]", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()


def attach(
    session: Session,
    restart: Any,
    select: Callable[[float | None], list[Callable[[], Transport]]],
    connection_for: Callable[[Transport], Connection],
    connect_timeout: float | None,
    transport_target: bool,
) -> Restarter | None:
    """Put ``session`` (just brought up) under the restart policy ``restart`` (see
    ``RestartPolicy.of``); None when it is off. ``select(deadline)``: the target's transport
    factories; ``connection_for(transport)``: a new connection over it, as connect() makes
    one (the session's handlers are put on it at each restart)."""
    heal_expiry(session._conn)
    policy = RestartPolicy.of(restart)
    if policy is None:
        return None
    if transport_target and policy.make_transport is None:
        session._conn.close()
        raise ConfigError(
            "a Transport target cannot be started twice: give RestartPolicy(make_transport=...) "
            "or connect with an argv or a URL"
        )
    restarter = Restarter(session, policy, select, connection_for, connect_timeout)
    session._era.on_expired(restarter._expired)
    session._era = restarter.guard
    restarter.watch(session._conn)
    return restarter


def heal_expiry(conn: Connection) -> None:
    """Give ``conn``'s transport, if it is a Streamable HTTP one, the connection's own
    re-initialization (``Connection.reinitialize_once``: serialised; whatever the era put
    in the connection's hooks then: the session's, or the restart policy's ``_expired``)
    as its ``reinitialize_session`` hook."""
    if not conn.transport.features.session_expiry:
        return  # a transport whose server cannot forget its session
    conn.transport.reinitialize_session = functools.partial(_reinitialize, weakref.ref(conn))


def _reinitialize(ref: weakref.ref[Connection]) -> None:
    conn = ref()
    if conn is None or not conn.reinitialize_once():
        raise SessionExpired("the HTTP session expired and this connection cannot initialize again")
