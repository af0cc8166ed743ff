"""Logging across ``os.fork()``: no mcpsync thread is inside a logging handler at the fork.

Owns: the at-fork hook (``os.register_at_fork(before=..., after_in_parent=...,
after_in_child=...)``, registered once when this module is imported: ``_lifecycle``
imports it, and every transport imports ``_lifecycle``) that holds the locks of the
logging handlers mcpsync's records reach across the fork, ``handlers()`` (which ones),
``TIMEOUT`` (the bound) and ``skipped()`` (how many the last fork of this thread left out).

Why: mcpsync's threads log (the stdio reader sends every stderr line of a server to
``logging.getLogger("mcpsync.server.<name>")``, transports and connections log warnings).
A thread inside a handler's ``emit`` holds the stream's io buffer lock while its ``write``
is in the kernel (the GIL released: just when another thread may fork). The child inherits
that lock held by a thread it does not have, and its first record through that handler
(``close()``'s warning, say) blocks for ever. CPython makes logging's own locks afresh in
a child, not the io buffer locks. A handler's ``emit`` runs under its ``lock``, so holding
that lock across the fork means no thread is half-way through a write of that stream.

Which handlers: those on the ``mcpsync`` logger, on every logger below it, and on their
ancestors up to the root (each chain followed while ``propagate`` is true), plus
``logging.lastResort`` (used when a record finds no handler). A handler's lock is an
``RLock``: a fork from inside an ``emit`` in the forking thread itself still goes through.

Order: logging's module lock first, then the handlers' (the order ``logging.config``
takes them in; logging's own at-fork hook takes the module lock right after this one, at
once as it is an ``RLock`` this thread holds): the hook adds no lock-order deadlock.

A busy handler (a thread logging non-stop takes its lock again before the forking thread,
woken, gets to it: the locks are not fair, and on a loaded machine it loses every time):
while the fork waits for that lock, a filter on the handler (``_gate``, removed as soon as
the lock is had) holds the other threads' records before they take the lock, until the
fork is done (bounded by ``TIMEOUT``); the forking thread's own records pass.

Bounded: every lock is tried until one overall deadline (``TIMEOUT`` seconds per fork),
so a handler that stays inside its ``emit`` (a full pipe nobody reads, a nested record
waiting for a lock the forking thread holds) cannot hang the fork: that handler is skipped
(``skipped()`` counts it) and its stream may be unusable in that child, as without this hook.
The module lock not had in time: no handler lock is taken (every handler skipped; logging's
own hook then waits for it, as without this hook).
Nothing is logged from the hook (a record could block on the very handler skipped).
After the fork the parent releases what it took. In the child, logging has already made
the locks of its handlers afresh (its own hook runs first), so a release finds the lock
free and is skipped; a handler whose lock logging does not renew is released by the
forking thread, which is the child's only thread: no lock stays held there.

Not covered: a thread that writes to the same stream without the handler (``print`` to
``sys.stderr`` from another thread at the fork), and handlers reached only by loggers
outside the ``mcpsync`` tree.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

__all__ = ["TIMEOUT", "handlers", "skipped"]

#: the overall bound (seconds) of taking the handlers' locks before one fork
TIMEOUT = 0.5
_ROOT_NAME = "mcpsync"

#: per forking thread: the locks it holds across its fork (``held``), how many handlers its
#: last fork left out (``skipped``); a thread's own, as two threads may fork at once
_mine = threading.local()
#: the threads whose fork waits for a busy handler (their records pass the gate), and the
#: gate's state (set: open)
_gaters: set[int] = set()
_open = threading.Event()
_open.set()


def handlers() -> list[logging.Handler]:
    """The handlers a record of an ``mcpsync`` logger can reach (each once, in order)."""
    # (no getLogger: it takes logging's module lock, which the hook must not wait for)
    try:
        known = list(logging.Logger.manager.loggerDict.items())  # one copy under the GIL
    except RuntimeError:  # changed size while copied (not in CPython): the root at least
        known = []
    prefix = _ROOT_NAME + "."
    starts: list[logging.Logger] = [
        lg
        for name, lg in known
        if (name == _ROOT_NAME or name.startswith(prefix)) and isinstance(lg, logging.Logger)
    ]
    starts.append(logging.root)
    found: dict[int, logging.Handler] = {}
    walked: set[int] = set()
    for logger in starts:
        current: logging.Logger | None = logger
        while current is not None and id(current) not in walked:
            walked.add(id(current))
            for handler in list(current.handlers):
                found.setdefault(id(handler), handler)
            current = current.parent if current.propagate else None
    last = logging.lastResort
    if last is not None:
        found.setdefault(id(last), last)
    return list(found.values())


def skipped() -> int | None:
    """How many handlers this thread's last fork left out (their lock not free in time);
    None before this thread's first fork."""
    return getattr(_mine, "skipped", None)


def _gate(record: logging.LogRecord) -> bool:
    """A filter on a busy handler while a fork waits for its lock: the other threads'
    records wait here (bounded), before the lock, so they cannot keep taking it first."""
    if _gaters and threading.get_ident() not in _gaters:
        _open.wait(TIMEOUT)
    return True


def _take(handler: logging.Handler, lock: Any, deadline: float) -> bool:
    """The handler's lock, by the deadline. Busy: its other records wait at the gate (a
    thread logging non-stop would otherwise take it again before this one wakes up)."""
    if lock.acquire(blocking=False):
        return True
    ident = threading.get_ident()
    _gaters.add(ident)
    _open.clear()
    handler.addFilter(_gate)
    try:
        return bool(lock.acquire(timeout=max(0.0, deadline - time.monotonic())))
    finally:
        handler.removeFilter(_gate)  # those inside it wait on, for the gate to open


def _open_gate() -> None:
    _gaters.discard(threading.get_ident())
    if not _gaters:
        _open.set()


def _before() -> None:
    deadline = time.monotonic() + TIMEOUT
    held: list[Any] = []
    found = handlers()
    missed = len(found)
    try:
        # logging's module lock first, as logging takes them (dictConfig holds it while it
        # takes handler locks); its own at-fork hook takes it next (an RLock: at once).
        # Not had in time: no handler lock either (one of them may be what its holder awaits)
        module = getattr(logging, "_lock", None)
        if module is None or module.acquire(timeout=TIMEOUT):
            if module is not None:
                held.append(module)
            missed = 0
            for handler in found:
                lock = handler.lock
                if lock is None:  # a handler that made no lock (createLock overridden)
                    continue
                if _take(handler, lock, deadline):
                    held.append(lock)
                else:
                    missed += 1
    except BaseException:  # noqa: BLE001 - a fork must not fail for logging: release, go on
        _release(held)
        _open_gate()
        held, missed = [], len(found)
    _mine.held, _mine.skipped = held, missed


def _release(locks: list[Any]) -> None:
    for lock in reversed(locks):
        try:
            lock.release()
        except RuntimeError:  # made afresh in the child by logging's own hook: free already
            pass


def _after_in_parent() -> None:
    held, _mine.held = getattr(_mine, "held", []), []
    _release(held)
    _open_gate()  # the records that waited go on


def _after_in_child() -> None:
    global _open
    # (the forking thread's own thread-local data lives on in the child; no other's does)
    held, _mine.held = getattr(_mine, "held", []), []
    _release(held)
    _gaters.clear()
    _open = threading.Event()  # a fresh one: a parent thread may have held the old one's lock
    _open.set()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(
        before=_before, after_in_parent=_after_in_parent, after_in_child=_after_in_child
    )
