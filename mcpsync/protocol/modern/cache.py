"""The cache-hint store of the modern era (``ttlMs`` / ``cacheScope`` on list results).

Owns: ``HintCache`` and its process-wide default instance ``HINT_CACHE``. A Session is
given one (``Session.connect`` uses the default); tests pass a fresh one.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["HintCache", "HINT_CACHE"]

_MAX_TTL_MS = 24 * 3600 * 1000


class HintCache:
    """Results kept for as long as their ``ttlMs`` says, shared only as ``cacheScope`` allows.

    Keyed by server, scope, method and the parameters that affect the result (never
    ``_meta``). ``"public"`` entries are shared by every session to the same server;
    private ones (the default) only within one credential. Results are stored as JSON
    text, so no caller can change what another one reads.
    """

    def __init__(self, max_entries: int = 2048) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str, str, str], tuple[float, str, Any]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    @staticmethod
    def _params_key(params: Mapping[str, Any] | None) -> str:
        clean = {k: v for k, v in (params or {}).items() if k != "_meta"}
        return json.dumps(clean, sort_keys=True, separators=(",", ":"), default=str)

    def get(
        self,
        server: str | None,
        credential: str | None,
        method: str,
        params: Mapping[str, Any] | None,
    ) -> dict[str, Any] | None:
        if server is None:
            return None
        pkey = self._params_key(params)
        now = time.monotonic()
        with self._lock:
            for scope in (credential, "public"):
                if scope is None:
                    continue
                key = (server, scope, method, pkey)
                entry = self._entries.get(key)
                if entry is None:
                    continue
                if entry[0] <= now:
                    del self._entries[key]
                    continue
                self._entries.move_to_end(key)
                return json.loads(entry[1])
        return None

    def put(
        self,
        server: str | None,
        credential: str | None,
        method: str,
        params: Mapping[str, Any] | None,
        result: Any,
        *,
        keep_alive: Any = None,
    ) -> bool:
        """Store ``result`` if its hints allow; returns whether it was stored."""
        if server is None or not isinstance(result, dict):
            return False
        public = result.get("cacheScope") == "public"
        scope = "public" if public else credential
        pkey = self._params_key(params)
        ttl = result.get("ttlMs")
        with self._lock:
            for stale_scope in {scope, "public"} - {None}:  # a fresh answer replaces older ones
                self._entries.pop((server, stale_scope, method, pkey), None)  # type: ignore[arg-type]
            if scope is None or isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
                return False
            key = (server, scope, method, pkey)
            self._entries[key] = (
                time.monotonic() + min(ttl, _MAX_TTL_MS) / 1000.0,
                json.dumps(result),
                keep_alive,
            )
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return True

    def invalidate(self, server: str | None, methods: Sequence[str] | None = None) -> None:
        """Drop every entry of ``server`` (for ``methods`` only, if given), all scopes."""
        if server is None:
            return
        with self._lock:
            for key in [
                k for k in self._entries if k[0] == server and (methods is None or k[2] in methods)
            ]:
                del self._entries[key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: The process-wide hint cache every modern session uses.
HINT_CACHE = HintCache()
