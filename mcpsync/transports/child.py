"""The child process of a stdio transport: its environment, its stderr, its shutdown.

Owns: which of the parent's environment variables a server inherits by default
(``DEFAULT_INHERITED_ENV``), draining the child's stderr (a bounded tail kept for error
messages, every line sent to ``logging``), the shutdown ladder in the order the MCP
specification gives for stdio: close the child's stdin, wait for it to exit, then
SIGTERM, wait, then SIGKILL — to the child's whole process group, so its own children
go too (Windows: Ctrl-Break where it can be delivered, then the job object: the tree),
and what the process lifecycle asks of a stdio transport (``abandon`` after a fork,
``exit_soon`` at interpreter exit). Every wait is bounded. ``ChildProcess`` is a member of
``StdioTransport``: it knows the process and its stderr text, nothing of the pipes' reading
or writing; closing the server's stdin (step one of the ladder) is the writer's, handed in
as a callback. Starting the process is ``spawn``.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from ..jsonrpc import excerpt
from . import windows
from .spawn import ServerProcess, spawn

__all__ = ["DEFAULT_INHERITED_ENV", "default_environment", "ChildProcess", "CloseStdin", "spawn"]

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

#: interpreter exit, a server whose close is under way in another thread (its stdin closed,
#: nobody waiting for it): seconds from its SIGTERM to its SIGKILL
EXIT_HURRY = 0.1


def default_environment() -> dict[str, str]:
    """The allow-listed part of this process's environment a server inherits by default."""
    env = {}
    for key in DEFAULT_INHERITED_ENV:
        value = os.environ.get(key)
        # Exported shell functions ("() { ...") are a known injection vector; skip them.
        if value is not None and not value.startswith("()"):
            env[key] = value
    return env


#: closes the server's stdin once no write uses it; the argument bounds the wait for a
#: write under way (None: do not wait); True when stdin is closed (or was)
CloseStdin = Callable[[float | None], bool]


class ChildProcess:
    """The server process of a stdio transport (see the module docstring).

    ``argv``, ``env``, ``cwd``: what ``start`` runs; ``close_stdin``: the writer's way of
    closing the server's stdin (``CloseStdin``); ``shutdown_timeout``: the bound of each
    step of the ladder; ``stderr_tail_lines``: how many stderr lines the tail keeps.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: str | None,
        name: str,
        close_stdin: CloseStdin,
        shutdown_timeout: float,
        stderr_tail_lines: int,
    ) -> None:
        self.argv, self.env, self.cwd, self.name = argv, env, cwd, name
        self.shutdown_timeout = shutdown_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._close_stdin = close_stdin
        #: the server's last stderr lines (excerpts), oldest first
        self.tail: collections.deque[str] = collections.deque(maxlen=stderr_tail_lines)
        self._pending = b""  # the start of a stderr line not ended yet
        self._log = logging.getLogger(f"mcpsync.server.{name}")
        #: the exit ladder: (started, deadline, step) once ``exit_soon`` began
        self._exit_plan: tuple[float, float, int] | None = None

    def start(self) -> subprocess.Popen[bytes]:
        """Start the server (``spawn``: its own process group, a parent-death signal, a
        Windows job). Raises what ``Popen`` raises."""
        self.process = spawn(self.argv, env=self.env, cwd=self.cwd)
        return self.process

    # -- stderr text -------------------------------------------------------------------------

    def stderr_chunk(self, chunk: bytes) -> None:
        """Bytes read from the server's stderr: every complete line goes to the tail and to
        ``logging`` (``mcpsync.server.<name>``, INFO)."""
        pending = self._pending + chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > 65536:  # a huge line without newline: keep only its start
            lines.append(pending[:4096])
            pending = b""
        self._pending = pending
        logger, tail = self._log, self.tail
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            tail.append(excerpt(text, 500))
            if logger.isEnabledFor(logging.INFO):
                logger.info("%s", text)

    def stderr_ended(self) -> None:
        """The server's stderr reached its EOF: a last line without newline joins the tail."""
        if self._pending:
            self.tail.append(excerpt(self._pending, 500))
            self._pending = b""

    def exit_code(self, wait: float) -> int | None:
        """The server's exit code, waiting at most ``wait`` s for it (None: still running)."""
        proc = self.process
        if proc is None:
            return None
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None

    # -- the process lifecycle (mcpsync.runtime.lifecycle calls these, through the transport) -------

    def abandon(self) -> None:
        """In a child of ``os.fork()``: close this process's copies of the pipes. The server,
        its process group and the parent's reading are left alone."""
        proc = self.process
        if proc is not None:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()  # this process's descriptor only
                    except OSError:
                        pass

    def exit_soon(self, deadline: float, closing: bool) -> bool:
        """Interpreter exit, one step per call, never waiting: close the server's stdin
        (every server sees EOF at once), then after a third of the time SIGTERM (Windows:
        Ctrl-Break), after two thirds SIGKILL (the job); True while the server still runs.
        ``closing``: the transport is closing in another thread already (the unwinding of a
        failed bring-up, or a close its caller stopped waiting for: both leave the rest of
        the ladder to the background): its stdin is closed and nobody waits for it, so its
        ladder is hurried: SIGTERM now, SIGKILL ``EXIT_HURRY`` s later (within ``deadline``).
        A script or the CLI whose bring-up failed then exits right after its error, not
        after the graces (the 2.7 s a server deaf to EOF and SIGTERM cost before)."""
        proc = self.process
        if proc is None or proc.poll() is not None:
            return False
        now = time.monotonic()
        if self._exit_plan is None:
            if closing:  # its ladder closed stdin already, or is about to
                self._soft_stop(proc)
                # SIGKILL at two thirds of the plan's span (below): EXIT_HURRY from now
                self._exit_plan = (now, min(deadline, now + 1.5 * EXIT_HURRY), 2)
                return True
            self._exit_plan = (now, deadline, 1)
            self.shutdown_timeout = max(0.05, min(self.shutdown_timeout, (deadline - now) / 4))
            self._close_stdin(None)  # (a write under way keeps it: the signals follow)
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

    def shutdown(self) -> None:
        """The ladder: stdin closed, wait; SIGTERM (Ctrl-Break), wait; SIGKILL (the job),
        wait; then what is left of its process group. Each wait ``shutdown_timeout``."""
        proc = self.process
        if proc is None:
            return
        timeout = self.shutdown_timeout
        self._close_stdin(timeout)  # (a writer stuck past its bound: the signals end it)
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
