"""The public, blocking MCP session: ``Session.connect(target)`` -> a ready session.

Owns: bring-up orchestration (transport selection from the target, transport start,
handshake, unwinding on failure), the client's advertised capabilities (derived from
the handlers given), capability contracts in both directions, typed results (the
official ``mcp_types`` wire models, imported on first use), list caches refreshed on
``list_changed``, subscriptions, log routing, and the blocking one-liners with their
``submit_*`` twins that return ``concurrent.futures.Future``. Each one-liner is a call
over ``self._era`` (``mcpsync.protocol``): the era decides how a request goes out.

Example (runs against the bundled demo server)::

    import sys, mcpsync
    with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
        print(s.protocol_version, s.server_info.name)
        print([t.name for t in s.list_tools()])
        print(s.call_tool("echo", {"message": "hi"}).content[0].text)
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from os import getpid as _getpid
from typing import TYPE_CHECKING, Any, Literal, cast

from .. import telemetry as _telemetry
from .. import typed as _typed
from .._version import __version__
from ..config import command_name
from ..errors import (
    CapabilityError,
    ConfigError,
)
from ..filters import NameFilter, ToolExcluded
from ..protocol import (
    DEFAULT_OPTIONS,
    Agreement,
    CallOptions,
    Derived,
    Era,
    Interest,
    NotReady,
    ToolIndex,
)
from ..protocol import pages as _pages
from ..protocol.choose import DEFAULT_CACHES, Caches, resolve_era, server_identity
from ..protocol.hooks import EraHooks
from ..rpc.calls import seconds as _seconds
from ..rpc.connection import DEFAULT, Connection, Default, Progress
from ..runtime.lifecycle import UNOWNED, Owner
from ..runtime.lifecycle import error as _forked_error
from ..runtime.lifecycle import forked as _forked
from ..skills import Skills
from ..telemetry import Telemetry
from ..transports.base import Transport
from ..transports.select import candidates as select_transports
from ..typed import types as _types
from ..typed import validate as _validate
from . import bringup as _bringup
from . import offer as _offer
from . import recorded as _recorded
from . import tasks as _tasks
from . import tls as _tls
from .forksafe import own_session, release_session
from .recorded import TransportWrapper
from .restart import Restarter, RestartEvent, RestartPolicy
from .restart import attach as _restart_attach
from .serverlog import LOG_LEVELS, ServerLog

if TYPE_CHECKING:
    import requests
    from mcp_types import (
        CallToolResult,
        CompleteResult,
        GetPromptResult,
        Implementation,
        Prompt,
        ReadResourceResult,
        Resource,
        ResourceTemplate,
        ServerCapabilities,
        Tool,
    )

    from ..skills import LoadedSkill, SkillEntry

__all__ = ["Session", "Progress", "CLIENT_INFO"]

log = logging.getLogger("mcpsync")

CLIENT_INFO = {"name": "mcpsync", "version": __version__}

#: the eras a session can agree on (``Session.era``)
EraName = Literal["legacy", "modern"]


class Session:
    """A live MCP session. Create it with ``Session.connect(...)``; close it with ``close()``."""

    def __init__(
        self,
        connection: Connection,
        *,
        name: str,
        strict: bool = True,
        init_args: Mapping[str, Any] | None = None,
        keep_alive: Any = None,
        tool_filter: NameFilter | None = None,
        caches: Caches | None = None,
        sampling_handler: Callable[[Any], Any] | None = None,
        elicitation_handler: Callable[[Any], Any] | None = None,
        roots: Sequence[Any] | Callable[[], Sequence[Any]] | None = None,
        on_log: Callable[[Any], None] | None = None,
        offered: Mapping[str, Any] | None = None,
    ) -> None:
        """A session over ``connection`` (not started yet); ``Session.connect`` builds one
        and brings it up. ``init_args``: what each bring-up of the era is given (client
        info, pinned version or era, the server's and credential's cache keys);
        ``keep_alive``: the auth object given to connect(), held for the session's life
        (its ``flow_seconds`` tells bring-up how long an OAuth dance took);
        ``tool_filter``: include_tools / exclude_tools; ``caches``: era verdicts and cache
        hints (None: the process-wide ones); the handlers and ``roots`` as connect() takes
        them (they decide the client capabilities advertised; installed on ``connection``
        here); ``offered``: client capabilities beyond the handlers' (the extensions)."""
        self._conn = connection
        self.name = name
        self.strict = strict
        self.phases: dict[str, float] = {}
        self.era: EraName = "legacy"
        #: how bring-up chose the era, in words
        self.era_reason = ""
        #: the era's implementation of every request (``mcpsync.protocol``)
        self._era: Era = NotReady()
        self.reinitializations = 0
        self._handshake: Agreement | None = None
        self._allowed: set[str] = set()  # methods whose capability the handshake showed
        self._init_args: dict[str, Any] = dict(init_args or {})
        self._keep_alive = keep_alive
        self._roots = roots  # offered to the server; set_roots() replaces them
        self._on_log = on_log
        self._server_log = ServerLog(name)  # notifications/message -> logging
        self._tools = ToolIndex()  # the tools last listed: output schemas, the legacy list cache
        self._interest = Interest()  # what the callbacks want to hear about
        self._caches: Caches = caches or DEFAULT_CACHES  # era verdicts and cache hints
        self._notification_callbacks: list[Callable[[str, dict[str, Any]], None]] = []
        self._tool_filter = tool_filter  # include_tools / exclude_tools
        self._restart: Restarter | None = None  # the restart policy at work (_restart)
        #: the skills extension (SEP-2640): its listing, checks and verified reads
        self.skills = Skills(
            name=name, call=self._call_raw, page=self._page, require=self._require,
            capabilities=self._server_capabilities_raw, hints=self._caches.hints,
            server_key=self._init_args.get("server_key"),
            credential_key=self._init_args.get("credential_key"),
            keep_alive=keep_alive, timeout=connection.default_timeout,
        )  # fmt: skip
        # the handlers given decide which client capabilities are advertised
        answer_roots = self._answer_roots if roots is not None else None
        self._client_capabilities: dict[str, Any] = {
            **_offer.install(
                connection.request_handlers, sampling_handler, elicitation_handler, answer_roots
            ),
            **(offered or {}),
        }
        connection.notification_handler = self._on_notification
        #: the process this session belongs to (``_lifecycle``; ``own_session`` sets it)
        self._owner: Owner = UNOWNED
        own_session(self)  # this process's: after os.fork() the child's calls raise ForkedError

    # -- bring-up ----------------------------------------------------------------------

    @classmethod
    def connect(
        cls,
        target: str | Sequence[str] | Transport,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = False,
        headers: Mapping[str, str] | None = None,
        http_session: requests.Session | None = None,
        auth: Any = None,
        transport: Literal["auto", "stdio", "streamable-http", "sse", "http"] = "auto",
        name: str | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        protocol_version: str | None = None,
        era: Literal["auto", "legacy", "modern"] = "auto",
        client_info: Mapping[str, Any] | None = None,
        sampling_handler: Callable[[Any], Any] | None = None,
        elicitation_handler: Callable[[Any], Any] | None = None,
        roots: Sequence[Any] | Callable[[], Sequence[Any]] | None = None,
        on_log: Callable[[Any], None] | None = None,
        strict: bool = True,
        include_tools: str | Sequence[str] | None = None,
        exclude_tools: str | Sequence[str] | None = None,
        verify: bool | str | None = None,
        cert: str | tuple[str, str] | None = None,
        extensions: Mapping[str, Mapping[str, Any] | None] | Sequence[str] | None = None,
        restart: bool | RestartPolicy | Mapping[str, Any] | None = None,
        card: bool | Mapping[str, str] | Callable[..., Any] = False,
        cassette: TransportWrapper | None = None,
        telemetry: bool | Telemetry = True,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        _caches: Caches | None = None,
        _since: float | None = None,
    ) -> Session:
        """Bring up a session and return it ready for use.

        ``target``: a URL (Streamable HTTP, falling back to legacy HTTP+SSE when the
        first POST gets 400/404/405), an argv list (a stdio server; never a shell), or
        a ``Transport``. On any failure everything started is closed before raising.

        ``era``: "auto" asks ``server/discover`` first and falls back to ``initialize``
        for servers that are not 2026-07-28 (see ``mcpsync.protocol.choose``); "legacy" or
        "modern" force one; a pinned ``protocol_version`` pins its era. The session's
        ``era``, ``protocol_version`` and ``era_reason`` say what was chosen and why.

        ``connect_timeout`` (seconds) bounds the whole bring-up: probe, ``initialize``,
        fallbacks and restarts share one deadline (an interactive OAuth login excepted);
        ``timeout`` is the default for each later request. ``name`` labels logs, threads
        and errors; by default a URL's host, or the package or script an argv runs
        (``mcpsync.config.command_name``).

        ``include_tools`` / ``exclude_tools``: tool name globs (``fnmatch``; exclude wins).
        A hidden tool is not listed, and calling it raises ``ToolExcluded`` (nothing sent).

        ``extensions``: extension ids (or id -> settings) advertised in the client capabilities.

        ``restart``: True or a ``RestartPolicy``: bring the session up again when the server dies.

        ``verify``: HTTP(S) only: a CA bundle path, or False to skip TLS verification (None: the default).
        ``cert``: a TLS client certificate: a path, or (cert, key) paths (an ``OAuth``'s requests use both).

        ``card``: read the URL's Server Card first, connect where it says (opt-in: ``mcpsync.cards``).

        ``cassette``: a ``mcpsync.testing.Cassette``: record the session's messages to its file,
        or replay them from it without starting or contacting the server (its ``mode`` says
        which); the values of ``env`` and ``headers`` are never written. Not with ``restart``. Its
        session remembers no era verdict or cache hint of others (the bring-up is a fresh
        process's, so a recording made after other sessions replays in a new interpreter).

        ``telemetry``: with ``opentelemetry-api`` installed (the ``otel`` extra), a CLIENT
        span per request and notification, the trace context in their ``_meta``, the
        ``connect`` span of the bring-up and the MCP client metrics, through the providers
        the application configured or ``tracer_provider`` / ``meter_provider``; False turns it
        off; a ``mcpsync.telemetry.Telemetry`` sets more (``capture_content``). See
        ``mcpsync.telemetry`` and docs/telemetry.md.

        ``_caches`` (private): the era verdict and cache-hint stores to use instead of the
        process-wide ones (``mcpsync.protocol.choose.Caches``; tests pass fresh ones).
        ``_since`` (private): when the caller's bring-up began (``time.monotonic()``), if it
        did part of it before this call (the CLI imports the wire models first): the
        ``connect_timeout`` deadline counts from then.
        """
        started = time.perf_counter()
        _seconds("connect_timeout", connect_timeout)
        _seconds("timeout", timeout)
        # one deadline for the whole bring-up: probe, initialize, fallbacks and restarts
        since = time.monotonic() if _since is None else _since
        deadline = since + connect_timeout if connect_timeout is not None else None
        if card:  # True, input values or an ask(name, input) callable; the card is advisory
            from ..cards.connect import resolve_target

            target, headers, transport = resolve_target(target, card, headers=headers, transport=transport,
                                                        timeout=connect_timeout, http_session=http_session)  # fmt: skip
        select = functools.partial(
            select_transports, target, transport=transport, name=name, argv_name=command_name,
            env=env, cwd=cwd, inherit_env=inherit_env, headers=headers, http_session=http_session,
            auth=auth, timeout=timeout, connect_timeout=connect_timeout, verify=verify, cert=cert,
        )  # fmt: skip
        _tls.share(auth, verify, cert)  # an OAuth's own requests to authorization servers too
        name, candidates = select(deadline=deadline)
        if cassette is not None:  # record what the transports move, or replay it instead
            candidates = _recorded.wrap(cassette, candidates, name=name, env=env,
                                        headers=headers, restart=restart)  # fmt: skip
            # as in a fresh process, whatever ran before: the same bring-up is recorded and replayed
            _caches = _caches or Caches()
        resolve_era(era, protocol_version)  # ConfigError before anything starts
        _typed.prefetch()  # mcp_types imports in the background while the server starts
        offered = _offer.extensions(extensions)  # e.g. mcpsync.apps.EXTENSION; ConfigError too
        tool_filter = NameFilter.of(include_tools, exclude_tools)
        server_key, credential_key = server_identity(
            target, env=env, cwd=cwd, headers=headers, auth=auth
        )

        init_args = {"client_info": dict(client_info or CLIENT_INFO), "protocol_version": protocol_version,
                     "timeout": connect_timeout, "era": era, "server_key": server_key,
                     "credential_key": credential_key}  # fmt: skip

        instrument = _telemetry.make(telemetry, name=name, tracer_provider=tracer_provider,
                                     meter_provider=meter_provider)  # fmt: skip
        url = target if isinstance(target, str) else None

        def connection_for(chosen: Transport) -> Connection:
            if instrument is not None:
                instrument.bind(chosen.kind, url, lambda: chosen.session_id)
            return Connection(chosen, name=name, default_timeout=timeout, hooks=EraHooks(),
                              instrument=instrument)  # fmt: skip

        def prepare(chosen: Transport) -> Session:
            return cls(connection_for(chosen), name=name, strict=strict, init_args=init_args, keep_alive=auth,
                       tool_filter=tool_filter, caches=_caches, sampling_handler=sampling_handler,
                       elicitation_handler=elicitation_handler, roots=roots, on_log=on_log,
                       offered=offered)  # fmt: skip

        with _telemetry.connecting(instrument, name):
            session = _bringup.first_ready(
                candidates, prepare, name=name, deadline=deadline, connect_timeout=connect_timeout
            )
        session._era.on_expired(session._reinitialize)
        session._restart = _restart_attach(session, restart, lambda d: select(deadline=d)[1],
                                           connection_for, connect_timeout,
                                           isinstance(target, Transport))  # fmt: skip
        if instrument is not None and session._restart is None:
            # a server that dies ends the session (no restart follows): its duration is
            # recorded then, with the reason, not only if the program ever closes it
            session._conn.on_closed(instrument.session_ended)
        session.phases["total"] = time.perf_counter() - started
        return session

    def _initialize(
        self, era: str | None = None, deadline: float | None = None, restarted: str | None = None
    ) -> None:
        """Bring the era up over the started connection and record what it agreed;
        ``restarted``: this process replaces one that died of the era probe (why, in
        words): it gets ``initialize`` at once."""
        args = dict(self._init_args)
        if era is not None:
            args["era"] = era
        if restarted is not None:
            args["restarted"] = restarted
        self._era, phases = _bringup.initialize(
            self._conn, args, keep_alive=self._keep_alive, interest=self._interest,
            tools=self._tools, relist_tools=self._relist_tools, require=self._require,
            caches=self._caches, capabilities=self._client_capabilities, deadline=deadline,
        )  # fmt: skip
        handshake = self._era.agreement
        self._allowed = set()
        self._handshake = handshake
        self.era = cast(EraName, handshake.era)  # "legacy" or "modern": the era says which
        self.era_reason = handshake.era_reason
        self.phases.update(phases)
        instrument = self._conn.instrument
        if instrument is not None:
            instrument.agreed(handshake.protocol_version, phases)

    def _reinitialize(self) -> None:
        """The HTTP session expired: bring it up again with the same capabilities."""
        log.warning("mcpsync: session with %s expired; initializing again", self.name)
        self.reinitializations += 1
        try:
            self._initialize(era="legacy")
        except BaseException:
            self._conn.transport.handshake_failed()  # the next request leads a new attempt
            raise
        self._tools.forget()

    def _relist_tools(self) -> None:
        """The modern era's re-list after a header mismatch (-32020)."""
        self.list_tools(refresh=True)

    # -- what bring-up agreed --------------------------------------------------------------

    @property
    def protocol_version(self) -> str:
        assert self._handshake is not None
        return self._handshake.protocol_version

    @property
    def server_info(self) -> Implementation:
        assert self._handshake is not None
        return _validate("Implementation", self._handshake.server_info)

    @property
    def server_capabilities(self) -> ServerCapabilities:
        assert self._handshake is not None
        return _validate("ServerCapabilities", self._handshake.capabilities)

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return dict(self._client_capabilities)

    @property
    def instructions(self) -> str | None:
        return self._handshake.instructions if self._handshake else None

    @property
    def stderr_tail(self) -> str:
        """The server's last lines on its stderr (stdio; bounded, newline-joined; "" for
        HTTP): what it said while starting (a usage message), or before it stopped."""
        return self._conn.transport.stderr_tail()

    @property
    def transport(self) -> Transport:
        return self._conn.transport

    @property
    def connection(self) -> Connection:
        """The JSON-RPC layer, for raw requests: ``s.connection.request(method, params)``."""
        return self._conn

    @property
    def closed(self) -> bool:
        restarting = self._restart is not None and not self._restart.finished
        # (in a forked child: not for use)
        return (self._conn.closed and not restarting) or _forked(self)

    # -- the restart policy (``self._restart``, None without one) ---------------------------

    @property
    def restarts(self) -> int:
        """How many times the restart policy brought the session back."""
        return self._restart.count if self._restart is not None else 0

    @property
    def restart_history(self) -> list[RestartEvent]:
        """Every death of the server and what followed, oldest first (a copy)."""
        return list(self._restart.history) if self._restart is not None else []

    @property
    def restarting(self) -> bool:
        """True while the restart policy brings the server up again (calls made now wait
        for it, bounded by their timeout)."""
        return self._restart is not None and self._restart.restarting

    @property
    def restart_policy(self) -> RestartPolicy | None:
        return self._restart.policy if self._restart is not None else None

    @property
    def restart_failure(self) -> BaseException | None:
        """The ``RestartLimitReached`` the policy gave up with (None: it did not)."""
        return self._restart.failure if self._restart is not None else None

    def _in_child(self) -> None:
        """Used in a child of ``os.fork()``: ``ForkedError``, or with a restart policy, this
        process's own connection (brought up once, by the first call)."""
        if self._restart is None:
            raise _forked_error(self)
        self._restart.in_child()

    def task(self, task_id: str, *, timeout: float | None | Default = DEFAULT) -> Future[Any]:
        """Pick up the task ``task_id`` made by this session before a restart, or by another
        process (2026-07-28 tasks extension; 2025-11-25 tasks, ``tasks/result``): a future
        that follows it until it ends and resolves to its ``CallToolResult`` (``cancel()``
        sends ``tasks/cancel``; ``task_id`` names it). ``timeout`` bounds each request.
        ``CapabilityError`` when the server agreed to no tasks. See ``mcpsync.session.tasks``."""
        return _tasks.pick_up(self, task_id, timeout)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        version = self._handshake.protocol_version if self._handshake else "?"
        return f"<mcpsync.Session {self.name!r} {self.transport.kind} {version} {state}>"

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the session: the transport, the server process, every thread. Idempotent."""
        if _forked(self):  # in a child of os.fork(): release its copies, leave the server be
            return release_session(self)
        _tasks.finish_sending(self)  # a Ctrl-C'd task's tasks/cancel goes out first (bounded)
        if self._restart is not None:
            self._restart.stop()  # no restart starts or finishes after this
        self._era.stop()  # then one deadline for the connection's threads and the era's
        self._conn.close(also=self._era.threads)
        if self._conn.instrument is not None:
            self._conn.instrument.session_ended(self._conn.close_error)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- raw requests ------------------------------------------------------------------

    def _require(self, method: str) -> None:
        if _forked(self):  # a child of os.fork(): ForkedError, or the restart policy's own
            self._in_child()  # connection, brought up here once
        if method in self._allowed or not self.strict or self._handshake is None:
            return  # checked already against this agreement, or lax
        _pages.require(self._handshake.capabilities, method, self.name)
        self._allowed.add(method)

    def _submit(
        self,
        method: str,
        params: dict[str, Any] | None,
        convert: Callable[[Any], Any],
        *,
        timeout: float | None | Default = DEFAULT,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
    ) -> Future[Any]:
        self._require(method)
        opts = CallOptions.of(timeout, on_progress, reset_timeout_on_progress, max_timeout)
        return self._era.submit(method, params, convert, opts)

    def _call(
        self,
        method: str,
        params: dict[str, Any] | None,
        convert: Callable[[Any], Any],
        *,
        timeout: float | None | Default = DEFAULT,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
    ) -> Any:
        """The blocking twin of ``_submit``: the raw result, converted in this thread."""
        self._require(method)
        opts = CallOptions.of(timeout, on_progress, reset_timeout_on_progress, max_timeout)
        return self._era.call(method, params, convert, opts)

    def _paginate(
        self,
        method: str,
        key: str,
        model: str,
        params: dict[str, Any] | None = None,
        timeout: float | None | Default = DEFAULT,
    ) -> Future[Any]:
        """A future of every item over all pages of a paginated list; ``timeout`` (default:
        the session's) bounds the whole list, all pages together."""
        self._require(method)
        validate = getattr(_types(), model).model_validate
        if isinstance(timeout, Default):
            timeout = self._conn.default_timeout
        return _pages.collect_pages(self._era, method, key, validate, model, params, timeout)

    def _wait(self, future: Future[Any]) -> Any:
        return self._era.wait(future)

    def _call_raw(
        self, method: str, params: dict[str, Any] | None, convert: Callable[[Any], Any]
    ) -> Any:
        """One request under the session's default options (the skills member's calls)."""
        return self._call(method, params, convert)

    def _page(self, method: str, params: dict[str, Any] | None, timeout: float | None) -> Any:
        """One page of a paginated list, waited for (the skills member's listing)."""
        return self._era.wait(self._era.page(method, params, timeout))

    def _server_capabilities_raw(self) -> dict[str, Any]:
        """The capabilities the server declared, as sent ({} before bring-up)."""
        return self._handshake.capabilities if self._handshake else {}

    # -- ping --------------------------------------------------------------------------

    def submit_ping(self, *, timeout: float | None | Default = DEFAULT) -> Future[None]:
        return self._submit("ping", None, lambda _: None, timeout=timeout)

    def ping(self, *, timeout: float | None | Default = DEFAULT) -> None:
        """Check the server answers."""
        self._call("ping", None, lambda _: None, timeout=timeout)

    # -- tools -------------------------------------------------------------------------

    def submit_list_tools(self, *, timeout: float | None | Default = DEFAULT) -> Future[list[Tool]]:
        future = self._paginate("tools/list", "tools", "Tool", timeout=timeout)

        def remember(f: Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                self._tools.remember(f.result())

        future.add_done_callback(remember)
        if self._tool_filter is not None:
            return Derived(future, self._visible_tools, self._conn)
        return future

    def _visible_tools(self, tools: Sequence[Tool]) -> list[Tool]:
        keep = self._tool_filter
        return [t for t in tools if keep is None or keep.allows(t.name)]

    def list_tools(
        self, *, refresh: bool = False, timeout: float | None | Default = DEFAULT
    ) -> list[Tool]:
        """Every tool the server offers (all pages). Cached until the server says the list
        changed. ``timeout`` (default: the session's) bounds the whole list, all pages."""
        if refresh:
            self._era.invalidate("tools/list")
        cached = self._era.cached("tools/list")  # legacy: the last list; modern: hint cache
        if cached is not None:
            tools = self._visible_tools(cached)
        else:
            tools = list(self._wait(self.submit_list_tools(timeout=timeout)))
        if not _typed.schema_warm() and any(t.output_schema for t in tools):
            # in the caller's thread, before a result can need the check: never in the
            # callback above, which runs where the reply arrived (a transport's or sender's
            # thread, whose close() would wait for a slow first import)
            _typed.warm_schema()
        return tools

    def _tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        task: _tasks.TaskOption = None,
    ) -> tuple[dict[str, Any], Callable[[Any], Any], dict[str, Any] | None]:
        """The params, the result's converter, and the ``task`` member when the call goes
        as a 2025-11-25 task (``_tasks.decide``; None: a plain call)."""
        if self._tool_filter is not None and not self._tool_filter.allows(name):
            raise ToolExcluded(
                f"tool {name!r} is hidden by the tool filters of session {self.name!r} "
                f"({self._tool_filter.describe()}); nothing was sent"
            )
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            if not isinstance(arguments, Mapping):
                raise TypeError(
                    f"call_tool({name!r}, arguments): arguments must be a mapping of argument "
                    f"names to values (a dict), not {type(arguments).__name__}"
                )
            params["arguments"] = dict(arguments)
        if meta:
            params["_meta"] = dict(meta)
        tool = self._tools.by_name.get(name)
        if tool is None:
            if task is None:
                return params, _typed.plain_tool_result, None  # nothing to check beyond the model
        elif task is None and tool.execution is None:
            if not tool.output_schema:
                return params, _typed.plain_tool_result, None
            return params, functools.partial(_typed.tool_result, tool), None
        return _tasks.tool_call_parts(self, name, tool, task, params)  # maybe a task

    def submit_call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None | Default = DEFAULT,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        task: _tasks.TaskOption = None,
    ) -> Future[CallToolResult]:
        """Like ``call_tool``, but returns at once with a ``Future`` (``cancel()`` tells the server).

        As a task (``task=``, see ``call_tool``), a 2025-11-25 call returns a
        ``TaskFuture``: its ``task_id`` is set once the ``CreateTaskResult`` came
        (``wait_task_id()`` blocks for it), ``cancel()`` sends ``tasks/cancel``; a modern
        call returns a future whose ``task_id`` is set if the server made it a task::

            future = s.submit_call_tool("slow", {"n": 3}, task=600)  # ttl: 10 minutes
            keep(future.wait_task_id(30))  # s.task(that_id) picks it up later, anywhere
            print(future.result().content[0].text)
        """
        params, convert, as_task = self._tool_call(name, arguments, meta, task)
        if as_task is not None:
            return _tasks.start(
                self, params, convert, timeout=timeout, on_progress=on_progress,
                reset_timeout_on_progress=reset_timeout_on_progress, max_timeout=max_timeout,
            )  # fmt: skip
        return self._submit(
            "tools/call",
            params,
            convert,
            timeout=timeout,
            on_progress=on_progress,
            reset_timeout_on_progress=reset_timeout_on_progress,
            max_timeout=max_timeout,
        )

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None | Default = DEFAULT,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
        task: _tasks.TaskOption = None,
    ) -> CallToolResult:
        """Call a tool and return its result (``is_error`` is set when the tool failed).

        ``on_progress(Progress)`` receives the server's progress reports. When the tool
        list was fetched and declares an ``outputSchema``, the structured result is
        checked against it (``ProtocolError`` if it does not match).

        ``task``: run the call as a task (tasks). 2025-11-25: True (the server's default
        ttl) or a ttl in seconds sends a task-augmented call and follows the task
        (``tasks/get``, ``tasks/result``) until it ends, bounded by its ttl and
        ``timeout`` per request; Ctrl-C cancels it (``tasks/cancel``). None: a tool
        listed with ``execution.taskSupport`` "required" goes as a task by itself, others
        plainly; False: never as a task. ``CapabilityError``, nothing sent, when the
        server declares no ``tasks.requests.tools.call`` or the tool is "forbidden"
        (absent). 2026-07-28: the server decides (tasks extension); ``task`` only checks
        the extension was agreed. See ``mcpsync.session.tasks``::

            report = s.call_tool("research", {"topic": "x"}, task=True)
        """
        params, convert, as_task = self._tool_call(name, arguments, meta, task)
        if (
            as_task is None
            and timeout is DEFAULT
            and on_progress is None
            and max_timeout is None
            and not reset_timeout_on_progress
            and _getpid() == self._owner.pid
            and ("tools/call" in self._allowed or not self.strict)
        ):  # the hot path: what _call does for the default options (_require: nothing to do)
            return self._era.call("tools/call", params, convert, DEFAULT_OPTIONS)
        if as_task is not None:
            return _tasks.call(
                self, params, convert, timeout=timeout, on_progress=on_progress,
                reset_timeout_on_progress=reset_timeout_on_progress, max_timeout=max_timeout,
            )  # fmt: skip
        return self._call(
            "tools/call",
            params,
            convert,
            timeout=timeout,
            on_progress=on_progress,
            reset_timeout_on_progress=reset_timeout_on_progress,
            max_timeout=max_timeout,
        )

    # -- resources ---------------------------------------------------------------------

    def submit_list_resources(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> Future[list[Resource]]:
        return self._paginate("resources/list", "resources", "Resource", timeout=timeout)

    def list_resources(self, *, timeout: float | None | Default = DEFAULT) -> list[Resource]:
        """Every resource the server lists (all pages); ``timeout`` (default: the
        session's) bounds the whole list, all pages together."""
        return list(self._wait(self.submit_list_resources(timeout=timeout)))

    def submit_list_resource_templates(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> Future[list[ResourceTemplate]]:
        return self._paginate(
            "resources/templates/list", "resourceTemplates", "ResourceTemplate", timeout=timeout
        )

    def list_resource_templates(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> list[ResourceTemplate]:
        """Every resource template (all pages); ``timeout`` (default: the
        session's) bounds the whole list, all pages together."""
        return list(self._wait(self.submit_list_resource_templates(timeout=timeout)))

    def submit_read_resource(
        self, uri: str, *, timeout: float | None | Default = DEFAULT
    ) -> Future[ReadResourceResult]:
        return self._submit(
            "resources/read",
            {"uri": str(uri)},
            lambda r: _validate("ReadResourceResult", r),
            timeout=timeout,
        )

    def read_resource(
        self, uri: str, *, timeout: float | None | Default = DEFAULT
    ) -> ReadResourceResult:
        """Read one resource; ``.contents`` holds text or blob parts."""
        return self._call(
            "resources/read",
            {"uri": str(uri)},
            lambda r: _validate("ReadResourceResult", r),
            timeout=timeout,
        )

    def subscribe_resource(self, uri: str, callback: Callable[[str], None]) -> None:
        """Ask to be told when ``uri`` changes; ``callback(uri)`` runs on the dispatch thread."""
        uri = str(uri)
        if self._interest.add_uri(uri, callback):
            try:
                self._require("resources/subscribe")
                self._era.subscribe(uri, self._conn.default_timeout)
            except BaseException:
                self._interest.drop_uri(uri)
                raise

    def unsubscribe_resource(self, uri: str) -> None:
        """Stop updates for ``uri``."""
        uri = str(uri)
        if self._interest.drop_uri(uri):
            self._era.unsubscribe(uri, self._conn.default_timeout)

    # -- prompts -----------------------------------------------------------------------

    def submit_list_prompts(
        self, *, timeout: float | None | Default = DEFAULT
    ) -> Future[list[Prompt]]:
        return self._paginate("prompts/list", "prompts", "Prompt", timeout=timeout)

    def list_prompts(self, *, timeout: float | None | Default = DEFAULT) -> list[Prompt]:
        """Every prompt (all pages); ``timeout`` (default: the
        session's) bounds the whole list, all pages together."""
        return list(self._wait(self.submit_list_prompts(timeout=timeout)))

    def submit_get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None | Default = DEFAULT,
    ) -> Future[GetPromptResult]:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = {k: str(v) for k, v in arguments.items()}
        return self._submit(
            "prompts/get", params, lambda r: _validate("GetPromptResult", r), timeout=timeout
        )

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None | Default = DEFAULT,
    ) -> GetPromptResult:
        """Render a prompt with its arguments."""
        return self._wait(self.submit_get_prompt(name, arguments, timeout=timeout))

    # -- completion -------------------------------------------------------------

    def submit_complete(
        self,
        ref: Mapping[str, Any],
        argument_name: str,
        value: str,
        context_arguments: Mapping[str, str] | None = None,
    ) -> Future[CompleteResult]:
        params: dict[str, Any] = {
            "ref": dict(ref),
            "argument": {"name": argument_name, "value": value},
        }
        if context_arguments:
            params["context"] = {"arguments": dict(context_arguments)}
        return self._submit("completion/complete", params, lambda r: _validate("CompleteResult", r))

    def complete(
        self,
        ref: Mapping[str, Any],
        argument_name: str,
        value: str,
        context_arguments: Mapping[str, str] | None = None,
    ) -> CompleteResult:
        """Completion suggestions for an argument of a prompt or resource template.

        ``ref`` is ``{"type": "ref/prompt", "name": ...}`` or
        ``{"type": "ref/resource", "uri": ...}``.
        """
        return self._wait(self.submit_complete(ref, argument_name, value, context_arguments))

    # -- skills (SEP-2640): one-liners over ``self.skills`` -------------------------------

    @property
    def skills_supported(self) -> bool:
        """Whether the server declared the skills extension."""
        return self.skills.supported

    @property
    def skill_problems(self) -> dict[str, str]:
        """Entries of the last listing that were refused: SKILL.md URI -> the reason."""
        return self.skills.problems

    def list_skills(self, *, refresh: bool = False) -> list[SkillEntry]:
        """Every skill the server lists (all pages), checked; nothing of any skill is read.
        See ``mcpsync.skills.Skills.list``."""
        return self.skills.list(refresh=refresh)

    def get_skill(self, uri: str) -> SkillEntry:
        """The server's current entry for the skill whose SKILL.md is ``uri`` (``skills/get``)."""
        return self.skills.get(uri)

    def load_skill(self, name_or_uri: str, *, allow_dynamic: bool = False) -> LoadedSkill:
        """Load a skill by name or SKILL.md URI, verified (``mcpsync.skills.Skills.load``)."""
        return self.skills.load(name_or_uri, allow_dynamic=allow_dynamic)

    # -- logging ---------------------------------------------------------------------

    def set_logging_level(self, level: str) -> None:
        """Ask the server to send log messages at ``level`` and above."""
        if level not in LOG_LEVELS:
            raise ConfigError(
                f"unknown log level {level!r}; expected one of {', '.join(LOG_LEVELS)}"
            )
        self._era.set_log_level(level)

    # -- roots (client side) -------------------------------------------------------------

    def set_roots(self, roots: Sequence[Any] | Callable[[], Sequence[Any]]) -> None:
        """Replace the roots offered to the server and tell it they changed."""
        if "roots" not in self._client_capabilities:
            raise CapabilityError("connect with roots=... to offer roots to the server")
        self._roots = roots
        self._era.roots_changed()

    def _answer_roots(self, params: dict[str, Any]) -> dict[str, Any]:
        return _typed.roots_result(self._roots() if callable(self._roots) else self._roots)

    # -- notifications -----------------------------------------------------------------

    def on_tools_changed(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` when the server says its tool list changed."""
        self._interest.list_changed["tools"].append(callback)
        self._era.watch(self._conn.default_timeout)

    def on_resources_changed(self, callback: Callable[[], None]) -> None:
        self._interest.list_changed["resources"].append(callback)
        self._era.watch(self._conn.default_timeout)

    def on_prompts_changed(self, callback: Callable[[], None]) -> None:
        self._interest.list_changed["prompts"].append(callback)
        self._era.watch(self._conn.default_timeout)

    def on_notification(self, callback: Callable[[str, dict[str, Any]], None]) -> None:
        """Run ``callback(method, params)`` for every notification from the server."""
        self._notification_callbacks.append(callback)

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if not self._era.on_notification(method, params):
            return  # e.g. from a listen stream already left
        if method == "notifications/message":
            self._on_log_message(params)
        elif method.endswith("/list_changed"):
            kind = method.split("/")[1]
            if kind == "tools":
                self._tools.forget()
            for on_change in self._interest.list_changed.get(kind, ()):
                on_change()
        elif method == "notifications/resources/updated":
            uri = params.get("uri", "")
            for on_update in self._interest.subscriptions.get(uri, ()):
                on_update(uri)
        for callback in self._notification_callbacks:
            callback(method, params)

    def _on_log_message(self, params: dict[str, Any]) -> None:
        if self._on_log is not None:
            self._on_log(_validate("LoggingMessageNotificationParams", params))
        else:
            self._server_log.route(params)
