"""Bring-up of a Session over the transports its target selected, one after another.

Owns: ``BringUp``, the Session's bring-up half (a mixin over the Session's declared
state: the handlers installed, one era brought up by ``protocol.choose.bring_up`` and
what it agreed recorded, the re-initialization after an HTTP session expired); the loop
``Session.connect`` runs over the candidate transports (start, handshake, the typed-result
imports warmed, unwind on failure, the legacy HTTP+SSE fallback after 400/404/405, the
one restart of a server that died of the ``server/discover`` probe, the shared
``connect_timeout``) and the words added to a bring-up error (what the server printed
instead of JSON-RPC), ``stderr_tail``, and the notice of what a server wrote to stderr
while starting (``_serverlog.notice_startup_stderr``). It never imports the Session: the loop is handed a
``prepare(transport)`` that builds one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from . import _offer, _typed
from ._serverlog import notice_startup_stderr
from .connection import Connection
from .errors import (
    STDERR_TAIL,
    ConfigError,
    HTTPStatusError,
    MCPSyncError,
    RequestTimeout,
    ServerExited,
    TransportError,
)
from .protocol import Agreement, Era, Interest, ToolIndex
from .protocol.choose import Caches, bring_up
from .transports.base import Transport
from .transports.select import respawn

__all__ = ["BringUp", "explain_failure", "first_ready", "unwind", "UNWIND_GRACE"]

log = logging.getLogger("mcpsync")

#: how long past the bring-up's deadline a failed bring-up waits for the unwinding of what
#: it started (seconds); the rest of the shutdown ladder goes on in the background
UNWIND_GRACE = 0.1


class BringUp:
    """The bring-up half of ``Session``: the state it declares is the Session's own."""

    name: str
    phases: dict[str, float]
    era: Any
    era_reason: str
    reinitializations: int
    _conn: Connection
    _era: Era
    _handshake: Agreement | None
    _allowed: set[str]
    _init_args: dict[str, Any]
    _keep_alive: Any
    _client_capabilities: dict[str, Any]
    _roots: Any
    _on_log: Callable[[Any], None] | None
    _tools: ToolIndex
    _interest: Interest
    _caches: Caches

    if TYPE_CHECKING:

        def _relist_tools(self) -> None: ...
        def _require(self, method: str) -> None: ...
        def _answer_roots(self, params: dict[str, Any]) -> dict[str, Any]: ...
        def _on_notification(self, method: str, params: dict[str, Any]) -> None: ...

    def _initialize(
        self, era: str | None = None, deadline: float | None = None, restarted: str | None = None
    ) -> None:
        """Bring the era up; ``restarted``: this process replaces one that died of the
        era probe (why, in words): it gets ``initialize`` at once."""
        args = dict(self._init_args)
        if era is not None:
            args["era"] = era
        if restarted is not None:
            args["restarted"] = restarted
        auth_obj = self._keep_alive
        auth_before = getattr(auth_obj, "flow_seconds", None)
        paused = None
        if auth_before is not None:  # an interactive authorization does not count against the bound
            paused = lambda: auth_obj.flow_seconds or 0.0  # noqa: E731
        transport = self._conn.transport
        transport.bringup_deadline = deadline  # its own bring-up waits end by it too
        try:
            self._era = era_impl = bring_up(
                self._conn, interest=self._interest, tools=self._tools,
                keep_alive=self._keep_alive, relist_tools=self._relist_tools,
                require=self._require, caches=self._caches,
                capabilities=self._client_capabilities, deadline=deadline, paused=paused, **args,
            )  # fmt: skip
        finally:
            transport.bringup_deadline = None
        handshake = era_impl.agreement
        self._allowed = set()
        self._handshake = handshake
        self.era = handshake.era
        self.era_reason = handshake.era_reason
        seconds = handshake.seconds
        if auth_before is not None:  # the auth dance ran inside the first POST: its own phase
            spent = auth_obj.flow_seconds - auth_before
            if spent > 0:
                self.phases["auth"] = spent
                seconds = max(seconds - spent, 0.0)
        self.phases[era_impl.bringup_phase] = seconds
        if handshake.probe_seconds is not None:
            self.phases["probe"] = handshake.probe_seconds

    @property
    def stderr_tail(self) -> str:
        """The server's last lines on its stderr (stdio; bounded, newline-joined; "" for
        HTTP): what it said while starting (a usage message), or before it stopped."""
        return self._conn.transport.stderr_tail()

    def _reinitialize(self) -> None:
        """The HTTP session expired: bring it up again with the same capabilities."""
        log.warning("mcpsync: session with %s expired; initializing again", self.name)
        self.reinitializations += 1
        self._initialize(era="legacy")
        self._tools.forget()

    def _install_handlers(
        self,
        sampling_handler: Callable[[Any], Any] | None,
        elicitation_handler: Callable[[Any], Any] | None,
        roots: Sequence[Any] | Callable[[], Sequence[Any]] | None,
        on_log: Callable[[Any], None] | None,
    ) -> None:
        """Handlers decide which client capabilities are advertised."""
        self._roots = roots
        answer_roots = self._answer_roots if roots is not None else None
        handlers = self._conn.request_handlers
        self._client_capabilities = _offer.install(
            handlers, sampling_handler, elicitation_handler, answer_roots
        )
        self._on_log = on_log
        self._conn.notification_handler = self._on_notification


S = TypeVar("S", bound=BringUp)


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
    for position, make_transport in enumerate(candidates):
        if position and deadline is not None and time.monotonic() >= deadline:
            raise RequestTimeout(
                f"bring-up of {name!r} did not finish within connect_timeout={connect_timeout:g} s"
            ) from last_error
        t0 = time.perf_counter()
        chosen = make_transport()
        session = prepare(chosen)
        conn = session._conn
        try:
            conn.start()
            session.phases["transport"] = time.perf_counter() - t0
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
                last_error = exc
                continue
            raise
        return session
    assert last_error is not None
    raise last_error


def unwind(conn: Connection, deadline: float | None, name: str) -> None:
    """Close what a failed bring-up attempt started, within the bring-up's bound.

    The close runs in a thread of its own (``mcpsync-unwind[name]``) that is waited for
    until ``deadline`` + ``UNWIND_GRACE``: a server that exits when its stdin closes is
    gone by then; one that does not gets the rest of the shutdown ladder (SIGTERM after
    the grace, SIGKILL) in the background, which still ends it, its process group and
    every thread. At interpreter exit ``mcpsync._lifecycle`` steps the ladder of a
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
