"""The reaper: a tiny process that ends this process's stdio servers' trees when it dies.

Owns: ``REAPER`` (this process's ``Reaper``), ``watch(pgid)`` / ``forget(pgid)`` (what
``spawn.py`` calls for every POSIX server: at start, and once it was waited for and its
group is empty), ``enabled()`` (env ``MCPSYNC_REAPER``: on, off) and ``GRACE``.

Why: the parent-death signal (``spawn.py``) reaches the server process only. A server that
starts its own children (``npx`` -> node, ``sh -c '...'``, ``uv run``) would leave them
behind when the host is SIGKILLed. Every server already runs in a process group of its own;
the reaper, started lazily at the first stdio spawn (one per host process, not per server),
is told each group's id over a pipe (a Unix socket pair: a write to a dead reaper raises no
SIGPIPE) whose only writer is the host. When the host dies by any means, the kernel closes
the host's end; the reaper reads EOF, sends SIGTERM to every group it still knows, then
SIGKILL to those still there after ``GRACE`` seconds, and exits.
When the last server it knows of was reaped (every session closed), its pipe is closed with
no group left and it just exits; the next stdio spawn starts another. On a normal exit the
sessions are closed first, so it only exits.

The reaper is ``/bin/sh`` running a short script (no Python interpreter: ``sys.executable``
is not always one, e.g. under uwsgi or in a frozen app), in a session of its own (the
terminal's Ctrl-C and a SIGHUP do not reach it), started through a shell that exits at once
(so it is nobody's child here: nothing to wait for, no process for leak checks to see).
Cost: one spawn of ``sh`` (2-5 ms, measured on a loaded machine) at the first stdio spawn,
and again at the first one after the last server was gone; per server one ``send`` of a
few bytes at start and one at reaping (~1.5 us of CPU each); nothing per call.

Pids are recycled: a group is forgotten as soon as its server was waited for and the group
is empty (``ServerProcess.wait``/``poll``), or after the ladder ended it
(``ServerProcess.reaped``), so the reaper never signals a group id the kernel may have
given to someone else, save in the instant between that and the write. A group id stays
reserved while any member lives (or the leader is an unreaped zombie). Not covered: a
server's child that leaves the group (``setsid``, or a shell with job control); Windows
(the job object ends the tree there, see ``windows.py``).

After ``os.fork()``: the child closes its copy of the socket at the fork (or the parent's
death would not be seen while the child lives; a fork without Python's at-fork hooks keeps
it) and starts a reaper of its own at its first spawn; the parent's groups are not the
child's.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import subprocess
import threading

from ..runtime.lifecycle import after_fork

__all__ = ["Reaper", "REAPER", "watch", "forget", "enabled", "GRACE", "SHELL"]

log = logging.getLogger("mcpsync.stdio")

#: seconds between the reaper's SIGTERM and its SIGKILL to the groups still there
GRACE = 0.5
#: the shell that runs the reaper
SHELL = "/bin/sh"
#: bound of writing one message to the reaper (its pipe is practically never full)
_WRITE_TIMEOUT = 1.0
#: a write to a reaper that died must not raise SIGPIPE (an embedding program may not
#: ignore it, as Python does): MSG_NOSIGNAL (Linux) or SO_NOSIGPIPE (macOS, the BSDs)
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_SO_NOSIGPIPE = getattr(socket, "SO_NOSIGPIPE", None)


def enabled() -> bool:
    """Is the reaper used (env ``MCPSYNC_REAPER``, default on; POSIX only)?"""
    if os.name != "posix":
        return False
    return os.environ.get("MCPSYNC_REAPER", "on").strip().lower() not in ("off", "0", "no")


# Reads "+pgid" / "-pgid" lines until EOF, then TERM, grace, KILL to what is left.
# (`exec 3<&0` first: an asynchronous list's stdin is /dev/null without job control.)
_SCRIPT = r"""
exec 3<&0
(
  exec 0<&3 3<&- >/dev/null 2>&1
  trap '' INT HUP
  g=" "
  while IFS= read -r l; do
    case $l in
      +*) g="$g${l#+} " ;;
      -*) p=${l#-}
          case $g in *" $p "*) g="${g%%" $p "*} ${g#*" $p "}" ;; esac ;;
    esac
  done
  set -- $g
  [ $# -eq 0 ] && exit 0
  for p; do kill -s TERM -- "-$p"; done
  n=0
  while [ $n -lt __STEPS__ ]; do
    a=""
    for p; do kill -s 0 -- "-$p" && a="$a $p"; done
    [ -z "$a" ] && exit 0
    set -- $a
    n=$((n+1))
    sleep 0.05
  done
  for p; do kill -s KILL -- "-$p"; done
) &
echo $!
"""


class Reaper:
    """This process's reaper (see the module docstring): started at the first ``watch``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None  # our end; the other is the reaper's stdin
        self._pid: int | None = None
        self._groups: set[int] = set()
        self._inherited: list[socket.socket] = []  # a forked child's copies of the parent's

    @property
    def pid(self) -> int | None:
        """The reaper's process id (None: not started, or it could not be)."""
        return self._pid

    def watched(self) -> frozenset[int]:
        """The group ids the reaper would end if this process died now."""
        with self._lock:
            return frozenset(self._groups)

    def watch(self, pgid: int) -> None:
        """End group ``pgid`` when this process dies (its server was just started)."""
        with self._lock:
            self._groups.add(pgid)
            if self._sock is None:
                self._start()  # tells it every group, this one included
            else:
                self._send(f"+{pgid}\n")

    def forget(self, pgid: int) -> None:
        """Group ``pgid`` ended (its server was reaped): never signal it again. The last
        one ends the reaper too (its pipe closes with nothing to end): no process of ours
        outlives the sessions; the next spawn starts another."""
        with self._lock:
            if pgid not in self._groups:
                return
            self._groups.discard(pgid)
            sock = self._sock
            if sock is None:
                return
            last = not self._groups
            # told first (at EOF it would signal what it still knows, and the id may be
            # someone else's soon); a dead reaper is replaced only if groups remain
            self._send(f"-{pgid}\n", again=not last)
            if last and self._sock is sock:
                self._sock, self._pid = None, None
                sock.close()

    def close(self) -> None:
        """Close the pipe, as this process's death would: the reaper ends what it knows.
        (Tests; embedders that want the trees ended now.)"""
        with self._lock:
            sock, self._sock, self._pid = self._sock, None, None
            self._groups.clear()
        if sock is not None:
            sock.close()

    def _start(self) -> None:
        """Start the reaper and tell it every group (under the lock)."""
        ours, theirs = socket.socketpair()  # non-inheritable: no server gets our end
        read = theirs.detach()
        try:
            script = _SCRIPT.replace("__STEPS__", str(max(1, round(GRACE / 0.05))))
            starter = subprocess.Popen(
                [SHELL, "-c", script],
                stdin=read,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                start_new_session=True,
            )
        except OSError as exc:
            os.close(read)
            ours.close()
            log.warning("mcpsync: no reaper (%s): a killed host may leave server children", exc)
            return
        os.close(read)
        assert starter.stdout is not None
        try:
            # the starter prints the reaper's pid and exits at once: waiting for the exit
            # (not for EOF first) keeps its zombie's moment short
            ready, _, _ = select.select([starter.stdout], [], [], 10.0)
            line = starter.stdout.readline() if ready else b""
            starter.wait(timeout=10.0)
            pid = int(line.strip())
        except (subprocess.TimeoutExpired, ValueError):
            starter.kill()
            starter.wait()
            ours.close()
            log.warning("mcpsync: the reaper did not start: a killed host may leave children")
            return
        finally:
            starter.stdout.close()
        ours.setblocking(False)
        if _SO_NOSIGPIPE is not None:
            ours.setsockopt(socket.SOL_SOCKET, _SO_NOSIGPIPE, 1)
        self._sock, self._pid = ours, pid
        if self._groups:
            self._send("".join(f"+{g}\n" for g in sorted(self._groups)), again=False)

    def _send(self, text: str, again: bool = True) -> None:
        """One message to the reaper (under the lock); a reaper that died (killed by
        someone) is started again, once, and told every group."""
        data = text.encode()
        sock = self._sock
        assert sock is not None
        try:
            while data:
                try:
                    data = data[sock.send(data, _NOSIGNAL) :]
                except BlockingIOError:
                    _, ready, _ = select.select([], [sock], [], _WRITE_TIMEOUT)
                    if not ready:
                        raise TimeoutError("the reaper's pipe stayed full") from None
        except OSError as exc:  # BrokenPipeError: it died
            log.warning(
                "mcpsync: the reaper is gone (%s)%s", exc, "; starting another" if again else ""
            )
            sock.close()
            self._sock, self._pid = None, None
            if again:
                self._start()

    def _after_fork_in_child(self) -> None:
        """In a forked child (no lock: its holder may be a thread the fork left behind):
        the parent's groups are not this process's; a reaper of its own comes at its first
        spawn. The inherited pipe is closed by ``_close_inherited``."""
        self._lock = threading.Lock()
        if self._sock is not None:
            self._inherited.append(self._sock)
        self._sock, self._pid = None, None
        self._groups = set()

    def _close_inherited(self) -> None:
        """Python's at-fork hook in the child: close the copy of the parent's pipe, or the
        parent's death would not reach its reaper while this child lives. (A fork that
        runs no at-fork hook, noticed later, keeps the copy, like its other descriptors.)"""
        self._after_fork_in_child()
        socks, self._inherited = self._inherited, []
        for sock in socks:
            try:
                sock.close()  # this process's descriptor only
            except OSError:
                pass


REAPER = Reaper()

after_fork(REAPER._after_fork_in_child)  # also after a fork that ran no at-fork hook
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=REAPER._close_inherited)


def watch(pgid: int) -> None:
    """``REAPER.watch(pgid)`` when the reaper is enabled."""
    if enabled():
        REAPER.watch(pgid)


def forget(pgid: int) -> None:
    """``REAPER.forget(pgid)`` (a no-op for a group it was never told of)."""
    REAPER.forget(pgid)
