"""DPoP end to end against a real authorization server (panva/oidc-provider, whose DPoP
feature issues JWT access tokens with ``cnf.jkt``) and the protected MCP server of
tests/auth_peers/protected_mcp.py taking DPoP-bound tokens (its proof check is
tests/auth_peers/dpop_check.py): the code flow with DCR, refresh with the same key, nonces
at the token endpoint and at the MCP server, client_credentials."""

from __future__ import annotations

import json
import logging

import pytest
from auth_peers.protected_mcp import ProtectedMCPServer
from test_auth_e2e_oidc import OIDCProvider  # skips itself without node / oidc-provider

import mcpsync
from mcpsync.auth import OAuth

pytestmark = pytest.mark.real

SECRET = "svc-secret-0123456789abcdef0123456789"
SERVICE = {
    "client_id": "svc", "client_secret": SECRET, "grant_types": ["client_credentials"],
    "redirect_uris": [], "response_types": [], "token_endpoint_auth_method": "client_secret_basic",
}  # fmt: skip


def _bound(rec: dict) -> str | None:
    return (rec.get("claims") or {}).get("cnf", {}).get("jkt")


def test_code_flow_gets_a_dpop_bound_token_and_refreshes_it_with_the_same_key(no_leaks):
    with (
        OIDCProvider(at_ttl=30) as p,  # inside the 60 s renewal window: the second call refreshes
        ProtectedMCPServer(p.issuer, dpop=True) as rs,
    ):
        auth = OAuth(redirect="headless")
        with mcpsync.Session.connect(rs.url, auth=auth, timeout=30) as s:
            info = json.loads(s.call_tool("whoami", {}).content[0].text)
            assert info["sub"] == "test-user"
            s.call_tool("whoami", {})
        stats = p.stats()
        assert stats["tokens"].get("authorization_code") == 1
        assert stats["tokens"].get("refresh_token", 0) >= 1  # the refresh carried a proof too
        served = [r for r in rs.requests if r["status"] == 200]
        assert served and all(r["scheme"] == "DPoP" and r.get("error") is None for r in served)
        keys = {_bound(r) for r in served}
        assert len(keys) == 1 and None not in keys  # every token bound, to one key
        assert not [r for r in rs.requests if r["scheme"] == "Bearer"]


def test_nonces_at_oidc_provider_and_at_the_mcp_server(monkeypatch, caplog, no_leaks):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OIDC_DPOP_NONCE", "1")  # the token endpoint demands its nonce
    with (
        OIDCProvider(clients=[SERVICE]) as p,
        ProtectedMCPServer(p.issuer, dpop=True, rs_nonce="rs-nonce-7") as rs,
    ):
        auth = OAuth.client_credentials("svc", SECRET)
        with mcpsync.Session.connect(rs.url, auth=auth, timeout=30) as s:
            for _ in range(3):
                assert json.loads(s.call_tool("whoami", {}).content[0].text)["sub"] == "svc"
        assert p.stats()["tokens"].get("client_credentials") == 1
        nonce_401 = [r for r in rs.requests if r.get("error") == "use_dpop_nonce"]
        assert len(nonce_401) == 1  # learned once, then carried by every proof
        served = [r for r in rs.requests if r["status"] == 200]
        assert served and all(r["scheme"] == "DPoP" and _bound(r) for r in served)
        assert SECRET not in caplog.text
        assert "/token asked for a DPoP nonce (use_dpop_nonce)" in caplog.text  # at the AS


def test_auto_stays_bearer_when_the_mcp_server_takes_only_bearer(no_leaks):
    # oidc-provider advertises DPoP by default; this server does not take it
    with OIDCProvider(clients=[SERVICE]) as p, ProtectedMCPServer(p.issuer) as rs:
        with mcpsync.Session.connect(
            rs.url, auth=OAuth.client_credentials("svc", SECRET), timeout=30
        ) as s:
            s.call_tool("whoami", {})
        served = [r for r in rs.requests if r["status"] == 200]
        assert served and all(r["scheme"] == "Bearer" and _bound(r) is None for r in served)
