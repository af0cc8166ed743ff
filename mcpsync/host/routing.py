"""The host's one tool namespace: bare names where one server owns a tool (sticky, in config
order), ``server__tool`` always; rebuilt from the ready servers' ``list_tools``; a name
resolves to the server and tool it routes to, or to an ``UnknownTool`` that says why (a
did-you-mean, or the error of the server the name points at when that server is down).

``ToolNamespace`` is a member of :class:`~mcpsync.host.Host` (``host._tools``); it reads
the host's server table and asks the host, through the two callables it is given, for the
servers that are up and to bring up the lazy ones.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable
from typing import Any

from ..errors import CapabilityError, MCPSyncError
from .servers import FAILED, IDLE, REFUSED, HostTool, UnknownTool, _Server, qualified_name

__all__: list[str] = []  # private to mcpsync.host


class ToolNamespace:
    """The tool names of the servers of one host, and where each routes.

    ``servers``: the host's table (read, never changed here); ``ready()``: the servers that
    are up now (the host checks that each is still alive); ``bring_up_idle()``: bring up
    the lazy servers not yet started (consent permitting)."""

    def __init__(
        self,
        servers: dict[str, _Server],
        separator: str,
        ready: Callable[[], list[_Server]],
        bring_up_idle: Callable[[], object],
    ) -> None:
        self._servers = servers
        self._separator = separator
        self._ready = ready
        self._bring_up_idle = bring_up_idle
        self._lock = threading.RLock()
        self._owners: dict[str, str] = {}  # bare tool name -> owning server (sticky)
        self._routes: dict[str, HostTool] = {}  # exposed and qualified names

    def rebuild(self) -> dict[str, HostTool]:
        """Ask every server that is up for its tools; return the exposed names' routes."""
        with self._lock:
            per_server: list[tuple[str, list[Any]]] = []
            for s in self._ready():
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

    def clear(self) -> None:
        with self._lock:
            self._routes.clear()

    def resolve(self, name: str) -> HostTool:
        """Which server and tool a (bare or qualified) name routes to; an unknown name
        brings up idle lazy servers (consent permitting) before giving up."""
        ht = self._lookup(name)
        if ht is None and any(s.state == IDLE for s in self._servers.values()):
            self._bring_up_idle()
            ht = self._lookup(name, force=True)
        if ht is None:
            raise self._unknown(name)
        return ht

    def _lookup(self, name: str, force: bool = False) -> HostTool | None:
        with self._lock:
            if force or name not in self._routes:
                self.rebuild()
            return self._routes.get(name)

    def _near(self, name: str, routes: dict[str, HostTool]) -> str | None:
        """The routable name ``name`` most likely meant: ``<server>.<tool>`` (or ``/``,
        ``:``, ``-``, one ``_``) written for ``<server>__<tool>``, else a close spelling."""
        for server_name in self._servers:
            for mark in (".", "/", ":", "-", "_"):
                if name.startswith(server_name + mark):
                    guess = qualified_name(
                        server_name, name[len(server_name) + 1 :], self._separator
                    )
                    if guess in routes:
                        return guess
        close = difflib.get_close_matches(name, list(routes), n=1, cutoff=0.75)
        return close[0] if close else None

    def _unknown(self, name: str) -> UnknownTool:
        """The error for a name nothing routes: the down server it names (with that
        server's error as the cause), else a did-you-mean over every routable name and
        the list of tools and of the servers that are not up."""
        with self._lock:
            routes = dict(self._routes)
        for server_name, s in self._servers.items():
            prefix = qualified_name(server_name, "", self._separator)
            if name.startswith(prefix) and s.state in (FAILED, REFUSED):
                error = UnknownTool(
                    f"no tool named {name!r}: server {server_name!r} is not up "
                    f"({s.state}: {s.error})"
                )
                error.__cause__ = s.error
                return error
        near = self._near(name, routes)
        hint = f"; did you mean {near!r}?" if near else ""
        known = sorted(n for n, ht in routes.items() if ht.name == n)
        if known:
            hint += f"; tools: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}"
        down = [n for n, s in self._servers.items() if s.state in (FAILED, REFUSED)]
        if down:
            hint += f"; servers not up: {', '.join(down)}"
        return UnknownTool(f"no tool named {name!r}{hint}")
