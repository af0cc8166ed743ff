"""The SSE streams of a Streamable HTTP transport, and its GET back-channel.

Owns: ``_Stream`` (one SSE stream being read: a POST reply or the GET back-channel), the
reconnection delay rule (the server's ``retry:``, bounded), and ``BackChannel``, the object
a ``StreamableHTTPTransport`` holds for its GETs: it opens the GET stream after
initialization on ``mcpsync-http-get[name]``, re-opens it with ``Last-Event-ID`` when it
ends, gives up after ``max_reconnects`` failures, and treats 405 as "no GET stream"; after
a re-initialization it ends the old session's stream and opens one for the new session
(the old one may sit on a connection the server no longer has: no FIN ever ends it).
Bring-up waits for the GET (``settled``) at most the transport's ``back_channel_wait``,
capped by what is left of the bring-up's deadline; ``stop()`` (close) cuts a GET still
waiting for its head (its connection's abort) and ends the stream being read. The
transport's resumption GETs go through ``open_get`` too (the same headers and cut).

It is built with exactly what it needs from the transport: the ``HTTPClient``, getters of
its target (a redirect moves it) and closing flag (a forked child replaces it), the
session's GET headers (``SessionLifecycle.side_headers``), the transport's stream reader
(``read``: delivery and error reports are the transport's) and ``describe``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ...errors import MCPSyncError, ProtocolError, RequestTimeout
from .client import ACCEPT_SSE, HTTPClient, Target, discard, safe_url, shutdown_response
from .sse import SSEParser

__all__ = ["BackChannel"]

log = logging.getLogger("mcpsync.http")

#: reconnection delay when a server gave no ``retry:`` (the SSE standard leaves it to the client)
DEFAULT_RETRY = 1.0
#: longest reconnection delay honoured (a server's ``retry:`` may ask for years)
MAX_RETRY_DELAY = 60.0


class _Stream:
    """One SSE stream being read: a POST reply (with its request id), or the GET back-channel."""

    __slots__ = ("kind", "request_id", "response", "thread", "answered", "resumed", "aborted")

    def __init__(self, kind: str, request_id: Any, response: Any) -> None:
        self.kind = kind
        self.request_id = request_id
        self.response = response
        self.thread: threading.Thread | None = None
        self.answered = False
        self.resumed = False
        self.aborted = False


def _retry_delay(parser: SSEParser) -> float:
    """The server's reconnection delay (``retry:``), else the default; at most a minute."""
    retry = parser.retry
    return DEFAULT_RETRY if retry is None else min(retry, MAX_RETRY_DELAY)


class BackChannel:
    """The GET back-channel a ``StreamableHTTPTransport`` holds (see the module docstring)."""

    def __init__(
        self,
        http: HTTPClient,
        *,
        name: str,
        max_event_bytes: int,
        read_timeout: float | None,
        max_reconnects: int,
        target: Callable[[], Target],
        closing: Callable[[], threading.Event],
        headers: Callable[[str, str | None], dict[str, str]],
        read: Callable[[_Stream, SSEParser, float | None], BaseException | None],
        describe: Callable[[], str],
    ) -> None:
        """``read_timeout``: the GET's, the transport's ``sse_read_timeout`` (a stream quiet
        that long reconnects quietly);
        ``headers(accept, last_event_id)``: a GET's headers; ``read(stream, parser,
        idle_limit)``: reads a stream to its end, delivering its messages, and returns why
        it ended early (None: it ended, or the transport is closing)."""
        self._http = http
        self._name = name
        self._max_event_bytes = max_event_bytes
        self._read_timeout = read_timeout
        self._max_reconnects = max_reconnects
        self._target = target
        self._closing = closing
        self._headers = headers
        self._read = read
        self._describe = describe
        #: set while the GET stream is open
        self.opened = threading.Event()
        #: its first answer came (or it gave up): bring-up waits for this
        self.settled = threading.Event()
        self._lock = threading.Lock()  # guards the three below
        self._thread: threading.Thread | None = None
        self._stream: _Stream | None = None  # the GET stream being read
        #: the connection of the GET being sent or awaiting its head (its ``abort``): stop() cuts it
        self._abort: Callable[[], None] | None = None
        self._unsupported = False  # the server answered 405: it offers no GET stream

    def open_get(self, last_event_id: str | None, read_timeout: float | None) -> Any:
        """Send one GET (the back-channel's, or a resumption with ``last_event_id``) and
        return its response (``ProtocolError`` for a 200 that is not an event stream)."""
        headers = self._headers(ACCEPT_SSE, last_event_id)
        target = self._target()
        response, _ = self._http.request("GET", target, headers, None, read_timeout, self._attach)
        if response.status == 200 and not response.headers.get(
            "content-type", ""
        ).lower().startswith(ACCEPT_SSE):
            discard(response)
            raise ProtocolError(f"GET {safe_url(target.url)}: 200 reply is not an event stream")
        return response

    def _attach(self, abort: Callable[[], None]) -> None:
        """``on_conn`` of a GET: keep its connection's ``abort`` for stop(); cut at once
        when the transport is closing already."""
        with self._lock:
            self._abort = abort
            closing = self._closing().is_set()
        if closing:
            abort()

    def start(self) -> bool:
        """Start the GET stream's thread unless it runs, the server offers none, or the
        transport is closing; True if started (``settled`` is cleared: wait on it)."""
        with self._lock:
            if (
                self._unsupported
                or self._closing().is_set()
                or (self._thread is not None and self._thread.is_alive())
            ):
                return False
            self.settled.clear()
            self._thread = threading.Thread(
                target=self._run, name=f"mcpsync-http-get[{self._name}]", daemon=True
            )
            self._thread.start()
            return True

    def renew(self) -> None:
        """The session was initialized again: end the GET stream of the old one (its thread
        opens one for the new session at once, from no event id; not a failure)."""
        with self._lock:
            stream = self._stream
            if stream is not None:
                stream.aborted = True
        if stream is not None:
            shutdown_response(stream.response)

    def stop(self) -> threading.Thread | None:
        """close(), once the closing flag is set: cut a GET still waiting for its head and
        end the stream being read, from another thread, at once. Returns the thread to
        join (None: none ran)."""
        with self._lock:
            abort, self._abort = self._abort, None
            stream, thread = self._stream, self._thread
        if abort is not None:
            abort()
        if stream is not None:
            shutdown_response(stream.response)
        return thread

    # -- the GET stream's thread ------------------------------------------------------------

    def _register(self, stream: _Stream) -> bool:
        with self._lock:
            if self._closing().is_set():
                return False
            self._stream = stream
            return True

    def _run(self) -> None:
        try:
            self._keep()
        finally:
            self.settled.set()  # whatever happened, bring-up waits no longer

    def _keep(self) -> None:
        parser = SSEParser(self._max_event_bytes)
        failures = 0
        closing = self._closing()
        while not closing.is_set():
            try:
                response = self.open_get(parser.last_event_id, self._read_timeout)
            except MCPSyncError as exc:
                self.settled.set()  # bring-up does not wait for the reconnections
                failures += 1
                if failures > self._max_reconnects:
                    log.warning("mcpsync: GET stream of %s given up: %s", self._describe(), exc)
                    return
                if closing.wait(_retry_delay(parser)):
                    return
                continue
            if response.status != 200:
                status = response.status
                discard(response)
                if status == 405:
                    self._unsupported = True  # the server offers no GET stream
                    log.debug("mcpsync: %s offers no GET stream (405)", self._describe())
                else:
                    log.info(
                        "mcpsync: GET stream of %s refused with HTTP %s", self._describe(), status
                    )
                return
            stream = _Stream("get", None, response)
            stream.thread = threading.current_thread()
            if not self._register(stream):
                response.close()
                return
            self.opened.set()
            self.settled.set()
            seen = parser.last_event_id
            ended = self._read(stream, parser, None)
            with self._lock:
                self._stream = None
                self.opened.clear()
            if closing.is_set():
                return
            if stream.aborted:  # the session was initialized again: a stream for the new one
                parser, failures = SSEParser(self._max_event_bytes), 0
                continue
            if isinstance(ended, RequestTimeout):
                failures = 0  # idle past sse_read_timeout: reconnect quietly
            elif parser.last_event_id != seen:
                failures = 0
            else:
                failures += 1
            if failures > self._max_reconnects:
                log.warning("mcpsync: GET stream of %s keeps ending; given up", self._describe())
                return
            if closing.wait(_retry_delay(parser)):
                return
