"""The host's one tool namespace: bare names where one server owns a tool (sticky, in config
order), ``server__tool`` always; rebuilt from the ready servers' ``list_tools``; a name
resolves to its server, and calls route there.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from ..errors import CapabilityError, MCPSyncError
from .servers import FAILED, IDLE, READY, REFUSED, HostTool, UnknownTool, _Server, qualified_name

__all__: list[str] = []  # private to mcpsync.host


class _ToolRouting:
    """A mixin over :class:`~mcpsync.host.Host`'s state (declared here, set in its ``__init__``)."""

    _servers: dict[str, _Server]
    _separator: str
    _ns_lock: threading.RLock
    _owners: dict[str, str]
    _routes: dict[str, HostTool]

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def _check_alive(self, s: _Server) -> None: ...

        def session(self, name: str) -> Any: ...

        def connect_all(self, timeout: float | None = None) -> Any: ...

    def _ready_servers(self) -> list[_Server]:
        for s in self._servers.values():
            self._check_alive(s)
        return [s for s in self._servers.values() if s.state == READY and s.session is not None]

    def _rebuild(self) -> dict[str, HostTool]:
        with self._ns_lock:
            per_server: list[tuple[str, list[Any]]] = []
            for s in self._ready_servers():
                try:
                    tools = list(s.session.list_tools())
                    s.tools_error = None
                except CapabilityError:
                    tools = []
                except MCPSyncError as exc:
                    s.tools_error = exc
                    tools = []
                per_server.append((s.name, tools))
            offered = {name: {t.name for t in tools} for name, tools in per_server}
            for bare, owner in list(self._owners.items()):
                if bare not in offered.get(owner, ()):
                    del self._owners[bare]  # the owner is gone or dropped the tool
            for name, tools in per_server:  # config order
                for t in tools:
                    self._owners.setdefault(t.name, name)
            routes: dict[str, HostTool] = {}
            for name, tools in per_server:
                for t in tools:
                    q = qualified_name(name, t.name, self._separator)
                    exposed = t.name if self._owners.get(t.name) == name else q
                    routes[exposed] = HostTool(name=exposed, server=name, tool=t, qualified=q)
            listed = dict(routes)
            for ht in listed.values():
                routes.setdefault(ht.qualified, ht)
            self._routes = routes
            return listed

    def list_tools(self, *, include_lazy: bool = False) -> list[HostTool]:
        """Every tool of every server that is up, each under its exposed name (config order).

        With ``include_lazy=True`` lazy servers are brought up first (consent permitting).
        """
        self._check_open()
        if include_lazy:
            self.connect_all()
        return list(self._rebuild().values())

    def resolve(self, name: str) -> HostTool:
        """Which server and tool a (bare or qualified) name routes to.

        An unknown name brings up idle lazy servers (consent permitting) before giving up.
        """
        self._check_open()
        ht = self._rebuild_if_needed(name)
        if ht is None and any(s.state == IDLE for s in self._servers.values()):
            self.connect_all()
            ht = self._rebuild_if_needed(name, force=True)
        if ht is None:
            known = sorted(self._routes_listed())
            hint = (
                f"; tools: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}"
                if known
                else ""
            )
            down = [n for n, s in self._servers.items() if s.state in (FAILED, REFUSED)]
            if down:
                hint += f"; servers not up: {', '.join(down)}"
            raise UnknownTool(f"no tool named {name!r}{hint}")
        return ht

    def _routes_listed(self) -> list[str]:
        with self._ns_lock:
            return [n for n, ht in self._routes.items() if ht.name == n]

    def _rebuild_if_needed(self, name: str, force: bool = False) -> HostTool | None:
        with self._ns_lock:
            if force or name not in self._routes:
                self._rebuild()
            return self._routes.get(name)

    def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        """Call a tool by its namespace name on the session that owns it (blocking).

        ``kwargs`` go to ``Session.call_tool`` (``timeout``, ``on_progress``).
        """
        ht = self.resolve(name)
        return self.session(ht.server).call_tool(ht.tool_name, arguments, **kwargs)

    def submit_call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Future:
        """Like :meth:`call_tool` but returns a ``concurrent.futures.Future``."""
        ht = self.resolve(name)
        return self.session(ht.server).submit_call_tool(ht.tool_name, arguments, **kwargs)
