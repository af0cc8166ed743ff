"""Legacy HTTP+SSE transport (MCP 2024-11-05 servers).

Owns: the one long-lived ``GET`` event stream (the server's ``/sse`` URL), waiting for its
``endpoint`` event, the POST of every client message to that endpoint, and the reader
thread ``mcpsync-sse-reader[name]`` that delivers every server message from the stream.

The protocol, briefly: the client opens the SSE stream; the server's first event is
``endpoint`` whose data is the URL (usually relative, carrying a session id) to POST
messages to; every server message, responses included, then arrives on the stream as a
``message`` event; POSTs are answered ``202 Accepted``. The endpoint must be on the
stream's origin (a different one is refused, as the reference SDKs do). There is no
resumption: when the stream ends, the transport is done and ``on_close`` says why.

A reply over ``max_event_bytes`` fails its call at once (``ReplyTooLarge``, naming the
size and the limit): with every reply on the one stream, whose it was is read from the
event's first bytes, else its last (servers built on the TypeScript SDK put the ``id``
after the ``result``); one whose id neither end gives is reported as a ``ProtocolError``.
The rule is the shared read loop's (``sse.read_events``, ``sse.reply_id``); the stream
goes on after it.

HTTP plumbing (fast path, requests path, auth hooks, error translation) is shared with
the Streamable HTTP transport.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urljoin

import requests

from ...errors import (
    ConnectError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
    TransportError,
)
from ...jsonrpc import encode
from ...runtime.lifecycle import forked
from ..base import Features, Message, OnClose, OnError, OnMessage
from .client import (
    ACCEPT_SSE,
    HTTPTransport,
    Target,
    discard,
    read_error_body,
    safe_url,
    shutdown_response,
    status_error,
    translate_error,
)
from .sse import SSEEvent, SSEParser, read_events

__all__ = ["LegacySSETransport"]

log = logging.getLogger("mcpsync.http")


class LegacySSETransport(HTTPTransport):
    """MCP over the 2024-11-05 HTTP+SSE transport: GET an event stream, POST to its endpoint."""

    kind = "sse"
    #: 2024-11-05 only: it cannot carry the stateless wire
    features = Features(carries_modern=False, send_waits=True)  # the POST waits for its 202

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
        sse_read_timeout: float | None = None,
    ) -> None:
        """``url``: the server's SSE URL (often ``.../sse``). ``timeout``: read timeout of
        each POST; ``connect_timeout`` also bounds the wait for the ``endpoint`` event;
        ``sse_read_timeout``: idle limit on the event stream (None: none; servers may be
        quiet for long)."""
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
        self.endpoint: Target | None = None
        self._endpoint_ready = threading.Event()
        self._start_error: BaseException | None = None
        self._ended: BaseException | None = None
        self._response: Any = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._http_closed = False
        self._post_headers = {**self._http.headers, "Content-Type": "application/json"}

    # -- Transport -------------------------------------------------------------------

    def describe(self) -> str:
        return f"sse {safe_url(self.target.url)}"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        """Open the event stream and wait (bounded by ``connect_timeout``) for ``endpoint``."""
        if self._closing.is_set():
            raise TransportError(f"{self.describe()}: transport is closed")
        self._bind(on_message, on_close, on_error)
        wait = self.connect_timeout if self.connect_timeout is not None else 30.0
        deadline = time.monotonic() + wait  # one bound for the stream's head and ``endpoint``
        headers = {**self._http.headers, "Accept": ACCEPT_SSE, "Cache-Control": "no-cache"}
        watch = _HeadWatch(f"mcpsync-sse-connect[{self.name}]", wait)
        try:
            response, target = self._http.request(
                "GET", self.target, headers, None, self.sse_read_timeout, watch.attach
            )
        except BaseException as exc:
            if not watch.end() and isinstance(exc, Exception):  # cut by the watch: too late
                self._abort_start()
                raise self._no_head(wait) from None
            raise
        if not watch.end():  # the head came as the watch cut it: the stream is broken
            discard(response)
            self._abort_start()
            raise self._no_head(wait)
        self.target = target
        what = f"GET {safe_url(target.url)}"
        if response.status != 200:
            raise status_error(response.status, "GET", target.url, read_error_body(response))
        ctype = response.headers.get("content-type", "").lower()
        if not ctype.startswith(ACCEPT_SSE):
            discard(response)
            raise ProtocolError(f"{what}: expected an event stream, got Content-Type {ctype!r}")
        self._response = response
        self._reader = threading.Thread(
            target=self._read, name=f"mcpsync-sse-reader[{self.name}]", daemon=True
        )
        self._reader.start()
        if not self._endpoint_ready.wait(max(deadline - time.monotonic(), 0.0)):
            self._abort_start()
            raise RequestTimeout(f"{what}: no endpoint event within {wait:.3g} s (connect_timeout)")
        if self.endpoint is None:
            self._abort_start()
            error = self._start_error or ConnectError(
                f"{what}: stream ended before the endpoint event"
            )
            raise error

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        endpoint = self.endpoint
        if self._closing.is_set() or endpoint is None:
            self._check_owner()  # ForkedError in a forked child
            raise TransportError(f"{self.describe()}: transport is closed or not started")
        if self._ended is not None:  # replies could only come over the stream that ended
            raise ConnectError(f"{self.describe()}: the event stream ended ({self._ended})")
        read_timeout = self.timeout if timeout is None else timeout
        started = time.monotonic()
        body = encode(message)
        if read_timeout is not None:  # the encoding (a big request: seconds) counts too
            read_timeout = max(read_timeout - (time.monotonic() - started), 0.001)
        response, target = self._http.request(
            "POST", endpoint, self._post_headers, body, read_timeout
        )
        if target is not endpoint:
            self.endpoint = target
        status = response.status
        if 200 <= status < 300:
            discard(response)
            return
        raise status_error(status, "POST", target.url, read_error_body(response))

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
        self._closing.set()
        response = self._response
        if response is not None:
            shutdown_response(response)
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=3.0)
            if reader.is_alive():
                log.warning("mcpsync: thread %s did not stop", reader.name)
        with self._lock:
            first_close, self._http_closed = not self._http_closed, True
        if first_close:
            self._http.close()
        self._report_close(None)

    # -- internals -------------------------------------------------------------------

    def _no_head(self, wait: float) -> RequestTimeout:
        return RequestTimeout(
            f"GET {safe_url(self.target.url)}: no answer within {wait:.3g} s (connect_timeout)"
        )

    def _abort_start(self) -> None:
        self._closing.set()
        if self._response is not None:
            shutdown_response(self._response)
        if self._reader is not None:
            self._reader.join(timeout=3.0)
        with self._lock:
            first_close, self._http_closed = not self._http_closed, True
            self._close_reported = True  # start() failed: the caller gets the exception instead
        if first_close:
            self._http.close()

    def _set_endpoint(self, data: bytes) -> None:
        text = data.decode("utf-8", "replace").strip()
        try:
            endpoint = Target.of(urljoin(self.target.url, text))
        except MCPSyncError as exc:
            raise ProtocolError(
                f"{self.describe()}: invalid endpoint event {text[:200]!r}"
            ) from exc
        if endpoint.origin != self.target.origin:
            raise ProtocolError(
                f"{self.describe()}: endpoint {safe_url(endpoint.url)} is not on the stream's origin; refused"
            )
        self.endpoint = endpoint

    def _on_other(self, event: SSEEvent) -> None:
        if event.event == "endpoint" and self.endpoint is None:
            self._set_endpoint(event.data)
            self._endpoint_ready.set()

    def _read(self) -> None:
        closing = self._closing
        ended: BaseException | None = None
        try:
            read_events(
                self._response,
                SSEParser(self.max_event_bytes),
                what=self.describe(),
                deliver=self._deliver,
                report=self._report,
                stop=closing.is_set,
                on_other=self._on_other,
            )
        except ProtocolError as exc:  # a bad endpoint event
            ended = exc
        except Exception as exc:  # noqa: BLE001 - any read failure ends the stream
            ended = translate_error(exc, f"reading the SSE stream from {safe_url(self.target.url)}")
        if ended is None:
            ended = ConnectError(f"{self.describe()}: the server ended the event stream")
        if not self._endpoint_ready.is_set():
            self._start_error = ended
            self._endpoint_ready.set()
            return
        if not closing.is_set():
            self._ended = ended
            self._report_close(ended)


class _HeadWatch:
    """Cuts the event stream's GET (its connection's ``abort``, given by the fast path's
    ``on_conn``) when its response head has not come within ``seconds``: the wait for the
    head is bounded by ``connect_timeout`` whatever the stream's idle limit. Its timer
    thread ends in ``end()``."""

    def __init__(self, name: str, seconds: float) -> None:
        self._lock = threading.Lock()
        self._aborts: list[Callable[[], None]] = []
        self._done = False
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.name = name
        self._timer.daemon = True
        self._timer.start()

    def attach(self, abort: Callable[[], None]) -> None:
        with self._lock:
            self._aborts.append(abort)
            fired = self.fired
        if fired:
            abort()

    def _fire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.fired = True
            aborts = list(self._aborts)
        for abort in aborts:
            abort()

    def end(self) -> bool:
        """Stop watching; False if the watch cut the request (its head was too late)."""
        with self._lock:
            self._done = True
            fired = self.fired
        self._timer.cancel()
        if self._timer is not threading.current_thread():
            self._timer.join()
        return not fired
