"""The SSE streams of a Streamable HTTP transport, and its GET back-channel.

Owns: ``_Stream`` (one SSE stream being read: a POST reply or the GET back-channel), the
reconnection delay rule (the server's ``retry:``, bounded), and ``BackChannel``, the
mixin over ``StreamableHTTPTransport``'s declared state that opens the GET stream after
initialization on ``mcpsync-http-get[name]``, re-opens it with ``Last-Event-ID`` when it
ends, gives up after ``max_reconnects`` failures, and treats 405 as "no GET stream"; after
a re-initialization it ends the old session's stream and opens one for the new session
(the old one may sit on a connection the server no longer has: no FIN ever ends it).
Bring-up waits for the GET at most ``back_channel_wait``, capped by what is left of the
bring-up's deadline; close() cuts a GET still waiting for its head (its connection's abort).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import MCPSyncError, ProtocolError, RequestTimeout
from .client import ACCEPT_SSE, Target, discard, safe_url, shutdown_response
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
    """The GET back-channel half of ``StreamableHTTPTransport`` (its state is the transport's)."""

    name: str
    target: Target
    back_channel: bool
    back_channel_wait: float
    bringup_deadline: float | None
    protocol_version: str | None
    max_event_bytes: int
    sse_read_timeout: float | None
    max_reconnects: int
    _state_lock: threading.Lock
    _closing: threading.Event
    _started: bool
    _modern: bool
    _get_unsupported: bool
    _get_thread: threading.Thread | None
    _get_open: threading.Event
    _get_settled: threading.Event
    #: the connection of the GET being sent or awaiting its head (its ``abort``): close() cuts it
    _get_abort: Callable[[], None] | None = None
    _streams: set[_Stream]
    _http: Any

    if TYPE_CHECKING:

        def describe(self) -> str: ...
        def _side_headers(
            self, accept: str, last_event_id: str | None = None
        ) -> dict[str, str]: ...
        def _register(self, stream: _Stream) -> bool: ...
        def _read_stream(
            self, stream: _Stream, parser: SSEParser, idle_limit: float | None
        ) -> BaseException | None: ...

    def _open_get(self, last_event_id: str | None, read_timeout: float | None) -> Any:
        headers = self._side_headers(ACCEPT_SSE, last_event_id)
        response, _ = self._http.request(
            "GET", self.target, headers, None, read_timeout, self._attach_get
        )
        if response.status == 200 and not response.headers.get(
            "content-type", ""
        ).lower().startswith(ACCEPT_SSE):
            discard(response)
            raise ProtocolError(
                f"GET {safe_url(self.target.url)}: 200 reply is not an event stream"
            )
        return response

    def _attach_get(self, abort: Callable[[], None]) -> None:
        """``on_conn`` of the GET: keep its connection's ``abort`` for close(); cut at once
        when close() came first."""
        with self._state_lock:
            self._get_abort = abort
            closing = self._closing.is_set()
        if closing:
            abort()

    def _cut_back_channel(self) -> None:
        """close(): end a GET still waiting for its head (a registered stream is ended by
        its response's shutdown); from another thread, at once."""
        with self._state_lock:
            abort, self._get_abort = self._get_abort, None
        if abort is not None:
            abort()

    def _back_channel_wait(self) -> float:
        """How long bring-up waits for the GET: ``back_channel_wait``, capped by what is left
        of the bring-up's ``connect_timeout`` (``bringup_deadline``)."""
        wait = self.back_channel_wait
        deadline = self.bringup_deadline
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        return max(wait, 0.0)

    # -- the GET back-channel ----------------------------------------------------------------

    def wait_back_channel(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until the GET back-channel is open: the stream a server
        uses for requests and notifications not tied to a client request. It opens in the
        background after initialization; False if it is not open in time or not offered."""
        return self._get_open.wait(timeout)

    def _maybe_open_back_channel(self) -> bool:
        """Start the GET stream's thread unless it runs or is not wanted; True if started."""
        with self._state_lock:
            if (
                not self.back_channel
                or not self._started
                or self.protocol_version is None
                or self._modern
                or self._get_unsupported
                or self._closing.is_set()
                or (self._get_thread is not None and self._get_thread.is_alive())
            ):
                return False
            self._get_settled.clear()
            self._get_thread = threading.Thread(
                target=self._run_back_channel, name=f"mcpsync-http-get[{self.name}]", daemon=True
            )
            self._get_thread.start()
            return True

    def _renew_back_channel(self) -> None:
        """The session was initialized again: end the GET stream of the old one (its thread
        opens one for the new session at once, from no event id; not a failure)."""
        with self._state_lock:
            old = [s for s in self._streams if s.kind == "get"]
            for stream in old:
                stream.aborted = True
        for stream in old:
            shutdown_response(stream.response)

    def _run_back_channel(self) -> None:
        try:
            self._keep_back_channel()
        finally:
            self._get_settled.set()  # whatever happened, bring-up waits no longer

    def _keep_back_channel(self) -> None:
        parser = SSEParser(self.max_event_bytes)
        failures = 0
        closing = self._closing
        while not closing.is_set():
            try:
                response = self._open_get(parser.last_event_id, self.sse_read_timeout)
            except MCPSyncError as exc:
                self._get_settled.set()  # bring-up does not wait for the reconnections
                failures += 1
                if failures > self.max_reconnects:
                    log.warning("mcpsync: GET stream of %s given up: %s", self.describe(), exc)
                    return
                if closing.wait(_retry_delay(parser)):
                    return
                continue
            if response.status != 200:
                status = response.status
                discard(response)
                if status == 405:
                    self._get_unsupported = True  # the server offers no GET stream
                    log.debug("mcpsync: %s offers no GET stream (405)", self.describe())
                else:
                    log.info(
                        "mcpsync: GET stream of %s refused with HTTP %s", self.describe(), status
                    )
                return
            stream = _Stream("get", None, response)
            stream.thread = threading.current_thread()
            if not self._register(stream):
                response.close()
                return
            self._get_open.set()
            self._get_settled.set()
            seen = parser.last_event_id
            ended = self._read_stream(stream, parser, None)
            with self._state_lock:
                self._streams.discard(stream)
                self._get_open.clear()
            if closing.is_set():
                return
            if stream.aborted:  # the session was initialized again: a stream for the new one
                parser, failures = SSEParser(self.max_event_bytes), 0
                continue
            if isinstance(ended, RequestTimeout):
                failures = 0  # idle past sse_read_timeout: reconnect quietly
            elif parser.last_event_id != seen:
                failures = 0
            else:
                failures += 1
            if failures > self.max_reconnects:
                log.warning("mcpsync: GET stream of %s keeps ending; given up", self.describe())
                return
            if closing.wait(_retry_delay(parser)):
                return
