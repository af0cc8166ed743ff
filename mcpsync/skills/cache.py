"""Verified skill files kept for reuse: digest-bound, per server, bounded.

Owns: ``SkillFileCache`` and its process-wide default ``SKILL_FILES``. A file is stored
only after it passed its size and digest check, under (server, scope, uri, digest):
a later read is served from here only when the *current* entry still names the same
digest (the spec's "a cached file whose digest matches the current entry"), and only
within the same credential unless the server marked the read ``cacheScope: "public"``.
The listing itself is cached in the Session's hint cache (``protocol.modern.cache``),
honouring the listing's ``ttlMs`` / ``cacheScope``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["SKILL_FILES", "SkillFileCache"]

Key = tuple[str, str, str, str]


class SkillFileCache:
    """Verified file bytes, least recently used dropped past ``max_bytes``."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Key, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(
        self, server: str | None, credential: str | None, uri: str, digest: str
    ) -> bytes | None:
        if server is None:
            return None
        with self._lock:
            for scope in (credential, "public"):
                if scope is None:
                    continue
                data = self._entries.get((server, scope, uri, digest))
                if data is not None:
                    self._entries.move_to_end((server, scope, uri, digest))
                    return data
        return None

    def put(
        self,
        server: str | None,
        credential: str | None,
        uri: str,
        digest: str,
        data: bytes,
        *,
        public: bool = False,
    ) -> None:
        scope = "public" if public else credential
        if server is None or scope is None or len(data) > self.max_bytes:
            return
        key = (server, scope, uri, digest)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._entries[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


#: The process-wide store every Session uses unless given its own (``session.skills.files``).
SKILL_FILES = SkillFileCache()
