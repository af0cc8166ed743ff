"""OAuth (the requests auth object) against a mocked MCP server + AS: every branch of the
flow and each security rule in its own test."""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
from urllib.parse import parse_qsl, urlsplit

import jwt
import pytest
import requests
import responses
from auth_peers.mock_world import ISSUER, SERVER, World, post, s256
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mcpsync.auth import DEFAULT_REDIRECT_URI, FileTokenStore, MemoryTokenStore, OAuth
from mcpsync.errors import AuthError, ConfigError


def rpc(method: str, rid: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {}}


# -- the basic authorization-code flow --------------------------------------------------


def test_dcr_flow_pkce_state_resource_and_resend(rsps, http):
    w = World(rsps)
    auth = OAuth(client_name="t", redirect=w.approve)
    r = post(http, auth)
    assert r.status_code == 200 and r.json()["result"] == {"ok": "tools/list"}
    # registration: native app, our redirect URI, refresh grant because the AS offers it
    (reg,) = w.as_.registrations
    assert reg["application_type"] == "native"
    assert reg["redirect_uris"] == [DEFAULT_REDIRECT_URI]
    assert reg["grant_types"] == ["authorization_code", "refresh_token"]
    assert reg["token_endpoint_auth_method"] == "none" and reg["client_name"] == "t"
    # authorization request: code + PKCE S256 + state + resource
    (q,) = w.as_.authorizations
    assert q["response_type"] == "code" and q["code_challenge_method"] == "S256"
    assert len(q["state"]) >= 32 and q["resource"] == SERVER
    # token request: verifier matches, same resource and redirect_uri
    (t,) = w.as_.token_requests
    assert t["form"]["grant_type"] == "authorization_code"
    assert s256(t["form"]["code_verifier"]) == q["code_challenge"]
    assert t["form"]["resource"] == SERVER and t["form"]["redirect_uri"] == DEFAULT_REDIRECT_URI
    # the MCP request was re-sent once, same body, with the token
    assert [c["authorization"] is not None for c in w.mcp_calls] == [False, True]
    assert w.mcp_calls[0]["body"] == w.mcp_calls[1]["body"]
    assert r.history and r.history[0].status_code == 401
    assert auth.authorized and auth.issuer == ISSUER


def test_resend_keeps_headers_and_cookies(rsps, http):
    w = World(rsps)
    seen = []
    original = w._mcp

    def mcp(req):
        seen.append(
            (
                req.headers.get("MCP-Protocol-Version"),
                req.headers.get("Mcp-Session-Id"),
                req.headers.get("Cookie"),
            )
        )
        status, headers, body = original(req)
        if status == 401:
            headers = {**headers, "Set-Cookie": "lb=node7; Path=/"}
        return status, headers, body

    rsps.remove(responses.POST, SERVER)  # wrap the World's MCP endpoint
    rsps.add_callback(responses.POST, SERVER, callback=mcp)
    hdrs = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Session-Id": "sid-1"}
    r = http.post(
        SERVER, json=rpc("tools/list"), headers=hdrs, auth=OAuth(redirect=w.approve), timeout=5
    )
    assert r.status_code == 200
    assert seen == [("2026-07-28", "sid-1", None), ("2026-07-28", "sid-1", "lb=node7")]


def test_next_requests_reuse_the_token(rsps, http):
    w = World(rsps)
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    for i in range(3):
        assert post(http, auth, rid=i + 2).status_code == 200
    assert w.authorization_count() == 1
    assert all(c["authorization"] for c in w.mcp_calls[1:])


def test_works_as_session_auth_and_with_a_file_like_body(rsps):
    w = World(rsps)
    with requests.Session() as s:
        s.auth = OAuth(redirect=w.approve)
        import io

        body = io.BytesIO(json.dumps(rpc("tools/list")).encode())
        r = s.post(SERVER, data=body, headers={"Content-Type": "application/json"}, timeout=5)
    assert r.status_code == 200
    assert w.mcp_calls[0]["body"] == w.mcp_calls[1]["body"] == rpc("tools/list")


# -- scope selection -------------------------------------------------------------------


def test_scope_from_challenge(rsps, http):
    w = World(rsps, challenge_scope="mcp:basic", prm_scopes=["mcp:a", "mcp:b"])
    post(http, OAuth(redirect=w.approve))
    assert w.as_.authorizations[0]["scope"] == "mcp:basic"  # challenge wins over scopes_supported


def test_scope_from_prm_scopes_supported_without_offline_access(rsps, http):
    w = World(
        rsps, prm_scopes=["mcp:a", "mcp:b"], as_metadata={"scopes_supported": ["mcp:a", "mcp:b"]}
    )
    post(http, OAuth(redirect=w.approve))
    assert w.as_.authorizations[0]["scope"] == "mcp:a mcp:b"


def test_scope_omitted_when_nothing_defines_it(rsps, http):
    w = World(rsps)
    post(http, OAuth(redirect=w.approve))
    assert "scope" not in w.as_.authorizations[0]


def test_configured_scopes_when_challenge_has_none(rsps, http):
    w = World(rsps, prm_scopes=["mcp:a"])
    post(http, OAuth(redirect=w.approve, scopes="mine other", offline_access=False))
    assert w.as_.authorizations[0]["scope"] == "mine other"


def test_offline_access_requested_only_when_offered(rsps, http):
    w = World(
        rsps,
        challenge_scope="mcp:basic",
        as_metadata={"scopes_supported": ["mcp:basic", "offline_access"]},
    )
    post(http, OAuth(redirect=w.approve))
    assert w.as_.authorizations[0]["scope"] == "mcp:basic offline_access"
    assert "refresh_token" in w.as_.registrations[0]["grant_types"]


def test_offline_access_never_requested_when_not_offered(rsps, http):
    # even when the server itself (wrongly) challenges with it
    w = World(
        rsps,
        challenge_scope="mcp:basic offline_access",
        as_metadata={
            "scopes_supported": ["mcp:basic"],
            "grant_types_supported": ["authorization_code"],
        },
    )
    post(http, OAuth(redirect=w.approve))
    assert w.as_.authorizations[0]["scope"] == "mcp:basic"
    assert w.as_.registrations[0]["grant_types"] == ["authorization_code"]


# -- step-up ----------------------------------------------------------------------------


def test_step_up_on_403_keeps_the_union(rsps, http):
    w = World(
        rsps,
        challenge_scope="mcp:basic",
        method_scopes={"tools/list": ["mcp:basic"], "tools/call": ["mcp:write"]},
        as_metadata={"scopes_supported": None},
    )
    auth = OAuth(redirect=w.approve)
    assert post(http, auth, "tools/list").status_code == 200
    r = post(http, auth, "tools/call", rid=2)
    assert r.status_code == 200
    assert [a.get("scope") for a in w.as_.authorizations] == ["mcp:basic", "mcp:basic mcp:write"]
    assert post(http, auth, "tools/list", rid=3).status_code == 200  # nothing lost
    assert w.authorization_count() == 2


def test_step_up_gives_up_after_three_authorizations(rsps, http):
    w = World(rsps, challenge_scope="mcp:admin", method_scopes={"tools/list": ["mcp:admin"]})
    w.never_grant = {"mcp:admin"}
    auth = OAuth(redirect=w.approve)
    with pytest.raises(AuthError, match="after 3 authorization attempts"):
        post(http, auth)
    assert w.authorization_count() == 3
    # the same hopeless challenge does not start another round for the next request
    with pytest.raises(AuthError, match="not trying again"):
        post(http, auth, rid=2)
    assert w.authorization_count() == 3


def test_max_auth_attempts_is_configurable(rsps, http):
    w = World(rsps, challenge_scope="x", method_scopes={"tools/list": ["x"]})
    w.never_grant = {"x"}
    with pytest.raises(AuthError):
        post(http, OAuth(redirect=w.approve, max_auth_attempts=1))
    assert w.authorization_count() == 1


def test_403_without_insufficient_scope_is_returned_untouched(rsps, http):
    rsps.add(
        responses.POST,
        "https://mcp.example.com/forbidden",
        status=403,
        headers={"WWW-Authenticate": 'Bearer error="other"'},
    )
    auth = OAuth(redirect=lambda u: pytest.fail("no authorization expected"), server_url=SERVER)
    assert http.post("https://mcp.example.com/forbidden", json={}, auth=auth).status_code == 403


def test_non_bearer_401_is_returned_untouched(rsps, http):
    rsps.add(responses.POST, SERVER, status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})
    auth = OAuth(redirect=lambda u: pytest.fail("no authorization expected"))
    assert post(http, auth).status_code == 401
    assert len(rsps.calls) == 1  # no discovery either


def test_401_without_any_challenge_still_starts_discovery(rsps, http):
    w = World(rsps)
    rsps.replace(responses.POST, SERVER, status=401)
    with pytest.raises(AuthError):
        post(http, OAuth(redirect=w.approve))
    assert w.prm_requests  # it looked for metadata at the well-known URL


def test_401_again_after_a_fresh_authorization_is_an_error_not_a_loop(rsps, http):
    w = World(rsps)
    w.valid_tokens = _AlwaysEmpty()  # the server accepts nothing
    with pytest.raises(AuthError, match="rejected the token it had just authorized"):
        post(http, OAuth(redirect=w.approve))
    assert w.authorization_count() == 1


class _AlwaysEmpty(dict):
    def __setitem__(self, k, v):
        pass


# -- authorization response validation --------------------------------------------------


@pytest.mark.parametrize(
    "iss_mode, advertised, ok",
    [
        ("correct", True, True),
        ("omit", True, False),  # advertised but missing
        ("wrong", True, False),
        ("normalized", True, False),  # trailing slash: plain string comparison
        ("omit", False, True),  # neither advertised nor sent
        ("wrong", False, False),  # sent though not advertised: still compared
        ("correct", False, True),
    ],
)
def test_iss_validation_table(rsps, http, iss_mode, advertised, ok):
    w = World(rsps, as_metadata={"authorization_response_iss_parameter_supported": advertised})
    w.iss_mode = iss_mode
    auth = OAuth(redirect=w.approve)
    if ok:
        assert post(http, auth).status_code == 200
    else:
        with pytest.raises(AuthError, match="authorization response rejected"):
            post(http, auth)
        assert w.as_.token_requests == []  # the code never reached a token endpoint


def test_state_mismatch_is_rejected_before_the_token_request(rsps, http):
    w = World(rsps)
    w.tamper_state = True
    with pytest.raises(AuthError, match="state does not match"):
        post(http, OAuth(redirect=w.approve))
    assert w.as_.token_requests == []


def test_error_response_is_reported_after_iss_check(rsps, http):
    w = World(rsps)
    w.deny = True
    with pytest.raises(AuthError, match="access_denied"):
        post(http, OAuth(redirect=w.approve))
    w.iss_mode = "wrong"
    with pytest.raises(AuthError) as ei:
        post(http, OAuth(redirect=w.approve))
    assert "access_denied" not in str(ei.value) and "mix-up" in str(ei.value)


# -- token endpoint authentication ------------------------------------------------------


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
def test_token_endpoint_auth_method_follows_the_as(rsps, http, method):
    w = World(rsps, as_metadata={"token_endpoint_auth_methods_supported": [method]})
    assert post(http, OAuth(redirect=w.approve)).status_code == 200
    assert w.as_.registrations[0]["token_endpoint_auth_method"] == method
    (t,) = w.as_.token_requests
    assert t["method"] == method and t["client_id"] is not None
    if method == "client_secret_basic":
        assert "client_id" not in t["form"] and "client_secret" not in t["form"]
    if method == "none":
        assert "client_secret" not in t["form"] and "Authorization" not in t["headers"]


def test_preregistered_client_without_registration_endpoint(rsps, http):
    w = World(
        rsps,
        as_metadata={
            "registration_endpoint": None,
            "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        },
    )
    w.preregister("pre-id", "pre secret:with/odd chars")
    auth = OAuth(
        client_id="pre-id",
        client_secret="pre secret:with/odd chars",
        issuer=ISSUER,
        redirect=w.approve,
    )
    assert post(http, auth).status_code == 200
    assert w.as_.registrations == []
    assert w.as_.token_requests[0]["method"] == "client_secret_basic"
    assert w.as_.authorizations[0]["client_id"] == "pre-id"


def test_preregistered_client_for_another_issuer_is_not_presented(rsps, http):
    w = World(rsps)
    w.preregister("pre-id", "s")
    auth = OAuth(
        client_id="pre-id",
        client_secret="s",
        issuer="https://other-as.example.com",
        redirect=w.approve,
    )
    with pytest.raises(AuthError, match="not presenting"):
        post(http, auth)
    assert w.authorization_count() == 0 and w.as_.token_requests == []


def test_no_way_to_register_is_a_clear_error(rsps, http):
    w = World(rsps, as_metadata={"registration_endpoint": None})
    with pytest.raises(AuthError, match="client_id="):
        post(http, OAuth(redirect=w.approve))


def test_registration_refused_surfaces_the_reason(rsps, http):
    w = World(rsps)
    rsps.replace(
        responses.POST,
        f"{ISSUER}/register",
        status=400,
        json={"error": "invalid_redirect_uri", "error_description": "no loopback"},
    )
    with pytest.raises(AuthError, match="invalid_redirect_uri"):
        post(http, OAuth(redirect=w.approve))


def test_cimd_used_when_the_as_supports_it(rsps, http):
    cimd = "https://app.example.com/client.json"
    w = World(rsps, as_metadata={"client_id_metadata_document_supported": True})
    w.as_.clients[cimd] = {"client_id": cimd}
    assert post(http, OAuth(redirect=w.approve, client_metadata_url=cimd)).status_code == 200
    assert w.as_.registrations == [] and w.as_.authorizations[0]["client_id"] == cimd
    assert w.as_.token_requests[0]["method"] == "none"


def test_cimd_not_used_when_the_as_does_not_support_it(rsps, http):
    w = World(rsps)
    post(http, OAuth(redirect=w.approve, client_metadata_url="https://app.example.com/client.json"))
    assert len(w.as_.registrations) == 1


def test_cimd_url_must_be_https_with_path():
    with pytest.raises(ConfigError):
        OAuth(client_metadata_url="http://app.example.com/client.json")
    with pytest.raises(ConfigError):
        OAuth(client_metadata_url="https://app.example.com/")


# -- refresh, storage ------------------------------------------------------------------


def test_refresh_before_expiry(rsps, http):
    w = World(rsps)
    w.as_.expires_in = 30  # inside the 60 s refresh window
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    before = len(w.mcp_calls)
    assert post(http, auth, rid=2).status_code == 200
    assert [t["form"]["grant_type"] for t in w.as_.token_requests] == [
        "authorization_code",
        "refresh_token",
    ]
    assert w.as_.token_requests[1]["form"]["resource"] == SERVER
    assert len(w.mcp_calls) == before + 1  # refreshed up front: no 401 round trip
    assert w.authorization_count() == 1


def test_refresh_on_401(rsps, http):
    w = World(rsps)
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    w.valid_tokens.clear()  # server forgets the token (revoked / expired early)
    assert post(http, auth, rid=2).status_code == 200
    assert [t["form"]["grant_type"] for t in w.as_.token_requests] == [
        "authorization_code",
        "refresh_token",
    ]
    assert w.authorization_count() == 1


def test_failed_refresh_falls_back_to_authorization(rsps, http):
    w = World(rsps)
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    w.valid_tokens.clear()
    w.as_.refresh_tokens.clear()  # refresh token revoked too
    assert post(http, auth, rid=2).status_code == 200
    assert w.authorization_count() == 2


def test_expired_token_without_refresh_is_not_sent(rsps, http):
    w = World(rsps)
    w.as_.expires_in = -10
    w.as_.issue_refresh = False
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    post(http, auth, rid=2)
    assert w.mcp_calls[2]["authorization"] is None  # expired: sent without, 401, authorized again
    assert w.authorization_count() == 2


def test_second_run_reuses_stored_tokens_and_client(rsps, http, tmp_path):
    path = tmp_path / "sub" / "tokens.json"
    w = World(rsps)
    assert post(http, OAuth(redirect=w.approve, store=FileTokenStore(path))).status_code == 200
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    # a new process: new object, same file
    auth2 = OAuth(
        redirect=lambda u: pytest.fail("must not authorize again"), store=FileTokenStore(path)
    )
    assert post(http, auth2, rid=2).status_code == 200
    assert w.authorization_count() == 1 and len(w.as_.registrations) == 1
    # expired in between: refresh with the stored client, still no authorization
    w.valid_tokens.clear()
    auth3 = OAuth(
        redirect=lambda u: pytest.fail("must not authorize again"), store=FileTokenStore(path)
    )
    assert post(http, auth3, rid=3).status_code == 200
    assert w.as_.token_requests[-1]["form"]["grant_type"] == "refresh_token"


def test_stored_tokens_are_keyed_by_issuer_resource_and_client(rsps, http):
    w = World(rsps)
    store = MemoryTokenStore()
    post(http, OAuth(redirect=w.approve, store=store))
    client_id = store.get(f"client {ISSUER}")["client_id"]
    assert sorted(store.keys()) == [
        f"client {ISSUER}",
        f"server {SERVER}",
        f"token {ISSUER} {SERVER} {client_id}",
    ]
    assert store.get(f"server {SERVER}")["client_id"] == client_id


def test_logout_forgets_the_token(rsps, http):
    w = World(rsps)
    store = MemoryTokenStore()
    auth = OAuth(redirect=w.approve, store=store)
    post(http, auth)
    auth.logout()
    assert not auth.authorized and not [k for k in store.keys() if k.startswith("token ")]


# -- authorization server changes -------------------------------------------------------


def test_as_migration_reregisters_and_never_reuses_credentials(rsps, http):
    w = World(rsps)
    store = MemoryTokenStore()
    auth = OAuth(redirect=w.approve, store=store)
    post(http, auth)
    old_client = w.as_.registrations and next(iter(w.ases[ISSUER].clients))
    new = w.move_to("https://auth2.example.com")
    assert post(http, auth, rid=2).status_code == 200
    assert len(new.registrations) == 1
    assert all(q["client_id"] != old_client for q in new.authorizations)
    assert all(t["form"].get("client_id") != old_client for t in new.token_requests)
    assert all(
        t["form"]["grant_type"] != "refresh_token" for t in new.token_requests
    )  # old RT not tried there
    assert auth.issuer == "https://auth2.example.com"
    assert store.get("client https://auth2.example.com") is not None


# -- discovery variants through the glue --------------------------------------------------


def test_2025_03_26_fallback_without_prm(rsps, http):
    w = World(rsps, prm=False, issuer="https://mcp.example.com")  # AS metadata at the server origin
    assert post(http, OAuth(redirect=w.approve)).status_code == 200
    assert w.as_.authorizations[0]["resource"] == SERVER


def test_2025_03_26_default_endpoints_without_any_metadata(rsps, http):
    w = World(rsps, prm=False, issuer="https://mcp.example.com")
    rsps.replace(
        responses.GET, "https://mcp.example.com/.well-known/oauth-authorization-server", status=404
    )
    rsps.add(responses.GET, "https://mcp.example.com/.well-known/openid-configuration", status=404)
    assert post(http, OAuth(redirect=w.approve)).status_code == 200
    assert len(w.as_.registrations) == 1 and w.as_.token_requests[0]["form"]["resource"] == SERVER


def test_resource_mismatch_stops_before_authorization(rsps, http):
    w = World(rsps)
    w.prm_resource = "https://evil.example.com/mcp"
    with pytest.raises(AuthError, match="not the server"):
        post(http, OAuth(redirect=w.approve))
    assert w.prm_requests and w.authorization_count() == 0 and w.as_.registrations == []


def test_refuses_as_without_s256(rsps, http):
    w = World(rsps, as_metadata={"code_challenge_methods_supported": ["plain"]})
    with pytest.raises(AuthError, match="S256"):
        post(http, OAuth(redirect=w.approve))
    assert w.authorization_count() == 0


def test_refuses_as_without_pkce_metadata(rsps, http):
    w = World(rsps, as_metadata={"code_challenge_methods_supported": None})
    with pytest.raises(AuthError, match="PKCE"):
        post(http, OAuth(redirect=w.approve))


def test_refuses_plain_http_authorization_server_off_loopback(rsps, http):
    w = World(rsps, issuer="http://auth.example.com")
    with pytest.raises(AuthError, match="must use https"):
        post(http, OAuth(redirect=w.approve))
    assert w.authorization_count() == 0


def test_plain_http_allowed_on_loopback(rsps, http):
    w = World(rsps, server="http://127.0.0.1:9/mcp", issuer="http://localhost:10")
    assert post(http, OAuth(redirect=w.approve), url="http://127.0.0.1:9/mcp").status_code == 200


def test_plain_http_allowed_when_asked(rsps, http):
    w = World(rsps, issuer="http://auth.example.com")
    assert post(http, OAuth(redirect=w.approve, allow_insecure_http=True)).status_code == 200


# -- where tokens go -----------------------------------------------------------------------


def test_token_only_sent_to_the_server_origin(rsps, http):
    w = World(rsps)
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    seen = []
    rsps.add_callback(
        responses.GET,
        "https://other.example.com/x",
        callback=lambda r: (seen.append(r.headers.get("Authorization")), (200, {}, ""))[1],
    )
    rsps.add_callback(
        responses.GET,
        "http://mcp.example.com/mcp",
        callback=lambda r: (seen.append(r.headers.get("Authorization")), (200, {}, ""))[1],
    )
    rsps.add_callback(
        responses.GET,
        "https://mcp.example.com:8443/mcp",
        callback=lambda r: (seen.append(r.headers.get("Authorization")), (200, {}, ""))[1],
    )
    http.get("https://other.example.com/x", auth=auth)
    http.get("http://mcp.example.com/mcp", auth=auth)  # other scheme
    http.get("https://mcp.example.com:8443/mcp", auth=auth)  # other port
    assert seen == [None, None, None]


def test_no_token_after_redirect_to_another_origin(rsps, http):
    w = World(rsps)
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    seen = []
    rsps.add(
        responses.POST,
        "https://mcp.example.com/moved",
        status=307,
        headers={"Location": "https://elsewhere.example.com/mcp"},
    )
    rsps.add_callback(
        responses.POST,
        "https://elsewhere.example.com/mcp",
        callback=lambda r: (seen.append(r.headers.get("Authorization")), (200, {}, "{}"))[1],
    )
    r = http.post("https://mcp.example.com/moved", json=rpc("x"), auth=auth)
    assert r.status_code == 200 and seen == [None]
    assert (
        r.history[0].request.headers.get("Authorization", "").startswith("Bearer ")
    )  # it was sent to the origin


def test_401_from_another_origin_is_ignored(rsps, http):
    rsps.add(
        responses.GET,
        "https://other.example.com/x",
        status=401,
        headers={"WWW-Authenticate": 'Bearer resource_metadata="https://other.example.com/prm"'},
    )
    auth = OAuth(redirect=lambda u: pytest.fail("no flow for other origins"), server_url=SERVER)
    assert http.get("https://other.example.com/x", auth=auth).status_code == 401
    assert len(rsps.calls) == 1


# -- concurrency ------------------------------------------------------------------------


def test_concurrent_401s_share_one_authorization(rsps):
    w = World(rsps)
    entered = threading.Event()
    release = threading.Event()

    def slow_approve(url):
        entered.set()
        assert release.wait(5)
        return w.approve(url)

    auth = OAuth(redirect=slow_approve)
    results: list[int] = []

    def worker(i):
        with requests.Session() as s:
            results.append(post(s, auth, rid=i).status_code)

    threads = [threading.Thread(target=worker, args=(i,), name=f"test-auth-{i}") for i in range(4)]
    threads[0].start()
    assert entered.wait(5)
    for t in threads[1:]:
        t.start()
    release.set()
    for t in threads:
        t.join(10)
    assert results == [200] * 4
    assert w.authorization_count() == 1


# -- client credentials -------------------------------------------------------------------


def test_client_credentials_with_secret(rsps, http):
    w = World(
        rsps,
        challenge_scope="svc:read",
        as_metadata={"token_endpoint_auth_methods_supported": ["client_secret_basic"]},
    )
    w.preregister("svc", "s3cret")
    auth = OAuth.client_credentials("svc", "s3cret")
    assert post(http, auth).status_code == 200
    (t,) = w.as_.token_requests
    assert t["form"]["grant_type"] == "client_credentials" and t["method"] == "client_secret_basic"
    assert t["form"]["scope"] == "svc:read" and t["form"]["resource"] == SERVER
    assert w.authorization_count() == 0 and w.as_.registrations == []


def test_client_credentials_renewed_before_expiry(rsps, http):
    w = World(rsps, challenge_scope="svc:read")
    w.as_.expires_in = 30
    w.as_.issue_refresh = False
    w.preregister("svc", "s3cret")
    auth = OAuth.client_credentials("svc", "s3cret")
    post(http, auth)
    calls = len(w.mcp_calls)
    assert post(http, auth, rid=2).status_code == 200
    assert len(w.mcp_calls) == calls + 1  # no 401 round trip
    assert [t["form"]["grant_type"] for t in w.as_.token_requests] == ["client_credentials"] * 2
    assert w.as_.token_requests[1]["form"]["scope"] == "svc:read"


def test_client_credentials_with_secret_post(rsps, http):
    w = World(rsps, as_metadata={"token_endpoint_auth_methods_supported": ["client_secret_post"]})
    w.preregister("svc", "s3cret")
    assert post(http, OAuth.client_credentials("svc", "s3cret")).status_code == 200
    assert w.as_.token_requests[0]["method"] == "client_secret_post"


def test_client_credentials_with_private_key_jwt(rsps, http):
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    w = World(rsps, as_metadata={"token_endpoint_auth_methods_supported": ["private_key_jwt"]})
    w.preregister("svc", None)
    auth = OAuth.client_credentials(
        "svc", private_key_pem=pem, signing_algorithm="ES256", key_id="k1"
    )
    assert post(http, auth).status_code == 200
    form = w.as_.token_requests[0]["form"]
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    claims = jwt.decode(
        form["client_assertion"], key.public_key(), algorithms=["ES256"], audience=ISSUER
    )
    assert (
        claims["iss"] == claims["sub"] == "svc" and claims["exp"] > claims["iat"] and claims["jti"]
    )
    assert jwt.get_unverified_header(form["client_assertion"])["kid"] == "k1"
    assert "client_secret" not in form


def test_client_credentials_needs_a_credential():
    with pytest.raises(ConfigError):
        OAuth.client_credentials("svc")


# -- secrets stay secret ----------------------------------------------------------------


def test_no_secret_in_logs_repr_or_errors(rsps, http, caplog):
    caplog.set_level(logging.DEBUG)
    w = World(rsps, as_metadata={"token_endpoint_auth_methods_supported": ["client_secret_post"]})
    store = MemoryTokenStore()
    auth = OAuth(redirect=w.approve, store=store)
    post(http, auth)
    client = store.get(f"client {ISSUER}")
    tok = store.get(f"token {ISSUER} {SERVER} {client['client_id']}")
    code_req = w.as_.token_requests[0]["form"]
    secrets_ = [
        tok["access_token"],
        tok["refresh_token"],
        client["client_secret"],
        code_req["code"],
        code_req["code_verifier"],
    ]
    # a token endpoint that echoes the code back in its error text
    w.valid_tokens.clear()
    w.as_.refresh_tokens.clear()
    original_approve = w.approve

    def approve_then_break(url):
        out = original_approve(url)
        code = dict(parse_qsl(urlsplit(out).query))["code"]
        secrets_.append(code)
        w.as_.codes[code]["code_challenge"] = "wrong"  # token endpoint will say "bad code <code>"
        return out

    auth._redirect_spec = approve_then_break
    auth._redirect = None
    with pytest.raises(AuthError) as ei:
        post(http, auth, rid=2)
    assert "invalid_grant" in str(ei.value)
    from mcpsync.auth.flow import TokenSet
    from mcpsync.auth.registration import ClientInfo

    texts = [str(ei.value), repr(ei.value), caplog.text, repr(auth), repr(store),
             repr(TokenSet.from_store(tok)), repr(ClientInfo.from_store(client))]  # fmt: skip
    for text in texts:
        for s in secrets_:
            assert s not in text, (s, text[:200])


def test_client_secret_without_client_id_is_rejected():
    with pytest.raises(ConfigError):
        OAuth(client_secret="x")


def test_an_unreachable_token_endpoint_is_not_a_refused_refresh(rsps, http, tmp_path):
    """A refresh whose connection is reset (or refused, or times out) got no answer: the
    request fails with ``AuthServerUnreachable``; no authorization is started in its place,
    the stored token and refresh token stay, and the next request refreshes with them."""
    from mcpsync.errors import AuthServerUnreachable

    w = World(rsps)
    store = FileTokenStore(tmp_path / "tokens.json")
    post(http, OAuth(redirect=w.approve, store=store))
    kept = dict(store.get(next(k for k in store.keys() if k.startswith("token "))) or {})
    w.valid_tokens.clear()  # the access token expired at the server
    token_endpoint = w._token
    resets = []

    def reset_once(a, req):
        if not resets:
            resets.append(req)
            raise requests.ConnectionError(ConnectionResetError(104, "Connection reset by peer"))
        return token_endpoint(a, req)

    w._token = reset_once  # type: ignore[method-assign]
    auth = OAuth(redirect=lambda url: pytest.fail("must not authorize"), store=store)
    with pytest.raises(AuthServerUnreachable, match=r"ConnectionError \(ConnectionResetError\)"):
        post(http, auth, rid=2)
    assert len(resets) == 1 and w.authorization_count() == 1
    assert store.get(next(k for k in store.keys() if k.startswith("token "))) == kept
    assert post(http, auth, rid=3).status_code == 200  # the AS is back: refreshed
    assert w.as_.token_requests[-1]["form"]["grant_type"] == "refresh_token"
    assert w.authorization_count() == 1


def test_a_token_about_to_expire_stays_in_use_while_the_token_endpoint_is_unreachable(rsps, http):
    """The refresh made ahead of expiry (within ``refresh_skew``) gets no answer: the token,
    still valid, is sent; the store keeps it; nothing is authorized."""
    w = World(rsps)
    w.as_.expires_in = 30  # inside the 60 s refresh window
    auth = OAuth(redirect=w.approve)
    post(http, auth)
    token_endpoint = w._token

    def refused(a, req):
        raise requests.ConnectionError(ConnectionRefusedError(111, "Connection refused"))

    w._token = refused  # type: ignore[method-assign]
    assert post(http, auth, rid=2).status_code == 200
    assert w.mcp_calls[-1]["authorization"] is not None and w.authorization_count() == 1
    w._token = token_endpoint  # type: ignore[method-assign]
    assert post(http, auth, rid=3).status_code == 200
    assert w.as_.token_requests[-1]["form"]["grant_type"] == "refresh_token"
