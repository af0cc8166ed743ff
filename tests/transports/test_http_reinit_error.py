"""A re-initialization whose ``initialize`` is answered with a JSON-RPC error (HTTP 200).

The session expired (404); the call that met it leads a re-initialization, and the server
answers that ``initialize`` with an error. That call fails with the error; the next call
must lead a new re-initialization at once (and succeed when the server answers it), not wait
its whole timeout for a handshake nobody will finish.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from test_http_transport import Req, ScriptedServer, init_result, json_server

import mcpsync
from mcpsync.errors import MCPSyncError


def test_a_refused_reinitialization_leaves_the_next_call_free_to_lead(no_leaks: None) -> None:
    state: dict[str, Any] = {"session": "sess-1", "inits": 0, "refuse": False}

    def extra(req: Req, message: dict[str, Any]) -> bool:
        if message.get("method") == "initialize":
            state["inits"] += 1
            if state["refuse"]:
                state["refuse"] = False
                error = {"code": -32603, "message": "not now"}
                req.send_json({"jsonrpc": "2.0", "id": message["id"], "error": error},
                              headers={"Mcp-Session-Id": "sess-refused"})  # fmt: skip
                return True
            state["session"] = f"sess-{state['inits']}"
            req.send_json(init_result(message["id"]), headers={"Mcp-Session-Id": state["session"]})
            return True
        if req.headers.get("mcp-session-id") != state["session"]:
            req.send(404 if "mcp-session-id" in req.headers else 400, b"no")
            return True
        if message.get("method") == "tools/call":
            text = message["params"]["arguments"]["message"]
            result = {"content": [{"type": "text", "text": text}]}
            req.send_json({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return True
        return False

    with ScriptedServer(json_server(extra)) as server:
        with mcpsync.Session.connect(server.url, era="legacy", timeout=10) as s:
            assert s.call_tool("echo", {"message": "a"}).content[0].text == "a"
            state["session"], state["refuse"] = "gone", True  # expired; the next init refused
            with pytest.raises(MCPSyncError, match="not now"):
                s.call_tool("echo", {"message": "b"})
            started = time.monotonic()
            assert s.call_tool("echo", {"message": "c"}).content[0].text == "c"
            elapsed = time.monotonic() - started
            assert elapsed < 5, f"the next call waited {elapsed:.1f} s for a failed handshake"
            assert state["inits"] == 3  # bring-up, the refused one, the next call's
