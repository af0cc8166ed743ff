"""Deprecated path (one release): the legacy HTTP+SSE transport lives in ``transports.http``."""

from .http.legacy_sse import LegacySSETransport

__all__ = ["LegacySSETransport"]
