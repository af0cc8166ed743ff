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
everywhere; the job object and its ctypes layer live in ``winjob.py``, imported on first
use of ``JobObject`` (``ctypes`` costs ~1 ms at import: not on a POSIX cold start); its
``kernel32`` is passed in or loaded on first use, so the
Linux tests drive every path with a mocked one. Not run on Windows here (no machine):
see docs/guarantees.md's reliability section for what is tested where.

Known limit: a job is assigned just after ``CreateProcess`` returns (``subprocess`` has
no suspended start); a grandchild started in those first microseconds is outside it.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .winjob import JOBOBJECT_EXTENDED_LIMIT_INFORMATION as JOBOBJECT_EXTENDED_LIMIT_INFORMATION
    from .winjob import JobObject as JobObject

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
    import shutil  # here: only Windows resolves (shutil's import is ~1.7 ms, of a cold start)

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


def __getattr__(name: str) -> Any:
    # the job object on first use (winjob.py: ctypes is imported only where it is needed)
    if name in ("JobObject", "JOBOBJECT_EXTENDED_LIMIT_INFORMATION"):
        from . import winjob

        return getattr(winjob, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
