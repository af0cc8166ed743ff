"""The device authorization grant (RFC 8628) end to end against a real authorization server:
panva/oidc-provider (deviceFlow feature) on loopback, a JWT-verifying MCP server, and a
"person on another device" who opens the verification URI with ``requests`` and goes
through oidc-provider's own pages (user-code form, confirmation, login + consent
interactions). Real HTTP everywhere, nothing mocked."""

from __future__ import annotations

import re
import threading
from typing import Any
from urllib.parse import urljoin

import pytest
import requests
from auth_peers.protected_mcp import ProtectedMCPServer
from test_auth_e2e_oidc import OIDCProvider, session_roundtrip

from mcpsync.auth import OAuth
from mcpsync.auth.device import DEVICE_CODE_GRANT, DeviceCode, DeviceFlow
from mcpsync.errors import AccessDenied

pytestmark = pytest.mark.real

_FORM = re.compile(r"<form[^>]*action=\"([^\"]+)\"[^>]*>(.*?)</form>", re.S)
_HIDDEN = re.compile(r"<input type=\"hidden\" name=\"([^\"]+)\" value=\"([^\"]*)\"")


def _form(page: requests.Response) -> tuple[str, dict[str, str]]:
    m = _FORM.search(page.text)
    assert m, f"no form on {page.url}: {page.text[:300]}"
    return urljoin(page.url, m.group(1)), dict(_HIDDEN.findall(m.group(2)))


class Person:
    """Approves (or aborts) a shown device code in oidc-provider's pages, on a thread."""

    def __init__(self, *, abort: bool = False) -> None:
        self.abort = abort
        self.codes: list[DeviceCode] = []
        self.done = threading.Event()
        self.outcome: str | BaseException = "not run"

    def display(self, code: DeviceCode) -> None:
        self.codes.append(code)
        threading.Thread(target=self._run, args=(code,), name="test-person", daemon=True).start()

    def _run(self, code: DeviceCode) -> None:
        try:
            with requests.Session() as browser:
                assert code.verification_uri_complete
                page = browser.get(code.verification_uri_complete, timeout=15)
                action, fields = _form(page)  # the user code, pre-filled
                assert fields["user_code"] == code.user_code
                page = browser.post(action, data=fields, timeout=15)
                action, fields = _form(page)  # "Confirm Device"
                if self.abort:
                    fields.pop("confirm", None)
                    fields["abort"] = "yes"
                page = browser.post(action, data=fields, timeout=15)  # -> login, consent
                self.outcome = page.text
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.outcome = exc
        finally:
            self.done.set()


@pytest.fixture(scope="module")
def provider():
    with OIDCProvider() as p:
        yield p


def test_device_flow_approved_on_another_device(provider):
    with ProtectedMCPServer(provider.issuer) as rs:
        s0 = provider.stats()
        person = Person()
        auth = OAuth(client_name="mcpsync-device", redirect=DeviceFlow(display=person.display))
        out = session_roundtrip(auth, rs.url)  # polls at the AS's interval (5 s)
        assert person.done.wait(15) and "Sign-in Success" in str(person.outcome)
        assert out["sub"] == "test-user" and "mcp:read" in out["scope"]
        s1 = provider.stats()
        assert s1["registrations"] - s0["registrations"] == 1
        assert s1["tokens"].get(DEVICE_CODE_GRANT, 0) - s0["tokens"].get(DEVICE_CODE_GRANT, 0) == 1
        assert s1["logins"] - s0["logins"] == 1 and s1["consents"] - s0["consents"] == 1
        (code,) = person.codes
        assert code.verification_uri.startswith(provider.issuer) and code.expires_in > 0
        # the token the MCP server accepted is a JWT for exactly this server
        assert all(r["claims"]["aud"] == rs.url for r in rs.requests if r["status"] == 200)


def test_device_flow_aborted_by_the_person(provider):
    with ProtectedMCPServer(provider.issuer) as rs:
        person = Person(abort=True)
        fast = threading.Event()  # poll more often than the interval: oidc-provider allows it
        flow = DeviceFlow(display=person.display, wait=lambda s: fast.wait(min(s, 0.2)))
        auth = OAuth(client_name="mcpsync-device", redirect=flow)
        with pytest.raises(AccessDenied) as info, requests.Session() as http:
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
            http.post(rs.url, json=body, auth=auth, timeout=30)
        assert person.done.wait(15)
        assert info.value.step == "device_code" and info.value.error == "access_denied"
        assert not auth.authorized


def test_session_connect_with_the_device_flow(provider, no_leaks):
    import mcpsync

    with ProtectedMCPServer(provider.issuer) as rs:
        person = Person()
        quick = threading.Event()
        flow = DeviceFlow(display=person.display, wait=lambda s: quick.wait(min(s, 0.2)))
        auth = OAuth(client_name="mcpsync-device", redirect=flow)
        with mcpsync.Session.connect(rs.url, auth=auth, timeout=30, connect_timeout=60) as s:
            assert [t.name for t in s.list_tools()] == ["whoami"]
        assert person.done.wait(15) and auth.authorized and len(person.codes) == 1
