"""Locks shared by the threads of this process and by other processes, on a lock file.

Owns: :func:`file_lock` (the one lock object of this process for a lock-file path) and
its ``hold(exclusive=, timeout=, prepare=)`` context manager: a thread lock, re-entered
by the thread holding it, in front of ``flock`` on the file (POSIX; between processes;
per open file description, hence the thread lock). Both waits are bounded
(:class:`~mcpsync.errors.LockTimeout` naming the lock file); the lock file is opened as
:func:`mcpsync.runtime.cachedir.open_private` says (no symbolic link, 0600). A forked child starts
with every lock of its process free. Used by the token stores (:mod:`.storage`,
:mod:`.keyring_store`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

from ..errors import ConfigError, LockTimeout, UnsafePathError
from ..runtime.cachedir import open_private

try:  # POSIX advisory locks; absent on Windows
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["file_lock"]


class _FileLock:
    """The lock of one lock file in this process: a thread lock (re-entered by the thread
    holding it) in front of ``flock`` on the file (between processes; per open file
    description, hence the thread lock). Both waits are bounded; the ``flock`` one polls
    (no event crosses processes), backing off from 0.5 ms to 20 ms."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._exclusive = False

    def _timeout(self, timeout: float, held_by: str) -> LockTimeout:
        return LockTimeout(
            f"the lock {self.path} was not obtained within {timeout:g} s (held by {held_by})",
            path=self.path,
            timeout=timeout,
        )

    @contextlib.contextmanager
    def hold(
        self, *, exclusive: bool, timeout: float, prepare: Callable[[], None]
    ) -> Iterator[None]:
        me = threading.get_ident()
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._owner == me:  # re-entered (a get inside locked())
                if exclusive and not self._exclusive:
                    raise RuntimeError(f"{self.path}: exclusive use inside a shared hold")
                self._depth += 1
                outer = False
            else:
                while self._owner is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise self._timeout(timeout, "another thread of this process")
                    self._cond.wait(left)
                self._owner, self._depth, self._exclusive = me, 1, exclusive
                outer = True
        fd = -1
        try:
            if outer:
                prepare()
                fd = self._flock(exclusive, deadline, timeout)
            yield
        finally:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._cond.notify()

    def _flock(self, exclusive: bool, deadline: float, timeout: float) -> int:
        if fcntl is None:  # pragma: no cover - Windows: the thread lock only
            return -1
        try:
            fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        except UnsafePathError as exc:
            raise UnsafePathError(
                f"lock file {self.path}: {exc}", path=exc.path, reason=exc.reason
            ) from None
        except OSError as exc:
            raise ConfigError(f"lock file {self.path}: cannot open: {exc.strerror}") from None
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        pause = 0.0005
        try:
            while True:
                try:
                    fcntl.flock(fd, mode)
                    return fd
                except BlockingIOError:
                    pass
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._timeout(timeout, "another process")
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.02)
        except BaseException:
            os.close(fd)
            raise


_locks: dict[str, _FileLock] = {}
_locks_guard = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child starts with every lock free in this process (a thread of the parent
    that held one does not exist here); a ``flock`` the parent holds stays the parent's."""
    global _locks_guard
    _locks_guard = threading.Lock()
    for lock in _locks.values():
        lock._cond = threading.Condition(threading.Lock())
        lock._owner, lock._depth = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def file_lock(path: str) -> _FileLock:
    """The one :class:`_FileLock` of this process for the lock file ``path``."""
    key = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = _FileLock(key)
        return lock
