"""``OAuth(redirect="auto")`` where no browser can be opened (no display, as over SSH):
against a real authorization server (panva/oidc-provider, deviceFlow enabled) it takes the
RFC 8628 device grant instead of a loopback redirect nobody could complete. The person on
another device goes through oidc-provider's own pages (``test_auth_e2e_device.Person``)."""

from __future__ import annotations

import sys
import threading

import pytest
from auth_peers.protected_mcp import ProtectedMCPServer
from test_auth_e2e_device import Person
from test_auth_e2e_oidc import OIDCProvider, session_roundtrip

from mcpsync.auth import OAuth
from mcpsync.auth.device import DEVICE_CODE_GRANT, DeviceFlow

pytestmark = pytest.mark.real


def test_auto_without_a_display_runs_the_device_grant(monkeypatch):
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    person = Person()
    monkeypatch.setattr("mcpsync.auth.device.show_device_code", person.display)
    quick = threading.Event()  # poll more often than the 5 s interval: oidc-provider allows it
    monkeypatch.setattr(DeviceFlow, "_wait_event", lambda self, s: quick.wait(min(s, 0.2)))
    with OIDCProvider() as provider, ProtectedMCPServer(provider.issuer) as rs:
        s0 = provider.stats()
        auth = OAuth(client_name="mcpsync-auto")  # redirect="auto", the default
        out = session_roundtrip(auth, rs.url)
        assert person.done.wait(15) and "Sign-in Success" in str(person.outcome)
        assert out["sub"] == "test-user" and len(person.codes) == 1
        s1 = provider.stats()
        assert s1["tokens"].get(DEVICE_CODE_GRANT, 0) - s0["tokens"].get(DEVICE_CODE_GRANT, 0) == 1
        assert s1["tokens"].get("authorization_code", 0) == s0["tokens"].get(
            "authorization_code", 0
        )
