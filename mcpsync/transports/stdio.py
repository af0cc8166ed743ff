"""stdio transport: spawn the server and speak newline-delimited JSON over its pipes.

Owns: the child process (argv only, never a shell; environment; working directory;
its own process group), the stdout reader thread, the stderr drain thread (a bounded
tail kept for error messages, every line sent to ``logging``), and the shutdown ladder.

Environment: by default the child gets only a small allow-list of the parent's
variables (``DEFAULT_INHERITED_ENV``, as the reference SDKs do, so secrets in the
parent's environment do not leak into every server), plus the entry's own ``env``.
Pass ``inherit_env=True`` to give it the whole parent environment.

Reading, without a thread hop on the hot path: a caller waiting for its response reads
stdout itself (it takes the "reader role", reads, and delivers every message it finds,
its own and others'), so a sequential call costs one wake-up, as in a bare loop. A
background reader thread holds the role only while no caller is waiting, so
notifications and server requests are read when the client is idle. On platforms
without ``select.poll`` the background thread does all the reading.

Shutdown, in the order the MCP specification gives for stdio: close the child's stdin,
wait for it to exit, then SIGTERM, wait, then SIGKILL — sent to the child's whole
process group so the server's own children go too. Every wait is bounded.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from ..errors import ConfigError, ProtocolError, ServerExited, TransportError
from ..jsonrpc import decode, encode, excerpt
from .base import Message, OnClose, OnError, OnMessage, Transport

__all__ = ["StdioTransport", "MessageTooLarge", "DEFAULT_INHERITED_ENV", "default_environment"]

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

#: how many non-JSON stdout lines ``stdout_noise()`` keeps
_NOISE_LINES = 20
#: after a send, the background reader leaves stdout to the caller this long (seconds)
_CALLER_GRACE = 0.005


# The top-level id of a response, from the first or last bytes of a line too long to parse:
# right after the opening brace's first members, or as the last member before the final brace.
_HEAD_ID = re.compile(rb'^\s*\{(?:[^{}\[\]]*?,)?\s*"id"\s*:\s*(-?\d+)\s*[,}]')
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*(-?\d+)\s*\}\s*$')


class MessageTooLarge(ProtocolError):
    """A line over ``max_message_bytes`` was discarded; ``request_id`` names the request it
    answered when that could be read from its first or last bytes (else None).

    Reported through ``on_error``: the connection fails that request with it at once."""

    def __init__(self, message: str, *, request_id: int | None) -> None:
        self.request_id = request_id
        super().__init__(message)


def default_environment() -> dict[str, str]:
    """The allow-listed part of this process's environment a server inherits by default."""
    env = {}
    for key in DEFAULT_INHERITED_ENV:
        value = os.environ.get(key)
        # Exported shell functions ("() { ...") are a known injection vector; skip them.
        if value is not None and not value.startswith("()"):
            env[key] = value
    return env


class StdioTransport(Transport):
    """Runs an MCP server as a child process; one JSON message per line."""

    kind = "stdio"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = False,
        name: str | None = None,
        max_message_bytes: int = 512 * 1024 * 1024,
        stderr_tail_lines: int = 40,
        shutdown_timeout: float = 2.0,
    ) -> None:
        if isinstance(argv, (str, bytes)) or not argv:
            raise ConfigError(
                "stdio server command must be a non-empty list of arguments, not a shell string"
            )
        self.argv = [os.fspath(a) for a in argv]
        self.name = name or os.path.basename(self.argv[0])
        self.cwd = os.fspath(cwd) if cwd is not None else None
        base = dict(os.environ) if inherit_env else default_environment()
        self.env = {**base, **(dict(env) if env else {})}
        self.max_message_bytes = max_message_bytes
        self.shutdown_timeout = shutdown_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=stderr_tail_lines)
        self._noise: collections.deque[str] = collections.deque(maxlen=_NOISE_LINES)
        self._server_log = logging.getLogger(f"mcpsync.server.{self.name}")
        self._write_lock = threading.Lock()
        self._stdin: IO[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._stderr_reader: threading.Thread | None = None
        self._closing = threading.Event()
        # the reader role and the line buffer it guards
        self._role = threading.Lock()
        self._role_cv = threading.Condition()
        self._parked: dict[int, tuple[Any, threading.Event]] = {}  # callers waiting for the role
        self._waiting: list[None] = []  # one entry per caller inside wait_for
        self._last_send = 0.0
        self._eof = False
        self._parts: list[bytes] = []
        self._part_bytes = 0
        self._discarding = False
        self._discard_tail = b""  # the last bytes of the line being discarded
        self._discard_unreported = False
        self._fd = -1
        self._caller_poll: Any = None
        self._wake_r = self._wake_w = -1
        self.wait_for = self._wait_for if hasattr(select, "poll") else None

    # -- Transport -------------------------------------------------------------------

    def describe(self) -> str:
        return f"stdio: {' '.join(self.argv)}"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        if self._closing.is_set() or self.process is not None:
            raise TransportError(f"stdio transport to {self.name!r} was already started or closed")
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,  # always a pipe: works where sys.stderr has no fileno
                env=self.env,
                cwd=self.cwd,
                # its own process group, for the shutdown ladder
                start_new_session=(os.name == "posix"),
                bufsize=0,
            )
        except (OSError, ValueError) as exc:
            raise TransportError(f"cannot start server {self.argv[0]!r}: {exc}") from exc
        self._stdin = self.process.stdin
        self._bind(on_message, on_close, on_error)
        self._stderr_reader = threading.Thread(
            target=self._drain_stderr, name=f"mcpsync-stdio-stderr[{self.name}]", daemon=True
        )
        assert self.process.stdout is not None
        self._fd = self.process.stdout.fileno()
        if self.wait_for is not None:
            self._caller_poll = select.poll()
            self._caller_poll.register(self._fd, select.POLLIN)
            # A reading caller sleeps in poll(); wakeup() writes here to make it look again.
            self._wake_r, self._wake_w = os.pipe()
            os.set_blocking(self._wake_r, False)
            os.set_blocking(self._wake_w, False)
            self._caller_poll.register(self._wake_r, select.POLLIN)
        # daemon: a session the caller forgot to close must not hang interpreter exit
        self._reader = threading.Thread(
            target=self._background_reader, name=f"mcpsync-stdio-reader[{self.name}]", daemon=True
        )
        self._stderr_reader.start()
        self._reader.start()

    def send(self, message: Message, *, timeout: float | None = None) -> None:
        data = encode(message) + b"\n"
        stdin = self._stdin
        if stdin is None or self._closing.is_set():
            raise TransportError(f"stdio transport to {self.name!r} is closed")
        try:
            with self._write_lock:
                self._last_send = time.monotonic()  # the caller will read the reply itself
                stdin.write(data)  # bufsize=0: a raw pipe, one write per message
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise self._exit_error("server stopped reading its stdin") from exc

    def close(self) -> None:
        if self._closing.is_set():
            self._join_threads()
            return
        self._closing.set()
        proc = self.process
        if proc is not None:
            self._shutdown(proc)
        self._join_threads()
        self._report_close(None)

    # -- internals -------------------------------------------------------------------

    def stderr_tail(self) -> str:
        """The server's last stderr lines (bounded)."""
        return "\n".join(self._stderr_tail)

    def stdout_noise(self) -> list[str]:
        """The last (up to 20) stdout lines that were not JSON-RPC, oldest first."""
        return list(self._noise)

    def _exit_error(self, what: str) -> ServerExited:
        proc = self.process
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
        if self._stderr_reader is not None:
            self._stderr_reader.join(timeout=0.5)
        return ServerExited(
            f"server {self.name!r}: {what}", exit_code=code, stderr_tail=self.stderr_tail()
        )

    # -- reading: the reader role -------------------------------------------------------

    def _wait_for(self, future: Any, deadline: float) -> None:
        """Read stdout in the calling thread until ``future`` is done or ``deadline`` passes.

        ``future``: anything with ``done()``; ``deadline``: a ``time.monotonic()`` value.
        """
        waiting = self._waiting
        waiting.append(None)  # list.append/pop are atomic: no lock on the hot path
        try:
            while not future.done() and not self._eof:
                if self._role.acquire(blocking=False):
                    try:
                        self._read_until(future, deadline)
                    finally:
                        self._role.release()
                        if self._parked:
                            self._wake_parked(hand_over=True)
                    return
                # Another thread reads; it wakes us when our reply came or it is done.
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._park(future, min(remaining, 0.05))
        finally:
            waiting.pop()

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
                    self._drain_wakeups()
                    if self._parked:  # their replies may have been resolved elsewhere
                        self._wake_parked()
                    continue
                self._read_once()
            if future.done() or self._eof:
                return

    def _park(self, future: Any, timeout: float) -> None:
        event = threading.Event()
        key = id(event)
        self._parked[key] = (future, event)
        try:
            # Registered first, then looked: a reader that finishes now will see us.
            if self._role.locked() and not future.done():
                event.wait(timeout)
        finally:
            self._parked.pop(key, None)

    def _wake_parked(self, hand_over: bool = False, everyone: bool = False) -> None:
        """Wake parked callers whose reply came; with ``hand_over`` also one to take the role."""
        need_reader = hand_over
        for future, event in list(self._parked.values()):
            if everyone or future.done():
                event.set()
            elif need_reader:
                event.set()
                need_reader = False

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

    def _background_reader(self) -> None:
        """Reads while no caller does (notifications, server requests, idle EOF)."""
        poller = select.poll() if self.wait_for is not None else None
        if poller is not None:
            poller.register(self._fd, select.POLLIN)
        while not self._eof and not self._closing.is_set():
            if poller is not None:
                with self._role_cv:
                    # Callers are reading, or just sent and are about to: leave it to them.
                    if self._waiting or time.monotonic() - self._last_send < _CALLER_GRACE:
                        self._role_cv.wait(_CALLER_GRACE)
                        continue
                if not poller.poll(100):
                    continue
            if not self._role.acquire(blocking=False):
                continue
            try:
                if not self._eof:
                    self._read_once()
            finally:
                self._role.release()
            if self._parked:
                self._wake_parked(hand_over=True)

    def _read_once(self) -> None:
        """Read what stdout has (the caller holds the role) and deliver complete lines."""
        try:
            # 64 KiB: under glibc's mmap threshold (a 256 KiB buffer costs an mmap/munmap
            # pair and page faults on every read, ~13 us a call).
            chunk = os.read(self._fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            self._on_eof()
            return
        if (
            chunk[-1] == 10
            and not self._parts
            and not self._discarding
            and chunk.find(b"\n") == len(chunk) - 1
        ):
            self._deliver_line(chunk)  # exactly one whole line: the common case
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

    def _feed(self, chunk: bytes) -> None:
        start = 0
        limit = self.max_message_bytes
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                rest = chunk[start:]
                if rest and not self._discarding:
                    self._parts.append(rest)
                    self._part_bytes += len(rest)
                    if self._part_bytes > limit:
                        self._too_large(b"".join(self._parts)[:512])
                elif rest:
                    self._discard_tail = (self._discard_tail + rest)[-512:]
                return
            piece = chunk[start:newline]
            start = newline + 1
            if self._discarding:
                self._discarding = False
                if self._discard_unreported:  # the id may be the last member: `..., "id": 7}`
                    found = _TAIL_ID.search((self._discard_tail + piece)[-512:])
                    self._report_too_large(int(found.group(1)) if found else None)
                self._discard_tail = b""
                continue
            if self._parts:
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts.clear()
                self._part_bytes = 0
            self._deliver_line(piece)

    def _too_large(self, head: bytes) -> None:
        """The line being read went over the limit: drop it up to its newline, and say so."""
        self._parts.clear()
        self._part_bytes = 0
        self._discarding = True
        self._discard_tail = b""
        found = _HEAD_ID.match(head)
        # A response whose id comes first (or a request): report now; else at its last bytes.
        self._discard_unreported = found is None and b'"method"' not in head
        if not self._discard_unreported:
            self._report_too_large(int(found.group(1)) if found else None)

    def _report_too_large(self, request_id: int | None) -> None:
        self._report(MessageTooLarge(
            f"server {self.name!r} sent a message over {self.max_message_bytes} bytes; it was discarded",
            request_id=request_id,
        ))  # fmt: skip

    def _deliver_line(self, line: bytes) -> None:
        if line.isspace() or not line:
            return
        try:
            message = decode(line)
        except ProtocolError as exc:
            self._noise.append(excerpt(line, 200))
            self._report(ProtocolError(f"server {self.name!r} wrote to stdout: {exc}"))
            return
        self._deliver(message)

    def _drain_stderr(self) -> None:
        proc = self.process
        assert proc is not None and proc.stderr is not None
        fd = proc.stderr.fileno()
        pending = b""
        logger = self._server_log
        tail = self._stderr_tail
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
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

    def _shutdown(self, proc: subprocess.Popen[bytes]) -> None:
        timeout = self.shutdown_timeout
        try:
            if proc.stdin is not None:
                with self._write_lock:
                    proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(proc, signal.SIGKILL)
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    log.warning(
                        "mcpsync: server %s (pid %s) did not die after SIGKILL", self.name, proc.pid
                    )
        # The server is gone; its own children may not be. They share its process group:
        # the same ladder for them (SIGTERM, wait, SIGKILL).
        if os.name == "posix" and self._group_alive(proc.pid):
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

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _signal(self, proc: subprocess.Popen[Any], sig: int, group_only: bool = False) -> None:
        if os.name == "posix":
            try:
                os.killpg(proc.pid, sig)
                return
            except (ProcessLookupError, PermissionError):
                if group_only:
                    return
        if group_only:
            return
        try:
            proc.send_signal(sig)
        except (ProcessLookupError, OSError):
            pass

    def _join_threads(self) -> None:
        proc = self.process
        for thread in (self._reader, self._stderr_reader):
            if thread is None or thread is threading.current_thread():
                continue
            thread.join(timeout=self.shutdown_timeout)
            if thread.is_alive():
                log.warning("mcpsync: thread %s did not stop", thread.name)
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_r = self._wake_w = -1
        if proc is not None:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
