"""Bring-up across the two eras: which one a server speaks, and the era object for it.

Owns: ``resolve_era`` (the connect arguments' era and pinned version), ``negotiate``
(forced, pinned or auto era; the ``server/discover`` probe through ``protocol.probe``,
whose ``Verdict`` values decide the fallbacks), ``bring_up`` (the ``Era`` a Session
holds), the server identity the caches are keyed by, and the caches a Session is given:
``VerdictMemory`` (era verdicts per server) and the modern ``HintCache``, bundled as
``Caches`` with one process-wide default (``DEFAULT_CACHES``).

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
environment; HTTP: the endpoint URL) in the given ``VerdictMemory`` (by default for the
life of the process; the verdict on a server that died of the probe also in the per-user
cache folder, ``verdict_file``, so the next process starts it once, with ``initialize``);
a remembered "legacy" is re-probed if ``initialize`` then answers -32022. On stdio a
server whose stderr names ``server/discover`` while the probe is unanswered (an old SDK's
traceback) gets ``initialize`` at once rather than after the probe's patience.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from .. import jsonrpc
from ..errors import (
    ConfigError,
    HandshakeError,
    HTTPStatusError,
    RequestTimeout,
    ServerError,
    ServerExited,
    TransportError,
    VersionMismatch,
)
from ..rpc.connection import Connection
from ..transports.base import Transport
from ..versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS
from . import Agreement, Era, Interest, ToolIndex
from .hooks import EraHooks
from .legacy import LegacyEra, accept_initialize, initialize
from .modern import ModernEra, newest_mutual_modern, supported_of
from .modern.cache import HINT_CACHE, HintCache
from .modern.envelope import (
    DEFAULT_PROBE_TIMEOUT,
    SERVER_INFO_KEY,
    Envelope,
    dict_at,
    modern_capabilities,
)
from .probe import (
    Budget,
    SentInitialize,
    forget_probe,
    no_answer,
    probe,
    probe_beside_initialize,
    wait_any,
)
from .verdict_file import VerdictFile

__all__ = [
    "Caches",
    "DEFAULT_CACHES",
    "VERDICTS",
    "VerdictMemory",
    "bring_up",
    "negotiate",
    "resolve_era",
    "server_identity",
]


class VerdictMemory:
    """Era verdicts per server key: (era, why). One process-wide default (``VERDICTS``).

    ``kept``: where durable verdicts outlive the process (``VerdictFile``; None: nowhere).
    A verdict remembered ``durable`` (a server that died of the probe) is written there,
    and one not in memory is looked up there (then it is this process's too)."""

    def __init__(self, kept: VerdictFile | None = None) -> None:
        self._verdicts: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.kept = kept

    def _found(self, server_key: str | None) -> tuple[str, str] | None:
        if server_key is None:
            return None
        with self._lock:
            found = self._verdicts.get(server_key)
        if found is None and self.kept is not None:
            found = self.kept.get(server_key)
            if found is not None:
                era, why = found
                found = (era, f"{why}; kept by an earlier process in {self.kept.path}")
                with self._lock:
                    self._verdicts.setdefault(server_key, found)
        return found

    def era(self, server_key: str | None) -> str | None:
        """The era remembered for this server, if any."""
        found = self._found(server_key)
        return found[0] if found else None

    def reason(self, server_key: str | None) -> str:
        found = self._found(server_key)
        return found[1] if found else ""

    def remember(
        self, server_key: str | None, era: str, why: str = "", *, durable: bool = False
    ) -> None:
        """Remember the verdict; ``durable``: across processes too (``kept``)."""
        if server_key is not None:
            with self._lock:
                self._verdicts[server_key] = (era, why)
            if durable and self.kept is not None:
                self.kept.put(server_key, era, why)

    def forget(self, server_key: str | None = None) -> None:
        """Forget the verdict for one server (or all of them, in this process)."""
        with self._lock:
            if server_key is None:
                self._verdicts.clear()
            else:
                self._verdicts.pop(server_key, None)
        if server_key is not None and self.kept is not None:
            self.kept.forget(server_key)


#: The process-wide verdict memory ``Session.connect`` uses by default; its durable
#: verdicts are kept in the per-user cache folder.
VERDICTS = VerdictMemory(VerdictFile())


class Caches:
    """The caches a Session is given: era verdicts and modern cache hints (new ones by default).

    Plain classes here, not dataclasses: ``@dataclass`` costs 0.2-0.5 ms at import, on every
    cold start."""

    def __init__(
        self, verdicts: VerdictMemory | None = None, hints: HintCache | None = None
    ) -> None:
        self.verdicts = verdicts if verdicts is not None else VerdictMemory()
        self.hints = hints if hints is not None else HintCache()

    def __repr__(self) -> str:
        return f"Caches(verdicts={self.verdicts!r}, hints={self.hints!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Caches):
            return NotImplemented
        return (self.verdicts, self.hints) == (other.verdicts, other.hints)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value: unhashable


#: The process-wide caches (every Session shares them unless given its own).
DEFAULT_CACHES = Caches(VERDICTS, HINT_CACHE)


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
    identity = target.identity if isinstance(target, Transport) else None  # declared, may be None
    if identity:
        server = "transport:" + _digest(identity)
        return server, server
    return None, None


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
    caches: Caches | None = None,
    restarted: str | None = None,
) -> Agreement:
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
    server that ignores the probe gets ``initialize`` anyway. ``caches``: where verdicts
    and the discover result are remembered (default: ``DEFAULT_CACHES``). ``restarted``:
    the connection is to a fresh process of a server that died of the probe (why, in
    words: the ``era_reason``): ``initialize`` at once, unless an era is forced or pinned.
    """
    spent: list[float] = []
    bring = _BringUp(
        conn, capabilities, client_info, Budget(timeout, deadline, paused),
        server_key, credential_key, caches or DEFAULT_CACHES,
    )  # fmt: skip
    if restarted is not None and era == "auto" and protocol_version is None:
        return _legacy(bring, None, restarted, remember=False)  # remembered when it died
    agreement = _negotiate(bring, protocol_version, era, probe_timeout, spent)
    if agreement.era == "legacy" and spent:
        agreement.probe_seconds = sum(spent)
    return agreement


def bring_up(
    conn: Connection,
    *,
    interest: Interest,
    tools: ToolIndex,
    relist_tools: Callable[[], Any],
    require: Callable[[str], None] | None = None,
    keep_alive: Any = None,
    **options: Any,
) -> Era:
    """``negotiate`` (same keyword options), then the ``Era`` for what was agreed.

    ``interest``, ``tools``, ``relist_tools`` and ``require`` are the Session's (its
    callbacks, its tool index, its ``list_tools(refresh=True)``, its capability check);
    no era is handed the Session.
    """
    agreement = negotiate(conn, **options)
    if agreement.era == "modern":
        caches = options.get("caches") or DEFAULT_CACHES
        return ModernEra(
            conn, agreement, interest, relist_tools=relist_tools, cache=caches.hints,
            server_key=options.get("server_key"), credential_key=options.get("credential_key"),
            keep_alive=keep_alive,
        )  # fmt: skip
    return LegacyEra(conn, agreement, tools, require)


class _BringUp:
    """What every step of one negotiation needs."""

    __slots__ = (
        "conn", "capabilities", "client_info", "budget", "server_key", "credential_key", "caches",
    )  # fmt: skip

    def __init__(
        self,
        conn: Connection,
        capabilities: Mapping[str, Any],
        client_info: Mapping[str, Any],
        budget: Budget,
        server_key: str | None,
        credential_key: str | None,
        caches: Caches,
    ) -> None:
        self.conn = conn
        self.capabilities = capabilities
        self.client_info = client_info
        self.budget = budget
        self.server_key = server_key
        self.credential_key = credential_key
        self.caches = caches


def _negotiate(
    b: _BringUp,
    protocol_version: str | None,
    era: str,
    probe_timeout: float | None,
    spent: list[float],
) -> Agreement:
    started = time.perf_counter()
    conn, verdicts, server_key = b.conn, b.caches.verdicts, b.server_key
    era, pinned = resolve_era(era, protocol_version)
    features = conn.transport.features
    if not features.carries_modern:  # a 2024-11-05 transport (legacy HTTP+SSE)
        what = "the transport carries only the initialize handshake (legacy HTTP+SSE)"
        if era == "modern":
            raise ConfigError(f"{what}: it cannot carry the 2026-07-28 protocol")
        return _legacy(b, pinned, what)
    if era == "legacy":
        why = f"protocol version {pinned} pinned" if pinned else "era='legacy' requested"
        return _legacy(b, pinned, why, remember=False)  # no evidence

    forced = era == "modern"
    if not forced and verdicts.era(server_key) == "legacy":
        why = verdicts.reason(server_key)
        try:
            return _legacy(
                b,
                None,
                "remembered verdict for this server: legacy" + (f" ({why})" if why else ""),
                why,
            )
        except ServerError as exc:
            if exc.code != jsonrpc.UNSUPPORTED_PROTOCOL_VERSION:
                raise
            verdicts.forget(server_key)  # the server changed: probe again
    cached = b.caches.hints.get(server_key, b.credential_key, "server/discover", None)
    if cached is not None:
        version = newest_mutual_modern(cached.get("supportedVersions") or (), pinned)
        if version is not None:
            return _modern(b, cached, version, started, "cached server/discover result")

    # stdio (and the in-memory pair): initialize may go out beside an unanswered probe
    side_by_side = not forced and features.bounded_probe
    restartable = features.restart_on_probe_death
    bound = DEFAULT_PROBE_TIMEOUT if probe_timeout is None else probe_timeout
    version = pinned or MODERN_VERSIONS[0]
    notes: list[str] = []
    sent_box: list[SentInitialize] = []  # the initialize sent beside the probe, if any
    sent: SentInitialize | None = None
    caps, info, budget = b.capabilities, b.client_info, b.budget
    for attempt in range(2):
        try:
            if side_by_side:
                side_by_side = False  # once: a retry knows the server answers
                try:
                    verdict = probe_beside_initialize(
                        conn, version, caps, info, budget, bound, spent, sent_box
                    )
                finally:
                    sent = sent_box[0] if sent_box else None
            else:
                verdict = probe(conn, version, caps, info, budget, spent)
        except TransportError as exc:
            if not restartable or forced or isinstance(exc, HTTPStatusError):
                raise
            raise _restart_as_legacy(
                exc, restartable, server_key, "the server stopped on server/discover", verdicts
            ) from None
        if verdict.kind == "legacy":
            reason = verdict.reason
            if forced:
                raise HandshakeError(
                    f"era='modern' requested, but the server does not speak 2026-07-28: {reason}"
                )
            try:
                return _legacy(b, None, reason, sent=sent)
            except TransportError as exc:  # the probe broke the server (old SDKs crash on it)
                raise _restart_as_legacy(exc, restartable, server_key, reason, verdicts) from None
            except ServerError as exc:  # a slow modern server locked in by a late probe
                supported = (
                    supported_of(exc.data)
                    if exc.code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION
                    else None
                )
                mutual = newest_mutual_modern(supported or ())
                if mutual is None or attempt:
                    raise
                notes.append(f"initialize answered -32022 after: {reason}")
                if sent is not None and sent.probe is not None:
                    forget_probe(conn, sent.probe)
                sent = None
                version = mutual
                continue
        if verdict.kind == "retry":
            assert verdict.version is not None
            if attempt:
                raise HandshakeError(
                    f"server/discover rejected version {version} twice; server supports {list(verdict.supported)}"
                )
            notes.append(
                f"server/discover rejected {version} with -32022 (supports {', '.join(verdict.supported)})"
            )
            version = verdict.version
            continue
        if verdict.kind == "legacy-only":
            if forced:
                raise VersionMismatch(MODERN_VERSIONS, ", ".join(verdict.supported))
            why = f"server/discover: the server supports only {', '.join(verdict.supported)}"
            return _legacy(b, None, why, sent=sent)
        result = verdict.result
        assert result is not None
        supported = result.get("supportedVersions")
        offered: list[Any] = supported if isinstance(supported, list) else []
        chosen = newest_mutual_modern(offered, pinned or version)
        if chosen is None:
            if forced:
                raise VersionMismatch(MODERN_VERSIONS, ", ".join(map(str, offered)))
            legacy_versions = [v for v in offered if v in HANDSHAKE_VERSIONS]
            why = f"server/discover lists no modern version ({', '.join(map(str, offered)) or 'none'})"
            if not legacy_versions and offered:
                raise VersionMismatch(
                    (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS), ", ".join(map(str, offered))
                )
            return _legacy(b, None, why, sent=sent)
        b.caches.hints.put(server_key, b.credential_key, "server/discover", None, result)
        how = (
            "era='modern' requested"
            if forced and not pinned
            else (f"protocol version {pinned} pinned" if pinned else "server/discover answered")
        )
        reason = "; ".join([*notes, f"{how}: server supports {', '.join(map(str, offered))}"])
        # An initialize sent beside the probe stays pending: its answer arrives unnoticed.
        return _modern(b, result, chosen, started, reason)
    raise AssertionError("unreachable")  # pragma: no cover


def _restart_as_legacy(
    exc: TransportError,
    restartable: bool,
    server_key: str | None,
    reason: str,
    verdicts: VerdictMemory,
) -> TransportError:
    """A stdio server that died of the probe: remember it as legacy and ask the caller to
    start it again (``restart_legacy``); the new process gets ``initialize`` directly.

    Only when the server's last words name the probe (``server/discover``), as a server
    that cannot parse the method says when it dies of it: a server that exits on its own
    (a missing API key, a bad argument) is not started a second time. A server without
    an identity (a transport handed over without one) is started again all the same; it
    is not remembered."""
    tail = exc.stderr_tail if isinstance(exc, ServerExited) else ""
    if restartable and "server/discover" in tail:
        verdicts.remember(
            server_key, "legacy", "it stopped after the server/discover probe", durable=True
        )
        exc.restart_legacy = True
    return exc


def _legacy(
    b: _BringUp,
    pinned: str | None,
    reason: str,
    why: str = "",
    *,
    sent: SentInitialize | None = None,
    remember: bool = True,
) -> Agreement:
    conn, budget = b.conn, b.budget
    if sent is None:  # initialize now, bounded by what is left of the budget
        try:
            agreement = initialize(
                conn,
                client_info=dict(b.client_info),
                capabilities=dict(b.capabilities),
                protocol_version=pinned,
                timeout=budget.remaining(),
            )
        except RequestTimeout:
            raise no_answer(conn, budget, "initialize") from None
    else:  # the initialize that went out beside the probe
        if not wait_any(conn, (sent.future,), budget.deadline()):
            raise no_answer(conn, budget, "initialize")
        agreement = accept_initialize(conn, sent.future.result(timeout=0), sent.started)
        if sent.probe is not None:
            forget_probe(conn, sent.probe)
    agreement.era = "legacy"
    agreement.era_reason = reason
    if remember:
        b.caches.verdicts.remember(b.server_key, "legacy", why)
    return agreement


def _modern(
    b: _BringUp, result: dict[str, Any], version: str, started: float, reason: str
) -> Agreement:
    conn = b.conn
    meta = dict_at(result, "_meta")
    server_info = meta.get(SERVER_INFO_KEY) or result.get("serverInfo")
    if not isinstance(server_info, dict) or "name" not in server_info:
        server_info = {"name": conn.name, "version": ""}
    server_info = {"version": "", **server_info}
    supported = result.get("supportedVersions")
    instructions = result.get("instructions")
    hooks = EraHooks.of(conn)  # from now on every request carries the modern envelope
    hooks.envelope = Envelope(version, modern_capabilities(b.capabilities), b.client_info)
    conn.transport.set_protocol_version(version)
    b.caches.verdicts.remember(b.server_key, "modern")
    return Agreement(
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
