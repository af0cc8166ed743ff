"""An entry's ``auth`` / ``oauth`` object asks for any grant mcpsync has: the device flow
(``"redirect": "device"``), workload identity (``assertion_file`` / ``assertion_env``),
enterprise-managed (``id_token_*``, ``idp_*``), client credentials; ``dpop`` and
``dpop_algorithm``; secrets through ``${input:...}`` / ``${env:...}``. Each entry's OAuth
object runs its grant against a mocked server (``responses``) or the demo server; each
mistake is a ConfigEntryError naming the key, and no secret reaches an error or a repr."""

from __future__ import annotations

import logging
import os

import pytest
from auth_peers.jwt_bearer_as import JWT_BEARER, EnterpriseIdP, JwtBearerAS, make_jwt
from auth_peers.mock_world import ISSUER, SERVER, World, post
from test_auth_device import DeviceAS

import mcpsync
from mcpsync.auth import OAuth
from mcpsync.auth.device import DEVICE_CODE_GRANT, DeviceFlow
from mcpsync.auth.dpop import SUPPORTED_ALGS
from mcpsync.config import ConfigEntryError, load_config, oauth_for_entry, parse_entry
from mcpsync.demo_server.http import DemoHTTPServer

SECRET = "app-secret-0123456789"
IDP_SECRET = "idp-secret-9876543210"


def entry(auth: dict, **kw):
    return parse_entry("srv", {"url": SERVER, "auth": auth}, **kw)


def test_device_redirect_from_the_config(rsps, http, monkeypatch):
    w = World(rsps)
    d = DeviceAS(w, ["authorization_pending", "ok"])
    monkeypatch.setattr(DeviceFlow, "_wait_event", lambda self, s: False)
    monkeypatch.setattr("mcpsync.auth.device.show_device_code", lambda c: None)
    cfg = load_config({"servers": {"tv": {"type": "http", "url": SERVER, "oauth": {
        "clientId": "tv-app", "redirect": "device", "scopes": "mcp:read"}}}})  # fmt: skip
    assert cfg.errors == []
    settings = cfg["tv"].auth
    assert settings is not None and settings.redirect == "device" and settings.grant is None
    w.preregister("tv-app", None)
    auth = cfg["tv"].connect_kwargs(auth_factory=oauth_for_entry)["auth"]
    assert isinstance(auth, OAuth)
    assert post(http, auth).status_code == 200
    assert len(d.device_requests) == 1 and d.polls[-1]["grant_type"] == DEVICE_CODE_GRANT
    assert d.device_requests[0]["form"]["client_id"] == "tv-app"
    assert w.authorization_count() == 0 and w.as_.registrations == []


def test_workload_identity_from_a_file_and_from_the_environment(rsps, http, tmp_path, monkeypatch):
    w = World(rsps)
    a = JwtBearerAS(w)
    token = tmp_path / "token"
    token.write_text(make_jwt(ISSUER))
    monkeypatch.setenv("HOME", str(tmp_path))
    e = entry({"grant": "workload_identity", "assertion_file": "~/token", "scopes": ["mcp:read"]})
    assert e.auth is not None and e.auth.assertion_file == str(token)  # ~ expanded
    auth = oauth_for_entry(e, redirect="device", client_name="ignored")  # interactive: dropped
    assert post(http, auth).status_code == 200
    assert a.requests[-1]["form"]["grant_type"] == JWT_BEARER
    assert a.requests[-1]["form"]["assertion"] == token.read_text()
    assert "client_id" not in a.requests[-1]["form"]
    # the grant is implied by its keys; the variable is read when the token is needed
    e2 = entry({"assertionEnv": "WIF_TOKEN", "clientId": "wl-1"})
    assert e2.auth is not None and e2.auth.grant == "workload_identity"
    monkeypatch.setenv("WIF_TOKEN", make_jwt(ISSUER))
    assert post(http, oauth_for_entry(e2)).status_code == 200
    assert a.requests[-1]["form"]["assertion"] == os.environ["WIF_TOKEN"]
    assert a.requests[-1]["form"]["client_id"] == "wl-1"
    assert w.authorization_count() == 0 and w.as_.registrations == []


def test_enterprise_managed_with_secrets_from_inputs_and_env(rsps, http, tmp_path, caplog):
    w = World(rsps, prm_scopes=["mcp:read"])
    a = JwtBearerAS(w, clients={"app": SECRET})
    idp = EnterpriseIdP(rsps)
    id_token = tmp_path / "id_token"
    id_token.write_text(idp.id_token)
    data = {
        "inputs": [{"id": "app-secret", "type": "promptString", "password": True}],
        "servers": {
            "corp": {
                "url": SERVER,
                "auth": {
                    "client_id": "app",
                    "client_secret": "${input:app-secret}",
                    "id_token_file": str(id_token),
                    "idp_token_endpoint": idp.token_endpoint,
                    "idp_client_id": idp.client_id,
                    "dpop": False,
                },
            }
        },
    }
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    cfg = load_config(data, inputs={"app-secret": SECRET})
    assert cfg.errors == []
    settings = cfg["corp"].auth
    assert settings is not None and settings.grant == "enterprise_managed"
    assert settings.client_secret == SECRET and settings.dpop is False
    assert SECRET not in repr(settings) and SECRET not in repr(cfg["corp"])
    auth = oauth_for_entry(cfg["corp"])
    assert post(http, auth).status_code == 200
    (x,) = idp.requests
    assert x["form"]["subject_token"] == idp.id_token and x["form"]["audience"] == ISSUER
    (t,) = a.requests
    assert t["form"]["grant_type"] == JWT_BEARER and t["headers"]["Authorization"].startswith(
        "Basic "
    )
    assert SECRET not in caplog.text and idp.id_token not in caplog.text


def test_client_credentials_from_env_against_the_demo_server():
    with DemoHTTPServer(auth=True, clients={"svc": SECRET}) as server:
        cfg = load_config(
            {"svc": {"url": server.url, "auth": {"grant": "client_credentials",
                     "client_id": "svc", "client_secret": "${env:SVC_SECRET}"}}},
            environ={"SVC_SECRET": SECRET},
        )  # fmt: skip
        host_kwargs = cfg["svc"].connect_kwargs(auth_factory=oauth_for_entry)
        with mcpsync.Session.connect(**host_kwargs) as s:
            assert s.call_tool("echo", {"message": "cc"}).content[0].text == "cc"
        assert server.auth_server is not None
        assert server.auth_server.stats()["tokens"]["client_credentials"] == 1


def test_dpop_settings_reach_oauth(rsps, http):
    """``"dpop": true`` asks for a DPoP-bound token (a proof on the token request) signed
    with ``dpop_algorithm``; ``"dpop": false`` sends none."""
    jwt = pytest.importorskip("jwt")
    pytest.importorskip("cryptography")
    w = World(rsps)
    w.as_.metadata["dpop_signing_alg_values_supported"] = ["ES256", "ES384"]
    DeviceAS(w, ["ok", "ok"])
    for dpop, alg in ((True, "ES384"), (False, None)):
        e = entry({"redirect": "device", "dpop": dpop, "dpop_algorithm": "ES384"})
        assert e.auth is not None and (e.auth.dpop, e.auth.dpop_algorithm) == (dpop, "ES384")
        shown: list[object] = []
        flow = DeviceFlow(display=shown.append, wait=lambda s: False)
        before = len(rsps.calls)
        assert post(http, oauth_for_entry(e, redirect=flow)).status_code == 200
        assert len(shown) == 1
        (tok_req,) = [c.request for c in rsps.calls[before:] if c.request.url == f"{ISSUER}/token"]
        proof = tok_req.headers.get("DPoP")
        assert (jwt.get_unverified_header(proof)["alg"] if proof else None) == alg


@pytest.mark.parametrize(
    ("auth", "field", "words"),
    [
        ({"client_id": "c", "clientSecrt": "x"}, "auth.clientSecrt", "unknown key"),
        ({"grant": "password"}, "auth.grant", 'expected one of "authorization_code"'),
        ({"redirect": "popup"}, "auth.redirect", '"device"'),
        ({"dpop": "yes"}, "auth.dpop", 'expected true, false or "auto"'),
        ({"dpop_algorithm": "RS256"}, "auth.dpop_algorithm", '"ES256"'),
        ({"grant": "workload_identity"}, "auth.assertion_file", "missing"),
        (
            {"assertion_file": "/t", "assertion_env": "T"},
            "auth.assertion_env",
            "both given",
        ),
        (
            {"assertion_env": "T", "client_secret": "s3"},
            "auth.client_secret",
            "not a client secret",
        ),
        (
            {"assertion_env": "T", "redirect": "device"},
            "auth.redirect",
            '"authorization_code" only',
        ),
        (
            {"grant": "client_credentials", "id_token_env": "T"},
            "auth.id_token_env",
            '"enterprise_managed" only',
        ),
        ({"assertion_env": "T", "id_token_env": "U"}, "auth.assertion_env", "only"),
        ({"grant": "client_credentials", "client_id": "c"}, "auth.client_secret", "missing"),
        ({"id_token_env": "T", "idp_issuer": "https://idp"}, "auth.client_id", "missing"),
        ({"client_id": "c", "id_token_env": "T"}, "auth.idp_token_endpoint", "missing"),
        ({"client_id": "a", "clientId": "b"}, "auth.clientId", "given twice"),
        ({"callbackPort": "80"}, "auth.callbackPort", "port number"),
        ({"client_secret": "s3"}, "auth.client_secret", "without a client_id"),
    ],
)
def test_mistakes_name_the_key(auth, field, words):
    with pytest.raises(ConfigEntryError) as info:
        entry(auth)
    assert info.value.field == field and words in info.value.problem, str(info.value)
    assert "s3" not in str(info.value)
    # in a file, only that entry fails
    cfg = load_config({"bad": {"url": SERVER, "auth": auth}, "ok": {"url": SERVER}})
    assert "ok" in cfg and [e.entry for e in cfg.errors] == ["bad"]


def test_secret_values_never_in_errors_or_repr():
    e = entry({"grant": "enterprise_managed", "client_id": "app", "client_secret": SECRET,
               "id_token_env": "IDT", "idp_issuer": "https://idp.example.com",
               "idp_client_id": "idp-app", "idp_client_secret": IDP_SECRET})  # fmt: skip
    assert e.auth is not None and e.auth.idp_client_secret == IDP_SECRET
    text = repr(e) + repr(e.auth)
    assert SECRET not in text and IDP_SECRET not in text
    assert "idp_client_secret=***" in text and "grant='enterprise_managed'" in text
    with pytest.raises(ConfigEntryError) as info:
        entry({"grant": "nope", "client_secret": SECRET, "client_id": "c"})
    assert SECRET not in str(info.value)


def test_other_hosts_keys(rsps):
    """Gemini CLI's oauth object (enabled, its own endpoints) and Claude Code's callbackPort."""
    gemini = parse_entry("g", {"httpUrl": SERVER, "oauth": {
        "enabled": True, "clientId": "g-app", "clientSecret": "g-s", "scopes": ["a"],
        "authorizationUrl": "https://idp/authorize", "tokenUrl": "https://idp/token"}})  # fmt: skip
    assert gemini.auth is not None and gemini.auth.client_id == "g-app"
    assert gemini.auth.extra == {
        "authorizationUrl": "https://idp/authorize",
        "tokenUrl": "https://idp/token",
    }
    off = parse_entry("g", {"httpUrl": SERVER, "oauth": {"enabled": False, "clientId": "x"}})
    assert off.auth is None
    claude = parse_entry("c", {"type": "http", "url": SERVER, "oauth": {
        "clientId": "c-app", "callbackPort": 8765}})  # fmt: skip
    assert claude.auth is not None
    assert claude.auth.redirect_uri == "http://localhost:8765/callback"
    empty = entry({"client_id": "c", "client_secret": ""})  # an unfilled placeholder
    assert empty.auth is not None and empty.auth.client_secret is None


def test_config_dpop_algorithms_are_what_dpop_signs():
    for alg in SUPPORTED_ALGS:
        assert entry({"dpop_algorithm": alg}).auth.dpop_algorithm == alg  # type: ignore[union-attr]
