"""Bring-up of a Session over the transports its target selected, one after another.

Owns: ``initialize``, one era brought up by ``protocol.choose.bring_up`` over a started
connection with the session's parts it is given, and the phases it took (the Session
records what was agreed: ``Session._initialize``); the loop
``Session.connect`` runs over the candidate transports (start, handshake, the typed-result
imports warmed, unwind on failure, the legacy HTTP+SSE fallback after 400/404/405, the
one restart of a server that died of the ``server/discover`` probe, the shared
``connect_timeout``) and the words added to a bring-up error (what the server printed
instead of JSON-RPC), and the notice of what a server wrote to stderr
while starting (``_serverlog.notice_startup_stderr``). Plain functions: it never imports
the Session; the loop is handed a ``prepare(transport)`` that builds one (``Prepared``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from .. import telemetry as _telemetry
from .. import typed as _typed
from ..errors import (
    STDERR_TAIL,
    ConfigError,
    HTTPStatusError,
    MCPSyncError,
    RequestTimeout,
    ServerExited,
    TransportError,
)
from ..protocol import Era, Interest, ToolIndex
from ..protocol.choose import Caches, bring_up
from ..rpc.connection import Connection
from ..transports.base import Transport
from ..transports.http.requestauth import RequestAuth
from ..transports.select import respawn
from .serverlog import notice_startup_stderr

__all__ = ["Prepared", "explain_failure", "first_ready", "initialize", "unwind", "UNWIND_GRACE"]

log = logging.getLogger("mcpsync")

#: how long past the bring-up's deadline a failed bring-up waits for the unwinding of what
#: it started (seconds); the rest of the shutdown ladder goes on in the background
UNWIND_GRACE = 0.1


def initialize(
    conn: Connection,
    args: dict[str, Any],
    *,
    keep_alive: Any,
    interest: Interest,
    tools: ToolIndex,
    relist_tools: Callable[[], None],
    require: Callable[[str], None],
    caches: Caches,
    capabilities: dict[str, Any],
    deadline: float | None,
) -> tuple[Era, dict[str, float]]:
    """Bring an era up over ``conn`` (started) with ``protocol.choose.bring_up``, given the
    session's parts, and return it with the phases it took ("initialize" or "discover",
    "probe", and "auth": an interactive authorization inside the first POST, which does
    not count against ``deadline``). ``args``: what ``Session.connect`` fixed for every
    bring-up (client info, pinned version or era, cache keys; ``era`` / ``restarted``)."""
    auth = keep_alive if isinstance(keep_alive, RequestAuth) else None  # an OAuth, or None
    auth_before = auth.flow_seconds if auth is not None else None
    paused = None
    if auth is not None and auth_before is not None:  # an authorization does not count
        paused = lambda: auth.flow_seconds or 0.0  # noqa: E731
    transport = conn.transport
    transport.bringup_deadline = deadline  # its own bring-up waits end by it too
    try:
        era = bring_up(
            conn, interest=interest, tools=tools, keep_alive=keep_alive,
            relist_tools=relist_tools, require=require, caches=caches,
            capabilities=capabilities, deadline=deadline, paused=paused, **args,
        )  # fmt: skip
    finally:
        transport.bringup_deadline = None
    agreement = era.agreement
    phases: dict[str, float] = {}
    seconds = agreement.seconds
    if auth is not None and auth_before is not None:  # the auth ran inside the first POST
        spent = (auth.flow_seconds or 0.0) - auth_before
        if spent > 0:
            phases["auth"] = spent
            seconds = max(seconds - spent, 0.0)
    phases[era.bringup_phase] = seconds
    if agreement.probe_seconds is not None:
        phases["probe"] = agreement.probe_seconds
    return era, phases


class Prepared(Protocol):
    """What the bring-up loop needs of a session ``prepare`` built (``Session`` is one)."""

    phases: dict[str, float]

    @property
    def connection(self) -> Connection: ...

    def _initialize(
        self, era: str | None = None, deadline: float | None = None, restarted: str | None = None
    ) -> None: ...


S = TypeVar("S", bound=Prepared)


def first_ready(
    candidates: list[Callable[[], Transport]],
    prepare: Callable[[Transport], S],
    *,
    name: str,
    deadline: float | None,
    connect_timeout: float | None,
) -> S:
    """The first session that comes up over ``candidates`` (transport factories, in order);
    everything a failed attempt started is closed before the next one or the raise, or
    (when that takes longer than the bring-up's bound) goes on closing in the background
    (``unwind``): the caller has its error by ``deadline`` + ``UNWIND_GRACE``."""
    last_error: BaseException | None = None
    restarted = ""  # why the server was started again (it died of the probe), if it was
    died_of_probe = 0.0  # seconds of the process that died of the probe (its "probe" phase)
    for position, make_transport in enumerate(candidates):
        if position and deadline is not None and time.monotonic() >= deadline:
            raise RequestTimeout(
                f"bring-up of {name!r} did not finish within connect_timeout={connect_timeout:g} s"
            ) from last_error
        t0 = time.perf_counter()
        chosen = make_transport()
        session = prepare(chosen)
        conn = session.connection
        try:
            with _telemetry.phase(conn.instrument, "transport"):
                conn.start()
            session.phases["transport"] = time.perf_counter() - t0
            with _telemetry.phase(conn.instrument, "handshake"):
                session._initialize(deadline=deadline, restarted=restarted or None)
            _typed.warm()  # what typed results import, before a Ctrl-C can cut it in half
            notice_startup_stderr(name, chosen.stderr_tail())  # a usage message, say
        except HTTPStatusError as exc:
            unwind(conn, deadline, name)
            last_error = exc
            if exc.status in (400, 404, 405) and len(candidates) > 1:
                log.info(
                    "mcpsync: %s answered %s to initialize; trying legacy HTTP+SSE",
                    name,
                    exc.status,
                )
                continue
            raise
        except BaseException as exc:
            explain_failure(exc, chosen)  # its stderr, read before the unwinding ends it
            unwind(conn, deadline, name)
            if isinstance(exc, TransportError) and exc.restart_legacy and not restarted:
                # the server process died of the server/discover probe (old SDKs do): start
                # a fresh process of it once; it is remembered as legacy (across processes
                # too, ``choose.VerdictMemory``) and gets initialize at once
                log.warning("mcpsync: %s stopped after server/discover; starting it again", name)
                restarted = (
                    "the server stopped after the server/discover probe (servers built with "
                    "older SDKs do); a fresh process of it answered initialize: legacy"
                )
                candidates.insert(position + 1, _again(make_transport, chosen))
                died_of_probe = time.perf_counter() - t0
                last_error = exc
                continue
            raise
        if died_of_probe:  # where the first process's time went: the fresh one sent no probe
            session.phases["probe"] = session.phases.get("probe", 0.0) + died_of_probe
        return session
    assert last_error is not None
    raise last_error


def unwind(conn: Connection, deadline: float | None, name: str) -> None:
    """Close what a failed bring-up attempt started, within the bring-up's bound.

    The close runs in a thread of its own (``mcpsync-unwind[name]``) that is waited for
    until ``deadline`` + ``UNWIND_GRACE``: a server that exits when its stdin closes is
    gone by then; one that does not gets the rest of the shutdown ladder (SIGTERM after
    the grace, SIGKILL) in the background, which still ends it, its process group and
    every thread. At interpreter exit ``mcpsync.runtime.lifecycle`` steps the ladder of a
    transport still closing, within its own bound (``ChildProcess.exit_soon``)."""
    if deadline is None:
        conn.close()
        return
    closer = threading.Thread(
        target=_close_quietly, args=(conn,), name=f"mcpsync-unwind[{name}]", daemon=True
    )
    closer.start()
    closer.join(max(deadline - time.monotonic(), 0.0) + UNWIND_GRACE)


def _close_quietly(conn: Connection) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - the bring-up's own error is what the caller sees
        log.debug("mcpsync: closing %s after a failed bring-up", conn.name, exc_info=True)


def _again(make: Callable[[], Transport], used: Transport) -> Callable[[], Transport]:
    """A factory of a fresh transport to the same server as ``used``: ``make`` when it
    builds a new one each time, else a copy of ``used`` (``Session.connect(transport)``
    and the Host hand over one transport, started already, which cannot start again)."""
    copy = respawn(used)

    def again() -> Transport:
        made = make()
        if made is not used:
            return made
        if copy is None:
            raise TransportError(f"{used.describe()}: this transport cannot be started again")
        return copy()

    return again


def explain_failure(error: BaseException, transport: Transport) -> None:
    """Add what the server printed to a bring-up error: lines it wrote to stdout that were
    not JSON-RPC (a banner such as "Starting weather server on port 8000..." says why
    nothing else came), and the stderr tail when the error does not carry it already
    (``ServerExited`` does)."""
    if not isinstance(error, MCPSyncError) or isinstance(error, ConfigError):
        return
    extra = []
    noise = transport.stdout_noise()
    if noise:
        extra.append("--- the server wrote to stdout (not JSON-RPC) ---\n" + "\n".join(noise))
    if not isinstance(error, ServerExited):
        tail = transport.stderr_tail()
        if tail:
            extra.append(f"{STDERR_TAIL}\n" + tail)
    if extra and error.args and isinstance(error.args[0], str):
        error.args = ("\n".join([error.args[0], *extra]), *error.args[1:])
