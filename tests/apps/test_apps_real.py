"""mcpsync.apps against real MCP Apps servers from npm (pinned in tests/node/package.json):
``@modelcontextprotocol/server-basic-vanillajs`` and ``server-budget-allocator``, over stdio.
No browser here: the app's side of the bridge is played by the test (test_apps_browser.py has
the real app in chromium)."""

from __future__ import annotations

import os
import queue
import shutil
from pathlib import Path
from typing import Any

import pytest

import mcpsync
import mcpsync.apps as apps
from mcpsync.apps import AppBridge

pytestmark = pytest.mark.real

NODE_BIN = Path(__file__).resolve().parents[1] / "node" / "node_modules" / ".bin"
SERVERS = {
    "basic": ("mcp-server-basic-vanillajs", "get-time", "ui://get-time/mcp-app.html"),
    "budget": (
        "mcp-budget-allocator-server",
        "get-budget-data",
        "ui://budget-allocator/mcp-app.html",
    ),
}
WAIT = 30.0


def _argv(name: str) -> list[str]:
    path = shutil.which(
        SERVERS[name][0], path=f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    )
    if path is None:
        pytest.skip(f"{SERVERS[name][0]} not installed (scripts/install-test-deps.sh)")
    return [path, "--stdio"]


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_a_real_apps_server_renders_and_answers_through_the_bridge(name, no_leaks):
    _, tool, uri = SERVERS[name]
    with mcpsync.Session.connect(_argv(name), extensions=apps.EXTENSION, name=name) as s:
        assert apps.app_tools(s)[tool] == uri
        resource = apps.read_app_resource(s, uri)
        assert resource.html.lstrip().lower().startswith("<!doctype html>")
        assert resource.srcdoc.startswith(
            '<!DOCTYPE html><meta http-equiv="Content-Security-Policy"'
        )
        assert "connect-src 'none'" in resource.policy  # neither declares a domain

        result = s.call_tool(tool)
        posted: queue.Queue[dict[str, Any]] = queue.Queue()
        listed = next(t for t in s.list_tools() if t.name == tool)
        bridge = AppBridge(s, listed, resource, post=posted.put, result=result)

        def rpc() -> dict[str, Any]:
            while True:
                envelope = posted.get(timeout=WAIT)
                if envelope["kind"] == "rpc":
                    return envelope["message"]

        bridge.receive({"jsonrpc": "2.0", "id": 1, "method": "ui/initialize", "params": {}})
        assert rpc()["result"]["hostContext"]["toolInfo"]["tool"]["name"] == tool
        bridge.receive({"jsonrpc": "2.0", "method": "ui/notifications/initialized"})
        assert rpc()["method"] == "ui/notifications/tool-input"
        sent = rpc()
        assert sent["method"] == "ui/notifications/tool-result"
        assert sent["params"]["structuredContent"] == result.structured_content

        # the app calls the tool again: proxied to the real server, its answer comes back
        bridge.receive(
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool}}
        )
        answer = rpc()
        assert answer["id"] == 2 and answer["result"]["structuredContent"]
        assert set(answer["result"]["structuredContent"]) == set(result.structured_content)

        bridge.receive(
            {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": uri}}
        )
        read = rpc()
        assert read["id"] == 3 and read["result"]["contents"][0]["uri"] == uri

        bridge.receive(
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "nope"}}
        )
        assert "offers no tool 'nope'" in rpc()["error"]["message"]
        bridge.close()
        s.ping()  # the session is unaffected
