"""The ordered notification dispatch of one connection.

Owns: the connection's dispatch queue: notification callbacks run from it in wire order,
and a response that arrived behind still-queued notifications is settled from it, after
them. The queue runs on the process's shared workers (``_shared.POOL``), on one worker at
a time, a batch at a time (other connections' queues take turns). It counts what was put
on it and what it finished, so the reader can tell at a glance whether anything is still
queued or running (``idle()``). Also the connection's "closed" callbacks (``on_closed``),
run once on their own short-lived ``mcpsync-closed[name]`` thread, never on a reader.
Used by ``mcpsync.rpc.connection`` only.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from _thread import get_ident
from collections.abc import Callable
from typing import Any

from .shared import POOL

__all__ = ["Dispatcher", "ClosedCallbacks"]

log = logging.getLogger("mcpsync")

#: items one turn on a worker runs before the queue goes to the back of the line
_BATCH = 64


class Dispatcher:
    """One ordered queue run on the shared pool; ``handle(item)`` runs each item."""

    def __init__(self, name: str, handle: Callable[[Any], None]) -> None:
        self._name = name
        self._handle = handle
        self._items: collections.deque[Any] = collections.deque()
        # Items put on / finished: equal when nothing waits or runs there.
        self._queued = 0
        self._done = 0
        self._cond = threading.Condition()  # guards the items, `_running` and the count
        self._running = False  # on a worker, or waiting for one
        self._stopped = False
        self._joining = False
        #: the ident of the thread running this queue now (a call made there cannot wait for it)
        self.ident: int | None = None
        #: the worker running it now (named when a close gives up waiting for it)
        self.worker: threading.Thread | None = None

    def idle(self) -> bool:
        """Nothing queued or running (read without a lock: the reader's hot path)."""
        return self._queued == self._done

    def put(self, item: Any) -> None:
        with self._cond:
            if self._stopped:
                return
            self._queued += 1
            self._items.append(item)
            if self._running:
                return
            self._running = True
        POOL.schedule(self)

    def stop(self) -> None:
        """Take nothing more; what is queued still runs."""
        with self._cond:
            self._stopped = True

    def drain(self) -> bool:
        """Run up to a batch of items (on a pool worker); True if more are left."""
        self.ident = get_ident()
        self.worker = threading.current_thread()
        items, cond = self._items, self._cond
        try:
            for _ in range(_BATCH):
                with cond:
                    if not items:
                        self._running = False
                        if self._joining:
                            cond.notify_all()
                        return False
                    item = items.popleft()
                try:
                    self._handle(item)
                except Exception:
                    log.exception("mcpsync: dispatch failed for %s", self._name)
                finally:
                    self._done += 1  # only the one thread running the queue writes it
            return True
        finally:
            self.ident = None
            self.worker = None

    def join(self, deadline: float) -> threading.Thread | None:
        """Wait (until ``deadline``) for what is queued to have run; the worker still
        running it when the deadline passed, else None. Called from the queue's own
        callback it does not wait."""
        if self.ident == get_ident():
            return None
        with self._cond:
            self._joining = True
            while self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return self.worker or threading.current_thread()
                self._cond.wait(remaining)
        return None


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
