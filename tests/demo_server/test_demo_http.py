"""The demo server over Streamable HTTP and the demo authorization server, through the client."""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import psutil
import pytest
import requests

import mcpsync
from mcpsync.auth import FileTokenStore, OAuth
from mcpsync.demo_server.http import DemoHTTPServer


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_session_over_http_progress_cancel_and_close():
    with DemoHTTPServer() as server:
        with mcpsync.Session.connect(server.url, name="demo-http") as s:
            assert s.transport.kind == "streamable-http"
            assert s.server_info.name == "mcpsync-demo"
            assert s.call_tool("echo", {"message": "over http"}).content[0].text == "over http"
            seen = []
            r = s.call_tool("long_running", {"duration": 0.2, "steps": 4}, on_progress=seen.append)
            assert [p.progress for p in seen] == [1, 2, 3, 4]  # all before the call returned
            assert "4 steps" in r.content[0].text
            first = threading.Event()
            f = s.submit_call_tool(
                "long_running", {"duration": 30, "steps": 300}, on_progress=lambda p: first.set()
            )
            assert first.wait(10)
            assert f.cancel()
            assert s.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
            assert len(server.sessions) == 1
        assert server.sessions == {}  # close() sent DELETE
        assert {"method": "DELETE", "token": False, "status": 200} in server.requests
        port = server.port
    assert server.stopped and not _listening(port)


def test_requests_from_a_foreign_origin_are_refused():
    with DemoHTTPServer() as server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        r = requests.post(
            server.url, json=body, headers={"Origin": "http://evil.example"}, timeout=5
        )
        assert r.status_code == 403
        r = requests.post(
            server.url,
            json=body,
            headers={"Origin": server.origin, "Accept": "application/json, text/event-stream"},
            timeout=5,
        )
        assert r.status_code == 200 and '"result": {}' in r.text


def test_oauth_code_pkce_headless_then_stored_token(tmp_path: Path):
    with DemoHTTPServer(auth=True) as server:
        assert requests.post(server.url, json={}, timeout=5).status_code == 401
        store = FileTokenStore(tmp_path / "tokens.json")
        auth = OAuth(client_name="t", redirect="headless", store=store)
        with mcpsync.Session.connect(server.url, auth=auth) as s:
            assert s.call_tool("echo", {"message": "authorized"}).content[0].text == "authorized"
        stats = server.auth_server.stats()
        assert stats["registrations"] == 1 and stats["authorizations"] == 1
        assert stats["tokens"] == {"authorization_code": 1}

        def must_not_ask(url: str) -> str:
            raise AssertionError("asked to authorize again")

        again = OAuth(client_name="t", redirect=must_not_ask, store=store)
        with mcpsync.Session.connect(server.url, auth=again) as s:
            assert s.call_tool("echo", {"message": "again"}).content[0].text == "again"
        assert server.auth_server.stats()["tokens"] == {"authorization_code": 1}


def test_client_credentials_and_wrong_secret():
    with DemoHTTPServer(auth=True, clients={"svc": "s3cret"}) as server:
        with mcpsync.Session.connect(
            server.url, auth=OAuth.client_credentials("svc", "s3cret")
        ) as s:
            assert s.call_tool("echo", {"message": "m2m"}).content[0].text == "m2m"
        assert server.auth_server.stats()["tokens"] == {"client_credentials": 1}
        with pytest.raises(mcpsync.MCPSyncError):
            mcpsync.Session.connect(
                server.url, auth=OAuth.client_credentials("svc", "wrong"), connect_timeout=15
            )


def test_authorization_server_enforces_pkce_redirects_and_single_use_codes():
    with DemoHTTPServer(auth=True) as server:
        base = server.origin
        reg = requests.post(
            f"{base}/register",
            json={"redirect_uris": ["http://127.0.0.1:1/cb"], "token_endpoint_auth_method": "none"},
            timeout=5,
        ).json()
        verifier = "v" * 50
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = {
            "response_type": "code",
            "client_id": reg["client_id"],
            "redirect_uri": "http://127.0.0.1:1/cb",
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "state": "xyz",
        }
        bad = requests.get(
            f"{base}/authorize?" + urlencode({**query, "redirect_uri": "http://evil/cb"}),
            allow_redirects=False,
            timeout=5,
        )
        assert bad.status_code == 400  # never redirected to an unregistered URI
        r = requests.get(f"{base}/authorize?" + urlencode(query), allow_redirects=False, timeout=5)
        assert r.status_code == 302
        got = parse_qs(urlsplit(r.headers["Location"]).query)
        assert got["state"] == ["xyz"] and got["iss"] == [base]
        form = {
            "grant_type": "authorization_code",
            "code": got["code"][0],
            "redirect_uri": "http://127.0.0.1:1/cb",
            "client_id": reg["client_id"],
            "code_verifier": "w" * 50,
        }
        assert (
            requests.post(f"{base}/token", data=form, timeout=5).json()["error"] == "invalid_grant"
        )
        # the failed attempt used the code up: the right verifier is too late now
        form["code_verifier"] = verifier
        assert requests.post(f"{base}/token", data=form, timeout=5).status_code == 400


def test_detach_prints_the_pid_and_kill_stops_it():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = subprocess.run(
        [sys.executable, "-m", "mcpsync.demo_server.http", "--port", str(port), "--detach"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    pid = int(p.stdout.strip())
    try:
        assert _listening(port)
        with mcpsync.Session.connect(f"http://127.0.0.1:{port}/mcp") as s:
            assert s.call_tool("echo", {"message": "detached"}).content[0].text == "detached"
    finally:
        os.kill(pid, signal.SIGTERM)
    proc = psutil.Process(pid) if psutil.pid_exists(pid) else None
    if proc is not None:
        try:
            proc.wait(10)
        except psutil.TimeoutExpired:
            assert proc.status() == psutil.STATUS_ZOMBIE
    assert not _listening(port)


def _code_flow(base: str, verifier: str, resource: str) -> tuple[dict, dict]:
    """Register a confidential client and run the code grant by hand: (client, tokens)."""
    reg = requests.post(
        f"{base}/register", json={"redirect_uris": ["http://127.0.0.1:1/cb"]}, timeout=5
    ).json()
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    query = {
        "response_type": "code",
        "client_id": reg["client_id"],
        "redirect_uri": "http://127.0.0.1:1/cb",
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "resource": resource,
    }
    r = requests.get(f"{base}/authorize?" + urlencode(query), allow_redirects=False, timeout=5)
    code = parse_qs(urlsplit(r.headers["Location"]).query)["code"][0]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": "http://127.0.0.1:1/cb",
        "code_verifier": verifier,
    }
    auth = (reg["client_id"], reg["client_secret"])
    tokens = requests.post(f"{base}/token", data=form, auth=auth, timeout=5).json()
    return reg, tokens


def test_refresh_tokens_rotate_and_client_secrets_are_checked():
    with DemoHTTPServer(auth=True) as server:
        base = server.origin
        reg, tokens = _code_flow(base, "x" * 60, server.url)
        assert server.auth_server.check(tokens["access_token"], server.url)
        auth = (reg["client_id"], reg["client_secret"])
        form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
        wrong = requests.post(f"{base}/token", data=form, auth=(reg["client_id"], "no"), timeout=5)
        assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
        fresh = requests.post(f"{base}/token", data=form, auth=auth, timeout=5).json()
        assert fresh["access_token"] != tokens["access_token"]
        assert fresh["refresh_token"] != tokens["refresh_token"]
        again = requests.post(f"{base}/token", data=form, auth=auth, timeout=5)
        assert again.status_code == 400  # the old refresh token was rotated away
        assert server.auth_server.check(fresh["access_token"], server.url)
        assert not server.auth_server.check(fresh["access_token"], "http://elsewhere/mcp")
        server.auth_server.revoke_all()
        r = requests.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Authorization": f"Bearer {fresh['access_token']}"},
            timeout=5,
        )
        assert r.status_code == 401 and 'error="invalid_token"' in r.headers["WWW-Authenticate"]
