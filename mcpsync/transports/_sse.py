"""Deprecated path (one release): the SSE parser lives in ``transports.http.sse``."""

from .http.sse import EventTooLarge, SSEEvent, SSEParser

__all__ = ["SSEEvent", "SSEParser", "EventTooLarge"]
