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

# Eager: the version and the errors, nothing else. Every other public name loads on first
# use through ``__getattr__`` below (PEP 562): ``mcpsync.Session`` the session layer (what
# connect and the calls need, no more), ``mcpsync.Host`` the host, ``mcpsync.display`` the
# renderers ... So a process that imports the package for something else (``python -m
# mcpsync.demo_server``, the pytest plugin every pytest run loads) pays ~1 ms, not ~25.
from . import _lazy
from ._version import __version__ as __version__
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

__all__ = [
    "Session",
    "RestartPolicy",
    "RestartEvent",
    "TaskFuture",
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
    from . import display as display
    from . import handlers as handlers
    from ._restart import RestartEvent, RestartPolicy
    from ._tasks import TaskFuture
    from .cards import server_card as server_card
    from .cards import server_cards as server_cards
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
    from .filters import ToolExcluded
    from .host import ConsentDenied, Host, HostTool, ServerStatus, UnknownTool, ask_on_terminal
    from .session import Session
    from .smoke import smoke as smoke

#: the names loaded on first use -> the submodule that has them (None: the name is a submodule)
_LAZY: dict[str, str | None] = {
    "Session": ".session",
    "Progress": ".connection",
    "RestartPolicy": "._restart",
    "RestartEvent": "._restart",
    "TaskFuture": "._tasks",
    "ToolExcluded": ".filters",
    "adapters": None,  # the LLM provider adapters (mcpsync/adapters/)
    # the submodules ``import mcpsync`` loaded before these names were lazy: after a bare
    # ``import mcpsync``, ``mcpsync.config.load_config(...)`` and the like keep working
    **dict.fromkeys(
        ("config", "connection", "display", "filters", "handlers", "host", "jsonrpc", "protocol",
         "session", "skills", "transports", "versions", "_bringup", "_calls", "_catalog",
         "_dispatch", "_forksafe", "_guard", "_lifecycle", "_offer", "_restart",
         "_restart_policy", "_served", "_serverlog", "_shared", "_tls", "_typed"),
    ),
    "smoke": ".smoke",
    "server_card": ".cards",  # Server Cards need requests
    "server_cards": ".cards",
    **dict.fromkeys(
        ("AuthSettings", "Config", "ConfigEntryError", "InputSpec", "ServerEntry",
         "default_config_paths", "load_config", "oauth_for_entry", "parse_entry"),
        ".config",
    ),
    **dict.fromkeys(
        ("ConsentDenied", "Host", "HostTool", "ServerStatus", "UnknownTool", "ask_on_terminal"),
        ".host",
    ),
}  # fmt: skip


# a name of ``__all__`` not loaded yet: import its submodule now (PEP 562). ``smoke``: the
# function (the submodule, once imported, replaces the attribute: it is callable, the same)
__getattr__, __dir__ = _lazy.attributes(globals(), _LAZY)
