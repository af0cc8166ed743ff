"""A token store in the system keyring (macOS Keychain, Windows Credential Locker,
Secret Service / KWallet on Linux), through the ``keyring`` package (extra ``keyring``).

Owns: :class:`KeyringTokenStore`. Each store key (``token <issuer> <resource> <client>``,
``client <issuer>``, ``server <url>``: see :mod:`.storage`) is one keyring entry of the
service ``mcpsync`` (or ``service=``), its value the JSON text. ``keyring`` picks the
backend (``keyring.set_keyring(...)`` or its configuration file choose another); a
backend failure is a :class:`~mcpsync.errors.ConfigError` that names the operation and
the backend, never a value. :meth:`KeyringTokenStore.locked` holds the store against the
other threads and processes using the same service (a lock file ``keyring-<service>.lock``
in the per-user cache folder, made and checked as :mod:`mcpsync.runtime.cachedir` says), as
``OAuth`` does across a refresh.

>>> from mcpsync.auth.keyring_store import KeyringTokenStore    # doctest: +SKIP
>>> auth = OAuth(client_name="my-app", store=KeyringTokenStore())  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from typing import Any

from ..errors import ConfigError
from ..runtime.cachedir import private_dir, user_cache_dir
from ._filelock import file_lock

__all__ = ["KeyringTokenStore"]


def _keyring() -> Any:
    try:
        import keyring
    except ImportError:
        raise ConfigError(
            "KeyringTokenStore needs the keyring package: pip install 'mcpsync[keyring]'"
        ) from None
    return keyring


class KeyringTokenStore:
    """Token-store entries as passwords of one keyring service (thread-safe)."""

    def __init__(
        self, service: str = "mcpsync", *, backend: Any = None, lock_timeout: float = 30.0
    ) -> None:
        """``backend``: a ``keyring.backend.KeyringBackend`` instance to use instead of
        the configured one (tests, or a store of one's choosing). ``lock_timeout``: the
        longest wait for :meth:`locked`."""
        if not lock_timeout > 0:
            raise ConfigError(
                f"KeyringTokenStore lock_timeout must be > 0 seconds, not {lock_timeout!r}"
            )
        self._keyring = _keyring()
        self.service = service
        self._backend = backend
        self._lock = threading.Lock()
        self.lock_timeout = float(lock_timeout)

    def locked(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """Hold this service's entries against every other thread and process using them
        for the ``with`` block (``timeout``: default ``lock_timeout``;
        :class:`~mcpsync.errors.LockTimeout` naming the lock file)."""
        folder = user_cache_dir()
        tag = hashlib.sha256(self.service.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        lock = file_lock(os.path.join(folder, f"keyring-{tag}.lock"))

        def prepare() -> None:  # the folder made 0700, or checked, before the lock file
            private_dir(folder)

        return lock.hold(
            exclusive=True,
            timeout=self.lock_timeout if timeout is None else timeout,
            prepare=prepare,
        )

    def check_available(self) -> None:
        """Raise ConfigError when keyring found no usable backend (a headless Linux box
        without Secret Service / KWallet: keyring's ``fail.Keyring``)."""
        from keyring.backends import fail

        if isinstance(self._ring(), fail.Keyring):
            raise ConfigError(
                "no system keyring is available here (keyring found no backend); install "
                "and set one up (Secret Service, KWallet, keyrings.alt) or keep tokens in the "
                "file store"
            )

    def _ring(self) -> Any:
        return self._backend if self._backend is not None else self._keyring.get_keyring()

    def _fail(self, what: str, exc: BaseException) -> ConfigError:
        backend = type(self._ring()).__name__
        return ConfigError(f"keyring ({backend}): cannot {what} ({type(exc).__name__})")

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            try:
                text = self._ring().get_password(self.service, key)
            except self._keyring.errors.KeyringError as exc:
                raise self._fail("read an entry", exc) from None
        if text is None:
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None  # not ours (another program's entry under this name)
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: dict[str, Any]) -> None:
        text = json.dumps(value, sort_keys=True)
        with self._lock:
            try:
                self._ring().set_password(self.service, key, text)
            except self._keyring.errors.KeyringError as exc:
                raise self._fail("write an entry", exc) from None

    def delete(self, key: str) -> None:
        with self._lock:
            try:
                self._ring().delete_password(self.service, key)
            except self._keyring.errors.PasswordDeleteError:
                pass  # there was none
            except self._keyring.errors.KeyringError as exc:
                raise self._fail("delete an entry", exc) from None

    def __repr__(self) -> str:
        return f"KeyringTokenStore(service={self.service!r})"
