"""Deprecated path: the initialize handshake now lives in ``mcpsync.protocol.legacy``
(``Handshake`` is ``mcpsync.protocol.Agreement``; the version lists are in
``mcpsync.versions``). Kept for one release."""

from __future__ import annotations

from .protocol import Agreement
from .protocol.legacy import accept_initialize, initialize, initialize_params
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

#: the old name of ``Agreement``
Handshake = Agreement
