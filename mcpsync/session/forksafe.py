"""The Session and Host side of fork safety (the process side is ``_lifecycle``).

(Session and Host are typed ``Any`` here: this module sits below both; they import it.)

Owns: ``ForkedEra``, the era a session gets in a forked child (every request, list,
subscription and log-level change raises ``ForkedError``; stopping it waits for nothing),
what a session and a host do at the fork (``session_forked``, in the at-fork hook) and on
``close()`` in the child (``release_session``, ``release_host``: the child's copies only),
and ``own_session`` / ``own_host``, the one-line registrations their ``__init__`` make.

A restart policy that brings a forked session up again in the child installs a new
connection and era, then calls ``own_session(session)`` so the session is this process's.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

from ..protocol import CallOptions, Convert, Era
from ..runtime import lifecycle as _lifecycle
from ..runtime.lifecycle import ForkedError

__all__ = ["ForkedEra", "own_session", "own_host", "release_session", "release_host"]


class ForkedEra(Era):
    """A forked child's era for a session of its parent: refuses everything, sends nothing."""

    bringup_phase = "initialize"

    def __init__(self, before: Era, owner: Any) -> None:
        self.name = before.name  # type: ignore[misc]
        if hasattr(before, "agreement"):  # an era that finished bring-up
            self.agreement = before.agreement
        self._owner = owner

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise _lifecycle.error(self._owner)

    def call(self, method: str, params: Any, convert: Convert, opts: CallOptions) -> Any:
        return self._refuse()

    def submit(self, method: str, params: Any, convert: Convert, opts: CallOptions) -> Future[Any]:
        return self._refuse()  # type: ignore[no-any-return]

    def page(self, method: str, params: Any, timeout: Any = None) -> Future[Any]:
        return self._refuse()  # type: ignore[no-any-return]

    def wait(self, future: Future[Any]) -> Any:
        return self._refuse()

    def subscribe(self, uri: str, timeout: float | None) -> None:
        self._refuse()

    def unsubscribe(self, uri: str, timeout: float | None) -> None:
        self._refuse()

    def set_log_level(self, level: str) -> None:
        self._refuse()

    def watch(self, timeout: float | None) -> None:
        self._refuse()

    def roots_changed(self) -> None:
        self._refuse()

    def invalidate(self, *methods: str) -> None:
        self._refuse()

    def cached(self, method: str) -> list[Any] | None:
        return self._refuse()  # type: ignore[no-any-return]

    def on_notification(self, method: str, params: dict[str, Any]) -> bool:
        return False

    def threads(self) -> list[threading.Thread]:
        return []


def session_forked(session: Any) -> None:
    """At the fork, in the child: the session's era refuses every call from now on.
    (Its transport, registered on its own, abandons its descriptors.)"""
    session._era = ForkedEra(session._era, session)


def own_session(session: Any) -> None:
    """Register ``session`` as this process's (its ``__init__``; again after a restart)."""
    _lifecycle.own(
        session,
        f"session {session.name!r}",
        kind="session",
        on_fork=session_forked,
        on_exit=lambda s, deadline: s.close(),
        exit_soon=session_exit_soon,
    )


def session_exit_soon(session: Any, deadline: float) -> bool:
    """Interpreter exit, before any server is told to end: a restart policy must not bring
    back the servers the exit is ending (their EOF would look like a crash)."""
    restart = session._restart  # the Session's restart policy at work, or None
    if restart is not None:
        restart.stop()
    return False


def release_session(session: Any) -> None:
    """``close()`` in a forked child: release the child's copies; the server is the parent's."""
    session._conn.transport.abandon()
    _lifecycle.disown(session)


def own_host(host: Any) -> None:
    """Register ``host`` (its ``__init__``): its sessions and transports register themselves."""
    _lifecycle.own(host, f"host {host.source}", kind="host")


def release_host(host: Any) -> None:
    """``close()`` in a forked child: release every session's copies; signal nothing."""
    for s in host._servers.values():
        session, s.session = s.session, None  # no lock: its holder may not exist here
        transport, s.transport = s.transport, None
        if session is not None:
            session.close()  # forked: release_session
        if transport is not None:
            transport.abandon()
    closed = threading.Event()  # a fresh one: the old one's lock may be held by a lost thread
    closed.set()
    host._closed = closed
    _lifecycle.disown(host)


__all__ += ["ForkedError", "session_forked"]
