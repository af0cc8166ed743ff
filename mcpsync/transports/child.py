"""The child process of a stdio transport: its environment, its stderr, its shutdown.

Owns: which of the parent's environment variables a server inherits by default
(``DEFAULT_INHERITED_ENV``), draining the child's stderr (a bounded tail kept for error
messages, every line sent to ``logging``), the shutdown ladder in the order the MCP
specification gives for stdio: close the child's stdin, wait for it to exit, then
SIGTERM, wait, then SIGKILL — to the child's whole process group, so its own children
go too (Windows: Ctrl-Break where it can be delivered, then the job object: the tree),
and what the process lifecycle asks of a stdio transport (``abandon`` after a fork,
``exit_soon`` at interpreter exit). Every wait is bounded. A mixin of ``StdioTransport``
(it works on its state). Starting the process is ``spawn``.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from ..jsonrpc import excerpt
from . import windows
from .park import Slots
from .spawn import ServerProcess, spawn

__all__ = ["DEFAULT_INHERITED_ENV", "default_environment", "ChildProcess", "spawn"]

if sys.platform == "win32":  # pragma: no cover - the reference SDKs' Windows list
    DEFAULT_INHERITED_ENV: tuple[str, ...] = (
        "APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE",
        "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE",
    )  # fmt: skip
else:
    DEFAULT_INHERITED_ENV = (
        "HOME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "TERM",
        "USER",
        "LANG",
        "LC_ALL",
        "TMPDIR",
    )

log = logging.getLogger("mcpsync.stdio")


def default_environment() -> dict[str, str]:
    """The allow-listed part of this process's environment a server inherits by default."""
    env = {}
    for key in DEFAULT_INHERITED_ENV:
        value = os.environ.get(key)
        # Exported shell functions ("() { ...") are a known injection vector; skip them.
        if value is not None and not value.startswith("()"):
            env[key] = value
    return env


class ChildProcess:
    """The process half of ``StdioTransport`` (see the module docstring)."""

    # set by the transport's __init__
    name: str
    process: subprocess.Popen[bytes] | None
    shutdown_timeout: float
    _write_lock: threading.Lock
    _closing: threading.Event
    _stop_r: int
    _server_log: logging.Logger
    _stderr_tail: collections.deque[str]
    _shut: bool
    _role: threading.Lock
    _role_cv: threading.Condition
    _stdin: Any
    _stdin_fd: int
    _fd: int
    _err_fd: int
    _err_lock: threading.Lock
    _caller_poll: Any
    _slots: Slots  # the wake-up slots of parked callers
    _wake_r: int
    _wake_w: int
    _stop_w: int
    _close_reported: bool

    # -- the process lifecycle (mcpsync._lifecycle calls these) ----------------------------

    def abandon(self) -> None:
        """In a child of ``os.fork()``: close this process's copies of the pipes. The server,
        its process group and the parent's reading are left alone: nothing is written, read
        or signalled. The locks are replaced, not taken (their holders did not survive the
        fork); the threads that served the parent do not exist here."""
        self._shut = True
        self._close_reported = True  # the parent's session hears about its own transport
        closing = threading.Event()
        closing.set()
        self._closing = closing
        self._write_lock, self._role, self._role_cv = (
            threading.Lock(), threading.Lock(), threading.Condition()
        )  # fmt: skip
        self._err_lock = threading.Lock()
        for name in ("_wake_r", "_wake_w", "_stop_r", "_stop_w"):
            fd = getattr(self, name)
            setattr(self, name, -1)
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._slots.abandon()  # (no parker survived the fork)
        self._stdin, self._stdin_fd, self._fd, self._caller_poll = None, -1, -1, None
        self._err_fd = -1  # (closed below, with the stderr pipe)
        proc = self.process
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()  # this process's descriptor only
                    except OSError:
                        pass

    #: the exit ladder: (started, deadline, step) once ``exit_soon`` began
    _exit_plan: tuple[float, float, int] | None = None

    def exit_soon(self, deadline: float) -> bool:
        """Interpreter exit, one step per call, never waiting: close the server's stdin
        (every server sees EOF at once), then after a third of the time SIGTERM (Windows:
        Ctrl-Break), after two thirds SIGKILL (the job); True while the server still runs.
        A transport already closing in another thread (the unwinding of a failed bring-up,
        which leaves the rest of its ladder to the background) gets the signals on this
        schedule too, so its server is gone by ``deadline`` whatever that ladder waits."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return False
        now = time.monotonic()
        if self._exit_plan is None:
            self._exit_plan = (now, deadline, 1)
            if self._closing.is_set():  # its ladder closed stdin already, or is about to
                return True
            self.shutdown_timeout = max(0.05, min(self.shutdown_timeout, (deadline - now) / 4))
            if self._write_lock.acquire(False):  # else a write is under way: signals follow
                try:
                    self._shut = True  # writers see it under the lock: no write to a closed fd
                    if proc.stdin is not None and not proc.stdin.closed:
                        try:
                            proc.stdin.close()
                        except OSError:
                            pass
                finally:
                    self._write_lock.release()
            return True
        started, end, step = self._exit_plan
        span = max(end - started, 0.0)
        if step < 2 and now >= started + span / 3:
            self._soft_stop(proc)
            step = 2
        if step < 3 and now >= started + 2 * span / 3:
            self._hard_stop(proc)
            step = 3
        self._exit_plan = (started, end, step)
        return True

    def _drain_stderr(self) -> None:
        proc = self.process
        assert proc is not None and proc.stderr is not None
        fd = proc.stderr.fileno()
        pending = b""
        logger = self._server_log
        tail = self._stderr_tail
        poller = None
        if self._stop_r >= 0:  # bounded reads: stop once closing, even if stderr stays open
            os.set_blocking(fd, False)
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.register(self._stop_r, select.POLLIN)
        leftover = 1 << 20  # once closing: at most this much more of what is already there
        while True:
            if poller is not None:
                closing = self._closing.is_set()
                events = poller.poll(0 if closing else None)
                if not any(ready == fd for ready, _ in events):
                    if closing or any(ready == self._stop_r for ready, _ in events):
                        break
                    continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                break
            if not chunk:
                break
            if self._closing.is_set():
                leftover -= len(chunk)
                if leftover < 0:
                    break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if len(pending) > 65536:  # a huge line without newline: keep only its start
                lines.append(pending[:4096])
                pending = b""
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip("\r")
                tail.append(excerpt(text, 500))
                if logger.isEnabledFor(logging.INFO):
                    logger.info("%s", text)
        if pending:
            tail.append(excerpt(pending, 500))

    def kill(self) -> None:
        """Kill the child and its tree at once, without the ladder (a start the host
        interrupted by closing); a no-op when it never started or already exited."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            if proc is not None and not windows.active():
                self._end_group(proc, 0.5)  # children it left in its group go too
            _reaped(proc)
            return
        log.warning("killing server process %s left over from an interrupted start", proc.pid)
        self._hard_stop(proc)  # the whole group (POSIX) or job (Windows): it has its own
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        _reaped(proc)

    def _shutdown(self, proc: subprocess.Popen[bytes]) -> None:
        timeout = self.shutdown_timeout
        # Writers see the stop pipe and give the lock up at once; bounded all the same.
        self._close_stdin(timeout)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._soft_stop(proc)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._hard_stop(proc)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    log.warning(
                        "mcpsync: server %s (pid %s) did not die when killed", self.name, proc.pid
                    )
        if not windows.active():
            self._end_group(proc, timeout)
        _reaped(proc)  # Windows: closing the job ends what is left of the tree

    def _end_group(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        """POSIX: the server is gone; its own children may not be. They share its process
        group: the same ladder for them (SIGTERM, wait, SIGKILL)."""
        if not self._group_alive(proc.pid):
            return
        self._signal(proc, signal.SIGTERM, group_only=True)
        deadline = time.monotonic() + timeout
        while self._group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        self._signal(proc, signal.SIGKILL, group_only=True)
        # SIGKILL lands asynchronously; give it a moment (an orphan that is already a
        # zombie still counts as a group member until init reaps it, so keep this short).
        deadline = time.monotonic() + 0.05
        while self._group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.005)

    def _soft_stop(self, proc: subprocess.Popen[Any]) -> None:
        """The ladder's second step: SIGTERM to the group (POSIX); Ctrl-Break to its
        process group on Windows, where it can be delivered (there is no SIGTERM there)."""
        if windows.active():
            windows.ctrl_break(proc.pid)
        else:
            self._signal(proc, signal.SIGTERM)

    def _hard_stop(self, proc: subprocess.Popen[Any]) -> None:
        """The last step: SIGKILL to the group (POSIX); the job, so the whole tree, or the
        process alone when it has no job (Windows: TerminateJobObject / TerminateProcess)."""
        if windows.active():
            job = proc.job if isinstance(proc, ServerProcess) else None
            if job is not None:
                job.terminate()
            try:
                proc.kill()
            except OSError:
                pass
        else:
            self._signal(proc, signal.SIGKILL)

    def _close_stdin(self, timeout: float) -> None:
        """Close our end of stdin once no writer can use it (writers stop on the stop pipe)."""
        proc = self.process
        if proc is None or proc.stdin is None or proc.stdin.closed:
            return
        if not self._write_lock.acquire(timeout=timeout):
            return  # a writer is stuck past its bound: the signals end the server instead
        try:
            proc.stdin.close()
        except OSError:
            pass
        finally:
            self._write_lock.release()

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _signal(self, proc: subprocess.Popen[Any], sig: int, group_only: bool = False) -> None:
        """POSIX only: ``sig`` to the server's process group (else to the server)."""
        try:
            os.killpg(proc.pid, sig)
            return
        except (ProcessLookupError, PermissionError):
            if group_only:
                return
        try:
            proc.send_signal(sig)
        except (ProcessLookupError, OSError):
            pass


def _reaped(proc: subprocess.Popen[Any] | None) -> None:
    """Tell the process's spawner (and Windows job) that it was waited for."""
    if isinstance(proc, ServerProcess):
        proc.reaped()
