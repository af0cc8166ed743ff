"""Local stand-ins for remote MCP servers, startable from a notebook cell and stoppable later.

Owns: :func:`sdk_http_server` (the official-SDK test server over Streamable HTTP) and
:class:`OAuthDemo` (a real authorization server, panva/oidc-provider on Node 22 from
``tests/node``, in front of which sits a JWT-checking MCP server). Everything listens on
127.0.0.1 on ephemeral ports; every start is bounded; ``stop()`` is idempotent and kills
what was started (process groups included).

A notebook keeps the handles and calls ``stop()`` in its last cell; ``stop_all()`` stops
every handle this module started in this process (a safety net for the final cell).
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from servers.launch import RunningServer, kill_group, sdk_server_http

__all__ = ["REPO_ROOT", "HTTPServerHandle", "sdk_http_server", "OAuthDemo", "stop_all"]

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE = REPO_ROOT / "tests" / "node" / "node_modules" / ".bin" / "node"
OIDC_LAUNCHER = REPO_ROOT / "tests" / "auth_peers" / "oidc_server.mjs"

_started: list[Any] = []
_started_lock = threading.Lock()


def _remember(handle: Any) -> None:
    with _started_lock:
        _started.append(handle)


def stop_all() -> int:
    """Stop every handle started from this process that is still running; how many were."""
    with _started_lock:
        handles, _started[:] = list(_started), []
    running = [h for h in handles if not h.stopped]
    for h in reversed(handles):
        h.stop()
    return len(running)


class HTTPServerHandle:
    """A running HTTP server process: ``url``, ``port``, ``pid``; ``stop()`` kills its group."""

    def __init__(self, stack: contextlib.ExitStack, server: RunningServer) -> None:
        self._stack = stack
        self._server = server
        self.url = server.url
        self.port = server.port
        self.pid = server.proc.pid

    @property
    def stopped(self) -> bool:
        return self._server.proc.poll() is not None

    def stop(self) -> None:
        self._stack.close()

    def __repr__(self) -> str:
        state = "stopped" if self.stopped else "running"
        return f"<local server {self.url} ({state})>"


def sdk_http_server(timeout: float = 30.0) -> HTTPServerHandle:
    """Start ``tests/servers/sdk_server.py http --port 0`` (the official ``mcp`` SDK)."""
    stack = contextlib.ExitStack()
    try:
        server = stack.enter_context(sdk_server_http(timeout=timeout))
    except BaseException:
        stack.close()
        raise
    handle = HTTPServerHandle(stack, server)
    _remember(handle)
    return handle


class OAuthDemo:
    """An authorization server (oidc-provider, auto-consent) and an MCP server it protects.

    ``url``: the protected MCP endpoint; ``issuer``: the authorization server;
    ``stats()``: the authorization server's counters (registrations, authorizations, tokens
    by grant); ``requests``: what the MCP server saw (method, token present, status).
    """

    def __init__(self, timeout: float = 30.0) -> None:
        if (
            not NODE.exists()
            or not (REPO_ROOT / "tests" / "node" / "node_modules" / "oidc-provider").exists()
        ):
            raise RuntimeError(
                "Node 22 + oidc-provider are not installed in tests/node: run bash scripts/test once"
            )
        self._proc = subprocess.Popen(
            [str(NODE), str(OIDC_LAUNCHER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._rs: Any = None
        self._stopped = False
        _remember(self)
        try:
            self.issuer = self._wait_ready(timeout)
            from auth_peers.protected_mcp import ProtectedMCPServer  # needs PyJWT (test extra)

            self._rs = ProtectedMCPServer(self.issuer).__enter__()
        except BaseException:
            self.stop()
            raise
        self.url: str = self._rs.url

    def _wait_ready(self, timeout: float) -> str:
        lines: queue.Queue[str] = queue.Queue()
        proc = self._proc
        threading.Thread(
            target=lambda: lines.put(proc.stdout.readline() if proc.stdout else ""),
            name="notebook-oidc-ready",
            daemon=True,
        ).start()
        try:
            first = lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"oidc-provider did not start within {timeout:g} s") from None
        if not first:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"oidc-provider failed to start: {err[-2000:]}")
        return json.loads(first)["issuer"]

    def stats(self) -> dict[str, Any]:
        import requests

        return requests.get(f"{self.issuer}/test/stats", timeout=5).json()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """What the protected MCP server saw, one dict per HTTP request (no tokens)."""
        if self._rs is None:
            return []
        return [{k: r.get(k) for k in ("method", "token", "status")} for r in self._rs.requests]

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._rs is not None:
            self._rs.__exit__(None, None, None)
        if self._proc.poll() is None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()  # the launcher stops when stdin closes
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        kill_group(self._proc)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return f"<OAuth demo: MCP {getattr(self, 'url', '?')} behind {getattr(self, 'issuer', '?')} ({state})>"
