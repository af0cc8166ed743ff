"""The seam between the Session and the two protocol eras.

Owns: the ``Era`` interface the Session holds (one implementation per era:
``protocol.legacy.LegacyEra`` for the initialize handshake, 2024-11-05 ... 2025-11-25;
``protocol.modern.ModernEra`` for the stateless 2026-07-28 wire), what bring-up agreed
(``Agreement``), what the Session's
callbacks want to hear about (``Interest``), the Session's tool index (``ToolIndex``),
the derived-future adaptor (``Derived``) and ``settle``. Re-exports the engine's per-call
options (``CallOptions``, ``DEFAULT_OPTIONS``: ``mcpsync.rpc.calls``), which the Era methods take.

Nothing here imports the Session, and no era is handed it: an era gets the
``Connection``, the ``Agreement``, the ``Interest`` and plain callbacks. See README.md.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ..errors import HandshakeError
from ..rpc.calls import DEFAULT, DEFAULT_OPTIONS, CallFuture, CallOptions, Default, call_of

if TYPE_CHECKING:
    from ..rpc.connection import Connection

__all__ = [
    "Agreement",
    "CallOptions",
    "DEFAULT_OPTIONS",
    "Derived",
    "Era",
    "Interest",
    "NotReady",
    "ToolIndex",
    "UNSET",
    "settle",
]

#: "the connection's default": the timeout of a call that did not name one (``DEFAULT``)
UNSET: Final = DEFAULT

Convert = Callable[[Any], Any]


@dataclass
class Agreement:
    """What bring-up agreed with the server (was ``handshake.Handshake``)."""

    protocol_version: str
    server_info: dict[str, Any]
    capabilities: dict[str, Any]
    instructions: str | None
    raw: dict[str, Any] = field(repr=False)
    seconds: float = 0.0
    #: "legacy" (initialize handshake) or "modern" (2026-07-28, per-request ``_meta``)
    era: str = "legacy"
    #: how the era was chosen, in words (e.g. "server/discover answered -32601: legacy server")
    era_reason: str = ""
    #: the versions the server listed (modern bring-up only)
    supported_versions: tuple[str, ...] = ()
    #: seconds spent on ``server/discover`` before falling back to initialize (auto era)
    probe_seconds: float | None = None


class Interest:
    """What the Session's callbacks want to hear about: list kinds and resource URIs.

    Owned by the Session (it adds and removes callbacks); read by the era (the modern
    era's ``subscriptions/listen`` filter follows it).
    """

    KINDS: ClassVar[tuple[str, ...]] = ("tools", "resources", "prompts")

    def __init__(self) -> None:
        self.list_changed: dict[str, list[Callable[[], None]]] = {k: [] for k in self.KINDS}
        self.subscriptions: dict[str, list[Callable[[str], None]]] = {}

    def kinds(self) -> list[str]:
        """The list kinds some callback waits on."""
        return [kind for kind in self.KINDS if self.list_changed.get(kind)]

    def uris(self) -> list[str]:
        return sorted(self.subscriptions)

    def add_uri(self, uri: str, callback: Callable[[str], None]) -> bool:
        """Add a callback for ``uri``; True if it is the first one."""
        first = uri not in self.subscriptions
        self.subscriptions.setdefault(uri, []).append(callback)
        return first

    def drop_uri(self, uri: str) -> bool:
        """Forget every callback of ``uri``; True if there were any."""
        return self.subscriptions.pop(uri, None) is not None


class ToolIndex:
    """The tools last listed (name -> Tool), for output-schema checks and the list cache."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tools: list[Any] | None = None
        self.by_name: dict[str, Any] = {}

    def remember(self, tools: list[Any]) -> None:
        with self.lock:
            self.tools = list(tools)
            self.by_name = {t.name: t for t in self.tools}

    def forget(self) -> None:
        with self.lock:
            self.tools = None
            self.by_name = {}

    def get(self, name: str) -> Any:
        return self.by_name.get(name)


def settle(future: Future[Any], error: BaseException | None, value: Any = None) -> None:
    """Resolve ``future`` unless it is done already (cancelled by its caller meanwhile)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass


class Derived(CallFuture):
    """A future computed from another (a typed result from a raw one); cancel goes upstream."""

    def __init__(
        self, source: Future[Any], convert: Convert, conn: Connection | None = None
    ) -> None:
        super().__init__()
        self._conn = conn
        self._source = source
        self._convert = convert
        self.call = call_of(source)
        source.add_done_callback(self._resolve)

    def _resolve(self, source: Future[Any]) -> None:
        try:
            if source.cancelled():
                super().cancel()
                return
            error = source.exception()
            if error is not None:
                self.set_exception(error)
            else:
                try:
                    value = self._convert(source.result())
                except BaseException as exc:  # noqa: BLE001 - delivered through the future
                    self.set_exception(exc)
                else:
                    self.set_result(value)
        except InvalidStateError:
            pass  # cancelled by the caller meanwhile

    def cancel(self) -> bool:
        self._source.cancel()
        return super().cancel()

    def result(self, timeout: float | None = None) -> Any:
        """As ``Future.result``; on stdio the waiting thread reads its own response."""
        conn = self._conn
        if conn is not None and not self.done():
            if timeout is None:
                return conn.wait(self)
            pump = conn._pump  # the transport's read-in-this-thread hook (stdio), if any
            if pump is not None:
                deadline = time.monotonic() + timeout
                pump(self, deadline)
                timeout = 0 if self.done() else max(deadline - time.monotonic(), 0.0)
        return super().result(timeout)


class Era(ABC):
    """One protocol era's way of doing what the Session asks (LegacyEra, ModernEra)."""

    #: "legacy" or "modern"
    name: ClassVar[str]
    #: the ``Session.phases`` key of the bring-up request ("initialize" / "discover")
    bringup_phase: ClassVar[str]
    agreement: Agreement

    @abstractmethod
    def call(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> Any:
        """A blocking call: the raw result, converted in the calling thread."""

    @abstractmethod
    def submit(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> Future[Any]:
        """The same call as a future (``cancel()`` tells the server)."""

    @abstractmethod
    def page(
        self, method: str, params: dict[str, Any] | None, timeout: float | None | Default = UNSET
    ) -> Future[Any]:
        """One page of a paginated list (raw result), as fresh as the era's caches allow;
        ``timeout``: this page's (``collect_pages`` gives each what is left of the list's)."""

    @abstractmethod
    def wait(self, future: Future[Any]) -> Any:
        """Block for a future this era returned (Ctrl-C cancels it)."""

    @abstractmethod
    def subscribe(self, uri: str, timeout: float | None) -> None:
        """Start updates for ``uri`` (already in the Interest)."""

    @abstractmethod
    def unsubscribe(self, uri: str, timeout: float | None) -> None:
        """Stop updates for ``uri`` (already gone from the Interest)."""

    @abstractmethod
    def set_log_level(self, level: str) -> None:
        """Ask for server log messages at ``level`` and above."""

    def watch(self, timeout: float | None) -> None:  # noqa: B027 - optional hook
        """The Interest's list kinds changed: make the server report them (failures logged)."""

    def roots_changed(self) -> None:  # noqa: B027 - optional hook
        """The client's roots changed (legacy: tell the server; modern: nothing to send)."""

    def invalidate(self, *methods: str) -> None:  # noqa: B027 - optional hook
        """Forget the cached pages of ``methods`` (an explicit refresh)."""

    def cached(self, method: str) -> list[Any] | None:
        """A whole list kept by this era that is still fresh, or None."""
        return None

    def on_notification(self, method: str, params: dict[str, Any]) -> bool:
        """See a notification first; False drops it (from a stream already left)."""
        return True

    def on_expired(self, reinitialize: Callable[[], None]) -> None:  # noqa: B027 - optional hook
        """Install what to do when the server forgets the session (HTTP 404)."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """Tell this era's threads to stop (no waiting: ``Connection.close`` joins them)."""

    def threads(self) -> list[threading.Thread]:
        """This era's live threads (workers, listen streams, timers), for the close join."""
        return []


class NotReady(Era):
    """The era before bring-up finished: notifications pass, requests are refused."""

    name = "legacy"
    bringup_phase = "initialize"

    def _refuse(self, *args: Any) -> Any:
        raise HandshakeError("the session is not brought up yet")

    call = submit = page = wait = subscribe = unsubscribe = set_log_level = _refuse  # type: ignore[assignment]
