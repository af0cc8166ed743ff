"""The JSON-RPC connection: requests as futures or blocking calls, over any transport.

Owns: request ids and the pending-call table, timeouts (on the shared timer), progress,
cancellation (``notifications/cancelled``), the ordered notification dispatch queue,
the threads that run server-to-client requests, and failing every pending call at once
when the transport ends. It knows nothing of MCP methods beyond progress, cancellation
and ping: the handshake and the typed API sit above it. What the protocol era decides
(``_meta`` entries, another way to cancel, re-initializing an expired session) it asks the
``WireHooks`` it is given at construction (``rpc.hooks``), never attributes set later.

Two ways in, each given the call's options as one ``CallOptions`` value: ``request()``
returns a ``RequestFuture`` (a ``concurrent.futures.Future`` that names its call);
``call()`` blocks and returns the raw result (every blocking Session method): no Future,
the outcome in the call's own slots, and on stdio the waiting caller reads its own reply
(``transports.stdio``).
``request()`` returns at once on every transport: where sending waits for the server
(``features.send_waits``: HTTP) the request goes out on a shared sender thread (``_sending``).

Threads, for one connection to server ``name``:
- the transport's reader(s) call ``_on_message``; a response settles its call right
  there (on stdio usually in the waiting caller's own thread: no thread hop);
- the dispatch queue (``_dispatch``) runs notification callbacks in wire order, on the
  process's shared ``mcpsync-dispatch[shared]`` workers (``_shared.POOL``);
- ``mcpsync-timer[shared]``, one for the process, fails calls whose deadline passed;
- ``mcpsync-send[shared]`` workers (``_shared.SENDS``, at most 64) send futures' requests
  where sending waits for the server (HTTP), so that ``request()`` returns at once;
- ``mcpsync-closed[name]`` runs the ``on_closed`` callbacks once, when the transport died;
- ``mcpsync-handler[name]`` threads run server requests (sampling, elicitation, roots),
  never on the reader, so a slow handler never stops reading.

Order: notifications that arrive before a response (progress, log messages, list_changed,
resource updates, any other) have been through their callbacks before the call or future that
the response completes returns. The dispatch queue counts what was put on it and what it has
finished; a response that finds the two equal (the common case) settles at once, otherwise it
is queued behind those notifications and the dispatch thread settles it. Two exceptions keep
every wait bounded: a call made from inside a notification callback settles at once (waiting
would deadlock the dispatch thread), and a reply still queued at its call's deadline (a
callback slower than the timeout) settles then.

Response ids match by JSON type and value, as JSON-RPC means them: our request ids are
integers, so a reply whose id is ``true``, ``"7"`` or ``7.0`` is not the reply to request 7
(``True == 1`` and ``7.0 == 7`` in Python): it is reported as a ``ProtocolError`` ("response
for unknown request id") and the call goes on waiting for its real reply.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from _thread import get_ident
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from contextvars import copy_context
from typing import Any

from .. import jsonrpc
from ..errors import (
    STDERR_TAIL,
    MCPSyncError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    SessionClosed,
)
from ..telemetry import Instrument
from ..transports.base import TIMEOUT_TAIL_LINES, Message, Transport
from .calls import (
    DEFAULT,
    DEFAULT_OPTIONS,
    CallOptions,
    Default,
    Progress,
    ProgressTable,
    RequestFuture,
    _Call,
    call_of,
    fail_all,
    join_until,
    report_progress,
    warn_alive,
)
from .dispatch import ClosedCallbacks, Dispatcher
from .hooks import WireHooks
from .sending import notify_later, send_failed, send_later
from .served import ServerRequests
from .shared import POOL, SENDS, TIMER

__all__ = [
    "CLOSE_TIMEOUT",
    "CallOptions",
    "DEFAULT",
    "Default",
    "Connection",
    "Progress",
    "RequestHandler",
    "NotificationHandler",
    "WireHooks",
    "join_until",
    "warn_alive",
]

log = logging.getLogger("mcpsync")

#: A server-to-client request handler: params -> result (a dict or a pydantic model).
RequestHandler = Callable[[dict[str, Any]], Any]
#: Called in wire order for every notification that is not progress or cancellation.
NotificationHandler = Callable[[str, dict[str, Any]], None]

#: Seconds ``close()`` waits, in all, for every thread of a session to stop.
CLOSE_TIMEOUT = 3.0


def _with_timeout(options: CallOptions, timeout: float | None) -> CallOptions:
    """``options`` with ``timeout`` (a raw request's ``timeout=``), which they must not name too."""
    if options.timeout is not DEFAULT:
        raise TypeError("give the timeout once: in the CallOptions or as timeout=")
    return CallOptions(
        timeout, options.on_progress, options.reset_timeout_on_progress, options.max_timeout
    )


class Connection:
    """Correlates requests and responses over one transport; thread-safe."""

    def __init__(
        self,
        transport: Transport,
        *,
        name: str = "server",
        default_timeout: float | None = 60.0,
        request_handlers: dict[str, RequestHandler] | None = None,
        notification_handler: NotificationHandler | None = None,
        max_concurrent_handlers: int = 8,
        hooks: WireHooks | None = None,
        instrument: Instrument | None = None,
    ) -> None:
        self.transport = transport
        self.name = name
        self.default_timeout = default_timeout
        self.request_handlers: dict[str, RequestHandler] = dict(request_handlers or {})
        self.notification_handler = notification_handler
        #: what the protocol era decides (``_meta``, cancelling, re-initializing): given
        #: here, configured by the era the handshake chose (``protocol.hooks.EraHooks``)
        self.hooks = hooks if hooks is not None else WireHooks()
        #: the session's telemetry (``mcpsync.telemetry``): a span per message, the trace
        #: context in ``_meta``; None (telemetry off, or no OpenTelemetry): nothing is done
        self.instrument = instrument
        #: garbage on the wire and stray responses, as ProtocolErrors (most recent last)
        self.protocol_errors: list[ProtocolError] = []
        self._ids = itertools.count(1)
        self._pending: dict[Any, _Call] = {}
        #: progress token -> its call (until resolved) or a listener (``ProgressTable.listen``)
        self.progress = ProgressTable()
        self._closed = False
        self._close_error: BaseException | None = None
        self._state_lock = threading.Lock()
        self._dispatcher = Dispatcher(name, self._dispatch)
        self._closed_callbacks = ClosedCallbacks(name)
        self._attached = False  # to the shared timer and dispatch workers (``_shared``)
        self._released: list[threading.Thread] = []  # shared threads to join on close
        self._served = ServerRequests(
            name,
            lambda: self.request_handlers,
            lambda message: self.transport.send(message),
            lambda: self._closed,
            max_concurrent_handlers,
            instrument,
        )
        self._reinit_lock = threading.Lock()
        #: the transport's "read in the calling thread" hook (stdio), set by start()
        self._pump: Callable[[Any, float], None] | None = None
        #: a future's request is sent on a shared sender (``features.send_waits``), set by start()
        self._send_later = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the threads, then the transport (which may deliver at once)."""
        transport = self.transport
        self._pump = transport.wait_for if transport.features.caller_reads else None
        self._send_later = transport.features.send_waits
        with self._state_lock:
            self._attached = True
            TIMER.attach(id(self), self._pending, self._expire)
            POOL.attach()
            SENDS.attach()
        try:
            self.transport.start(self._on_message, self._on_transport_closed, self._on_wire_error)
        except BaseException:
            self._stop_threads(time.monotonic() + CLOSE_TIMEOUT)
            raise

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def close_error(self) -> BaseException | None:
        """Why the connection ended, when it was not closed by the caller."""
        return self._close_error

    def on_closed(self, callback: Callable[[BaseException], None]) -> None:
        """Call ``callback(error)`` once when the connection ends for a reason other than
        ``close()`` (the transport died, the server exited): on a thread of its own, never
        the reader; at once, in this thread, if it ended that way already. ``error`` says
        why (e.g. ``ServerExited``); never called after an explicit ``close()``."""
        self._closed_callbacks.add(callback)

    def close(
        self, *, also: Callable[[], Iterable[threading.Thread]] | None = None
    ) -> list[threading.Thread]:
        """Close the transport, fail what is pending, stop every thread.

        Once the transport is closed, every thread (dispatch, timer, handlers, and the
        threads ``also()`` names: a protocol era's workers and listen streams) is joined
        until one shared deadline, ``CLOSE_TIMEOUT`` s away, not each in turn; returns those
        still alive, after one warning naming them."""
        with self._state_lock:
            already = self._closed
            self._closed = True
        if not already:
            fail_all(self._pending, SessionClosed(f"session with {self.name!r} was closed"))
        try:
            self.transport.close()
        finally:
            alive = self._stop_threads(time.monotonic() + CLOSE_TIMEOUT, also)
        return alive

    # -- requests --------------------------------------------------------------------

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        options: CallOptions = DEFAULT_OPTIONS,
        *,
        timeout: float | None | Default = DEFAULT,
        headers: Mapping[str, str] | None = None,
    ) -> RequestFuture:
        """Send a request; the future resolves to the raw ``result`` dict.

        ``options``: the call's ``CallOptions`` (timeout, progress), as the Session made
        them; ``timeout=`` alone is short for ``CallOptions(timeout)`` (raw requests).
        ``headers``: extra HTTP headers for this request (``Mcp-Param-*``), for transports
        that take them. Returns once the request is handed to the transport: where sending
        waits for the server (HTTP), it is sent on a shared sender thread (see the module
        docstring).
        """
        if timeout is not DEFAULT:
            options = _with_timeout(options, timeout)
        future = RequestFuture()
        # a sender thread sends its own follow-ups (the initialize of a re-initialization)
        # itself: it must never wait for a free sender
        call = self._start(
            method, params, future, options, headers,
            self._send_later and threading.current_thread() not in SENDS.workers,
        )  # fmt: skip
        future.call = call
        future.connection = self
        if options.on_progress is not None:
            rid = call.id
            future.add_done_callback(lambda _: self.progress.pop(rid, None))
        return future

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        options: CallOptions = DEFAULT_OPTIONS,
        *,
        timeout: float | None | Default = DEFAULT,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Send a request and block until its raw ``result`` dict arrives (``request`` + ``wait``).

        The blocking path of every synchronous API: no Future is made; the outcome lands in
        the call's own slots. Same options, errors, timeouts and Ctrl-C handling as
        ``wait(request(...))``.
        """
        if timeout is not DEFAULT:
            options = _with_timeout(options, timeout)
        call = self._start(method, params, None, options, headers)
        try:
            return self._wait_call(call)
        finally:
            if options.on_progress is not None:
                self.progress.pop(call.id, None)

    def _start(
        self,
        method: str,
        params: dict[str, Any] | None,
        future: Future[Any] | None,
        options: CallOptions,
        headers: Mapping[str, str] | None,
        later: bool = False,
    ) -> _Call:
        """Register and send one request; its outcome goes to ``future`` or the call's slots.
        ``later``: hand the sending to a shared sender thread (``_sending``) and return."""
        if self._closed:
            raise self._closed_error()
        rid = next(self._ids)
        call = _Call(rid, method, future)
        if get_ident() == self._dispatcher.ident:
            call.ordered = False  # a callback calls: its reply cannot wait for the dispatcher
        on_progress = options.on_progress
        if self.instrument is not None:
            params, call.finish = self.instrument.request(method, rid, params)
        extra = self.hooks.meta(method)
        if extra is not None or on_progress is not None:
            params = dict(params) if params else {}
            meta = dict(params.get("_meta") or {})
            if extra is not None:
                meta.update(extra)
            if on_progress is not None:
                meta["progressToken"] = rid
                call.on_progress = on_progress
                call.reset = options.reset_timeout_on_progress
                self.progress[rid] = call
            params["_meta"] = meta
        message: Message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = call.params = params
        timeout = options.timeout
        if timeout is DEFAULT:
            timeout = self.default_timeout
        self._pending[rid] = call  # registered before the write: a reply may come at once
        if timeout is not None:
            now = time.monotonic()
            call.timeout = timeout
            call.deadline = now + timeout
            max_timeout = options.max_timeout
            call.hard_deadline = now + (max_timeout if max_timeout is not None else 10 * timeout)
            if call.deadline < TIMER.next_wake:  # (else the timer looks by then anyway)
                TIMER.schedule(call.deadline)
        if later:
            # with telemetry the send runs in the caller's context (OAuth spans, say)
            context = copy_context() if self.instrument is not None else None
            send_later(self, call, message, timeout, headers, context)
            return call
        try:
            if not headers:  # (else Mcp-Param-* headers, for transports that take them: HTTP)
                self.transport.send(message, timeout=timeout)
            else:
                self.transport.send(message, timeout=timeout, headers=headers)
        except BaseException as exc:
            send_failed(self, exc, message, call, timeout, headers)
        return call

    def reinitialize_once(self) -> bool:
        """The transport reported an expired session: re-initialize with the hooks, one
        thread at a time (the others wait, then re-send); False if the hooks cannot."""
        with self._reinit_lock:
            return self.hooks.reinitialize()

    def notify(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> None:
        """Send a notification (no response). ``timeout`` bounds the send (default: the
        transport's own; over HTTP the POST waits for the server's 202)."""
        if self._closed:
            raise self._closed_error()
        message: Message = {"jsonrpc": "2.0", "method": method}
        finish = None
        if self.instrument is not None:
            params, finish = self.instrument.notification(method, params)
        extra = self.hooks.meta(method)
        if extra is not None:
            params = dict(params) if params else {}
            params["_meta"] = {**extra, **(params.get("_meta") or {})}
        if params is not None:
            message["params"] = params
        if finish is None:
            self._send_notification(message, timeout)
            return
        try:
            self._send_notification(message, timeout)
        except BaseException as exc:
            finish(None, exc)
            raise
        finish(None, None)

    def _send_notification(self, message: Message, timeout: float | None) -> None:
        if timeout is None:
            self.transport.send(message)
        else:
            self.transport.send(message, timeout=timeout)

    def wait(self, future: Future[Any]) -> Any:
        """Block until ``future`` resolves; bounded by the call's deadline.

        Where the transport can read in the calling thread (stdio), the caller reads its
        own response: no thread hop. Ctrl-C (KeyboardInterrupt) while waiting cancels
        the request (the server is told) and re-raises.
        """
        if not future.done():  # HTTP JSON replies resolve inside send()
            try:
                self._block(future)
            except KeyboardInterrupt:
                future.cancel()
                raise
        return future.result(timeout=0)

    def _wait_call(self, call: _Call) -> Any:
        """``wait`` for a blocking ``call()``: the outcome is in the call's own slots."""
        if not call.finished:
            try:
                pump = self._pump
                if pump is not None and not self._closed:  # _block's first turn, inlined
                    now = time.monotonic()
                    if call.deadline > now:
                        pump(call, min(call.deadline, now + 1.0))
                if not call.finished:
                    self._block(call)  # the deadline, a parked reply, more turns
            except KeyboardInterrupt:
                if self._pending.pop(call.id, None) is not None:
                    error = RequestCancelled(f"{call.method} was cancelled by the client (Ctrl-C)")
                    call.settle(None, error)
                    self._send_cancelled(call, "cancelled by the client")
                raise
        if call.error is not None:
            raise call.error
        return call.value

    def _block(self, target: Any) -> None:
        """Wait until ``target`` (a Future, or a blocking call's ``_Call``) is done.

        Bounded by its call's deadline (a future we did not create: by the default
        timeout); wakes at least once a second to look at that deadline again.
        """
        pump = self._pump
        started = time.monotonic()
        while not target.done():
            # A modern future moves on to a new request each round: look its call up anew.
            call = target if type(target) is _Call else call_of(target)
            now = time.monotonic()
            if call is not None:
                remaining = call.deadline - now
                if remaining <= 0:  # the timer thread did not get to it yet
                    if self._expire(call):
                        continue
                    parked = call.parked
                    if parked is not None:  # its reply waits behind a slow callback: bounded
                        call.settle_reply(parked)
                        continue
                    remaining = 0.01
            else:
                remaining = (self.default_timeout or 60.0) - (now - started)
                if remaining <= 0:
                    raise RequestTimeout(
                        f"no result from {self.name!r} within {self.default_timeout} s"
                    )
            step = min(remaining, 1.0)
            if pump is not None and not self._closed:
                pump(target, now + step)  # read the transport in this thread
            elif call is target:
                if call.event is None:
                    call.event = threading.Event()  # then look at done() again: _Call.settle
                    continue
                call.event.wait(step)
            else:
                futures_wait((target,), timeout=step)

    def _on_cancelled(self, call: _Call) -> None:
        if call.finish is not None:
            call.end_span(None, RequestCancelled(f"{call.method} was cancelled by the client"))
        if self._pending.pop(call.id, None) is not None:
            self._send_cancelled(call, "cancelled by the client")

    # -- incoming --------------------------------------------------------------------

    def _on_message(self, message: Message) -> None:
        if "method" not in message:
            rid = message.get("id")
            # Ids match by type and value: ours are ints, and `True == 1`, `1.0 == 1` as keys.
            call = self._pending.pop(rid, None) if type(rid) is int else None
            if call is None:
                if "result" in message or "error" in message:
                    self._on_wire_error(
                        ProtocolError(f"response for unknown request id {rid!r} from {self.name!r}")
                    )
                else:
                    self._on_wire_error(
                        ProtocolError(
                            f"invalid message from {self.name!r}: {jsonrpc.excerpt(str(message))}"
                        )
                    )
                return
            if call.ordered and (call.on_progress is not None or not self._dispatcher.idle()):
                # Notifications before this reply are still queued or running: settle behind
                # them, so the caller returns after their callbacks (and progress reports).
                call.parked = message
                self._dispatcher.put((call, message))
            elif "result" in message and "error" not in message:
                call.settle(message["result"])  # the hot path
            else:
                call.settle_reply(message)
        elif "id" in message:
            self._served.on_request(message)
        else:
            self._dispatcher.put(message)

    def _on_wire_error(self, error: BaseException) -> None:
        if isinstance(error, ProtocolError):
            self.protocol_errors.append(error)
            del self.protocol_errors[:-50]
        # A transport that knows a reply can no longer arrive (HTTP: the stream broke and
        # could not be resumed) names the request: fail it now rather than at its timeout.
        call = self._pending.get(getattr(error, "request_id", None))
        if call is not None:
            self._retire(call, error)
            return
        log.warning("mcpsync: %s", error)

    def _on_transport_closed(self, error: BaseException | None) -> None:
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._close_error = error
        error = error or SessionClosed(f"connection to {self.name!r} was closed")
        fail_all(self._pending, error)
        # What is queued still runs; the shared threads end by themselves if this was
        # the last connection (close() still joins them).
        self._dispatcher.stop()
        self._released += self._detach()
        self._closed_callbacks.fire(error)

    def _closed_error(self) -> BaseException:
        cause = self._close_error
        if isinstance(cause, MCPSyncError):
            return cause
        error = SessionClosed(f"session with {self.name!r} is closed")
        error.__cause__ = cause
        return error

    # -- notifications (one ordered thread) ---------------------------------------------

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, tuple):  # a response that waited for earlier notifications
            message[0].settle_reply(message[1])
            self.transport.wakeup()  # the caller may be reading the transport itself
            return
        method = message.get("method")
        params = message.get("params") or {}
        try:
            if method == "notifications/progress":
                report_progress(self.progress, params)
            elif method == "notifications/cancelled":
                self._served.cancelled.add(params.get("requestId"))
            elif self.notification_handler is not None:
                self.notification_handler(method, params)
        except Exception:
            log.exception("mcpsync: notification handler failed for %s from %s", method, self.name)

    # -- timeouts and cancellation ------------------------------------------------------

    def _expire(self, call: _Call) -> bool:
        """Fail a call whose deadline passed (and tell the server); False if it left already."""
        if self._pending.pop(call.id, None) is None:
            return False
        message = f"{call.method} to {self.name!r}: no response within {call.timeout:g} s"
        tail = self.transport.stderr_tail()  # stdio: what the server said while it was stuck
        if tail:
            lines = tail.splitlines()[-TIMEOUT_TAIL_LINES:]
            message += f"\n{STDERR_TAIL}\n" + "\n".join(lines)
        error = RequestTimeout(message)
        # Whoever takes a call out of the table tells the server: here the timeout, or a
        # future.cancel() that came in between (its own _on_cancelled finds the table empty).
        settled = call.settle(None, error)
        if self._pump is not None:
            # A caller may be reading the pipe for this call's future (stdio): wake it, so
            # the future's waiter sees the timeout now, not when its own read times out.
            self.transport.wakeup()
        self._send_cancelled(call, "timed out" if settled else "cancelled by the client")
        return True

    def _retire(self, call: _Call, error: BaseException) -> None:
        if self._pending.pop(call.id, None) is not None:
            call.settle(None, error)

    def _send_cancelled(self, call: _Call, reason: str) -> None:
        if call.method == "initialize":  # the spec forbids cancelling initialize
            return
        if self.hooks.cancel(call.id):
            return
        self.transport.abort_request(call.id)  # stop reading a reply nobody waits for (SSE)
        if call.params is not None and "task" in call.params:
            return  # task-augmented: the spec says tasks/cancel MUST be used (the tasks layer)
        params = {"requestId": call.id, "reason": reason}
        if self._send_later:
            # Sending waits for the server (HTTP: the POST waits for its 202): a caller whose
            # call timed out or was cancelled must not wait for that; a sender thread tells
            # the server, within its own short bound (``_sending.NOTICE_TIMEOUT``).
            notify_later(self, "notifications/cancelled", params)
            return
        try:
            self.notify("notifications/cancelled", params)
        except MCPSyncError:
            pass

    def _detach(self) -> list[threading.Thread]:
        """Leave the shared timer and workers (once); their threads if this was the last."""
        with self._state_lock:
            if not self._attached:
                return []
            self._attached = False
        timer = TIMER.detach(id(self))
        return [*POOL.detach(), *SENDS.detach(), *([timer] if timer is not None else [])]

    def _stop_threads(
        self, deadline: float, also: Callable[[], Iterable[threading.Thread]] | None = None
    ) -> list[threading.Thread]:
        """Let the dispatch queue finish, leave the shared threads (joining them if this
        was the last connection), and join the handler threads (and ``also()``), all until
        ``deadline``; the ones still alive, after a warning naming them."""
        self._dispatcher.stop()
        started = time.monotonic()
        stuck = self._dispatcher.join(deadline)  # the callbacks already queued run first
        self._released += self._detach()
        threads = [*self._released, *list(self._served.threads)]
        if self._closed_callbacks.thread is not None:
            threads.append(self._closed_callbacks.thread)
        if also is not None:
            threads += also()
        alive = join_until(threads, deadline)
        if stuck is not None and stuck not in alive:
            alive.append(stuck)
        warn_alive(self.name, alive, time.monotonic() - started)
        return alive
