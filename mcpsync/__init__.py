"""mcpsync: a synchronous, threaded Model Context Protocol client with a blocking API.

The journey, one module per step: ``config`` (mcp.json entries) -> ``transports``
(stdio, Streamable HTTP, legacy SSE, memory) -> ``auth`` (OAuth for HTTP) ->
``connection`` (JSON-RPC futures) -> ``handshake`` (initialize) -> ``session`` (the
blocking API) -> ``host`` (many servers) -> ``cli``.

    import sys, mcpsync
    with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
        print([t.name for t in s.list_tools()])
"""

from typing import TYPE_CHECKING

from . import display, handlers
from ._restart import RestartEvent, RestartPolicy
from ._version import __version__ as __version__
from .config import (
    AuthSettings,
    Config,
    ConfigEntryError,
    InputSpec,
    ServerEntry,
    default_config_paths,
    load_config,
    oauth_for_entry,
    parse_entry,
)
from .connection import Progress
from .errors import (
    AuthError,
    CapabilityError,
    ConfigError,
    ForkedError,
    HandshakeError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    RestartLimitReached,
    ServerError,
    ServerExited,
    ServerRestarted,
    SessionClosed,
    TransportError,
    VersionMismatch,
    WriteTimeout,
)
from .filters import ToolExcluded
from .host import ConsentDenied, Host, HostTool, ServerStatus, UnknownTool, ask_on_terminal
from .session import Session

__all__ = [
    "Session",
    "RestartPolicy",
    "RestartEvent",
    "smoke",
    "Progress",
    "Host",
    "HostTool",
    "ServerStatus",
    "ServerEntry",
    "Config",
    "AuthSettings",
    "InputSpec",
    "load_config",
    "parse_entry",
    "default_config_paths",
    "oauth_for_entry",
    "ask_on_terminal",
    "display",
    "handlers",
    "ConfigEntryError",
    "ConsentDenied",
    "UnknownTool",
    "ToolExcluded",
    "MCPSyncError",
    "AuthError",
    "CapabilityError",
    "ConfigError",
    "HandshakeError",
    "HTTPStatusError",
    "ProtocolError",
    "RequestCancelled",
    "RequestTimeout",
    "WriteTimeout",
    "ServerError",
    "ServerExited",
    "ServerRestarted",
    "RestartLimitReached",
    "SessionClosed",
    "ForkedError",
    "TransportError",
    "VersionMismatch",
    "server_card",
    "server_cards",
]


if TYPE_CHECKING:
    from . import adapters as adapters
    from .cards import server_card as server_card
    from .cards import server_cards as server_cards
    from .smoke import smoke as smoke


def __getattr__(name: str) -> object:
    # late: ``import mcpsync`` stays cheap; the smoke runner loads on first use. Importing
    # the submodule makes ``mcpsync.smoke`` the module: it is callable (same function).
    if name == "smoke":
        import importlib

        function = importlib.import_module(".smoke", __name__).smoke
        globals()["smoke"] = function
        return function
    if name == "adapters":  # late too: the LLM provider adapters (mcpsync/adapters/)
        import importlib

        return importlib.import_module(".adapters", __name__)
    if name in ("server_card", "server_cards"):  # late too: Server Cards need requests
        import importlib

        return getattr(importlib.import_module(".cards", __name__), name)
    raise AttributeError(f"module 'mcpsync' has no attribute {name!r}")
