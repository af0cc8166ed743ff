"""Where tokens and client registrations live between requests and between runs.

Owns: the token-store protocol (:class:`TokenStore`, duck-typed: ``get(key)``,
``set(key, value)``, ``delete(key)`` with str keys and JSON-able dict values), its optional
capability :class:`LockableTokenStore` (``locked(timeout)``, a context manager holding the
store against every other user of it, which ``OAuth`` holds across a refresh so that one
refresh serves them all; a store without it has only the ``OAuth`` object's own lock) and
two stores:

- :class:`MemoryTokenStore` - the default; forgets everything at exit.
- :class:`FileTokenStore` - one JSON file, created with mode 0600 in a 0700 directory
  (one owned by another user or writable by others is refused), never opened through a
  symbolic link, rewritten atomically, guarded by a thread lock per file and (on POSIX)
  ``flock`` on ``<file>.lock`` so that threads and processes share it; every lock wait
  is bounded. :func:`default_store_path` is the per-user file the command line keeps
  tokens in (``mcpsync --no-store`` opts out).
- ``mcpsync.auth.keyring_store.KeyringTokenStore`` - the system keyring (extra ``keyring``).

and :class:`TokenStoreSpec`: a store described as plain, picklable data (kind and its
parameters) that another process opens for itself (``spec.open()``), as the smoke
runner's worker processes do: a live store holds locks and, for the keyring, a backend
object, which do not travel.

Keys used by :class:`mcpsync.auth.OAuth` (any store can rely on them being short strings):
``token <issuer> <resource> <client_id>`` (a token is bound to the issuer, the resource
*and* the client that obtained it; ``-`` when a grant has no client id),
``client <issuer>`` (credentials are bound to the issuer that issued them), and
``server <url>`` (which issuer/resource/client a server URL used last time).

The library's ``OAuth(...)`` keeps the in-memory default: a library that writes secrets
to the user's disk unasked would surprise its caller (and several programs embedding it
would share one file); the command line, a program of its own, persists by default.

The values hold secrets (access/refresh tokens, client secrets): a store must keep them
out of logs; ``repr`` of these stores never shows values.

>>> store = FileTokenStore("~/.cache/mcpsync/tokens.json")   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ConfigError, LockTimeout, UnsafePathError
from ..runtime.cachedir import open_private, private_dir, user_cache_dir
from ._filelock import file_lock

__all__ = [
    "TokenStore",
    "LockableTokenStore",
    "MemoryTokenStore",
    "FileTokenStore",
    "TokenStoreSpec",
    "default_store_path",
]


def default_store_path() -> Path:
    """The per-user token file: ``$XDG_CACHE_HOME/mcpsync/tokens.json`` (else
    ``~/.cache/...``) on Linux and other POSIX systems, ``~/Library/Caches/mcpsync/`` on
    macOS, ``%LOCALAPPDATA%\\mcpsync\\Cache\\`` on Windows. ``MCPSYNC_TOKEN_STORE``
    names another file."""
    override = os.environ.get("MCPSYNC_TOKEN_STORE")
    if override:
        return Path(os.path.expanduser(override))
    return Path(user_cache_dir()) / "tokens.json"


@runtime_checkable
class TokenStore(Protocol):
    """What OAuth needs from a store. Values are JSON-able dicts."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def set(self, key: str, value: dict[str, Any]) -> None: ...

    def delete(self, key: str) -> None: ...


@runtime_checkable
class LockableTokenStore(TokenStore, Protocol):
    """A :class:`TokenStore` that can be held against its other users (threads, processes).

    Optional: ``OAuth`` checks ``isinstance(store, LockableTokenStore)`` (a store of one's
    own need not inherit anything, as for :class:`TokenStore`) and holds ``locked()``
    across a refresh; a store without it is held by the ``OAuth`` object's lock only.
    :class:`MemoryTokenStore`, :class:`FileTokenStore` and ``KeyringTokenStore`` have it."""

    def locked(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the store for a ``with`` block, waiting at most ``timeout`` seconds
        (:class:`~mcpsync.errors.LockTimeout`)."""
        ...


@contextlib.contextmanager
def _held(lock: threading.RLock, timeout: float, name: str) -> Iterator[None]:
    """``lock`` for a ``with`` block, waited for at most ``timeout`` seconds."""
    if not lock.acquire(timeout=max(timeout, 0.0)):
        raise LockTimeout(
            f"the lock of the {name} was not obtained within {timeout:g} s",
            path=name,
            timeout=timeout,
        )
    try:
        yield
    finally:
        lock.release()


class MemoryTokenStore:
    """Keeps entries in this process only (thread-safe)."""

    def __init__(self) -> None:
        self._data: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            v = self._data.get(key)
            return json.loads(json.dumps(v)) if v is not None else None

    def set(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._data[key] = json.loads(json.dumps(value))

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._data)

    def locked(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the store against other threads for the ``with`` block (``timeout``:
        seconds to wait, default 30; :class:`~mcpsync.errors.LockTimeout`)."""
        return _held(self._lock, 30.0 if timeout is None else timeout, "memory token store")

    def __repr__(self) -> str:
        return f"MemoryTokenStore({len(self._data)} entries)"


class FileTokenStore:
    """A JSON file readable only by its owner (0600), shared safely between threads and
    processes.

    Its folder is made 0700 (whatever the umask) and refused when another user owns it or
    group/others can write to it; the file and its ``.lock`` are opened without following
    symbolic links (:mod:`mcpsync.runtime.cachedir`): :class:`~mcpsync.errors.UnsafePathError`,
    nothing read or written. Every operation holds the lock: a thread lock per file in
    this process, and (POSIX) ``flock`` on ``<file>.lock`` between processes, waited for
    at most ``lock_timeout`` seconds (:class:`~mcpsync.errors.LockTimeout` naming the
    lock file). :meth:`locked` holds it across several operations (``OAuth`` holds it
    across a refresh).

    >>> FileTokenStore("/tmp/t.json")   # doctest: +SKIP
    FileTokenStore('/tmp/t.json')
    """

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 30.0) -> None:
        if not lock_timeout > 0:
            raise ConfigError(
                f"FileTokenStore lock_timeout must be > 0 seconds, not {lock_timeout!r}"
            )
        self.path = Path(os.path.expanduser(os.fspath(path))).absolute()
        self.lock_timeout = float(lock_timeout)
        self._filelock = file_lock(str(self.path) + ".lock")

    # -- protocol ------------------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        with self._hold(exclusive=False, timeout=None):
            return self._read().get(key)

    def set(self, key: str, value: dict[str, Any]) -> None:
        with self._hold(exclusive=True, timeout=None):
            data = self._read()
            data[key] = value
            self._write(data)

    def delete(self, key: str) -> None:
        with self._hold(exclusive=True, timeout=None):
            data = self._read()
            if data.pop(key, None) is not None:
                self._write(data)

    def keys(self) -> list[str]:
        with self._hold(exclusive=False, timeout=None):
            return list(self._read())

    def locked(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold the store (exclusively, against every thread and process using the file)
        for the ``with`` block; ``get``/``set``/``delete`` of this thread inside it do
        not wait. ``timeout`` (default ``lock_timeout``) bounds the wait."""
        return self._hold(exclusive=True, timeout=timeout)

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    # -- internals -----------------------------------------------------------------
    def _hold(
        self, *, exclusive: bool, timeout: float | None
    ) -> contextlib.AbstractContextManager[None]:
        return self._filelock.hold(
            exclusive=exclusive,
            timeout=self.lock_timeout if timeout is None else timeout,
            prepare=self._prepare,
        )

    def _prepare(self) -> None:
        """The folder, made 0700 or checked, before the lock file in it is opened."""
        try:
            private_dir(str(self.path.parent))
        except UnsafePathError as exc:
            raise UnsafePathError(
                f"token store {self.path}: {exc}", path=exc.path, reason=exc.reason
            ) from None

    def _read(self) -> dict[str, Any]:
        try:
            fd = open_private(str(self.path), os.O_RDONLY)
        except FileNotFoundError:
            return {}
        except UnsafePathError as exc:
            raise UnsafePathError(
                f"token store {self.path}: {exc}", path=exc.path, reason=exc.reason
            ) from None
        try:
            with os.fdopen(fd, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            # never echo file content (it holds secrets)
            raise ConfigError(
                f"token store {self.path} is unreadable ({type(exc).__name__})"
            ) from None
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        # mkstemp: O_EXCL (a link in its place is never followed), mode 0600; os.replace
        # puts the new file where the old name was (a link there is replaced, not followed)
        fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=str(self.path.parent))
        try:
            if hasattr(os, "fchmod"):  # (mkstemp made it 0600 already; not on old Windows)
                os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise ConfigError(f"token store {self.path}: cannot write: {exc.strerror}") from None


@dataclass(frozen=True)
class TokenStoreSpec:
    """A token store as plain data, opened where it is used (picklable; no secret in it).

    ``kind``: ``"file"`` (``path``: a :class:`FileTokenStore`, shared by every process
    that opens it), ``"keyring"`` (``service``: a ``KeyringTokenStore`` over the keyring
    backend *that* process finds), ``"memory"`` (a new :class:`MemoryTokenStore` per
    ``open()``: nothing is shared).

    >>> TokenStoreSpec.keyring().open()   # doctest: +SKIP
    KeyringTokenStore(service='mcpsync')
    """

    kind: Literal["file", "keyring", "memory"]
    path: str | None = None
    service: str = "mcpsync"

    def __post_init__(self) -> None:
        if self.kind not in ("file", "keyring", "memory"):
            raise ConfigError(f"token store kind {self.kind!r}: expected file, keyring or memory")
        if self.kind == "file" and not self.path:
            raise ConfigError("a file token store needs a path")

    @classmethod
    def file(cls, path: str | os.PathLike[str]) -> TokenStoreSpec:
        return cls("file", path=str(Path(os.path.expanduser(os.fspath(path))).absolute()))

    @classmethod
    def keyring(cls, service: str = "mcpsync") -> TokenStoreSpec:
        return cls("keyring", service=service)

    def open(self) -> TokenStore:
        """The store, made in this process. :class:`~mcpsync.errors.ConfigError` when it
        cannot be: the keyring package is not installed (the message names
        ``pip install 'mcpsync[keyring]'``), or keyring found no backend here ("no system
        keyring is available")."""
        if self.kind == "file":
            assert self.path is not None
            return FileTokenStore(self.path)
        if self.kind == "keyring":
            from .keyring_store import KeyringTokenStore

            store = KeyringTokenStore(self.service)
            store.check_available()
            return store
        return MemoryTokenStore()
