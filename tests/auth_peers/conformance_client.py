"""Minimal MCP client for the conformance harness's auth scenarios (test helper).

Owns: speaking just enough JSON-RPC over Streamable HTTP, by hand with ``requests``, to
exercise ``mcpsync.auth``: list tools and call ``test-tool`` (or the first tool).
Stateful wire (2025-*): initialize, notifications/initialized, Mcp-Session-Id. Stateless
wire (2026-07-28): every POST carries ``MCP-Protocol-Version`` and ``params._meta``.

Run by the harness::

    cd tests/node && PATH=$PWD/node_modules/.bin:$PATH conformance client \\
        --command "/work/main/.venv/bin/python /work/main/tests/auth_peers/conformance_client.py" \\
        --scenario auth/metadata-default -o /tmp/conf-auth

Exit status 0 when the tool call succeeded, 1 otherwise (the reason goes to stderr).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conformance_auth import auth_for_conformance  # noqa: E402

from mcpsync.errors import MCPSyncError  # noqa: E402

CLIENT_INFO = {"name": "mcpsync-auth-conformance", "version": "0.1.0"}
TIMEOUT = 20.0


class Client:
    def __init__(self, url: str, version: str, auth: requests.auth.AuthBase) -> None:
        self.url = url
        self.version = version
        self.stateless = version >= "2026-07-28"
        self.http = requests.Session()
        self.auth = auth
        self.session_id: str | None = None
        self.next_id = 1

    def _post(self, msg: dict[str, Any]) -> requests.Response:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.stateless or msg.get("method") != "initialize":
            headers["MCP-Protocol-Version"] = self.version
        return self.http.post(
            self.url, data=json.dumps(msg), headers=headers, auth=self.auth, timeout=TIMEOUT
        )

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        params = dict(params or {})
        if self.stateless:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            }
        rid = self.next_id
        self.next_id += 1
        r = self._post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if r.status_code != 200:
            raise RuntimeError(f"{method}: HTTP {r.status_code}: {r.text[:200]}")
        sid = r.headers.get("Mcp-Session-Id")
        if sid:
            self.session_id = sid
        for msg in _messages(r):
            if msg.get("id") == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result")
        raise RuntimeError(f"{method}: no response")

    def notify(self, method: str) -> None:
        r = self._post({"jsonrpc": "2.0", "method": method})
        r.close()

    def run(self) -> None:
        if not self.stateless:
            self.request(
                "initialize",
                {"protocolVersion": self.version, "capabilities": {}, "clientInfo": CLIENT_INFO},
            )
            self.notify("notifications/initialized")
        tools = self.request("tools/list")["tools"]
        names = [t["name"] for t in tools]
        name = "test-tool" if "test-tool" in names else (names[0] if names else None)
        if name:
            self.request("tools/call", {"name": name, "arguments": {}})


def _messages(r: requests.Response) -> list[dict[str, Any]]:
    ctype = r.headers.get("Content-Type", "")
    if "text/event-stream" in ctype:
        out, data = [], []
        for line in r.iter_lines(decode_unicode=True):
            if line is None:
                continue
            if line == "":
                if data:
                    out.append(json.loads("\n".join(data)))
                    data = []
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            out.append(json.loads("\n".join(data)))
        return out
    body = r.json()
    return body if isinstance(body, list) else [body]


def main() -> int:
    logging.basicConfig(level=os.environ.get("MCPSYNC_LOG", "INFO"), stream=sys.stderr)
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "null")
    auth = auth_for_conformance(scenario, context)
    try:
        Client(url, version, auth).run()
    except (MCPSyncError, RuntimeError, requests.RequestException) as exc:
        print(f"conformance client: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print("conformance client: ok", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
