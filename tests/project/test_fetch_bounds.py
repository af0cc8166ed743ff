"""Every document mcpsync fetches on a server's word is bounded: one deadline for the whole
operation (every place tried, every redirect, every body read: a body trickled in is cut at
the deadline), a size cap checked while reading, a nesting cap, and the area's typed error.

Against ``servers.hostile_http`` on 127.0.0.1: Server Cards and catalogs (``CardError``,
``CardTimeout``), protected resource and authorization server metadata, client registration
(``AuthError``). Each timing test measures the elapsed time against ``timeout + 0.5 s``, and
against ``timeout - 0.2 s`` from below (it really waited for the deadline).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from servers.hostile_http import HostileHTTP, Route

import mcpsync
from mcpsync.auth.device import request_device_code
from mcpsync.auth.discovery import (
    AuthServerMetadata,
    discover_authorization_server,
    discover_protected_resource,
)
from mcpsync.auth.enterprise import request_id_jag
from mcpsync.auth.redirect import headless_redirect
from mcpsync.auth.registration import ClientInfo, register_client
from mcpsync.cards import CardCache, CardError, CardTimeout, server_card, server_cards
from mcpsync.errors import AuthError, ConfigError

SLACK = 0.5  # the docs' promise (docs/guarantees.md): an error within the bound + 0.5 s
CARD = {"name": "com.example/weather", "version": "1.2.0", "description": "Weather."}
DEEP = b"[" * 200_000  # under the 1 MiB cap, far over any parser's nesting


@pytest.fixture
def site() -> Iterator[HostileHTTP]:
    with HostileHTTP() as s:
        yield s


def timed(fn: Callable[[], Any], error: type[BaseException]) -> tuple[float, BaseException]:
    started = time.monotonic()
    with pytest.raises(error) as info:
        fn()
    return time.monotonic() - started, info.value


def trickled(document: bytes = json.dumps(CARD).encode()) -> Route:
    """A valid document sent one byte every 0.5 s (every read returns; none times out)."""
    return Route(body=document, trickle=1, every=0.5)


def card(url: str, timeout: float = 2.0) -> Any:
    return server_card(url, timeout=timeout, cache=CardCache())


# -- Server Cards ---------------------------------------------------------------------------


def test_card_trickled_body_is_cut_at_the_deadline(site, no_leaks):
    site.routes["/mcp/server-card"] = trickled()
    elapsed, exc = timed(lambda: card(site.url("/mcp"), 2.0), CardTimeout)
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert isinstance(exc, CardError) and isinstance(exc, TimeoutError)
    assert "timeout=2 s" in str(exc) and "/mcp/server-card" in str(exc)


def test_card_trickled_head_is_cut_at_the_deadline(site, no_leaks):
    # the status line and headers one byte every 0.5 s (each read returns; ~40 s in all)
    site.routes["/mcp/server-card"] = Route(body=json.dumps(CARD).encode(), head_every=0.5)
    elapsed, exc = timed(lambda: card(site.url("/mcp"), 2.0), CardTimeout)
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert "timeout=2 s" in str(exc) and "/mcp/server-card" in str(exc)


def test_card_places_share_one_deadline(site):
    # all 7 places answer 404, each after 0.9 s: one fresh timeout per place took 6.3 s
    site.default = Route(404, b"no", head_delay=0.9)
    elapsed, exc = timed(lambda: card(site.url("/mcp"), 2.0), CardTimeout)
    assert elapsed <= 2.0 + SLACK, elapsed
    assert len(site.seen) == 3, site.paths()  # 0.9 + 0.9 + (cut at 2.0)


def test_card_slow_redirect_chain_counts_against_the_deadline(site):
    # 3 redirects (the most allowed), 0.8 s each, then the card
    site.routes["/mcp/server-card"] = Route(302, headers={"Location": "/hop1"}, head_delay=0.8)
    for i in (1, 2):
        site.routes[f"/hop{i}"] = Route(302, headers={"Location": f"/hop{i + 1}"}, head_delay=0.8)
    site.routes["/hop3"] = Route(body=json.dumps(CARD).encode())
    elapsed, exc = timed(lambda: card(site.url("/mcp"), 2.0), CardTimeout)
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert "/hop" in str(exc)
    assert card(site.url("/mcp"), 5.0).name == CARD["name"]  # the same chain, given the time


def test_card_endless_redirect_chain_is_refused(site):
    for i in range(50):
        site.routes[f"/loop{i}.json"] = Route(302, headers={"Location": f"/loop{i + 1}.json"})
    elapsed, exc = timed(lambda: card(site.url("/loop0.json"), 2.0), CardError)
    assert "more than 3 redirects" in str(exc)
    assert elapsed < 1.0 and len(site.seen) == 4, site.paths()


@pytest.mark.parametrize(
    "body",
    [DEEP, b"[" * 100 + b"]" * 100, b'{"a":' * 70 + b"1" + b"}" * 70],
    ids=["200k", "100", "70obj"],
)
def test_card_deep_json_is_a_card_error(site, body):
    site.routes["/mcp/server-card"] = Route(body=body)
    _, exc = timed(lambda: card(site.url("/mcp")), CardError)
    assert "nested deeper than 64 levels" in str(exc) and "/mcp/server-card" in str(exc)
    assert not isinstance(exc, RecursionError)


@pytest.mark.parametrize("length", [True, False], ids=["declared", "until-close"])
def test_card_huge_body_is_cut_at_the_cap(site, length):
    site.routes["/mcp/server-card"] = Route(body=b" " * 65536, repeat=256, length=length)  # 16 MiB
    elapsed, exc = timed(lambda: card(site.url("/mcp"), 5.0), CardError)
    assert "larger than 1048576 bytes" in str(exc)
    assert elapsed < 2.0, elapsed


def test_catalog_entries_share_one_deadline(site):
    entries = [
        {"identifier": f"e{i}", "type": "application/mcp-server-card+json", "url": f"/card{i}"}
        for i in range(5)
    ]
    site.routes["/.well-known/mcp/catalog.json"] = Route(
        body=json.dumps({"entries": entries}).encode()
    )
    for i in range(5):
        site.routes[f"/card{i}"] = Route(body=json.dumps(CARD).encode(), head_delay=0.9)
    elapsed, _ = timed(
        lambda: server_cards(site.origin, timeout=2.0, cache=CardCache()), CardTimeout
    )
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert len(site.seen) == 4, site.paths()  # the catalog, 2 cards, the third cut


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "2", True])
def test_card_timeout_must_be_seconds(bad):
    with pytest.raises(ConfigError, match="timeout must be a number of seconds above 0"):
        server_card("http://127.0.0.1:9/mcp", timeout=bad)


def test_top_level_names():
    assert mcpsync.cards.CardTimeout is CardTimeout


# -- OAuth: protected resource metadata, authorization server metadata, registration --------


@pytest.fixture
def http() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def test_prm_trickled_is_cut_at_the_deadline(site, http):
    doc = {"resource": site.url("/mcp"), "authorization_servers": [site.origin]}
    site.routes["/.well-known/oauth-protected-resource/mcp"] = trickled(json.dumps(doc).encode())
    elapsed, exc = timed(
        lambda: discover_protected_resource(http, site.url("/mcp"), None, timeout=2.0), AuthError
    )
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert "protected resource metadata" in str(exc) and "timeout=2 s" in str(exc)


def test_as_metadata_candidates_share_one_deadline(site, http):
    # an issuer with a path has 3 well-known URLs; each answers 404 after 0.9 s
    site.default = Route(404, b"no", head_delay=0.9)
    issuer = site.url("/tenant")
    elapsed, exc = timed(
        lambda: discover_authorization_server(http, issuer, timeout=2.0), AuthError
    )
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert "authorization server metadata" in str(exc)


def test_as_metadata_slow_same_origin_redirects_count(site, http):
    issuer = site.origin
    site.routes["/.well-known/oauth-authorization-server"] = Route(
        302, headers={"Location": "/a"}, head_delay=0.8
    )
    site.routes["/a"] = Route(302, headers={"Location": "/b"}, head_delay=0.8)
    site.routes["/b"] = Route(body=json.dumps({"issuer": issuer}).encode(), head_delay=0.8)
    elapsed, _ = timed(lambda: discover_authorization_server(http, issuer, timeout=2.0), AuthError)
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed


@pytest.mark.parametrize("body", [DEEP, b"[" * 100 + b"]" * 100], ids=["200k", "100"])
def test_metadata_deep_json_is_an_auth_error(site, http, body):
    site.routes["/.well-known/oauth-authorization-server"] = Route(body=body)
    _, exc = timed(lambda: discover_authorization_server(http, site.origin, timeout=2.0), AuthError)
    assert "nested deeper than 64 levels" in str(exc)


def test_metadata_huge_body_is_an_auth_error(site, http):
    site.routes["/.well-known/oauth-authorization-server"] = Route(
        body=b" " * 65536, repeat=256, length=False
    )
    elapsed, exc = timed(
        lambda: discover_authorization_server(http, site.origin, timeout=5.0), AuthError
    )
    assert "larger than 1048576 bytes" in str(exc) and elapsed < 2.0


def _asm(site: HostileHTTP) -> AuthServerMetadata:
    return AuthServerMetadata(
        issuer=site.origin,
        authorization_endpoint=site.url("/authorize"),
        token_endpoint=site.url("/token"),
        registration_endpoint=site.url("/register"),
    )


def _register(site: HostileHTTP, http: requests.Session, timeout: float) -> Any:
    return register_client(
        http, _asm(site), {"client_name": "t"}, timeout=timeout, allow_insecure=False
    )


def test_registration_reply_trickled_is_cut_at_the_deadline(site, http):
    site.routes["/register"] = Route(
        201, body=json.dumps({"client_id": "abc"}).encode(), trickle=1, every=0.5
    )
    elapsed, exc = timed(lambda: _register(site, http, 2.0), AuthError)
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert "registration" in str(exc) and "timeout=2 s" in str(exc)


@pytest.mark.parametrize(
    "body", [DEEP, b'{"client_id":' * 80 + b'"x"' + b"}" * 80], ids=["200k", "80obj"]
)
def test_registration_reply_deep_json_is_an_auth_error(site, http, body):
    site.routes["/register"] = Route(201, body=body)
    _, exc = timed(lambda: _register(site, http, 2.0), AuthError)
    assert "nested deeper than 64 levels" in str(exc)


def test_registration_still_works(site, http):
    site.routes["/register"] = Route(201, body=json.dumps({"client_id": "abc"}).encode())
    assert _register(site, http, 2.0).client_id == "abc"
    assert site.seen[-1][1:] == ("POST", "/register")


# -- the device authorization request, the ID-JAG exchange, the headless redirect ------------


def _device_code(site: HostileHTTP, http: requests.Session, timeout: float) -> Any:
    asm = _asm(site)
    asm.raw["device_authorization_endpoint"] = site.url("/device")
    client = ClientInfo(
        client_id="cli", client_secret="s3cret-value", auth_method="client_secret_post"
    )
    return request_device_code(
        http,
        asm,
        client,
        scopes=None,
        resource=site.url("/mcp"),
        timeout=timeout,
        allow_insecure=False,
    )


def _id_jag(site: HostileHTTP, http: requests.Session, timeout: float) -> Any:
    return request_id_jag(
        http, site.url("/idp/token"), "the-id-token", audience=site.origin, resource=site.url("/mcp"),
        scopes=None, client_id="cli", client_secret="s3cret-value", timeout=timeout, allow_insecure=False,
    )  # fmt: skip


DEVICE = {
    "device_code": "dc",
    "user_code": "UC",
    "verification_uri": "https://x.example/d",
    "expires_in": 60,
}
JAG = {
    "access_token": "jag",
    "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
    "token_type": "N_A",
}


@pytest.mark.parametrize(
    "call, path, document",
    [(_device_code, "/device", DEVICE), (_id_jag, "/idp/token", JAG)],
    ids=["device-authorization", "id-jag"],
)
def test_auth_replies_trickled_deep_and_fine(site, http, call, path, document):
    site.routes[path] = Route(body=json.dumps(document).encode(), trickle=1, every=0.5)
    elapsed, exc = timed(lambda: call(site, http, 2.0), AuthError)
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert "timeout=2 s" in str(exc) and "s3cret" not in str(exc)
    assert exc.__context__ is None  # the request (it holds the secret) does not ride along
    site.routes[path] = Route(body=DEEP)
    _, exc = timed(lambda: call(site, http, 2.0), AuthError)
    assert "nested deeper than 64 levels" in str(exc)
    site.routes[path] = Route(body=json.dumps(document).encode())
    assert call(site, http, 2.0)  # a well-behaved server still works


def test_headless_redirect_hops_share_one_deadline(site, http):
    for i in range(6):  # same-origin hops of 0.8 s each: one fresh timeout per hop took 4.8 s
        site.routes[f"/authorize{i}"] = Route(
            302, headers={"Location": f"/authorize{i + 1}"}, head_delay=0.8
        )
    elapsed, exc = timed(
        lambda: headless_redirect(site.url("/authorize0"), session=http, timeout=2.0), AuthError
    )
    assert 2.0 - 0.2 <= elapsed <= 2.0 + SLACK, elapsed
    assert "timeout=2 s" in str(exc)


def test_headless_redirect_reads_no_page(site, http):
    # a login page trickled in: nothing of it is read, the answer is immediate
    site.routes["/authorize"] = Route(
        200, b"<html>" + b" " * 1000, headers={"Content-Type": "text/html"}, trickle=1, every=0.5
    )
    elapsed, exc = timed(
        lambda: headless_redirect(site.url("/authorize"), session=http, timeout=2.0), AuthError
    )
    assert "answered HTTP 200 without a redirect" in str(exc) and elapsed < 1.0, elapsed
    site.routes["/authorize"] = Route(302, headers={"Location": "http://127.0.0.1:9/cb?code=c"})
    assert headless_redirect(site.url("/authorize"), session=http, timeout=2.0).endswith("code=c")


def _guarded(site: HostileHTTP, token: Route) -> None:
    """An MCP endpoint behind OAuth: 401, its PRM, the AS metadata, then ``token``."""
    prm = site.url("/.well-known/oauth-protected-resource/mcp")
    site.routes["/mcp"] = Route(
        401, b"", headers={"WWW-Authenticate": f'Bearer resource_metadata="{prm}"'}
    )
    site.routes["/.well-known/oauth-protected-resource/mcp"] = Route(
        body=json.dumps(
            {"resource": site.url("/mcp"), "authorization_servers": [site.origin]}
        ).encode()
    )
    site.routes["/.well-known/oauth-authorization-server"] = Route(
        body=json.dumps({
            "issuer": site.origin, "token_endpoint": site.url("/token"),
            "authorization_endpoint": site.url("/authorize"), "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
        }).encode()
    )  # fmt: skip
    site.routes["/token"] = token


@pytest.mark.parametrize("token", ["trickled", "trickled-head", "deep", "huge"])
def test_token_reply_is_bounded_through_connect(site, token, no_leaks):
    reply = json.dumps({"access_token": "t", "token_type": "Bearer", "expires_in": 60}).encode()
    _guarded(site, {
        "trickled": Route(body=reply, trickle=1, every=0.5),
        "trickled-head": Route(body=reply, head_every=0.5),  # ~50 s at this pace
        "deep": Route(body=DEEP),
        "huge": Route(body=b" " * 65536, repeat=256, length=False),
    }[token])  # fmt: skip
    auth = mcpsync.auth.OAuth.client_credentials("svc", "s3cret-value", timeout=2.0)
    started = time.monotonic()
    with pytest.raises(AuthError) as info:
        mcpsync.Session.connect(
            site.url("/mcp"), auth=auth, connect_timeout=30, transport="streamable-http"
        )
    ended = time.monotonic()
    auth.close()
    asked = [t for t, m, p in site.seen if (m, p) == ("POST", "/token")]
    words = {
        "trickled": "timeout=2 s",
        "trickled-head": "timeout=2 s",
        "deep": "nested deeper than 64 levels",
        "huge": "larger than 1048576 bytes",
    }[token]
    assert words in str(info.value) and "s3cret" not in str(info.value)
    # the bound is the token exchange's (OAuth timeout=2): from the POST reaching the server
    # (its deadline started just before) to the error; the rest of the connect is not in it
    assert len(asked) == 1 and ended - asked[0] <= 2.0 + SLACK, (ended - asked[0], ended - started)


# -- icons (the opt-in fetch_icon) ----------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def test_icon_fetch_is_bounded(site, no_leaks):
    from mcpsync.display.icons import Icon, fetch_icon

    icon = Icon(site.url("/icon.png"), "https", "image/png")
    site.routes["/icon.png"] = Route(
        body=PNG, headers={"Content-Type": "image/png"}, trickle=1, every=0.5
    )
    started = time.monotonic()
    assert fetch_icon(icon, timeout=2.0) is None  # 36 s at this pace: cut at the deadline
    assert 2.0 - 0.2 <= time.monotonic() - started <= 2.0 + SLACK
    site.routes["/icon.png"] = Route(body=PNG, headers={"Content-Type": "image/png"})
    fetched = fetch_icon(icon, timeout=2.0)
    assert fetched is not None and fetched.kind == "data" and fetched.data == PNG


# -- https with Session.connect(verify=): the OAuth session's pinned TLS adapter -------------


@pytest.fixture
def tls_site(tmp_path) -> Iterator[tuple[HostileHTTP, str]]:
    """An https ``HostileHTTP`` and the CA file that verifies it."""
    pytest.importorskip("cryptography")
    from servers.selfsigned import make_pki

    pki = make_pki(tmp_path)
    with HostileHTTP(tls=(pki["cert"], pki["key"])) as s:
        yield s, pki["ca"]


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/token"], ids=["prm", "token"]
)
def test_a_trickled_head_is_cut_with_pinned_tls_settings(tls_site, path, no_leaks):
    # verify= mounts mcpsync's own adapter on the OAuth session (TLS settings that win over
    # REQUESTS_CA_BUNDLE); its fetches kept requests' per-read bound: 30 s, connect_timeout
    site, ca = tls_site
    reply = json.dumps({"access_token": "t", "token_type": "Bearer", "expires_in": 60}).encode()
    _guarded(site, Route(body=reply))
    site.routes[path] = Route(body=site.routes[path].body, head_every=0.5)  # ~50 s at this pace
    auth = mcpsync.auth.OAuth.client_credentials("svc", "s3cret-value", timeout=2.0)
    with pytest.raises(AuthError) as info:
        mcpsync.Session.connect(
            site.url("/mcp"), auth=auth, connect_timeout=30, verify=ca, transport="streamable-http"
        )
    ended = time.monotonic()
    auth.close()
    asked = [t for t, _, p in site.seen if p == path]
    assert "timeout=2 s" in str(info.value) and "s3cret" not in str(info.value)
    assert len(asked) == 1 and ended - asked[0] <= 2.0 + SLACK, ended - asked[0]


# -- every auth fetch through the public API: Session.connect(url, auth=OAuth(...)) ----------


def _auth_world(site: HostileHTTP) -> None:
    """An MCP endpoint behind OAuth whose authorization server offers registration, the
    authorization code (a headless redirect), the device flow and the jwt-bearer grant."""
    o = site.origin
    _guarded(site, Route(body=json.dumps({"access_token": "t", "token_type": "Bearer"}).encode()))
    site.routes["/.well-known/oauth-authorization-server"] = Route(
        body=json.dumps({
            "issuer": o, "token_endpoint": o + "/token", "authorization_endpoint": o + "/authorize",
            "registration_endpoint": o + "/register", "device_authorization_endpoint": o + "/device",
            "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code", "refresh_token", DEVICE_GRANT, JWT_GRANT],
        }).encode()
    )  # fmt: skip
    site.routes["/register"] = Route(201, json.dumps({"client_id": "cid"}).encode())
    site.routes["/device"] = Route(
        body=json.dumps({**DEVICE, "verification_uri": o + "/d"}).encode()
    )
    site.routes["/idp/token"] = Route(body=json.dumps(JAG).encode())


DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
AUTH_FETCHES: dict[str, tuple[str, Callable[[HostileHTTP], Any]]] = {
    "prm": (
        "/.well-known/oauth-protected-resource/mcp",
        lambda s: mcpsync.auth.OAuth(redirect="headless", timeout=2.0),
    ),
    "as-metadata": (
        "/.well-known/oauth-authorization-server",
        lambda s: mcpsync.auth.OAuth(redirect="headless", timeout=2.0),
    ),
    "registration": ("/register", lambda s: mcpsync.auth.OAuth(redirect="headless", timeout=2.0)),
    "device": ("/device", lambda s: mcpsync.auth.OAuth(redirect="device", timeout=2.0)),
    "id-jag": (
        "/idp/token",
        lambda s: mcpsync.auth.OAuth.enterprise_managed(
            "app",
            "s3cret-value",
            id_token="idt",
            idp_token_endpoint=s.url("/idp/token"),
            timeout=2.0,
        ),  # fmt: skip
    ),
}
HOSTILE = {
    "head": lambda r: Route(r.status, r.body, r.headers, head_every=0.5),
    "body": lambda r: Route(r.status, r.body, r.headers, trickle=1, every=0.5),
    "deep": lambda r: Route(r.status, DEEP, r.headers),
}


@pytest.mark.parametrize("how", list(HOSTILE))
@pytest.mark.parametrize("fetched", list(AUTH_FETCHES))
def test_every_auth_fetch_is_bounded_through_connect(site, fetched, how, no_leaks):
    """Each document OAuth fetches on a server's word, trickled (head or body, 1 byte /
    0.5 s) or nested 200,000 deep: an AuthError naming it within OAuth(timeout=2) + 0.5 s
    of its request, whatever connect_timeout allows."""
    _auth_world(site)
    path, make = AUTH_FETCHES[fetched]
    site.routes[path] = HOSTILE[how](site.routes[path])
    auth = make(site)
    with pytest.raises(AuthError) as info:
        mcpsync.Session.connect(
            site.url("/mcp"), auth=auth, connect_timeout=30, transport="streamable-http"
        )
    ended = time.monotonic()
    auth.close()
    asked = [t for t, _, p in site.seen if p == path]
    words = "nested deeper than 64 levels" if how == "deep" else "timeout=2 s"
    assert words in str(info.value) and "s3cret" not in str(info.value), info.value
    assert len(asked) == 1 and ended - asked[0] <= 2.0 + SLACK, (ended - asked[0], site.paths())
