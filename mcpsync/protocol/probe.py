"""The ``server/discover`` probe of the bring-up, and its verdict as a value.

Owns: the bring-up budget (one deadline for probe, ``initialize`` and retries, an
interactive authorization excepted), sending the probe (with ``initialize`` beside it
when it goes unanswered on a transport that reads requests in order), and judging the
answer: a ``Verdict`` (modern with its DiscoverResult, retry with a mutual version,
legacy with the reason, legacy-only versions), never a control-flow exception. Errors
that are not a verdict (transport failure, a modern server's rejection) are raised.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any

from .. import jsonrpc
from ..errors import (
    HandshakeError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
    ServerError,
    VersionMismatch,
)
from ..rpc.calls import RequestFuture
from ..rpc.connection import Connection
from ..rpc.sending import notify_later
from ..transports.http.headers import standard_headers
from ..versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS
from .legacy import initialize_params
from .modern import newest_mutual_modern, supported_of
from .modern.envelope import MODERN_ERROR_CODES, Envelope, modern_capabilities

__all__ = ["Verdict", "Budget", "SentInitialize", "probe", "probe_beside_initialize",
           "forget_probe", "wait_any", "no_answer", "GIVE_UP_STEP"]  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """What an answered probe says.

    ``kind``: "modern" (``result`` is the DiscoverResult), "retry" (probe again at
    ``version``; the server supports ``supported``), "legacy" (``reason`` says why) or
    "legacy-only" (the server named only handshake versions, ``supported``).
    """

    kind: str
    result: dict[str, Any] | None = None
    reason: str = ""
    version: str | None = None
    supported: tuple[str, ...] = ()


def _legacy_verdict(reason: str) -> Verdict:
    return Verdict("legacy", reason=reason)


class Budget:
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


def no_answer(conn: Connection, budget: Budget, sent: str) -> RequestTimeout:
    return RequestTimeout(f"server {conn.name!r} did not answer {sent} within {budget}")


class _AnyDone:
    """``done()`` once any of ``futures`` is: a wait target for the transport's read loop."""

    __slots__ = ("futures",)

    def __init__(self, futures: Sequence[Future[Any]]) -> None:
        self.futures = futures

    def done(self) -> bool:
        return any(f.done() for f in self.futures)


def wait_any(
    conn: Connection,
    futures: Sequence[Future[Any]],
    deadline: float,
    give_up: Callable[[], bool] | None = None,
) -> bool:
    """Wait (bounded by ``deadline``) until one of ``futures`` is done; True if one is.
    ``give_up()``, looked at every ``GIVE_UP_STEP`` s, ends the wait early (False)."""
    target = _AnyDone(futures)
    pump = conn._pump  # stdio: read the pipe in this thread
    while not target.done():
        remaining = deadline - time.monotonic()
        if remaining <= 0 or (give_up is not None and give_up()):
            return False
        step = min(remaining, 1.0 if give_up is None else GIVE_UP_STEP)
        if pump is not None and not conn.closed:
            pump(target, time.monotonic() + step)
        else:
            futures_wait(futures, timeout=step, return_when=FIRST_COMPLETED)
    return True


#: how often the stdio probe's wait looks at the server's stderr (seconds)
GIVE_UP_STEP = 0.05


class _ChokedOnProbe:
    """True once the server wrote, after the probe went out, a stderr line naming
    ``server/discover``: a server built with an old SDK that failed to parse the probe
    (its traceback names the method) and may never answer it (mcp 1.6.0 goes deaf until
    the next line, then exits). Its ``initialize`` then goes out at once instead of after
    the probe's patience; a modern server that merely logs the method still answers the
    probe, and that answer decides."""

    __slots__ = ("transport", "before", "seen")

    def __init__(self, conn: Connection, before: str) -> None:
        self.transport = conn.transport
        self.before = before
        self.seen = False

    def __call__(self) -> bool:
        tail = self.transport.stderr_tail()
        if tail.startswith(self.before):  # else the bounded tail moved on: look at all of it
            tail = tail[len(self.before) :]
        self.seen = "server/discover" in tail
        return self.seen


class SentInitialize:
    """An ``initialize`` sent beside an unanswered probe (``probe``: that probe, or None
    once it was answered)."""

    __slots__ = ("future", "started", "probe")

    def __init__(self, future: Future[Any], started: float, probe: RequestFuture | None) -> None:
        self.future = future
        self.started = started
        self.probe = probe


def _error_from_http(exc: HTTPStatusError) -> tuple[int, Any] | None:
    """The JSON-RPC error (code, data) in an HTTP error body, if it holds one."""
    message = exc.payload  # the parsed body, when the transport kept it
    if message is None:
        try:
            message = json.loads(exc.body_excerpt)
        except ValueError:
            return None
    error = message.get("error") if isinstance(message, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return error["code"], error.get("data")
    return None


def _judge_error(code: int, data: Any, message: str, where: str) -> Verdict:
    """The verdict for a JSON-RPC error answering the probe (raised: no verdict)."""
    if code == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION:
        supported = supported_of(data) or []
        mutual = newest_mutual_modern(supported)
        if mutual is not None:
            return Verdict("retry", version=mutual, supported=tuple(supported))
        if any(v in HANDSHAKE_VERSIONS for v in supported):
            return Verdict("legacy-only", supported=tuple(supported))
        raise VersionMismatch(
            (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS), ", ".join(supported) or "none named"
        )
    if code in MODERN_ERROR_CODES:
        raise HandshakeError(f"server/discover was rejected by a modern server ({code}: {message})")
    return _legacy_verdict(f"{where} answered error {code} ({message}): legacy server")


def _send_probe(
    conn: Connection,
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    timeout: float | None,
) -> RequestFuture:
    envelope = Envelope(version, modern_capabilities(capabilities), client_info)
    params = {"_meta": envelope("server/discover")}
    extra: dict[str, Any] = {}
    if conn.transport.features.per_request_headers:  # HTTP, not yet modern: say it per request
        extra["headers"] = standard_headers({"method": "server/discover", "params": params})
    return conn.request("server/discover", params, timeout=timeout, **extra)


def probe(
    conn: Connection,
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    budget: Budget,
    spent: list[float],
) -> Verdict:
    """``server/discover`` waited for until the deadline, judged."""
    started = time.perf_counter()
    try:
        future = _send_probe(conn, version, capabilities, client_info, budget.remaining())
        try:
            conn.wait(future)
        except RequestTimeout:
            raise no_answer(conn, budget, "server/discover") from None
        except MCPSyncError:
            pass  # judged below
        return _judge_probe(future)
    finally:
        spent.append(time.perf_counter() - started)


def probe_beside_initialize(
    conn: Connection,
    version: str,
    capabilities: Mapping[str, Any],
    client_info: Mapping[str, Any],
    budget: Budget,
    bound: float,
    spent: list[float],
    sent_box: list[SentInitialize],
) -> Verdict:
    """The stdio probe: ``server/discover``, and ``initialize`` beside it if unanswered.

    The probe has no timer of its own (a late answer finds its call, and is dropped
    without a word); it is waited for ``bound`` seconds (at most half the budget). Then
    ``initialize`` goes out too: a server still starting (a first ``npx``/``uvx``
    download) reads both in order and answers both, so it pays no extra wait; a legacy
    server that ignores requests before ``initialize`` answers that one. A server whose
    stderr names ``server/discover`` meanwhile (``_ChokedOnProbe``: an old SDK's traceback)
    gets ``initialize`` at once: it dies of it, or answers it. Returns the
    verdict (legacy when ``initialize`` was answered first); the ``initialize`` sent, if
    any, is put in ``sent_box``.
    """
    started = time.perf_counter()
    before = conn.transport.stderr_tail()
    discover = _send_probe(conn, version, capabilities, client_info, None)
    remaining = budget.remaining()
    patience = bound if remaining is None else min(bound, remaining / 2)
    choked = _ChokedOnProbe(conn, before)
    try:
        waited = min(time.monotonic() + patience, budget.deadline())
        if wait_any(conn, (discover,), waited, choked):
            return _judge_probe(discover)
        params = initialize_params(dict(client_info), dict(capabilities), None)
        sent_at = time.perf_counter()
        init = conn.request("initialize", params, timeout=None)  # bounded below, not by a timer
    finally:
        spent.append(time.perf_counter() - started)
    sent = SentInitialize(init, sent_at, discover)
    sent_box.append(sent)
    if not wait_any(conn, (discover, init), budget.deadline()):
        raise no_answer(conn, budget, "server/discover or initialize")
    if init.done() and not discover.done():
        if choked.seen:
            return _legacy_verdict(
                "the server wrote an error naming server/discover to stderr, and answered "
                "initialize: legacy server"
            )
        return _legacy_verdict(
            f"no answer to server/discover within {patience:.3g} s, but to initialize: legacy server"
        )
    sent.probe = None  # answered: nothing to forget
    return _judge_probe(discover)


def _judge_probe(future: Future[Any]) -> Verdict:
    """The verdict on an answered probe (raised: an error that is no verdict)."""
    try:
        result = future.result(timeout=0)
    except ServerError as exc:
        error: tuple[int, Any, str, str] | None = (
            exc.code, exc.data, exc.message, "server/discover"
        )  # fmt: skip
    except HTTPStatusError as exc:
        found = _error_from_http(exc)
        if found is None:
            if exc.status in (400, 404, 405):
                return _legacy_verdict(
                    f"HTTP {exc.status} to server/discover without a modern JSON-RPC error: legacy server"
                )
            raise
        error = (found[0], found[1], f"HTTP {exc.status}", f"HTTP {exc.status} to server/discover")
    else:
        error = None
    if error is not None:
        return _judge_error(*error)
    if not isinstance(result, dict) or not isinstance(result.get("capabilities"), dict):
        return _legacy_verdict("server/discover result is not a DiscoverResult: legacy server")
    if result.get("resultType", "complete") != "complete":
        raise ProtocolError(f"server/discover answered resultType {result.get('resultType')!r}")
    return Verdict("modern", result=result)


def forget_probe(conn: Connection, probe: RequestFuture) -> None:
    """Tell the server an unanswered probe is no longer wanted. Its call stays in the
    pending table (no timer), so an answer that still comes is dropped without a word."""
    if probe.done():
        return
    params = {"requestId": probe.call.id, "reason": "initialize answered first"}
    if conn.transport.features.send_waits:  # HTTP: the POST must not hold the bring-up
        notify_later(conn, "notifications/cancelled", params)
        return
    try:
        conn.notify("notifications/cancelled", params)
    except MCPSyncError:
        pass
