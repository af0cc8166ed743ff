"""Deprecated path (kept one release): the Streamable HTTP transport and its plumbing now
live in ``mcpsync.transports.http`` (``streamable``, ``client``, ``headers``, ``sse``)."""

from ..versions import MODERN_FROM
from .http.client import (
    USER_AGENT,
    HTTPClient,
    Target,
    read_limited,
    safe_url,
    shutdown_response,
    status_error,
    translate_error,
)
from .http.headers import header_value
from .http.sse import ReplyTooLarge, response_id
from .http.streamable import ResponseLost, StreamableHTTPTransport

__all__ = [
    "StreamableHTTPTransport",
    "ResponseLost",
    "ReplyTooLarge",
    "response_id",
    "HTTPClient",
    "Target",
    "translate_error",
    "safe_url",
    "header_value",
    "status_error",
    "read_limited",
    "shutdown_response",
    "USER_AGENT",
    "MODERN_FROM",
]
