"""A jwt-bearer token endpoint (RFC 7523) and an enterprise IdP token-exchange endpoint
(RFC 8693, ID-JAG) on top of ``responses`` and :class:`auth_peers.mock_world.World`
(unit tests only).

Owns: :class:`JwtBearerAS`, which replaces the World's ``/token`` with one that verifies the
``assertion`` (HS256 with a test key: signature, ``aud`` == the issuer, ``exp``) and answers
``invalid_grant`` / ``unauthorized_client`` / ``invalid_scope`` like a real AS would, and
:class:`EnterpriseIdP`, an IdP whose ``/token`` trades an ID token for an ID-JAG. Both
record every request.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qsl, unquote_plus

import jwt
import responses
from auth_peers.mock_world import World

KEY = "test-hs256-key-0123456789abcdef0123456789abcdef"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"


def make_jwt(aud: str, *, exp_in: float = 300, sub: str = "workload", **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": "https://platform.example", "sub": sub, "aud": aud, "iat": now}
    body["exp"] = int(now + exp_in)
    body["jti"] = uuid.uuid4().hex
    body.update(claims)
    return jwt.encode(body, KEY, algorithm="HS256")


def _form(req: Any) -> dict[str, str]:
    return dict(parse_qsl(req.body if isinstance(req.body, str) else req.body.decode()))


def _basic(req: Any) -> tuple[str, str] | None:
    h = req.headers.get("Authorization") or ""
    if not h.startswith("Basic "):
        return None
    cid, _, secret = base64.b64decode(h[6:]).decode().partition(":")
    return unquote_plus(cid), unquote_plus(secret)


class JwtBearerAS:
    """The World's current AS, answering the jwt-bearer grant only."""

    def __init__(
        self,
        world: World,
        *,
        clients: dict[str, str] | None = None,  # client_id -> secret (client_secret_basic)
        forbidden_scopes: tuple[str, ...] = ("admin",),
        unauthorized_subjects: tuple[str, ...] = ("rogue",),
        expires_in: int = 3600,
    ) -> None:
        self.world = world
        self.issuer = world.current_issuer
        self.clients = clients
        self.forbidden_scopes = forbidden_scopes
        self.unauthorized_subjects = unauthorized_subjects
        self.expires_in = expires_in
        self.requests: list[dict[str, Any]] = []
        a = world.as_
        a.metadata["grant_types_supported"] = [JWT_BEARER]
        a.metadata.pop("registration_endpoint", None)
        if clients is None:
            a.metadata["token_endpoint_auth_methods_supported"] = ["none"]
        world.rsps.replace(
            responses.CallbackResponse(responses.POST, f"{self.issuer}/token", callback=self._token)
        )

    def _error(self, error: str, description: str, status: int = 400) -> tuple[int, dict, str]:
        body = {"error": error, "error_description": description}
        return status, {"Content-Type": "application/json"}, json.dumps(body)

    def _token(self, req: Any) -> tuple[int, dict[str, str], str]:
        form = _form(req)
        self.requests.append({"form": form, "headers": dict(req.headers)})
        if form.get("grant_type") != JWT_BEARER:
            return self._error("unsupported_grant_type", "only jwt-bearer")
        if self.clients is not None:
            creds = _basic(req)
            if creds is None or self.clients.get(creds[0]) != creds[1]:
                return self._error("invalid_client", "bad client credentials", 401)
        try:
            claims = jwt.decode(
                form.get("assertion", ""), KEY, algorithms=["HS256"], audience=self.issuer
            )
        except jwt.ExpiredSignatureError:
            return self._error("invalid_grant", "JWT assertion is expired")
        except jwt.InvalidAudienceError:
            return self._error("invalid_grant", "JWT assertion audience is invalid")
        except jwt.InvalidTokenError as exc:
            return self._error("invalid_grant", f"assertion rejected: {type(exc).__name__}")
        if claims.get("sub") in self.unauthorized_subjects:
            return self._error("unauthorized_client", "not allowed to use jwt-bearer")
        scopes = (form.get("scope") or "").split()
        if any(s in self.forbidden_scopes for s in scopes):
            return self._error("invalid_scope", "scope not permitted for this grant")
        at = f"at-{uuid.uuid4().hex}"
        self.world.valid_tokens[at] = {
            "scopes": scopes,
            "issuer": self.issuer,
            "resource": form.get("resource", ""),
            "sub": claims.get("sub"),
        }
        out: dict[str, Any] = {
            "access_token": at,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
        }
        if scopes:
            out["scope"] = " ".join(scopes)
        return 200, {"Content-Type": "application/json"}, json.dumps(out)


class EnterpriseIdP:
    """An enterprise IdP at ``issuer`` whose token endpoint issues ID-JAGs (RFC 8693)."""

    def __init__(
        self,
        rsps: responses.RequestsMock,
        issuer: str = "https://idp.example.com",
        *,
        client_id: str = "idp-client",
        answer: tuple[int, dict[str, str], str] | None = None,
    ) -> None:
        self.issuer = issuer
        self.token_endpoint = f"{issuer}/oauth2/token"
        self.client_id = client_id
        self.answer = answer  # a canned reply instead of the exchange
        self.requests: list[dict[str, Any]] = []
        self.id_token = jwt.encode(
            {"iss": issuer, "sub": "alice", "aud": client_id, "exp": int(time.time()) + 3600},
            KEY,
            algorithm="HS256",
        )
        rsps.add_callback(responses.POST, self.token_endpoint, callback=self._token)
        meta = {"issuer": issuer, "token_endpoint": self.token_endpoint}
        rsps.add(
            responses.GET,
            f"{issuer}/.well-known/oauth-authorization-server",
            json=meta,
        )

    def _token(self, req: Any) -> tuple[int, dict[str, str], str]:
        form = _form(req)
        self.requests.append({"form": form, "headers": dict(req.headers)})
        if self.answer is not None:
            return self.answer
        hdr = {"Content-Type": "application/json"}
        if form.get("subject_token") != self.id_token:
            return (
                400,
                hdr,
                json.dumps({"error": "invalid_grant", "error_description": "bad ID token"}),
            )
        jag = make_jwt(
            form["audience"], sub="alice", resource=form.get("resource"), client_id="app"
        )
        out = {"access_token": jag, "issued_token_type": ID_JAG, "token_type": "N_A"}
        return 200, hdr, json.dumps(out)
