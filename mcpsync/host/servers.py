"""What a :class:`~mcpsync.host.Host` holds per server and reports about it: the server states,
the per-entry record, :class:`ServerStatus` rows, :class:`HostTool` routes and their
qualified names, the errors :class:`ConsentDenied` and :class:`UnknownTool`, the terminal
consent prompt, and the bring-up helpers (the default connect, the leftover-process net).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import ServerEntry
from ..errors import ConfigError, MCPSyncError, RestartLimitReached
from .restarts import RestartCount, restarts_of

__all__ = [
    "SEPARATOR",
    "ConnectFn",
    "ConsentFn",
    "ConsentDenied",
    "UnknownTool",
    "qualified_name",
    "ask_on_terminal",
    "HostTool",
    "ServerStatus",
]

log = logging.getLogger("mcpsync.host")

SEPARATOR = "__"

ConnectFn = Callable[..., Any]
ConsentFn = Callable[[ServerEntry], bool]

# states a server goes through
IDLE, CONNECTING, READY, FAILED, REFUSED, DISABLED, CLOSED = (
    "idle",
    "connecting",
    "ready",
    "failed",
    "refused",
    "disabled",
    "closed",
)
#: a ready entry whose restart policy is bringing its server up again (status rows only:
#: the entry stays ready for routing, its calls wait for the restart)
RESTARTING = "restarting"


class ConsentDenied(MCPSyncError):
    """The consent hook refused (or failed) to let this server start."""


class UnknownTool(MCPSyncError, LookupError):
    """No server that is up offers a tool by this name."""


def qualified_name(server: str, tool: str, separator: str = SEPARATOR) -> str:
    """``<server>__<tool>`` with the server part reduced to tool-name characters."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", server) + separator + tool


def _per_server(value: Mapping[str, Any] | None, what: str) -> dict[str, tuple[str, ...]]:
    """``{server (or "*"): globs}`` checked: ConfigError for anything else."""
    from ..filters import globs

    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{what}: expected {{server name: [tool globs]}}, got {value!r}")
    return {str(k): globs(patterns, f"{what}[{k!r}]") for k, patterns in value.items()}


def ask_on_terminal(entry: ServerEntry) -> bool:
    """A consent hook for interactive scripts: asks y/N on the terminal."""
    what = "run" if entry.is_stdio else "connect to"
    try:
        answer = input(f"mcpsync: {what} server {entry.name!r} ({entry.describe()})? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


@dataclass(frozen=True)
class HostTool:
    """One tool in the host's flat namespace."""

    name: str  # what callers use: bare or qualified
    server: str
    tool: Any = field(repr=False)  # mcp_types.Tool
    qualified: str = ""

    @property
    def tool_name(self) -> str:
        """The name the server knows the tool by."""
        return self.tool.name

    @property
    def description(self) -> str:
        return getattr(self.tool, "description", None) or ""


@dataclass(frozen=True)
class ServerStatus:
    """What one entry is doing, for reports (``mcpsync smoke``) and notebooks."""

    name: str
    state: str
    transport: str
    target: str
    protocol_version: str | None
    server_info: Any
    tools: int | None
    seconds: float | None
    error: BaseException | None
    lazy: bool
    #: how often the entry's restart policy brought its session back
    restarts: int = 0
    #: the errors of the restart under way ("restarting": the death, then each failed
    #: attempt) or of the run that gave up ("failed"), oldest first
    reasons: tuple[BaseException, ...] = ()

    def __post_init__(self) -> None:
        # The host passes ``restarts_of(session)``: a RestartCount that also knows whether
        # a restart is under way (the entry itself stays "ready" while it runs).
        count = self.restarts
        if isinstance(count, RestartCount):
            if count.phase == RESTARTING and self.state == READY:
                object.__setattr__(self, "state", RESTARTING)
            if count.reasons and not self.reasons:
                object.__setattr__(self, "reasons", count.reasons)
            object.__setattr__(self, "restarts", int(count))
        if not self.reasons and isinstance(self.error, RestartLimitReached):
            object.__setattr__(self, "reasons", tuple(self.error.reasons))

    @property
    def ok(self) -> bool:
        return self.state in (READY, IDLE, DISABLED) and self.error is None


class _Server:
    """Per-entry state; fields change only under ``lock``."""

    def __init__(self, name: str, entry: ServerEntry | None, error: BaseException | None) -> None:
        self.name = name
        self.entry = entry
        self.lock = threading.Lock()
        self.done = threading.Event()  # set when a bring-up finished (either way)
        self.session: Any = None
        self.error: BaseException | None = error
        self.tools_error: BaseException | None = None
        self.consent: bool | None = None
        self.seconds: float | None = None
        self.thread: threading.Thread | None = None
        self.transport: Any = None  # a stdio transport the host made, while bring-up runs
        if entry is None:
            self.state = FAILED
            self.done.set()
        elif entry.disabled:
            self.state = DISABLED
            self.done.set()
        else:
            self.state = IDLE

    @property
    def shown_state(self) -> str:
        """The state as reports show it: "restarting" for a ready entry whose restart policy
        is bringing its server up again (``state`` stays "ready": routing and calls go on)."""
        state = self.state
        if state == READY and restarts_of(self.session).phase == RESTARTING:
            return RESTARTING
        return state


def _kill_leftover(transport: Any) -> None:
    """Safety net: a transport closed by the host just before it spawned its process (and
    the copies made to start its server again, ``successor``)."""
    for made in _successors(transport):
        made.kill()  # StdioTransport: the process and its group, at once


def _successors(transport: Any) -> list[Any]:
    """``transport`` and the fresh copies made from it to start its server again (a server
    that died of the era probe: ``transports.select.respawn``), oldest first."""
    chain: list[Any] = []
    while transport is not None and len(chain) < 8:
        chain.append(transport)
        transport = getattr(transport, "successor", None)
    return chain


class _Starting:
    """What ``Host.close`` closes for a bring-up under way: the transport the host made
    and, looked up when closing, every copy made since to start its server again."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    def close(self) -> None:
        for made in _successors(self.transport):
            made.close()


def _default_connect(**kwargs: Any) -> Any:
    from ..session import Session  # late: the session layer sits above config/host imports

    return Session.connect(**kwargs)
