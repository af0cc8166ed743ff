"""Enterprise-managed authorization (SEP-990): OAuth.enterprise_managed against a mocked MCP
server, its jwt-bearer authorization server and an enterprise IdP that issues ID-JAGs
(RFC 8693). The exchange's audience/resource, client authentication at both legs, typed
refusals naming the step, nothing retried, no secret in messages or logs."""

from __future__ import annotations

import logging

import pytest
from auth_peers.jwt_bearer_as import (
    ID_JAG,
    ID_TOKEN,
    JWT_BEARER,
    TOKEN_EXCHANGE,
    EnterpriseIdP,
    JwtBearerAS,
)
from auth_peers.mock_world import ISSUER, SERVER, World, post

from mcpsync.auth import OAuth
from mcpsync.errors import AuthError, ConfigError, InvalidGrant, TokenError

SECRET = "app-secret-0123456789"


def world(rsps, **kw):
    w = World(rsps, issuer=kw.pop("issuer", ISSUER), prm_scopes=["mcp:read"])
    return w, JwtBearerAS(w, clients={"app": SECRET}, **kw)


def test_id_token_exchanged_for_an_id_jag_then_jwt_bearer_with_client_auth(rsps, http):
    w, a = world(rsps)
    idp = EnterpriseIdP(rsps)
    auth = OAuth.enterprise_managed(
        "app",
        SECRET,
        id_token=idp.id_token,
        idp_token_endpoint=idp.token_endpoint,
        idp_client_id=idp.client_id,
    )
    assert post(http, auth).status_code == 200
    (x,) = idp.requests
    assert x["form"] == {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "subject_token": idp.id_token,
        "subject_token_type": ID_TOKEN,
        "audience": ISSUER,  # the MCP server's AS, from its protected resource metadata
        "resource": SERVER,
        "scope": "mcp:read",
        "client_id": idp.client_id,
    }
    (t,) = a.requests
    assert t["form"]["grant_type"] == JWT_BEARER and t["form"]["resource"] == SERVER
    assert t["headers"]["Authorization"].startswith("Basic ")  # client_secret_basic
    assert "client_secret" not in t["form"]
    assert w.as_.registrations == [] and w.authorization_count() == 0
    assert "enterprise-managed" in repr(auth) and idp.id_token not in repr(auth)


def test_audience_follows_the_server_metadata_and_the_idp_is_discovered(rsps, http, tmp_path):
    other = "https://login.example.org/tenant"
    w, a = world(rsps, issuer=other)
    idp = EnterpriseIdP(rsps, "https://idp.example.com")
    f = tmp_path / "id_token"
    f.write_text(idp.id_token)
    auth = OAuth.enterprise_managed(
        "app", SECRET, id_token_file=f, idp_issuer=idp.issuer, idp_client_id="idp-client"
    )
    assert post(http, auth).status_code == 200
    assert idp.requests[0]["form"]["audience"] == other
    assert len(a.requests) == 1


def test_idp_client_secret_goes_in_basic_auth(rsps, http):
    world(rsps)
    idp = EnterpriseIdP(rsps)
    auth = OAuth.enterprise_managed(
        "app", SECRET, id_token=lambda: idp.id_token, idp_token_endpoint=idp.token_endpoint,
        idp_client_id="idp-client", idp_client_secret="idp-secret-xyz",
    )  # fmt: skip
    assert post(http, auth).status_code == 200
    x = idp.requests[0]
    assert x["headers"]["Authorization"].startswith("Basic ") and "client_id" not in x["form"]


def test_idp_refusal_is_typed_and_the_as_is_never_asked(rsps, http, caplog):
    w, a = world(rsps)
    idp = EnterpriseIdP(rsps)
    bad = idp.id_token[:-4] + "AAAA"
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    auth = OAuth.enterprise_managed(
        "app", SECRET, id_token=bad, idp_token_endpoint=idp.token_endpoint
    )
    with pytest.raises(InvalidGrant) as info:
        post(http, auth)
    exc = info.value
    assert exc.step == "token-exchange" and exc.error == "invalid_grant"
    assert "ID-JAG" in str(exc) and "bad ID token" in str(exc)
    assert len(idp.requests) == 1 and a.requests == []
    for secret in (bad, SECRET):
        assert secret not in str(exc) and secret not in caplog.text


@pytest.mark.parametrize(
    "answer",
    [
        (200, {"Content-Type": "text/html"}, "<html><body>Sign in</body></html>"),
        (502, {}, "bad gateway"),
        (200, {"Content-Type": "application/json"}, '{"token_type": "N_A"}'),
        (
            200,
            {"Content-Type": "application/json"},
            '{"access_token": "x", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}',
        ),
    ],
    ids=["html", "502", "no-token", "not-an-id-jag"],
)
def test_idp_answers_that_are_no_id_jag(rsps, http, answer):
    w, a = world(rsps)
    idp = EnterpriseIdP(rsps, answer=answer)
    auth = OAuth.enterprise_managed(
        "app", SECRET, id_token=idp.id_token, idp_token_endpoint=idp.token_endpoint
    )
    with pytest.raises(AuthError, match="token exchange") as info:
        post(http, auth)
    assert not isinstance(info.value, TokenError) and a.requests == []


def test_as_refusing_the_id_jag_is_typed_and_not_retried(rsps, http, caplog):
    w, a = world(rsps)
    idp = EnterpriseIdP(rsps)
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    auth = OAuth.enterprise_managed(
        "app", SECRET, id_token=idp.id_token, idp_token_endpoint=idp.token_endpoint,
        issuer=ISSUER,
    )  # fmt: skip
    a.issuer = "https://somewhere-else.example"  # the AS now expects another audience
    with pytest.raises(InvalidGrant, match="audience") as info:
        post(http, auth)
    assert info.value.step == "jwt-bearer"
    assert len(idp.requests) == 1 and len(a.requests) == 1
    assert {r["form"]["grant_type"] for r in a.requests} == {JWT_BEARER}
    assert idp.id_token not in caplog.text and SECRET not in caplog.text


def test_configuration_errors():
    with pytest.raises(ConfigError):
        OAuth.enterprise_managed("app", SECRET, id_token="x")  # no IdP
    with pytest.raises(ConfigError):
        OAuth.enterprise_managed("app", SECRET, idp_issuer="https://idp.example.com")  # no token
