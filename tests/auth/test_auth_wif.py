"""Workload identity federation (SEP-1933): OAuth.workload_identity against a mocked MCP
server + a jwt-bearer authorization server that verifies the assertion (signature, aud,
exp). Assertion sources (callable, file re-read, env), no registration, typed refusals
that are never retried, no assertion in messages or logs."""

from __future__ import annotations

import logging
import os

import jwt
import pytest
import responses
from auth_peers.jwt_bearer_as import JWT_BEARER, JwtBearerAS, make_jwt
from auth_peers.mock_world import ISSUER, SERVER, World, post

from mcpsync.auth import OAuth
from mcpsync.auth.grants import AssertionProvider, assertion_source
from mcpsync.errors import (
    AuthError,
    ConfigError,
    InvalidGrant,
    InvalidScope,
    TokenError,
    UnauthorizedClient,
)


def test_file_assertion_is_re_read_and_sent_as_jwt_bearer(rsps, http, tmp_path):
    w = World(rsps, prm_scopes=["mcp:read"])
    a = JwtBearerAS(w)
    token_file = tmp_path / "token"
    first = make_jwt(ISSUER)
    token_file.write_text(first + "\n")  # kubelet files end with a newline sometimes
    auth = OAuth.workload_identity(assertion_file=token_file)
    assert post(http, auth).status_code == 200
    (req,) = a.requests
    assert req["form"] == {
        "grant_type": JWT_BEARER,
        "assertion": first,
        "scope": "mcp:read",
        "resource": SERVER,
    }  # no client_id, no client authentication, no registration
    assert "Authorization" not in req["headers"]
    assert w.as_.registrations == [] and w.authorization_count() == 0
    # the platform rotates the file; the next token request reads the new one
    second = make_jwt(ISSUER)
    token_file.write_text(second)
    auth.logout()
    assert post(http, auth, rid=2).status_code == 200
    assert [r["form"]["assertion"] for r in a.requests] == [first, second]
    assert "jwt-bearer" in repr(auth) and first not in repr(auth)


def test_callable_and_env_sources_and_client_id(rsps, http, monkeypatch):
    w = World(rsps)
    a = JwtBearerAS(w)
    calls = []

    def fetch() -> str:
        calls.append(1)
        return make_jwt(ISSUER)

    assert post(http, OAuth.workload_identity(fetch, client_id="wl-1")).status_code == 200
    assert calls == [1] and a.requests[0]["form"]["client_id"] == "wl-1"
    monkeypatch.setenv("WIF_TOKEN", make_jwt(ISSUER))
    assert post(http, OAuth.workload_identity(assertion_env="WIF_TOKEN")).status_code == 200
    assert a.requests[1]["form"]["assertion"] == os.environ["WIF_TOKEN"]
    assert "client_id" not in a.requests[1]["form"]


@pytest.mark.parametrize(
    ("assertion", "scopes", "kind", "error", "words"),
    [
        (lambda: make_jwt("https://wrong.example"), None, InvalidGrant, "invalid_grant", "audience"),
        (lambda: make_jwt(ISSUER, exp_in=-10), None, InvalidGrant, "invalid_grant", "expired"),
        (lambda: make_jwt(ISSUER, sub="rogue"), None, UnauthorizedClient, "unauthorized_client", ""),
        (lambda: make_jwt(ISSUER), ["admin"], InvalidScope, "invalid_scope", "scope"),
    ],
    ids=["wrong-audience", "expired-at-the-AS", "unauthorized-client", "invalid-scope"],
)  # fmt: skip
def test_refusals_are_typed_name_the_step_and_are_never_retried(
    rsps, http, caplog, assertion, scopes, kind, error, words
):
    w = World(rsps)
    a = JwtBearerAS(w)
    jwt_value = assertion()
    auth = OAuth.workload_identity(jwt_value, scopes=scopes)
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    with pytest.raises(kind) as info:
        post(http, auth)
    exc = info.value
    assert isinstance(exc, TokenError) and isinstance(exc, AuthError)
    assert exc.error == error and exc.step == "jwt-bearer" and exc.status == 400
    assert "jwt-bearer" in str(exc) and words in str(exc)
    assert len(a.requests) == 1  # not retried, and no other grant tried
    assert {r["form"]["grant_type"] for r in a.requests} == {JWT_BEARER}
    assert w.authorization_count() == 0 and w.as_.registrations == []
    assert jwt_value not in str(exc) and jwt_value not in repr(exc)
    assert jwt_value not in caplog.text
    assert not auth.authorized


def test_locally_expired_assertion_is_not_sent(rsps, http, caplog):
    w = World(rsps)
    a = JwtBearerAS(w)
    stale = make_jwt(ISSUER, exp_in=-3600)
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    with pytest.raises(InvalidGrant, match="expired") as info:
        post(http, OAuth.workload_identity(stale))
    assert info.value.step == "assertion" and a.requests == []
    assert stale not in str(info.value) and stale not in caplog.text


def test_renewal_before_expiry_re_reads_and_a_refused_renewal_is_raised(rsps, http, tmp_path):
    w = World(rsps)
    a = JwtBearerAS(w, expires_in=30)  # inside the 60 s refresh window
    f = tmp_path / "token"
    f.write_text(make_jwt(ISSUER))
    auth = OAuth.workload_identity(assertion_file=f)
    assert post(http, auth).status_code == 200
    calls = len(w.mcp_calls)
    f.write_text(make_jwt(ISSUER))
    assert post(http, auth, rid=2).status_code == 200
    assert len(w.mcp_calls) == calls + 1  # renewed before sending: no 401 round trip
    assert len(a.requests) == 2 and a.requests[1]["form"]["assertion"] == f.read_text()
    # the platform hands out a JWT for the wrong audience: the renewal is refused, raised
    f.write_text(make_jwt("https://wrong.example"))
    with pytest.raises(InvalidGrant):
        post(http, auth, rid=3)
    assert len(a.requests) == 3 and not auth.authorized


def test_assertion_sources_are_checked():
    with pytest.raises(ConfigError):
        OAuth.workload_identity()
    with pytest.raises(ConfigError):
        OAuth.workload_identity("x.y.z", assertion_env="X")
    missing = AssertionProvider.from_file("/nonexistent/mcpsync/token")
    with pytest.raises(AuthError, match="/nonexistent/mcpsync/token"):
        missing()
    with pytest.raises(AuthError, match="MCPSYNC_UNSET_VAR"):
        AssertionProvider.from_env("MCPSYNC_UNSET_VAR")()
    with pytest.raises(AuthError, match="empty"):
        assertion_source(lambda: "  ")()

    def broken() -> str:
        raise RuntimeError("metadata service down")

    with pytest.raises(AuthError, match="provider .callable broken. failed: RuntimeError"):
        assertion_source(broken)()
    secret = make_jwt(ISSUER)
    p = assertion_source(secret)
    assert p() == secret and secret not in repr(p)


def test_missing_assertion_file_fails_the_request_before_any_token_request(rsps, http, tmp_path):
    w = World(rsps)
    a = JwtBearerAS(w)
    with pytest.raises(AuthError, match="cannot read the workload assertion file"):
        post(http, OAuth.workload_identity(assertion_file=tmp_path / "absent"))
    assert a.requests == []


def test_token_endpoint_answering_html_is_an_auth_error_naming_the_step(rsps, http, caplog):
    w = World(rsps)
    JwtBearerAS(w)
    rsps.replace(
        responses.POST, f"{ISSUER}/token", status=200, body="<html>Sign in</html>",
        content_type="text/html",
    )  # fmt: skip
    value = make_jwt(ISSUER)
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    with pytest.raises(AuthError, match=r"jwt-bearer.*no usable token.*text/html") as info:
        post(http, OAuth.workload_identity(value))
    assert not isinstance(info.value, TokenError)  # not a refusal: the AS said nothing
    assert value not in str(info.value) and value not in caplog.text


def test_dpop_proof_on_the_jwt_bearer_request(rsps, http):
    pytest.importorskip("cryptography")
    w = World(rsps)
    w.as_.metadata["dpop_signing_alg_values_supported"] = ["ES256"]
    a = JwtBearerAS(w)
    auth = OAuth.workload_identity(make_jwt(ISSUER), dpop=True)
    assert post(http, auth).status_code == 200  # the AS chose Bearer: accepted (not required)
    (req,) = a.requests
    proof = req["headers"]["DPoP"]
    header, claims = (
        jwt.get_unverified_header(proof),
        jwt.decode(proof, options={"verify_signature": False}),
    )
    assert header["typ"] == "dpop+jwt" and "d" not in header["jwk"]
    assert claims["htm"] == "POST" and claims["htu"] == f"{ISSUER}/token" and claims["jti"]


def _suite_run(key: str, tmp_path) -> tuple[dict, list[dict]]:
    """Run the official suite's auth/wif-jwt-bearer with tests/auth_peers/wif_client.py KEY."""
    import glob
    import json
    import subprocess
    import sys
    from pathlib import Path

    from conformance.run import NODE_BIN

    if not (NODE_BIN / "conformance").exists():
        pytest.skip("the conformance suite is not installed in tests/node")
    client = Path(__file__).resolve().parents[1] / "auth_peers" / "wif_client.py"
    report = tmp_path / f"{key}.json"
    env = dict(os.environ, PATH=f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    subprocess.run(
        [str(NODE_BIN / "conformance"), "client", "--scenario", "auth/wif-jwt-bearer",
         "--command", f"{sys.executable} {client} {key} {report}", "-o", str(tmp_path / "out"),
         "--timeout", "60000"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    checks = []
    for p in glob.glob(str(tmp_path / "out" / "**" / "checks.json"), recursive=True):
        checks += [c for c in json.loads(Path(p).read_text()) if c["status"] != "INFO"]
    return json.loads(report.read_text()), checks


@pytest.mark.real
def test_official_suite_wrong_audience_is_refused_once_and_typed(tmp_path):
    out, checks = _suite_run("wrong_audience_jwt", tmp_path)
    assert out["token_error"] == "InvalidGrant" and out["step"] == "jwt-bearer"
    assert out["error"] == "invalid_grant" and not out["assertion_shown"]
    ids = [c["id"] for c in checks]
    assert ids.count("token-request") == 1  # one jwt-bearer request: no retry
    assert "wif-assertion-audience" in ids  # the suite's AS saw (and refused) the audience
    assert "wif-no-retry" not in ids and "wif-grant-fallback" not in ids


@pytest.mark.real
def test_official_suite_expired_assertion_is_never_sent(tmp_path):
    out, checks = _suite_run("expired_jwt", tmp_path)
    assert out["token_error"] == "InvalidGrant" and out["step"] == "assertion"
    assert not out["assertion_shown"]
    assert "token-request" not in [c["id"] for c in checks]
