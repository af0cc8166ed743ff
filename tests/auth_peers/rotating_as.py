"""An authorization server that punishes a refresh race: rotating refresh tokens, and the
whole token family revoked when a rotated refresh token comes back (OAuth 2.1 section 4.3.1,
"refresh token reuse detection", as Auth0, Okta and others do it).

Owns: :class:`FamilyAuthorizationServer`, the demo authorization server
(:class:`mcpsync.demo_server.auth.DemoAuthorizationServer`) with

- *families*: the tokens of one authorization and every refresh after it;
- *epochs*: an access token is good only in the epoch it was issued in; :meth:`expire`
  starts the next one (expiry driven by the test, never by a clock racing threads), so a
  client learns of it from the resource's 401 and refreshes;
- counters: successful refreshes per epoch, reuses of a rotated refresh token, refreshes
  refused (and for what);
- ``revoke_on_reuse=False``: a rotating server that only refuses a used refresh token
  (``invalid_grant``) without revoking the family.

Mount it on :class:`mcpsync.demo_server.http.DemoHTTPServer` with :func:`serve`.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from mcpsync.demo_server.auth import DemoAuthorizationServer, Reply, _oauth_error
from mcpsync.demo_server.http import DemoHTTPServer

__all__ = ["FamilyAuthorizationServer", "serve"]


class FamilyAuthorizationServer(DemoAuthorizationServer):
    def __init__(self, issuer: str, *, revoke_on_reuse: bool = True) -> None:
        super().__init__(issuer, token_seconds=3600.0)
        self.revoke_on_reuse = revoke_on_reuse
        self.epoch = 0
        self.refreshes: Counter[int] = Counter()  # epoch -> successful refreshes
        self.reuses = 0  # rotated refresh tokens presented again
        self.refused: Counter[str] = Counter()  # why refresh requests were refused
        self._guard = threading.Lock()  # one refresh decision at a time
        self._family = 0
        self._access: dict[str, tuple[int, int]] = {}  # access token -> (family, epoch)
        self._live: dict[str, int] = {}  # live refresh token -> family
        self._rotated: dict[str, int] = {}  # used refresh token -> family
        self._revoked: set[int] = set()
        #: called (with the refresh token) when a refresh request arrives, before it is
        #: decided: lets a test make "another process" refresh first
        self.before_refresh: Any = None

    def expire(self) -> int:
        """Start the next epoch: every access token issued so far is refused from now on."""
        with self._guard:
            self.epoch += 1
            return self.epoch

    def counts(self) -> dict[str, Any]:
        with self._guard:
            return {
                "epoch": self.epoch,
                "refreshes": dict(self.refreshes),
                "reuses": self.reuses,
                "refused": dict(self.refused),
                "revoked_families": len(self._revoked),
            }

    def check(self, token: str, resource: str | None = None) -> bool:
        with self._guard:
            family, epoch = self._access.get(token, (-1, -1))
            live = family >= 0 and family not in self._revoked and epoch == self.epoch
        return live and super().check(token, resource)

    def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        if path != "/token" or method != "POST":
            return super().handle(method, path, query, headers, body)
        form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
        if form.get("grant_type") == "refresh_token":
            rt = form.get("refresh_token", "")
            hook = self.before_refresh
            if hook is not None:
                self.before_refresh = None
                hook(rt)
            with self._guard:
                if rt in self._rotated:
                    self.reuses += 1
                    family = self._rotated[rt]
                    if self.revoke_on_reuse:
                        self._revoked.add(family)
                    self.refused["reused"] += 1
                    return _oauth_error(400, "invalid_grant", "refresh token already used")
                family = self._live.get(rt, -1)
                if family < 0 or family in self._revoked:
                    self.refused["unknown or revoked"] += 1
                    return _oauth_error(400, "invalid_grant", "unknown refresh token")
                reply = super().handle(method, path, query, headers, body)
                if reply[0] == 200:
                    del self._live[rt]
                    self._rotated[rt] = family
                    self._record(reply, family)
                    self.refreshes[self.epoch] += 1
                return reply
        reply = super().handle(method, path, query, headers, body)
        if reply[0] == 200:
            with self._guard:
                self._family += 1
                self._record(reply, self._family)
        return reply

    def _record(self, reply: Reply, family: int) -> None:
        data = json.loads(reply[2])
        self._access[data["access_token"]] = (family, self.epoch)
        if data.get("refresh_token"):
            self._live[data["refresh_token"]] = family


def serve(*, revoke_on_reuse: bool = True) -> DemoHTTPServer:
    """The demo MCP server over HTTP behind a :class:`FamilyAuthorizationServer` (started)."""
    server = DemoHTTPServer(auth=True)
    server.auth_server = FamilyAuthorizationServer(server.origin, revoke_on_reuse=revoke_on_reuse)
    return server.start()
