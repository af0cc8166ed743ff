"""End to end against a real authorization server (panva/oidc-provider on loopback) and a
JWT-verifying protected MCP server: DCR, pre-registration, refresh, step-up, stored tokens,
client_credentials, the loopback redirect listener."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import urllib.request
import webbrowser
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from auth_peers.protected_mcp import ProtectedMCPServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mcpsync.auth import FileTokenStore, LoopbackRedirect, OAuth, headless_redirect
from mcpsync.errors import AuthError

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[1]  # tests/
NODE = ROOT / "node" / "node_modules" / ".bin" / "node"
LAUNCHER = ROOT / "auth_peers" / "oidc_server.mjs"

if not NODE.exists() or not (ROOT / "node" / "node_modules" / "oidc-provider").exists():
    pytest.skip("oidc-provider / node 22 not installed in tests/node", allow_module_level=True)


class OIDCProvider:
    """The node launcher as a context manager; ``issuer`` once ready."""

    def __init__(self, *, at_ttl: int = 3600, clients: list[dict[str, Any]] | None = None) -> None:
        env = dict(os.environ, OIDC_AT_TTL=str(at_ttl), OIDC_CLIENTS=json.dumps(clients or []))
        self.proc = subprocess.Popen(
            [str(NODE), str(LAUNCHER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(
            target=lambda: lines.put(self.proc.stdout.readline()),
            name="test-oidc-ready",
            daemon=True,
        ).start()
        try:
            first = lines.get(timeout=30)
        except queue.Empty:
            self.close()
            raise RuntimeError("oidc-provider did not start within 30 s") from None
        if not first:
            err = self.proc.stderr.read()
            self.close()
            raise RuntimeError(f"oidc-provider failed to start: {err[-2000:]}")
        self.issuer = json.loads(first)["issuer"]

    def stats(self) -> dict[str, Any]:
        return requests.get(f"{self.issuer}/test/stats", timeout=5).json()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except (subprocess.TimeoutExpired, OSError):
                self.proc.kill()
                self.proc.wait(timeout=5)
        for f in (self.proc.stdout, self.proc.stderr):
            if f:
                f.close()

    def __enter__(self) -> OIDCProvider:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@pytest.fixture(scope="module")
def provider():
    with OIDCProvider() as p:
        yield p


def mcp(
    http: requests.Session, auth: Any, url: str, method: str, rid: int, params: dict | None = None
) -> requests.Response:
    return http.post(
        url,
        json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}},
        auth=auth,
        timeout=30,
    )


def session_roundtrip(auth: Any, url: str) -> dict[str, Any]:
    """initialize + initialized + tools/list + tools/call over plain requests; returns the call result."""
    with requests.Session() as http:
        r = mcp(
            http,
            auth,
            url,
            "initialize",
            1,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        assert r.status_code == 200, r.text
        sid = r.headers["Mcp-Session-Id"]
        http.headers["Mcp-Session-Id"] = sid
        assert (
            http.post(
                url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                auth=auth,
                timeout=30,
            ).status_code
            == 202
        )
        assert (
            mcp(http, auth, url, "tools/list", 2).json()["result"]["tools"][0]["name"] == "whoami"
        )
        r = mcp(http, auth, url, "tools/call", 3, {"name": "whoami", "arguments": {}})
        assert r.status_code == 200, r.text
        return json.loads(r.json()["result"]["content"][0]["text"])


def delta(after: dict[str, Any], before: dict[str, Any], key: str, sub: str | None = None) -> int:
    if sub is None:
        return after[key] - before[key]
    return after[key].get(sub, 0) - before[key].get(sub, 0)


def test_dcr_flow_then_second_run_reuses_stored_tokens(provider, tmp_path):
    store_path = tmp_path / "tokens.json"
    with ProtectedMCPServer(provider.issuer) as rs:
        s0 = provider.stats()
        auth = OAuth(
            client_name="mcpsync-e2e", redirect="headless", store=FileTokenStore(store_path)
        )
        out = session_roundtrip(auth, rs.url)
        s1 = provider.stats()
        assert out["sub"] == "test-user" and "mcp:read" in out["scope"]
        assert delta(s1, s0, "registrations") == 1
        assert delta(s1, s0, "authorizations") == 1
        assert delta(s1, s0, "tokens", "authorization_code") == 1
        # the token the RS accepted was a JWT for exactly this server
        assert rs.requests[0]["token"] is False and rs.requests[0]["status"] == 401
        assert all(r["claims"]["aud"] == rs.url for r in rs.requests if r["status"] == 200)
        assert auth.issuer == provider.issuer
        # second run: new object, same file store -> no registration, no authorization
        auth2 = OAuth(
            client_name="mcpsync-e2e",
            redirect=lambda url: pytest.fail("authorized again"),
            store=FileTokenStore(store_path),
        )
        session_roundtrip(auth2, rs.url)
        s2 = provider.stats()
        assert delta(s2, s1, "registrations") == 0 and delta(s2, s1, "authorizations") == 0
        assert sum(s2["tokens"].values()) == sum(s1["tokens"].values())
        assert all(
            r["token"] for r in rs.requests[len(rs.requests) - 5 :]
        )  # the 2nd run never hit a 401


def test_refresh_before_expiry_and_after_revocation(tmp_path):
    with OIDCProvider(at_ttl=30) as p, ProtectedMCPServer(p.issuer) as rs:
        auth = OAuth(redirect="headless")
        session_roundtrip(auth, rs.url)
        s1 = p.stats()
        # 30 s lifetime is inside the 60 s refresh window: the next request refreshes first
        with requests.Session() as http:
            assert mcp(http, auth, rs.url, "ping", 10).status_code == 200
        s2 = p.stats()
        assert (
            delta(s2, s1, "tokens", "refresh_token") == 1 and delta(s2, s1, "authorizations") == 0
        )
        # the server stops accepting the current token: 401 -> refresh -> re-sent
        auth.refresh_skew = 0
        rs.revoke_all()
        with requests.Session() as http:
            r = mcp(http, auth, rs.url, "ping", 11)
        assert r.status_code == 200 and [h.status_code for h in r.history] == [401]
        s3 = p.stats()
        assert (
            delta(s3, s2, "tokens", "refresh_token") == 1 and delta(s3, s2, "authorizations") == 0
        )


def test_step_up_to_a_scope_the_first_token_lacks(provider):
    with ProtectedMCPServer(provider.issuer, method_scopes={"tools/call": ["mcp:write"]}) as rs:
        s0 = provider.stats()
        auth = OAuth(redirect="headless")
        out = session_roundtrip(auth, rs.url)
        assert "mcp:write" in out["scope"] and "mcp:read" in out["scope"]  # union kept
        s1 = provider.stats()
        assert delta(s1, s0, "authorizations") == 2 and delta(s1, s0, "registrations") == 1
        assert [r["status"] for r in rs.requests if r["method"] == "tools/call"] == [403, 200]


def test_preregistered_client_no_registration():
    client = {
        "client_id": "pre-registered",
        "client_secret": "pre-registered-secret-0123456789abcdef",
        "redirect_uris": ["http://127.0.0.1:8976/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    with OIDCProvider(clients=[client]) as p, ProtectedMCPServer(p.issuer) as rs:
        auth = OAuth(
            client_id=client["client_id"],
            client_secret=client["client_secret"],
            issuer=p.issuer,
            redirect="headless",
        )
        session_roundtrip(auth, rs.url)
        s = p.stats()
        assert s["registrations"] == 0 and s["authorizations"] == 1
        assert {r["claims"]["client_id"] for r in rs.requests if r["status"] == 200} == {
            "pre-registered"
        }
        # the same credentials are not presented to another issuer
        bad = OAuth(
            client_id=client["client_id"],
            client_secret=client["client_secret"],
            issuer="http://127.0.0.1:1",
            redirect="headless",
        )
        with pytest.raises(AuthError, match="not presenting"), requests.Session() as http:
            mcp(http, bad, rs.url, "ping", 1)


def test_client_credentials_secret_and_private_key_jwt():
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    clients = [
        {"client_id": "svc", "client_secret": "svc-secret-0123456789abcdef0123456789",
         "grant_types": ["client_credentials"], "redirect_uris": [], "response_types": [],
         "token_endpoint_auth_method": "client_secret_basic"},
        {"client_id": "svc-jwt", "grant_types": ["client_credentials"], "redirect_uris": [], "response_types": [],
         "token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [{**jwk, "alg": "ES256", "use": "sig"}]}},
    ]  # fmt: skip
    with OIDCProvider(clients=clients) as p, ProtectedMCPServer(p.issuer) as rs:
        session_roundtrip(OAuth.client_credentials("svc", clients[0]["client_secret"]), rs.url)
        session_roundtrip(
            OAuth.client_credentials("svc-jwt", private_key_pem=pem, signing_algorithm="ES256"),
            rs.url,
        )
        s = p.stats()
        assert s["tokens"].get("client_credentials") == 2 and s["authorizations"] == 0
        assert {r["claims"]["client_id"] for r in rs.requests if r["status"] == 200} == {
            "svc",
            "svc-jwt",
        }


def test_loopback_listener_with_a_simulated_browser(provider, monkeypatch, no_leaks):
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def browser(url: str) -> bool:
        # what a browser does: follow the AS's pages, land on our 127.0.0.1 listener
        def run() -> None:
            landing = headless_redirect(url)
            with direct.open(landing, timeout=10) as r:
                assert r.status == 200

        threading.Thread(target=run, name="test-browser", daemon=True).start()
        return True

    monkeypatch.setattr(webbrowser, "open", browser)
    with ProtectedMCPServer(provider.issuer) as rs:
        auth = OAuth(redirect=LoopbackRedirect(print_fn=lambda s: None))
        session_roundtrip(auth, rs.url)
        # a second flow (new object, new ephemeral port) also works: native loopback ports are flexible
        session_roundtrip(OAuth(redirect=LoopbackRedirect(print_fn=lambda s: None)), rs.url)
