"""Many servers behind one object: the host side of MCP.

Owns: one :class:`~mcpsync.session.Session` per config entry, their bring-up (eager
entries in parallel at :meth:`Host.start`, lazy ones on first use), user consent, a flat
tool namespace across servers with calls routed to the owning session, and closing
everything in parallel within a bound. One failing server never stops the others: its
error is kept (:meth:`Host.status`, :attr:`Host.errors`) and raised only when that server
is used.

Consent. ``consent`` is ``callable(entry) -> bool``, asked once per entry before its
process is spawned or its URL first contacted, from the thread that triggers the
bring-up, one question at a time. The default (``None``) allows every entry: right for
scripts that name their own servers. Interactive hosts should pass a real question,
e.g. :func:`ask_on_terminal`. A refused entry is never started; using it raises
:class:`ConsentDenied`.

Tool namespace. Each tool is exposed once: under its bare name if its server *owns*
that name, else as ``<server>__<tool>`` (server name with characters other than
``A-Za-z0-9_-.`` replaced by ``_``). Ownership is decided the first time the namespace is
built, in config order among the servers that are up (so it never depends on which
server answered first), and it is sticky: a server that comes up later (a lazy one, or a
reconnect) never takes a bare name that is already owned; a name is released only when
its owner no longer offers the tool. The qualified ``<server>__<tool>`` form always
routes, whoever owns the bare name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, ConfigEntryError, ServerEntry, load_config
from ..errors import CapabilityError, ConfigError, MCPSyncError, SessionClosed
from ..runtime.lifecycle import check as _check_fork
from ..runtime.lifecycle import forked as _forked
from ..session.forksafe import own_host, release_host
from ..telemetry import Telemetry, carry
from .restarts import failure_of, give_transport_factory, restarts_of
from .routing import ToolNamespace
from .servers import (
    CLOSED,
    CONNECTING,
    DISABLED,
    FAILED,
    IDLE,
    READY,
    REFUSED,
    SEPARATOR,
    ConnectFn,
    ConsentDenied,
    ConsentFn,
    HostTool,
    ServerStatus,
    UnknownTool,
    _default_connect,
    _kill_leftover,
    _per_server,
    _Server,
    _Starting,
    ask_on_terminal,
    qualified_name,
)

if TYPE_CHECKING:
    from ..protocol.choose import Caches

__all__ = [
    "Host",
    "HostTool",
    "ServerStatus",
    "ConsentDenied",
    "UnknownTool",
    "ask_on_terminal",
    "qualified_name",
    "SEPARATOR",
]

log = logging.getLogger("mcpsync.host")


class Host:
    """Holds one session per config entry; routes tool calls across them.

    ``config`` is a path to an ``mcp.json``-style file, a dict, a loaded
    :class:`~mcpsync.config.Config`, or an iterable of :class:`ServerEntry`. Entries that
    failed to load show up as failed servers. ``connect`` replaces
    ``Session.connect`` (tests, custom wiring); ``session_kwargs`` go to every
    ``Session.connect`` call (``client_info``, ``on_log``, ``sampling_handler`` ...);
    ``auth_factory(entry)`` builds the ``auth=`` object for entries with OAuth settings.
    ``include_tools`` / ``exclude_tools``: ``{server: tool name globs}`` (key ``"*"``: every
    server without its own key); for that server they replace the entry's
    ``includeTools`` / ``excludeTools``. Hidden tools are not in the namespace.
    ``cassettes(server_name)``: the recorded session of each server, given to its
    ``Session.connect(cassette=)`` (one cassette per server, e.g.
    ``lambda name: Cassette(f"tests/cassettes/{name}.jsonl")``, ``mcpsync.testing``).
    ``telemetry``, ``tracer_provider``, ``meter_provider``: as ``Session.connect`` takes them,
    for every server (``mcpsync.telemetry``); each bring-up runs in the trace context of the
    thread that started the host.
    ``_caches`` (private): the era verdict and cache-hint stores the host's sessions use
    (``mcpsync.protocol.choose.Caches``; default: the process-wide ones); given to the
    default connect always, to a custom ``connect`` only when given here.

    ``start()`` (or ``with Host(...) as host``) brings up the eager entries, at most
    ``max_parallel`` at a time, and returns when each has finished or ``start_timeout``
    passed. ``close()`` closes everything in parallel within ``close_timeout`` seconds.
    """

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | Config | Iterable[ServerEntry],
        *,
        consent: ConsentFn | None = None,
        connect: ConnectFn | None = None,
        max_parallel: int = 8,
        start_timeout: float | None = None,
        close_timeout: float = 10.0,
        session_kwargs: Mapping[str, Any] | None = None,
        auth_factory: Callable[[ServerEntry], Any] | None = None,
        separator: str = SEPARATOR,
        inputs: Any = None,
        spawn_stdio: bool | None = None,
        include_tools: Mapping[str, Any] | None = None,
        exclude_tools: Mapping[str, Any] | None = None,
        cassettes: Callable[[str], Any] | None = None,
        telemetry: bool | Telemetry = True,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        _caches: Caches | None = None,
    ) -> None:
        if isinstance(config, str | Path) or isinstance(config, Mapping):
            config = load_config(config, inputs=inputs)
        self.source = config.source if isinstance(config, Config) else "<entries>"
        self._servers: dict[str, _Server] = {}
        if isinstance(config, Config):
            errors = {e.entry: e for e in config.errors}
            for name in config.names():
                self._servers[name] = _Server(name, config.entries.get(name), errors.get(name))
            for err in config.errors:  # whole-entry errors without a name (should not happen)
                if err.entry is None:
                    log.warning("%s", err)
        else:
            for entry in config:
                if entry.name in self._servers:
                    raise ConfigError(f"two entries are named {entry.name!r}")
                self._servers[entry.name] = _Server(entry.name, entry, None)
        if max_parallel < 1:
            raise ConfigError("max_parallel must be at least 1")
        self._consent = consent
        self._connect = connect or _default_connect
        from ..protocol.choose import DEFAULT_CACHES, server_identity

        #: the era verdicts and cache hints of every session this host connects
        self._caches = _caches or DEFAULT_CACHES
        self._caches_given = connect is None or _caches is not None
        self._server_identity = server_identity
        # The host makes stdio transports itself, so close() can stop a server that is
        # still starting (Session.connect cannot be interrupted from outside).
        self._spawn_stdio = connect is None if spawn_stdio is None else spawn_stdio
        self._session_kwargs = dict(session_kwargs or {})
        # telemetry (``mcpsync.telemetry``): given to every connect, when not the default
        if telemetry is not True:
            self._session_kwargs["telemetry"] = telemetry
        if tracer_provider is not None:
            self._session_kwargs["tracer_provider"] = tracer_provider
        if meter_provider is not None:
            self._session_kwargs["meter_provider"] = meter_provider
        self._cassettes = cassettes
        self._auth_factory = auth_factory
        self._tool_globs = {
            "include_tools": _per_server(include_tools, "include_tools"),
            "exclude_tools": _per_server(exclude_tools, "exclude_tools"),
        }
        self._max_parallel = max_parallel
        self._slots = threading.BoundedSemaphore(max_parallel)
        self._start_timeout = start_timeout
        self._close_timeout = close_timeout
        self._consent_lock = threading.Lock()  # one question at a time
        #: the one tool namespace over every server that is up (``routing``)
        self._tools = ToolNamespace(self._servers, separator, self._ready_servers, self.connect_all)
        self._closed = threading.Event()
        own_host(self)  # this process's: after os.fork() the child's calls raise ForkedError

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Host:
        try:
            self.start()
        except BaseException:  # Ctrl-C during start: leave nothing running
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for s in self._servers.values():
            counts[s.shown_state] = counts.get(s.shown_state, 0) + 1  # "restarting" too
        summary = ", ".join(f"{n} {state}" for state, n in counts.items())
        return f"<Host {self.source}: {summary or 'no servers'}>"

    def _repr_html_(self) -> str:
        from .. import display  # late: only notebooks need it

        return display.status_table(self.status()).html

    def start(self, timeout: float | None = None) -> Host:
        """Bring up every eager entry in parallel; wait (bounded) until each finished.

        Never raises for a server that fails: see :meth:`status` / :attr:`errors`.
        """
        self._check_open()
        eager = [
            s
            for s in self._servers.values()
            if s.state == IDLE and s.entry is not None and not s.entry.lazy
        ]
        started = [s for s in eager if self._begin(s)]
        bound = timeout if timeout is not None else self._start_timeout
        if bound is None:
            # each bring-up is bounded by its own connect timeout; allow for queueing
            per = max((self._connect_bound(s.entry) for s in started), default=0.0)
            waves = -(-len(started) // self._max_parallel)
            bound = per * max(1, waves) + 5.0
        deadline = time.monotonic() + bound
        for s in started:
            if not s.done.wait(max(0.0, deadline - time.monotonic())):
                log.warning("server %r still connecting after %.1fs", s.name, bound)
        return self

    def close(self, timeout: float | None = None) -> None:
        """Close every session in parallel; return within ``timeout`` (default ``close_timeout``)."""
        if _forked(self):  # in a child of os.fork(): release its copies, signal no server
            return release_host(self)
        if self._closed.is_set():
            return
        self._closed.set()
        bound = self._close_timeout if timeout is None else timeout
        threads: list[threading.Thread] = []
        for s in self._servers.values():
            with s.lock:
                session, s.session = s.session, None
                if s.state in (READY, IDLE):
                    s.state = CLOSED
                elif s.state == CONNECTING:
                    # closing its transport makes the bring-up fail fast; the bring-up
                    # thread then sees the host closed and closes anything left
                    session = _Starting(s.transport) if s.transport is not None else None
            if session is not None:
                t = threading.Thread(
                    target=self._close_session,
                    args=(s.name, session),
                    name=f"mcpsync-host-close[{s.name}]",
                    daemon=True,  # last resort: a session whose close() ignores its own bound
                )
                t.start()
                threads.append(t)
        deadline = time.monotonic() + bound
        # the bring-ups in progress unwind too (their transports were closed above): once
        # joined, a process one of them spawned as the host closed has been killed
        threads += [s.thread for s in self._servers.values() if s.thread is not None]
        for t in threads:
            if t is threading.current_thread() or t.ident is None:
                continue  # not started yet: it will see the host closed and start nothing
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                log.warning("%s did not finish within %.1fs", t.name, bound)
        self._tools.clear()

    @staticmethod
    def _close_session(name: str, session: Any) -> None:
        try:
            session.close()
        except Exception as exc:  # noqa: BLE001 - closing one must not stop the others
            log.warning("closing server %r: %s", name, exc)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _check_open(self) -> None:
        _check_fork(self)  # ForkedError in a child of os.fork()
        if self._closed.is_set():
            raise SessionClosed("the host is closed")

    # ------------------------------------------------------------------ bring-up

    @staticmethod
    def _connect_bound(entry: ServerEntry | None) -> float:
        """How long a bring-up of ``entry`` may take; 0 without an entry (failed at once)."""
        if entry is None:
            return 0.0
        return entry.connect_timeout if entry.connect_timeout is not None else 30.0

    def _ask_consent(self, s: _Server) -> bool:
        if self._consent is None:
            return True
        if s.entry is None:  # a broken entry is never started: nothing to consent to
            return False
        with self._consent_lock:
            if s.consent is None:
                try:
                    s.consent = bool(self._consent(s.entry))
                    if not s.consent:
                        s.error = ConsentDenied(f"server {s.name!r}: consent refused")
                except Exception as exc:  # noqa: BLE001 - a failing hook refuses the server
                    s.consent = False
                    s.error = ConsentDenied(f"server {s.name!r}: the consent hook failed: {exc}")
            return s.consent

    def _begin(self, s: _Server) -> bool:
        """Start a bring-up thread for ``s`` if it is idle; False if there is nothing to wait for."""
        if not self._ask_consent(s):
            with s.lock:
                if s.state == IDLE:
                    s.state = REFUSED
                    s.done.set()
            return False
        with s.lock:
            if s.state != IDLE:
                return s.state == CONNECTING
            s.state = CONNECTING
            s.done.clear()
            # daemon as a last resort: Session.connect cannot be interrupted, only bounded
            # by its connect_timeout, and must not hold up interpreter exit after Ctrl-C
            s.thread = threading.Thread(
                target=carry(self._bring_up),  # in the caller's trace context
                args=(s,),
                name=f"mcpsync-host-connect[{s.name}]",
                daemon=True,
            )
        s.thread.start()
        return True

    def _bring_up(self, s: _Server) -> None:
        assert s.entry is not None
        session = None
        error: BaseException | None = None
        t0 = time.monotonic()
        try:
            with self._slots:
                if self._closed.is_set():
                    raise SessionClosed("the host was closed before this server started")
                t0 = time.monotonic()
                kwargs = s.entry.connect_kwargs(auth_factory=self._auth_factory)
                kwargs.update(self._session_kwargs)
                for key, per_server in self._tool_globs.items():
                    globs = per_server.get(s.name, per_server.get("*"))
                    if globs is not None:  # the host's list for this server replaces the entry's
                        kwargs[key] = list(globs)
                if self._cassettes is not None:  # recorded or replayed: Session.connect decides
                    kwargs["cassette"] = self._cassettes(s.name)
                elif self._spawn_stdio and isinstance(kwargs.get("target"), list):
                    give_transport_factory(kwargs, s.name, self._server_identity)  # restarts too
                    kwargs["target"] = self._stdio_transport(s, kwargs)
                if self._caches_given:
                    kwargs["_caches"] = self._caches
                session = self._connect(**kwargs)
                tools_error = self._prefetch_tools(session)
        except BaseException as exc:  # noqa: BLE001 - kept and shown, never lost
            error = exc
        seconds = time.monotonic() - t0
        close_it = False
        with s.lock:
            made, s.transport = s.transport, None
            if error is not None and made is not None and self._closed.is_set():
                _kill_leftover(made)
            s.seconds = seconds
            if error is not None:
                s.state, s.error = FAILED, error
                log.info("server %r failed to start: %s", s.name, error)
            elif self._closed.is_set():
                s.state, close_it = CLOSED, True
            else:
                s.state, s.session, s.error, s.tools_error = READY, session, None, tools_error
            s.done.set()
        if close_it:
            self._close_session(s.name, session)

    def _stdio_transport(self, s: _Server, kwargs: dict[str, Any]) -> Any:
        from ..transports.select import stdio_transport

        argv, env, cwd = kwargs.pop("target"), kwargs.pop("env", None), kwargs.pop("cwd", None)
        transport = stdio_transport(
            argv, env=env, cwd=cwd, inherit_env=kwargs.pop("inherit_env", False),
            name=kwargs.get("name") or s.name,
        )  # fmt: skip
        # the server it runs, as Session.connect(argv) keys it (a digest): the caches' key
        transport.identity = self._server_identity(argv, env=env, cwd=cwd)[0]
        with s.lock:
            if self._closed.is_set():
                raise SessionClosed("the host was closed before this server started")
            s.transport = transport
        return transport

    @staticmethod
    def _prefetch_tools(session: Any) -> BaseException | None:
        """Fill the session's tool cache in the bring-up thread, so namespace builds are cheap."""
        try:
            session.list_tools()
        except CapabilityError:
            return None
        except MCPSyncError as exc:
            return exc
        return None

    def _ensure(self, name: str, *, wait: float | None = None) -> _Server:
        """The server's state, bringing it up now if it is idle (lazy first use)."""
        self._check_open()
        s = self._servers.get(name)
        if s is None:
            known = ", ".join(repr(n) for n in self._servers) or "none"
            raise ConfigError(f"{self.source}: no server named {name!r} (servers: {known})")
        if s.state == IDLE:
            self._begin(s)
        if s.state == CONNECTING:
            bound = wait if wait is not None else self._connect_bound(s.entry) + 5.0
            if not s.done.wait(bound):
                raise MCPSyncError(f"server {name!r} is still connecting after {bound:.1f}s")
        return s

    # ------------------------------------------------------------------ sessions

    def _check_alive(self, s: _Server) -> None:
        """A ready server whose session ended (process exit, connection lost) becomes failed."""
        with s.lock:
            session = s.session
            if s.state != READY or session is None or not getattr(session, "closed", False):
                return
            conn = getattr(session, "connection", None)
            error = failure_of(session) or getattr(conn, "close_error", None)
            s.state, s.session = FAILED, None
            s.error = error or SessionClosed(f"server {s.name!r}: the session ended")
        log.info("server %r went away: %s", s.name, s.error)
        self._close_session(s.name, session)  # idempotent; releases its threads

    def _ready_servers(self) -> list[_Server]:
        for s in self._servers.values():
            self._check_alive(s)
        return [s for s in self._servers.values() if s.state == READY and s.session is not None]

    # ------------------------------------------------------------------ tools

    def list_tools(self, *, include_lazy: bool = False) -> list[HostTool]:
        """Every tool of every server that is up, each under its exposed name (config order).

        With ``include_lazy=True`` lazy servers are brought up first (consent permitting).
        """
        self._check_open()
        if include_lazy:
            self.connect_all()
        return list(self._tools.rebuild().values())

    def resolve(self, name: str) -> HostTool:
        """Which server and tool a (bare or qualified) name routes to.

        An unknown name brings up idle lazy servers (consent permitting) before giving up
        with :class:`UnknownTool` (a did-you-mean; the server's error when the name is
        ``<server>__<tool>`` of a server that is not up).
        """
        self._check_open()
        return self._tools.resolve(name)

    def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """Call a tool by its namespace name on the session that owns it (blocking).

        ``kwargs`` go to ``Session.call_tool`` (``timeout``, ``on_progress``).
        """
        ht = self.resolve(name)
        return self.session(ht.server).call_tool(ht.tool_name, arguments, **kwargs)

    def submit_call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Future[Any]:
        """Like :meth:`call_tool` but returns a ``concurrent.futures.Future``."""
        ht = self.resolve(name)
        return self.session(ht.server).submit_call_tool(ht.tool_name, arguments, **kwargs)

    # ------------------------------------------------------------------ servers

    def session(self, name: str) -> Any:
        """The live session for ``name``; brings a lazy server up; raises its error if it failed.

        A server whose session ended stays failed until :meth:`reconnect`.
        """
        s = self._ensure(name)
        self._check_alive(s)
        with s.lock:
            if s.state == READY:
                return s.session
            if s.state in (FAILED, REFUSED) and s.error is not None:
                raise s.error
            if s.state == DISABLED:
                raise ConfigError(f"{self.source}: server {name!r} is disabled in the config")
            raise SessionClosed(f"server {name!r} is {s.state}")

    __getitem__ = session

    def __contains__(self, name: object) -> bool:
        return name in self._servers

    def __iter__(self) -> Iterator[str]:
        return iter(self._servers)

    def names(self) -> list[str]:
        return list(self._servers)

    def entry(self, name: str) -> ServerEntry | None:
        s = self._servers.get(name)
        return s.entry if s else None

    def connect_all(self, timeout: float | None = None) -> Host:
        """Bring up every server, lazy ones too (``smoke`` uses this)."""
        self._check_open()
        for s in self._servers.values():
            if s.state == IDLE:
                self._begin(s)
        deadline = None if timeout is None else time.monotonic() + timeout
        for s in self._servers.values():
            bound = self._connect_bound(s.entry) + 5.0 if s.entry else 0.0
            if deadline is not None:
                bound = max(0.0, deadline - time.monotonic())
            s.done.wait(bound)
        return self

    def reconnect(self, name: str) -> Any:
        """Close (if open) and bring ``name`` up again; returns the new session."""
        s = self._ensure(name)
        if s.entry is None:  # the entry itself is wrong: nothing to retry
            assert s.error is not None
            raise s.error
        with s.lock:
            old, s.session = s.session, None
            if s.state in (READY, FAILED, CLOSED):
                s.state, s.error, s.tools_error = IDLE, None, None
        if old is not None:
            self._close_session(name, old)
        return self.session(name)

    @property
    def errors(self) -> dict[str, BaseException]:
        """Servers that failed (or were refused), with their error."""
        out = {}
        for name, s in self._servers.items():
            err = s.error or s.tools_error
            if err is not None:
                out[name] = err
        return out

    def status(self) -> list[ServerStatus]:
        """One row per entry, config order."""
        _check_fork(self)
        rows = []
        for name, s in self._servers.items():
            self._check_alive(s)
            with s.lock:
                session, state, error = s.session, s.state, s.error or s.tools_error
                seconds = s.seconds
            entry = s.entry
            transport = entry.transport if entry else "?"
            version = info = None
            restarts = restarts_of(session)
            tools: int | None = None
            if session is not None:
                kind = getattr(getattr(session, "transport", None), "kind", None)
                transport = kind or transport
                version = getattr(session, "protocol_version", None)
                info = getattr(session, "server_info", None)
                if s.tools_error is None:
                    try:
                        tools = len(session.list_tools())
                    except CapabilityError:
                        tools = 0
                    except MCPSyncError as exc:
                        error = exc
            target = entry.describe() if entry else ""
            if isinstance(error, ConfigEntryError):
                transport = "-"
            rows.append(
                ServerStatus(
                    name=name,
                    state=state,
                    transport=transport,
                    target=target,
                    protocol_version=version,
                    server_info=info,
                    tools=tools,
                    seconds=seconds,
                    error=error,
                    lazy=bool(entry and entry.lazy),
                    restarts=restarts,
                )
            )
        return rows
