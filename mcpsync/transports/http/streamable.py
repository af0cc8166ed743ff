"""Streamable HTTP transport (MCP 2025-03-26 to 2025-11-25, and the 2026-07-28 wire).

Owns, with the two parts it holds (below): the HTTP side of one MCP endpoint: one POST per
message, the JSON or SSE reply, ``Mcp-Session-Id`` / ``MCP-Protocol-Version`` (and, on the
2026-07-28 wire, ``Mcp-Method`` / ``Mcp-Name``) headers, the GET back-channel, resumption
of broken SSE streams with ``Last-Event-ID``, DELETE on close. Translating every HTTP
failure into the ``mcpsync.errors`` types (``client``), the ``Mcp-*`` rules (``headers``)
and SSE parsing (``sse``) are shared with the legacy transport.

Composition: ``StreamableHTTPTransport`` is an ``HTTPTransport`` (the base it shares with
the legacy transport) that holds two parts, each built in its ``__init__`` with exactly
what it needs: ``session.SessionLifecycle`` (``_lifecycle``: the session id, the protocol
version, the headers per request kind, expiry and re-initialization, DELETE) and
``streams.BackChannel`` (``_back_channel``: the GET stream and every GET). This module
owns the POSTs, their replies and reply streams (``_streams``, under ``_streams_lock``).
On the hot path (a POST per call) ``send`` takes the lifecycle's lock once to read the
headers to send with, as before the split.

Threads and the hot path:
- ``send()`` POSTs in the calling thread. A JSON reply is read and delivered to
  ``on_message`` in that same thread before ``send()`` returns (no thread hop).
- An SSE reply is handed to a reader thread ``mcpsync-http-sse[name]``; it delivers each
  message, and when the stream ends before the response to its request arrived it
  reconnects with GET + ``Last-Event-ID`` after the server's ``retry`` delay (bounded).
  If that fails, ``on_error`` gets a ``ResponseLost`` naming the request id.
- After ``set_protocol_version()`` (i.e. after ``notifications/initialized``), the GET
  back-channel runs on ``mcpsync-http-get[name]``; a 405 means the server offers none.

Speed: ``requests.Session.post`` costs far more than the HTTP exchange itself. When this
transport owns its ``requests.Session``, has no ``auth`` (or mcpsync's own, a
``RequestAuth``), no proxy and no .netrc entry, it sends over a small keep-alive pool of
``http.client`` connections set up with the TLS settings requests would use
(``fastpool``), skipping the per-call ``Request``/``Response`` machinery; cookies a server
sets are kept in the session's jar and sent on it too. Otherwise (a caller's session, an
``AuthBase``, a proxy) every request goes through ``requests.Session.request``, so
adapters, proxies and response hooks all apply.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests

from ...errors import (
    ConnectError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
    SessionExpired,
    TransportError,
)
from ...jsonrpc import decode, encode
from ...runtime.lifecycle import forked
from ..base import Features, Message, OnClose, OnError, OnMessage
from .client import (
    ACCEPT_SSE,
    HTTPTransport,
    Target,
    discard,
    read_error_body,
    read_limited,
    safe_url,
    shutdown_response,
    status_error,
    translate_error,
)
from .headers import encode_header_value, mcp_name
from .session import MAX_RESENDS, Leads, SessionKeptExpiring, SessionLifecycle
from .sse import EventTooLarge, SSEParser, _names_method, read_events, response_id
from .streams import BackChannel, _retry_delay, _Stream

__all__ = ["StreamableHTTPTransport", "ResponseLost"]

log = logging.getLogger("mcpsync.http")


class ResponseLost(TransportError):
    """The SSE stream that was to carry the response to ``request_id`` ended for good.

    Reported through ``on_error`` (not raised): the request was sent, but its response
    can no longer arrive (stream broken and not resumable, or resumption failed).
    """

    def __init__(self, message: str, *, request_id: Any) -> None:
        self.request_id = request_id
        super().__init__(message)


class StreamableHTTPTransport(HTTPTransport):
    """MCP over Streamable HTTP: one POST per message; JSON or SSE replies; GET back-channel.

    Holds its session lifecycle (``session.SessionLifecycle``) and its GET back-channel
    (``streams.BackChannel``) as parts; it owns the POSTs and their reply streams.
    """

    kind = "streamable-http"
    #: ``send(headers=)`` reaches the wire; closing a reply stream cancels (2026-07-28);
    #: a POST waits for its reply's head (a future's request goes on a sender thread)
    #: the server may forget the session: ``reinitialize_session`` (declared by
    #: ``Transport``) lets a request whose re-send after a re-initialization meets another
    #: expiry lead the next one itself (``SessionLifecycle.expired_again``)
    features = Features(per_request_headers=True, send_waits=True, session_expiry=True)

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        http_session: requests.Session | None = None,
        auth: requests.auth.AuthBase | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 10.0,
        verify: bool | str | None = None,
        cert: str | tuple[str, str] | None = None,
        max_event_bytes: int = 256 * 1024 * 1024,
        name: str | None = None,
        max_reconnects: int = 3,
        sse_read_timeout: float | None = 300.0,
        back_channel: bool = True,
        back_channel_wait: float = 5.0,
    ) -> None:
        """``timeout``: read timeout for replies when ``send`` gives none (None: no limit);
        ``verify``/``cert``: as in requests (None: the session's setting);
        ``max_event_bytes``: largest JSON reply or SSE event accepted;
        ``max_reconnects``: consecutive failed reconnections before a stream is given up;
        ``sse_read_timeout``: idle limit on the GET back-channel before it reconnects quietly;
        ``back_channel``: open the GET stream after initialization; ``set_protocol_version``
        (bring-up, after ``notifications/initialized``) waits up to ``back_channel_wait``
        seconds for the server to answer it, so that requests a server sends over it right
        after initialization (elicitation, roots) are not lost.
        """
        super().__init__(
            url,
            headers=headers,
            http_session=http_session,
            auth=auth,
            timeout=timeout,
            connect_timeout=connect_timeout,
            verify=verify,
            cert=cert,
            max_event_bytes=max_event_bytes,
            name=name,
            sse_read_timeout=sse_read_timeout,
        )
        self.max_reconnects = max_reconnects
        self.back_channel = back_channel
        self.back_channel_wait = back_channel_wait
        self._lifecycle = SessionLifecycle(
            self._http, describe=self.describe, closing=self._closing_flag
        )
        self._back_channel = BackChannel(
            self._http,
            name=self.name,
            max_event_bytes=max_event_bytes,
            read_timeout=sse_read_timeout,
            max_reconnects=max_reconnects,
            target=self._target,
            closing=self._closing_flag,
            headers=self._lifecycle.side_headers,
            read=self._read_stream,
            describe=self.describe,
        )
        self._started = False
        self._what_cache: tuple[Target, str] | None = None
        self._streams_lock = threading.Lock()  # guards _streams
        #: the POST reply streams being read
        self._streams: set[_Stream] = set()
        #: request id -> the cut of its POST while no reply stream carries it yet
        self._posting: dict[Any, _Cut] = {}

    @property  # read-only: the lifecycle alone sets it (``Transport`` declares a plain field)
    def session_id(self) -> str | None:  # type: ignore[override]
        """The HTTP session the server assigned (``Mcp-Session-Id``; None: none)."""
        return self._lifecycle.session_id

    @property
    def protocol_version(self) -> str | None:
        """The agreed protocol version (None until ``set_protocol_version``)."""
        return self._lifecycle.protocol_version

    def _target(self) -> Target:
        return self.target

    def _closing_flag(self) -> threading.Event:
        return self._closing

    # -- Transport -------------------------------------------------------------------

    def describe(self) -> str:
        return f"streamable-http {safe_url(self.target.url)}"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        if self._closing.is_set():
            raise TransportError(f"{self.describe()}: transport is closed")
        self._bind(on_message, on_close, on_error)
        self._started = True
        self._maybe_open_back_channel()

    def set_protocol_version(self, version: str) -> None:
        if self._lifecycle.set_protocol_version(version):  # a re-initialization is complete
            self._back_channel.renew()  # the old session's GET stream goes
        if self._maybe_open_back_channel() and not self._back_channel.settled.wait(
            self._back_channel_wait()
        ):
            log.debug("mcpsync: GET stream of %s not answered yet; going on", self.describe())

    def handshake_failed(self) -> None:
        self._lifecycle.handshake_failed()

    # -- the GET back-channel (``streams.BackChannel``) ------------------------------------

    def wait_back_channel(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until the GET back-channel is open: the stream a server
        uses for requests and notifications not tied to a client request. It opens in the
        background after initialization; False if it is not open in time or not offered."""
        return self._back_channel.opened.wait(timeout)

    def _maybe_open_back_channel(self) -> bool:
        """Start the GET stream unless it is not wanted, or runs; True if started."""
        if not self.back_channel or not self._started:
            return False
        lifecycle = self._lifecycle
        if lifecycle.protocol_version is None or lifecycle.modern:
            return False  # before initialization, or the 2026-07-28 wire (no GET stream)
        return self._back_channel.start()

    def _back_channel_wait(self) -> float:
        """How long bring-up waits for the GET: ``back_channel_wait``, capped by what is left
        of the bring-up's ``connect_timeout`` (``bringup_deadline``)."""
        wait = self.back_channel_wait
        deadline = self.bringup_deadline
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        return max(wait, 0.0)

    # -- POST ----------------------------------------------------------------------------

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """POST one message. A JSON reply is delivered before this returns; an SSE reply is
        read on a reader thread. ``timeout`` bounds the wait for reply data (default: the
        transport's ``timeout``). ``headers`` adds per-message headers (e.g. ``Mcp-Param-*``).

        Raises ``SessionExpired`` (404 to a request that carried the session id: to one
        request per expiry, which is to re-initialize; the others wait for that and are
        re-sent with the new id), ``HTTPStatusError``, ``ConnectError``/``DNSError``/
        ``TLSError``, ``RequestTimeout``, or ``ProtocolError`` (a reply that is not JSON-RPC).
        """
        if self._closing.is_set():
            self._check_owner()  # ForkedError in a forked child
            raise TransportError(f"{self.describe()}: transport is closed")
        method = message.get("method") if isinstance(message, dict) else None
        is_request = method is not None and "id" in message
        read_timeout = self.timeout if timeout is None else timeout
        lifecycle = self._lifecycle
        if method == "initialize" or (
            method == "notifications/initialized" and lifecycle.expiry is not None
        ):
            self._send_handshake(message, method, read_timeout, headers)
            return
        leads: Leads | None = None  # the expiries this request led
        entered = lifecycle.given_up  # requests under way are given up together
        request_id = message["id"] if is_request else None
        led = lifecycle.led
        if led and request_id in led:  # the connection's re-send: as first sent
            entered = led[request_id].entered
        under_way = lifecycle.under_way  # (a set's add and discard need no lock)
        if is_request:
            under_way.add(request_id)
        try:
            for _ in range(MAX_RESENDS):
                try:
                    with lifecycle.lock:
                        if lifecycle.expiry is None:
                            hdrs, sent_session = lifecycle.post_headers, lifecycle.post_session
                        else:  # the session expired: wait for the re-initialization (or lead it)
                            hdrs, sent_session, read_timeout = lifecycle.await_session(
                                method, is_request, read_timeout, entered
                            )
                    if self._post(
                        message, method, is_request, hdrs, sent_session, read_timeout, headers
                    ):
                        return
                except SessionKeptExpiring:
                    raise
                except SessionExpired as exc:  # this request is to lead a re-initialization
                    if not is_request:
                        raise
                    leads = lifecycle.expired_again(
                        self.reinitialize_session, request_id, method, exc, leads, entered
                    )
        finally:
            under_way.discard(request_id)
        raise SessionKeptExpiring(
            f"{self.describe()}: the session expired {MAX_RESENDS} times while sending {method}",
            leads.reasons if leads is not None else [],
        )

    def _send_handshake(
        self,
        message: Message,
        method: str,
        read_timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        """``initialize`` (never with a session id), or ``notifications/initialized`` of a
        re-initialization; both move the session's expiry state on (the initialize as its
        reply's head arrives, in ``_answered``; a failure of either leaves the session stale)."""
        lifecycle = self._lifecycle
        try:
            if method == "initialize":
                hdrs = lifecycle.init_headers
                self._post(message, method, True, hdrs, None, read_timeout, headers)
                return  # its reply moved the state on already (``initialize_answered``)
            with lifecycle.lock:
                hdrs, sent_session = lifecycle.post_headers, lifecycle.post_session
            if not self._post(message, method, False, hdrs, sent_session, read_timeout, headers):
                raise SessionExpired(f"{self.describe()}: the new session expired at once")
        except BaseException:
            lifecycle.handshake_failed()
            raise
        if lifecycle.handshake_sent():
            self._back_channel.renew()  # the old session's GET stream goes

    def _what(self, target: Target) -> str:
        """``POST <url>`` for messages (no secrets), made once per target: not per call."""
        cached = self._what_cache
        if cached is None or cached[0] is not target:
            cached = self._what_cache = (target, f"POST {safe_url(target.url)}")
        return cached[1]

    def _post(
        self,
        message: Message,
        method: str | None,
        is_request: bool,
        hdrs: Mapping[str, str],
        sent_session: str | None,
        read_timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> bool:
        """POST ``message`` once. True when done; False when it raced a session expiry that
        another request reported (send it again once the new session is up)."""
        request_id = message.get("id") if method is not None else None
        if self._lifecycle.modern and method is not None:
            hdrs = {**hdrs, "Mcp-Method": method}
            name = mcp_name(method, message.get("params"))
            if name is not None:
                hdrs["Mcp-Name"] = encode_header_value(name)
        if headers:
            hdrs = {**hdrs, **headers}
        cut = None
        if is_request:
            cut = _Cut()
            # no lock: a dict's item set and pop are atomic, the reader (cancel) only gets,
            # and one request id is posted by one thread at a time (a re-send follows this
            # POST's finally); the shared lock here was contended by every calling thread
            self._posting[request_id] = cut
        try:
            response, target = self._http.request(
                "POST", self.target, hdrs, encode(message), read_timeout,
                cut.attach if cut is not None else None,
            )  # fmt: skip
            if cut is not None and cut.requested:  # cancelled before its reply came: unread
                shutdown_response(response)
                discard(response)
                return True
            return self._answered(message, method, is_request, request_id, response, target,
                                  sent_session, read_timeout)  # fmt: skip
        finally:
            if cut is not None:
                self._posting.pop(request_id, None)

    def _answered(
        self, message: Message, method: str | None, is_request: bool, request_id: Any,
        response: Any, target: Target, sent_session: str | None, read_timeout: float | None,
    ) -> bool:  # fmt: skip
        """``_post``'s reply: delivered, handed to a stream reader, or turned into an error."""
        if target is not self.target:
            self._moved(target)
        status = response.status
        what = self._what(target)
        if 200 <= status < 300:
            if method == "initialize":
                self._lifecycle.initialize_answered(response)  # before its reply is delivered
            elif is_request and self._lifecycle.fruitless:
                self._lifecycle.answered(sent_session)  # the new session's: the streak ends
            if status == 202 or status == 204:
                discard(response)
                return True
            ctype = response.headers.get("content-type", "").lower()
            if ctype.startswith(ACCEPT_SSE):
                if is_request:
                    self._start_stream(response, request_id, read_timeout)
                else:  # a stream for a notification or response: read whatever it carries
                    self._start_stream(response, None, read_timeout)
                return True
            data = read_limited(response, self.max_event_bytes, what)
            if not data or data.isspace():
                if is_request:
                    raise ProtocolError(f"{what}: empty {status} reply to {method}")
                return True
            if "json" not in ctype and ctype:
                if is_request:
                    raise ProtocolError(
                        f"{what}: unexpected Content-Type {ctype!r} in reply to {method}"
                    )
                return True
            reply = decode(data)  # ProtocolError on garbage: the caller learns at once
            self._deliver(reply)
            return True
        body = read_error_body(response)
        if status == 404 and sent_session is not None:
            if self._lifecycle.not_found(sent_session, is_request):
                return False
            raise SessionExpired(
                f"{what}: the server no longer knows session (HTTP 404); initialize again"
            )
        error = status_error(status, "POST", target.url, body)
        payload = error.payload
        if (
            is_request
            and status not in (401, 403)
            and isinstance(payload, dict)
            and payload.get("id") == request_id
            and ("error" in payload or "result" in payload)
        ):
            self._deliver(payload)  # a JSON-RPC answer carried by an HTTP error status
            return True
        raise error

    def abort_request(self, request_id: Any) -> bool:
        """Stop reading the SSE stream that carries ``request_id``'s response (on the
        2026-07-28 wire, closing it is the cancellation), or cut its POST still waiting
        for the reply's head or reading a JSON reply (the fast path's connection is shut
        down; otherwise the reply is left unread when it comes). True if there was one."""
        with self._streams_lock:
            streams = [s for s in self._streams if s.request_id == request_id]
            cut = self._posting.get(request_id)
        for stream in streams:
            stream.aborted = True
            shutdown_response(stream.response)
        if cut is not None:
            cut.request()
        return bool(streams) or cut is not None

    def abandon(self) -> None:
        """In a child of ``os.fork()``: this copy is closed here. Nothing is sent (no DELETE,
        no socket shutdown: the connections are the parent's too); the child's descriptors go
        when its objects are collected (a pool's locks may be held by a thread the fork lost)."""
        closing = threading.Event()
        closing.set()
        self._closing = closing
        self._close_reported = True

    def close(self) -> None:
        if forked(self):  # in a child of os.fork(): release its copy only
            self.abandon()
            return
        first = not self._closing.is_set()
        self._closing.set()
        self._lifecycle.wake()  # requests waiting for a re-initialization
        with self._streams_lock:
            streams = list(self._streams)
        get_thread = self._back_channel.stop()  # a GET waiting for its head, the GET stream
        for stream in streams:
            shutdown_response(stream.response)
        current = threading.current_thread()
        deadline = time.monotonic() + 3.0
        for thread in [s.thread for s in streams] + [get_thread]:
            if thread is None or thread is current or not thread.is_alive():
                continue
            thread.join(timeout=max(0.05, deadline - time.monotonic()))
            if thread.is_alive():
                log.warning("mcpsync: thread %s did not stop", thread.name)
        if first:
            self._lifecycle.delete(self.target)
            self._http.close()
        self._report_close(None)

    def _moved(self, target: Target) -> None:
        log.info(
            "mcpsync: %s moved to %s (HTTP redirect); using the new URL",
            safe_url(self.target.url),
            safe_url(target.url),
        )
        self.target = target

    # -- SSE streams ---------------------------------------------------------------------

    def _register(self, stream: _Stream) -> bool:
        with self._streams_lock:
            if self._closing.is_set():
                return False
            self._streams.add(stream)
            return True

    def _start_stream(self, response: Any, request_id: Any, read_timeout: float | None) -> None:
        stream = _Stream("post", request_id, response)
        thread = threading.Thread(
            target=self._run_post_stream,
            args=(stream, read_timeout),
            name=f"mcpsync-http-sse[{self.name}]",
            daemon=True,  # a blocked read must not hang interpreter exit; close() joins it
        )
        stream.thread = thread
        if not self._register(stream):
            response.close()
            raise TransportError(f"{self.describe()}: transport is closed")
        thread.start()

    def _read_stream(
        self, stream: _Stream, parser: SSEParser, idle_limit: float | None
    ) -> BaseException | None:
        """Read ``stream.response`` to its end; deliver messages. Returns why it ended early (or None).

        Ends early on a read error, when a resumed stream delivered its response, when
        ``idle_limit`` seconds passed without a JSON-RPC message (keep-alives alone do not
        count), or when the transport closes.
        """
        rid = stream.request_id
        closing = self._closing
        last_message = time.monotonic()

        def owner(event: EventTooLarge) -> Any:
            # Fail the request the reply was for now, not at its timeout: the one its first
            # bytes name, else (on a request's own stream, unless it is a notification or a
            # server request) the stream's request.
            found = response_id(event.head)
            if (
                found is None
                and rid is not None
                and not stream.answered
                and not _names_method(event.head)
            ):
                found = rid
            return found

        def claimed(found: Any) -> bool:
            if found == rid and type(found) is type(rid):
                stream.answered = True  # nobody waits on this stream any more
                return True
            return False

        def on_message(message: Any) -> None:
            nonlocal last_message
            last_message = time.monotonic()
            if rid is not None and not stream.answered:
                for item in message if isinstance(message, list) else (message,):
                    if "method" not in item and item.get("id") == rid:
                        stream.answered = True

        def after_chunk() -> bool:
            if stream.answered and stream.resumed:
                return True  # a resumption GET has done its job
            if idle_limit is not None and time.monotonic() - last_message > idle_limit:
                raise RequestTimeout(
                    f"{self.describe()}: no message on the SSE stream for {idle_limit:g} s"
                )
            return False

        try:
            read_events(
                stream.response,
                parser,
                what=self.describe(),
                deliver=self._deliver,
                report=self._report,
                stop=lambda: closing.is_set() or stream.aborted,
                owner=owner,
                claimed=claimed,
                on_message=on_message,
                after_chunk=after_chunk,
            )
            return None
        except Exception as exc:  # noqa: BLE001 - any read failure ends this stream
            if closing.is_set() or stream.aborted:
                return None
            return translate_error(exc, f"reading the SSE stream from {safe_url(self.target.url)}")

    def _run_post_stream(self, stream: _Stream, read_timeout: float | None) -> None:
        parser = SSEParser(self.max_event_bytes)
        failures = 0
        try:
            while True:
                seen_id = parser.last_event_id
                ended = self._read_stream(stream, parser, read_timeout)
                if (
                    stream.answered
                    or stream.request_id is None
                    or self._closing.is_set()
                    or stream.aborted
                ):
                    return
                # The stream ended before the response: resume it if the server made it resumable.
                if parser.last_event_id is None:
                    cause = ended or ConnectError("the stream ended without the response")
                    self._lost(stream, cause, "no event id to resume from")
                    return
                failures = 0 if parser.last_event_id != seen_id else failures + 1
                while True:
                    if failures >= self.max_reconnects:
                        self._lost(stream, ended, f"{failures} reconnection attempts failed")
                        return
                    delay = _retry_delay(parser)
                    if self._closing.wait(delay) or stream.aborted:
                        return
                    try:
                        response = self._back_channel.open_get(parser.last_event_id, read_timeout)
                    except MCPSyncError as exc:
                        ended = exc
                        failures += 1
                        continue
                    if response.status != 200:
                        refused = status_error(response.status, "GET", self.target.url, b"")
                        discard(response)
                        self._lost(stream, refused, "resumption refused")
                        return
                    break
                with self._streams_lock:
                    stream.response = response
                    stream.resumed = True
                if self._closing.is_set():
                    shutdown_response(response)
        finally:
            with self._streams_lock:
                self._streams.discard(stream)

    def _lost(self, stream: _Stream, cause: BaseException | None, why: str) -> None:
        reason = f": {cause}" if cause is not None else ""
        error = ResponseLost(
            f"{self.describe()}: the response to request {stream.request_id!r} can no longer arrive ({why}){reason}",
            request_id=stream.request_id,
        )
        error.__cause__ = cause
        self._report(error)


class _Cut:
    """The way to end one POST from another thread: its connection's ``abort``, once the
    fast path has connected it (``HTTPClient.request(on_conn=)``); asked for before
    that, the connection is cut as soon as it is given."""

    __slots__ = ("requested", "_abort")

    def __init__(self) -> None:
        self.requested = False
        self._abort: Callable[[], None] | None = None

    # No lock: each side writes its own field, then reads the other's. Whatever the order of
    # the two threads, at least one of them sees both written and aborts (both may: an abort
    # is a socket shutdown, harmless twice).
    def attach(self, abort: Callable[[], None]) -> None:
        self._abort = abort
        if self.requested:
            abort()

    def request(self) -> None:
        self.requested = True
        abort = self._abort
        if abort is not None:
            abort()
