"""How ``OAuth`` counts authorization attempts per request (``presenting.Obtained``): a
silent refresh is not one, a code authorization, a device grant and a machine grant are;
``max_auth_attempts`` bounds the latter."""

from __future__ import annotations

from typing import Any

import pytest
from auth_peers.mock_world import World, post

from mcpsync.auth import OAuth
from mcpsync.errors import AuthError


def _refreshed_tokens_rejected(w: World) -> None:
    """The AS refreshes, but the MCP server rejects each refreshed token (revoked at once)."""
    issue = w._issue

    def patched(a: Any, scopes: list[str], resource: str, client_id: str) -> dict[str, Any]:
        out = issue(a, scopes, resource, client_id)
        if a.token_requests[-1]["form"].get("grant_type") == "refresh_token":
            w.valid_tokens.pop(out["access_token"], None)
        return out

    w._issue = patched  # type: ignore[method-assign]


def test_a_refresh_is_not_an_authorization_attempt(rsps, http):
    w = World(rsps)
    _refreshed_tokens_rejected(w)
    auth = OAuth(redirect=w.approve, max_auth_attempts=1)
    assert post(http, auth).status_code == 200
    w.valid_tokens.clear()  # the server forgets the token: 401
    # refresh (rejected again: 401), then the one authorization attempt allowed
    assert post(http, auth, rid=2).status_code == 200
    grants = [t["form"]["grant_type"] for t in w.as_.token_requests]
    assert grants == ["authorization_code", "refresh_token", "authorization_code"]
    assert w.authorization_count() == 2


def test_client_credentials_count_as_attempts(rsps, http):
    w = World(rsps)
    w.preregister("svc", "svc-secret")
    w.valid_tokens.clear()
    auth = OAuth.client_credentials("svc", "svc-secret")
    auth.max_auth_attempts = 2
    issue = w._issue

    def never_valid(a: Any, scopes: list[str], resource: str, client_id: str) -> dict[str, Any]:
        out = issue(a, scopes, resource, client_id)
        w.valid_tokens.pop(out["access_token"], None)  # the server rejects every token
        return out

    w._issue = never_valid  # type: ignore[method-assign]
    with pytest.raises(AuthError, match="rejected the token it had just authorized"):
        post(http, auth)
    assert [t["form"]["grant_type"] for t in w.as_.token_requests] == ["client_credentials"]
