"""The threads every connection of the process shares: one deadline timer, two worker pools.

Owns: ``TIMER`` (the ``mcpsync-timer[shared]`` thread: fails each call whose deadline
passed, for every connection registered with it) and ``POOL`` (the
``mcpsync-dispatch[shared]`` workers that run each connection's ordered dispatch queue,
``_dispatch.Dispatcher``; one queue runs on at most one worker at a time, so its order
holds), and ``SENDS`` (the ``mcpsync-send[shared]`` workers that send a future's request
where sending waits for the server: an HTTP POST until its reply; at most
``SEND_WORKERS`` at once, the others queued). A connection attaches to all three when it
starts and detaches when it ends, so 500 sessions cost one timer thread and as many
workers as there are queues busy at once, not 1,000 threads.

Lifetimes: the timer runs while any connection is attached; a worker ends after
``IDLE_SECONDS`` without work, and every worker ends once the last connection detached
(``detach`` then returns the threads to join: the last close leaves no thread behind). A
thread of a previous "generation" (all connections gone, then a new one came) ends by
itself and is never waited for by the new connections. After ``os.fork()`` the child
starts with no threads and no registrations (threads do not survive a fork).
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = [
    "TIMER",
    "POOL",
    "SENDS",
    "SEND_WORKERS",
    "DeadlineTimer",
    "WorkerPool",
    "Drainable",
    "IDLE_SECONDS",
]

log = logging.getLogger("mcpsync")

_NEVER = float("inf")
#: a dispatch worker with nothing to do for this long ends (seconds)
IDLE_SECONDS = 2.0
#: requests of the process sent at once by ``SENDS`` (more wait for a free worker)
SEND_WORKERS = 64


class DeadlineTimer:
    """One thread for the deadlines of every attached connection's pending calls."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._tables: dict[int, tuple[dict[Any, Any], Callable[[Any], bool]]] = {}
        #: when the timer wakes next (read unlocked by callers: a deadline after it needs
        #: no ``schedule``, the timer re-scans by then)
        self.next_wake = _NEVER
        self._gen = 0
        self.thread: threading.Thread | None = None

    def attach(self, key: int, pending: dict[Any, Any], expire: Callable[[Any], bool]) -> None:
        """Watch ``pending`` (calls with a ``deadline``); hand each one overdue to ``expire``."""
        with self._cond:
            self._tables[key] = (pending, expire)
            if self.thread is None:
                # daemon: never keeps the interpreter alive; the last detach joins it
                self.thread = threading.Thread(
                    target=self._loop, args=(self._gen,), name="mcpsync-timer[shared]", daemon=True
                )
                self.thread.start()
            self._cond.notify()

    def detach(self, key: int) -> threading.Thread | None:
        """Stop watching ``key``'s table; the timer thread to join when none is left."""
        with self._cond:
            if self._tables.pop(key, None) is None or self._tables:
                return None
            thread, self.thread = self.thread, None
            self._gen += 1  # that thread ends; a new attach starts a new one
            self._cond.notify_all()
            return thread

    def schedule(self, deadline: float) -> None:
        # Unlocked first look (hot path); the timer re-scans at least once a second anyway.
        if deadline < self.next_wake:
            with self._cond:
                if deadline < self.next_wake:
                    self.next_wake = deadline
                    self._cond.notify()

    def _loop(self, gen: int) -> None:
        cond = self._cond
        while True:
            with cond:
                if gen != self._gen:
                    return
                now = time.monotonic()
                expired = []
                earliest = _NEVER
                for pending, expire in list(self._tables.values()):
                    for call in list(pending.values()):
                        if call.deadline <= now:
                            expired.append((expire, call))
                        elif call.deadline < earliest:
                            earliest = call.deadline
                # Sleep until the earliest deadline, at most a second. Requests whose
                # deadline falls after that wake-up need not notify us (the hot path).
                wake = min(earliest, now + 1.0)
                self.next_wake = wake
                if not expired:
                    cond.wait(wake - now)
                    continue
            for expire, call in expired:
                try:
                    expire(call)
                except Exception:  # one connection's bug must not stop every other's timeouts
                    log.exception("mcpsync: expiring a call failed")

    def _after_fork(self) -> None:
        self._cond = threading.Condition()
        self._tables.clear()
        self.next_wake = _NEVER
        self.thread = None


class Drainable(Protocol):
    """What the pool runs: a queue that drains a batch, then says whether more is left."""

    def drain(self) -> bool: ...


class WorkerPool:
    """Workers shared by every attached connection's queues (see the docstring); threads
    named ``name``, at most ``limit`` of them (None: one more whenever none is idle)."""

    def __init__(self, name: str = "mcpsync-dispatch[shared]", limit: int | None = None) -> None:
        self.name = name
        self.limit = limit
        self._cond = threading.Condition()
        self._ready: collections.deque[Drainable] = collections.deque()
        self._users = 0
        self._idle = 0
        self._gen = 0
        self.workers: set[threading.Thread] = set()

    def attach(self) -> None:
        with self._cond:
            self._users += 1

    def detach(self) -> list[threading.Thread]:
        """One connection fewer; all the workers (to join) when it was the last."""
        with self._cond:
            self._users -= 1
            if self._users > 0:
                return []
            self._gen += 1  # idle workers end now, busy ones once the ready queues are empty
            self._cond.notify_all()
            workers, self.workers = list(self.workers), set()
            return workers

    def schedule(self, queue: Drainable) -> None:
        """Run ``queue.drain()`` on a worker (a new one when none is idle)."""
        with self._cond:
            self._ready.append(queue)
            if self._idle > len(self._ready) - 1:
                self._cond.notify()
                return
            if self.limit is not None and len(self.workers) >= self.limit:
                return  # queued: a worker takes it when it is done with its own
            # daemon: a callback stuck in user code must not keep the interpreter alive;
            # the last connection's close joins the workers within its deadline
            worker = threading.Thread(
                target=self._loop, args=(self._gen,), name=self.name, daemon=True
            )
            self.workers.add(worker)
        worker.start()

    def _loop(self, gen: int) -> None:
        cond = self._cond
        me = threading.current_thread()
        while True:
            with cond:
                while not self._ready:
                    if gen != self._gen:
                        return
                    self._idle += 1
                    woken = cond.wait(IDLE_SECONDS)
                    self._idle -= 1
                    if not woken and not self._ready:
                        self.workers.discard(me)
                        return
                queue = self._ready.popleft()
            if queue.drain():  # a batch done and more left: to the back of the line
                with cond:
                    self._ready.append(queue)  # (this worker takes the next one itself)

    def _after_fork(self) -> None:
        self._cond = threading.Condition()
        self._ready.clear()
        self._users = self._idle = 0
        self.workers = set()


TIMER = DeadlineTimer()
POOL = WorkerPool()
SENDS = WorkerPool("mcpsync-send[shared]", SEND_WORKERS)


def _after_fork() -> None:
    TIMER._after_fork()
    POOL._after_fork()
    SENDS._after_fork()


if hasattr(os, "register_at_fork"):  # pragma: no branch - POSIX
    os.register_at_fork(after_in_child=_after_fork)
