"""The public, blocking MCP session: ``Session.connect(target)`` -> a ready session.

Owns: bring-up orchestration (transport selection from the target, transport start,
handshake, unwinding on failure), the client's advertised capabilities (derived from
the handlers given), capability contracts in both directions, typed results (the
official ``mcp_types`` wire models, imported on first use), list caches refreshed on
``list_changed``, subscriptions, log routing, and the blocking one-liners with their
``submit_*`` twins that return ``concurrent.futures.Future``.

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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any, Literal

from ._version import __version__
from .config import command_name
from .connection import Connection, Progress
from .errors import (
    CapabilityError,
    ConfigError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
    ServerError,
    ServerExited,
)
from .filters import NameFilter, ToolExcluded
from .handshake import Handshake
from .modern import ModernFuture, ModernWire, negotiate, resolve_era, server_identity
from .transports.base import Transport

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

__all__ = ["Session", "Progress", "CLIENT_INFO"]

log = logging.getLogger("mcpsync")

CLIENT_INFO = {"name": "mcpsync", "version": __version__}

# Which server capability each client->server method needs (None: always allowed).
_NEEDS: dict[str, tuple[str, ...]] = {
    "tools/list": ("tools",),
    "tools/call": ("tools",),
    "resources/list": ("resources",),
    "resources/templates/list": ("resources",),
    "resources/read": ("resources",),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "prompts/list": ("prompts",),
    "prompts/get": ("prompts",),
    "completion/complete": ("completions",),
    "logging/setLevel": ("logging",),
}

# Python logging levels for MCP (syslog) levels.
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

_UNSET: Any = ...


def _types() -> Any:
    import mcp_types  # ~0.2 s of pydantic model building: only when a typed result is needed

    return mcp_types


_validators: dict[str, Callable[[Any], Any]] = {}  # model name -> its pydantic validator


def _validate(model_name: str, data: Any) -> Any:
    """``data`` as the ``mcp_types`` model ``model_name`` (ProtocolError if it does not fit)."""
    validate = _validators.get(model_name)
    if validate is None:
        model = getattr(_types(), model_name)
        validate = _validators[model_name] = (
            _tagged_content(model) or model.__pydantic_validator__.validate_python
        )
    try:
        return validate(data)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ProtocolError(f"server sent an invalid {model_name}: {exc}") from None


def _tagged_content(model: Any) -> Callable[[Any], Any] | None:
    """A faster validator for a model with a ``content: list[<content block union>]`` field.

    ``mcp_types`` declares the content-block union without a discriminator, so pydantic
    tries every member for every block (measured: 4.6 us for a one-block CallToolResult,
    20 us for five). Here the blocks are validated first through the same union tagged by
    their ``type``; the model then receives ready instances, which it accepts as they are
    (2.6 us and 4.5 us). The result is the same plain ``mcp_types`` model. None when the
    model has no such field, or the union cannot be tagged.
    """
    import typing

    from pydantic import Field, TypeAdapter

    field = model.model_fields.get("content")
    if field is None or typing.get_origin(field.annotation) is not list:
        return None
    (union,) = typing.get_args(field.annotation)
    try:
        adapter = TypeAdapter(list[typing.Annotated[union, Field(discriminator="type")]])  # type: ignore[valid-type]
        blocks = adapter.validator.validate_python  # the core validator: one Python frame less
    except Exception:  # noqa: BLE001 - a member without a literal "type": keep pydantic's way
        return None
    whole = model.__pydantic_validator__.validate_python

    def validate(data: Any) -> Any:
        if type(data) is dict and type(data.get("content")) is list:
            try:
                return whole({**data, "content": blocks(data["content"])})
            except ValueError:
                pass  # invalid: let the model itself say where (content.0.text, ...)
        return whole(data)

    return validate


class _Derived(Future):  # type: ignore[type-arg]
    """A future computed from another (a typed result from a raw one); cancel goes upstream."""

    def __init__(
        self, source: Future[Any], convert: Callable[[Any], Any], conn: Connection | None = None
    ) -> None:
        super().__init__()
        self._conn = conn
        self._source = source
        self._convert = convert
        self._mcpsync_call = getattr(source, "_mcpsync_call", None)
        source.add_done_callback(self._resolve)

    def _resolve(self, source: Future[Any]) -> None:
        try:
            if source.cancelled():
                super().cancel()
                return
            error = source.exception()
            if error is not None:
                self.set_exception(error)
            else:
                try:
                    value = self._convert(source.result())
                except BaseException as exc:  # noqa: BLE001 - delivered through the future
                    self.set_exception(exc)
                else:
                    self.set_result(value)
        except InvalidStateError:
            pass  # cancelled by the caller meanwhile

    def cancel(self) -> bool:
        self._source.cancel()
        return super().cancel()

    def result(self, timeout: float | None = None) -> Any:
        """As ``Future.result``; on stdio the waiting thread reads its own response."""
        conn = self._conn
        if conn is not None and not self.done():
            if timeout is None:
                return conn.wait(self)
            pump = conn._pump  # the transport's read-in-this-thread hook (stdio), if any
            if pump is not None:
                pump(self, time.monotonic() + timeout)
                if self.done():
                    timeout = 0
        return super().result(timeout)


class Session:
    """A live MCP session. Create it with ``Session.connect(...)``; close it with ``close()``."""

    def __init__(self, connection: Connection, *, name: str, strict: bool = True) -> None:
        self._conn = connection
        self.name = name
        self.strict = strict
        self.phases: dict[str, float] = {}
        self.era: Literal["legacy", "modern"] = "legacy"
        #: how bring-up chose the era, in words
        self.era_reason = ""
        self._modern: ModernWire | None = None
        self.reinitializations = 0
        self._handshake: Handshake | None = None
        self._allowed: set[str] = set()  # methods whose capability the handshake showed
        self._init_args: dict[str, Any] = {}
        #: the auth object given to connect(): held for the session's life; its
        #: ``flow_seconds`` tells bring-up how long an OAuth dance took
        self._keep_alive: Any = None
        self._client_capabilities: dict[str, Any] = {}
        self._roots: Any = None
        self._on_log: Callable[[Any], None] | None = None
        self._server_log = logging.getLogger(f"mcpsync.server.{name}")
        # child loggers for server-chosen `logger` names: at most _MAX_SERVER_LOGGERS (a
        # logging.Logger lives as long as the process); the rest log here with their name
        self._server_loggers: dict[str, logging.Logger] = {}
        self._cache_lock = threading.Lock()
        self._tools: list[Tool] | None = None
        self._tools_by_name: dict[str, Tool] = {}
        self._list_cache: dict[str, list[Any]] = {}
        self._list_changed: dict[str, list[Callable[[], None]]] = {
            "tools": [],
            "resources": [],
            "prompts": [],
        }
        self._subscriptions: dict[str, list[Callable[[str], None]]] = {}
        self._notification_callbacks: list[Callable[[str, dict[str, Any]], None]] = []
        self._tool_filter: NameFilter | None = None  # include_tools / exclude_tools

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
    ) -> Session:
        """Bring up a session and return it ready for use.

        ``target``: a URL (Streamable HTTP, falling back to legacy HTTP+SSE when the
        first POST gets 400/404/405), an argv list (a stdio server; never a shell), or
        a ``Transport``. On any failure everything started is closed before raising.

        ``era``: "auto" asks ``server/discover`` first and falls back to ``initialize``
        for servers that are not 2026-07-28 (see ``mcpsync.modern``); "legacy" or
        "modern" force one; a pinned ``protocol_version`` pins its era. The session's
        ``era``, ``protocol_version`` and ``era_reason`` say what was chosen and why.

        ``connect_timeout`` (seconds) bounds the whole bring-up: probe, ``initialize``,
        fallbacks and restarts share one deadline (an interactive OAuth login excepted);
        ``timeout`` is the default for each later request. ``name`` labels logs, threads
        and errors; by default a URL's host, or the package or script an argv runs
        (``mcpsync.config.command_name``).

        ``include_tools`` / ``exclude_tools``: tool name globs (``fnmatch``; exclude wins).
        A hidden tool is not listed, and calling it raises ``ToolExcluded`` (nothing sent).
        """
        started = time.perf_counter()
        # one deadline for the whole bring-up: probe, initialize, fallbacks and restarts
        deadline = time.monotonic() + connect_timeout if connect_timeout is not None else None
        if isinstance(target, Transport):
            name = name or getattr(target, "name", None) or target.kind
            candidates: list[Callable[[], Transport]] = [lambda: target]  # type: ignore[list-item]
        elif isinstance(target, str) and "://" in target:
            name = name or target.split("://", 1)[1].split("/", 1)[0]
            candidates = _http_candidates(
                target, transport, deadline, name=name, headers=headers, http_session=http_session,
                auth=auth, timeout=timeout, connect_timeout=connect_timeout,
            )  # fmt: skip
        elif isinstance(target, (list, tuple)) and target and transport in ("auto", "stdio"):
            from .transports.stdio import StdioTransport

            argv = list(target)
            name = name or command_name(argv)  # the package or script, not "node"
            candidates = [
                lambda: StdioTransport(argv, env=env, cwd=cwd, inherit_env=inherit_env, name=name)
            ]
        else:
            raise ConfigError(
                f"cannot connect to {target!r}: give a URL, a command as a list of arguments, or a Transport"
            )
        resolve_era(era, protocol_version)  # ConfigError before anything starts
        tool_filter = NameFilter.of(include_tools, exclude_tools)
        server_key, credential_key = server_identity(
            target, env=env, cwd=cwd, headers=headers, auth=auth
        )

        info = dict(client_info or CLIENT_INFO)
        last_error: BaseException | None = None
        for position, make_transport in enumerate(candidates):
            if position and deadline is not None and time.monotonic() >= deadline:
                raise RequestTimeout(
                    f"bring-up of {name!r} did not finish within connect_timeout={connect_timeout:g} s"
                ) from last_error
            t0 = time.perf_counter()
            chosen = make_transport()
            conn = Connection(chosen, name=name, default_timeout=timeout)
            session = cls(conn, name=name, strict=strict)
            session._install_handlers(sampling_handler, elicitation_handler, roots, on_log)
            session._init_args = {"client_info": info, "protocol_version": protocol_version, "timeout": connect_timeout,
                                  "era": era, "server_key": server_key, "credential_key": credential_key}  # fmt: skip
            session._keep_alive = auth
            session._tool_filter = tool_filter
            try:
                conn.start()
                session.phases["transport"] = time.perf_counter() - t0
                session._initialize(deadline=deadline)
            except HTTPStatusError as exc:
                conn.close()
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
                conn.close()
                if getattr(exc, "restart_legacy", False) and candidates.count(make_transport) == 1:
                    # the server process died of the server/discover probe (old SDKs do):
                    # start it once more; it is now remembered as legacy and gets initialize
                    log.warning(
                        "mcpsync: %s stopped after server/discover; starting it again", name
                    )
                    candidates.insert(position + 1, make_transport)
                    last_error = exc
                    continue
                _explain_bringup_failure(exc, chosen)
                raise
            if session.era == "legacy":
                conn.reinitialize = session._reinitialize
            session.phases["total"] = time.perf_counter() - started
            return session
        assert last_error is not None
        raise last_error

    def _initialize(self, era: str | None = None, deadline: float | None = None) -> None:
        args = dict(self._init_args)
        if era is not None:
            args["era"] = era
        auth_obj = self._keep_alive
        auth_before = getattr(auth_obj, "flow_seconds", None)
        paused = None
        if auth_before is not None:  # an interactive authorization does not count against the bound
            paused = lambda: auth_obj.flow_seconds or 0.0  # noqa: E731
        handshake = negotiate(
            self._conn,
            capabilities=self._client_capabilities,
            deadline=deadline,
            paused=paused,
            **args,
        )
        self._allowed = set()
        self._handshake = handshake
        self.era = handshake.era  # type: ignore[assignment]
        self.era_reason = handshake.era_reason
        seconds = handshake.seconds
        if auth_before is not None:  # the auth dance ran inside the first POST: its own phase
            spent = auth_obj.flow_seconds - auth_before
            if spent > 0:
                self.phases["auth"] = spent
                seconds = max(seconds - spent, 0.0)
        self.phases["discover" if handshake.era == "modern" else "initialize"] = seconds
        if handshake.probe_seconds is not None:
            self.phases["probe"] = handshake.probe_seconds
        if handshake.era == "modern":
            self._modern = ModernWire(
                self, handshake, server_key=args.get("server_key"), credential_key=args.get("credential_key"),
                keep_alive=self._keep_alive,
            )  # fmt: skip

    def _reinitialize(self) -> None:
        """The HTTP session expired: bring it up again with the same capabilities."""
        log.warning("mcpsync: session with %s expired; initializing again", self.name)
        self.reinitializations += 1
        self._initialize(era="legacy")
        with self._cache_lock:
            self._tools = None
            self._list_cache.clear()

    def _install_handlers(
        self,
        sampling_handler: Callable[[Any], Any] | None,
        elicitation_handler: Callable[[Any], Any] | None,
        roots: Sequence[Any] | Callable[[], Sequence[Any]] | None,
        on_log: Callable[[Any], None] | None,
    ) -> None:
        """Handlers decide which client capabilities are advertised."""
        caps: dict[str, Any] = {}
        handlers = self._conn.request_handlers
        if roots is not None:
            self._roots = roots
            caps["roots"] = {"listChanged": True}
            handlers["roots/list"] = self._answer_roots
        if sampling_handler is not None:
            caps["sampling"] = {}
            handlers["sampling/createMessage"] = _typed_handler(
                sampling_handler, "CreateMessageRequestParams"
            )
        if elicitation_handler is not None:
            caps["elicitation"] = {"form": {}, "url": {}}
            handlers["elicitation/create"] = _typed_handler(
                elicitation_handler, "ElicitRequestParams"
            )
        self._client_capabilities = caps
        self._on_log = on_log
        self._conn.notification_handler = self._on_notification

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
    def transport(self) -> Transport:
        return self._conn.transport

    @property
    def connection(self) -> Connection:
        """The JSON-RPC layer, for raw requests: ``s.connection.request(method, params)``."""
        return self._conn

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        version = self._handshake.protocol_version if self._handshake else "?"
        return f"<mcpsync.Session {self.name!r} {self.transport.kind} {version} {state}>"

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the session: the transport, the server process, every thread. Idempotent."""
        if self._modern is not None:
            self._modern.close()
        self._conn.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- raw requests ------------------------------------------------------------------

    def _require(self, method: str) -> None:
        if method in self._allowed:  # checked already against this handshake
            return
        path = _NEEDS.get(method)
        if path is None or not self.strict or self._handshake is None:
            return
        node: Any = self._handshake.capabilities
        for key in path:
            if not isinstance(node, dict) or node.get(key) in (None, False):
                raise CapabilityError(
                    f"server {self.name!r} did not advertise the {'.'.join(path)!r} capability needed for {method}; "
                    "nothing was sent (connect with strict=False for lax servers)"
                )
            node = node[key]
        self._allowed.add(method)

    def _submit(
        self,
        method: str,
        params: dict[str, Any] | None,
        convert: Callable[[Any], Any],
        *,
        timeout: float | None = _UNSET,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
    ) -> Future[Any]:
        self._require(method)
        if reset_timeout_on_progress and on_progress is None:
            on_progress = _ignore_progress  # the token that lets progress reset the timer
        if self._modern is not None:
            return self._modern.submit(method, params, convert, timeout=timeout, on_progress=on_progress,
                                       reset_timeout_on_progress=reset_timeout_on_progress, max_timeout=max_timeout)  # fmt: skip
        raw = self._conn.request(
            method,
            params,
            timeout=timeout,
            on_progress=on_progress,
            reset_timeout_on_progress=reset_timeout_on_progress,
            max_timeout=max_timeout,
        )
        return _Derived(raw, convert, self._conn)

    def _call(
        self,
        method: str,
        params: dict[str, Any] | None,
        convert: Callable[[Any], Any],
        *,
        timeout: float | None = _UNSET,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
    ) -> Any:
        """The blocking twin of ``_submit``: the raw result, converted in this thread."""
        self._require(method)
        if reset_timeout_on_progress and on_progress is None:
            on_progress = _ignore_progress  # the token that lets progress reset the timer
        if self._modern is not None:
            return self._modern.call(method, params, convert, timeout=timeout, on_progress=on_progress,
                                     reset_timeout_on_progress=reset_timeout_on_progress, max_timeout=max_timeout)  # fmt: skip
        raw = self._conn.call(
            method,
            params,
            timeout=timeout,
            on_progress=on_progress,
            reset_timeout_on_progress=reset_timeout_on_progress,
            max_timeout=max_timeout,
        )
        return convert(raw)

    def _paginate(
        self, method: str, key: str, model: str, params: dict[str, Any] | None = None
    ) -> Future[Any]:
        """A future of every item over all pages of a paginated list."""
        self._require(method)
        items: list[Any] = []
        result: Future[Any] = Future()

        def fetch(cursor: str | None) -> None:
            page_params = dict(params or {})
            if cursor is not None:
                page_params["cursor"] = cursor
            try:
                if self._modern is not None:  # cache hints, x-mcp-header checks
                    page = self._modern.request_page(method, page_params or None)
                else:
                    page = self._conn.request(method, page_params or None)
            except MCPSyncError as exc:
                _settle(result, exc)
                return
            result._mcpsync_call = getattr(page, "_mcpsync_call", None)  # type: ignore[attr-defined]
            page.add_done_callback(on_page)

        def on_page(page: Future[Any]) -> None:
            if page.cancelled() or result.done():
                return
            error = page.exception()
            if error is not None:
                _settle(result, error)
                return
            data = page.result()
            try:
                found = data.get(key) if isinstance(data, dict) else None
                if not isinstance(found, list):
                    raise ProtocolError(f"{method} result has no {key!r} list")
                adapter = getattr(_types(), model)
                items.extend(adapter.model_validate(item) for item in found)
            except ProtocolError as exc:
                _settle(result, exc)
                return
            except Exception as exc:
                _settle(result, ProtocolError(f"server sent an invalid {model} in {method}: {exc}"))
                return
            cursor = data.get("nextCursor")
            if cursor:
                if len(items) > 1_000_000:
                    _settle(result, ProtocolError(f"{method}: more than a million items; stopping"))
                    return
                fetch(cursor)
            else:
                _settle(result, None, items)

        fetch(None)
        return result

    def _wait(self, future: Future[Any]) -> Any:
        if isinstance(future, ModernFuture):  # may span several requests: each bounds itself
            return future.wait()
        return self._conn.wait(future)

    # -- ping --------------------------------------------------------------------------

    def submit_ping(self, *, timeout: float | None = _UNSET) -> Future[None]:
        return self._submit("ping", None, lambda _: None, timeout=timeout)

    def ping(self, *, timeout: float | None = _UNSET) -> None:
        """Check the server answers."""
        self._call("ping", None, lambda _: None, timeout=timeout)

    # -- tools -------------------------------------------------------------------------

    def submit_list_tools(self) -> Future[list[Tool]]:
        future = self._paginate("tools/list", "tools", "Tool")

        def remember(f: Future[Any]) -> None:
            if not f.cancelled() and f.exception() is None:
                with self._cache_lock:
                    self._tools = list(f.result())
                    self._tools_by_name = {t.name: t for t in self._tools}

        future.add_done_callback(remember)
        if self._tool_filter is not None:
            return _Derived(future, self._visible_tools, self._conn)
        return future

    def _visible_tools(self, tools: Sequence[Tool]) -> list[Tool]:
        keep = self._tool_filter
        return [t for t in tools if keep is None or keep.allows(t.name)]

    def list_tools(self, *, refresh: bool = False) -> list[Tool]:
        """Every tool the server offers (all pages). Cached until the server says the list changed."""
        if self._modern is not None:  # modern: the hint cache decides what is fresh
            if refresh:
                self._modern.forget_cached("tools/list")
        elif not refresh and self._tools is not None:
            return self._visible_tools(self._tools)
        return list(self._wait(self.submit_list_tools()))

    def _tool_call(
        self, name: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any] | None
    ) -> tuple[dict[str, Any], Callable[[Any], Any]]:
        if self._tool_filter is not None and not self._tool_filter.allows(name):
            raise ToolExcluded(
                f"tool {name!r} is hidden by the tool filters of session {self.name!r} "
                f"({self._tool_filter.describe()}); nothing was sent"
            )
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if meta:
            params["_meta"] = dict(meta)
        return params, functools.partial(self._tool_result, self._tools_by_name.get(name))

    def submit_call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = _UNSET,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Future[CallToolResult]:
        """Like ``call_tool``, but returns at once with a ``Future`` (``cancel()`` tells the server)."""
        params, convert = self._tool_call(name, arguments, meta)
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
        timeout: float | None = _UNSET,
        on_progress: Callable[[Progress], None] | None = None,
        reset_timeout_on_progress: bool = False,
        max_timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """Call a tool and return its result (``is_error`` is set when the tool failed).

        ``on_progress(Progress)`` receives the server's progress reports. When the tool
        list was fetched and declares an ``outputSchema``, the structured result is
        checked against it (``ProtocolError`` if it does not match).
        """
        params, convert = self._tool_call(name, arguments, meta)
        return self._call(
            "tools/call",
            params,
            convert,
            timeout=timeout,
            on_progress=on_progress,
            reset_timeout_on_progress=reset_timeout_on_progress,
            max_timeout=max_timeout,
        )

    def _tool_result(self, tool: Tool | None, raw: Any) -> CallToolResult:
        result = _validate("CallToolResult", raw)
        if tool is None or not tool.output_schema or result.is_error:
            return result
        if result.structured_content is None:
            raise ProtocolError(
                f"tool {tool.name!r} declares an outputSchema but returned no structuredContent"
            )
        where = f"structured result of tool {tool.name!r}"
        _check_schema(result.structured_content, tool.output_schema, where)
        return result

    # -- resources ---------------------------------------------------------------------

    def submit_list_resources(self) -> Future[list[Resource]]:
        return self._paginate("resources/list", "resources", "Resource")

    def list_resources(self) -> list[Resource]:
        """Every resource the server lists (all pages)."""
        return list(self._wait(self.submit_list_resources()))

    def submit_list_resource_templates(self) -> Future[list[ResourceTemplate]]:
        return self._paginate("resources/templates/list", "resourceTemplates", "ResourceTemplate")

    def list_resource_templates(self) -> list[ResourceTemplate]:
        """Every resource template (all pages)."""
        return list(self._wait(self.submit_list_resource_templates()))

    def submit_read_resource(
        self, uri: str, *, timeout: float | None = _UNSET
    ) -> Future[ReadResourceResult]:
        return self._submit(
            "resources/read",
            {"uri": str(uri)},
            lambda r: _validate("ReadResourceResult", r),
            timeout=timeout,
        )

    def read_resource(self, uri: str, *, timeout: float | None = _UNSET) -> ReadResourceResult:
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
        first = uri not in self._subscriptions
        self._subscriptions.setdefault(uri, []).append(callback)
        if first:
            try:
                if self._modern is not None:  # subscriptions/listen with this URI in the filter
                    self._require("resources/subscribe")
                    honored = self._modern.listener.update(timeout=self._conn.default_timeout) or {}
                    if uri not in (honored.get("resourceSubscriptions") or ()):
                        raise CapabilityError(
                            f"server {self.name!r} did not agree to send updates for {uri!r}"
                        )
                else:
                    self._wait(self._submit("resources/subscribe", {"uri": uri}, lambda _: None))
            except BaseException:
                self._subscriptions.pop(uri, None)
                raise

    def unsubscribe_resource(self, uri: str) -> None:
        """Stop updates for ``uri``."""
        uri = str(uri)
        if self._subscriptions.pop(uri, None) is not None:
            if self._modern is not None:
                self._modern.listener.update(timeout=self._conn.default_timeout)
            else:
                self._wait(self._submit("resources/unsubscribe", {"uri": uri}, lambda _: None))

    # -- prompts -----------------------------------------------------------------------

    def submit_list_prompts(self) -> Future[list[Prompt]]:
        return self._paginate("prompts/list", "prompts", "Prompt")

    def list_prompts(self) -> list[Prompt]:
        """Every prompt (all pages)."""
        return list(self._wait(self.submit_list_prompts()))

    def submit_get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = _UNSET,
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
        timeout: float | None = _UNSET,
    ) -> GetPromptResult:
        """Render a prompt with its arguments."""
        return self._wait(self.submit_get_prompt(name, arguments, timeout=timeout))

    # -- completion, logging -------------------------------------------------------------

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

    def set_logging_level(self, level: str) -> None:
        """Ask the server to send log messages at ``level`` and above."""
        if level not in _LOG_LEVELS:
            raise ConfigError(
                f"unknown log level {level!r}; expected one of {', '.join(_LOG_LEVELS)}"
            )
        if self._modern is not None:  # 2026-07-28: a _meta field of every request; nothing to send
            self._modern.set_log_level(level)
            return
        self._wait(self._submit("logging/setLevel", {"level": level}, lambda _: None))

    # -- roots (client side) -------------------------------------------------------------

    def set_roots(self, roots: Sequence[Any] | Callable[[], Sequence[Any]]) -> None:
        """Replace the roots offered to the server and tell it they changed."""
        if "roots" not in self._client_capabilities:
            raise CapabilityError("connect with roots=... to offer roots to the server")
        self._roots = roots
        if self._modern is None:  # modern servers ask for roots with each request
            self._conn.notify("notifications/roots/list_changed")

    def _answer_roots(self, params: dict[str, Any]) -> dict[str, Any]:
        roots = self._roots() if callable(self._roots) else self._roots
        out = []
        for root in roots or ():
            if isinstance(root, str):
                root = {"uri": root}
            elif hasattr(root, "model_dump"):
                root = root.model_dump(by_alias=True, exclude_none=True, mode="json")
            out.append(root)
        return {"roots": out}

    # -- notifications -----------------------------------------------------------------

    def on_tools_changed(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` when the server says its tool list changed."""
        self._list_changed["tools"].append(callback)
        self._listen_changed()

    def on_resources_changed(self, callback: Callable[[], None]) -> None:
        self._list_changed["resources"].append(callback)
        self._listen_changed()

    def on_prompts_changed(self, callback: Callable[[], None]) -> None:
        self._list_changed["prompts"].append(callback)
        self._listen_changed()

    def _listen_changed(self) -> None:
        if self._modern is not None:  # modern: change notifications come on subscriptions/listen
            self._modern.listen_for_callbacks(self._conn.default_timeout)

    def on_notification(self, callback: Callable[[str, dict[str, Any]], None]) -> None:
        """Run ``callback(method, params)`` for every notification from the server."""
        self._notification_callbacks.append(callback)

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/message":
            self._on_log_message(params)
        elif method.endswith("/list_changed"):
            kind = method.split("/")[1]
            if kind == "tools":
                with self._cache_lock:
                    self._tools = None
                    self._tools_by_name = {}
            for on_change in self._list_changed.get(kind, ()):
                on_change()
        elif method == "notifications/resources/updated":
            uri = params.get("uri", "")
            for on_update in self._subscriptions.get(uri, ()):
                on_update(uri)
        for callback in self._notification_callbacks:
            callback(method, params)

    def _on_log_message(self, params: dict[str, Any]) -> None:
        if self._on_log is not None:
            self._on_log(_validate("LoggingMessageNotificationParams", params))
            return
        level = _LOG_LEVELS.get(params.get("level", "info"), logging.INFO)
        logger, data, name = self._server_log, params.get("data"), params.get("logger")
        if name:
            name = str(name)[:100]
            child = self._server_loggers.get(name)
            if child is None and len(self._server_loggers) < _MAX_SERVER_LOGGERS:
                child = self._server_loggers[name] = self._server_log.getChild(name)
            if child is not None:
                logger = child
            else:  # over the bound: the session's logger, the name in the text and `extra`
                data = f"[{name}] {data}"
        logger.log(level, "%s", data, extra={"mcp_logger": name})


#: child loggers per session for server-chosen `logger` names (logging never frees a Logger)
_MAX_SERVER_LOGGERS = 16


def _explain_bringup_failure(error: BaseException, transport: Transport) -> None:
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
        tail_of = getattr(transport, "stderr_tail", None)  # stdio only
        tail = tail_of() if callable(tail_of) else ""
        if tail:
            extra.append("--- last stderr lines ---\n" + tail)
    if extra and error.args and isinstance(error.args[0], str):
        error.args = ("\n".join([error.args[0], *extra]), *error.args[1:])


def _ignore_progress(progress: Progress) -> None:
    """The progress callback of a call that wants only ``reset_timeout_on_progress``:
    with it the request carries a progress token, and each report restarts the timer."""


def _settle(future: Future[Any], error: BaseException | None, value: Any = None) -> None:
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass


def _typed_handler(handler: Callable[[Any], Any], model: str) -> Callable[[dict[str, Any]], Any]:
    """Give a user's handler the typed params; it may return a model or a dict."""

    def run(params: dict[str, Any]) -> Any:
        from pydantic import TypeAdapter, ValidationError

        target = getattr(_types(), model)
        try:
            typed = TypeAdapter(target).validate_python(params)
        except ValidationError as exc:
            raise ServerError(-32602, f"invalid params: {exc}") from None
        return handler(typed)

    return run


def _check_schema(instance: Any, schema: dict[str, Any], what: str) -> None:
    import jsonschema  # imported on first use: ~0.15 s

    try:
        jsonschema.validate(instance, schema)
    except jsonschema.ValidationError as exc:
        raise ProtocolError(f"{what} does not match its outputSchema: {exc.message}") from None
    except jsonschema.SchemaError as exc:
        raise ProtocolError(
            f"{what}: the tool's outputSchema is not a valid JSON Schema: {exc.message}"
        ) from None


def _http_candidates(
    url: str, transport: str, deadline: float | None, **options: Any
) -> list[Callable[[], Transport]]:
    """Transports to try for a URL, in order (Streamable HTTP, then legacy SSE).

    ``deadline``: the bring-up's (``time.monotonic()``); the legacy SSE fallback's wait
    for its ``endpoint`` event gets what is left of it, not a whole ``connect_timeout``.
    """

    def streamable() -> Transport:
        from .transports.streamable_http import StreamableHTTPTransport

        return StreamableHTTPTransport(url, **options)

    def legacy() -> Transport:
        from .transports.legacy_sse import LegacySSETransport

        left = dict(options)
        if deadline is not None:
            left["connect_timeout"] = max(deadline - time.monotonic(), 0.001)
        return LegacySSETransport(url, **left)

    if transport in ("streamable-http", "http"):
        return [streamable]
    if transport == "sse":
        return [legacy]
    if transport != "auto":
        raise ConfigError(
            f"transport {transport!r} does not fit a URL; use 'streamable-http' or 'sse'"
        )
    return [streamable, legacy]
