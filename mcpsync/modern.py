"""The stateless 2026-07-28 wire ("modern" era) beside the initialize handshake.

Owns: choosing the era at bring-up (the ``server/discover`` probe, the fallback to
``initialize``, the per-process verdict cache), the per-request ``_meta`` envelope (the
``Connection.meta_provider``), the request driver that every modern call goes through
(multi round-trip requests with ``input_required``, one retry after
``UnsupportedProtocolVersionError`` -32022, one re-list and retry after
``HeaderMismatch`` -32020, the tasks extension), ``subscriptions/listen`` streams,
cache hints (``ttlMs``/``cacheScope``) for the list caches, and the HTTP header helpers
(``Mcp-Method``, ``Mcp-Name``, ``Mcp-Param-*`` with the Base64 form, validation of
``x-mcp-header`` declarations).

Era decision (``era="auto"``), following the spec's dual-era rules:

============================================  ==========================================
what the server did                           verdict
============================================  ==========================================
answered ``server/discover`` with a modern    modern, at the newest mutual version
version in ``supportedVersions``
answered -32022 naming a modern version       modern: probe again with that version
answered -32022 naming only legacy versions   legacy (initialize)
answered -32022 naming nothing we speak       ``VersionMismatch``
answered -32020 / -32021                      modern evidence: ``HandshakeError``
any other JSON-RPC error, an HTTP 4xx whose   legacy (initialize)
body is not a modern JSON-RPC error
no answer within the probe's patience         initialize sent beside it; whichever
(stdio), but to ``initialize``                is answered decides (legacy here)
a discover result without a modern version    legacy (initialize)
a stdio server died, its stderr naming        started again once, remembered as legacy
``server/discover`` (old SDKs crash on it)
transport failure (refused, process died)     raised: no verdict
============================================  ==========================================

The verdict is remembered per server (stdio: command line, working directory and
environment; HTTP: the endpoint URL) for the life of the process; a remembered
"legacy" is re-probed if ``initialize`` then answers -32022.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as futures_wait
from typing import TYPE_CHECKING, Any

from . import jsonrpc
from .connection import Connection
from .errors import (
    CapabilityError,
    ConfigError,
    HandshakeError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    ServerError,
    TransportError,
    VersionMismatch,
)
from .handshake import (
    Handshake,
    accept_initialize,
    initialize,
    initialize_params,
)
from .versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "PROTOCOL_VERSION_KEY",
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "LOG_LEVEL_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "TASKS_EXTENSION",
    "MODERN_ERROR_CODES",
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_PROBE_TIMEOUT",
    "Envelope",
    "InputRequiredRoundsExceeded",
    "InvalidToolHeaders",
    "HintCache",
    "HINT_CACHE",
    "ModernFuture",
    "ModernWire",
    "resolve_era",
    "negotiate",
    "server_identity",
    "remembered_era",
    "forget_era",
    "modern_capabilities",
    "encode_header_value",
    "standard_headers",
    "header_declarations",
    "param_headers",
]

log = logging.getLogger("mcpsync")

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

#: JSON-RPC errors only a modern server sends: positive evidence of the modern era.
MODERN_ERROR_CODES = frozenset(
    {jsonrpc.HEADER_MISMATCH, -32021, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION}
)
#: Methods on which a server may answer ``input_required``.
MRTR_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Methods on which a server may answer with a task (tasks extension).
TASK_METHODS = frozenset({"tools/call"})
#: Methods whose results carry cache hints and that the list caches keep.
CACHEABLE_METHODS = frozenset(
    {"server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)
#: Cap on ``input_required`` rounds for one call.
DEFAULT_MAX_ROUNDS = 10
#: stdio: how long the ``server/discover`` probe may go unanswered before ``initialize``
#: is sent beside it (at most half of ``connect_timeout``; the probe is not given up).
DEFAULT_PROBE_TIMEOUT = 5.0
_MAX_TTL_MS = 24 * 3600 * 1000
#: A listen stream is re-opened after this long (it also bounds the idle read on HTTP).
LISTEN_TIMEOUT = 24 * 3600.0
_TASK_POLL_DEFAULT = 1.0
_TASK_POLL_MAX = 30.0


class InputRequiredRoundsExceeded(ProtocolError):
    """The server kept answering ``input_required`` past the round limit."""


class InvalidToolHeaders(ProtocolError):
    """A tool's ``x-mcp-header`` declarations are invalid: the tool is not offered or called."""


# -- the per-request envelope ------------------------------------------------------------


def modern_capabilities(capabilities: Mapping[str, Any], *, tasks: bool = True) -> dict[str, Any]:
    """Client capabilities in their 2026-07-28 shape (roots has no ``listChanged``)."""
    out: dict[str, Any] = {}
    for key, value in capabilities.items():
        if key == "roots":
            out["roots"] = {}
        else:
            out[key] = dict(value) if isinstance(value, Mapping) else value
    if tasks:
        extensions = dict(out.get("extensions") or {})
        extensions.setdefault(TASKS_EXTENSION, {})
        out["extensions"] = extensions
    return out


class Envelope:
    """What every modern request carries in ``_meta``; the connection's ``meta_provider``."""

    def __init__(
        self, version: str, capabilities: Mapping[str, Any], client_info: Mapping[str, Any]
    ) -> None:
        self.version = version
        self.capabilities = dict(capabilities)
        self.client_info = dict(client_info)
        #: per-request log level (``set_logging_level`` in the modern era); None = no logs
        self.log_level: str | None = None

    def __call__(self, method: str) -> dict[str, Any]:
        if method.startswith("notifications/"):
            return {}
        meta: dict[str, Any] = {
            PROTOCOL_VERSION_KEY: self.version,
            CLIENT_CAPABILITIES_KEY: self.capabilities,
            CLIENT_INFO_KEY: self.client_info,
        }
        if self.log_level is not None and method not in ("server/discover", "subscriptions/listen"):
            meta[LOG_LEVEL_KEY] = self.log_level
        return meta

    @property
    def tasks(self) -> bool:
        return TASKS_EXTENSION in (self.capabilities.get("extensions") or {})


# -- server identity and the per-process verdict cache --------------------------------------


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def server_identity(
    target: Any,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Any = None,
    headers: Mapping[str, str] | None = None,
    auth: Any = None,
) -> tuple[str | None, str | None]:
    """(server key, credential key) for the verdict and hint caches; None when unknown.

    Both are digests (no secret is kept in clear). The credential key separates
    authorization contexts: different tokens, headers or environments never share a
    private cache entry. An auth object is identified by itself (kept alive by the
    cache entry, so its id is not reused).
    """
    if isinstance(target, str) and "://" in target:
        server = "http:" + target.rstrip("/")
        if auth is not None:
            credential = _digest(server, sorted((headers or {}).items()), "auth-object", id(auth))
        else:
            credential = _digest(server, sorted((headers or {}).items()))
        return server, credential
    if isinstance(target, (list, tuple)) and target:
        server = "stdio:" + _digest(
            list(map(str, target)),
            str(cwd) if cwd is not None else None,
            sorted((env or {}).items()),
        )
        return server, server
    identity = getattr(target, "identity", None)  # a Transport may name the server it reaches
    if isinstance(identity, str) and identity:
        server = "transport:" + _digest(identity)
        return server, server
    return None, None


_verdicts: dict[str, tuple[str, str]] = {}  # server key -> (era, why)
_verdicts_lock = threading.Lock()


def remembered_era(server_key: str | None) -> str | None:
    """The era remembered for this server in this process, if any."""
    if server_key is None:
        return None
    with _verdicts_lock:
        found = _verdicts.get(server_key)
    return found[0] if found else None


def _remembered_reason(server_key: str | None) -> str:
    with _verdicts_lock:
        found = _verdicts.get(server_key) if server_key is not None else None
    return found[1] if found else ""


def _remember_era(server_key: str | None, era: str, why: str = "") -> None:
    if server_key is not None:
        with _verdicts_lock:
            _verdicts[server_key] = (era, why)


def forget_era(server_key: str | None = None) -> None:
    """Forget the verdict for one server (or all of them)."""
    with _verdicts_lock:
        if server_key is None:
            _verdicts.clear()
        else:
            _verdicts.pop(server_key, None)


# -- cache hints -------------------------------------------------------------------------


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


# -- HTTP header helpers -------------------------------------------------------------------

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SAFE_INT = 2**53 - 1
_PRIMITIVES = ("string", "integer", "boolean")
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
_SENTINEL = re.compile(r"^=\?base64\?.*\?=$", re.DOTALL)


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: as is, or ``=?base64?...?=`` when it is not plain ASCII.

    Base64 is used for anything outside visible ASCII and space (including tabs and
    other control characters), leading or trailing whitespace, and values that look
    like the sentinel themselves.
    """
    plain = (
        value == value.strip()
        and all(0x20 <= ord(ch) <= 0x7E for ch in value)
        and not _SENTINEL.match(value)
    )
    if plain:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def _mapping_at(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``obj[key]`` if it is a mapping, else an empty one (a peer may send anything there)."""
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _dict_at(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` if it is a JSON object, else an empty one (a peer may send anything there)."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def standard_headers(message: Mapping[str, Any]) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` for one modern POST.

    The version comes from the message's ``_meta`` (so header and body always agree);
    nothing is returned for a message without a modern version (legacy traffic).
    """
    params = _mapping_at(message, "params")
    meta = _mapping_at(params, "_meta")
    version = meta.get(PROTOCOL_VERSION_KEY)
    method = message.get("method")
    if (
        not isinstance(version, str)
        or version not in MODERN_VERSIONS
        or not isinstance(method, str)
    ):
        return {}
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    name: Any = None
    if method in ("tools/call", "prompts/get"):
        name = params.get("name")
    elif method == "resources/read":
        name = params.get("uri")
    elif method.startswith("tasks/"):
        name = params.get("taskId")
    if isinstance(name, str):
        headers["Mcp-Name"] = encode_header_value(name)
    return headers


def header_declarations(input_schema: Any) -> dict[str, tuple[tuple[str, ...], str]]:
    """The ``x-mcp-header`` declarations of a tool: header name -> (property path, type).

    Raises ``InvalidToolHeaders`` (saying why) when any declaration breaks the rules:
    empty or not an HTTP token, not on a statically reachable property (a chain of
    ``properties`` only), not a single primitive type (string, integer, boolean), or
    not case-insensitively unique.
    """
    found: list[tuple[tuple[str, ...], bool, Any, Any]] = []  # (path, reachable, value, schema)

    def scan(node: Any, reachable: bool, path: tuple[str, ...]) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key == "x-mcp-header":
                found.append((path, reachable and bool(path), value, node))
            elif key in _DATA_KEYWORDS:
                continue
            elif key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    scan(sub, reachable, (*path, str(name)))
            elif isinstance(value, dict):
                if key in ("$defs", "definitions", "patternProperties", "dependentSchemas"):
                    for sub in value.values():
                        scan(sub, False, path)
                else:
                    scan(value, False, path)
            elif isinstance(value, list):
                for sub in value:
                    scan(sub, False, path)

    scan(input_schema, True, ())
    decls: dict[str, tuple[tuple[str, ...], str]] = {}
    seen: set[str] = set()
    for path, reachable, value, schema in found:
        where = "/".join(path) or "(root)"
        if not isinstance(value, str) or not value:
            raise InvalidToolHeaders(f"x-mcp-header at {where} is empty or not a string")
        if not _TOKEN.match(value):
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} at {where} is not a valid HTTP header name"
            )
        if not reachable:
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} at {where} is not on a property reachable through 'properties'"
            )
        kind = schema.get("type")
        if kind not in _PRIMITIVES:
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} at {where} is on type {kind!r}; only string, integer, boolean are allowed"
            )
        if value.lower() in seen:
            raise InvalidToolHeaders(
                f"x-mcp-header {value!r} is declared more than once (names are case-insensitive)"
            )
        seen.add(value.lower())
        decls[value] = (path, kind)
    return decls


def param_headers(
    decls: Mapping[str, tuple[tuple[str, ...], str]], arguments: Any
) -> dict[str, str]:
    """``Mcp-Param-*`` headers for one call: values at the declared paths, encoded; absent/null omitted."""
    headers: dict[str, str] = {}
    for name, (path, kind) in decls.items():
        value: Any = arguments
        for step in path:
            value = value.get(step) if isinstance(value, Mapping) else None
            if value is None:
                break
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            if abs(value) > _SAFE_INT:
                raise ConfigError(
                    f"argument for header Mcp-Param-{name} is outside the safe integer range"
                )
            text = str(value)
        elif isinstance(value, float) and value.is_integer() and kind == "integer":
            text = str(int(value))
        else:
            text = str(value)
        headers[f"Mcp-Param-{name}"] = encode_header_value(text)
    return headers


# -- choosing the era ----------------------------------------------------------------------


def resolve_era(era: str, protocol_version: str | None) -> tuple[str, str | None]:
    """(era, pinned version) from the connect arguments; a pinned version pins the era."""
    if era not in ("auto", "legacy", "modern"):
        raise ConfigError(f"era must be 'auto', 'legacy' or 'modern', not {era!r}")
    if protocol_version is None:
        return era, None
    if protocol_version in MODERN_VERSIONS:
        pinned_era = "modern"
    elif protocol_version in HANDSHAKE_VERSIONS:
        pinned_era = "legacy"
    else:
        raise ConfigError(
            f"unknown protocol version {protocol_version!r}; this client speaks {', '.join((*MODERN_VERSIONS, *HANDSHAKE_VERSIONS))}"
        )
    if era not in ("auto", pinned_era):
        raise ConfigError(
            f"protocol version {protocol_version} belongs to the {pinned_era} era, not era={era!r}"
        )
    return pinned_era, protocol_version


def _supported_of(data: Any) -> list[str] | None:
    supported = data.get("supported") if isinstance(data, dict) else None
    if isinstance(supported, list) and all(isinstance(v, str) for v in supported):
        return supported
    return None


def _newest_mutual_modern(supported: Sequence[str], preferred: str | None = None) -> str | None:
    if preferred is not None and preferred in supported:
        return preferred
    for version in MODERN_VERSIONS:  # newest first
        if version in supported:
            return version
    return None


def _error_from_http(exc: HTTPStatusError) -> tuple[int, Any] | None:
    """The JSON-RPC error (code, data) in an HTTP error body, if it holds one."""
    message = getattr(exc, "payload", None)  # the parsed body, when the transport kept it
    if message is None:
        try:
            message = json.loads(exc.body_excerpt)
        except ValueError:
            return None
    error = message.get("error") if isinstance(message, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return error["code"], error.get("data")
    return None


class _Legacy(Exception):
    """Internal: the probe says 'legacy' (with the reason)."""


class _Budget:
    """What is left of the bring-up bound (``connect_timeout``): one deadline for the probe,
    ``initialize`` and any retry. Time spent in an interactive authorization (``paused()``:
    the auth object's ``flow_seconds``) does not count."""

    def __init__(
        self,
        timeout: float | None,
        deadline: float | None = None,
        paused: Callable[[], float] | None = None,
    ) -> None:
        if deadline is None and timeout is not None:
            deadline = time.monotonic() + timeout
        self.total = timeout
        self._deadline = deadline
        self._paused = paused
        self._paused_at_start = paused() if paused is not None else 0.0

    def deadline(self) -> float:
        """The absolute ``time.monotonic()`` deadline (inf: no bound)."""
        if self._deadline is None:
            return float("inf")
        if self._paused is None:
            return self._deadline
        return self._deadline + max(self._paused() - self._paused_at_start, 0.0)

    def remaining(self) -> float | None:
        """Seconds left (at least a millisecond, so a request still goes out), None: no bound."""
        if self._deadline is None:
            return None
        return max(self.deadline() - time.monotonic(), 0.001)

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline()

    def __str__(self) -> str:
        return f"connect_timeout={self.total:g} s" if self.total is not None else "no bound"


def _no_answer(conn: Connection, budget: _Budget, sent: str) -> RequestTimeout:
    return RequestTimeout(f"server {conn.name!r} did not answer {sent} within {budget}")


class _AnyDone:
    """``done()`` once any of ``futures`` is: a wait target for the transport's read loop."""

    __slots__ = ("futures",)

    def __init__(self, futures: Sequence[Future[Any]]) -> None:
        self.futures = futures

    def done(self) -> bool:
        return any(f.done() for f in self.futures)


def _wait_any(conn: Connection, futures: Sequence[Future[Any]], deadline: float) -> bool:
    """Wait (bounded by ``deadline``) until one of ``futures`` is done; True if one is."""
    target = _AnyDone(futures)
    pump = conn._pump  # stdio: read the pipe in this thread
    while not target.done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        step = min(remaining, 1.0)
        if pump is not None and not conn.closed:
            pump(target, time.monotonic() + step)
        else:
            futures_wait(futures, timeout=step, return_when=FIRST_COMPLETED)
    return True


def negotiate(
    conn: Connection,
    *,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    protocol_version: str | None = None,
    era: str = "auto",
    timeout: float | None = 30.0,
    deadline: float | None = None,
    paused: Callable[[], float] | None = None,
    server_key: str | None = None,
    credential_key: str | None = None,
    probe_timeout: float | None = None,
) -> Handshake:
    """Bring a started connection up in the right era; the result says which and why.

    ``era`` "legacy" runs ``initialize``; "modern" runs ``server/discover`` (retrying
    once after -32022) and fails if the server is not modern; "auto" probes with
    ``server/discover`` and falls back to ``initialize`` on anything that is not
    positive evidence of a modern server (see the module docstring). A legacy result
    carries the time spent probing in ``probe_seconds``.

    ``timeout`` bounds the whole negotiation (probe, ``initialize``, the retries);
    ``deadline`` (a ``time.monotonic()`` value) is that bound given absolutely, when
    bring-up started earlier; ``paused()`` returns the seconds spent in an interactive
    authorization so far, which do not count. On stdio, ``initialize`` goes out beside a
    probe still unanswered after ``probe_timeout`` (default ``DEFAULT_PROBE_TIMEOUT``, at
    most half the bound): a slow starter gets both at once and answers in order; a
    server that ignores the probe gets ``initialize`` anyway.
    """
    spent: list[float] = []
    handshake = _negotiate(
        conn, capabilities=capabilities, client_info=client_info, protocol_version=protocol_version,
        era=era, budget=_Budget(timeout, deadline, paused), server_key=server_key,
        credential_key=credential_key, probe_timeout=probe_timeout, spent=spent,
    )  # fmt: skip
    if handshake.era == "legacy" and spent:
        handshake.probe_seconds = sum(spent)
    return handshake


def _negotiate(
    conn: Connection,
    *,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    protocol_version: str | None,
    era: str,
    budget: _Budget,
    server_key: str | None,
    credential_key: str | None,
    probe_timeout: float | None,
    spent: list[float],
) -> Handshake:
    started = time.perf_counter()
    era, pinned = resolve_era(era, protocol_version)
    kind = getattr(conn.transport, "kind", "")
    if kind == "sse":
        if era == "modern":
            raise ConfigError("the legacy HTTP+SSE transport cannot carry the 2026-07-28 protocol")
        return _legacy(
            conn, capabilities, client_info, pinned, budget, "legacy HTTP+SSE transport", server_key
        )
    if era == "legacy":
        why = f"protocol version {pinned} pinned" if pinned else "era='legacy' requested"
        return _legacy(conn, capabilities, client_info, pinned, budget, why, None)  # no evidence

    forced = era == "modern"
    if not forced and remembered_era(server_key) == "legacy":
        why = _remembered_reason(server_key)
        try:
            return _legacy(
                conn,
                capabilities,
                client_info,
                None,
                budget,
                "remembered verdict for this server: legacy" + (f" ({why})" if why else ""),
                server_key,
                why,
            )
        except ServerError as exc:
            if exc.code != jsonrpc.UNSUPPORTED_PROTOCOL_VERSION:
                raise
            forget_era(server_key)  # the server changed: probe again
    cached = HINT_CACHE.get(server_key, credential_key, "server/discover", None)
    if cached is not None:
        version = _newest_mutual_modern(cached.get("supportedVersions") or (), pinned)
        if version is not None:
            return _modern(
                conn,
                cached,
                version,
                capabilities,
                client_info,
                started,
                "cached server/discover result",
                server_key,
            )

    # stdio (and the in-memory pair): initialize may go out beside an unanswered probe
    side_by_side = not forced and kind in ("stdio", "memory")
    bound = DEFAULT_PROBE_TIMEOUT if probe_timeout is None else probe_timeout
    version = pinned or MODERN_VERSIONS[0]
    notes: list[str] = []
    sent_box: list[_SentInitialize] = []  # the initialize sent beside the probe, if any
    sent: _SentInitialize | None = None
    for attempt in range(2):
        try:
            if side_by_side:
                side_by_side = False  # once: a retry knows the server answers
                try:
                    result = _probe_beside_initialize(
                        conn, version, capabilities, client_info, budget, bound, spent, sent_box
                    )
                finally:
                    sent = sent_box[0] if sent_box else None
            else:
                result = _probe(conn, version, capabilities, client_info, budget, spent)
        except _Legacy as legacy:
            reason = str(legacy)
            if forced:
                raise HandshakeError(
                    f"era='modern' requested, but the server does not speak 2026-07-28: {reason}"
                ) from None
            try:
                return _legacy(
                    conn, capabilities, client_info, None, budget, reason, server_key, sent=sent
                )
            except TransportError as exc:  # the probe broke the server (old SDKs crash on it)
                raise _restart_as_legacy(exc, kind, server_key, reason) from None
            except ServerError as exc:  # a slow modern server locked in by a late probe
                supported = (
                    _supported_of(exc.data)
                    if exc.code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
                    else None
                )
                mutual = _newest_mutual_modern(supported or ())
                if mutual is None or attempt:
                    raise
                notes.append(f"initialize answered -32022 after: {reason}")
                if sent is not None and sent.probe is not None:
                    _forget_probe(conn, sent.probe)
                sent = None
                version = mutual
                continue
        except TransportError as exc:
            if kind != "stdio" or forced or isinstance(exc, HTTPStatusError):
                raise
            raise _restart_as_legacy(
                exc, kind, server_key, "the server stopped on server/discover"
            ) from None
        except _Retry as retry:
            if attempt:
                raise HandshakeError(
                    f"server/discover rejected version {version} twice; server supports {retry.supported}"
                ) from None
            notes.append(
                f"server/discover rejected {version} with -32022 (supports {', '.join(retry.supported)})"
            )
            version = retry.version
            continue
        except _LegacyVersions as legacy_only:
            if forced:
                raise VersionMismatch(MODERN_VERSIONS, ", ".join(legacy_only.supported)) from None
            return _legacy(
                conn, capabilities, client_info, None, budget,
                f"server/discover: the server supports only {', '.join(legacy_only.supported)}", server_key,
                sent=sent,
            )  # fmt: skip
        supported = result.get("supportedVersions")
        offered: list[Any] = supported if isinstance(supported, list) else []
        chosen = _newest_mutual_modern(offered, pinned or version)
        if chosen is None:
            if forced:
                raise VersionMismatch(MODERN_VERSIONS, ", ".join(map(str, offered)))
            legacy_versions = [v for v in offered if v in HANDSHAKE_VERSIONS]
            why = f"server/discover lists no modern version ({', '.join(map(str, offered)) or 'none'})"
            if not legacy_versions and offered:
                raise VersionMismatch(
                    (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS), ", ".join(map(str, offered))
                )
            return _legacy(
                conn, capabilities, client_info, None, budget, why, server_key, sent=sent
            )
        HINT_CACHE.put(server_key, credential_key, "server/discover", None, result)
        how = (
            "era='modern' requested"
            if forced and not pinned
            else (f"protocol version {pinned} pinned" if pinned else "server/discover answered")
        )
        reason = "; ".join([*notes, f"{how}: server supports {', '.join(map(str, offered))}"])
        # An initialize sent beside the probe stays pending: its answer arrives unnoticed.
        return _modern(conn, result, chosen, capabilities, client_info, started, reason, server_key)
    raise AssertionError("unreachable")  # pragma: no cover


class _Retry(Exception):
    def __init__(self, version: str, supported: list[str]) -> None:
        self.version = version
        self.supported = supported


class _LegacyVersions(Exception):
    def __init__(self, supported: list[str]) -> None:
        self.supported = supported


class _SentInitialize:
    """An ``initialize`` sent beside an unanswered probe (``probe``: that probe, or None
    once it was answered)."""

    __slots__ = ("future", "started", "probe")

    def __init__(self, future: Future[Any], started: float, probe: Future[Any] | None) -> None:
        self.future = future
        self.started = started
        self.probe = probe


def _restart_as_legacy(
    exc: TransportError, kind: str, server_key: str | None, reason: str
) -> TransportError:
    """A stdio server that died of the probe: remember it as legacy and ask the caller to
    start it again (``restart_legacy``); the new process gets ``initialize`` directly.

    Only when the server's last words name the probe (``server/discover``), as a server
    that cannot parse the method says when it dies of it: a server that exits on its own
    (a missing API key, a bad argument) is not started a second time."""
    tail = getattr(exc, "stderr_tail", "") or ""
    if kind == "stdio" and server_key is not None and "server/discover" in tail:
        _remember_era(server_key, "legacy", f"it stopped after the server/discover probe; {reason}")
        exc.restart_legacy = True  # type: ignore[attr-defined]
    return exc


def _takes_headers(conn: Connection) -> bool:
    """Whether per-request headers reach the wire (Streamable HTTP's ``send(headers=)``)."""
    try:
        return "headers" in inspect.signature(conn.transport.send).parameters
    except (TypeError, ValueError):
        return False


def _judge_error(code: int, data: Any, message: str, where: str) -> None:
    """Raise the verdict for a JSON-RPC error answering the probe."""
    if code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION:
        supported = _supported_of(data) or []
        mutual = _newest_mutual_modern(supported)
        if mutual is not None:
            raise _Retry(mutual, supported)
        if any(v in HANDSHAKE_VERSIONS for v in supported):
            raise _LegacyVersions([v for v in supported if isinstance(v, str)])
        raise VersionMismatch(
            (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS), ", ".join(supported) or "none named"
        )
    if code in MODERN_ERROR_CODES:
        raise HandshakeError(f"server/discover was rejected by a modern server ({code}: {message})")
    raise _Legacy(f"{where} answered error {code} ({message}): legacy server")


def _send_probe(
    conn: Connection,
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    timeout: float | None,
) -> Future[Any]:
    envelope = Envelope(version, modern_capabilities(capabilities), client_info)
    params = {"_meta": envelope("server/discover")}
    extra: dict[str, Any] = {}
    if _takes_headers(conn):  # HTTP, not yet in modern mode: say it per request
        extra["headers"] = standard_headers({"method": "server/discover", "params": params})
    return conn.request("server/discover", params, timeout=timeout, **extra)


def _probe(
    conn: Connection,
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    budget: _Budget,
    spent: list[float],
) -> dict[str, Any]:
    """``server/discover`` waited for until the deadline, judged."""
    started = time.perf_counter()
    try:
        future = _send_probe(conn, version, capabilities, client_info, budget.remaining())
        try:
            conn.wait(future)
        except RequestTimeout:
            raise _no_answer(conn, budget, "server/discover") from None
        except MCPSyncError:
            pass  # judged below
        return _judge_probe(future)
    finally:
        spent.append(time.perf_counter() - started)


def _probe_beside_initialize(
    conn: Connection,
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    budget: _Budget,
    bound: float,
    spent: list[float],
    sent_box: list[_SentInitialize],
) -> dict[str, Any]:
    """The stdio probe: ``server/discover``, and ``initialize`` beside it if unanswered.

    The probe has no timer of its own (a late answer finds its call, and is dropped
    without a word); it is waited for ``bound`` seconds (at most half the budget). Then
    ``initialize`` goes out too: a server still starting (a first ``npx``/``uvx``
    download) reads both in order and answers both, so it pays no extra wait; a legacy
    server that ignores requests before ``initialize`` answers that one. Returns the
    judged probe result, or raises (``_Legacy`` when ``initialize`` was answered first);
    the ``initialize`` sent, if any, is put in ``sent_box``.
    """
    started = time.perf_counter()
    probe = _send_probe(conn, version, capabilities, client_info, None)
    remaining = budget.remaining()
    patience = bound if remaining is None else min(bound, remaining / 2)
    try:
        if _wait_any(conn, (probe,), min(time.monotonic() + patience, budget.deadline())):
            return _judge_probe(probe)
        params = initialize_params(dict(client_info), dict(capabilities), None)
        sent_at = time.perf_counter()
        init = conn.request("initialize", params, timeout=None)  # bounded below, not by a timer
    finally:
        spent.append(time.perf_counter() - started)
    sent = _SentInitialize(init, sent_at, probe)
    sent_box.append(sent)
    if not _wait_any(conn, (probe, init), budget.deadline()):
        raise _no_answer(conn, budget, "server/discover or initialize")
    if init.done() and not probe.done():
        raise _Legacy(
            f"no answer to server/discover within {patience:.3g} s, but to initialize: legacy server"
        )
    sent.probe = None  # answered: nothing to forget
    return _judge_probe(probe)


def _judge_probe(future: Future[Any]) -> dict[str, Any]:
    """The verdict on an answered probe: its DiscoverResult, or the exception that says why not."""
    try:
        result = future.result(timeout=0)
    except ServerError as exc:
        _judge_error(exc.code, exc.data, exc.message, "server/discover")
        raise  # pragma: no cover - _judge_error always raises
    except HTTPStatusError as exc:
        found = _error_from_http(exc)
        if found is not None:
            _judge_error(
                found[0], found[1], f"HTTP {exc.status}", f"HTTP {exc.status} to server/discover"
            )
        if exc.status in (400, 404, 405):
            raise _Legacy(
                f"HTTP {exc.status} to server/discover without a modern JSON-RPC error: legacy server"
            ) from None
        raise
    if not isinstance(result, dict) or not isinstance(result.get("capabilities"), dict):
        raise _Legacy("server/discover result is not a DiscoverResult: legacy server")
    if result.get("resultType", "complete") != "complete":
        raise ProtocolError(f"server/discover answered resultType {result.get('resultType')!r}")
    return result


def _forget_probe(conn: Connection, probe: Future[Any]) -> None:
    """Tell the server an unanswered probe is no longer wanted. Its call stays in the
    pending table (no timer), so an answer that still comes is dropped without a word."""
    call = getattr(probe, "_mcpsync_call", None)
    if call is None or probe.done():
        return
    try:
        conn.notify(
            "notifications/cancelled",
            {"requestId": call.id, "reason": "initialize answered first"},
        )
    except MCPSyncError:
        pass


def _legacy(
    conn: Connection,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    pinned: str | None,
    budget: _Budget,
    reason: str,
    server_key: str | None,
    why: str = "",
    *,
    sent: _SentInitialize | None = None,
) -> Handshake:
    if sent is None:  # initialize now, bounded by what is left of the budget
        try:
            handshake = initialize(
                conn,
                client_info=dict(client_info),
                capabilities=dict(capabilities),
                protocol_version=pinned,
                timeout=budget.remaining(),
            )
        except RequestTimeout:
            raise _no_answer(conn, budget, "initialize") from None
    else:  # the initialize that went out beside the probe
        if not _wait_any(conn, (sent.future,), budget.deadline()):
            raise _no_answer(conn, budget, "initialize")
        handshake = accept_initialize(conn, sent.future.result(timeout=0), sent.started)
        if sent.probe is not None:
            _forget_probe(conn, sent.probe)
    handshake.era = "legacy"
    handshake.era_reason = reason
    _remember_era(server_key, "legacy", why)
    return handshake


def _modern(
    conn: Connection,
    result: dict[str, Any],
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    started: float,
    reason: str,
    server_key: str | None,
) -> Handshake:
    meta = _dict_at(result, "_meta")
    server_info = meta.get(SERVER_INFO_KEY) or result.get("serverInfo")
    if not isinstance(server_info, dict) or "name" not in server_info:
        server_info = {"name": getattr(conn, "name", "server"), "version": ""}
    server_info = {"version": "", **server_info}
    supported = result.get("supportedVersions")
    instructions = result.get("instructions")
    conn.meta_provider = Envelope(version, modern_capabilities(capabilities), client_info)
    conn.transport.set_protocol_version(version)
    _remember_era(server_key, "modern")
    return Handshake(
        protocol_version=version,
        server_info=server_info,
        capabilities=result["capabilities"],
        instructions=instructions if isinstance(instructions, str) else None,
        raw=result,
        seconds=time.perf_counter() - started,
        era="modern",
        era_reason=reason,
        supported_versions=tuple(v for v in supported if isinstance(v, str))
        if isinstance(supported, list)
        else (),
    )


# -- the request driver ----------------------------------------------------------------------


def _settle(future: Future[Any], error: BaseException | None, value: Any = None) -> None:
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass


def _result_type(result: Any) -> str:
    if isinstance(result, dict):
        kind = result.get("resultType", "complete")
        return kind if isinstance(kind, str) else "invalid"
    return "complete"


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    return value


class ModernFuture(Future):  # type: ignore[type-arg]
    """A modern call in flight, possibly over several requests (MRTR rounds, a task).

    ``cancel()`` cancels the request in flight (the server is told) and, for a task,
    sends ``tasks/cancel``. ``task_id`` is set once the server turned the call into a task.
    """

    def __init__(self, wire: ModernWire, method: str) -> None:
        super().__init__()
        self.method = method
        self.task_id: str | None = None
        self._wire = wire
        self._current: Future[Any] | None = None
        self._cancel_requested = threading.Event()

    def cancel(self) -> bool:
        if not super().cancel():  # first: what follows must not settle it another way
            return False
        self._cancel_requested.set()
        current = self._current
        if current is not None:
            current.cancel()  # the server is told (notifications/cancelled, or the stream closes)
        if self.task_id is not None:
            self._wire._cancel_task(self.task_id)
        return True

    def wait(self) -> Any:
        """Block until done; Ctrl-C cancels the call and re-raises."""
        try:
            while True:
                try:
                    return self.result(timeout=1.0)
                except FutureTimeout:  # not the builtin TimeoutError before Python 3.11
                    if self._wire.closed:
                        raise self._wire._conn._closed_error() from None
        except KeyboardInterrupt:
            self.cancel()
            raise


class _Options:
    __slots__ = ("timeout", "on_progress", "reset_timeout_on_progress", "max_timeout")

    def __init__(self, timeout: Any, on_progress: Any, reset: bool, max_timeout: Any) -> None:
        self.timeout = timeout
        self.on_progress = on_progress
        self.reset_timeout_on_progress = reset
        self.max_timeout = max_timeout

    def request_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.timeout is not ...:
            kwargs["timeout"] = self.timeout
        if self.on_progress is not None:
            kwargs["on_progress"] = self.on_progress
            kwargs["reset_timeout_on_progress"] = self.reset_timeout_on_progress
            kwargs["max_timeout"] = self.max_timeout
        return kwargs


class ModernWire:
    """Everything a session does differently in the modern era; one per session."""

    def __init__(
        self,
        session: Session,
        handshake: Handshake,
        *,
        server_key: str | None = None,
        credential_key: str | None = None,
        keep_alive: Any = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
    ) -> None:
        self._session = session
        self._conn = session.connection
        self.name = session.name
        envelope = self._conn.meta_provider
        if not isinstance(envelope, Envelope):
            raise HandshakeError("modern bring-up did not install the request envelope")
        self.envelope = envelope
        self.handshake = handshake
        self.server_key = server_key
        self.credential_key = credential_key
        self._keep_alive = keep_alive  # e.g. the auth object the credential key names
        self.max_rounds = max_rounds
        #: True on Streamable HTTP: tools with invalid x-mcp-header declarations are dropped
        self.http = getattr(self._conn.transport, "kind", "") == "streamable-http"
        self._tool_headers: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {}
        self._invalid_tools: dict[str, str] = {}
        self._workers: set[threading.Thread] = set()
        self._closing = threading.Event()
        self.listener = Listener(self)
        self._forward = self._conn.notification_handler
        self._request_takes_headers = _takes_headers(self._conn)
        self._conn.notification_handler = self._on_notification
        abort = getattr(self._conn.transport, "abort_request", None)
        if self.http and abort is not None:
            # Streamable HTTP at 2026-07-28: closing the response stream is the cancellation,
            # and no client notification is defined; never POST notifications/cancelled.
            self._conn.cancel_hook = lambda request_id: abort(request_id) or True

    @property
    def closed(self) -> bool:
        return self._conn.closed

    @property
    def version(self) -> str:
        return self.envelope.version

    def close(self) -> None:
        """Stop listen streams and driver threads (bounded)."""
        self._closing.set()
        self.listener.close()
        current = threading.current_thread()
        for thread in list(self._workers):
            if thread is not current:
                thread.join(timeout=2.0)

    # -- sending ------------------------------------------------------------------------

    def _send(self, method: str, params: dict[str, Any] | None, opts: _Options) -> Future[Any]:
        """Send one request; its raw result as a future."""
        method, params, kwargs = self._prepare(method, params, opts)
        return self._conn.request(method, params, **kwargs)

    def _send_and_wait(self, method: str, params: dict[str, Any] | None, opts: _Options) -> Any:
        """Send one request and block for its raw result (no Future: ``Connection.call``)."""
        method, params, kwargs = self._prepare(method, params, opts)
        return self._conn.call(method, params, **kwargs)

    def _prepare(
        self, method: str, params: dict[str, Any] | None, opts: _Options
    ) -> tuple[str, dict[str, Any] | None, dict[str, Any]]:
        if method == "ping":  # no ping in 2026-07-28: discover is the always-implemented method
            method, params = "server/discover", None
        headers = self._extra_headers(method, params)
        kwargs = opts.request_kwargs()
        if headers and self._request_takes_headers:  # only HTTP has a header layer
            kwargs["headers"] = headers
        return method, params, kwargs

    def _extra_headers(self, method: str, params: dict[str, Any] | None) -> dict[str, str]:
        """Per-request HTTP headers the transport cannot know: ``Mcp-Param-*`` of the tool's
        ``x-mcp-header`` declarations, and ``Mcp-Name`` = taskId for the tasks methods."""
        if not self.http or not params:
            return {}
        if method.startswith("tasks/") and isinstance(params.get("taskId"), str):
            return {"Mcp-Name": encode_header_value(params["taskId"])}
        if method != "tools/call":
            return {}
        decls = self._tool_headers.get(params.get("name"))  # type: ignore[arg-type]
        return param_headers(decls, params.get("arguments") or {}) if decls else {}

    def _check_callable(self, method: str, params: dict[str, Any] | None) -> None:
        if method == "tools/call" and params and params.get("name") in self._invalid_tools:
            name = params["name"]
            raise InvalidToolHeaders(
                f"tool {name!r} of {self.name!r} is not called: {self._invalid_tools[name]} (nothing was sent)"
            )

    # -- blocking and future calls --------------------------------------------------------

    def call(
        self,
        method: str,
        params: dict[str, Any] | None,
        convert: Callable[[Any], Any],
        **options: Any,
    ) -> Any:
        """A blocking modern call: every round runs in the calling thread."""
        opts = _Options(options.get("timeout", ...), options.get("on_progress"),
                        options.get("reset_timeout_on_progress", False), options.get("max_timeout"))  # fmt: skip
        self._check_callable(method, params)
        return convert(self._drive(method, params, opts, None, None))

    def submit(
        self,
        method: str,
        params: dict[str, Any] | None,
        convert: Callable[[Any], Any],
        **options: Any,
    ) -> ModernFuture:
        """A modern call as a future. A complete first answer resolves it with no extra
        thread; further rounds (input, tasks, retries) run on a ``mcpsync-modern`` thread."""
        opts = _Options(options.get("timeout", ...), options.get("on_progress"),
                        options.get("reset_timeout_on_progress", False), options.get("max_timeout"))  # fmt: skip
        self._check_callable(method, params)
        handle = ModernFuture(self, method)
        first = self._send(method, params, opts)
        handle._current = first
        handle._mcpsync_call = getattr(first, "_mcpsync_call", None)  # type: ignore[attr-defined]

        def on_first(raw: Future[Any]) -> None:
            if handle.done():
                return
            if raw.cancelled():
                _settle(handle, RequestCancelled(f"{method} was cancelled"))
                return
            error = raw.exception()
            if error is None and _result_type(raw.result()) == "complete":
                try:
                    _settle(handle, None, convert(raw.result()))
                except BaseException as exc:  # noqa: BLE001 - delivered through the future
                    _settle(handle, exc)
                return
            if error is not None and not (
                isinstance(error, ServerError)
                and error.code in (jsonrpc.UNSUPPORTED_PROTOCOL_VERSION, jsonrpc.HEADER_MISMATCH)
            ):
                _settle(handle, error)
                return
            self._spawn(method, params, opts, handle, raw, convert)

        first.add_done_callback(on_first)
        return handle

    def _spawn(
        self,
        method: str,
        params: dict[str, Any] | None,
        opts: _Options,
        handle: ModernFuture,
        first: Future[Any],
        convert: Callable[[Any], Any],
    ) -> None:
        def run() -> None:
            try:
                value = convert(self._drive(method, params, opts, handle, first))
            except BaseException as exc:  # noqa: BLE001 - delivered through the future
                _settle(handle, exc)
            else:
                _settle(handle, None, value)
            finally:
                self._workers.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=f"mcpsync-modern[{self.name}]", daemon=True)
        self._workers.add(thread)
        thread.start()

    def _drive(
        self,
        method: str,
        params: dict[str, Any] | None,
        opts: _Options,
        handle: ModernFuture | None,
        first: Future[Any] | None,
    ) -> Any:
        """Send until the answer is complete: MRTR rounds, -32022 and -32020 retries, tasks."""
        base = dict(params) if params is not None else None
        attempt = base
        version_retried = header_retried = False
        rounds = 0
        idle = 0.05
        while True:
            if handle is not None and handle._cancel_requested.is_set():
                raise RequestCancelled(f"{method} was cancelled")
            blocking = handle is None and first is None  # a blocking call: no Future at all
            future = None
            if not blocking:
                future = first if first is not None else self._send(method, attempt, opts)
            first = None
            if handle is not None:
                handle._current = future
            try:
                if future is None:
                    result = self._send_and_wait(method, attempt, opts)
                else:
                    result = self._conn.wait(future)
            except ServerError as exc:
                if exc.code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION and not version_retried:
                    version_retried = True
                    if self._adopt_version(exc.data):
                        continue
                if (
                    exc.code == jsonrpc.HEADER_MISMATCH
                    and method == "tools/call"
                    and not header_retried
                ):
                    header_retried = True
                    log.info(
                        "mcpsync: %s answered header mismatch (-32020) to tools/call; listing tools again",
                        self.name,
                    )
                    self.relist_tools()
                    self._check_callable(method, attempt)
                    continue
                raise
            kind = _result_type(result)
            if kind == "complete":
                return result
            if kind == "input_required" and method in MRTR_METHODS:
                rounds += 1
                if rounds > self.max_rounds:
                    raise InputRequiredRoundsExceeded(
                        f"{method} to {self.name!r}: the server still asked for input after {self.max_rounds} rounds"
                    )
                requests = result.get("inputRequests")
                attempt = {
                    k: v
                    for k, v in (base or {}).items()
                    if k not in ("inputResponses", "requestState")
                }
                if requests:
                    attempt["inputResponses"] = self._fulfil(requests)
                    idle = 0.05
                else:  # state only: back off a little before asking again
                    if handle is not None:
                        if handle._cancel_requested.wait(idle):
                            raise RequestCancelled(f"{method} was cancelled")
                    else:
                        time.sleep(idle)
                    idle = min(idle * 2, 1.0)
                if "requestState" in result:
                    attempt["requestState"] = result["requestState"]  # byte-exact, never inspected
                continue
            if kind == "task" and method in TASK_METHODS and self.envelope.tasks:
                return self._run_task(result, opts, handle)
            raise ProtocolError(
                f"{self.name!r} answered {method} with resultType {kind!r}, which this client does not accept"
            )

    def _adopt_version(self, data: Any) -> bool:
        supported = _supported_of(data) or []
        mutual = _newest_mutual_modern(supported, self.envelope.version)
        if mutual is None:
            return False
        if mutual != self.envelope.version:
            log.info(
                "mcpsync: %s does not support %s; switching to %s",
                self.name,
                self.envelope.version,
                mutual,
            )
            self.envelope.version = mutual
            self._conn.transport.set_protocol_version(mutual)
        return True

    def _fulfil(self, requests: Any) -> dict[str, Any]:
        """Answer ``inputRequests`` with the session's handlers (the legacy reverse calls)."""
        if not isinstance(requests, dict):
            raise ProtocolError(f"{self.name!r} sent inputRequests that are not an object")
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            method = request.get("method") if isinstance(request, dict) else None
            handler = self._conn.request_handlers.get(method) if isinstance(method, str) else None
            if handler is None:
                raise CapabilityError(
                    f"{self.name!r} asked for {method!r} input, which this client did not declare "
                    "(connect with the matching handler)"
                )
            params = request.get("params") if isinstance(request.get("params"), dict) else {}
            result = _dump(handler(params))
            responses[key] = result if result is not None else {}
        return responses

    # -- tasks extension ----------------------------------------------------------------

    def _run_task(self, task: dict[str, Any], opts: _Options, handle: ModernFuture | None) -> Any:
        task_id = task.get("taskId")
        if not isinstance(task_id, str):
            raise ProtocolError(f"{self.name!r} created a task without a taskId")
        if handle is not None:
            handle.task_id = task_id
        answered: set[str] = set()
        started = time.monotonic()
        poll = _Options(opts.timeout, None, False, None)
        try:
            while True:
                status = task.get("status")
                if status == "completed":
                    result = task.get("result")
                    if not isinstance(result, dict):
                        raise ProtocolError(f"task {task_id} completed without a result object")
                    return result
                if status == "failed":
                    error = _dict_at(task, "error")
                    code = error.get("code")
                    raise ServerError(
                        code if isinstance(code, int) else jsonrpc.INTERNAL_ERROR,
                        str(error.get("message", "task failed")),
                        error.get("data"),
                        method="tools/call",
                    )
                if status == "cancelled":
                    note = task.get("statusMessage")
                    raise RequestCancelled(
                        f"task {task_id} was cancelled" + (f": {note}" if note else "")
                    )
                if status == "input_required":
                    requests = _dict_at(task, "inputRequests")
                    pending = {k: v for k, v in requests.items() if k not in answered}
                    if pending:
                        responses = self._fulfil(pending)
                        self._conn.wait(
                            self._send(
                                "tasks/update",
                                {"taskId": task_id, "inputResponses": responses},
                                poll,
                            )
                        )
                        answered.update(pending)
                        task = self._task_get(task_id, poll)
                        continue
                elif status != "working":
                    raise ProtocolError(f"task {task_id} has unknown status {status!r}")
                ttl = task.get("ttlMs")
                if (
                    isinstance(ttl, int)
                    and not isinstance(ttl, bool)
                    and time.monotonic() - started > ttl / 1000.0 + 5.0
                ):
                    raise RequestTimeout(
                        f"task {task_id} on {self.name!r} outlived its ttlMs ({ttl} ms)"
                    )
                interval = task.get("pollIntervalMs")
                delay = (
                    interval / 1000.0
                    if isinstance(interval, (int, float)) and interval >= 0
                    else _TASK_POLL_DEFAULT
                )
                delay = min(delay, _TASK_POLL_MAX)
                if handle is not None:
                    if handle._cancel_requested.wait(delay):
                        raise RequestCancelled(f"task {task_id} was cancelled")
                elif self._closing.wait(delay):
                    raise RequestCancelled(f"task {task_id}: the session is closing")
                task = self._task_get(task_id, poll)
        except KeyboardInterrupt:
            self._cancel_task(task_id)
            raise

    def _task_get(self, task_id: str, opts: _Options) -> dict[str, Any]:
        task = self._conn.wait(self._send("tasks/get", {"taskId": task_id}, opts))
        if not isinstance(task, dict) or task.get("taskId") not in (None, task_id):
            raise ProtocolError(f"tasks/get for {task_id} returned something else")
        return task

    def _cancel_task(self, task_id: str) -> None:
        """Send ``tasks/cancel`` without waiting for the acknowledgement."""
        try:
            future = self._conn.request("tasks/cancel", {"taskId": task_id}, timeout=10.0)
            future.add_done_callback(
                lambda f: f.cancelled() or f.exception()
            )  # retrieve, never raise
        except MCPSyncError as exc:
            log.warning("mcpsync: could not cancel task %s on %s: %s", task_id, self.name, exc)

    # -- lists: cache hints and x-mcp-header validation ----------------------------------------

    def request_page(self, method: str, params: dict[str, Any] | None) -> Future[Any]:
        """One page of a list, from the hint cache while fresh, else from the server."""
        cached = HINT_CACHE.get(self.server_key, self.credential_key, method, params)
        out: Future[Any] = Future()
        if cached is not None:
            try:
                out.set_result(self._postprocess(method, cached))
            except BaseException as exc:  # noqa: BLE001
                out.set_exception(exc)
            return out
        raw = self._send(method, params, _Options(..., None, False, None))
        out._mcpsync_call = getattr(raw, "_mcpsync_call", None)  # type: ignore[attr-defined]

        def done(f: Future[Any]) -> None:
            if f.cancelled():
                out.cancel()
                return
            error = f.exception()
            if error is not None:
                if params and "cursor" in params:  # a cursor gone bad: the cached pages are suspect
                    HINT_CACHE.invalidate(self.server_key, [method])
                _settle(out, error)
                return
            result = f.result()
            kind = _result_type(result)
            if kind != "complete":
                _settle(
                    out, ProtocolError(f"{self.name!r} answered {method} with resultType {kind!r}")
                )
                return
            if method in CACHEABLE_METHODS:
                HINT_CACHE.put(
                    self.server_key,
                    self.credential_key,
                    method,
                    params,
                    result,
                    keep_alive=self._keep_alive,
                )
            try:
                _settle(out, None, self._postprocess(method, result))
            except BaseException as exc:  # noqa: BLE001
                _settle(out, exc)

        raw.add_done_callback(done)
        return out

    def _postprocess(self, method: str, result: Any) -> Any:
        if (
            method != "tools/list"
            or not isinstance(result, dict)
            or not isinstance(result.get("tools"), list)
        ):
            return result
        kept = []
        for tool in result["tools"]:
            name = tool.get("name") if isinstance(tool, dict) else None
            try:
                decls = header_declarations(
                    tool.get("inputSchema") if isinstance(tool, dict) else None
                )
            except InvalidToolHeaders as exc:
                if self.http:
                    if name not in self._invalid_tools:
                        log.warning("mcpsync: %s: tool %r is not offered: %s", self.name, name, exc)
                    self._invalid_tools[name] = str(exc)  # type: ignore[index]
                    continue
                decls = {}  # stdio: x-mcp-header means nothing
            self._invalid_tools.pop(name, None)  # type: ignore[arg-type]
            self._tool_headers[name] = decls  # type: ignore[index]
            kept.append(tool)
        if len(kept) == len(result["tools"]):
            return result
        return {**result, "tools": kept}

    def forget_cached(self, method: str) -> None:
        """Drop this server's cached pages of ``method`` (an explicit refresh)."""
        HINT_CACHE.invalidate(self.server_key, [method])

    def relist_tools(self) -> None:
        """List the tools again, bypassing the cache (after -32020)."""
        self._session.list_tools(refresh=True)

    # -- notifications ----------------------------------------------------------------------

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        meta = _dict_at(params, "_meta")
        subscription = meta.get(SUBSCRIPTION_ID_KEY)
        if method == "notifications/subscriptions/acknowledged":
            self.listener.on_acknowledged(subscription, params)
        elif subscription is not None and not self.listener.knows(subscription):
            return  # from a stream we already left
        if method.endswith("/list_changed"):
            kind = method.split("/")[1]
            if kind == "resources":
                HINT_CACHE.invalidate(
                    self.server_key, ["resources/list", "resources/templates/list"]
                )
            else:
                HINT_CACHE.invalidate(self.server_key, [f"{kind}/list"])
        if self._forward is not None:
            self._forward(method, params)

    def listen_for_callbacks(self, timeout: float | None) -> None:
        """(Re)open the listen stream after a callback was added; returns once the server
        acknowledged it, so changes made afterwards are reported. Failures are logged:
        the callbacks then never run, but nothing else breaks."""
        try:
            self.listener.update(wait=True, timeout=timeout)
        except MCPSyncError as exc:
            log.warning(
                "mcpsync: %s: no change notifications (subscriptions/listen failed: %s)",
                self.name,
                exc,
            )

    def set_log_level(self, level: str | None) -> None:
        self.envelope.log_level = level

    def wanted_filter(self) -> dict[str, Any]:
        """The ``subscriptions/listen`` filter the session's callbacks ask for."""
        session = self._session
        wanted: dict[str, Any] = {}
        for kind, key in (
            ("tools", "toolsListChanged"),
            ("prompts", "promptsListChanged"),
            ("resources", "resourcesListChanged"),
        ):
            if session._list_changed.get(kind):
                wanted[key] = True
        uris = sorted(session._subscriptions)
        if uris:
            wanted["resourceSubscriptions"] = uris
        return wanted


# -- subscriptions/listen --------------------------------------------------------------------


class _Stream:
    """One ``subscriptions/listen`` request, on its own thread (on HTTP the send blocks
    for the life of the stream)."""

    def __init__(self, listener: Listener, notifications: dict[str, Any]) -> None:
        self.listener = listener
        self.notifications = notifications
        self.id: Any = None
        self.future: Future[Any] | None = None
        self.honored: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.acknowledged = threading.Event()
        self.ended = threading.Event()
        self.stopping = threading.Event()
        self.graceful = False
        self.thread = threading.Thread(
            target=self._run, name=f"mcpsync-listen[{listener.wire.name}]", daemon=True
        )

    def _run(self) -> None:
        conn = self.listener.wire._conn
        try:
            future = conn.request(
                "subscriptions/listen",
                {"notifications": self.notifications},
                timeout=LISTEN_TIMEOUT,
            )
            self.future = future
            if self.stopping.is_set():
                future.cancel()
            call = getattr(future, "_mcpsync_call", None)
            if call is not None and self.id is None:
                self.id = call.id
            while not future.done():
                if self.stopping.wait(0.5):
                    future.cancel()
                    break
            if not future.cancelled():
                error = future.exception(timeout=5.0)
                if error is None:
                    self.graceful = True
                else:
                    self.error = error
        except BaseException as exc:  # noqa: BLE001 - reported through the listener
            self.error = exc
        finally:
            self.ended.set()
            self.acknowledged.set()  # wake anyone waiting for an ack that will not come
            self.listener._on_stream_end(self)

    def stop(self) -> None:
        self.stopping.set()
        future = self.future
        if future is not None:
            future.cancel()
        else:
            closer = getattr(self.listener.wire._conn.transport, "cancel_request", None)
            if closer is not None and self.id is not None:
                closer(self.id)
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=2.0)


class Listener:
    """Keeps one ``subscriptions/listen`` stream whose filter follows the session's callbacks.

    A new filter opens a new stream; the old one is cancelled once the new one is
    acknowledged. Notifications of streams already left are dropped. An abrupt end is
    retried a few times with a backoff; a graceful end (the server's result) is not.
    """

    max_retries = 3

    def __init__(self, wire: ModernWire) -> None:
        self.wire = wire
        self._lock = threading.RLock()
        self._active: _Stream | None = None
        self._opening: _Stream | None = None
        self._retired: list[_Stream] = []
        self._failures = 0
        self._closed = False
        self._retry_timer: threading.Thread | None = None

    def knows(self, subscription: Any) -> bool:
        for stream in (self._active, self._opening):
            if (
                stream is not None
                and stream.id is not None
                and (stream.id == subscription or str(stream.id) == str(subscription))
            ):
                return True
        return False

    @property
    def honored(self) -> dict[str, Any] | None:
        active = self._active
        return active.honored if active is not None else None

    def update(self, wait: bool = True, timeout: float | None = None) -> dict[str, Any] | None:
        """Open a stream for the session's current filter; returns what the server honored."""
        wanted = self.wire.wanted_filter()
        with self._lock:
            if self._closed:
                return None
            active = self._active
            if active is not None and not active.ended.is_set() and active.notifications == wanted:
                if wait and not active.acknowledged.wait(timeout):
                    raise RequestTimeout(
                        f"{self.wire.name!r} did not acknowledge subscriptions/listen within {timeout} s"
                    )
                return active.honored
            if not wanted:
                self._active = None
                if active is not None:
                    active.stop()
                return {}
            stream = _Stream(self, wanted)
            self._opening = stream
            stream.thread.start()
        if not wait:
            return None
        if not stream.acknowledged.wait(timeout):
            stream.stop()
            raise RequestTimeout(
                f"{self.wire.name!r} did not acknowledge subscriptions/listen within {timeout} s"
            )
        if stream.error is not None:
            raise stream.error
        if stream.honored is None:
            raise ProtocolError(
                f"{self.wire.name!r} ended subscriptions/listen before acknowledging it"
            )
        return stream.honored

    def on_acknowledged(self, subscription: Any, params: dict[str, Any]) -> None:
        with self._lock:
            stream = None
            for candidate in (self._opening, self._active):
                if (
                    candidate is not None
                    and candidate.id is not None
                    and str(candidate.id) == str(subscription)
                ):
                    stream = candidate
                    break
            if stream is None and self._opening is not None and self._opening.id is None:
                stream = self._opening  # the ack came before conn.request returned the id
                stream.id = subscription
            if stream is None:
                return
            honored = params.get("notifications")
            stream.honored = honored if isinstance(honored, dict) else {}
            old = None
            if stream is self._opening:
                self._opening = None
                old, self._active = self._active, stream
                self._failures = 0
            stream.acknowledged.set()
        if old is not None and old is not stream:
            threading.Thread(
                target=old.stop, name=f"mcpsync-listen[{self.wire.name}]", daemon=True
            ).start()
            self._retired.append(old)

    def _on_stream_end(self, stream: _Stream) -> None:
        with self._lock:
            if stream is self._opening:
                self._opening = None
            if stream is not self._active:
                return
            self._active = None
            if self._closed or stream.stopping.is_set() or self.wire.closed:
                return
            if stream.graceful:
                log.info("mcpsync: %s ended subscriptions/listen", self.wire.name)
                return
            error = stream.error
            if isinstance(error, ServerError) and error.code == jsonrpc.METHOD_NOT_FOUND:
                log.warning(
                    "mcpsync: %s does not offer subscriptions/listen: change notifications are off",
                    self.wire.name,
                )
                return
            self._failures += 1
            if self._failures > self.max_retries:
                log.warning(
                    "mcpsync: subscriptions/listen to %s keeps failing (%s); giving up",
                    self.wire.name,
                    error,
                )
                return
            delay = 0.5 * 2 ** (self._failures - 1)
        log.warning(
            "mcpsync: subscriptions/listen to %s ended (%s); listening again in %.1f s",
            self.wire.name,
            error,
            delay,
        )

        def again() -> None:
            if not self.wire._closing.wait(delay):
                try:
                    self.update(wait=False)
                except MCPSyncError as exc:
                    log.warning("mcpsync: could not listen to %s again: %s", self.wire.name, exc)

        self._retry_timer = threading.Thread(
            target=again, name=f"mcpsync-listen[{self.wire.name}]", daemon=True
        )
        self._retry_timer.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            streams = [s for s in (self._active, self._opening, *self._retired) if s is not None]
            self._active = self._opening = None
            self._retired = []
        for stream in streams:
            stream.stop()
        timer = self._retry_timer
        if timer is not None and timer is not threading.current_thread():
            timer.join(timeout=2.0)
