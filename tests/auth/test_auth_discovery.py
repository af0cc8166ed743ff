"""Discovery: PRM locations and resource check (RFC 9728), AS metadata order, issuer check,
2025-03-26 fallbacks."""

from __future__ import annotations

import pytest
import requests
import responses

from mcpsync.auth import bearer_challenge
from mcpsync.auth.discovery import (
    discover_authorization_server,
    discover_protected_resource,
    legacy_authorization_server,
    prm_urls,
    resource_matches,
    well_known_as_urls,
)
from mcpsync.errors import AuthError

SERVER = "https://mcp.example.com/public/mcp"
AS_DOC = {
    "issuer": "https://auth.example.com",
    "authorization_endpoint": "https://auth.example.com/authorize",
    "token_endpoint": "https://auth.example.com/token",
    "code_challenge_methods_supported": ["S256"],
}


@pytest.fixture
def http():
    with requests.Session() as s:
        yield s


def _prm(resource=SERVER, servers=("https://auth.example.com",), **extra):
    return {"resource": resource, "authorization_servers": list(servers), **extra}


def test_prm_urls_path_then_root():
    assert prm_urls(SERVER) == [
        "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://mcp.example.com") == [
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    ]
    assert prm_urls("https://mcp.example.com/") == [
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    ]


def test_as_urls_with_path_insertion_order():
    assert well_known_as_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert well_known_as_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


@responses.activate
def test_prm_from_header_url_first(http):
    hinted = "https://mcp.example.com/custom/prm.json"
    responses.get(hinted, json=_prm(scopes_supported=["a"]))
    ch = bearer_challenge(f'Bearer resource_metadata="{hinted}"')
    prm = discover_protected_resource(http, SERVER, ch, timeout=5)
    assert prm.url == hinted and prm.scopes_supported == ["a"]
    assert [c.request.url for c in responses.calls] == [hinted]


@responses.activate
def test_prm_path_based_before_root(http):
    path_url, root_url = prm_urls(SERVER)
    responses.get(path_url, json=_prm())
    responses.get(root_url, json=_prm(resource="https://mcp.example.com"))
    prm = discover_protected_resource(http, SERVER, None, timeout=5)
    assert prm.url == path_url
    assert [c.request.url for c in responses.calls] == [path_url]


@responses.activate
def test_prm_root_when_path_based_missing(http):
    path_url, root_url = prm_urls(SERVER)
    responses.get(path_url, status=404)
    responses.get(root_url, json=_prm(resource="https://mcp.example.com"))
    prm = discover_protected_resource(http, SERVER, None, timeout=5)
    assert prm.url == root_url and prm.resource == "https://mcp.example.com"


@responses.activate
def test_prm_header_url_failing_falls_back_to_well_known(http):
    hinted = "https://mcp.example.com/broken.json"
    path_url, _ = prm_urls(SERVER)
    responses.get(hinted, status=500)
    responses.get(path_url, json=_prm())
    prm = discover_protected_resource(
        http, SERVER, bearer_challenge(f'Bearer resource_metadata="{hinted}"'), timeout=5
    )
    assert prm.url == path_url


@responses.activate
def test_no_prm_returns_none(http):
    for u in prm_urls(SERVER):
        responses.get(u, status=404)
    assert discover_protected_resource(http, SERVER, None, timeout=5) is None


@pytest.mark.parametrize(
    "resource",
    [
        "https://evil.example.com/public/mcp",  # other host
        "http://mcp.example.com/public/mcp",  # other scheme
        "https://mcp.example.com:8443/public/mcp",  # other port
        "https://mcp.example.com/other",  # other path
        "https://mcp.example.com/public/mcpx",  # prefix but not on a segment boundary
        "https://mcp.example.com/public/mcp#frag",  # fragment
        "not a url",
    ],
)
@responses.activate
def test_prm_resource_mismatch_aborts(http, resource):
    responses.get(prm_urls(SERVER)[0], json=_prm(resource=resource))
    with pytest.raises(AuthError, match="not the server"):
        discover_protected_resource(http, SERVER, None, timeout=5)


@pytest.mark.parametrize(
    "resource",
    ["https://mcp.example.com/public/mcp", "https://MCP.example.com/public/mcp/", "https://mcp.example.com:443/public",
     "https://mcp.example.com", "https://mcp.example.com/"],
)  # fmt: skip
def test_resource_matches_accepts_server_and_parents(resource):
    assert resource_matches(SERVER, resource)


@responses.activate
def test_prm_without_authorization_servers_is_an_error(http):
    responses.get(prm_urls(SERVER)[0], json={"resource": SERVER})
    with pytest.raises(AuthError, match="authorization_servers"):
        discover_protected_resource(http, SERVER, None, timeout=5)


@responses.activate
def test_as_metadata_oauth_first(http):
    responses.get("https://auth.example.com/.well-known/oauth-authorization-server", json=AS_DOC)
    asm = discover_authorization_server(http, "https://auth.example.com", timeout=5)
    assert asm.token_endpoint == "https://auth.example.com/token" and asm.supports_s256
    assert len(responses.calls) == 1


@responses.activate
def test_as_metadata_falls_back_to_openid_configuration(http):
    responses.get("https://auth.example.com/.well-known/oauth-authorization-server", status=404)
    responses.get("https://auth.example.com/.well-known/openid-configuration", json=AS_DOC)
    asm = discover_authorization_server(http, "https://auth.example.com", timeout=5)
    assert asm.url.endswith("/openid-configuration")


@responses.activate
def test_as_metadata_path_issuer_tries_three_in_order_and_never_root(http):
    issuer = "https://auth.example.com/tenant1"
    doc = dict(AS_DOC, issuer=issuer)
    urls = well_known_as_urls(issuer)
    responses.get(urls[0], status=404)
    responses.get(urls[1], status=404)
    responses.get(urls[2], json=doc)
    asm = discover_authorization_server(http, issuer, timeout=5)
    assert asm.issuer == issuer
    assert [c.request.url for c in responses.calls] == urls  # root well-known never asked


@responses.activate
def test_as_metadata_issuer_mismatch_is_refused(http):
    responses.get(
        "https://auth.example.com/.well-known/oauth-authorization-server",
        json=dict(AS_DOC, issuer="https://attacker.example.com"),
    )
    with pytest.raises(AuthError, match="refusing to use it"):
        discover_authorization_server(http, "https://auth.example.com", timeout=5)
    assert len(responses.calls) == 1  # nothing else from that document was used


@responses.activate
def test_as_metadata_trailing_slash_issuer_is_a_mismatch(http):
    responses.get(
        "https://auth.example.com/.well-known/oauth-authorization-server",
        json=dict(AS_DOC, issuer="https://auth.example.com/"),
    )
    with pytest.raises(AuthError):
        discover_authorization_server(http, "https://auth.example.com", timeout=5)


@responses.activate
def test_legacy_metadata_at_server_origin(http):
    responses.get(
        "https://mcp.example.com/.well-known/oauth-authorization-server",
        json=dict(
            AS_DOC,
            issuer="https://mcp.example.com",
            token_endpoint="https://mcp.example.com/oauth/token",
        ),
    )
    asm = legacy_authorization_server(http, SERVER, timeout=5)
    assert asm.token_endpoint == "https://mcp.example.com/oauth/token" and not asm.legacy_defaults


@responses.activate
def test_legacy_default_endpoints(http):
    responses.get("https://mcp.example.com/.well-known/oauth-authorization-server", status=404)
    responses.get("https://mcp.example.com/.well-known/openid-configuration", status=404)
    asm = legacy_authorization_server(http, SERVER, timeout=5)
    assert asm.legacy_defaults
    assert (asm.authorization_endpoint, asm.token_endpoint, asm.registration_endpoint) == (
        "https://mcp.example.com/authorize",
        "https://mcp.example.com/token",
        "https://mcp.example.com/register",
    )


@responses.activate
def test_network_failure_is_auth_error(http):
    responses.get(prm_urls(SERVER)[0], body=requests.ConnectionError("refused"))
    with pytest.raises(AuthError, match="ConnectionError"):
        discover_protected_resource(http, SERVER, None, timeout=5)
