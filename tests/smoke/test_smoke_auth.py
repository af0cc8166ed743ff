"""mcpsync smoke --stored-auth-only against a real authorization server (oidc-provider) and
an OAuth-protected MCP server: stored tokens are used; without them the entry fails as
``auth`` at once, never waiting for a person."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcpsync.transports.http.streamable")

from auth_peers.protected_mcp import ProtectedMCPServer  # noqa: E402
from test_auth_e2e_oidc import OIDCProvider  # noqa: E402  (skips itself without node)

import mcpsync  # noqa: E402
from mcpsync.auth import FileTokenStore, OAuth  # noqa: E402
from mcpsync.smoke import EXIT_CODES  # noqa: E402

pytestmark = pytest.mark.real


def smoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", "smoke", *args, "--json", "-q"],
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_stored_auth_only(tmp_path: Path):
    tokens = tmp_path / "tokens.json"
    with OIDCProvider() as provider, ProtectedMCPServer(provider.issuer) as rs:
        cfg = tmp_path / "mcp.json"
        cfg.write_text(json.dumps({"servers": {"web": {"type": "http", "url": rs.url}}}))
        # nothing stored: fails as auth, quickly, saying why (no browser, no prompt)
        t0 = time.monotonic()
        p = smoke(str(cfg), "--stored-auth-only", "--token-store", str(tokens))
        elapsed = time.monotonic() - t0
        assert p.returncode == EXIT_CODES["auth"], p.stdout + p.stderr
        web = json.loads(p.stdout)["servers"][0]
        assert web["failure"] == "auth" and "--stored-auth-only" in web["error"]
        assert elapsed < 30
        # authorize once (headless: the test provider approves by itself), tokens stored
        with mcpsync.Session.connect(
            rs.url, auth=OAuth(redirect="headless", store=FileTokenStore(tokens)), timeout=30
        ) as s:
            assert [t.name for t in s.list_tools()] == ["whoami"]
        p = smoke(str(cfg), "--stored-auth-only", "--token-store", str(tokens), "--call", "whoami")
        assert p.returncode == 0, p.stdout + p.stderr
        web = json.loads(p.stdout)["servers"][0]
        assert web["ok"] and web["call"]["ok"] and web["tools"] == ["whoami"]
