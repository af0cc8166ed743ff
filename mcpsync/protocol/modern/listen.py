"""``subscriptions/listen``: the modern era's one stream of change notifications.

Owns: ``Listener`` (keeps one stream whose filter follows the Session's ``Interest``,
hands over to a new stream once it is acknowledged, retries an abrupt end with a
backoff) and ``_Stream`` (one ``subscriptions/listen`` request on its own thread).
Every thread it starts is tracked (``threads()``) for the close join.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ... import jsonrpc
from ...errors import MCPSyncError, ProtocolError, RequestTimeout, ServerError
from ...rpc.calls import RequestFuture
from ...rpc.connection import Connection
from .envelope import LISTEN_TIMEOUT

__all__ = ["Listener"]

log = logging.getLogger("mcpsync")


class _Stream:
    """One ``subscriptions/listen`` request, on its own thread (on HTTP the send blocks
    for the life of the stream)."""

    def __init__(self, listener: Listener, notifications: dict[str, Any]) -> None:
        self.listener = listener
        self.notifications = notifications
        self.id: Any = None
        self.future: RequestFuture | None = None
        self.honored: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.acknowledged = threading.Event()
        self.ended = threading.Event()
        self.stopping = threading.Event()
        self.graceful = False
        self.thread = threading.Thread(
            target=self._run, name=f"mcpsync-listen[{listener.name}]", daemon=True
        )

    def _run(self) -> None:
        conn = self.listener.conn
        try:
            future = conn.request(
                "subscriptions/listen",
                {"notifications": self.notifications},
                timeout=LISTEN_TIMEOUT,
            )
            self.future = future
            if self.stopping.is_set():
                future.cancel()
            if self.id is None:
                self.id = future.call.id
            while not future.done():
                if self.stopping.wait(0.5):
                    future.cancel()
                    break
            if not future.cancelled():
                error = future.exception(timeout=5.0)
                if error is None:
                    self.graceful = True
                else:
                    self.error = error
        except BaseException as exc:  # noqa: BLE001 - reported through the listener
            self.error = exc
        finally:
            self.ended.set()
            self.acknowledged.set()  # wake anyone waiting for an ack that will not come
            self.listener._on_stream_end(self)

    def stop(self, join: bool = True) -> None:
        """Cancel the stream; with ``join``, wait for its thread (at most 2 s)."""
        self.stopping.set()
        future = self.future
        if future is not None:
            future.cancel()
        else:
            # not sent yet, or sent without its future: close its stream on the transport
            if self.id is not None:
                self.listener.conn.transport.abort_request(self.id)
        if join and self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=2.0)


class Listener:
    """Keeps one ``subscriptions/listen`` stream whose filter follows the session's callbacks.

    A new filter opens a new stream; the old one is cancelled once the new one is
    acknowledged. Notifications of streams already left are dropped. An abrupt end is
    retried a few times with a backoff; a graceful end (the server's result) is not.
    """

    max_retries = 3

    def __init__(
        self,
        conn: Connection,
        name: str,
        wanted: Callable[[], dict[str, Any]],
        closing: threading.Event,
    ) -> None:
        self.conn = conn
        self.name = name
        self._wanted = wanted  # the listen filter the Session's Interest asks for
        self._closing = closing  # the era is closing: no retry
        self._lock = threading.RLock()
        self._active: _Stream | None = None
        self._opening: _Stream | None = None
        self._retired: list[_Stream] = []
        self._failures = 0
        self._closed = False
        self._threads: set[threading.Thread] = set()  # retry timers and stoppers
        self._stopped: list[_Stream] = []  # the streams stop() cancelled

    def knows(self, subscription: Any) -> bool:
        for stream in (self._active, self._opening):
            if (
                stream is not None
                and stream.id is not None
                and (stream.id == subscription or str(stream.id) == str(subscription))
            ):
                return True
        return False

    @property
    def honored(self) -> dict[str, Any] | None:
        active = self._active
        return active.honored if active is not None else None

    def update(self, wait: bool = True, timeout: float | None = None) -> dict[str, Any] | None:
        """Open a stream for the session's current filter; returns what the server honored."""
        wanted = self._wanted()
        with self._lock:
            if self._closed:
                return None
            active = self._active
            if active is not None and not active.ended.is_set() and active.notifications == wanted:
                if wait and not active.acknowledged.wait(timeout):
                    raise RequestTimeout(
                        f"{self.name!r} did not acknowledge subscriptions/listen within {timeout} s"
                    )
                return active.honored
            if not wanted:
                self._active = None
                if active is not None:
                    active.stop()
                return {}
            stream = _Stream(self, wanted)
            self._opening = stream
            stream.thread.start()
        if not wait:
            return None
        if not stream.acknowledged.wait(timeout):
            stream.stop()
            raise RequestTimeout(
                f"{self.name!r} did not acknowledge subscriptions/listen within {timeout} s"
            )
        if stream.error is not None:
            raise stream.error
        if stream.honored is None:
            raise ProtocolError(f"{self.name!r} ended subscriptions/listen before acknowledging it")
        return stream.honored

    def on_acknowledged(self, subscription: Any, params: dict[str, Any]) -> None:
        with self._lock:
            stream = None
            for candidate in (self._opening, self._active):
                if (
                    candidate is not None
                    and candidate.id is not None
                    and str(candidate.id) == str(subscription)
                ):
                    stream = candidate
                    break
            if stream is None and self._opening is not None and self._opening.id is None:
                stream = self._opening  # the ack came before conn.request returned the id
                stream.id = subscription
            if stream is None:
                return
            honored = params.get("notifications")
            stream.honored = honored if isinstance(honored, dict) else {}
            old = None
            if stream is self._opening:
                self._opening = None
                old, self._active = self._active, stream
                self._failures = 0
            stream.acknowledged.set()
        if old is not None and old is not stream:
            self._retired.append(old)
            self._start(old.stop)

    def _on_stream_end(self, stream: _Stream) -> None:
        with self._lock:
            if stream is self._opening:
                self._opening = None
            if stream is not self._active:
                return
            self._active = None
            if self._closed or stream.stopping.is_set() or self.conn.closed:
                return
            if stream.graceful:
                log.info("mcpsync: %s ended subscriptions/listen", self.name)
                return
            error = stream.error
            if isinstance(error, ServerError) and error.code == jsonrpc.METHOD_NOT_FOUND:
                log.warning(
                    "mcpsync: %s does not offer subscriptions/listen: change notifications are off",
                    self.name,
                )
                return
            self._failures += 1
            if self._failures > self.max_retries:
                log.warning(
                    "mcpsync: subscriptions/listen to %s keeps failing (%s); giving up",
                    self.name,
                    error,
                )
                return
            delay = 0.5 * 2 ** (self._failures - 1)
        log.warning(
            "mcpsync: subscriptions/listen to %s ended (%s); listening again in %.1f s",
            self.name,
            error,
            delay,
        )

        def again() -> None:
            if not self._closing.wait(delay):
                try:
                    self.update(wait=False)
                except MCPSyncError as exc:
                    log.warning("mcpsync: could not listen to %s again: %s", self.name, exc)

        self._start(again)

    def _start(self, target: Callable[[], None]) -> None:
        """Run ``target`` on a tracked thread (joined by ``close``)."""

        def run() -> None:
            try:
                target()
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        # daemon: a thread stuck in a transport call must not keep the interpreter alive;
        # close() joins it within the session's deadline and names it if it stays
        thread = threading.Thread(target=run, name=f"mcpsync-listen[{self.name}]", daemon=True)
        with self._lock:
            self._threads.add(thread)
        thread.start()

    def stop(self) -> None:
        """Cancel every stream and stop retrying, without waiting (``threads()`` to join)."""
        with self._lock:
            self._closed = True
            streams = [s for s in (self._active, self._opening, *self._retired) if s is not None]
            self._active = self._opening = None
            self._retired = []
            self._stopped = streams
        for stream in streams:
            stream.stop(join=False)

    def threads(self) -> list[threading.Thread]:
        """The stream threads and timers still to be joined."""
        with self._lock:
            return [*(s.thread for s in self._stopped), *self._threads]
