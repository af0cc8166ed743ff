"""A small OAuth 2.1 authorization server for demos and notebooks (standard library only).

Owns: :class:`DemoAuthorizationServer`, the authorization server the demo HTTP server
(:mod:`mcpsync.demo_server.http`, ``--auth``) puts in front of the demo MCP server: RFC 8414
metadata, dynamic client registration (RFC 7591), the ``authorization_code`` grant with
PKCE (S256 only) and an authorization endpoint that approves at once (no person needed,
so ``OAuth(redirect="headless")`` runs unattended), ``refresh_token`` (rotated) and
``client_credentials`` for pre-registered clients. Tokens are opaque random strings kept in
memory and bound to the ``resource`` they were issued for; :meth:`check` is what the
protected server asks.

It is a demo: one process, no persistence, no consent screen, no user accounts. It does
enforce what a client must get right (registered redirect URIs, PKCE, single-use codes,
client authentication, resource binding, expiry), so a client that works against it has
done the dance properly. It mounts on any HTTP server through :meth:`handle`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote_plus, urlencode, urlsplit

__all__ = ["DemoAuthorizationServer", "Reply", "PATHS"]

#: the paths :meth:`DemoAuthorizationServer.handle` answers
PATHS = (
    "/.well-known/oauth-authorization-server",
    "/.well-known/openid-configuration",
    "/register",
    "/authorize",
    "/token",
)

Reply = tuple[int, dict[str, str], bytes]  # status, headers, body

_CODE_SECONDS = 60.0
_SCOPE = "mcp"


@dataclass
class _Client:
    client_id: str
    secret: str | None  # None: a public client (token_endpoint_auth_method "none")
    redirect_uris: list[str]
    grant_types: list[str]


@dataclass
class _Token:
    client_id: str
    resource: str | None
    scope: str
    expires: float
    grant: str


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    resource: str | None
    scope: str
    expires: float
    used: bool = False


@dataclass
class _Stats:
    registrations: int = 0
    authorizations: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    refused: int = 0


def _json(status: int, body: Mapping[str, Any], **headers: str) -> Reply:
    data = json.dumps(body).encode()
    return (
        status,
        {"Content-Type": "application/json", "Cache-Control": "no-store", **headers},
        data,
    )


def _oauth_error(status: int, error: str, description: str) -> Reply:
    return _json(status, {"error": error, "error_description": description})


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class DemoAuthorizationServer:
    """An in-memory authorization server whose issuer is ``issuer`` (no trailing slash).

    ``clients``: pre-registered confidential clients (``client_id -> secret``), for the
    ``client_credentials`` grant; others register themselves at ``/register``.
    ``token_seconds``: access-token lifetime.
    """

    def __init__(
        self,
        issuer: str,
        *,
        clients: Mapping[str, str] | None = None,
        token_seconds: float = 3600.0,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.token_seconds = token_seconds
        self._lock = threading.Lock()
        self._clients: dict[str, _Client] = {}
        self._codes: dict[str, _Code] = {}
        self._tokens: dict[str, _Token] = {}
        self._refresh: dict[str, _Token] = {}
        self._stats = _Stats()
        for client_id, secret in (clients or {}).items():
            self._clients[client_id] = _Client(client_id, secret, [], ["client_credentials"])

    def __repr__(self) -> str:
        return f"<DemoAuthorizationServer {self.issuer} ({len(self._clients)} clients)>"

    # ------------------------------------------------------------------ for the resource
    def check(self, token: str, resource: str | None = None) -> bool:
        """Whether ``token`` is a live access token (for ``resource``, when it was bound)."""
        with self._lock:
            tok = self._tokens.get(token)
            ok = (
                tok is not None
                and tok.expires > time.monotonic()
                and (tok.resource is None or resource is None or tok.resource == resource)
            )
            if not ok:
                self._stats.refused += 1
            return ok

    def stats(self) -> dict[str, Any]:
        """Counters: registrations, authorizations, tokens issued by grant, refused tokens."""
        with self._lock:
            s = self._stats
            return {
                "registrations": s.registrations,
                "authorizations": s.authorizations,
                "tokens": dict(s.tokens),
                "refused": s.refused,
            }

    def revoke_all(self) -> None:
        """Forget every access and refresh token (the next request gets a 401)."""
        with self._lock:
            self._tokens.clear()
            self._refresh.clear()

    def metadata(self) -> dict[str, Any]:
        """The RFC 8414 authorization server metadata document."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "scopes_supported": [_SCOPE],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "none",
                "client_secret_basic",
                "client_secret_post",
            ],
            "client_id_metadata_document_supported": False,
        }

    # ------------------------------------------------------------------ HTTP
    def handle(
        self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> Reply:
        """Answer one HTTP request for a path in :data:`PATHS` (``headers`` keys lower-case)."""
        if path in PATHS[:2]:
            return _json(200, self.metadata())
        if path == "/register" and method == "POST":
            return self._register(body)
        if path == "/authorize" and method == "GET":
            return self._authorize({k: v[0] for k, v in parse_qs(query).items()})
        if path == "/token" and method == "POST":
            form = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}
            return self._token(form, headers.get("authorization", ""))
        return _oauth_error(405 if path in PATHS else 404, "invalid_request", f"{method} {path}")

    def _register(self, body: bytes) -> Reply:
        try:
            meta = json.loads(body or b"{}")
        except ValueError:
            return _oauth_error(400, "invalid_client_metadata", "the body is not JSON")
        if not isinstance(meta, dict):
            return _oauth_error(400, "invalid_client_metadata", "the body is not a JSON object")
        uris = meta.get("redirect_uris") or []
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            return _oauth_error(400, "invalid_redirect_uri", "redirect_uris must be strings")
        for uri in uris:
            parts = urlsplit(uri)
            if parts.scheme not in ("http", "https") or parts.fragment:
                return _oauth_error(400, "invalid_redirect_uri", f"not usable: {uri}")
        method = meta.get("token_endpoint_auth_method") or "client_secret_basic"
        if method not in ("none", "client_secret_basic", "client_secret_post"):
            return _oauth_error(400, "invalid_client_metadata", f"unsupported auth {method}")
        grants = meta.get("grant_types") or ["authorization_code", "refresh_token"]
        client = _Client(
            "demo-" + secrets.token_urlsafe(12),
            None if method == "none" else secrets.token_urlsafe(24),
            list(uris),
            [str(g) for g in grants],
        )
        with self._lock:
            self._clients[client.client_id] = client
            self._stats.registrations += 1
        out = {
            **meta,
            "client_id": client.client_id,
            "client_id_issued_at": int(time.time()),
            "token_endpoint_auth_method": method,
            "grant_types": client.grant_types,
            "redirect_uris": client.redirect_uris,
        }
        if client.secret is not None:
            out["client_secret"] = client.secret
            out["client_secret_expires_at"] = 0
        return _json(201, out)

    def _authorize(self, q: dict[str, str]) -> Reply:
        with self._lock:
            client = self._clients.get(q.get("client_id", ""))
        redirect_uri = q.get("redirect_uri", "")
        if client is None:
            return _oauth_error(400, "invalid_client", "unknown client_id")
        if redirect_uri not in client.redirect_uris:  # never redirect to an unregistered URI
            return _oauth_error(400, "invalid_request", "redirect_uri is not registered")

        def back(**params: str) -> Reply:
            if q.get("state"):
                params["state"] = q["state"]
            params["iss"] = self.issuer
            sep = "&" if "?" in redirect_uri else "?"
            return 302, {"Location": redirect_uri + sep + urlencode(params)}, b""

        if q.get("response_type") != "code":
            return back(error="unsupported_response_type")
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return back(error="invalid_request", error_description="PKCE with S256 is required")
        scope = q.get("scope") or _SCOPE
        if any(s not in (_SCOPE, "offline_access") for s in scope.split()):
            return back(error="invalid_scope")
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = _Code(
                client.client_id,
                redirect_uri,
                q["code_challenge"],
                q.get("resource"),
                scope,
                time.monotonic() + _CODE_SECONDS,
            )
            self._stats.authorizations += 1
        return back(code=code)  # approved at once: this demo has no person to ask

    def _client_auth(self, form: dict[str, str], authorization: str) -> _Client | Reply:
        client_id, secret = form.get("client_id"), form.get("client_secret")
        if authorization.lower().startswith("basic "):
            try:
                raw = base64.b64decode(authorization[6:].strip()).decode()
            except ValueError:
                return _oauth_error(401, "invalid_client", "bad Basic credentials")
            user, _, password = raw.partition(":")
            client_id, secret = unquote_plus(user), unquote_plus(password)
        with self._lock:
            client = self._clients.get(client_id or "")
        if client is None:
            return _oauth_error(401, "invalid_client", "unknown client")
        if client.secret is not None and not hmac.compare_digest(client.secret, secret or ""):
            return _oauth_error(401, "invalid_client", "wrong client secret")
        return client

    def _token(self, form: dict[str, str], authorization: str) -> Reply:
        client = self._client_auth(form, authorization)
        if not isinstance(client, _Client):
            return client
        grant = form.get("grant_type", "")
        now = time.monotonic()
        if grant == "authorization_code":
            with self._lock:
                code = self._codes.pop(form.get("code", ""), None)
            if code is None or code.expires < now or code.client_id != client.client_id:
                return _oauth_error(400, "invalid_grant", "unknown, expired or used code")
            if form.get("redirect_uri") != code.redirect_uri:
                return _oauth_error(400, "invalid_grant", "redirect_uri does not match")
            if _s256(form.get("code_verifier", "")) != code.challenge:
                return _oauth_error(400, "invalid_grant", "PKCE verification failed")
            resource = form.get("resource") or code.resource
            return self._issue(client, resource, code.scope, grant, refresh=True)
        if grant == "refresh_token":
            with self._lock:
                old = self._refresh.pop(form.get("refresh_token", ""), None)  # rotated
            if old is None or old.client_id != client.client_id:
                return _oauth_error(400, "invalid_grant", "unknown refresh token")
            return self._issue(client, old.resource, old.scope, grant, refresh=True)
        if grant == "client_credentials":
            if client.secret is None or "client_credentials" not in client.grant_types:
                return _oauth_error(400, "unauthorized_client", "not allowed for this client")
            scope = form.get("scope") or _SCOPE
            return self._issue(client, form.get("resource"), scope, grant, refresh=False)
        return _oauth_error(400, "unsupported_grant_type", grant or "no grant_type")

    def _issue(
        self, client: _Client, resource: str | None, scope: str, grant: str, *, refresh: bool
    ) -> Reply:
        access = secrets.token_urlsafe(32)
        tok = _Token(
            client.client_id, resource, scope, time.monotonic() + self.token_seconds, grant
        )
        body: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": int(self.token_seconds),
            "scope": scope,
        }
        with self._lock:
            self._tokens[access] = tok
            if refresh:
                rt = secrets.token_urlsafe(32)
                self._refresh[rt] = tok
                body["refresh_token"] = rt
            self._stats.tokens[grant] = self._stats.tokens.get(grant, 0) + 1
        return _json(200, body)
