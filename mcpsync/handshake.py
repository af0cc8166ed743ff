"""Bring-up at the protocol level: the initialize handshake and version negotiation.

Owns: which protocol versions this client speaks, the ``initialize`` request, the
one-shot version check (the client offers; the server picks; the client accepts or hangs
up), and ``notifications/initialized``. Transport-agnostic: it talks to a ``Connection``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .connection import Connection
from .errors import HandshakeError, ProtocolError, VersionMismatch
from .versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_VERSIONS

__all__ = [
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "Handshake",
    "initialize",
    "initialize_params",
    "accept_initialize",
]


@dataclass
class Handshake:
    """What bring-up agreed with the server."""

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


def initialize(
    conn: Connection,
    *,
    client_info: dict[str, Any],
    capabilities: dict[str, Any],
    protocol_version: str | None = None,
    timeout: float | None = 30.0,
) -> Handshake:
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


def accept_initialize(conn: Connection, result: Any, started: float) -> Handshake:
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
    return Handshake(
        protocol_version=version,
        server_info=server_info,
        capabilities=caps,
        instructions=instructions if isinstance(instructions, str) else None,
        raw=result,
        seconds=time.perf_counter() - started,
    )
