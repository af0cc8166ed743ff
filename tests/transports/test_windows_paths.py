"""Windows on paper: the code paths a Windows host takes, driven on Linux with mocks.

``sys.platform`` is set to "win32" (``windows.active()`` and ``shutil.which`` read it at
call time), ``Popen`` is captured (``spawn._popen``), the kernel32 layer is a recording
fake, and the POSIX-only names (``signal.SIGKILL``, ``os.killpg``) are removed so any use
of them on the Windows path fails the test. Nothing here runs a Windows process: see
docs/guarantees.md's reliability section for what is tested where.
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpsync.errors import ConfigError
from mcpsync.transports import spawn, windows, winjob
from mcpsync.transports.spawn import ServerProcess
from mcpsync.transports.stdio import StdioTransport


class Kernel32:
    """Records every call; ``fail`` names functions that return 0 (failure)."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.fail = fail
        self.limits: list[int] = []

    def _call(self, name: str, *args: Any) -> int:
        self.calls.append((name, args))
        return 0 if name in self.fail else (0x1234 if name == "CreateJobObjectW" else 1)

    def CreateJobObjectW(self, *args: Any) -> int:
        return self._call("CreateJobObjectW", *args)

    def SetInformationJobObject(self, handle: int, cls: int, info: Any, size: int) -> int:
        struct = info._obj  # what ctypes.byref() points at
        assert isinstance(struct, windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION)
        assert size == ctypes.sizeof(struct)
        self.limits.append(struct.BasicLimitInformation.LimitFlags)
        return self._call("SetInformationJobObject", handle, cls)

    def AssignProcessToJobObject(self, *args: Any) -> int:
        return self._call("AssignProcessToJobObject", *args)

    def TerminateJobObject(self, *args: Any) -> int:
        return self._call("TerminateJobObject", *args)

    def CloseHandle(self, *args: Any) -> int:
        return self._call("CloseHandle", *args)

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class FakeProcess(ServerProcess):
    """A ServerProcess that never ran: records what the ladder does to it."""

    def __init__(self, args: list[str], waits_before_exit: int = 0) -> None:  # no Popen
        self.args = args
        self.pid = 4242
        self.returncode: int | None = None
        self._handle = 0x5678
        self._child_created = False
        self.stdin = _Pipe()
        self.stdout = self.stderr = None
        self.events: list[str] = []
        self._waits = waits_before_exit

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self.events.append("wait")
        if self.returncode is None:
            if self._waits > 0:
                self._waits -= 1
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.returncode = 1
        return self.returncode

    def kill(self) -> None:
        self.events.append("kill")

    def send_signal(self, sig: int) -> None:  # pragma: no cover - must not be used
        raise AssertionError(f"a POSIX signal ({sig}) was sent on Windows")

    def __del__(self) -> None:
        pass


class _Pipe:
    closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def on_windows(monkeypatch: pytest.MonkeyPatch) -> Kernel32:
    """Pretend to be Windows: platform, kernel32, no POSIX-only signal names."""
    kernel = Kernel32()
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(winjob, "_kernel32", lambda: kernel)
    monkeypatch.delattr(signal, "SIGKILL")
    monkeypatch.delattr(os, "killpg")
    monkeypatch.setenv("PATHEXT", os.pathsep.join([".com", ".exe", ".bat", ".cmd"]))
    return kernel


def _program(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("@echo off\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_npx_finds_npx_cmd_on_the_childs_path(on_windows: Kernel32, tmp_path: Path) -> None:
    npx = _program(tmp_path, "npx.cmd")
    assert windows.resolve(["npx", "-y", "@scope/server"], {"PATH": str(tmp_path)}) == [
        str(npx), "-y", "@scope/server"
    ]  # fmt: skip
    # Windows variable names are case-insensitive
    assert windows.resolve(["npx"], {"Path": str(tmp_path)})[0] == str(npx)


def test_pathext_order_and_given_extensions(on_windows: Kernel32, tmp_path: Path) -> None:
    _program(tmp_path, "tool.cmd")
    exe = _program(tmp_path, "tool.exe")
    bat = _program(tmp_path, "other.bat")
    env = {"PATH": str(tmp_path)}
    assert windows.resolve(["tool"], env)[0] == str(exe)  # .exe comes before .cmd in PATHEXT
    assert windows.resolve(["other.bat"], env)[0] == str(bat)
    assert windows.resolve(["missing", "x"], env) == ["missing", "x"]  # CreateProcess reports it


def test_batch_file_arguments_cmd_would_interpret_are_refused(
    on_windows: Kernel32, tmp_path: Path
) -> None:
    _program(tmp_path, "npx.cmd")
    env = {"PATH": str(tmp_path)}
    for bad in ("a&calc", "%SECRET%", 'x"y', "a|b", "a\nb", "^x", "!x!"):
        with pytest.raises(ConfigError) as info:
            windows.resolve(["npx", "-y", bad], env)
        assert "argument 2 of 'npx.cmd'" in str(info.value)
        assert bad not in str(info.value)  # the value is never shown (it may be a secret)
    windows.resolve(["npx", "-y", "@scope/pkg@1.2.3", "--dir=C:/x y"], env)  # fine ones pass


def test_spawn_on_windows_flags_and_job(
    on_windows: Kernel32, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    npx = _program(tmp_path, "npx.cmd")
    seen: list[tuple[list[str], dict[str, Any]]] = []

    def popen(args: list[str], kwargs: dict[str, Any]) -> FakeProcess:
        seen.append((args, kwargs))
        return FakeProcess(args)

    monkeypatch.setattr(spawn, "_popen", popen)
    watched: list[int] = []
    monkeypatch.setattr(spawn.reaper, "watch", watched.append)
    proc = spawn.spawn(["npx", "server"], env={"PATH": str(tmp_path)}, cwd=None)
    assert watched == []  # no reaper on Windows: the kill-on-close job ends the tree
    [(args, kwargs)] = seen
    assert args == [str(npx), "server"]
    assert kwargs["creationflags"] == windows.CREATE_NO_WINDOW | windows.CREATE_NEW_PROCESS_GROUP
    assert windows.CREATE_NO_WINDOW == 0x08000000 and windows.CREATE_NEW_PROCESS_GROUP == 0x200
    # nothing POSIX: no new session, no preexec_fn, no setpriv in front
    assert "start_new_session" not in kwargs and "preexec_fn" not in kwargs
    assert kwargs["stdin"] == kwargs["stdout"] == kwargs["stderr"] == subprocess.PIPE
    assert on_windows.names() == [
        "CreateJobObjectW", "SetInformationJobObject", "AssignProcessToJobObject"
    ]  # fmt: skip
    assert on_windows.calls[1][1] == (0x1234, 9)  # JobObjectExtendedLimitInformation
    assert on_windows.limits == [winjob.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE] == [0x2000]
    assert on_windows.calls[2][1] == (0x1234, 0x5678)  # the job, the process handle
    assert proc.job is not None


def test_spawn_on_windows_without_a_job_still_starts(
    monkeypatch: pytest.MonkeyPatch, on_windows: Kernel32
) -> None:
    failing = Kernel32(fail=("AssignProcessToJobObject",))
    monkeypatch.setattr(winjob, "_kernel32", lambda: failing)
    monkeypatch.setattr(spawn, "_popen", lambda args, kwargs: FakeProcess(args))
    proc = spawn.spawn(["server.exe"], env={"PATH": ""}, cwd=None)
    assert proc.job is None  # the ladder ends the process itself
    assert failing.names()[-1] == "AssignProcessToJobObject"


def test_job_object_failures_and_close(on_windows: Kernel32) -> None:
    with pytest.raises(OSError, match="CreateJobObjectW"):
        windows.JobObject(Kernel32(fail=("CreateJobObjectW",)))
    refusing = Kernel32(fail=("SetInformationJobObject",))
    with pytest.raises(OSError, match="SetInformationJobObject"):
        windows.JobObject(refusing)
    assert refusing.names()[-1] == "CloseHandle"  # the half-made job is not leaked
    kernel = Kernel32()
    job = windows.JobObject(kernel)
    job.terminate()
    job.close()
    job.close()  # idempotent
    job.terminate()  # after close: nothing
    assert kernel.names()[2:] == ["TerminateJobObject", "CloseHandle"]
    assert kernel.calls[2][1] == (0x1234, 1)


def test_struct_layout_matches_windows_x64() -> None:
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        pytest.skip("the sizes below are the 64-bit ones")
    assert ctypes.sizeof(winjob.JOBOBJECT_BASIC_LIMIT_INFORMATION) == 64
    assert ctypes.sizeof(winjob.IO_COUNTERS) == 48
    assert ctypes.sizeof(windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION) == 144


def _transport_with(proc: FakeProcess) -> StdioTransport:
    t = StdioTransport(["server.exe"], name="win", shutdown_timeout=0.01)
    t.process = proc
    return t


def test_ladder_on_windows_uses_ctrl_break_then_the_job(
    on_windows: Kernel32, monkeypatch: pytest.MonkeyPatch
) -> None:
    breaks: list[int] = []
    monkeypatch.setattr(windows, "ctrl_break", lambda pid: breaks.append(pid) or True)
    job = windows.JobObject()
    proc = FakeProcess(["server.exe"], waits_before_exit=2)  # ignores EOF and Ctrl-Break
    proc.job = job
    t = _transport_with(proc)
    t.child.shutdown()
    assert proc.stdin.closed  # first: stdin closed
    assert breaks == [4242]  # second: Ctrl-Break to its process group
    assert proc.events == ["wait", "wait", "kill", "wait"]  # third: the tree, then the process
    assert on_windows.names()[-2:] == ["TerminateJobObject", "CloseHandle"]  # job closed too
    assert proc.job is None


def test_ladder_on_windows_stops_at_eof_and_closes_the_job(on_windows: Kernel32) -> None:
    proc = FakeProcess(["server.exe"])
    proc.job = windows.JobObject()
    _transport_with(proc).child.shutdown()
    assert proc.events == ["wait"]
    assert "TerminateJobObject" not in on_windows.names()
    assert on_windows.names()[-1] == "CloseHandle"  # kill-on-close ends leftover children


def test_kill_and_exit_steps_on_windows(
    on_windows: Kernel32, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = FakeProcess(["server.exe"])
    proc.job = windows.JobObject()
    _transport_with(proc).kill()
    assert proc.events == ["kill", "wait"]
    assert "TerminateJobObject" in on_windows.names()

    breaks: list[int] = []
    monkeypatch.setattr(windows, "ctrl_break", lambda pid: breaks.append(pid) or True)
    proc = FakeProcess(["server.exe"])
    t = _transport_with(proc)
    import time

    now = time.monotonic()
    assert t.exit_soon(now + 0.03) is True  # stdin closed
    assert proc.stdin.closed and not breaks
    t.child._exit_plan = (now - 1.0, now + 0.03, 1)  # as if the time had passed
    assert t.exit_soon(now + 0.03) is True
    assert breaks == [4242] and proc.events == ["kill"]  # Ctrl-Break, then the process


def test_posix_spawn_keeps_its_own_session_and_no_windows_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not hasattr(os, "killpg"):
        pytest.skip("POSIX only")
    seen: list[tuple[list[str], dict[str, Any]]] = []
    monkeypatch.setattr(spawn, "_popen", lambda a, k: seen.append((a, k)) or FakeProcess(a))
    monkeypatch.setattr(spawn, "_resolved_method", "off")
    watched: list[int] = []  # (a fake pid: the real reaper must never hear of it)
    monkeypatch.setattr(spawn.reaper, "watch", watched.append)
    spawn.spawn([sys.executable, "-V"], env=dict(os.environ), cwd=None)
    [(args, kwargs)] = seen
    assert args == [sys.executable, "-V"]
    assert kwargs["start_new_session"] is True and "creationflags" not in kwargs
    assert watched == [4242]  # its own group, given to the reaper


def test_no_reaper_on_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job object ends the tree there: the POSIX reaper (a /bin/sh) is never started."""
    from mcpsync.transports import reaper

    monkeypatch.setattr(os, "name", "nt")
    monkeypatch.setenv("MCPSYNC_REAPER", "on")
    assert reaper.enabled() is False
    mine = reaper.Reaper()
    monkeypatch.setattr(reaper, "REAPER", mine)
    reaper.watch(4242)  # what spawn() would call: nothing happens
    assert mine.pid is None and mine.watched() == frozenset()


def test_windows_module_does_not_import_ctypes_until_a_job_is_made() -> None:
    """POSIX cold start: resolving commands (windows.py) must not pay for ctypes."""
    code = (
        "import sys; from mcpsync.transports import windows; "
        "assert 'ctypes' not in sys.modules and 'mcpsync.transports.winjob' not in sys.modules; "
        "assert windows.JobObject is __import__('mcpsync.transports.winjob', fromlist=['x']).JobObject; "
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
