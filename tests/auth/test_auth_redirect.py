"""Redirect handlers: loopback listener, paste, callable, headless, auto choice."""

from __future__ import annotations

import sys
import threading
import types
import urllib.error
import urllib.request
import webbrowser

import pytest
import requests
import responses
from auth_peers.mock_world import World

from mcpsync.auth import (
    DEFAULT_REDIRECT_URI,
    CallableRedirect,
    HeadlessRedirect,
    LoopbackRedirect,
    OAuth,
    PasteRedirect,
    headless_redirect,
)
from mcpsync.auth.redirect import resolve_redirect
from mcpsync.errors import AuthError, ConfigError

_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


def _get(url: str) -> int:
    try:
        with _direct.open(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_loopback_accepts_exactly_one_redirect_with_the_right_state(monkeypatch, no_leaks):
    lb = LoopbackRedirect(print_fn=lambda s: None)
    uri = lb.prepare()
    assert uri.startswith("http://127.0.0.1:") and uri.endswith("/callback")
    assert int(uri.split(":")[2].split("/")[0]) > 0
    probes: list[int] = []

    def browser(url):  # runs once complete() is waiting for "good-state"
        probes.append(_get(uri.replace("/callback", "/other") + "?state=good-state&code=x"))
        probes.append(_get(uri + "?state=bad-state&code=x"))
        probes.append(_get(uri + "?code=x"))
        assert not lb._got.is_set()  # none of those counted
        probes.append(_get(uri + "?state=good-state&code=the-code&iss=https%3A%2F%2Fas"))
        return True

    monkeypatch.setattr(webbrowser, "open", browser)
    result = lb.complete("https://as/authorize", "good-state", 10)
    assert probes == [400, 400, 400, 200]
    assert result == uri + "?state=good-state&code=the-code&iss=https%3A%2F%2Fas"
    with pytest.raises(OSError):  # listener is gone after one redirect
        _direct.open(uri + "?state=good-state&code=again", timeout=2)


def test_loopback_timeout_closes_the_listener(no_leaks):
    lb = LoopbackRedirect(open_browser=False, print_fn=lambda s: None)
    uri = lb.prepare()
    with pytest.raises(AuthError, match="no authorization redirect"):
        lb.complete("https://as/authorize", "s", 0.2)
    with pytest.raises(OSError):
        _direct.open(uri, timeout=2)


def test_loopback_opens_the_browser(monkeypatch, no_leaks):
    opened: list[str] = []

    def fake_open(url):
        opened.append(url)
        threading.Thread(target=_get, args=(f"{uri}?state=st&code=c",), name="test-browser").start()
        return True

    monkeypatch.setattr(webbrowser, "open", fake_open)
    printed: list[str] = []
    lb = LoopbackRedirect(print_fn=printed.append)
    uri = lb.prepare()
    assert lb.complete("https://as/authorize?x=1", "st", 10).endswith("?state=st&code=c")
    assert opened == ["https://as/authorize?x=1"] and "https://as/authorize?x=1" in printed


def test_oauth_with_loopback_end_to_end(monkeypatch, no_leaks):
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        w = World(rsps)

        def browser(url):  # the "browser": the AS approves and redirects to our listener
            threading.Thread(target=_get, args=(w.approve(url),), name="test-browser").start()
            return True

        monkeypatch.setattr(webbrowser, "open", browser)
        auth = OAuth(redirect=LoopbackRedirect(print_fn=lambda s: None))
        r = requests.post(
            w.server, json={"jsonrpc": "2.0", "id": 1, "method": "x"}, auth=auth, timeout=10
        )
        assert r.status_code == 200
        redirect_uri = w.as_.authorizations[0]["redirect_uri"]
        assert (
            redirect_uri.startswith("http://127.0.0.1:")
            and w.as_.registrations[0]["application_type"] == "native"
        )


def test_paste_reads_the_url_and_allows_bare_codes():
    printed: list[str] = []
    p = PasteRedirect(
        input_fn=lambda prompt: "  http://127.0.0.1:8976/callback?code=c&state=s \n",
        print_fn=printed.append,
    )
    assert p.prepare() == DEFAULT_REDIRECT_URI
    assert (
        p.complete("https://as/authorize?q", "s", 5)
        == "http://127.0.0.1:8976/callback?code=c&state=s"
    )
    assert "https://as/authorize?q" in printed and p.allow_bare_code


def test_paste_end_of_input_is_auth_error():
    def eof(prompt):
        raise EOFError

    with pytest.raises(AuthError, match="end of input"):
        PasteRedirect(input_fn=eof, print_fn=lambda s: None).complete("u", "s", 1)


def test_callable_must_return_a_string():
    with pytest.raises(AuthError):
        CallableRedirect(lambda u: None).complete("u", "s", 1)
    assert CallableRedirect(lambda u: u + "!", "http://x/cb").complete("u", "s", 1) == "u!"


@responses.activate
def test_headless_follows_same_origin_hops_with_cookies_and_stops_off_origin():
    responses.get(
        "https://as.example.com/authorize",
        status=303,
        headers={"Location": "/interaction/1", "Set-Cookie": "sid=abc; Path=/"},
    )
    seen = {}

    def consent(req):
        seen["cookie"] = req.headers.get("Cookie")
        return 302, {"Location": "http://127.0.0.1:9/cb?code=c&state=s"}, ""

    responses.add_callback(responses.GET, "https://as.example.com/interaction/1", callback=consent)
    assert (
        headless_redirect("https://as.example.com/authorize?x=1")
        == "http://127.0.0.1:9/cb?code=c&state=s"
    )
    assert seen["cookie"] == "sid=abc"


@responses.activate
def test_headless_stops_at_redirect_uri_even_on_the_same_origin():
    responses.get(
        "https://as.example.com/authorize",
        status=302,
        headers={"Location": "https://as.example.com/cb?code=c"},
    )
    h = HeadlessRedirect("https://as.example.com/cb")
    assert (
        h.complete("https://as.example.com/authorize", "s", 5) == "https://as.example.com/cb?code=c"
    )


@responses.activate
def test_headless_login_page_is_an_error():
    responses.get("https://as.example.com/authorize", status=200, body="<form>login</form>")
    with pytest.raises(AuthError, match="without a redirect"):
        headless_redirect("https://as.example.com/authorize")


@responses.activate
def test_headless_redirect_loop_is_bounded():
    responses.get("https://as.example.com/a", status=302, headers={"Location": "/a"})
    with pytest.raises(AuthError, match="more than 3"):
        headless_redirect("https://as.example.com/a", max_hops=3)


def test_auto_picks_paste_in_a_notebook(monkeypatch):
    import IPython

    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=object()))
    assert isinstance(resolve_redirect("auto"), PasteRedirect)


def test_ipykernel_imported_outside_a_kernel_is_not_a_notebook(monkeypatch):
    import ipykernel  # noqa: F401 - a script importing ipywidgets has it too

    from mcpsync.auth.redirect import _in_notebook

    assert not _in_notebook()  # pytest is no kernel: get_ipython() is None


def test_auto_picks_paste_without_a_display(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert isinstance(resolve_redirect("auto"), PasteRedirect)


def test_auto_picks_loopback_with_a_browser(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.setattr(webbrowser, "get", lambda *a: object())
    assert isinstance(resolve_redirect("auto"), LoopbackRedirect)


def test_auto_picks_paste_when_no_browser_is_registered(monkeypatch):
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    monkeypatch.setenv("DISPLAY", ":0")

    def no_browser(*a):
        raise webbrowser.Error("none")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    assert isinstance(resolve_redirect("auto"), PasteRedirect)


def test_explicit_modes_and_errors():
    lb = resolve_redirect("terminal", "http://127.0.0.1:8123/cb")
    assert isinstance(lb, LoopbackRedirect) and (lb.port, lb.path) == (8123, "/cb")
    assert isinstance(resolve_redirect("paste"), PasteRedirect)
    assert isinstance(
        resolve_redirect("headless", "http://localhost:3000/callback"), HeadlessRedirect
    )
    c = resolve_redirect(lambda u: u, "http://x/cb")
    assert isinstance(c, CallableRedirect) and c.prepare() == "http://x/cb"
    with pytest.raises(ConfigError):
        resolve_redirect("carrier-pigeon")
    with pytest.raises(ConfigError):
        resolve_redirect(42)
    with pytest.raises(ConfigError):
        resolve_redirect("terminal", "https://app.example.com/cb")
