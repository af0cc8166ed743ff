"""mcpsync: a synchronous, threaded Model Context Protocol client with a blocking API.

The journey, one module per step: ``config`` (mcp.json entries) -> ``transports``
(stdio, Streamable HTTP, legacy SSE, memory) -> ``auth`` (OAuth for HTTP) ->
``connection`` (JSON-RPC futures) -> ``handshake`` (initialize) -> ``session`` (the
blocking API) -> ``host`` (many servers) -> ``cli``.

    import sys, mcpsync
    with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
        print([t.name for t in s.list_tools()])
"""

from .connection import Progress
from .errors import (
    AuthError,
    CapabilityError,
    ConfigError,
    HandshakeError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    ServerError,
    ServerExited,
    SessionClosed,
    TransportError,
    VersionMismatch,
)
from .session import Session

__version__ = "0.1.0"

__all__ = [
    "Session",
    "Progress",
    "MCPSyncError",
    "AuthError",
    "CapabilityError",
    "ConfigError",
    "HandshakeError",
    "HTTPStatusError",
    "ProtocolError",
    "RequestCancelled",
    "RequestTimeout",
    "ServerError",
    "ServerExited",
    "SessionClosed",
    "TransportError",
    "VersionMismatch",
]
