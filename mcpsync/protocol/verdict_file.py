"""Era verdicts that outlive the process: one JSON file in the per-user cache folder.

Owns: ``VerdictFile``: reading, writing and forgetting the verdicts kept on disk, and the
rules for that file: ``<user_cache_dir()>/era-verdicts.json`` (``mcpsync.runtime.cachedir``),
data only (``{"version": 1, "verdicts": {server key: {"era", "why", "at"}}}``; the keys
are the digests ``choose.server_identity`` makes, no secret is kept in clear), written
atomically (a temp file beside it, mode 0600, then ``os.replace``), at most
``MAX_ENTRIES`` verdicts, each trusted for ``MAX_AGE`` seconds.

What is kept: only verdicts that cost a server its life, that is a stdio server that died
of the ``server/discover`` probe (servers built with older SDKs do): without the file every
new process would pay that server's start-up twice. A verdict that cost one round trip
(an error answering the probe) stays in memory only, so an upgraded server is probed again
by the next process.

Trust: the folder follows ``_cachedir``'s rule (made 0700, refused when another user owns
it or others may write it: then nothing is read or written); a file that is not a regular
file of this user, that others may write, or that is reached through a symlink, a file that does not parse or has
another shape, and an entry that is too old, are all treated as absent: nothing is read
from them and, for the folder, nothing is written. Every failure to read or write is
quiet (a cache: the cost is one probe).
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from typing import Any

from ..errors import UnsafePathError
from ..runtime.cachedir import check_private_dir, private_dir, user_cache_dir

__all__ = ["VerdictFile", "FILE_NAME", "MAX_ENTRIES", "MAX_AGE", "MAX_BYTES"]

log = logging.getLogger("mcpsync")

FILE_NAME = "era-verdicts.json"
#: verdicts kept at most (the oldest go first)
MAX_ENTRIES = 256
#: how long a kept verdict is trusted (seconds): 30 days
MAX_AGE = 30 * 24 * 3600.0
#: a bigger file is not read (256 entries take about 80 KB)
MAX_BYTES = 1 << 20
_VERSION = 1
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO put in its place must not hang open()
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def _own_and_private(st: os.stat_result) -> bool:
    """Owned by this user and not writable by group or others (POSIX; always on Windows)."""
    if not hasattr(os, "geteuid"):
        return True
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


class VerdictFile:
    """The verdicts kept on disk (``folder``: default the per-user cache folder)."""

    def __init__(self, folder: str | None = None) -> None:
        self._folder = folder
        self._lock = threading.Lock()  # this process's writers, one at a time

    @property
    def folder(self) -> str:
        return self._folder if self._folder is not None else user_cache_dir()

    @property
    def path(self) -> str:
        return os.path.join(self.folder, FILE_NAME)

    def get(self, key: str) -> tuple[str, str] | None:
        """(era, why) kept for ``key`` and still trusted, else None."""
        entry = self._read().get(key)
        if entry is None:
            return None
        return entry["era"], entry["why"]

    def put(self, key: str, era: str, why: str) -> None:
        """Keep the verdict for ``key`` (quietly nothing if the folder cannot be trusted)."""
        self._update(key, {"era": era, "why": why, "at": time.time()})

    def forget(self, key: str) -> None:
        self._update(key, None)

    # -- the file ----------------------------------------------------------------------

    def _folder_ok(self, create: bool) -> bool:
        """The folder passes ``_cachedir``'s rule (made 0700 when ``create``); else False."""
        try:
            if create:
                private_dir(self.folder)
            else:
                check_private_dir(self.folder)
        except (UnsafePathError, OSError) as exc:
            log.debug("mcpsync: era verdicts not kept: %s", exc)
            return False
        return True

    def _read(self) -> dict[str, dict[str, Any]]:
        """The trusted entries of the file ({} when it is absent, foreign or corrupt)."""
        if not self._folder_ok(create=False):
            return {}
        try:
            fd = os.open(self.path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC)
        except OSError:
            return {}
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _own_and_private(st) or st.st_size > MAX_BYTES:
                return {}
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = json.loads(f.read(MAX_BYTES + 1))
        except (OSError, ValueError, RecursionError):
            return {}
        finally:
            os.close(fd)
        return _trusted(data)

    def _update(self, key: str, entry: dict[str, Any] | None) -> None:
        with self._lock:
            if not self._folder_ok(create=entry is not None):
                return
            entries = self._read()
            if entry is None:
                if entries.pop(key, None) is None:
                    return
            else:
                entries[key] = entry
                if len(entries) > MAX_ENTRIES:
                    oldest = sorted(entries, key=lambda k: entries[k]["at"])
                    for gone in oldest[: len(entries) - MAX_ENTRIES]:
                        del entries[gone]
            self._write({"version": _VERSION, "verdicts": entries})

    def _write(self, data: dict[str, Any]) -> None:
        path = self.path
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileExistsError:  # left by a process that died mid-write with our pid
            try:
                os.unlink(tmp)
                fd = os.open(tmp, flags, 0o600)
            except OSError:
                return
        except OSError as exc:
            log.debug("mcpsync: cannot write %s: %s", path, exc)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, separators=(",", ":"))
            os.replace(tmp, path)
        except OSError as exc:
            log.debug("mcpsync: cannot write %s: %s", path, exc)
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _trusted(data: Any) -> dict[str, dict[str, Any]]:
    """The well-formed, fresh entries of a parsed file (any other shape: none)."""
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    verdicts = data.get("verdicts")
    if not isinstance(verdicts, dict):
        return {}
    now = time.time()
    kept: dict[str, dict[str, Any]] = {}
    for key, entry in verdicts.items():
        if not isinstance(key, str) or not isinstance(entry, dict):
            continue
        era, why, at = entry.get("era"), entry.get("why"), entry.get("at")
        if era not in ("legacy", "modern") or not isinstance(why, str):
            continue
        if not isinstance(at, (int, float)) or isinstance(at, bool) or not 0 <= now - at <= MAX_AGE:
            continue
        kept[key] = {"era": era, "why": why[:500], "at": float(at)}
    return kept
