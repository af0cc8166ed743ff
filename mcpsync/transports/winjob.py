"""Windows job objects: the kill-on-close job a stdio server's whole tree is put in.

Owns: ``JobObject`` (create, assign a process, terminate, close), the ``ctypes`` structures
it passes to ``SetInformationJobObject`` and ``_kernel32()`` (the DLL, loaded on first use).
Split from ``windows.py`` so that importing that module (every platform: it resolves
commands) does not import ``ctypes``; ``windows.JobObject`` is this class. The Linux tests
drive it with a mocked ``kernel32``.
"""

from __future__ import annotations

import ctypes
from typing import Any

__all__ = [
    "JobObject",
    "JOBOBJECT_BASIC_LIMIT_INFORMATION",
    "IO_COUNTERS",
    "JOBOBJECT_EXTENDED_LIMIT_INFORMATION",
    "JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE",
]

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JobObjectExtendedLimitInformation = 9


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
