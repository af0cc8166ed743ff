"""mcpsync.Session.connect(url, auth=OAuth(...)) over Streamable HTTP against a real
authorization server (oidc-provider) and a JWT-verifying protected MCP server."""

from __future__ import annotations

import json

import pytest

pytest.importorskip(
    "mcpsync.transports.http.streamable", reason="Streamable HTTP transport not landed yet"
)

from auth_peers.protected_mcp import ProtectedMCPServer  # noqa: E402
from test_auth_e2e_oidc import OIDCProvider  # noqa: E402  (skips itself without node)

import mcpsync  # noqa: E402
from mcpsync.auth import FileTokenStore, OAuth  # noqa: E402
from mcpsync.errors import AuthError  # noqa: E402

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def provider():
    with OIDCProvider() as p:
        yield p


def test_session_connect_authorizes_lists_and_calls(provider, tmp_path, no_leaks):
    store = FileTokenStore(tmp_path / "tokens.json")
    with ProtectedMCPServer(provider.issuer, method_scopes={"tools/call": ["mcp:write"]}) as rs:
        before = provider.stats()
        with mcpsync.Session.connect(
            rs.url, auth=OAuth(redirect="headless", store=store), timeout=30
        ) as s:
            assert s.phases["auth"] > 0  # the dance inside the first POST is its own phase
            assert [t.name for t in s.list_tools()] == ["whoami"]
            out = s.call_tool("whoami", {})  # 403 insufficient_scope -> step-up -> retried
            info = json.loads(out.content[0].text)
            assert info["sub"] == "test-user" and {"mcp:read", "mcp:write"} <= set(info["scope"])
        after = provider.stats()
        assert after["authorizations"] - before["authorizations"] == 2
        assert all(r["token"] for r in rs.requests[1:])  # only the very first request went without
        # a second session (new object, same store) needs no authorization at all
        with mcpsync.Session.connect(
            rs.url,
            auth=OAuth(redirect=lambda u: pytest.fail("authorized again"), store=store),
            timeout=30,
        ) as s:
            assert "auth" not in s.phases
            s.call_tool("whoami", {})
        assert provider.stats()["authorizations"] == after["authorizations"]


def test_session_connect_surfaces_auth_errors(provider, no_leaks):
    with ProtectedMCPServer(provider.issuer) as rs:
        auth = OAuth(
            client_id="nobody", client_secret="x", issuer="http://127.0.0.1:1", redirect="headless"
        )
        with pytest.raises(AuthError, match="not presenting"):
            mcpsync.Session.connect(rs.url, auth=auth, timeout=30, connect_timeout=30)
