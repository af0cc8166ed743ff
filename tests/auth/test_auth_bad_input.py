"""Bad input at the token endpoint (issue 13 item 7, the generic cases): an authorization
server whose token endpoint answers an HTML page (200 or 500, echoing the request the way
some login and error pages do) gives a typed ``AuthError`` that names the step; for each
grant reachable here (authorization code, refresh, client credentials) the client secret,
the code, the PKCE verifier and the refresh token appear in no exception text, no repr
and no log record (captured at DEBUG, every logger)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

import pytest

import mcpsync
from mcpsync.auth import MemoryTokenStore, OAuth
from mcpsync.demo_server.auth import DemoAuthorizationServer
from mcpsync.demo_server.http import DemoHTTPServer
from mcpsync.errors import AuthError

SECRET = "cc-SECRET-1c2d3e4f5a6b"


class HTMLTokens(DemoAuthorizationServer):
    """The demo authorization server, but its token endpoint answers an HTML page for
    the grant types in ``html_for`` (the page echoes the form and the Authorization
    header). ``forms`` records every token request's form and credentials."""

    def __init__(self, issuer: str, *, status: int = 200, **options: Any) -> None:
        super().__init__(issuer, **options)
        self.status = status
        self.html_for: set[str] = set()
        self.echo_error_for: set[str] = set()
        self.drop_for: set[str] = set()
        self.forms: list[dict[str, str]] = []

    def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> Any:
        if path == "/token" and method == "POST":
            text = body.decode("utf-8", "replace")
            form = {k: v[0] for k, v in parse_qs(text).items()}
            basic = headers.get("authorization", "")
            if basic.lower().startswith("basic "):
                form["basic"] = base64.b64decode(basic[6:]).decode()
            self.forms.append(form)
            if form.get("grant_type") in self.drop_for:  # the connection closes, no reply
                raise ConnectionAbortedError("token endpoint hangs up")
            if form.get("grant_type") in self.echo_error_for:  # an OAuth error quoting the input
                quoted = " ".join(f"{k}={v}" for k, v in form.items())
                error = {"error": "invalid_grant", "error_description": f"rejected: {quoted}"}
                return 400, {"Content-Type": "application/json"}, json.dumps(error).encode()
            if form.get("grant_type") in self.html_for:
                page = (
                    "<!doctype html><html><head><title>Sign in</title></head><body>"
                    f"<h1>Session expired</h1><pre>{text}</pre><p>{basic} {form.get('basic')}</p>"
                    "</body></html>"
                )
                return self.status, {"Content-Type": "text/html; charset=utf-8"}, page.encode()
        return super().handle(method, path, query, headers, body)


def _server(**options: Any) -> tuple[DemoHTTPServer, HTMLTokens]:
    server = DemoHTTPServer(auth=True)
    server._httpd.handle_error = lambda request, address: None  # the hang-ups: quiet
    tokens = HTMLTokens(server.origin, **options)
    server.auth_server = tokens
    return server.start(), tokens


def _assert_absent(secrets: list[str], exc: BaseException, caplog: Any, *objects: Any) -> None:
    secrets = [s for s in secrets if s]
    assert secrets
    texts = [str(exc), repr(exc), caplog.text, *(repr(o) for o in objects)]
    texts += [str(a) for r in caplog.records for a in (r.args or ())]  # unformatted args too
    # the whole chain too: a replaced exception (a requests error holding the request body,
    # oauthlib's error quoting the response, a JSON error holding the page) must not ride along
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or any(e is x for x in seen):
            continue
        seen.append(e)
        texts += [str(e), repr(e), repr(getattr(e, "__dict__", {}))]
        request = getattr(e, "request", None)
        texts.append(repr(getattr(request, "body", None)))
        todo += [e.__cause__, e.__context__]
    for secret in secrets:
        for text in texts:
            assert secret not in text


@pytest.mark.parametrize("status", [200, 500])
def test_client_credentials_token_endpoint_answers_html(status, caplog, no_leaks):
    caplog.set_level(logging.DEBUG)
    server, tokens = _server(status=status, clients={"svc": SECRET})
    tokens.html_for = {"client_credentials"}
    with server:
        auth = OAuth.client_credentials("svc", SECRET)
        with pytest.raises(AuthError) as info:
            mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20)
    text = str(info.value)
    assert "token request (client_credentials)" in text and f"HTTP {status}" in text
    assert "gave no usable token" in text and "text/html" in text
    assert tokens.forms and tokens.forms[0]["basic"] == f"svc:{SECRET}"  # it was sent
    basic = base64.b64encode(f"svc:{SECRET}".encode()).decode()
    _assert_absent([SECRET, basic], info.value, caplog, auth)


def test_code_exchange_answers_html(caplog, no_leaks):
    """The code, the PKCE verifier and the registered client's secret stay out."""
    caplog.set_level(logging.DEBUG)
    server, tokens = _server()
    tokens.html_for = {"authorization_code"}
    with server:
        auth = OAuth(redirect="headless", client_name="bad-input")
        with pytest.raises(AuthError) as info:
            mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20)
    assert "token request (authorization_code)" in str(info.value)
    (form,) = [f for f in tokens.forms if f.get("grant_type") == "authorization_code"]
    secrets = [form["code"], form["code_verifier"], form.get("basic", "").partition(":")[2]]
    _assert_absent(secrets, info.value, caplog, auth)


def test_refresh_answers_html(caplog, no_leaks):
    """A token about to expire is refreshed; the refresh meets an HTML page, the flow
    falls back to a new authorization, whose exchange meets one too: AuthError, and the
    refresh token (and the rest) appear nowhere."""
    caplog.set_level(logging.DEBUG)
    server, tokens = _server(token_seconds=30.0)  # inside OAuth's 60 s refresh window
    store = MemoryTokenStore()
    with server:
        auth = OAuth(redirect="headless", client_name="bad-input", store=store)
        with mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20) as s:
            assert s.call_tool("echo", {"message": "a"}).content[0].text == "a"
            refreshes = [f for f in tokens.forms if f.get("grant_type") == "refresh_token"]
            assert refreshes  # the expiring token was refreshed, successfully so far
            tokens.html_for = {"refresh_token", "authorization_code"}
            with pytest.raises(AuthError) as info:
                s.call_tool("echo", {"message": "b"})
    refreshes = [f for f in tokens.forms if f.get("grant_type") == "refresh_token"]
    failed = refreshes[-1]["refresh_token"]
    assert "refresh" in caplog.text and "token request (refresh_token)" in caplog.text
    codes = [f for f in tokens.forms if f.get("grant_type") == "authorization_code"]
    secrets = [failed, *(f["refresh_token"] for f in refreshes), codes[-1]["code"]]
    secrets += [f.get("basic", "").partition(":")[2] for f in tokens.forms]
    _assert_absent(secrets, info.value, caplog, auth, store)


def test_successful_grants_log_no_secret(caplog, no_leaks):
    """The same three grants when everything works: nothing secret in the logs either."""
    caplog.set_level(logging.DEBUG)
    server, tokens = _server(token_seconds=30.0, clients={"svc": SECRET})
    with server:
        store = MemoryTokenStore()
        auth = OAuth(redirect="headless", client_name="ok", store=store)
        with mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20) as s:
            s.call_tool("echo", {"message": "x"})
        cc = OAuth.client_credentials("svc", SECRET)
        with mcpsync.Session.connect(server.url, auth=cc, connect_timeout=20) as s:
            s.call_tool("echo", {"message": "y"})
    grants = {f.get("grant_type") for f in tokens.forms}
    assert {"authorization_code", "refresh_token", "client_credentials"} <= grants
    secrets = [SECRET]
    for f in tokens.forms:
        secrets += [f.get("code", ""), f.get("code_verifier", ""), f.get("refresh_token", "")]
        secrets.append(f.get("basic", "").partition(":")[2])
    texts = [caplog.text, repr(auth), repr(cc), repr(store)]
    for secret in (s for s in secrets if s):
        assert all(secret not in t for t in texts)


def test_refusals_quoting_the_request_are_redacted(caplog, no_leaks):
    """An authorization server whose OAuth error description quotes the request (secret,
    code, verifier): the TokenError keeps the error code and the step, not the secrets."""
    from mcpsync.errors import TokenError

    caplog.set_level(logging.DEBUG)
    server, tokens = _server(clients={"svc": SECRET})
    tokens.echo_error_for = {"client_credentials", "authorization_code"}
    with server:
        with pytest.raises(TokenError) as cc:
            auth = OAuth.client_credentials(
                "svc", SECRET, token_endpoint_auth_method="client_secret_post"
            )
            mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20)
        assert cc.value.error == "invalid_grant" and cc.value.step == "client_credentials"
        assert "rejected:" in str(cc.value)
        _assert_absent([SECRET], cc.value, caplog, auth)
        with pytest.raises(TokenError) as code:
            auth = OAuth(redirect="headless", client_name="quoted")
            mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20)
        assert code.value.step == "authorization_code"
    (form,) = [f for f in tokens.forms if f.get("grant_type") == "authorization_code"]
    secrets = [form["code"], form["code_verifier"], form.get("basic", "").partition(":")[2]]
    _assert_absent(secrets, code.value, caplog, auth)


def test_token_endpoint_hanging_up(caplog, no_leaks):
    """No reply at all: the AuthError names the request; the requests error it replaces
    (whose request body holds the secret) is not kept in its chain."""
    caplog.set_level(logging.DEBUG)
    server, tokens = _server(clients={"svc": SECRET})
    tokens.drop_for = {"client_credentials"}
    with server:
        auth = OAuth.client_credentials(
            "svc", SECRET, token_endpoint_auth_method="client_secret_post"
        )
        with pytest.raises(AuthError, match="token request to .* failed: ConnectionError") as info:
            mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20)
    assert tokens.forms[-1]["client_secret"] == SECRET  # it was in the request body
    _assert_absent([SECRET], info.value, caplog, auth)
