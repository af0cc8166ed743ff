"""Where mcpsync keeps per-user files, and the one rule for making and opening them.

Owns: ``user_cache_dir()``: ``$XDG_CACHE_HOME/mcpsync`` (else ``~/.cache/mcpsync``) on Linux
and other POSIX systems, ``~/Library/Caches/mcpsync`` on macOS,
``%LOCALAPPDATA%\\mcpsync\\Cache`` on Windows. The token store's default file
(``auth.storage``) and the era verdicts (``protocol.verdict_file``) live there; nothing else
does, and a session that needs neither creates nothing in it.

And the rule for every folder and file mcpsync keeps per-user data in (POSIX):

- ``private_dir(path)`` makes a folder (and missing parents) mode 0700 whatever the umask,
  and refuses, with :class:`~mcpsync.errors.UnsafePathError`, one that exists owned by
  another user or writable by group or others (nothing in it is read or written then);
- ``open_private(path, flags)`` opens a file in such a folder without following a symbolic
  link (``O_NOFOLLOW``), creating it 0600, and refuses one that is not a regular file of
  this user; a file of this user readable by others is narrowed to 0600.

``user_cache_dir()`` creates nothing.
"""

from __future__ import annotations

import os
import stat
import sys

from ..errors import UnsafePathError

__all__ = ["user_cache_dir", "APP", "private_dir", "open_private", "check_private_dir"]

APP = "mcpsync"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO put in its place must not hang open()
_POSIX = os.name == "posix"


def user_cache_dir() -> str:
    """The per-user cache folder (not created here: :func:`private_dir` does)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(
            os.path.expanduser("~"), "AppData", "Local"
        )
        return os.path.join(base, APP, "Cache")
    if sys.platform == "darwin":
        return os.path.join(os.path.expanduser("~/Library/Caches"), APP)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = xdg if xdg and os.path.isabs(xdg) else os.path.expanduser("~/.cache")
    return os.path.join(base, APP)


def _refuse(path: str, reason: str, what: str = "folder") -> UnsafePathError:
    return UnsafePathError(
        f"mcpsync will not use the {what} {path}: {reason}; nothing was read or written "
        f"(make it yours and mode {'0700' if what == 'folder' else '0600'}, or remove it)",
        path=path,
        reason=reason,
    )


def check_private_dir(path: str) -> None:
    """Raise :class:`~mcpsync.errors.UnsafePathError` unless ``path`` is a folder of this
    user that group and others cannot write (a symbolic link to one is fine: its target
    is what is checked). No-op off POSIX."""
    if not _POSIX:
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise _refuse(path, "it does not exist") from None
    except OSError as exc:
        raise _refuse(path, f"cannot inspect it ({exc.strerror})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "it is not a folder")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"it is owned by uid {st.st_uid}, not by this user ({os.geteuid()})")
    if st.st_mode & 0o022:
        raise _refuse(path, f"group or others can write to it (mode {st.st_mode & 0o7777:04o})")


def private_dir(path: str | None = None) -> str:
    """``path`` (default: :func:`user_cache_dir`) as a folder only this user can use:
    made (with missing parents) 0700 whatever the umask, or checked when it exists
    (:func:`check_private_dir`). Returns the path."""
    folder = os.path.abspath(path if path is not None else user_cache_dir())
    if not _POSIX:
        os.makedirs(folder, exist_ok=True)
        return folder
    missing: list[str] = []
    probe = folder
    while not os.path.lexists(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for d in reversed(missing):  # the outermost first
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue  # made by another process meanwhile: checked below
        except OSError as exc:
            raise _refuse(d, f"cannot create it ({exc.strerror})") from None
        # mkdir's mode went through the umask (0o700 & ~umask); make it exactly 0700. The
        # folder is ours and new: no one else can have swapped it under a 0700 parent.
        try:
            os.chmod(d, 0o700, follow_symlinks=False)
        except OSError as exc:
            raise _refuse(d, f"cannot set its mode ({exc.strerror})") from None
    check_private_dir(folder)
    return folder


def open_private(path: str, flags: int) -> int:
    """A file descriptor for ``path`` (``os.open`` ``flags``; ``O_CREAT`` makes it 0600),
    never through a symbolic link. Raises :class:`~mcpsync.errors.UnsafePathError` for a
    symbolic link, something that is not a regular file, or a file of another user;
    ``FileNotFoundError`` when it is absent and ``O_CREAT`` was not given."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, 0o600)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise _refuse(path, "it is a symbolic link", "file") from None
        raise _refuse(path, f"cannot open it ({exc.strerror})", "file") from None
    if not _POSIX:
        return fd
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, "it is not a regular file", "file")
        if st.st_uid != os.geteuid():
            raise _refuse(path, f"it is owned by uid {st.st_uid}, not by this user", "file")
        if st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd
