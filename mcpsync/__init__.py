"""mcpsync: a synchronous, threaded Model Context Protocol client with a blocking API.

The journey, one step per package: ``config`` (mcp.json entries) -> ``transports``
(stdio, Streamable HTTP, legacy SSE, memory) -> ``auth`` (OAuth for HTTP) ->
``connection`` (JSON-RPC futures) -> ``protocol`` (the eras: ``initialize`` or
``server/discover``) -> ``session`` (the blocking API) -> ``host`` (many servers) -> ``cli``.

    import sys, mcpsync
    with mcpsync.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
        print([t.name for t in s.list_tools()])

Owns the public names (``__all__``) and nothing else. Eager: the version and the errors.
Every other name loads on first use through the module ``__getattr__`` below (PEP 562):
``mcpsync.connect`` and ``mcpsync.Session`` the session layer (what connect and the calls
need, no more), ``mcpsync.Host`` the host, ``mcpsync.display`` the renderers ... So a
process that imports the package for something else (``python -m mcpsync.demo_server``,
the pytest plugin every pytest run loads) pays ~1 ms, not ~25. ``dir(mcpsync)`` is
``__all__`` (and the dunders); other submodules are imported by their full name
(``from mcpsync.config import command_name``).
"""

from typing import TYPE_CHECKING

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
    "connect",
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
    "skills",
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
    from . import display as display
    from . import handlers as handlers
    from . import skills as skills
    from . import smoke as smoke
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
    from .filters import ToolExcluded
    from .host import ConsentDenied, Host, HostTool, ServerStatus, UnknownTool, ask_on_terminal
    from .rpc.connection import Progress
    from .session import Session
    from .session.restart import RestartEvent, RestartPolicy
    from .session.tasks import TaskFuture

    connect = Session.connect

#: each name loaded on first use -> ``"module:attribute"`` (just ``"module"``: the name is
#: that submodule). Only names of ``__all__``: nothing private is reachable from here.
_LAZY: dict[str, str] = {
    "connect": ".session:Session.connect",  # the one obvious entry: Session.connect itself
    "Session": ".session:Session",
    "Progress": ".rpc.connection:Progress",
    "RestartPolicy": ".session.restart:RestartPolicy",
    "RestartEvent": ".session.restart:RestartEvent",
    "TaskFuture": ".session.tasks:TaskFuture",
    "ToolExcluded": ".filters:ToolExcluded",
    "display": ".display",
    "handlers": ".handlers",
    "skills": ".skills",  # the README's ``extensions=[mcpsync.skills.EXTENSION_ID]``
    "smoke": ".smoke",  # ``mcpsync.smoke.run(config, calls=...)``
    "server_card": ".cards:server_card",  # Server Cards need requests
    "server_cards": ".cards:server_cards",
    **{
        name: f".config:{name}"
        for name in ("AuthSettings", "Config", "ConfigEntryError", "InputSpec", "ServerEntry",
                     "default_config_paths", "load_config", "oauth_for_entry", "parse_entry")
    },
    **{
        name: f".host:{name}"
        for name in ("ConsentDenied", "Host", "HostTool", "ServerStatus", "UnknownTool",
                     "ask_on_terminal")
    },
}  # fmt: skip


def __getattr__(name: str) -> object:
    """A name of ``__all__`` not loaded yet: import its module now and keep the value."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    module, _, path = where.partition(":")
    value: object = import_module(module, __name__)
    for part in path.split(".") if path else ():
        value = getattr(value, part)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """``__all__`` and the dunders: what the package offers, not what it has loaded."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n.endswith("__"))})


del TYPE_CHECKING
