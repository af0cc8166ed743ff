"""The reading half of the stdio transport: the reader role and the one pipe-reader thread.

Owns: who reads the server's stdout (a waiting caller takes the "reader role" and reads
its own reply, and every other message it finds, so a sequential call costs one wake-up;
callers that cannot get the role park on a wake-up slot, ``park.py``, until their reply
was delivered or the role is theirs), and the transport's one thread,
``mcpsync-stdio-reader[name]``: it reads stdout while no caller does (notifications, server requests, the EOF of an idle
session) and drains stderr all the time (a bounded tail kept for error messages, every
line sent to ``logging``), both from one ``poll()``; the stop pipe beside them ends it.
So a stdio session costs one thread. On platforms without ``select.poll`` the thread
reads stdout with blocking reads and a second thread drains stderr
(``child.ChildProcess._drain_stderr``). A mixin of ``StdioTransport`` (its state).
"""

from __future__ import annotations

import collections
import logging
import os
import select
import threading
import time
from _thread import get_ident
from collections.abc import Callable
from typing import Any

from ..jsonrpc import excerpt
from .park import WAKE, Slots, consume
from .sigint import _GUARD, _MAIN_IDENT

__all__ = ["PipeReader"]

#: after a send, the background reader leaves stdout to the caller this long (seconds)
_CALLER_GRACE = 0.005
#: once closing, at most this much more of what stderr already holds is read
_STDERR_LEFTOVER = 1 << 20


class PipeReader:
    """The reading half of ``StdioTransport`` (see the module docstring)."""

    # set by the transport's __init__ / start
    name: str
    features: Any
    process: Any
    _closing: threading.Event
    _shut: bool
    _eof: bool
    _fd: int
    _err_fd: int
    _err_lock: threading.Lock
    _err_pending: bytes
    _stop_r: int
    _wake_r: int
    _wake_w: int
    _caller_poll: Any
    _role: threading.Lock
    _role_cv: threading.Condition
    _role_owner: int
    _parked: dict[int, tuple[Any, int]]
    _slots: Slots
    _waiting: list[None]
    _last_send: float
    _parts: list[bytes]
    _discarding: bool
    _stderr_tail: collections.deque[str]
    _server_log: logging.Logger

    # implemented by the other mixins (annotations only: nothing here shadows them)
    _feed: Callable[[bytes], None]
    _deliver_line: Callable[[bytes], None]
    _report_close: Callable[[BaseException | None], None]
    _exit_error: Callable[[str], Any]

    def _pipe_reader(self) -> None:
        """The one thread of a session (with ``poll``): stderr always, stdout while no
        caller reads it. Ends when closing, or once both pipes reached EOF."""
        both = select.poll()  # stdout + stderr + stop
        errs = select.poll()  # stderr + stop, while callers read stdout themselves
        for poller in (both, errs):
            poller.register(self._stop_r, select.POLLIN)
            if self._err_fd >= 0:
                poller.register(self._err_fd, select.POLLIN)
        both.register(self._fd, select.POLLIN)
        out_open = True
        while not self._closing.is_set():
            if self._eof and out_open:
                both.unregister(self._fd)  # stdout is done: stderr may still talk
                out_open = False
            if not out_open and self._err_fd < 0:
                return  # both pipes at EOF
            # Callers are reading, or just sent and are about to: leave stdout to them.
            busy = self._waiting or time.monotonic() - self._last_send < _CALLER_GRACE
            if busy or not out_open:
                events = errs.poll(_CALLER_GRACE * 1000 if out_open else None)
            else:
                events = both.poll()
            read_out = False
            for fd, _ in events:
                if fd == self._err_fd:
                    if not self._read_stderr():
                        both.unregister(fd)
                        errs.unregister(fd)
                elif fd == self._fd:
                    read_out = True
            if read_out and not self._closing.is_set():
                # A caller may hold the role between its poll and its read: wait it out.
                if not self._role.acquire(timeout=_CALLER_GRACE):
                    continue
                self._role_owner = get_ident()
                try:
                    if not self._eof and not self._closing.is_set():
                        self._read_once()
                finally:
                    self._release_role()
        self._stderr_leftover()

    def _background_reader(self) -> None:
        """Without ``poll``: blocking reads of stdout (stderr has its own thread)."""
        while not self._eof and not self._closing.is_set():
            if not self._role.acquire(blocking=False):
                with self._role_cv:
                    self._role_cv.wait(_CALLER_GRACE)
                continue
            self._role_owner = get_ident()
            try:
                if not self._eof and not self._closing.is_set():
                    self._read_once()
            finally:
                self._release_role()

    # -- stderr ----------------------------------------------------------------------------

    def _read_stderr(self, limit: int = 65536) -> bool:
        """Read what stderr holds (non-blocking) into the tail and the log; False at EOF.

        Any thread may call it (the reader thread, or a caller building an exit error)."""
        with self._err_lock:
            return self._read_stderr_locked(limit)

    def _read_stderr_locked(self, limit: int = 65536) -> bool:
        fd = self._err_fd
        if fd < 0:
            return False
        try:
            chunk = os.read(fd, limit)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        if not chunk:
            self._err_fd = -1  # the pipe itself is closed with the others, by close()
            if self._err_pending:
                self._stderr_tail.append(excerpt(self._err_pending, 500))
                self._err_pending = b""
            return False
        self._stderr_lines(chunk)
        return True

    def _stderr_lines(self, chunk: bytes) -> None:
        pending = self._err_pending + chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > 65536:  # a huge line without newline: keep only its start
            lines.append(pending[:4096])
            pending = b""
        self._err_pending = pending
        logger, tail = self._server_log, self._stderr_tail
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            tail.append(excerpt(text, 500))
            if logger.isEnabledFor(logging.INFO):
                logger.info("%s", text)

    def _stderr_until_eof(self, seconds: float) -> None:
        """Read stderr to its EOF, for at most ``seconds`` (the server exited: its last
        words are on their way). Without ``poll`` the drain thread is joined instead."""
        deadline = time.monotonic() + seconds
        if not self._err_lock.acquire(timeout=seconds):
            return
        try:  # under the lock: close() cannot close the descriptor polled here
            if self._err_fd < 0:
                return
            poller = select.poll()
            poller.register(self._err_fd, select.POLLIN)
            while self._err_fd >= 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not poller.poll(remaining * 1000):
                    return
                if not self._read_stderr_locked():
                    return
        finally:
            self._err_lock.release()

    def _stderr_leftover(self) -> None:
        """Closing: read at most ``_STDERR_LEFTOVER`` more of what stderr already holds."""
        left = _STDERR_LEFTOVER
        while left > 0 and self._err_fd >= 0:
            poller = select.poll()
            poller.register(self._err_fd, select.POLLIN)
            if not poller.poll(0) or not self._read_stderr():
                return
            left -= 65536

    # -- stdout: the reader role -------------------------------------------------------

    def wait_for(self, future: Any, deadline: float) -> None:
        """Read stdout in the calling thread until ``future`` is done or ``deadline`` passes.

        ``future``: anything with ``done()``; ``deadline``: a ``time.monotonic()`` value.
        """
        guard = _GUARD
        main = get_ident() == _MAIN_IDENT
        if main:  # a Ctrl-C waits for the message boundary (see the module docstring)
            if not guard.installed:
                guard.install()
            guard.depth += 1
            guard.current = self  # type: ignore[assignment]  # (a stdio transport)
        waiting, parked, role = self._waiting, self._parked, self._role
        waiting.append(None)  # list.append/pop are atomic: no lock on the hot path
        try:
            while not future.done() and not self._eof and not guard.pending:
                if role.acquire(False):
                    self._role_owner = get_ident()
                    try:
                        if not self._shut:
                            self._read_until(future, deadline)
                    finally:
                        self._role_owner = 0
                        role.release()
                        if parked:
                            self._wake_parked(hand_over=True)
                    return
                # Another thread reads; it wakes us when our reply came or it is done.
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._shut:
                    return
                # Park on a wake-up slot (park.py: a waker's write releases the GIL, so we
                # can run at once); the entry tells the waker where to write.
                slot = self._slots.take()
                key = id(slot)
                parked[key] = (future, slot[0])
                woken = False
                try:
                    # Registered first, then looked: a reader that finishes now will see us.
                    if role.locked() and not future.done():
                        if slot[2].poll(min(remaining, 0.05) * 1000):
                            woken = consume(slot[1])
                finally:
                    self._slots.done(slot, parked.pop(key, None) is not None, woken)
        finally:
            waiting.pop()
            if main:
                guard.depth -= 1
                if guard.pending and guard.depth <= 0:
                    guard.pending = False
                    raise KeyboardInterrupt  # deferred from inside the read

    def _release_role(self) -> None:
        self._role_owner = 0
        self._role.release()
        if self._parked:
            self._wake_parked(hand_over=True)

    def _read_until(self, future: Any, deadline: float) -> None:
        """The reader role's loop in a waiting caller: poll, read, deliver."""
        poll = self._caller_poll.poll
        fd = self._fd
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            events = poll(remaining * 1000)
            if not events:
                return
            for ready, _ in events:
                if ready != fd:
                    if ready == self._stop_r:
                        return  # closing
                    self._drain_wakeups()
                    if self._parked:  # their replies may have been resolved elsewhere
                        self._wake_parked()
                    continue
                self._read_once()
            if future.done() or self._eof or _GUARD.pending or self._shut:
                return

    def _wake_parked(self, hand_over: bool = False, everyone: bool = False) -> None:
        """Wake parked callers whose reply came; with ``hand_over`` also one to take the role.

        A caller woken leaves the table here (``dict.pop`` is atomic: one waker wakes it, once),
        so the next reader neither looks at it again nor writes to its slot a second time."""
        need_reader = hand_over
        parked = self._parked
        for key, (future, slot) in list(parked.items()):
            if everyone or future.done():
                if parked.pop(key, None) is None:
                    continue  # woken by another reader just now
            elif need_reader:
                if parked.pop(key, None) is None:
                    continue
                if not future.done():  # (its reply may have come meanwhile: then look on)
                    need_reader = False
            else:
                continue
            try:
                os.write(slot, WAKE)  # (the GIL is released around it: see park.py)
            except OSError:  # pragma: no cover - a slot is closed only once clean
                pass

    def wakeup(self) -> None:
        """Make a caller that reads stdout look at its future again (resolved elsewhere)."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except (BlockingIOError, OSError):
                pass  # already signalled, or closed

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _read_once(self) -> None:
        """Read what stdout has (the caller holds the role) and deliver complete lines."""
        try:
            # 64 KiB: under glibc's mmap threshold (a 256 KiB buffer costs an mmap/munmap
            # pair and page faults on every read, ~13 us a call).
            chunk = os.read(self._fd, 65536)
        except BlockingIOError:
            return  # nothing after all (poll said readable): look again
        except OSError:
            chunk = b""
        if not chunk:
            self._on_eof()
            return
        if chunk[-1] == 10 and not self._parts and not self._discarding:
            # whole lines only (_deliver_line holds each to the size cap, as _feed does)
            if chunk.find(b"\n") == len(chunk) - 1:
                self._deliver_line(chunk)  # exactly one: the sequential case
            else:
                deliver = self._deliver_line  # several: many threads' replies at once
                for line in chunk.split(b"\n")[:-1]:
                    deliver(line)
        else:
            self._feed(chunk)
        if self._parked:
            self._wake_parked()

    def _on_eof(self) -> None:
        self._eof = True
        self._wake_parked(everyone=True)
        with self._role_cv:
            self._role_cv.notify_all()
        if not self._closing.is_set():
            self._report_close(self._exit_error("server closed its stdout"))
