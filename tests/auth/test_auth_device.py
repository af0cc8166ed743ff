"""The device authorization grant (RFC 8628) as OAuth's redirect mode, against a mocked MCP
server + AS (``responses``): polling at ``interval``, slow_down (+5 s), authorization_pending,
expired_token, access_denied, the code's lifetime, cancel() and Ctrl-C, the display (text
and notebook HTML), the client it registers. A fake clock and wait: no test sleeps."""

from __future__ import annotations

import _thread
import io
import json
import logging
import sys
import threading
import time
import types
from typing import Any
from urllib.parse import parse_qsl

import pytest
import requests
import responses
from auth_peers.mock_world import ISSUER, SERVER, World, post

from mcpsync.auth import MemoryTokenStore, OAuth
from mcpsync.auth.device import DEVICE_CODE_GRANT, DeviceCode, DeviceFlow
from mcpsync.auth.redirect import no_browser_reason
from mcpsync.errors import AccessDenied, AuthError, ConfigError, ExpiredToken, TokenError

DEVICE_CODE = "dc-secret-device-code-0123456789"


class DeviceAS:
    """The World's AS with a device endpoint; /token answers the scripted ``answers``."""

    def __init__(self, w: World, answers: list[str], *, expires_in: int = 600, interval=5):
        self.w = w
        self.answers = list(answers)  # OAuth error codes, or "ok"
        self.expires_in = expires_in
        self.interval = interval
        self.device_requests: list[dict[str, Any]] = []
        self.polls: list[dict[str, Any]] = []
        a = w.as_
        a.metadata["device_authorization_endpoint"] = f"{ISSUER}/device/auth"
        a.metadata["grant_types_supported"] = [DEVICE_CODE_GRANT, "refresh_token"]
        w.rsps.add_callback(responses.POST, f"{ISSUER}/device/auth", callback=self._device)
        w.rsps.replace(
            responses.CallbackResponse(responses.POST, f"{ISSUER}/token", callback=self._token)
        )

    def _device(self, req):
        form = dict(parse_qsl(req.body))
        self.device_requests.append({"form": form, "headers": dict(req.headers)})
        body: dict[str, Any] = {
            "device_code": DEVICE_CODE,
            "user_code": "WDJB-MJHT",
            "verification_uri": f"{ISSUER}/device",
            "verification_uri_complete": f"{ISSUER}/device?user_code=WDJB-MJHT",
            "expires_in": self.expires_in,
        }
        if self.interval is not None:
            body["interval"] = self.interval
        return 200, {"Content-Type": "application/json"}, json.dumps(body)

    def _token(self, req):
        form = dict(parse_qsl(req.body))
        self.polls.append(form)
        hdr = {"Content-Type": "application/json"}
        assert form["grant_type"] == DEVICE_CODE_GRANT and form["device_code"] == DEVICE_CODE
        answer = self.answers.pop(0) if self.answers else "authorization_pending"
        if answer == "unreachable":
            raise requests.ConnectionError("connection refused")  # what requests raises
        if answer in ("502", "429"):  # a proxy's page in front of the AS
            return int(answer), {"Content-Type": "text/html"}, "<html>Bad Gateway</html>"
        if answer == "html":  # a login page, answered 200
            return 200, {"Content-Type": "text/html"}, "<html><form>Sign in</form></html>"
        if answer in ("server_error", "temporarily_unavailable"):
            return 503, hdr, json.dumps({"error": answer})
        if answer != "ok":
            return 400, hdr, json.dumps({"error": answer, "error_description": f"{answer}!"})
        at = f"at-{len(self.polls)}"
        self.w.valid_tokens[at] = {"scopes": [], "issuer": ISSUER, "resource": form["resource"]}
        return 200, hdr, json.dumps({"access_token": at, "token_type": "Bearer", "expires_in": 60})


class FakeTime:
    """clock + wait for DeviceFlow: waiting advances the clock; records each wait."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False


def device_auth(t: FakeTime, shown: list[DeviceCode] | None = None, **kw) -> OAuth:
    flow = DeviceFlow(display=(shown.append if shown is not None else lambda c: None),
                      clock=t.clock, wait=t.wait)  # fmt: skip
    return OAuth(client_name="dev-cli", redirect=flow, **kw)


def test_pending_slow_down_then_approved(rsps, http):
    w = World(rsps, prm_scopes=["mcp:read"])
    d = DeviceAS(w, ["authorization_pending", "slow_down", "authorization_pending", "ok"])
    t, shown = FakeTime(), []
    auth = device_auth(t, shown)
    assert post(http, auth).status_code == 200
    assert t.waits == [5, 5, 10, 10]  # interval, interval, +5 after slow_down, kept
    assert len(d.polls) == 4 and all(p["resource"] == SERVER for p in d.polls)
    (code,) = shown
    assert code.user_code == "WDJB-MJHT" and code.verification_uri == f"{ISSUER}/device"
    assert DEVICE_CODE not in repr(code)
    (dev,) = d.device_requests
    assert dev["form"]["resource"] == SERVER and dev["form"]["scope"] == "mcp:read"
    # a client registered for the device grant (no redirect URI), then stored
    (reg,) = w.as_.registrations
    assert reg["grant_types"] == [DEVICE_CODE_GRANT, "refresh_token"]
    assert reg["redirect_uris"] == [] and reg["response_types"] == []
    assert dev["form"]["client_id"] == d.polls[0]["client_id"]
    assert w.authorization_count() == 0  # no authorization-code redirect at all


def test_stored_device_client_is_reused(rsps, http):
    w = World(rsps)
    d = DeviceAS(w, ["ok", "ok"])
    store = MemoryTokenStore()
    first = device_auth(FakeTime(), store=store)
    assert post(http, first).status_code == 200
    first.logout()  # the token goes; the registration stays in the store
    assert post(http, device_auth(FakeTime(), store=store), rid=2).status_code == 200
    assert len(w.as_.registrations) == 1 and len(d.device_requests) == 2


def test_preregistered_confidential_client_authenticates_at_the_device_endpoint(rsps, http):
    w = World(rsps, as_metadata={"token_endpoint_auth_methods_supported": ["client_secret_basic"]})
    w.preregister("tv-app", "tv-secret")
    d = DeviceAS(w, ["ok"])
    flow = DeviceFlow(display=lambda c: None, clock=FakeTime().clock, wait=FakeTime().wait)
    auth = OAuth(client_id="tv-app", client_secret="tv-secret", redirect=flow)
    assert post(http, auth).status_code == 200
    dev = d.device_requests[0]
    assert dev["headers"]["Authorization"].startswith("Basic ") and "client_id" not in dev["form"]
    assert w.as_.registrations == []


@pytest.mark.parametrize(
    ("answer", "kind"), [("access_denied", AccessDenied), ("expired_token", ExpiredToken)]
)
def test_denied_or_expired_at_the_as_is_typed_and_final(rsps, http, caplog, answer, kind):
    w = World(rsps)
    d = DeviceAS(w, ["authorization_pending", answer, "ok"])
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    with pytest.raises(kind) as info:
        post(http, device_auth(FakeTime()))
    assert isinstance(info.value, TokenError) and info.value.step == "device_code"
    assert info.value.error == answer and len(d.polls) == 2  # stopped polling at once
    assert DEVICE_CODE not in str(info.value) and DEVICE_CODE not in caplog.text


def test_the_codes_lifetime_bounds_the_polling(rsps, http):
    w = World(rsps)
    d = DeviceAS(w, [], expires_in=12)  # forever pending
    t = FakeTime()
    with pytest.raises(ExpiredToken, match="within 12 s"):
        post(http, device_auth(t))
    assert t.waits == [5, 5, 2] and len(d.polls) == 2  # t=5, t=10 polled; t=15 is past: ends at 12


def test_authorization_timeout_bounds_it_too_and_interval_defaults_to_5(rsps, http):
    w = World(rsps)
    d = DeviceAS(w, [], expires_in=1800, interval=None)
    t = FakeTime()
    auth = device_auth(t)
    auth.authorization_timeout = 20
    with pytest.raises(ExpiredToken):
        post(http, auth)
    assert t.waits == [5, 5, 5, 5] and len(d.polls) == 3


def test_no_device_endpoint_is_a_config_error(rsps, http):
    World(rsps)
    with pytest.raises(ConfigError, match="device authorization endpoint"):
        post(http, OAuth(redirect="device"))


def test_device_endpoint_refusal_is_typed(rsps, http):
    w = World(rsps)
    DeviceAS(w, [])
    rsps.replace(
        responses.POST, f"{ISSUER}/device/auth", status=400, json={"error": "invalid_scope"}
    )
    with pytest.raises(TokenError) as info:
        post(http, device_auth(FakeTime()))
    assert info.value.step == "device_authorization" and info.value.error == "invalid_scope"


def test_cancel_from_another_thread_ends_the_wait(rsps, http):
    w = World(rsps)
    DeviceAS(w, [], interval=60)
    started = threading.Event()
    flow = DeviceFlow(display=lambda c: started.set())
    threading.Thread(
        target=lambda: started.wait(10) and flow.cancel(), name="test-cancel", daemon=True
    ).start()
    t0 = time.monotonic()
    with pytest.raises(AuthError, match="cancelled"):
        post(http, OAuth(redirect=flow))
    assert time.monotonic() - t0 < 10  # not the 60 s interval


def test_ctrl_c_interrupts_the_wait(rsps, http):
    w = World(rsps)
    DeviceAS(w, [], interval=60)
    shown = threading.Event()
    flow = DeviceFlow(display=lambda c: shown.set())
    threading.Thread(
        target=lambda: shown.wait(10) and _thread.interrupt_main(), name="test-sigint", daemon=True
    ).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        post(http, OAuth(redirect=flow))
    assert time.monotonic() - t0 < 10


def test_terminal_display_on_stderr(rsps, http, capsys):
    import ipykernel  # noqa: F401 - imported is not "in a notebook": the text still goes to stderr

    w = World(rsps)
    DeviceAS(w, ["ok"])
    t = FakeTime()
    auth = OAuth(redirect=DeviceFlow(clock=t.clock, wait=t.wait))
    assert post(http, auth).status_code == 200
    err = capsys.readouterr().err
    assert f"{ISSUER}/device" in err and "WDJB-MJHT" in err and "user_code=WDJB-MJHT" in err
    assert "Ctrl-C" in err and DEVICE_CODE not in err


def test_notebook_display_is_an_html_link(rsps, http, monkeypatch, capsys):
    w = World(rsps)
    DeviceAS(w, ["ok"])
    shown: list[Any] = []

    class HTML:
        def __init__(self, data: str) -> None:
            self.data = data

    display_mod = types.ModuleType("IPython.display")
    display_mod.HTML = HTML  # type: ignore[attr-defined]
    display_mod.display = shown.append  # type: ignore[attr-defined]
    ipython = types.ModuleType("IPython")
    ipython.display = display_mod  # type: ignore[attr-defined]
    kernel_shell = types.SimpleNamespace(kernel=object())  # what a running kernel's shell has
    ipython.get_ipython = lambda: kernel_shell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display_mod)
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    t = FakeTime()
    assert post(http, OAuth(redirect=DeviceFlow(clock=t.clock, wait=t.wait))).status_code == 200
    (block,) = shown
    assert f"href='{ISSUER}/device?user_code=WDJB-MJHT'" in block.data
    assert "<b>WDJB-MJHT</b>" in block.data and DEVICE_CODE not in block.data
    assert capsys.readouterr().err == ""


def test_redirect_device_string_selects_the_device_flow(rsps, http, monkeypatch):
    w = World(rsps)
    d = DeviceAS(w, ["ok"])
    monkeypatch.setattr(DeviceFlow, "_wait_event", lambda self, s: False)
    monkeypatch.setattr("mcpsync.auth.device.show_device_code", lambda c: None)
    assert post(http, OAuth(redirect="device")).status_code == 200
    assert len(d.device_requests) == 1 and w.authorization_count() == 0


def test_cli_device_flag_selects_the_device_flow(rsps, http, monkeypatch, tmp_path):
    from mcpsync.cli.arguments import _sub_parser
    from mcpsync.cli.targets import resolve_target

    monkeypatch.setenv("HOME", str(tmp_path))  # a token file store, if any, stays in tmp
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    w = World(rsps)
    d = DeviceAS(w, ["authorization_pending", "ok"])
    monkeypatch.setattr(DeviceFlow, "_wait_event", lambda self, s: False)
    monkeypatch.setattr("mcpsync.auth.device.show_device_code", lambda c: None)
    ns = _sub_parser("tools").parse_intermixed_args([SERVER, "--device"])
    target, _ = resolve_target(ns, None, 0)
    assert isinstance(target.kwargs["auth"], OAuth)  # --device implies --oauth
    assert post(http, target.kwargs["auth"]).status_code == 200
    assert len(d.device_requests) == 1 and len(d.polls) == 2 and w.authorization_count() == 0
    plain = resolve_target(_sub_parser("tools").parse_intermixed_args([SERVER]), None, 0)[0]
    assert "auth" not in plain.kwargs


def test_every_poll_carries_a_fresh_dpop_proof(rsps, http):
    pytest.importorskip("cryptography")
    import jwt

    w = World(rsps)
    w.as_.metadata["dpop_signing_alg_values_supported"] = ["ES256"]
    d = DeviceAS(w, ["authorization_pending", "ok"])
    proofs: list[str] = []
    original = d._token

    def token(req):
        proofs.append(req.headers.get("DPoP"))
        return original(req)

    rsps.replace(responses.CallbackResponse(responses.POST, f"{ISSUER}/token", callback=token))
    assert post(http, device_auth(FakeTime(), dpop=True)).status_code == 200
    assert len(proofs) == 2 and all(proofs) and proofs[0] != proofs[1]
    jtis = {jwt.decode(p, options={"verify_signature": False})["jti"] for p in proofs}
    assert len(jtis) == 2


# -- hiccups while polling -------------------------------------------------------------


def test_poll_hiccups_are_retried_with_backoff(rsps, http, caplog):
    """Unreachable, a 502 page, a 503 server_error, a 429, temporarily_unavailable: each
    doubles the wait (RFC 8628 3.5) and polling goes on; an answer resets the interval."""
    w = World(rsps)
    hiccups = ["unreachable", "502", "server_error", "429"]
    d = DeviceAS(w, ["authorization_pending", *hiccups, "authorization_pending", "ok"])
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    t = FakeTime()
    assert post(http, device_auth(t)).status_code == 200
    assert t.waits == [5, 5, 10, 20, 40, 60, 5]  # 2**n x interval, at most 60 s
    assert len(d.polls) == 7
    assert "token endpoint ConnectionError" in caplog.text and "HTTP 502" in caplog.text
    assert DEVICE_CODE not in caplog.text


def test_poll_hiccups_stay_bounded_by_the_codes_lifetime(rsps, http):
    w = World(rsps)
    d = DeviceAS(w, ["unreachable"] * 10, expires_in=30)
    t = FakeTime()
    with pytest.raises(ExpiredToken) as info:
        post(http, device_auth(t))
    assert t.waits == [5, 10, 15]  # the last back-off cut to what is left of the 30 s
    assert len(d.polls) == 2
    text = str(info.value)
    assert "within 30 s" in text and "failing (ConnectionError)" in text
    assert info.value.step == "device_code" and DEVICE_CODE not in text


def test_temporarily_unavailable_then_approved(rsps, http):
    w = World(rsps)
    DeviceAS(w, ["temporarily_unavailable", "ok"])
    t = FakeTime()
    assert post(http, device_auth(t)).status_code == 200
    assert t.waits == [5, 10]


def test_an_html_answer_while_polling_is_final_and_names_the_step(rsps, http, caplog):
    w = World(rsps)
    d = DeviceAS(w, ["authorization_pending", "html", "ok"])
    caplog.set_level(logging.DEBUG, logger="mcpsync")
    with pytest.raises(AuthError) as info:
        post(http, device_auth(FakeTime()))
    assert not isinstance(info.value, TokenError)  # not the AS refusing: no usable answer
    text = str(info.value)
    assert "(device_code)" in text and "text/html" in text and "HTTP 200" in text
    assert len(d.polls) == 2  # stopped at once
    assert DEVICE_CODE not in text and DEVICE_CODE not in caplog.text


# -- redirect="auto" without a browser ---------------------------------------------------


@pytest.fixture
def no_display(monkeypatch):
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(DeviceFlow, "_wait_event", lambda self, s: False)
    shown: list[DeviceCode] = []
    monkeypatch.setattr("mcpsync.auth.device.show_device_code", shown.append)
    return shown


def test_no_browser_reason(monkeypatch):
    import webbrowser

    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(webbrowser, "get", lambda *a: object())
    monkeypatch.setattr(sys, "platform", "linux")
    assert no_browser_reason() == "no DISPLAY or WAYLAND_DISPLAY"
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-0")
    assert no_browser_reason() is None
    monkeypatch.setenv("SSH_CONNECTION", "10.0.0.1 5000 10.0.0.2 22")
    assert no_browser_reason() is None  # a forwarded display: the browser shows here
    monkeypatch.delenv("WAYLAND_DISPLAY")
    monkeypatch.setattr(sys, "platform", "darwin")  # macOS over SSH: webbrowser.get() works
    assert no_browser_reason() == "an SSH session"
    monkeypatch.delenv("SSH_CONNECTION")
    assert no_browser_reason() is None

    def no_browser(*a):
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    assert no_browser_reason() == "no browser found"


def test_auto_without_a_browser_uses_the_device_grant(rsps, http, no_display):
    w = World(rsps)
    d = DeviceAS(w, ["authorization_pending", "ok"])
    auth = OAuth(client_name="ssh-cli")  # redirect="auto", the default
    assert post(http, auth).status_code == 200
    assert len(d.device_requests) == 1 and len(d.polls) == 2
    assert w.authorization_count() == 0  # no loopback redirect nobody could complete
    (code,) = no_display
    assert code.user_code == "WDJB-MJHT"


def test_auto_without_a_device_endpoint_stays_with_paste(rsps, http, no_display, monkeypatch):
    w = World(rsps)
    d = DeviceAS(w, ["ok"])
    w.as_.metadata["grant_types_supported"] = ["authorization_code", "refresh_token"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # nobody pastes
    with pytest.raises(AuthError, match="no authorization response was pasted"):
        post(http, OAuth())
    assert d.device_requests == [] and no_display == []


def test_auto_with_a_redirect_uri_keeps_the_redirect(rsps, http, no_display, monkeypatch):
    w = World(rsps)
    d = DeviceAS(w, ["ok"])
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with pytest.raises(AuthError, match="no authorization response was pasted"):
        post(http, OAuth(redirect_uri="http://127.0.0.1:8976/callback"))
    assert d.device_requests == []


def test_auto_falls_back_to_paste_when_the_device_request_is_refused(
    rsps, http, no_display, monkeypatch, caplog
):
    w = World(rsps)
    d = DeviceAS(w, ["ok"])
    rsps.replace(
        responses.POST, f"{ISSUER}/device/auth", status=400, json={"error": "unauthorized_client"}
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    caplog.set_level(logging.INFO, logger="mcpsync")
    with pytest.raises(AuthError, match="no authorization response was pasted"):
        post(http, OAuth())
    assert "unauthorized_client" in caplog.text and "using a redirect" in caplog.text
    assert d.polls == [] and no_display == []


def test_explicit_device_mode_does_not_fall_back(rsps, http, no_display):
    w = World(rsps)
    DeviceAS(w, ["ok"])
    rsps.replace(
        responses.POST, f"{ISSUER}/device/auth", status=400, json={"error": "unauthorized_client"}
    )
    with pytest.raises(TokenError) as info:
        post(http, OAuth(redirect="device"))
    assert info.value.error == "unauthorized_client"
