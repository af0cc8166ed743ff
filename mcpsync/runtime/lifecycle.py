"""Which process an mcpsync object belongs to: fork detection and interpreter exit.

Owns: the owner process of each session, host and transport (``Owner``, the member
``own()`` gives each of them; ``forked``, ``check``, ``ForkedError``); the weak registry of the live ones; the at-fork
hook (``os.register_at_fork(after_in_child=...)``) that releases a forked child's copies
of them (each registered object's ``on_fork``: a transport abandons its descriptors, a
session swaps in an era that refuses every call) without touching the peer; and closing
what is still open at interpreter exit (``atexit``, one overall bound, ``EXIT_TIMEOUT``).

A child of ``os.fork()`` (gunicorn/uwsgi pre-fork workers, multiprocessing's fork start)
inherits every object but none of the threads that served it, and shares the parent's
pipes and sockets: using them there would read the parent's replies or write into its
stream. So in the child every public call raises ``ForkedError`` naming both processes,
``close()`` releases only the child's copies (no shutdown request, no signal, no read),
and the parent goes on undisturbed. The hook takes no lock (a thread that held one did
not survive the fork) and does no I/O beyond closing the child's descriptors.

Forks that do not run Python's at-fork hooks (uwsgi without ``py-call-osafterfork``,
a C ``fork()`` without ``PyOS_AfterFork_Child``) are noticed at the child's first call
(``this_process`` compares ``os.getpid()``, ~0.1 us), and the hook runs then: the same
ForkedError, the same release; only the eager close of the child's copies at the fork
itself needs the hook (``os.fork``, ``multiprocessing`` and gunicorn run it).

Interpreter exit: the ``atexit`` hook (run after non-daemon threads were joined) runs
every live transport's ladder at once, in rounds of non-blocking steps (stdio: close the
server's stdin, so all servers see EOF together; SIGTERM then SIGKILL for the ones still
there, each at its share of the bound), then closes every live session and transport in
turn (quick: their processes are gone), all within ``EXIT_TIMEOUT``. The hook itself
starts no thread and closes hosts through their sessions (``Host.close`` closes in
parallel threads, which Python 3.12+ refuses at exit).
"""

from __future__ import annotations

import atexit
import logging
import os
import time
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import ForkedError
from . import logfork as _logfork  # noqa: F401 - its at-fork hook: no thread inside a log handler

__all__ = [
    "ForkedError",
    "Owner",
    "UNOWNED",
    "own",
    "forked",
    "check",
    "live",
    "close_all",
    "this_process",
    "after_fork",
    "EXIT_TIMEOUT",
]

log = logging.getLogger("mcpsync")

#: this process's id, updated in a forked child by the at-fork hook (cheaper than getpid)
PID = os.getpid()
#: the overall bound of closing what is still open at interpreter exit (seconds)
EXIT_TIMEOUT = 5.0


class Owner:
    """The process an object belongs to, and how errors name it ("session 'x'"): the
    member ``own()`` gives a session, host or transport (``obj._owner``)."""

    __slots__ = ("pid", "what")

    def __init__(self, pid: int, what: str) -> None:
        self.pid = pid
        self.what = what

    def __repr__(self) -> str:
        return f"Owner({self.pid}, {self.what!r})"


#: the owner of an object made but not owned yet: the importing process, so an object
#: made before a fork and never owned still reads as forked in the child
UNOWNED = Owner(PID, "this object")


OnFork = Callable[[Any], None]
OnExit = Callable[[Any, float], None]
ExitSoon = Callable[[Any, float], bool]


class _Entry:
    __slots__ = ("ref", "kind", "on_fork", "on_exit", "exit_soon")

    def __init__(
        self,
        ref: weakref.ref[Any],
        kind: str,
        on_fork: OnFork | None,
        on_exit: OnExit | None,
        exit_soon: ExitSoon | None,
    ) -> None:
        self.ref, self.kind, self.on_fork = ref, kind, on_fork
        self.on_exit, self.exit_soon = on_exit, exit_soon


# id(obj) -> entry. A plain dict: its single operations are atomic under the GIL, and the
# at-fork hook must not take a lock (its holder may be a thread the fork left behind).
_LIVE: dict[int, _Entry] = {}
#: the kinds in the order the exit hook closes them (hosts' sessions are sessions too)
KINDS = ("host", "session", "transport")


def own(
    obj: Any,
    what: str,
    *,
    kind: str = "session",
    on_fork: OnFork | None = None,
    on_exit: OnExit | None = None,
    exit_soon: ExitSoon | None = None,
) -> None:
    """Make ``obj`` belong to this process and register it (weakly).

    ``what`` names it in errors ("session 'demo'"); ``kind`` is one of ``KINDS``.
    ``on_fork(obj)``: run in a forked child, in the at-fork hook: release the child's
    copies, take no lock, do no I/O but closing descriptors. ``on_exit(obj, deadline)``:
    run at interpreter exit while the object is still open (closing it within
    ``deadline``, a ``time.monotonic()`` value); ``exit_soon(obj, deadline) -> bool``:
    run before any ``on_exit``, in rounds (about every 10 ms) while it returns True: one
    step towards ending, without waiting (stdio: close the server's stdin, later SIGTERM,
    then SIGKILL, each by a share of ``deadline``), so every server ends at once. Called again (e.g. after a restart in a
    forked child), it makes the object this process's again.
    """
    obj._owner = Owner(this_process(), what)
    key = id(obj)
    _LIVE[key] = _Entry(weakref.ref(obj, _forget(key)), kind, on_fork, on_exit, exit_soon)


def _forget(key: int) -> Callable[[weakref.ref[Any]], None]:
    def forget(_ref: weakref.ref[Any]) -> None:
        entry = _LIVE.get(key)
        if entry is not None and entry.ref is _ref:  # not a newer object with the same id
            _LIVE.pop(key, None)

    return forget


def disown(obj: object) -> None:
    """Drop ``obj`` from the registry (it was closed: exit has nothing to do for it)."""
    _LIVE.pop(id(obj), None)


def this_process() -> int:
    """This process's id. A fork that ran no at-fork hook (uwsgi without
    ``py-call-osafterfork``, a C ``fork()``) is noticed here, and the hook runs now."""
    pid = os.getpid()
    if pid != PID:
        _after_fork_in_child()
    return pid


def forked(obj: Any) -> bool:
    """True when ``obj`` (owned by ``own()``) belongs to another process: this one is a
    fork of its owner. The restart policy asks this before bringing a session up again."""
    return obj._owner.pid != this_process()  # type: ignore[no-any-return]


def check(obj: Any) -> None:
    """Raise ``ForkedError`` when ``obj`` is used in a forked child."""
    pid = this_process()
    owner = obj._owner
    if owner.pid != pid:
        raise ForkedError(owner.what, owner.pid, pid)


def error(obj: Any) -> ForkedError:
    """The ``ForkedError`` for ``obj`` in this process."""
    owner = obj._owner
    return ForkedError(owner.what, owner.pid, this_process())


#: process-wide resets a forked child needs (the spawner thread, the SIGINT guard)
_CHILD_HOOKS: list[Callable[[], None]] = []


def after_fork(hook: Callable[[], None]) -> None:
    """Run ``hook()`` in every forked child, with or without Python's at-fork hooks (then
    at the first ``forked``/``check``/``own`` there). Like the objects' ``on_fork``: no lock."""
    _CHILD_HOOKS.append(hook)


def live(kind: str | None = None) -> list[Any]:
    """The live registered objects of this process (of ``kind``, if given), oldest first."""
    out = []
    for entry in list(_LIVE.values()):
        obj = entry.ref()
        if obj is not None and (kind is None or entry.kind == kind) and not forked(obj):
            out.append(obj)
    return out


def _after_fork_in_child() -> None:
    """In a forked child: this is a new process; release the parent's objects here."""
    global PID
    PID = os.getpid()
    for hook in list(_CHILD_HOOKS):
        try:
            hook()
        except Exception:  # noqa: BLE001 - one reset's trouble must not stop the others
            log.debug("mcpsync: a reset after fork failed", exc_info=True)
    entries = list(_LIVE.values())
    _LIVE.clear()  # the child's own objects register afresh
    for entry in entries:
        obj = entry.ref()
        if obj is None or entry.on_fork is None:
            continue
        try:
            entry.on_fork(obj)
        except Exception:  # noqa: BLE001 - one object's trouble must not stop the others
            log.debug("mcpsync: releasing %s after fork failed", entry.kind, exc_info=True)


def close_all(timeout: float = EXIT_TIMEOUT) -> None:
    """Close every live registered object of this process, hosts first, within ``timeout``.

    Run at interpreter exit; callable directly (tests, embedders that tear down early).
    """
    deadline = time.monotonic() + timeout
    objects = [(e, e.ref()) for e in list(_LIVE.values())]
    live_ones = [(e, o) for e, o in objects if o is not None and not forked(o)]
    live_ones.sort(key=lambda pair: KINDS.index(pair[0].kind) if pair[0].kind in KINDS else 9)
    # Every transport's ladder at once, in rounds: no thread, each step bounded.
    ladder_end = time.monotonic() + timeout * 0.8  # the rest: the closes that follow
    ending = [(e, o) for e, o in live_ones if e.exit_soon is not None]
    while ending:
        ending = [(e, o) for e, o in ending if _step(e, o, ladder_end)]
        if ending and time.monotonic() >= ladder_end:
            break
        if ending:
            time.sleep(0.01)  # a bounded poll of processes ending (no thread at exit)
    for entry, obj in live_ones:
        if entry.on_exit is None:
            continue
        if time.monotonic() >= deadline:
            log.warning("mcpsync: %s still open at exit after %.1f s", obj._owner.what, timeout)
            continue
        try:
            entry.on_exit(obj, deadline)
        except Exception as exc:  # noqa: BLE001 - closing one must not stop the others
            log.warning("mcpsync: closing %s at exit: %s", obj._owner.what, exc)


def _step(entry: _Entry, obj: Any, deadline: float) -> bool:
    assert entry.exit_soon is not None
    try:
        return bool(entry.exit_soon(obj, deadline))
    except Exception:  # noqa: BLE001 - its on_exit still closes it
        log.debug("mcpsync: ending %s at exit", obj._owner.what, exc_info=True)
        return False


def _at_exit() -> None:
    if _LIVE:
        close_all(EXIT_TIMEOUT)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)
