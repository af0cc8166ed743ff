"""The ordered notification dispatch of one connection.

Owns: the ``mcpsync-dispatch[name]`` thread and its queue: notification callbacks run
there in wire order, and a response that arrived behind still-queued notifications is
settled there, after them. The queue counts what was put on it and what it finished, so
the reader can tell at a glance whether anything is still queued or running
(``idle()``). Also the connection's "closed" callbacks (``on_closed``), run once on their
own short-lived ``mcpsync-closed[name]`` thread, never on a reader. Used by
``mcpsync.connection`` only.
"""

from __future__ import annotations

import logging
import queue
import threading
from _thread import get_ident
from collections.abc import Callable
from typing import Any

__all__ = ["Dispatcher", "ClosedCallbacks"]

log = logging.getLogger("mcpsync")

_STOP = object()


class Dispatcher:
    """One ordered queue and the thread that drains it; ``handle(item)`` runs each item."""

    def __init__(self, name: str, handle: Callable[[Any], None]) -> None:
        self._handle = handle
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Items put on / finished: equal when nothing waits or runs there.
        self._queued = 0
        self._done = 0
        self._lock = threading.Lock()  # the count and the put, together
        #: the ident of the dispatch thread, once it runs (a call made there cannot wait for it)
        self.ident: int | None = None
        self.thread = threading.Thread(
            target=self._loop, name=f"mcpsync-dispatch[{name}]", daemon=True
        )

    def start(self) -> None:
        self.thread.start()

    def idle(self) -> bool:
        """Nothing queued or running (read without a lock: the reader's hot path)."""
        return self._queued == self._done

    def put(self, item: Any) -> None:
        with self._lock:
            self._queued += 1
            self._queue.put(item)

    def stop(self) -> None:
        """Let the thread end once it has run what is queued before this."""
        self._queue.put(_STOP)

    def _loop(self) -> None:
        self.ident = get_ident()
        get = self._queue.get
        while True:
            item = get()
            if item is _STOP:
                return
            try:
                self._handle(item)
            except Exception:
                log.exception("mcpsync: dispatch failed")
            finally:
                self._done += 1  # only this thread writes it


class ClosedCallbacks:
    """``on_closed`` callbacks: each called once with the error, off the reader thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[BaseException], None]] = []
        self._error: BaseException | None = None  # set once the connection died
        #: the thread running the callbacks (joined by the connection's close)
        self.thread: threading.Thread | None = None

    def add(self, callback: Callable[[BaseException], None]) -> None:
        """Register ``callback``; call it now (in this thread) if the connection died already."""
        with self._lock:
            error = self._error
            if error is None:
                self._callbacks.append(callback)
                return
        self._run_one(callback, error)

    def fire(self, error: BaseException) -> None:
        """The connection died with ``error``: run the callbacks on their own thread, once."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            callbacks, self._callbacks = self._callbacks, []
        if not callbacks:
            return
        self.thread = threading.Thread(
            target=self._run_all,
            args=(callbacks, error),
            name=f"mcpsync-closed[{self._name}]",
            daemon=True,
        )
        self.thread.start()

    def _run_all(
        self, callbacks: list[Callable[[BaseException], None]], error: BaseException
    ) -> None:
        for callback in callbacks:
            self._run_one(callback, error)

    def _run_one(self, callback: Callable[[BaseException], None], error: BaseException) -> None:
        try:
            callback(error)
        except Exception:
            log.exception("mcpsync: on_closed callback for %s failed", self._name)
