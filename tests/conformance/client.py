"""The mcpsync client program the official conformance suite drives.

Run by ``conformance client --command "python tests/conformance/client.py"``: the suite
appends the server URL and sets MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION
and MCP_CONFORMANCE_CONTEXT. It uses only the public API; exit code 0 means the client did
its part without error.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ for auth_peers

import mcpsync  # noqa: E402
from mcpsync.handlers import accept_defaults  # noqa: E402


def connect(url: str, scenario: str, version: str, **kwargs: Any) -> mcpsync.Session:
    if scenario.startswith("auth/"):
        from auth_peers.conformance_auth import auth_for_conformance

        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "null")
        kwargs["auth"] = auth_for_conformance(scenario, context)
    if version:
        kwargs["protocol_version"] = version
    return mcpsync.Session.connect(url, timeout=30, connect_timeout=30, **kwargs)


def run(url: str, scenario: str, version: str) -> None:
    if scenario == "elicitation-sep1034-client-defaults":
        with connect(url, scenario, version, elicitation_handler=accept_defaults) as s:
            s.list_tools()
            s.call_tool("test_client_elicitation_defaults", {})
        return
    with connect(url, scenario, version) as s:
        if s.server_capabilities.tools is None:  # e.g. `initialize`: nothing more to do
            return
        tools = {t.name: t for t in s.list_tools()}
        if scenario == "tools_call":
            s.call_tool("add_numbers", {"a": 2, "b": 3})
        elif scenario == "sse-retry":
            s.call_tool("test_reconnection", {})
        elif scenario == "json-schema-2020-12-preservation":
            schema = tools["json_schema_2020_12_tool"].input_schema
            s.call_tool("json_schema_echo", {"schema": schema})
        elif scenario.startswith("auth/"):
            if "test-tool" in tools:
                s.call_tool("test-tool", {})
        elif scenario == "initialize":
            pass


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "")
    try:
        run(url, scenario, version)
    except mcpsync.MCPSyncError as exc:
        print(f"conformance client: {scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
