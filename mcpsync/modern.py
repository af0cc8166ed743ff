"""Deprecated path: the modern era now lives in ``mcpsync.protocol`` (kept for one release).

``mcpsync.protocol.modern`` (``ModernEra``, ``ModernFuture``, the envelope, the hint
cache, the header rules), ``mcpsync.protocol.choose`` (``negotiate``, ``resolve_era``,
``server_identity``, the verdict memory). The names below re-export them; the
module-level verdict functions act on the process-wide default ``VERDICTS``.
"""

from __future__ import annotations

import sys
import time  # noqa: F401 - old callers patch ``modern.time``
import types

from .protocol import choose as _choose
from .protocol.choose import (  # noqa: F401
    DEFAULT_CACHES,
    VERDICTS,
    Caches,
    VerdictMemory,
    _digest,
    negotiate,
    resolve_era,
    server_identity,
)
from .protocol.modern import ModernEra, ModernFuture
from .protocol.modern.cache import HINT_CACHE, HintCache
from .protocol.modern.envelope import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    DEFAULT_MAX_ROUNDS,
    DEFAULT_PROBE_TIMEOUT,
    LOG_LEVEL_KEY,
    MODERN_ERROR_CODES,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
    SUBSCRIPTION_ID_KEY,
    TASKS_EXTENSION,
    Envelope,
    InputRequiredRoundsExceeded,
    InvalidToolHeaders,
    modern_capabilities,
)
from .transports.http.headers import (
    encode_header_value,
    header_declarations,
    param_headers,
    standard_headers,
)

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

#: the old name of ``ModernEra``
ModernWire = ModernEra


def remembered_era(server_key: str | None) -> str | None:
    """The era remembered for this server in this process (``VERDICTS``), if any."""
    return VERDICTS.era(server_key)


def forget_era(server_key: str | None = None) -> None:
    """Forget the process-wide verdict for one server (or all of them)."""
    VERDICTS.forget(server_key)


def _remember_era(server_key: str | None, era: str, why: str = "") -> None:
    VERDICTS.remember(server_key, era, why)


class _Shim(types.ModuleType):
    """Setting a tunable here (``monkeypatch.setattr(modern, "DEFAULT_PROBE_TIMEOUT", ...)``)
    sets it where it is read now, ``mcpsync.protocol.choose``."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "DEFAULT_PROBE_TIMEOUT":
            setattr(_choose, name, value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Shim
