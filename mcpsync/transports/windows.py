"""Windows: how a stdio server is found, started and ended there.

Owns: ``active()`` (are we on Windows: ``sys.platform``, so tests can say so),
``resolve(argv, env)`` (``npx`` -> ``npx.cmd`` through ``shutil.which`` with the child's
``PATH`` and ``PATHEXT``; a batch file's arguments checked against ``cmd.exe``'s
metacharacters), ``CREATION_FLAGS`` (``CREATE_NO_WINDOW``: no console window flashes up
for a server; ``CREATE_NEW_PROCESS_GROUP``: the host's Ctrl-C does not reach the server, and
a Ctrl-Break can be sent to it alone), ``JobObject`` (a kill-on-close job the server is
assigned to: when the host ends by any means, its last handle closes and Windows ends
every process in the job, the server's own children included; ``terminate()`` ends the
tree at once), and ``ctrl_break(pid)``.

No POSIX signal is named here (SIGTERM, SIGKILL, process groups and the parent-death
signal do not exist on Windows): ``child.py`` asks this module instead. Importable
everywhere; the ctypes layer (``kernel32``) is passed in or loaded on first use, so the
Linux tests drive every path with a mocked one. Not run on Windows here (no machine):
see README.md's reliability section for what is tested where.

Known limit: a job is assigned just after ``CreateProcess`` returns (``subprocess`` has
no suspended start); a grandchild started in those first microseconds is outside it.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError

__all__ = [
    "active",
    "resolve",
    "CREATION_FLAGS",
    "CREATE_NO_WINDOW",
    "CREATE_NEW_PROCESS_GROUP",
    "JobObject",
    "JOBOBJECT_EXTENDED_LIMIT_INFORMATION",
    "ctrl_break",
]

CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
CREATION_FLAGS = CREATE_NO_WINDOW | CREATE_NEW_PROCESS_GROUP
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JobObjectExtendedLimitInformation = 9
#: what cmd.exe reads into a batch file's command line (quoting does not stop all of them)
BATCH_UNSAFE = frozenset('"%&|<>^!\r\n')


def active() -> bool:
    """True on Windows (read at call time: tests set ``sys.platform``)."""
    return sys.platform == "win32"


def _env_get(env: Mapping[str, str], key: str) -> str | None:
    """Windows variable names are case-insensitive (``Path``, ``PATH``)."""
    for name, value in env.items():
        if name.upper() == key:
            return value
    return None


def resolve(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``argv`` with its program found the way a Windows shell would: ``npx`` is
    ``C:\\...\\npx.cmd`` (``shutil.which`` over the child's ``PATH`` with ``PATHEXT``).
    Unfound, it is returned as given (``CreateProcess`` then fails with the usual
    error). A batch file (``.cmd``/``.bat``) runs under ``cmd.exe``, which reads ``%``,
    ``&``, ``|`` ... in its arguments: such an argument is refused (``ConfigError``,
    naming its position, never its value)."""
    program = argv[0]
    path = _env_get(env, "PATH")
    found = shutil.which(program, path=path) if path is not None else shutil.which(program)
    resolved = [found or program, *argv[1:]]
    if resolved[0].lower().endswith((".cmd", ".bat")):
        for index, arg in enumerate(resolved[1:], start=1):
            if BATCH_UNSAFE.intersection(arg):
                raise ConfigError(
                    f"argument {index} of {os.path.basename(resolved[0])!r} holds a character "
                    "cmd.exe interprets in a batch file's command line "
                    '(one of " % & | < > ^ ! or a line break); run the program itself instead'
                )
    return resolved


def ctrl_break(pid: int) -> bool:
    """Send Ctrl-Break to the server's process group (it was started in its own);
    False where it cannot be delivered (no shared console, or it exited)."""
    event = getattr(signal, "CTRL_BREAK_EVENT", None)  # Windows only
    if event is None:
        return False
    try:
        os.kill(pid, event)
    except OSError:
        return False
    return True


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class IO_COUNTERS(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    ]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION),
        ("IoInfo", IO_COUNTERS),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


def _kernel32() -> Any:  # pragma: no cover - Windows only
    dll = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    dll.CreateJobObjectW.restype = ctypes.c_void_p
    dll.CreateJobObjectW.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p]
    dll.SetInformationJobObject.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32
    ]  # fmt: skip
    dll.AssignProcessToJobObject.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    dll.TerminateJobObject.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    dll.CloseHandle.argtypes = [ctypes.c_void_p]
    return dll


def _last_error() -> int:
    get = getattr(ctypes, "get_last_error", None)  # Windows only
    return int(get()) if get is not None else 0


class JobObject:
    """A job that ends every process in it when its last handle closes (the host's exit,
    whatever ends it) or on ``terminate()``. ``kernel32``: the ctypes DLL (tests mock it)."""

    def __init__(self, kernel32: Any = None) -> None:
        self._k = kernel32 if kernel32 is not None else _kernel32()
        handle = self._k.CreateJobObjectW(None, None)
        if not handle:
            raise OSError(_last_error(), "CreateJobObjectW failed")
        self.handle: Any = handle
        info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        ok = self._k.SetInformationJobObject(
            handle, JobObjectExtendedLimitInformation, ctypes.byref(info), ctypes.sizeof(info)
        )
        if not ok:
            error = _last_error()
            self.close()
            raise OSError(error, "SetInformationJobObject failed")

    def assign(self, process_handle: int) -> None:
        """Put a started process (and so every child it starts from now on) in the job."""
        if not self._k.AssignProcessToJobObject(self.handle, process_handle):
            raise OSError(_last_error(), "AssignProcessToJobObject failed")

    def terminate(self, exit_code: int = 1) -> None:
        """End every process in the job now (the ladder's last step: the whole tree)."""
        if self.handle is not None:
            self._k.TerminateJobObject(self.handle, exit_code)

    def close(self) -> None:
        """Close our handle; with kill-on-close, what is still in the job ends now."""
        handle, self.handle = self.handle, None
        if handle is not None:
            self._k.CloseHandle(handle)
