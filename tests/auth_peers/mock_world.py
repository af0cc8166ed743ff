"""A scriptable MCP server + authorization server on top of ``responses`` (unit tests only).

Owns: :class:`World`, which registers callbacks for an MCP endpoint (401/403 challenges,
scopes per JSON-RPC method), its Protected Resource Metadata, one or more authorization
servers (metadata, /register, /token with PKCE + client-auth checks) and records every
call so tests can assert on them. The authorization step itself is played by
:meth:`World.approve` (a redirect callable) that answers like an auto-approving AS, with
knobs to misbehave (wrong state, wrong / missing iss, error).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

import requests
import responses

#: the MCP server and authorization server a World plays by default
SERVER = "https://mcp.example.com/mcp"
ISSUER = "https://auth.example.com"


def post(
    http: requests.Session, auth: Any, method: str = "tools/list", url: str = SERVER, rid: int = 1
) -> requests.Response:
    """One JSON-RPC request to the World's MCP server through ``auth`` (a requests auth)."""
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {}}
    return http.post(url, json=body, auth=auth, timeout=5)


def s256(verifier: str) -> str:
    return (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )


@dataclass
class AS:
    issuer: str
    metadata_path: str = "/.well-known/oauth-authorization-server"  # relative to origin
    metadata: dict[str, Any] = field(default_factory=dict)
    clients: dict[str, dict[str, Any]] = field(default_factory=dict)  # client_id -> registration
    registrations: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, Any]] = field(default_factory=list)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    refresh_tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    expires_in: int | None = 3600
    issue_refresh: bool = True
    secret_for_dcr: bool = False


class World:
    """Server at ``server`` guarded by the AS(es) in ``self.as_list`` (first is current)."""

    def __init__(
        self,
        rsps: responses.RequestsMock,
        *,
        server: str = SERVER,
        issuer: str = ISSUER,
        prm: bool = True,
        prm_in_header: bool = True,
        prm_scopes: list[str] | None = None,
        challenge_scope: str | None = None,
        method_scopes: dict[str, list[str]] | None = None,
        as_metadata: dict[str, Any] | None = None,
    ) -> None:
        self.rsps = rsps
        self.server = server
        p = urlsplit(server)
        self.origin = f"{p.scheme}://{p.netloc}"
        self.path = p.path
        self.prm_enabled = prm
        self.prm_in_header = prm_in_header
        self.prm_scopes = prm_scopes
        self.prm_resource = server
        self.challenge_scope = challenge_scope
        self.method_scopes = method_scopes or {}
        self.valid_tokens: dict[
            str, dict[str, Any]
        ] = {}  # access token -> {scopes, issuer, resource}
        self.mcp_calls: list[dict[str, Any]] = []
        self.prm_requests: list[str] = []
        self.ases: dict[str, AS] = {}
        self.current_issuer = issuer
        self.add_as(issuer, as_metadata)
        # approve() knobs
        self.tamper_state = False
        self.iss_mode = "correct"  # correct | omit | wrong | normalized
        self.deny = False
        self.never_grant: set[str] = set()  # scopes the AS silently drops
        self._n = 0
        self._register_server()

    # -- setup --------------------------------------------------------------------
    def add_as(self, issuer: str, overrides: dict[str, Any] | None = None) -> AS:
        a = AS(issuer=issuer)
        p = urlsplit(issuer)
        origin = f"{p.scheme}://{p.netloc}"
        path = p.path.rstrip("/")
        a.metadata_path = f"/.well-known/oauth-authorization-server{path}"
        a.metadata = {
            "issuer": issuer,
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "none",
                "client_secret_basic",
                "client_secret_post",
            ],
            "authorization_response_iss_parameter_supported": True,
        }
        a.metadata.update(overrides or {})
        for k in [k for k, v in a.metadata.items() if v is None]:
            del a.metadata[k]
        self.ases[issuer] = a
        self.rsps.add_callback(
            responses.GET,
            f"{origin}{a.metadata_path}",
            callback=lambda req: (200, {}, json.dumps(a.metadata)),
        )
        self.rsps.add_callback(
            responses.POST, f"{issuer}/register", callback=lambda req: self._register(a, req)
        )
        self.rsps.add_callback(
            responses.POST, f"{issuer}/token", callback=lambda req: self._token(a, req)
        )
        return a

    @property
    def as_(self) -> AS:
        return self.ases[self.current_issuer]

    def prm_url(self) -> str:
        return f"{self.origin}/.well-known/oauth-protected-resource{self.path}"

    def _register_server(self) -> None:
        self.rsps.add_callback(responses.POST, self.server, callback=self._mcp)
        self.rsps.add_callback(responses.GET, self.prm_url(), callback=self._prm)
        root = f"{self.origin}/.well-known/oauth-protected-resource"
        if root != self.prm_url():
            self.rsps.add(responses.GET, root, status=404)

    # -- MCP endpoint ---------------------------------------------------------------
    def challenge(self, scope: str | None, error: str | None = None) -> str:
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if scope:
            parts.append(f'scope="{scope}"')
        if self.prm_enabled and self.prm_in_header:
            parts.append(f'resource_metadata="{self.prm_url()}"')
        return "Bearer " + ", ".join(parts) if parts else "Bearer"

    def _mcp(self, req: Any) -> tuple[int, dict[str, str], str]:
        body = json.loads(req.body) if req.body else {}
        method = body.get("method", "")
        auth = req.headers.get("Authorization")
        self.mcp_calls.append({"method": method, "authorization": auth, "body": body})
        needed = self.method_scopes.get(method, [])
        if not auth or not auth.startswith("Bearer "):
            return (
                401,
                {"WWW-Authenticate": self.challenge(self.challenge_scope, "invalid_token")},
                "{}",
            )
        info = self.valid_tokens.get(auth[7:])
        if info is None or info["issuer"] != self.current_issuer:
            return (
                401,
                {"WWW-Authenticate": self.challenge(self.challenge_scope, "invalid_token")},
                "{}",
            )
        if not all(s in info["scopes"] for s in needed):
            return (
                403,
                {"WWW-Authenticate": self.challenge(" ".join(needed), "insufficient_scope")},
                "{}",
            )
        return (
            200,
            {"Content-Type": "application/json"},
            json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": {"ok": method}}),
        )

    def _prm(self, req: Any) -> tuple[int, dict[str, str], str]:
        self.prm_requests.append(req.url)
        if not self.prm_enabled:
            return 404, {}, ""
        doc: dict[str, Any] = {
            "resource": self.prm_resource,
            "authorization_servers": [self.current_issuer],
        }
        if self.prm_scopes is not None:
            doc["scopes_supported"] = self.prm_scopes
        return 200, {"Content-Type": "application/json"}, json.dumps(doc)

    # -- AS endpoints ---------------------------------------------------------------
    def _register(self, a: AS, req: Any) -> tuple[int, dict[str, str], str]:
        md = json.loads(req.body)
        a.registrations.append(md)
        self._n += 1
        cid = f"{a.issuer.split('//')[1].split('/')[0]}-client-{self._n}"
        out = {"client_id": cid, **md}
        method = md.get("token_endpoint_auth_method", "client_secret_basic")
        if method != "none" or a.secret_for_dcr:
            out["client_secret"] = f"secret-{secrets.token_hex(8)}"
        a.clients[cid] = out
        return 201, {"Content-Type": "application/json"}, json.dumps(out)

    def approve(self, authorization_url: str) -> str:
        """Redirect callable: act as an auto-approving AS and return the redirected URL."""
        p = urlsplit(authorization_url)
        issuer = next(i for i in self.ases if authorization_url.startswith(i + "/"))
        a = self.ases[issuer]
        q = dict(parse_qsl(p.query))
        a.authorizations.append(q)
        out: dict[str, str] = {}
        if self.deny:
            out["error"] = "access_denied"
            out["error_description"] = "nope"
        else:
            code = f"code-{secrets.token_hex(8)}"
            a.codes[code] = q
            out["code"] = code
        out["state"] = "tampered" if self.tamper_state else q["state"]
        if self.iss_mode == "correct":
            out["iss"] = issuer
        elif self.iss_mode == "wrong":
            out["iss"] = "https://evil.example.com"
        elif self.iss_mode == "normalized":
            out["iss"] = issuer + "/"
        return f"{q['redirect_uri']}?{urlencode(out)}"

    def _client_auth(self, a: AS, req: Any, form: dict[str, str]) -> tuple[str | None, str]:
        h = req.headers.get("Authorization")
        if h and h.startswith("Basic "):
            cid, _, secret = base64.b64decode(h[6:]).decode().partition(":")
            cid, secret = unquote_plus(cid), unquote_plus(secret)
            ok = a.clients.get(cid, {}).get("client_secret") == secret
            return (cid if ok else None), "client_secret_basic"
        if "client_assertion" in form:
            return form.get("client_id"), "private_key_jwt"  # signature checked by the test itself
        if "client_secret" in form:
            cid = form.get("client_id", "")
            ok = a.clients.get(cid, {}).get("client_secret") == form["client_secret"]
            return (cid if ok else None), "client_secret_post"
        cid = form.get("client_id")
        known = cid in a.clients and "client_secret" not in a.clients[cid]
        return (cid if known else None), "none"

    def _issue(self, a: AS, scopes: list[str], resource: str, client_id: str) -> dict[str, Any]:
        scopes = [s for s in scopes if s not in self.never_grant]
        at = f"at-{secrets.token_hex(12)}"
        self.valid_tokens[at] = {"scopes": scopes, "issuer": a.issuer, "resource": resource}
        out: dict[str, Any] = {"access_token": at, "token_type": "Bearer"}
        if a.expires_in is not None:
            out["expires_in"] = a.expires_in
        if scopes:
            out["scope"] = " ".join(scopes)
        if a.issue_refresh:
            rt = f"rt-{secrets.token_hex(12)}"
            a.refresh_tokens[rt] = {"scopes": scopes, "resource": resource, "client_id": client_id}
            out["refresh_token"] = rt
        return out

    def _token(self, a: AS, req: Any) -> tuple[int, dict[str, str], str]:
        form = dict(parse_qsl(req.body if isinstance(req.body, str) else req.body.decode()))
        cid, method = self._client_auth(a, req, form)
        a.token_requests.append(
            {"form": form, "client_id": cid, "method": method, "headers": dict(req.headers)}
        )
        hdr = {"Content-Type": "application/json"}
        if cid is None:
            return 401, hdr, json.dumps({"error": "invalid_client"})
        gt = form.get("grant_type")
        if gt == "authorization_code":
            q = a.codes.pop(form.get("code", ""), None)
            if (
                q is None
                or q["client_id"] != cid
                or s256(form.get("code_verifier", "")) != q["code_challenge"]
            ):
                return (
                    400,
                    hdr,
                    json.dumps(
                        {
                            "error": "invalid_grant",
                            "error_description": f"bad code {form.get('code')}",
                        }
                    ),
                )
            if (
                form.get("resource") != q.get("resource")
                or form.get("redirect_uri") != q["redirect_uri"]
            ):
                return 400, hdr, json.dumps({"error": "invalid_target"})
            scopes = (q.get("scope") or "").split()
            return 200, hdr, json.dumps(self._issue(a, scopes, q.get("resource", ""), cid))
        if gt == "refresh_token":
            info = a.refresh_tokens.pop(form.get("refresh_token", ""), None)
            if info is None or info["client_id"] != cid:
                return 400, hdr, json.dumps({"error": "invalid_grant"})
            return 200, hdr, json.dumps(self._issue(a, info["scopes"], info["resource"], cid))
        if gt == "client_credentials":
            scopes = (form.get("scope") or "").split()
            return 200, hdr, json.dumps(self._issue(a, scopes, form.get("resource", ""), cid))
        return 400, hdr, json.dumps({"error": "unsupported_grant_type"})

    # -- helpers for tests ----------------------------------------------------------
    def preregister(self, client_id: str, secret: str | None, issuer: str | None = None) -> None:
        a = self.ases[issuer or self.current_issuer]
        a.clients[client_id] = {
            "client_id": client_id,
            **({"client_secret": secret} if secret else {}),
        }

    def move_to(self, issuer: str, overrides: dict[str, Any] | None = None) -> AS:
        """Point the PRM at a new AS; tokens of the old one stop working."""
        a = self.add_as(issuer, overrides) if issuer not in self.ases else self.ases[issuer]
        self.current_issuer = issuer
        return a

    def authorization_count(self) -> int:
        return sum(len(a.authorizations) for a in self.ases.values())


BEARER_RE = re.compile(r"Bearer (\S+)")
