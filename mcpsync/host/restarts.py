"""Per-entry restart policies of a Host.

Owns: turning an entry's ``restart`` setting (the config key, or ``session_kwargs``) into
the ``RestartPolicy`` its ``Session.connect`` gets, with a ``make_transport`` that makes
stdio transports the way the host makes the first one (so the host can still stop a server
that is starting, and every restart starts the same command); and what a status row says
about restarts (``restarts_of``: the count and phase, ``RestartCount``; ``failure_of``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["give_transport_factory", "restarts_of", "failure_of", "RestartCount"]


def give_transport_factory(
    kwargs: dict[str, Any], name: str, identity_of: Callable[..., tuple[Any, Any]]
) -> None:
    """Before the host replaces an argv target by a transport it made: a restart policy in
    ``kwargs`` gets a ``make_transport`` that makes the same stdio transport again
    (``ConfigError`` for a malformed ``restart`` setting)."""
    from ..session.restart import RestartPolicy  # late: the host imports the session layer lazily
    from ..transports.select import stdio_transport

    policy = RestartPolicy.of(kwargs.get("restart"), where=f"server {name!r}: restart")
    if policy is None or policy.make_transport is not None:
        return
    argv, env, cwd = kwargs["target"], kwargs.get("env"), kwargs.get("cwd")
    inherit_env, label = kwargs.get("inherit_env", False), kwargs.get("name") or name

    def make() -> Any:
        transport = stdio_transport(argv, env=env, cwd=cwd, inherit_env=inherit_env, name=label)
        transport.identity = identity_of(argv, env=env, cwd=cwd)[0]
        return transport

    kwargs["restart"] = dataclasses.replace(policy, make_transport=make)


class RestartCount(int):
    """How often a session's restart policy brought it back (an ``int``), with where the
    policy is now: ``phase`` ("ready", "restarting", "failed", "stopped"; "" without a
    policy) and ``reasons`` (the errors of the restart under way, or of the run that gave
    up, oldest first). ``ServerStatus`` takes its state and reasons from it."""

    phase: str = ""
    reasons: tuple[BaseException, ...] = ()

    @classmethod
    def of(cls, count: int, phase: str, reasons: list[BaseException]) -> RestartCount:
        made = cls(count)
        made.phase, made.reasons = phase, tuple(reasons)
        return made


def restarts_of(session: Any) -> RestartCount:
    """How often the session's restart policy brought it back (0 for any other session),
    and the phase it is in (a restart under way shows as "restarting" in status rows)."""
    from ..session import Session

    if not isinstance(session, Session) or session._restart is None:
        return RestartCount(0)
    restarter = session._restart
    return RestartCount.of(restarter.count, restarter.phase, restarter.reasons())


def failure_of(session: Any) -> BaseException | None:
    """Why the session's restart policy gave up (``RestartLimitReached``), if it did."""
    from ..session import Session

    return session.restart_failure if isinstance(session, Session) else None
