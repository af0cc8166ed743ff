"""The stateless 2026-07-28 wire ("modern" era): ``ModernEra``.

Owns: the request driver every modern call goes through (multi round-trip requests
with ``input_required``, one retry after ``UnsupportedProtocolVersionError`` -32022,
one re-list and retry after ``HeaderMismatch`` -32020, tasks via ``tasks.Tasks``), list
pages with cache hints (``cache.HintCache``) and ``x-mcp-header`` validation, the
notification filter (streams already left), ``subscriptions/listen`` via
``listen.Listener``, and the per-request log level. Choosing the era is
``protocol.choose``; the wire vocabulary is ``envelope``.

It is given what it needs (the connection, the agreement, the Session's ``Interest``,
a hint cache and its keys, a callback that lists the tools again); never the Session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from typing import Any

from ... import jsonrpc
from ...errors import (
    CapabilityError,
    HandshakeError,
    MCPSyncError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    ServerError,
)
from ...rpc.calls import CallFuture, Default, call_of
from ...rpc.connection import Connection
from ...transports.http.headers import header_declarations, param_headers
from .. import UNSET, Agreement, CallOptions, Convert, Era, Interest, settle
from ..hooks import EraHooks
from .cache import HINT_CACHE, HintCache
from .envelope import (
    CACHEABLE_METHODS,
    DEFAULT_MAX_ROUNDS,
    MRTR_METHODS,
    SUBSCRIPTION_ID_KEY,
    TASK_METHODS,
    InputRequiredRoundsExceeded,
    InvalidToolHeaders,
    dict_at,
    dump,
    newest_mutual_modern,
    result_type,
    supported_of,
)
from .listen import Listener
from .tasks import Tasks

__all__ = ["ModernEra", "ModernFuture", "supported_of", "newest_mutual_modern"]

log = logging.getLogger("mcpsync")


class ModernFuture(CallFuture):
    """A modern call in flight, possibly over several requests (MRTR rounds, a task).

    ``cancel()`` cancels the request in flight (the server is told) and, for a task,
    sends ``tasks/cancel``. ``task_id`` is set once the server turned the call into a task.
    """

    def __init__(self, wire: ModernEra, method: str) -> None:
        super().__init__()
        self.method = method
        self.task_id: str | None = None
        self._wire = wire
        self._current: Future[Any] | None = None
        self._cancel_requested = threading.Event()

    def _set_task_id(self, task_id: str) -> None:
        self.task_id = task_id

    def cancel(self) -> bool:
        if not super().cancel():  # first: what follows must not settle it another way
            return False
        self._cancel_requested.set()
        current = self._current
        if current is not None:
            current.cancel()  # the server is told (notifications/cancelled, or the stream closes)
        if self.task_id is not None:
            self._wire.tasks.cancel(self.task_id)
        return True

    def wait(self) -> Any:
        """Block until done; Ctrl-C cancels the call and re-raises."""
        try:
            # done first, then the outcome: a RequestTimeout outcome is a TimeoutError too,
            # which result(timeout=) also raises for "not yet"
            while not futures_wait((self,), timeout=1.0).done:
                if self._wire.closed:
                    raise self._wire._conn._closed_error() from None
            return self.result()
        except KeyboardInterrupt:
            self.cancel()
            raise


class ModernEra(Era):
    """Everything a session does in the modern era; one per session."""

    name = "modern"
    bringup_phase = "discover"

    def __init__(
        self,
        conn: Connection,
        agreement: Agreement,
        interest: Interest,
        *,
        relist_tools: Callable[[], Any],
        cache: HintCache = HINT_CACHE,
        server_key: str | None = None,
        credential_key: str | None = None,
        keep_alive: Any = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> None:
        self._conn = conn
        self.server = conn.name  # the session's name, for logs and errors
        hooks = EraHooks.of(conn)
        envelope = hooks.envelope
        if envelope is None:
            raise HandshakeError("modern bring-up did not install the request envelope")
        self.envelope = envelope
        self.agreement = agreement
        self._interest = interest
        self._relist_tools = relist_tools  # the Session's list_tools(refresh=True)
        self.cache = cache
        self.server_key = server_key
        self.credential_key = credential_key
        self._keep_alive = keep_alive  # e.g. the auth object the credential key names
        self.max_rounds = max_rounds
        #: True where per-request headers reach the wire (Streamable HTTP): tools with
        #: invalid x-mcp-header declarations are then dropped, and cancelling closes the stream
        self.http = conn.transport.features.per_request_headers
        self._tool_headers: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {}
        self._invalid_tools: dict[str, str] = {}
        self._workers: set[threading.Thread] = set()
        self._workers_lock = threading.Lock()
        self._closing = threading.Event()
        self.listener = Listener(conn, self.server, self.wanted_filter, self._closing)
        self.tasks = Tasks(conn, self.server, self._send, self._fulfil, self._closing)
        if self.http:
            # Streamable HTTP at 2026-07-28: closing the response stream is the cancellation,
            # and no client notification is defined; never POST notifications/cancelled.
            hooks.abort = conn.transport.abort_request

    @property
    def closed(self) -> bool:
        return self._conn.closed

    @property
    def version(self) -> str:
        return self.envelope.version

    def stop(self) -> None:
        """Stop listen streams, task polls and retries (``threads()`` are joined by the
        connection's close, within its one deadline)."""
        self._closing.set()
        self.listener.stop()

    def threads(self) -> list[threading.Thread]:
        with self._workers_lock:
            workers = list(self._workers)
        return [*workers, *self.listener.threads()]

    # -- sending ------------------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any] | None, opts: CallOptions) -> Future[Any]:
        """Send one request; its raw result as a future."""
        if method == "ping":  # no ping in 2026-07-28: discover is the always-implemented method
            method, params = "server/discover", None
        return self._conn.request(method, params, opts, headers=self._extra_headers(method, params))

    def _send_and_wait(self, method: str, params: dict[str, Any] | None, opts: CallOptions) -> Any:
        """Send one request and block for its raw result (no Future: ``Connection.call``)."""
        if method == "ping":
            method, params = "server/discover", None
        return self._conn.call(method, params, opts, headers=self._extra_headers(method, params))

    def _extra_headers(self, method: str, params: dict[str, Any] | None) -> dict[str, str]:
        """Per-request HTTP headers the transport cannot know: ``Mcp-Param-*`` of the tool's
        ``x-mcp-header`` declarations (``Mcp-Method``/``Mcp-Name``, the taskId of the tasks
        methods included, are the transport's: ``transports.http.headers.mcp_name``)."""
        if not self.http or not params:
            return {}
        if method != "tools/call":
            return {}
        decls = self._tool_headers.get(params.get("name"))  # type: ignore[arg-type]
        return param_headers(decls, params.get("arguments") or {}) if decls else {}

    def _check_callable(self, method: str, params: dict[str, Any] | None) -> None:
        if method == "tools/call" and params and params.get("name") in self._invalid_tools:
            name = params["name"]
            raise InvalidToolHeaders(
                f"tool {name!r} of {self.server!r} is not called: {self._invalid_tools[name]} (nothing was sent)"
            )

    # -- blocking and future calls --------------------------------------------------------

    def call(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> Any:
        """A blocking modern call: every round runs in the calling thread."""
        self._check_callable(method, params)
        return convert(self._drive(method, params, opts, None, None))

    def submit(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> ModernFuture:
        """A modern call as a future. A complete first answer resolves it with no extra
        thread; further rounds (input, tasks, retries) run on a ``mcpsync-modern`` thread."""
        self._check_callable(method, params)
        handle = ModernFuture(self, method)
        first = self._send(method, params, opts)
        handle._current = first
        handle.call = call_of(first)

        def on_first(raw: Future[Any]) -> None:
            if handle.done():
                return
            if raw.cancelled():
                settle(handle, RequestCancelled(f"{method} was cancelled"))
                return
            error = raw.exception()
            if error is None and result_type(raw.result()) == "complete":
                try:
                    settle(handle, None, convert(raw.result()))
                except BaseException as exc:  # noqa: BLE001 - delivered through the future
                    settle(handle, exc)
                return
            if error is not None and not (
                isinstance(error, ServerError)
                and error.code in (jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, jsonrpc.HEADER_MISMATCH)
            ):
                settle(handle, error)
                return
            self._spawn(method, params, opts, handle, raw, convert)

        first.add_done_callback(on_first)
        return handle

    def wait(self, future: Future[Any]) -> Any:
        if isinstance(future, ModernFuture):  # may span several requests: each bounds itself
            return future.wait()
        return self._conn.wait(future)

    def _spawn(
        self,
        method: str,
        params: dict[str, Any] | None,
        opts: CallOptions,
        handle: ModernFuture,
        first: Future[Any],
        convert: Convert,
    ) -> None:
        def run() -> None:
            try:
                value = convert(self._drive(method, params, opts, handle, first))
            except BaseException as exc:  # noqa: BLE001 - delivered through the future
                settle(handle, exc)
            else:
                settle(handle, None, value)
            finally:
                with self._workers_lock:
                    self._workers.discard(threading.current_thread())

        # daemon: a round stuck in a handler must not keep the interpreter alive; close()
        # joins it within the session's one deadline and names it if it stays
        thread = threading.Thread(target=run, name=f"mcpsync-modern[{self.server}]", daemon=True)
        with self._workers_lock:
            self._workers.add(thread)
        thread.start()

    def _drive(
        self,
        method: str,
        params: dict[str, Any] | None,
        opts: CallOptions,
        handle: ModernFuture | None,
        first: Future[Any] | None,
    ) -> Any:
        """Send until the answer is complete: MRTR rounds, -32022 and -32020 retries, tasks.
        Each is retried a bounded number of times, and all of it (up to a task's first
        answer) within the call's one timeout: each request gets what is left of it."""
        base = dict(params) if params is not None else None
        attempt = base
        version_retried = header_retried = False
        rounds = 0
        idle = 0.05
        limit = self._limit(opts)
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            if handle is not None and handle._cancel_requested.is_set():
                raise RequestCancelled(f"{method} was cancelled")
            blocking = handle is None and first is None  # a blocking call: no Future at all
            future = None
            left = opts if first is not None else self._left(method, opts, limit, deadline)
            if not blocking:
                future = first if first is not None else self._send(method, attempt, left)
            first = None
            if handle is not None:
                handle._current = future
            try:
                if future is None:
                    result = self._send_and_wait(method, attempt, left)
                else:
                    result = self._conn.wait(future)
            except RequestTimeout:
                if left is opts:  # the call's own timeout, as given
                    raise
                raise self._timed_out(method, limit or 0.0) from None
            except ServerError as exc:
                if exc.code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION and not version_retried:
                    version_retried = True
                    if self._adopt_version(exc.data):
                        continue
                if (
                    exc.code == jsonrpc.HEADER_MISMATCH
                    and method == "tools/call"
                    and not header_retried
                ):
                    header_retried = True
                    log.info(
                        "mcpsync: %s answered header mismatch (-32020) to tools/call; listing tools again",
                        self.server,
                    )
                    self._relist_tools()
                    self._check_callable(method, attempt)
                    continue
                raise
            kind = result_type(result)
            if kind == "complete":
                return result
            if kind == "input_required" and method in MRTR_METHODS:
                rounds += 1
                if rounds > self.max_rounds:
                    raise InputRequiredRoundsExceeded(
                        f"{method} to {self.server!r}: the server still asked for input after {self.max_rounds} rounds"
                    )
                requests = result.get("inputRequests")
                attempt = {
                    k: v
                    for k, v in (base or {}).items()
                    if k not in ("inputResponses", "requestState")
                }
                if requests:
                    attempt["inputResponses"] = self._fulfil(requests)
                    idle = 0.05
                else:  # state only: back off a little before asking again
                    pause = idle if deadline is None else min(idle, deadline - time.monotonic())
                    if handle is not None:
                        if handle._cancel_requested.wait(max(pause, 0.0)):
                            raise RequestCancelled(f"{method} was cancelled")
                    elif pause > 0:
                        time.sleep(pause)
                    idle = min(idle * 2, 1.0)
                if "requestState" in result:
                    attempt["requestState"] = result["requestState"]  # byte-exact, never inspected
                continue
            if kind == "task" and method in TASK_METHODS and self.envelope.tasks:
                return self.tasks.run(
                    result,
                    opts,
                    handle._cancel_requested if handle is not None else None,
                    handle._set_task_id if handle is not None else None,
                )
            raise ProtocolError(
                f"{self.server!r} answered {method} with resultType {kind!r}, which this client does not accept"
            )

    def _limit(self, opts: CallOptions) -> float | None:
        """The whole call's bound (s): its timeout, or its ``max_timeout`` with progress resets."""
        timeout = self._conn.default_timeout if opts.timeout is UNSET else opts.timeout
        if timeout is None or not isinstance(timeout, (int, float)):
            return None
        if opts.reset_timeout_on_progress:
            return opts.max_timeout if opts.max_timeout is not None else 10 * timeout
        return float(timeout)

    def _left(self, method: str, opts: CallOptions, limit: Any, deadline: Any) -> CallOptions:
        """``opts`` for the call's next request: the time left of its one bound."""
        if deadline is None:
            return opts
        left = deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out(method, limit)
        if opts.reset_timeout_on_progress:
            return CallOptions(opts.timeout, opts.on_progress, True, left)
        return CallOptions(min(left, limit), opts.on_progress)

    def _timed_out(self, method: str, limit: float) -> RequestTimeout:
        return RequestTimeout(f"{method} to {self.server!r}: no complete answer within "
                              f"{limit:g} s (input rounds and retries included)")  # fmt: skip

    def _adopt_version(self, data: Any) -> bool:
        supported = supported_of(data) or []
        mutual = newest_mutual_modern(supported, self.envelope.version)
        if mutual is None:
            return False
        if mutual != self.envelope.version:
            log.info(
                "mcpsync: %s does not support %s; switching to %s",
                self.server,
                self.envelope.version,
                mutual,
            )
            self.envelope.version = mutual
            self._conn.transport.set_protocol_version(mutual)
        return True

    def _fulfil(self, requests: Any) -> dict[str, Any]:
        """Answer ``inputRequests`` with the session's handlers (the legacy reverse calls)."""
        if not isinstance(requests, dict):
            raise ProtocolError(f"{self.server!r} sent inputRequests that are not an object")
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            handler = self._conn.request_handlers.get(method) if isinstance(method, str) else None
            if handler is None:
                raise CapabilityError(
                    f"{self.server!r} asked for {method!r} input, which this client did not declare "
                    "(connect with the matching handler)"
                )
            params = request.get("params") if isinstance(request.get("params"), dict) else {}
            result = dump(handler(params))
            responses[key] = result if result is not None else {}
        return responses

    # -- lists: cache hints and x-mcp-header validation ----------------------------------------

    def page(
        self, method: str, params: dict[str, Any] | None, timeout: float | None | Default = UNSET
    ) -> Future[Any]:
        """One page of a list, from the hint cache while fresh, else from the server."""
        cached = self.cache.get(self.server_key, self.credential_key, method, params)
        out = CallFuture()  # a cached page: no request bounds it
        if cached is not None:
            try:
                out.set_result(self._postprocess(method, cached))
            except BaseException as exc:  # noqa: BLE001
                out.set_exception(exc)
            return out
        raw = self._send(method, params, CallOptions(timeout))
        out.call = call_of(raw)

        def done(f: Future[Any]) -> None:
            if f.cancelled():
                out.cancel()
                return
            error = f.exception()
            if error is not None:
                if params and "cursor" in params:  # a cursor gone bad: the cached pages are suspect
                    self.cache.invalidate(self.server_key, [method])
                settle(out, error)
                return
            result = f.result()
            kind = result_type(result)
            if kind != "complete":
                settle(
                    out,
                    ProtocolError(f"{self.server!r} answered {method} with resultType {kind!r}"),
                )
                return
            if method in CACHEABLE_METHODS:
                self.cache.put(
                    self.server_key,
                    self.credential_key,
                    method,
                    params,
                    result,
                    keep_alive=self._keep_alive,
                )
            try:
                settle(out, None, self._postprocess(method, result))
            except BaseException as exc:  # noqa: BLE001
                settle(out, exc)

        raw.add_done_callback(done)
        return out

    def _postprocess(self, method: str, result: Any) -> Any:
        if (
            method != "tools/list"
            or not isinstance(result, dict)
            or not isinstance(result.get("tools"), list)
        ):
            return result
        kept = []
        for tool in result["tools"]:
            name = tool.get("name") if isinstance(tool, dict) else None
            try:
                decls = header_declarations(
                    tool.get("inputSchema") if isinstance(tool, dict) else None
                )
            except InvalidToolHeaders as exc:
                if self.http:
                    if name not in self._invalid_tools:
                        log.warning(
                            "mcpsync: %s: tool %r is not offered: %s", self.server, name, exc
                        )
                    self._invalid_tools[name] = str(exc)  # type: ignore[index]
                    continue
                decls = {}  # stdio: x-mcp-header means nothing
            self._invalid_tools.pop(name, None)  # type: ignore[arg-type]
            self._tool_headers[name] = decls  # type: ignore[index]
            kept.append(tool)
        if len(kept) == len(result["tools"]):
            return result
        return {**result, "tools": kept}

    def invalidate(self, *methods: str) -> None:
        """Drop this server's cached pages of ``methods`` (an explicit refresh)."""
        self.cache.invalidate(self.server_key, list(methods))

    # -- notifications, subscriptions, logging --------------------------------------------

    def on_notification(self, method: str, params: dict[str, Any]) -> bool:
        meta = dict_at(params, "_meta")
        subscription = meta.get(SUBSCRIPTION_ID_KEY)
        if method == "notifications/subscriptions/acknowledged":
            self.listener.on_acknowledged(subscription, params)
        elif subscription is not None and not self.listener.knows(subscription):
            return False  # from a stream we already left
        if method.endswith("/list_changed"):
            kind = method.split("/")[1]
            if kind == "resources":
                self.cache.invalidate(
                    self.server_key, ["resources/list", "resources/templates/list"]
                )
            else:
                self.cache.invalidate(self.server_key, [f"{kind}/list"])
        return True

    def watch(self, timeout: float | None) -> None:
        """(Re)open the listen stream after a callback was added; returns once the server
        acknowledged it, so changes made afterwards are reported. Failures are logged:
        the callbacks then never run, but nothing else breaks."""
        try:
            self.listener.update(wait=True, timeout=timeout)
        except MCPSyncError as exc:
            log.warning(
                "mcpsync: %s: no change notifications (subscriptions/listen failed: %s)",
                self.server,
                exc,
            )

    def subscribe(self, uri: str, timeout: float | None) -> None:
        """subscriptions/listen with this URI in the filter."""
        honored = self.listener.update(timeout=timeout) or {}
        if uri not in (honored.get("resourceSubscriptions") or ()):
            raise CapabilityError(
                f"server {self.server!r} did not agree to send updates for {uri!r}"
            )

    def unsubscribe(self, uri: str, timeout: float | None) -> None:
        self.listener.update(timeout=timeout)

    def set_log_level(self, level: str | None) -> None:  # type: ignore[override]
        """2026-07-28: a ``_meta`` field of every request; nothing to send."""
        self.envelope.log_level = level

    def wanted_filter(self) -> dict[str, Any]:
        """The ``subscriptions/listen`` filter the Session's Interest asks for."""
        keys = {"tools": "toolsListChanged", "prompts": "promptsListChanged",
                "resources": "resourcesListChanged"}  # fmt: skip
        wanted: dict[str, Any] = {keys[kind]: True for kind in self._interest.kinds()}
        uris = self._interest.uris()
        if uris:
            wanted["resourceSubscriptions"] = uris
        return wanted
