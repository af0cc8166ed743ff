"""The protocol versions this client speaks, in one place (a leaf: imports nothing).

Owns: the version list of each era and the predicates over it. The initialize handshake
(``handshake``), the stateless bring-up (``modern``) and the HTTP transports (which send
the 2026-07-28 headers) all read it from here.

Two eras:

- **legacy** (``HANDSHAKE_VERSIONS``): reached with the ``initialize`` handshake,
  2024-11-05 to 2025-11-25;
- **modern** (``MODERN_VERSIONS``): stateless, no ``initialize``, a per-request ``_meta``
  envelope and (over HTTP) the ``Mcp-Method``/``Mcp-Name`` headers, from 2026-07-28.
"""

from __future__ import annotations

import re

__all__ = [
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "LATEST_MODERN_VERSION",
    "MODERN_FROM",
    "ALL_VERSIONS",
    "is_modern",
    "era_of",
    "PROTOCOL_VERSION_KEY",
]

#: Versions reachable with the initialize handshake, newest first.
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: Stateless versions (no initialize; per-request ``_meta``), newest first.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]
LATEST_MODERN_VERSION = MODERN_VERSIONS[0]
#: The first version of the stateless wire; every later dated version keeps its rules.
MODERN_FROM = MODERN_VERSIONS[-1]
#: Every version this client speaks, newest first.
ALL_VERSIONS: tuple[str, ...] = (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS)

#: The ``_meta`` key that carries a modern request's protocol version.
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"

_DATED = re.compile(r"\d{4}-\d{2}-\d{2}")


def is_modern(version: str | None) -> bool:
    """True if ``version`` follows the stateless wire's rules: a dated version from
    ``MODERN_FROM`` on (a newer one than this client knows included: the wire rules a
    transport applies do not go back to the handshake)."""
    return (
        isinstance(version, str)
        and _DATED.fullmatch(version) is not None
        and version >= MODERN_FROM
    )


def era_of(version: str) -> str | None:
    """The era ("modern" or "legacy") of a version this client speaks; None for any other."""
    if version in MODERN_VERSIONS:
        return "modern"
    if version in HANDSHAKE_VERSIONS:
        return "legacy"
    return None
