"""The initialize-handshake era (protocol versions 2024-11-05 ... 2025-11-25).

Owns: the ``initialize`` request and its one-shot version check (the client offers; the
server picks; the client accepts or hangs up), ``notifications/initialized``, and
``LegacyEra``: requests as they are, ``resources/subscribe``/``unsubscribe``,
``logging/setLevel``, ``notifications/roots/list_changed``, re-initialization when an
HTTP session expires, and the per-session tool list cache.

The blocking call is the measured hot path: ``convert(conn.call(...))`` and nothing more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..errors import HandshakeError, ProtocolError, VersionMismatch
from ..rpc.calls import Default
from ..rpc.connection import Connection
from ..versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION
from . import UNSET, Agreement, CallOptions, Convert, Derived, Era, ToolIndex
from .hooks import EraHooks

__all__ = ["LegacyEra", "initialize", "initialize_params", "accept_initialize"]


def initialize(
    conn: Connection,
    *,
    client_info: dict[str, Any],
    capabilities: dict[str, Any],
    protocol_version: str | None = None,
    timeout: float | None = 30.0,
) -> Agreement:
    """Run the initialize handshake on a started connection.

    Offers ``protocol_version`` (default: the newest this client speaks); accepts any
    version the client supports; otherwise raises ``VersionMismatch`` (the caller closes
    the transport). Sends ``notifications/initialized`` and tells the transport the
    agreed version.
    """
    started = time.perf_counter()
    params = initialize_params(client_info, capabilities, protocol_version)
    result = conn.wait(conn.request("initialize", params, timeout=timeout))
    return accept_initialize(conn, result, started)


def initialize_params(
    client_info: dict[str, Any], capabilities: dict[str, Any], protocol_version: str | None
) -> dict[str, Any]:
    """The params of an ``initialize`` request (``HandshakeError`` for a version without one)."""
    offer = protocol_version or LATEST_HANDSHAKE_VERSION
    if offer not in HANDSHAKE_VERSIONS:
        raise HandshakeError(
            f"protocol version {offer!r} has no initialize handshake; use one of {HANDSHAKE_VERSIONS}"
        )
    return {"protocolVersion": offer, "capabilities": capabilities, "clientInfo": client_info}


def accept_initialize(conn: Connection, result: Any, started: float) -> Agreement:
    """Check an ``initialize`` result, send ``notifications/initialized``, and say what was agreed.

    ``started``: the ``time.perf_counter()`` value when ``initialize`` was sent.
    """
    if not isinstance(result, dict):
        raise ProtocolError(f"initialize result is not an object: {result!r}")
    version = result.get("protocolVersion")
    if not isinstance(version, str) or version not in HANDSHAKE_VERSIONS:
        raise VersionMismatch(HANDSHAKE_VERSIONS, str(version))
    server_info = result.get("serverInfo")
    caps = result.get("capabilities")
    if not isinstance(server_info, dict) or not isinstance(caps, dict):
        raise ProtocolError("initialize result lacks serverInfo or capabilities")
    conn.notify("notifications/initialized")
    conn.transport.set_protocol_version(version)
    instructions = result.get("instructions")
    return Agreement(
        protocol_version=version,
        server_info=server_info,
        capabilities=caps,
        instructions=instructions if isinstance(instructions, str) else None,
        raw=result,
        seconds=time.perf_counter() - started,
    )


def _nothing(_: Any) -> None:
    return None


class LegacyEra(Era):
    """The Session's requests over an initialized connection."""

    name = "legacy"
    bringup_phase = "initialize"

    def __init__(
        self,
        conn: Connection,
        agreement: Agreement,
        tools: ToolIndex,
        require: Callable[[str], None] | None = None,
    ) -> None:
        self._conn = conn
        self.agreement = agreement
        self._tools = tools
        #: the Session's capability check (strict mode) for requests this era adds
        self._require = require or _nothing

    def call(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> Any:
        return convert(self._conn.call(method, params, opts))

    def submit(
        self, method: str, params: dict[str, Any] | None, convert: Convert, opts: CallOptions
    ) -> Future[Any]:
        return Derived(self._conn.request(method, params, opts), convert, self._conn)

    def page(
        self, method: str, params: dict[str, Any] | None, timeout: float | None | Default = UNSET
    ) -> Future[Any]:
        return self._conn.request(method, params, timeout=timeout)

    def wait(self, future: Future[Any]) -> Any:
        return self._conn.wait(future)

    def subscribe(self, uri: str, timeout: float | None) -> None:
        self._conn.call("resources/subscribe", {"uri": uri})

    def unsubscribe(self, uri: str, timeout: float | None) -> None:
        self._conn.call("resources/unsubscribe", {"uri": uri})

    def set_log_level(self, level: str) -> None:
        self._require("logging/setLevel")
        self._conn.call("logging/setLevel", {"level": level})

    def roots_changed(self) -> None:
        self._conn.notify("notifications/roots/list_changed")

    def invalidate(self, *methods: str) -> None:
        if "tools/list" in methods:
            self._tools.forget()

    def cached(self, method: str) -> list[Any] | None:
        return self._tools.tools if method == "tools/list" else None

    def on_expired(self, reinitialize: Callable[[], None]) -> None:
        EraHooks.of(self._conn).expired = reinitialize
