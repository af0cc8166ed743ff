"""The reading half of the stdio transport: the reader role and the one pipe-reader thread.

Owns: who reads the server's stdout. A waiting caller takes the "reader role" and reads its
own reply, and every other message it finds, so a sequential call costs one wake-up, as in a
bare loop; callers that cannot get the role park on a wake-up slot (``park.py``) until their
reply was delivered or the role is theirs. And the session's one thread,
``mcpsync-stdio-reader[name]``: it reads stdout while no caller does (notifications, server
requests, the EOF of an idle session) and drains stderr all the time, both from one
``poll()``, with the transport's stop pipe beside them (it ends as soon as the transport
closes). Stdout goes to the framer (``ndjson.LineFramer``), stderr to the child's tail
(``child.ChildProcess.stderr_chunk``). Reading stderr from another thread (what it holds
now, for an error message; to its EOF once the server exited) takes the stderr lock. On
platforms without ``select.poll`` the thread reads stdout with blocking reads (no caller
reads) and a second thread drains stderr.

A ``PipeReader`` is a member of ``StdioTransport``: it knows its descriptors and the
callbacks its constructor was given, nothing of its host. It never closes the server's
pipes (the transport does, once ``join`` said no thread reads them); it closes what it made
(the wake-up pipe, the parking slots) in ``forget``.

Why the caller reads (measured, ``transports/README.md``): with the reader thread reading
every reply and the caller waiting on its call's event, each reply costs a second wake-up
and a GIL hand-over: ~1.7x the client CPU of a sequential call (21.7-23.4 against
12.2-14.9 us), and 8 threads on one session at 0.43-0.52x of the bare loop instead of above it.
"""

from __future__ import annotations

import os
import select
import threading
import time
from _thread import get_ident
from collections.abc import Callable
from typing import Any

from .ndjson import LineFramer
from .park import WAKE, Slots, consume
from .sigint import _GUARD, _MAIN_IDENT

__all__ = ["PipeReader", "POLL", "close_fds"]

#: the platform has ``select.poll``: bounded, non-blocking reads, and callers read
POLL = hasattr(select, "poll")
#: after a send, the background reader leaves stdout to the caller this long (seconds)
_CALLER_GRACE = 0.005
#: once closing, at most this much more of what stderr already holds is read
_STDERR_LEFTOVER = 1 << 20


def close_fds(*fds: int) -> None:
    """Close each descriptor that is open (>= 0); one already closed is no error."""
    for fd in fds:
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


class PipeReader:
    """Reads a stdio server's stdout and stderr (see the module docstring).

    ``stdout_fd``/``stderr_fd``: the server's pipes (made non-blocking here where ``POLL``);
    ``stop_fd``: readable once the transport closes (``stop`` is called first). ``framer``
    gets stdout; ``on_stderr(chunk)`` and ``on_stderr_end()`` get stderr; ``on_eof()`` is
    called once, in whichever thread read it, when stdout reaches EOF.
    """

    def __init__(
        self,
        name: str,
        *,
        stdout_fd: int,
        stderr_fd: int,
        stop_fd: int,
        framer: LineFramer,
        on_stderr: Callable[[bytes], None],
        on_stderr_end: Callable[[], None],
        on_eof: Callable[[], None],
    ) -> None:
        self.name = name
        self.framer = framer
        self._fd = stdout_fd
        self._err_fd = stderr_fd  # -1 once at EOF or forgotten (under _err_lock)
        self._stop_r = stop_fd
        self._on_stderr = on_stderr
        self._on_stderr_end = on_stderr_end
        self._on_eof_callback = on_eof
        self._err_lock = threading.Lock()
        self._shut = False  # stop() was called: read nothing more
        self.eof = False  # stdout reached its EOF
        #: when the transport last wrote (``time.monotonic()``): the caller reads the reply
        self.last_send = 0.0
        self._threads: list[threading.Thread] = []
        # the reader role and the line buffer it guards
        self._role = threading.Lock()
        self._role_cv = threading.Condition()
        self._role_owner = 0  # the thread ident holding the role (0: none)
        self._parked: dict[int, tuple[Any, int]] = {}  # callers waiting: (future, slot fd)
        self._slots = Slots()  # what they wait on (park.py)
        self._waiting: list[None] = []  # one entry per caller inside wait_for
        self._caller_poll: Any = None
        self._wake_r = self._wake_w = -1
        if POLL:
            # Reads only after poll() said so: nothing blocks unbounded.
            for fd in (stdout_fd, stderr_fd):
                os.set_blocking(fd, False)
            self._caller_poll = select.poll()
            self._caller_poll.register(stdout_fd, select.POLLIN)
            # A reading caller sleeps in poll(); wakeup() writes here to make it look again.
            self._wake_r, self._wake_w = os.pipe()
            for fd in (self._wake_r, self._wake_w):
                os.set_blocking(fd, False)
            self._caller_poll.register(self._wake_r, select.POLLIN)
            self._caller_poll.register(stop_fd, select.POLLIN)

    def start(self) -> None:
        # daemon: a session the caller forgot to close must not hang interpreter exit
        run = self._pipe_reader if POLL else self._background_reader
        self._threads.append(
            threading.Thread(target=run, name=f"mcpsync-stdio-reader[{self.name}]", daemon=True)
        )
        if not POLL:  # pragma: no cover - no poll(): stderr on a thread of its own
            self._threads.append(threading.Thread(
                target=self._drain_stderr_blocking,
                name=f"mcpsync-stdio-stderr[{self.name}]", daemon=True,
            ))  # fmt: skip
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """The transport closes: read nothing more (the stop pipe wakes every poll)."""
        self._shut = True

    def join(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s each) for the threads, then for the reader role (a
        caller may hold it between its poll and its read); True when no thread reads any
        more: the role is then held until ``forget``. Called from a thread that reads (a
        callback closed the transport), that thread is not waited for: it looks at ``stop``
        before it touches a descriptor again."""
        me = threading.current_thread()
        for thread in self._threads:
            if thread is me:
                continue
            thread.join(timeout=timeout)
            if thread.is_alive():
                return False
        if self._role_owner == get_ident() and self._role.locked():
            return True  # this thread holds it (close() from a callback run while reading)
        if not self._role.acquire(timeout=timeout):
            return False
        self._role_owner = -1  # held for forget(); released there
        return True

    def forget(self) -> None:
        """After a successful ``join``: give the server's pipes up (the transport closes them
        next) and close what this reader made."""
        close_fds(self._wake_r, self._wake_w)
        self._wake_r = self._wake_w = -1
        self._slots.close()  # the free ones; parkers still leaving close theirs
        if self._err_lock.acquire(timeout=1.0):  # no read of it under way
            self._err_fd = -1
            self._err_lock.release()
        self._fd = self._stop_r = -1
        if self._role_owner == -1:
            self._role_owner = 0
            self._role.release()

    def abandon(self) -> None:
        """In a child of ``os.fork()``: close this process's copies of what the reader made.
        The locks are replaced, not taken (their holders did not survive the fork)."""
        self._shut = True
        self._role, self._role_cv = threading.Lock(), threading.Condition()
        self._err_lock = threading.Lock()
        close_fds(self._wake_r, self._wake_w)
        self._wake_r = self._wake_w = -1
        self._slots.abandon()  # (no parker survived the fork)
        self._fd = self._err_fd = self._stop_r = -1
        self._caller_poll = None

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
        while not self._shut:
            if self.eof and out_open:
                both.unregister(self._fd)  # stdout is done: stderr may still talk
                out_open = False
            if not out_open and self._err_fd < 0:
                return  # both pipes at EOF
            # Callers are reading, or just sent and are about to: leave stdout to them.
            busy = self._waiting or time.monotonic() - self.last_send < _CALLER_GRACE
            if busy or not out_open:
                events = errs.poll(_CALLER_GRACE * 1000 if out_open else None)
            else:
                events = both.poll()
            read_out = False
            for fd, _ in events:
                if fd == self._err_fd:
                    if not self.read_stderr():
                        both.unregister(fd)
                        errs.unregister(fd)
                elif fd == self._fd:
                    read_out = True
            if read_out and not self._shut:
                # A caller may hold the role between its poll and its read: wait it out.
                if not self._role.acquire(timeout=_CALLER_GRACE):
                    continue
                self._role_owner = get_ident()
                try:
                    if not self.eof and not self._shut:
                        self._read_once()
                finally:
                    self._release_role()
        self._stderr_leftover()

    def _background_reader(self) -> None:
        """Without ``poll``: blocking reads of stdout (stderr has its own thread)."""
        while not self.eof and not self._shut:
            if not self._role.acquire(blocking=False):
                with self._role_cv:
                    self._role_cv.wait(_CALLER_GRACE)
                continue
            self._role_owner = get_ident()
            try:
                if not self.eof and not self._shut:
                    self._read_once()
            finally:
                self._release_role()

    def _drain_stderr_blocking(self) -> None:  # pragma: no cover - platforms without poll()
        leftover = _STDERR_LEFTOVER
        while self._err_fd >= 0:
            try:
                chunk = os.read(self._err_fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            if self._shut:
                leftover -= len(chunk)
                if leftover < 0:
                    return
            self._on_stderr(chunk)
        self._on_stderr_end()

    # -- stderr, from any thread -----------------------------------------------------------

    def read_stderr(self, limit: int = 65536) -> bool:
        """Read what stderr holds now (non-blocking) and hand it on; False at its EOF.
        Any thread may call it (the reader thread, or a caller building an error)."""
        if not POLL:  # pragma: no cover - its own thread reads it (blocking)
            return self._err_fd >= 0
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
            self._err_fd = -1  # the pipe itself is closed with the others, by the transport
            self._on_stderr_end()
            return False
        self._on_stderr(chunk)
        return True

    def stderr_until_eof(self, seconds: float) -> None:
        """Read stderr to its EOF, for at most ``seconds`` (the server exited: its last
        words are on their way). Without ``poll`` the drain thread is joined instead."""
        deadline = time.monotonic() + seconds
        if not POLL:  # pragma: no cover - the drain thread has them: wait for it
            for thread in self._threads[1:]:
                thread.join(timeout=seconds)
            return
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
            if not poller.poll(0) or not self.read_stderr():
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
            guard.current = self
        waiting, parked, role = self._waiting, self._parked, self._role
        waiting.append(None)  # list.append/pop are atomic: no lock on the hot path
        try:
            while not future.done() and not self.eof and not guard.pending:
                if role.acquire(False):
                    self._role_owner = get_ident()
                    try:
                        if not self._shut:
                            self._read_until(future, deadline)
                    finally:
                        self._role_owner = 0
                        role.release()
                        if parked:
                            self.wake_parked(hand_over=True)
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
            self.wake_parked(hand_over=True)

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
                        self.wake_parked()
                    continue
                self._read_once()
            if future.done() or self.eof or _GUARD.pending or self._shut:
                return

    def wake_parked(self, hand_over: bool = False, everyone: bool = False) -> None:
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
        self.framer.chunk(chunk)
        if self._parked:
            self.wake_parked()

    def _on_eof(self) -> None:
        self.eof = True
        self.wake_parked(everyone=True)
        with self._role_cv:
            self._role_cv.notify_all()
        if not self._shut:
            self._on_eof_callback()
