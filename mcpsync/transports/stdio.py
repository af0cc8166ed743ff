"""stdio transport: spawn the server and speak newline-delimited JSON over its pipes.

Owns: the transport itself, its writes and its close, made of two members with a declared
interface between them: ``child`` (``child.ChildProcess``: spawn, the stderr tail, the
shutdown ladder) and ``reader`` (``reader.PipeReader``: the one reader thread, with the
framing, ``ndjson.LineFramer``). They know nothing of the transport: what they need is given
to their constructors (descriptors, callbacks).

Environment: by default the child gets only a small allow-list of the parent's
variables (``DEFAULT_INHERITED_ENV``, as the reference SDKs do, so secrets in the
parent's environment do not leak into every server), plus the entry's own ``env``.
Pass ``inherit_env=True`` to give it the whole parent environment.

Reading, without a thread hop on the hot path: a caller waiting for its response reads
stdout itself (it takes the "reader role", reads, and delivers every message it finds,
its own and others'), so a sequential call costs one wake-up, as in a bare loop. A
background reader thread holds the role only while no caller is waiting, so
notifications and server requests are read when the client is idle. On platforms
without ``select.poll`` the background thread does all the reading. All of it is
``reader.PipeReader``.

Ctrl-C: a KeyboardInterrupt must never land inside the reading or writing of the pipes
(a chunk read but not fed, a reply taken from the table but not settled, the reader role
never released, half a message written, the count of what a write put out lost). So while
the main thread reads or writes (the only thread Python delivers SIGINT to), SIGINT is
deferred: while stdio transports are open, mcpsync's SIGINT handler (``sigint.py``) stands
in for Python's default one (``signal.default_int_handler``, given back when the last
transport closes) and behaves as it does, except inside those regions, where it only
records the signal and wakes the poll; the region then ends at the next message boundary
and raises the KeyboardInterrupt, which cancels the caller's own call and nothing else. A
handler the application installed itself is left alone.

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

Descriptors: every thread that reads a descriptor polls it with a stop pipe beside them, so
it ends when the transport closes, and a descriptor is closed only once no thread can read
it any more (the reader joined, the reader role taken); a grandchild that keeps stderr open cannot keep a thread alive or make one
read a reused descriptor number.

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

from ..errors import ConfigError, ServerExited, TransportError, WriteTimeout
from ..jsonrpc import encode
from ..runtime.lifecycle import forked
from .base import Features, Message, OnClose, OnError, OnMessage, Transport
from .child import DEFAULT_INHERITED_ENV, ChildProcess, default_environment
from .ndjson import LineFramer, MessageTooLarge
from .reader import POLL, PipeReader, close_fds
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


class StdioTransport(Transport):
    """Runs an MCP server as a child process; one JSON message per line."""

    kind = "stdio"
    #: an old server may never answer a probe (it reads on), or die on it (start it again);
    #: replies are read in the calling thread where poll() exists
    features = Features(bounded_probe=True, restart_on_probe_death=True, caller_reads=POLL)

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
        argv = [os.fspath(a) for a in argv]
        self.name = name or os.path.basename(argv[0])
        base = dict(os.environ) if inherit_env else default_environment()
        self.child = ChildProcess(
            argv, env={**base, **(dict(env) if env else {})},
            cwd=os.fspath(cwd) if cwd is not None else None, name=self.name,
            close_stdin=self._close_stdin, shutdown_timeout=shutdown_timeout,
            stderr_tail_lines=stderr_tail_lines,
        )  # fmt: skip
        self.max_message_bytes = max_message_bytes
        #: bound of a write that has no timeout of its own (notifications, replies)
        self.write_timeout = write_timeout
        #: the reader (thread, framing), made by ``start``
        self.reader: PipeReader | None = None
        self.framer = LineFramer(self.name, max_message_bytes, self._deliver, self._report)
        #: the fresh copy made to start this server again (``select.respawn``), if any: a
        #: Host closing a bring-up under way closes it too
        self.successor: StdioTransport | None = None
        self._write_lock = threading.Lock()
        self._stdin: IO[bytes] | None = None
        self._stdin_fd = -1
        self._owed = b""  # the rest of a message a timed-out write left half-written
        self._finishers: list[threading.Thread] = []  # writing what a Ctrl-C left (see there)
        self._out: collections.deque[_Out] = collections.deque()  # queued for the writer
        self._closing = threading.Event()
        self._shut = False  # = _closing.is_set(), read on the hot path without a call
        self._stop_r = self._stop_w = -1  # readable once closing: ends every poll at once
        self._opened = False  # counted in the SIGINT guard's open transports

    # -- what the child holds (kept as the transport's attributes) -----------------------

    @property
    def argv(self) -> list[str]:
        return self.child.argv

    @property
    def env(self) -> dict[str, str]:
        return self.child.env

    @env.setter
    def env(self, value: dict[str, str]) -> None:
        self.child.env = value

    @property
    def cwd(self) -> str | None:
        return self.child.cwd

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.child.process

    @process.setter
    def process(self, value: subprocess.Popen[bytes] | None) -> None:
        self.child.process = value

    @property
    def shutdown_timeout(self) -> float:
        return self.child.shutdown_timeout

    @property
    def stderr_tail_lines(self) -> int:
        return self.child.tail.maxlen or 0

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
            process = self.child.start()
        except (OSError, ValueError) as exc:
            raise TransportError(f"cannot start server {self.argv[0]!r}: {exc}") from exc
        if self._closing.is_set():  # close() ran while it spawned and saw no process
            self.kill()
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
            raise TransportError(f"stdio transport to {self.name!r} was closed while starting")
        _GUARD.opened()
        self._opened = True
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        self._stdin = process.stdin
        self._stdin_fd = process.stdin.fileno()
        self._bind(on_message, on_close, on_error)
        out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
        if POLL:  # writes wait in poll() (and the reader reads after poll() said so)
            os.set_blocking(self._stdin_fd, False)
            self._stop_r, self._stop_w = os.pipe()
            for fd in (self._stop_r, self._stop_w):
                os.set_blocking(fd, False)
        self.reader = PipeReader(
            self.name, stdout_fd=out_fd, stderr_fd=err_fd, stop_fd=self._stop_r,
            framer=self.framer, on_stderr=self.child.stderr_chunk,
            on_stderr_end=self.child.stderr_ended, on_eof=self._on_eof,
        )  # fmt: skip
        self.reader.start()

    def wait_for(self, future: Any, deadline: float) -> None:
        """Read stdout in the calling thread until ``future`` is done or ``deadline`` passes
        (``reader.PipeReader.wait_for``)."""
        reader = self.reader
        if reader is not None:
            reader.wait_for(future, deadline)

    def wakeup(self) -> None:
        """Make a caller that reads stdout look at its future again (resolved elsewhere)."""
        reader = self.reader
        if reader is not None:
            reader.wakeup()

    def _on_eof(self) -> None:
        """The reader saw stdout's EOF: the session ends (unless it is closing anyway)."""
        if not self._closing.is_set():
            self._report_close(self._exit_error("server closed its stdout"))

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        started = time.monotonic()
        data = encode(message) + b"\n"
        if self._shut or self._stdin is None:
            self._check_owner()  # ForkedError in a forked child
            raise TransportError(f"stdio transport to {self.name!r} is closed")
        main = get_ident() == _MAIN_IDENT
        if main:  # a Ctrl-C waits for the write to end (see the module docstring)
            guard = _GUARD
            if not guard.installed:
                guard.install()
            guard.depth += 1
        # Writes combine (see the module docstring): the message is queued, and the thread
        # holding the write lock writes everything queued, in order, in one write.
        mine = (data, message.get("id") if "method" in message else None)
        bound = self.write_timeout if timeout is None else timeout
        if len(data) > _COMBINE_BYTES:  # a big request's encoding (seconds under load)
            bound = round(max(bound - (time.monotonic() - started), 0.0), 3)  # counts too
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
                guard.leave()  # raises the KeyboardInterrupt deferred from inside the write

    def _write_out(self, mine: _Out, bound: float, main: bool) -> None:
        """Write what is queued (the write lock is held; released here). What others queue
        meanwhile is this thread's to write too: they found the lock taken and left."""
        lock, queue, reader = self._write_lock, self._out, self.reader
        first = True  # until this thread's own message went out: its errors are this call's
        while True:
            dead: ServerExited | None = None
            try:
                if self._shut:
                    if not first:
                        return  # closing: what is still queued fails with the session
                    raise TransportError(f"stdio transport to {self.name!r} is closed")
                if reader is not None:
                    reader.last_send = time.monotonic()  # the caller will read the reply itself
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
        if self.reader is not None:  # the callers of those requests may be reading or parked
            self.reader.wakeup()
            self.reader.wake_parked()
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

    def _close_stdin(self, timeout: float | None) -> bool:
        """Close our end of the server's stdin once no write uses it (``child.CloseStdin``):
        wait at most ``timeout`` s for a write under way (None: not at all); from then on
        every write fails as closed."""
        stdin = self._stdin if self._stdin is not None else getattr(self.process, "stdin", None)
        if stdin is None or stdin.closed:
            return True
        lock = self._write_lock
        if not (lock.acquire(False) if timeout is None else lock.acquire(timeout=timeout)):
            return False  # a writer is stuck past its bound: the signals end the server instead
        try:
            self._shut = True  # writers see it under the lock: no write to a closed fd
            stdin.close()
        except OSError:
            pass
        finally:
            lock.release()
        return True

    def close(self) -> None:
        if forked(self):  # in a child of os.fork(): release its copies only
            self.abandon()
            return
        main = get_ident() == _MAIN_IDENT
        if main:  # a Ctrl-C during close() waits until it is done (bounded)
            _GUARD.depth += 1
        try:
            if self._closing.is_set():
                self._join_and_close_pipes()
                return
            self._shut = True
            self._closing.set()
            if self.reader is not None:
                self.reader.stop()
            if self._stop_w >= 0:
                try:
                    os.write(self._stop_w, b"x")  # every poll on the stop pipe returns now
                except OSError:
                    pass
            if self.process is not None:
                try:
                    self.child.shutdown()
                    self._join_and_close_pipes()
                finally:
                    if self._opened:
                        self._opened = False
                        _GUARD.closed()
            self._report_close(None)
        finally:
            if main:
                _GUARD.leave()

    def kill(self) -> None:
        """Kill the server and its tree at once, without the ladder (a start the host
        interrupted by closing); a no-op when it never started or already exited."""
        self.child.kill()

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
        self._write_lock = threading.Lock()
        if self.reader is not None:
            self.reader.abandon()  # (its threads are the parent's)
        close_fds(self._stop_r, self._stop_w)
        self._stop_r = self._stop_w = -1
        self._stdin, self._stdin_fd = None, -1
        self.child.abandon()

    def exit_soon(self, deadline: float) -> bool:
        """Interpreter exit: the next step of the child's exit ladder (``ChildProcess``)."""
        return self.child.exit_soon(deadline, self._closing.is_set())

    # -- internals -------------------------------------------------------------------

    def stderr_tail(self) -> str:
        """The server's last stderr lines (bounded), what its stderr holds now read first:
        a line written before a reply that was just read is in the tail."""
        reader = self.reader
        if reader is not None and not self._closing.is_set():
            reader.read_stderr()  # non-blocking, under the stderr lock
        return "\n".join(self.child.tail)

    def stdout_noise(self) -> list[str]:
        """The last (up to 20) stdout lines that were not JSON-RPC, oldest first."""
        return list(self.framer.noise)

    def _exit_error(self, what: str) -> ServerExited:
        code = self.child.exit_code(wait=1.0)
        if self.reader is not None:  # its last words are on their way (bounded)
            self.reader.stderr_until_eof(0.5)
        if code is not None:  # one wording for an exit, whichever pipe noticed it first
            what = "server closed its stdout"
        return ServerExited(
            f"server {self.name!r}: {what}", exit_code=code, stderr_tail=self.stderr_tail()
        )

    def _join_and_close_pipes(self) -> None:
        """Join the threads, then close each descriptor no thread can read any more."""
        timeout = self.shutdown_timeout
        alive = [t for t in self._finishers if t is not threading.current_thread()]
        for thread in alive:
            thread.join(timeout=timeout)
        if any(t.is_alive() for t in alive):
            log.warning("mcpsync: a writer of %s did not stop; its pipes stay open", self.name)
            return
        reader = self.reader
        if reader is not None and not reader.join(timeout):  # (then the reader role is held)
            log.warning("mcpsync: a reader of %s did not stop; its pipes stay open", self.name)
            return  # leave their descriptors open rather than let a reused number be read
        if reader is not None:
            reader.forget()
        close_fds(self._stop_r, self._stop_w)
        self._stop_r = self._stop_w = -1
        proc = self.process
        if proc is not None:
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass
        self._close_stdin(timeout)
