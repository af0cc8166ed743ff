"""Flow pieces in isolation: PKCE, authorization URL, response validation, scope selection,
registration body and client choice."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qsl, urlsplit

import pytest

from mcpsync.auth.discovery import AuthServerMetadata
from mcpsync.auth.flow import (
    PendingAuthorization,
    build_authorization_request,
    new_pkce,
    parse_authorization_response,
    select_scopes,
)
from mcpsync.auth.registration import (
    ClientInfo,
    choose_auth_method,
    client_metadata,
    redirect_uri_registered,
)
from mcpsync.errors import AuthError


def asm(**kw) -> AuthServerMetadata:
    base = dict(
        issuer="https://as.example.com",
        authorization_endpoint="https://as.example.com/authorize?tenant=x",
        token_endpoint="https://as.example.com/token",
        code_challenge_methods_supported=["S256"],
    )
    base.update(kw)
    return AuthServerMetadata(**base)


def pending(**kw) -> PendingAuthorization:
    base = dict(
        authorization_url="u",
        state="st-123",
        code_verifier="v" * 43,
        redirect_uri="http://127.0.0.1:1/cb",
        issuer="https://as.example.com",
        iss_supported=True,
        scopes=None,
        resource="https://mcp.example.com/mcp",
        client_id="c",
    )
    base.update(kw)
    return PendingAuthorization(**base)


def test_pkce_s256_pair():
    v, c = new_pkce()
    assert 43 <= len(v) <= 128
    assert c == base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=").decode()
    assert new_pkce()[0] != v


def test_authorization_url_keeps_existing_query_and_has_all_parameters():
    p = build_authorization_request(
        asm(), ClientInfo(client_id="cid"), redirect_uri="http://127.0.0.1:5/cb", scopes=["a", "b"],
        resource="https://mcp.example.com/mcp", allow_insecure=False,
    )  # fmt: skip
    q = dict(parse_qsl(urlsplit(p.authorization_url).query))
    assert q == {
        "tenant": "x",
        "response_type": "code",
        "client_id": "cid",
        "redirect_uri": "http://127.0.0.1:5/cb",
        "state": p.state,
        "code_challenge": q["code_challenge"],
        "code_challenge_method": "S256",
        "scope": "a b",
        "resource": "https://mcp.example.com/mcp",
    }
    assert p.issuer == "https://as.example.com"
    assert p.state not in repr(p) and p.code_verifier not in repr(p)
    assert q["code_challenge"] not in repr(p)  # the URL is hidden too


def test_each_request_gets_fresh_state_and_verifier():
    a = build_authorization_request(
        asm(), ClientInfo("c"), redirect_uri="x", scopes=None, resource="r", allow_insecure=False
    )
    b = build_authorization_request(
        asm(), ClientInfo("c"), redirect_uri="x", scopes=None, resource="r", allow_insecure=False
    )
    assert a.state != b.state and a.code_verifier != b.code_verifier


def test_refuses_without_s256():
    with pytest.raises(AuthError, match="S256"):
        build_authorization_request(
            asm(code_challenge_methods_supported=["plain"]), ClientInfo("c"), redirect_uri="x", scopes=None,
            resource="r", allow_insecure=False,
        )  # fmt: skip


@pytest.mark.parametrize(
    "result",
    [
        "http://127.0.0.1:1/cb?code=abc&state=st-123&iss=https%3A%2F%2Fas.example.com",
        "?code=abc&state=st-123&iss=https%3A%2F%2Fas.example.com",
        "code=abc&state=st-123&iss=https%3A%2F%2Fas.example.com",
        "  http://127.0.0.1:1/cb?state=st-123&code=abc&iss=https://as.example.com\n",
    ],
)
def test_accepts_valid_response_forms(result):
    assert parse_authorization_response(result, pending()) == "abc"


@pytest.mark.parametrize(
    "query, iss_supported, message",
    [
        ("code=abc&state=other&iss=https://as.example.com", True, "state"),
        ("code=abc&iss=https://as.example.com", True, "state"),
        ("code=abc&state=st-123", True, "has none"),
        ("code=abc&state=st-123&iss=https://evil.example.com", True, "mix-up"),
        ("code=abc&state=st-123&iss=https://as.example.com/", True, "mix-up"),
        ("code=abc&state=st-123&iss=HTTPS://AS.EXAMPLE.COM", True, "mix-up"),
        ("code=abc&state=st-123&iss=https://as.example.com:443", True, "mix-up"),
        ("code=abc&state=st-123&iss=https://evil.example.com", False, "mix-up"),
        ("error=access_denied&state=st-123&iss=https://as.example.com", True, "access_denied"),
        ("state=st-123&iss=https://as.example.com", True, "no code"),
    ],
)
def test_rejects_bad_responses(query, iss_supported, message):
    with pytest.raises(AuthError, match=message):
        parse_authorization_response(
            "http://127.0.0.1:1/cb?" + query, pending(iss_supported=iss_supported)
        )


def test_absent_iss_is_fine_when_not_advertised():
    assert (
        parse_authorization_response("?code=abc&state=st-123", pending(iss_supported=False))
        == "abc"
    )


def test_bare_code_only_in_paste_mode_and_only_without_iss():
    with pytest.raises(AuthError):
        parse_authorization_response("abc", pending(iss_supported=False))
    assert (
        parse_authorization_response("abc", pending(iss_supported=False), allow_bare_code=True)
        == "abc"
    )
    with pytest.raises(AuthError, match="full redirected URL"):
        parse_authorization_response("abc", pending(iss_supported=True), allow_bare_code=True)
    with pytest.raises(AuthError):
        parse_authorization_response("", pending(), allow_bare_code=True)


def test_error_description_does_not_leak_the_code():
    with pytest.raises(AuthError) as ei:
        parse_authorization_response(
            "?error=server_error&error_description=failed+for+code+SECRETCODE1&code=SECRETCODE1&state=st-123"
            "&iss=https://as.example.com",
            pending(),
        )
    assert "SECRETCODE1" not in str(ei.value)


# -- scope selection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, expected",
    [
        (dict(challenge=["c"], configured=["u"], prm_supported=["p"]), ["c"]),
        (dict(challenge=None, configured=["u"], prm_supported=["p"]), ["u"]),
        (dict(challenge=None, configured=None, prm_supported=["p", "q"]), ["p", "q"]),
        (dict(challenge=None, configured=None, prm_supported=None), None),
        (dict(challenge=["w"], configured=None, prm_supported=None, previous=["r"]), ["r", "w"]),
        (
            dict(challenge=["r", "w"], configured=None, prm_supported=None, previous=["r"]),
            ["r", "w"],
        ),
    ],
)
def test_select_scopes(kw, expected):
    kw.setdefault("previous", None)
    assert select_scopes(**kw, asm=asm(), offline_access=True) == expected


def test_offline_access_rules():
    offered = asm(scopes_supported=["a", "offline_access"])
    assert select_scopes(
        challenge=["a"],
        configured=None,
        prm_supported=None,
        previous=None,
        asm=offered,
        offline_access=True,
    ) == ["a", "offline_access"]
    assert select_scopes(
        challenge=["a"],
        configured=None,
        prm_supported=None,
        previous=None,
        asm=offered,
        offline_access=False,
    ) == ["a"]
    # never alone (it would replace the AS's default scope)
    assert (
        select_scopes(
            challenge=None,
            configured=None,
            prm_supported=None,
            previous=None,
            asm=offered,
            offline_access=True,
        )
        is None
    )
    # stripped when the AS does not offer it, wherever it came from
    assert select_scopes(
        challenge=["a", "offline_access"],
        configured=None,
        prm_supported=None,
        previous=["offline_access"],
        asm=asm(scopes_supported=["a"]),
        offline_access=True,
    ) == ["a"]


# -- registration -------------------------------------------------------------------------


def test_dcr_metadata_native_and_grant_types():
    md = client_metadata(
        asm(grant_types_supported=["authorization_code"]),
        client_name="n",
        redirect_uri="http://127.0.0.1:4/cb",
    )
    assert md["application_type"] == "native" and md["grant_types"] == ["authorization_code"]
    md = client_metadata(
        asm(scopes_supported=["offline_access"]),
        client_name="n",
        redirect_uri="http://localhost/cb",
    )
    assert md["grant_types"] == ["authorization_code", "refresh_token"]
    md = client_metadata(
        asm(grant_types_supported=["refresh_token"]),
        client_name="n",
        redirect_uri="com.example.app:/cb",
    )
    assert md["application_type"] == "native" and "refresh_token" in md["grant_types"]
    md = client_metadata(asm(), client_name="n", redirect_uri="https://app.example.com/cb")
    assert md["application_type"] == "web"
    md = client_metadata(
        asm(),
        client_name="n",
        redirect_uri="https://app.example.com/cb",
        application_type="native",
        extra={"logo_uri": "https://l"},
    )
    assert md["application_type"] == "native" and md["logo_uri"] == "https://l"


@pytest.mark.parametrize(
    "supported, expected",
    [(["none", "client_secret_basic"], "none"), (["client_secret_post"], "client_secret_post"),
     (["client_secret_basic", "client_secret_post"], "client_secret_basic"), (None, None)],
)  # fmt: skip
def test_dcr_requested_auth_method(supported, expected):
    md = client_metadata(
        asm(token_endpoint_auth_methods_supported=supported),
        client_name="n",
        redirect_uri="http://127.0.0.1/cb",
    )
    assert md.get("token_endpoint_auth_method") == expected


def test_redirect_uri_registered_loopback_port_agnostic():
    assert redirect_uri_registered("http://127.0.0.1:5000/cb", ["http://127.0.0.1:4000/cb"])
    assert not redirect_uri_registered("http://127.0.0.1:5000/other", ["http://127.0.0.1:4000/cb"])
    assert not redirect_uri_registered(
        "https://app.example.com:444/cb", ["https://app.example.com/cb"]
    )
    assert redirect_uri_registered("https://app.example.com/cb", ["https://app.example.com/cb"])


def test_choose_auth_method():
    a = asm(token_endpoint_auth_methods_supported=["client_secret_basic"])
    assert choose_auth_method(ClientInfo("c", "s"), a) == "client_secret_basic"
    assert (
        choose_auth_method(
            ClientInfo("c", "s"), asm(token_endpoint_auth_methods_supported=["client_secret_post"])
        )
        == "client_secret_post"
    )
    assert (
        choose_auth_method(ClientInfo("c", "s"), asm()) == "client_secret_basic"
    )  # RFC 8414 default
    assert choose_auth_method(ClientInfo("c"), a) == "none"
    assert choose_auth_method(ClientInfo("c", private_key_pem="k"), a) == "private_key_jwt"
    assert (
        choose_auth_method(ClientInfo("c", "s", auth_method="client_secret_post", source="dcr"), a)
        == "client_secret_post"
    )
    with pytest.raises(AuthError):
        choose_auth_method(
            ClientInfo("c", "s"), asm(token_endpoint_auth_methods_supported=["private_key_jwt"])
        )


def test_client_info_repr_hides_secret():
    c = ClientInfo("cid", "TOPSECRET", private_key_pem="-----BEGIN KEY-----")
    assert "TOPSECRET" not in repr(c) and "BEGIN" not in repr(c) and "cid" in repr(c)


def test_private_key_jwt_without_a_key_is_a_config_error():
    from mcpsync.auth.flow import client_assertion
    from mcpsync.auth.registration import ClientInfo
    from mcpsync.errors import ConfigError

    with pytest.raises(ConfigError, match="private_key_pem"):
        client_assertion(ClientInfo("svc"), "https://as.example/token")
