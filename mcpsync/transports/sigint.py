"""Ctrl-C at a message boundary: SIGINT deferred while the main thread is in a pipe.

Owns: the one process-wide SIGINT stand-in the stdio transports share (there is one
SIGINT handler per process). While stdio transports are open it replaces Python's
default handler (``signal.default_int_handler``; an application's own handler is left
alone) and behaves as it does, except inside a guarded region (the main thread reading or
writing a pipe), where it records the signal and wakes the region's poll; the region
raises the KeyboardInterrupt when it ends. See ``stdio``'s docstring for why. In a
forked child the guard starts afresh (no region, no open transport).
"""

from __future__ import annotations

import signal
import threading
from _thread import get_ident
from typing import Any, Protocol

from ..runtime.lifecycle import after_fork

__all__ = ["_GUARD", "_MAIN_IDENT"]


class _Wakeable(Protocol):
    def wakeup(self) -> None: ...


class _SigintGuard:
    """Defers SIGINT while the main thread reads or writes a stdio pipe (see the docstring)."""

    def __init__(self) -> None:
        self.depth = 0  # the main thread's nesting of guarded regions
        self.pending = False  # a SIGINT came inside a region
        self.current: _Wakeable | None = None  # the reader the main thread is in
        self.installed = False  # tried to install since the first transport opened
        self.open = 0  # stdio transports started and not yet closed
        self.lock = threading.Lock()  # guards `open`

    def install(self) -> None:
        """Called in the main thread: take SIGINT over if the default handler has it."""
        self.installed = True  # one try: an application's own handler is left alone
        try:
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                signal.signal(signal.SIGINT, self.handler)
        except (ValueError, OSError):  # pragma: no cover - not the main thread / no signals
            pass

    def opened(self) -> None:
        with self.lock:
            self.open += 1

    def closed(self) -> None:
        """The last stdio transport closed: give SIGINT back to Python's default handler."""
        with self.lock:
            self.open -= 1
            if self.open <= 0:
                self.current = None
            if self.open > 0 or get_ident() != _MAIN_IDENT:
                return  # (from another thread: it stays ours, which behaves the same)
            self.installed = False
        try:
            if signal.getsignal(signal.SIGINT) == self.handler:
                signal.signal(signal.SIGINT, signal.default_int_handler)
        except (ValueError, OSError):  # pragma: no cover
            pass

    def handler(self, signum: int, frame: Any) -> None:
        if self.depth <= 0:
            signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt
        self.pending = True
        current = self.current
        if current is not None:
            current.wakeup()  # the region's poll returns; it ends at a message boundary

    def leave(self) -> None:
        """End a region; raise the deferred KeyboardInterrupt when it was the outermost."""
        self.depth -= 1
        if self.pending and self.depth <= 0:
            self.pending = False
            raise KeyboardInterrupt

    def after_fork_in_child(self) -> None:
        """A forked child starts outside every region, with no transport of its own open
        (the parent's are abandoned there; a region's holder may not exist in the child)."""
        self.depth, self.pending, self.current, self.open = 0, False, None, 0
        self.lock = threading.Lock()


_GUARD = _SigintGuard()
_MAIN_IDENT = threading.main_thread().ident
after_fork(_GUARD.after_fork_in_child)  # (also after a fork that ran no at-fork hook)
