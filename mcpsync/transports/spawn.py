"""Starting a stdio server so that it never outlives this process.

Owns: ``spawn(argv, env=, cwd=)``, the one ``Popen`` of every stdio server, and the
``ServerProcess`` it returns (the process and, on Windows, its job).

POSIX: the server starts in a session (and so a process group) of its own, so the
shutdown ladder can signal its whole tree, and the terminal's Ctrl-C reaches only the host.

Linux: the server also gets a parent-death signal (``PR_SET_PDEATHSIG``, SIGKILL): when the
host dies by any means, SIGKILL included, the kernel kills the server. The "parent" the
kernel watches is the *thread* that forked the child, not the process: a server started
from a ``Host``'s bring-up thread or a user's pool thread would be killed as soon as that
thread ends. So servers are started from the main thread (which lives as long as the
process) or, from any other thread, by one long-lived spawner thread
(``mcpsync-spawner``) that the caller hands the ``Popen`` to and waits for (bounded). The
spawner ends once every process it started has been reaped, and starts again on demand.

How the signal is set (``METHOD``; env ``MCPSYNC_PDEATHSIG``: auto, setpriv, preexec, off):

- ``setpriv`` (auto's choice where util-linux's ``setpriv`` is installed): the argv runs
  as ``setpriv --pdeathsig KILL -- argv``; setpriv sets the signal on itself and execs the
  server (same pid). No Python code runs between fork and exec, so ``subprocess`` keeps
  its fast ``vfork`` path and nothing here is unsafe with threads. The argv's program is
  looked up first (the child's ``PATH``, its ``cwd``): one that is not found is started
  plainly, so ``Popen`` reports it as before.
- ``preexec`` (auto's fallback): ``preexec_fn`` calls ``prctl`` through ctypes, then
  checks ``getppid()`` (the host may have died before the call: the child exits at once).
  The ``subprocess`` documentation calls ``preexec_fn`` unsafe with threads (the child may
  deadlock before exec on a lock another thread held at fork); ours only calls two system
  calls, but it also costs ``vfork`` (a full fork: page tables copied) and runs the
  at-fork hooks in the child. Measured, see ``transports/README.md``.
- ``off``: no parent-death signal (and on macOS and other POSIX systems, always off):
  the process group and stdin EOF are what end the server.

POSIX: the server's process group is also given to the reaper (``reaper.py``), a tiny
process that ends the whole group (TERM, then KILL) when this process dies: the
parent-death signal reaches the server only, not the children it started. The group is
forgotten once the server was reaped and its group ended (``ServerProcess.reaped``).

Windows: ``windows.resolve`` finds ``npx.cmd`` for ``npx``; the server starts with
``CREATE_NO_WINDOW | CREATE_NEW_PROCESS_GROUP`` and is put into a kill-on-close
``windows.JobObject``: when the host dies its handle closes and the tree ends.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import TransportError
from ..runtime.lifecycle import after_fork, this_process
from . import reaper, windows

__all__ = ["spawn", "ServerProcess", "METHOD", "method", "SPAWN_TIMEOUT"]

#: how the parent-death signal is set on Linux (see the module docstring)
METHOD = os.environ.get("MCPSYNC_PDEATHSIG", "auto").strip().lower() or "auto"
#: the bound of waiting for the spawner thread to start a process (seconds)
SPAWN_TIMEOUT = 30.0
_PR_SET_PDEATHSIG = 1


class ServerProcess(subprocess.Popen[bytes]):
    """A stdio server's process: ``Popen`` plus what ends its tree (``job`` on Windows)."""

    #: the kill-on-close job the process is in (Windows), else None
    job: windows.JobObject | None = None
    #: the spawner thread that started it (its parent-death "parent"), until reaped
    _spawner: _Spawner | None = None
    #: told the reaper that its group ended
    _forgotten: bool = False

    def poll(self) -> int | None:
        code = super().poll()
        if code is not None:
            self._leader_gone()
        return code

    def wait(self, timeout: float | None = None) -> int:
        code = super().wait(timeout)
        self._leader_gone()
        return code

    def _leader_gone(self) -> None:
        """The server was waited for (by anyone: the ladder, an exit report): once its
        group is empty too, its id may be recycled: the reaper forgets it now, not only at
        ``reaped()`` (a crashed server's session may stay open for long)."""
        if self._forgotten or windows.active():
            return
        try:
            os.killpg(self.pid, 0)
            return  # children of its are still in the group: the id stays reserved
        except OSError:  # ProcessLookupError: empty; PermissionError: someone else's now
            pass
        with _REAP_LOCK:
            first, self._forgotten = not self._forgotten, True
        if first:
            reaper.forget(self.pid)

    def reaped(self) -> None:
        """The process has exited and was waited for, and its group ended (POSIX): its
        spawner need not outlive it, the reaper forgets its group, its job is closed.
        Called by the shutdown ladder (from any thread, maybe twice); a no-op until
        ``returncode`` is known."""
        with _REAP_LOCK:  # once only: a second child_gone() would end the spawner early
            if self.returncode is None:
                return  # still running: the spawner (its parent-death "parent") must stay
            spawner, self._spawner = self._spawner, None
            job, self.job = self.job, None
            first, self._forgotten = not self._forgotten, True
        if first:
            reaper.forget(self.pid)  # its group ended: the reaper must not signal it again
        if spawner is not None:
            spawner.child_gone()
        if job is not None:
            job.close()  # kill-on-close: what is left of the tree ends with it


_REAP_LOCK = threading.Lock()


# -- the Linux parent-death signal ----------------------------------------------------------

_resolved_method: str | None = None


def method() -> str:
    """The parent-death method in use here: "setpriv", "preexec" or "off"."""
    global _resolved_method
    if _resolved_method is None:
        wanted = METHOD
        if not sys.platform.startswith("linux") or wanted == "off":
            found = "off"
        elif wanted == "preexec":
            found = "preexec"
        else:
            found = "setpriv" if _setpriv() is not None else "preexec"
            if wanted == "setpriv" and found != "setpriv":
                found = "preexec"
        _resolved_method = found
    return _resolved_method


_SETPRIV: list[str | None] = []


def _setpriv() -> str | None:
    """util-linux's setpriv, if it is there and knows --pdeathsig (util-linux >= 2.33).

    Decided once per process from the binary itself (its option table names
    ``pdeathsig``; it says ``util-linux``): reading 80 KB costs ~0.1 ms, running it to ask
    cost 2-10 ms of the first connect."""
    if not _SETPRIV:
        path = _on_exec_path("setpriv", os.get_exec_path())
        if path is not None:
            try:
                with open(path, "rb") as binary:
                    data = binary.read(4 << 20)
            except OSError:
                data = b""
            if b"pdeathsig" not in data or b"util-linux" not in data:
                path = None
        _SETPRIV.append(path)
    return _SETPRIV[0]


def _found(program: str, env: Mapping[str, str], cwd: str | None) -> bool:
    """Would exec find ``program`` with the child's PATH and working directory?"""
    if os.sep in program:
        full = program if os.path.isabs(program) or cwd is None else os.path.join(cwd, program)
        return _executable(full)
    return _on_exec_path(program, os.get_exec_path(dict(env))) is not None


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _on_exec_path(program: str, folders: Sequence[str]) -> str | None:
    """The file ``exec`` would run for the bare name ``program`` (POSIX ``execvp``'s search:
    the first executable regular file of that name in ``folders``), or None. Not
    ``shutil.which``: importing shutil loads bz2, lzma and zlib (~1.7 ms of a cold start)."""
    for folder in folders:
        candidate = os.path.join(folder or ".", program)
        if _executable(candidate):
            return candidate
    return None


_PRCTL: list[Any] = []


def _preexec(parent: int) -> Callable[[], None]:
    if not _PRCTL:  # resolved once, in the parent: the child only calls it
        import ctypes  # here: only this fallback needs it (~1 ms at import)

        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        prctl.restype = ctypes.c_int
        _PRCTL.append(prctl)
    prctl = _PRCTL[0]
    kill = int(signal.SIGKILL)

    def set_parent_death_signal() -> None:  # runs in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, kill, 0, 0)
        if os.getppid() != parent:  # the host died before the call: follow it now
            os._exit(1)

    return set_parent_death_signal


# -- the spawner thread ---------------------------------------------------------------------


class _Job:
    __slots__ = ("make", "done", "result", "error", "abandoned", "lock")

    def __init__(self, make: Callable[[], ServerProcess]) -> None:
        self.make = make
        self.done = threading.Event()
        self.result: ServerProcess | None = None
        self.error: BaseException | None = None
        self.abandoned = False
        self.lock = threading.Lock()


class _Spawner:
    """One long-lived thread that starts processes, so their parent-death "parent" thread
    lives as long as they do. It ends when every process it started was reaped."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._jobs: collections.deque[_Job] = collections.deque()
        self._thread: threading.Thread | None = None
        self._children = 0  # started by this thread and not yet reaped

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def run(self, make: Callable[[], ServerProcess]) -> ServerProcess:
        job = _Job(make)
        with self._cv:
            self._jobs.append(job)
            self._children += 1  # reserved now: the thread must not end under this job
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="mcpsync-spawner", daemon=True
                )
                self._thread.start()
            self._cv.notify()
        if not job.done.wait(SPAWN_TIMEOUT):
            with job.lock:
                job.abandoned = True  # the spawner kills it if it still comes
                late = job.result
            if late is None:
                raise TransportError(f"starting the server took over {SPAWN_TIMEOUT:g} s")
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def child_gone(self) -> None:
        with self._cv:
            self._children -= 1
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._jobs:
                    if self._children <= 0:
                        self._thread = None  # a later spawn starts a new one
                        return
                    self._cv.wait(1.0)
                job = self._jobs.popleft()
            try:
                proc = job.make()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                job.error = exc
                self.child_gone()
                job.done.set()
                continue
            proc._spawner = self
            with job.lock:
                abandoned = job.abandoned
                job.result = proc
            job.done.set()
            if abandoned:  # its caller gave up waiting: nobody will ever close it
                _kill_now(proc)


def _kill_now(proc: ServerProcess) -> None:
    try:
        proc.kill()
        proc.wait(timeout=2.0)
    except (OSError, subprocess.TimeoutExpired):
        pass
    proc.reaped()


_SPAWNER = _Spawner()


def _after_fork_in_child() -> None:
    """The spawner thread did not survive the fork: the child starts its own on demand
    (and takes a fresh lock: the old one's holder may be a thread the fork left behind)."""
    global _SPAWNER, _REAP_LOCK
    _SPAWNER = _Spawner()
    _REAP_LOCK = threading.Lock()


after_fork(_after_fork_in_child)  # (also after a fork that ran no at-fork hook)


# -- spawn ----------------------------------------------------------------------------------


def spawn(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None) -> ServerProcess:
    """Start a stdio server (pipes on all three streams, unbuffered) that ends with this
    process whatever ends it (see the module docstring). Raises what ``Popen`` raises."""
    common: dict[str, Any] = dict(
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # always a pipe: works where sys.stderr has no fileno
        env=dict(env),
        cwd=cwd,
        bufsize=0,
    )
    if windows.active():
        return _spawn_windows(list(argv), common)
    common["start_new_session"] = True  # its own process group, for the shutdown ladder
    how = method()
    this_process()  # a fork without at-fork hooks is noticed here: fresh spawner, reaper
    if how == "off":
        proc = _popen(list(argv), common)
    else:
        if how == "setpriv" and _found(argv[0], env, cwd):
            setpriv = _setpriv()
            assert setpriv is not None
            args = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        else:
            args = list(argv)
            common["preexec_fn"] = _preexec(os.getpid())
        if threading.current_thread() is threading.main_thread():
            proc = _popen(args, common)  # the main thread lives as long as the process
        else:
            proc = _SPAWNER.run(lambda: _popen(args, common))
    reaper.watch(proc.pid)  # its group (pgid == pid: a session of its own) ends with us
    return proc


def _popen(args: list[str], kwargs: dict[str, Any]) -> ServerProcess:
    return ServerProcess(args, **kwargs)


def _spawn_windows(argv: list[str], common: dict[str, Any]) -> ServerProcess:
    args = windows.resolve(argv, common["env"])
    common["creationflags"] = windows.CREATION_FLAGS
    proc = _popen(args, common)
    try:
        job = windows.JobObject()
        job.assign(_process_handle(proc))
    except OSError:
        # Without a job the ladder still ends the server itself (its tree may outlive it).
        return proc
    proc.job = job
    return proc


def _process_handle(proc: ServerProcess) -> int:
    """The Windows process handle ``Popen`` holds (its private ``_handle``)."""
    return int(proc._handle)  # type: ignore[attr-defined]
