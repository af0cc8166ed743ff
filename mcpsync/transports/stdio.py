"""stdio transport: spawn the server and speak newline-delimited JSON over its pipes.

Owns: the child process (argv only, never a shell; environment; working directory;
its own process group), writes, close, and the shutdown ladder; reading (the reader
role, and the one thread that drains stderr and reads stdout while no caller does) is
``reader.PipeReader``, framing ``ndjson.LineFramer``, the process half ``child``.

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

Ctrl-C: a KeyboardInterrupt must never land inside the reading or writing of the pipes
(a chunk read but not fed, a reply taken from the table but not settled, the reader role
never released, half a message written). So while the main thread reads or writes (the
only thread Python delivers SIGINT to), SIGINT is deferred: while stdio transports are open,
mcpsync's SIGINT handler stands in for Python's default one (``signal.default_int_handler``,
given back when the last transport closes) and behaves as it does, except inside those
regions, where it only records the signal and wakes the poll; the region then ends at the
next message boundary and raises the KeyboardInterrupt, which cancels the caller's own call
and nothing else. A handler the application installed itself is left alone.

Writes combine: a sender queues its message; the thread that gets the write lock writes all
that is queued, in order, in one ``write()``, and looks again after it let go of the lock (a
sender that found the lock taken left at once: its message is that writer's to write). So
8 threads calling at once make a fraction of a write each, and never sleep on the lock.
Messages over ``_COMBINE_BYTES`` are written by their own sender (waiting for the lock).
Writes are bounded: stdin is non-blocking; a write that does not fit waits in ``poll()``
for at most the request's timeout (``write_timeout`` for messages without one). A message
left half-written by a timeout is finished by the next write before anything else, so the
server never sees two messages spliced (one the main thread's Ctrl-C cut, and what other
threads queued behind it, is written at once by a short-lived ``mcpsync-stdio-finish``
thread); the queued requests not begun fail at once with
``WriteTimeout`` (reported with their ``request_id``: the connection fails those calls).

Descriptors: every thread that reads a descriptor polls it with a stop pipe beside it, so
it ends when the transport closes, and a descriptor is closed only once no thread can read
it any more (the threads joined, the reader role taken); a grandchild that keeps stderr
open cannot keep a thread alive or make one read a reused descriptor number.

Shutdown, in the order the MCP specification gives for stdio: close the child's stdin,
wait for it to exit, then SIGTERM, wait, then SIGKILL — sent to the child's whole
process group so the server's own children go too. Every wait is bounded.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import subprocess
import threading
import time
from _thread import get_ident
from collections.abc import Mapping, Sequence
from typing import IO, Any

from .._lifecycle import forked
from ..errors import ConfigError, ServerExited, TransportError, WriteTimeout
from ..jsonrpc import encode
from .base import Features, Message, OnClose, OnError, OnMessage, Transport
from .child import DEFAULT_INHERITED_ENV, ChildProcess, default_environment, spawn
from .ndjson import _NOISE_LINES, LineFramer, MessageTooLarge
from .park import Slots
from .reader import PipeReader
from .sigint import _GUARD, _MAIN_IDENT

__all__ = ["StdioTransport", "MessageTooLarge", "DEFAULT_INHERITED_ENV", "default_environment"]

log = logging.getLogger("mcpsync.stdio")

#: a message queued for writing: its bytes, and its id when it is a request of ours
_Out = tuple[bytes, Any]
#: the "own message" of a finisher thread (it has none: nothing of what it writes is its call)
_FINISH: _Out = (b"", None)
#: messages up to this size combine; a bigger one is written by its own sender (which may
#: wait for the pipe), so a writer never waits on another caller's big message
_COMBINE_BYTES = 16 * 1024


class StdioTransport(ChildProcess, PipeReader, LineFramer, Transport):
    """Runs an MCP server as a child process; one JSON message per line."""

    kind = "stdio"
    #: an old server may never answer a probe (it reads on), or die on it (start it again);
    #: replies are read in the calling thread where poll() exists
    features = Features(
        bounded_probe=True, restart_on_probe_death=True, caller_reads=hasattr(select, "poll")
    )

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
        write_timeout: float = 10.0,
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
        #: bound of a write that has no timeout of its own (notifications, replies)
        self.write_timeout = write_timeout
        self.process: subprocess.Popen[bytes] | None = None
        #: the fresh copy made to start this server again (``select.respawn``), if any: a
        #: Host closing a bring-up under way closes it too
        self.successor: StdioTransport | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=stderr_tail_lines)
        self._noise: collections.deque[str] = collections.deque(maxlen=_NOISE_LINES)
        self._server_log = logging.getLogger(f"mcpsync.server.{self.name}")
        self._write_lock = threading.Lock()
        self._stdin: IO[bytes] | None = None
        self._stdin_fd = -1
        self._owed = b""  # the rest of a message a timed-out write left half-written
        self._finishers: list[threading.Thread] = []  # writing what a Ctrl-C left (see there)
        self._out: collections.deque[_Out] = collections.deque()  # queued for the writer
        self._reader: threading.Thread | None = None
        self._stderr_reader: threading.Thread | None = None  # only where poll() is missing
        self._err_fd = -1  # stderr, read by the reader thread (or a caller) while open
        self._err_lock = threading.Lock()
        self._err_pending = b""  # the start of a stderr line not ended yet
        self._closing = threading.Event()
        self._shut = False  # = _closing.is_set(), read on the hot path without a call
        # the reader role and the line buffer it guards
        self._role = threading.Lock()
        self._role_cv = threading.Condition()
        self._role_owner = 0  # the thread ident holding the role (0: none)
        self._parked: dict[int, tuple[Any, int]] = {}  # callers waiting: (future, slot fd)
        self._slots = Slots()  # what they wait on (park.py)
        self._waiting: list[None] = []  # one entry per caller inside wait_for
        self._last_send = 0.0
        self._eof = False
        self._parts: list[bytes] = []
        self._part_bytes = 0
        self._discarding = False
        self._discard_head = b""  # the first bytes of the line being discarded
        self._discard_tail = b""  # the last bytes of the line being discarded
        self._discard_unreported = False
        self._fd = -1
        self._caller_poll: Any = None
        self._wake_r = self._wake_w = -1
        self._stop_r = self._stop_w = -1  # readable once closing: ends every poll at once

    # -- Transport -------------------------------------------------------------------

    def describe(self) -> str:
        return f"stdio: {' '.join(self.argv)}"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        if self._closing.is_set() or self.process is not None:
            raise TransportError(f"stdio transport to {self.name!r} was already started or closed")
        try:
            # its own process group, a parent-death signal, a Windows job (transports/spawn.py)
            self.process = spawn(self.argv, env=self.env, cwd=self.cwd)
        except (OSError, ValueError) as exc:
            raise TransportError(f"cannot start server {self.argv[0]!r}: {exc}") from exc
        if self._closing.is_set():  # close() ran while it spawned and saw no process
            self.kill()
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                if pipe is not None:
                    pipe.close()
            raise TransportError(f"stdio transport to {self.name!r} was closed while starting")
        _GUARD.opened()
        self._stdin = self.process.stdin
        assert self._stdin is not None
        self._stdin_fd = self._stdin.fileno()
        self._bind(on_message, on_close, on_error)
        assert self.process.stdout is not None and self.process.stderr is not None
        self._fd = self.process.stdout.fileno()
        if self.features.caller_reads:
            # Reads only after poll() said so, writes wait in poll(): nothing blocks unbounded.
            os.set_blocking(self._fd, False)
            os.set_blocking(self._stdin_fd, False)
            self._caller_poll = select.poll()
            self._caller_poll.register(self._fd, select.POLLIN)
            # A reading caller sleeps in poll(); wakeup() writes here to make it look again.
            self._wake_r, self._wake_w = os.pipe()
            self._stop_r, self._stop_w = os.pipe()
            for fd in (self._wake_r, self._wake_w, self._stop_r, self._stop_w):
                os.set_blocking(fd, False)
            self._caller_poll.register(self._wake_r, select.POLLIN)
            self._caller_poll.register(self._stop_r, select.POLLIN)
            self._err_fd = self.process.stderr.fileno()
            os.set_blocking(self._err_fd, False)
            reader = self._pipe_reader  # one thread: stderr, and stdout while no caller reads
        else:  # pragma: no cover - no poll(): blocking reads, stderr on a thread of its own
            reader = self._background_reader
            self._stderr_reader = threading.Thread(
                target=self._drain_stderr, name=f"mcpsync-stdio-stderr[{self.name}]", daemon=True
            )
            self._stderr_reader.start()
        # daemon: a session the caller forgot to close must not hang interpreter exit
        self._reader = threading.Thread(
            target=reader, name=f"mcpsync-stdio-reader[{self.name}]", daemon=True
        )
        self._reader.start()

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = encode(message) + b"\n"
        if self._shut or self._stdin is None:
            self._check_owner()  # ForkedError in a forked child
            raise TransportError(f"stdio transport to {self.name!r} is closed")
        main = get_ident() == _MAIN_IDENT
        if main:  # a Ctrl-C waits for the message boundary (see the module docstring)
            guard = _GUARD
            if not guard.installed:
                guard.install()
            guard.depth += 1
            guard.current = self  # (left set after: a stale one only gets a spare wake-up)
        # Writes combine (see the module docstring): the message is queued, and the thread
        # holding the write lock writes everything queued, in order, in one write.
        mine = (data, message.get("id") if "method" in message else None)
        bound = self.write_timeout if timeout is None else timeout
        lock = self._write_lock
        try:
            if len(data) <= _COMBINE_BYTES:
                self._out.append(mine)
                if lock.acquire(False):
                    self._write_out(mine, bound, main)
                # else a writer is at work: it writes this message too, or fails its call
            else:  # a big one is written by its own sender: no other caller waits on it
                if not lock.acquire(False) and not lock.acquire(timeout=max(bound, 0.0)):
                    raise WriteTimeout(
                        f"server {self.name!r} did not read its stdin within {bound:g} s "
                        "(another write is still waiting)"
                    )
                self._out.append(mine)  # behind what was queued before: order is kept
                self._write_out(mine, bound, main)
        finally:
            if main:
                guard.depth -= 1
                if guard.pending and guard.depth <= 0:
                    guard.pending = False
                    raise KeyboardInterrupt  # deferred from inside the write

    def _write_out(self, mine: _Out, bound: float, main: bool) -> None:
        """Write what is queued (the write lock is held; released here). What others queue
        meanwhile is this thread's to write too: they found the lock taken and left."""
        lock, queue = self._write_lock, self._out
        first = True  # until this thread's own message went out: its errors are this call's
        while True:
            dead: ServerExited | None = None
            try:
                if self._shut:
                    if not first:
                        return  # closing: what is still queued fails with the session
                    raise TransportError(f"stdio transport to {self.name!r} is closed")
                self._last_send = time.monotonic()  # the caller will read the reply itself
                stalled = self._flush_out(mine, bound, main)
            except (BrokenPipeError, ValueError, OSError) as exc:
                if isinstance(exc, TransportError):  # closing (the stop pipe), or ours timed out
                    if not first:
                        return
                    raise
                dead = self._exit_error("server stopped reading its stdin")
                if not first:
                    return  # (finally: the session ends; this call fails with the others)
                raise dead from exc
            finally:
                lock.release()
                if dead is not None:  # nothing can be sent any more: the session ends now,
                    self._report_close(dead)  # not when the reader gets to the EOF
            first = False
            # Queued after the last look but before the release: look again (a writer that
            # took the lock in between writes it).
            if stalled or not queue or not lock.acquire(False):
                return

    def _flush_out(self, mine: _Out, bound: float, main: bool) -> bool:
        """Write the queue (and first the rest a timed-out write owed); True if the pipe
        stalled (the server did not read within ``bound``, or Ctrl-C cut the wait)."""
        queue = self._out
        while queue:
            items = [queue.popleft()]
            while queue:  # only the lock holder takes from the queue
                items.append(queue.popleft())
            owed = self._owed
            data = items[0][0] if len(items) == 1 else b"".join([d for d, _ in items])
            if owed:
                data = owed + data
                self._owed = b""
            try:
                written = os.write(self._stdin_fd, data)  # one write for all, usually
            except BlockingIOError:
                written = 0
            if written < len(data):
                rest = self._write_rest(data[written:], bound)
                if rest:
                    self._unwritten(items, owed, len(rest), mine, bound, main)
                    return True
        return False

    def _unwritten(
        self, items: list[_Out], owed: bytes, left: int, mine: _Out, bound: float, main: bool
    ) -> None:
        """The last ``left`` bytes of ``owed + items`` did not fit within ``bound``: the message cut
        in two is owed to the next write (the server has its start), the ones not begun are
        failed (``WriteTimeout``, also for what is still queued), or on Ctrl-C queued again."""
        untouched: list[_Out] = []
        cut: _Out | None = None
        for item in reversed(items):
            size = len(item[0])
            if left >= size:
                untouched.append(item)
                left -= size
            else:
                if left > 0:
                    cut = item
                    self._owed = item[0][size - left :]
                break
        else:
            if left > 0:  # none begun, and part of what was owed before is still owed
                self._owed = owed[len(owed) - left :]
        untouched.reverse()
        if main and _GUARD.pending:  # Ctrl-C: its interrupt follows; the others wait
            self._out.extendleft(reversed([i for i in untouched if i is not mine]))
            if self._out or self._owed:
                self._finish_later(bound)
            return
        while self._out:
            untouched.append(self._out.popleft())
        error = f"server {self.name!r} did not read its stdin within {bound:g} s"
        dropped = 0
        for item in untouched:
            if item is not mine and item[1] is not None:
                lost = WriteTimeout(error)
                lost.request_id = item[1]  # type: ignore[attr-defined]  # fails that call
                self._report(lost)
            elif item is not mine:
                dropped += 1
        if dropped:
            log.warning("mcpsync: %s: %d message(s) not written (%s)", self.name, dropped, error)
        self.wakeup()  # the callers of those requests may be reading or parked
        self._wake_parked()
        if cut is mine or any(item is mine for item in untouched):
            raise WriteTimeout(error)

    def _finish_later(self, bound: float) -> None:
        """A Ctrl-C cut the main thread's write: what it leaves (the rest of the message it
        cut, the messages other threads queued, whose senders left them to the lock holder)
        is written by a short-lived thread, as the lock holder would have, within ``bound``;
        else no caller's request went out until someone wrote again (another thread's call
        waited for its timeout, and the server for the rest of its line)."""
        self._finishers = [t for t in self._finishers if t.is_alive()]
        thread = threading.Thread(
            target=self._finish, args=(bound,), name=f"mcpsync-stdio-finish[{self.name}]"
        )
        thread.daemon = True
        self._finishers.append(thread)
        thread.start()

    def _finish(self, bound: float) -> None:
        if not self._write_lock.acquire(timeout=max(bound, 0.0)):
            return  # another writer holds it all along: what is queued is its to write
        try:
            self._write_out(_FINISH, bound, False)  # (releases the lock)
        except Exception as exc:  # noqa: BLE001 - the calls concerned are failed by _unwritten
            log.debug("mcpsync: %s: finishing a cut write: %r", self.name, exc)

    def _write_rest(self, data: bytes, bound: float) -> bytes:
        """Write ``data`` as the pipe takes it, for at most ``bound`` s; return what is left."""
        deadline = time.monotonic() + bound
        if not hasattr(select, "poll"):  # pragma: no cover - blocking pipes there
            os.write(self._stdin_fd, data)
            return b""
        poller = select.poll()
        poller.register(self._stdin_fd, select.POLLOUT)
        if self._stop_r >= 0:
            poller.register(self._stop_r, select.POLLIN)
        view = memoryview(data)
        main = get_ident() == _MAIN_IDENT
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if main:  # a Ctrl-C stops the wait; the rest is owed to the next write
                if _GUARD.pending:
                    break
                remaining = min(remaining, 0.05)
            for fd, events in poller.poll(remaining * 1000):
                if fd == self._stop_r:
                    raise TransportError(f"stdio transport to {self.name!r} is closed")
                if events & (select.POLLERR | select.POLLHUP):
                    raise BrokenPipeError
            try:
                view = view[os.write(self._stdin_fd, view) :]
            except BlockingIOError:
                continue
        return bytes(view)

    def close(self) -> None:
        if forked(self):  # in a child of os.fork(): release its copies only (child.py)
            self.abandon()
            return
        main = get_ident() == _MAIN_IDENT
        if main:  # a Ctrl-C during close() waits until it is done (bounded)
            _GUARD.depth += 1
            _GUARD.current = self
        try:
            if self._closing.is_set():
                self._join_threads()
                return
            self._shut = True
            self._closing.set()
            if self._stop_w >= 0:
                try:
                    os.write(self._stop_w, b"x")  # every poll on the stop pipe returns now
                except OSError:
                    pass
            proc = self.process
            if proc is not None:
                try:
                    self._shutdown(proc)
                    self._join_threads()
                finally:
                    _GUARD.closed()
            self._report_close(None)
        finally:
            if main:
                _GUARD.leave()

    # -- internals -------------------------------------------------------------------

    def stderr_tail(self) -> str:
        """The server's last stderr lines (bounded), what its stderr holds now read first:
        a line written before a reply that was just read is in the tail."""
        if self._err_fd >= 0 and not self._closing.is_set():
            self._read_stderr()  # non-blocking, under the stderr lock
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
        else:  # its last words are on their way (bounded)
            self._stderr_until_eof(0.5)
        if code is not None:  # one wording for an exit, whichever pipe noticed it first
            what = "server closed its stdout"
        return ServerExited(
            f"server {self.name!r}: {what}", exit_code=code, stderr_tail=self.stderr_tail()
        )

    def _join_threads(self) -> None:
        """Join the threads, then close each descriptor no thread can read any more."""
        proc = self.process
        alive = []
        for thread in (self._reader, self._stderr_reader, *self._finishers):
            if thread is None or thread is threading.current_thread():
                continue
            thread.join(timeout=self.shutdown_timeout)
            if thread.is_alive():
                alive.append(thread)
                log.warning("mcpsync: thread %s did not stop", thread.name)
        if alive:  # leave their descriptors open rather than let a reused number be read
            return
        # A caller may still hold the reader role (between poll and read): wait it out,
        # unless it is this thread (close() from a callback run while reading).
        mine = self._role_owner == get_ident() and self._role.locked()
        role = mine or self._role.acquire(timeout=self.shutdown_timeout)
        try:
            if not role:
                log.warning("mcpsync: a caller still reads %s; its pipes stay open", self.name)
                return
            for fd in (self._wake_r, self._wake_w, self._stop_r, self._stop_w):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._wake_r = self._wake_w = self._stop_r = self._stop_w = -1
            self._slots.close()  # the free ones; parkers still leaving close theirs
            if self._err_lock.acquire(timeout=self.shutdown_timeout):  # no read of it under way
                self._err_fd = -1
                self._err_lock.release()
            if proc is not None:
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        try:
                            pipe.close()
                        except OSError:
                            pass
            self._fd = -1
            self._close_stdin(self.shutdown_timeout)
        finally:
            if role and not mine:
                self._role.release()
