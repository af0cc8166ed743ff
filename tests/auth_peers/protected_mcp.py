"""A small OAuth-protected MCP server (Streamable HTTP, JSON replies) for auth e2e tests.

Owns: :class:`ProtectedMCPServer`, a ``ThreadingHTTPServer`` on 127.0.0.1 that acts as an
OAuth resource server in front of a tiny MCP endpoint:

- ``GET /.well-known/oauth-protected-resource/mcp``: RFC 9728 metadata naming the AS;
- ``POST /mcp``: verifies the ``Bearer`` JWT with the AS's JWKS (signature, ``iss``,
  ``exp``, ``aud`` == this server's URL), answers ``401`` + ``WWW-Authenticate``
  (``resource_metadata``, ``scope``) without a valid token and ``403 insufficient_scope``
  when the method needs a scope the token lacks (``method_scopes``);
- JSON-RPC: initialize (stateful, ``Mcp-Session-Id``), notifications (202), ping,
  tools/list (one tool ``whoami``), tools/call (reports ``sub`` and scopes).

With ``dpop=True`` it also takes DPoP-bound tokens (RFC 9449: ``Authorization: DPoP``, the
proof checked by :func:`auth_peers.dpop_check.check_proof` against the token's
``cnf.jkt``; a bound token sent as Bearer is refused), says ``DPoP`` in its challenges and,
with ``rs_nonce``, demands that nonce (``use_dpop_nonce`` + ``DPoP-Nonce``).

Every request is recorded in ``self.requests`` (method, whether a token came, scheme, status).
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from auth_peers.dpop_check import ReplayCache, check_proof

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


class ProtectedMCPServer:
    def __init__(
        self,
        issuer: str,
        *,
        base_scope: str = "mcp:read",
        scopes_supported: list[str] | None = None,
        method_scopes: dict[str, list[str]] | None = None,
        dpop: bool = False,
        rs_nonce: str | None = None,
    ) -> None:
        self.issuer = issuer
        self.dpop, self.rs_nonce, self._replay = dpop, rs_nonce, ReplayCache()
        self.base_scope = base_scope
        self.scopes_supported = scopes_supported if scopes_supported is not None else [base_scope]
        self.method_scopes = method_scopes or {}
        self.requests: list[dict[str, Any]] = []
        self._seen_jti: set[str] = set()
        self._revoked_jti: set[str] = set()
        self._jwks = jwt.PyJWKClient(f"{issuer}/jwks", cache_keys=True)
        self._sessions: set[str] = set()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                outer._get(self)

            def do_POST(self) -> None:  # noqa: N802
                outer._post(self)

            def do_DELETE(self) -> None:  # noqa: N802
                outer._delete(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.prm_url = f"http://127.0.0.1:{self.port}/.well-known/oauth-protected-resource/mcp"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="test-protected-mcp", daemon=True
        )

    def __enter__(self) -> ProtectedMCPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    # -- HTTP --------------------------------------------------------------------------
    def _send(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        if body is not None:
            h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _authorized(
        self, h: BaseHTTPRequestHandler, method: str
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(claims of a valid token, request record); without one, answers 401 (claims None)."""
        auth = h.headers.get("Authorization") or ""
        scheme, _, token = auth.partition(" ")
        rec: dict[str, Any] = {
            "method": method,
            "token": bool(token),
            "status": 0,
            "scheme": scheme,
        }
        with self._lock:
            self.requests.append(rec)
        ok_scheme = scheme == "Bearer" or (self.dpop and scheme == "DPoP")
        claims = self._verify(token) if ok_scheme else None
        bound = (claims or {}).get("cnf", {}).get("jkt")
        if claims is not None and (bound or scheme == "DPoP"):
            if scheme != "DPoP" or not bound:
                claims, rec["error"] = None, "DPoP-bound token presented as Bearer"
            else:
                error, _ = check_proof(
                    h.headers.get("DPoP"), method=h.command, url=self.url, replay=self._replay,
                    access_token=token, jkt=bound, nonce=self.rs_nonce,
                )  # fmt: skip
                rec["error"] = error
                if error == "use_dpop_nonce":
                    rec["status"] = 401
                    extra = {"DPoP-Nonce": self.rs_nonce or ""}
                    challenge = f'DPoP error="use_dpop_nonce", resource_metadata="{self.prm_url}"'
                    self._send(
                        h,
                        401,
                        {"error": "use_dpop_nonce"},
                        {"WWW-Authenticate": challenge, **extra},
                    )
                    return None, rec
                if error is not None:
                    claims = None
        if claims is None:
            rec["status"] = 401
            self._send(
                h,
                401,
                {"error": "invalid_token"},
                self._challenge(self.base_scope, "invalid_token"),
            )
        else:
            rec["claims"] = claims
        return claims, rec

    def _delete(self, h: BaseHTTPRequestHandler) -> None:
        claims, rec = self._authorized(h, "DELETE")
        if claims is not None:
            with self._lock:
                self._sessions.discard(h.headers.get("Mcp-Session-Id") or "")
            rec["status"] = 200
            self._send(h, 200)

    def _get(self, h: BaseHTTPRequestHandler) -> None:
        if h.path.split("?")[0] == "/mcp":  # no standalone SSE stream here
            claims, rec = self._authorized(h, "GET")
            if claims is not None:
                rec["status"] = 405
                self._send(h, 405, None, {"Allow": "POST, DELETE"})
            return
        if h.path == "/.well-known/oauth-protected-resource/mcp":
            self._send(
                h,
                200,
                {
                    "resource": self.url,
                    "authorization_servers": [self.issuer],
                    "scopes_supported": self.scopes_supported,
                },
            )
        else:
            self._send(h, 404, {"error": "not_found"})

    def _challenge(self, scope: str, error: str | None = None) -> dict[str, str]:
        parts = [f'resource_metadata="{self.prm_url}"', f'scope="{scope}"']
        if error:
            parts.insert(0, f'error="{error}"')
        value = "Bearer " + ", ".join(parts)
        if self.dpop:  # both schemes accepted (RFC 9449 section 7.1)
            value += ", DPoP " + ", ".join([*parts, 'algs="ES256 EdDSA"'])
        return {"WWW-Authenticate": value}

    def _verify(self, token: str) -> dict[str, Any] | None:
        try:
            key = self._jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token, key.key, algorithms=["RS256"], audience=self.url, issuer=self.issuer
            )
        except jwt.PyJWTError:
            return None
        jti = str(claims.get("jti"))
        with self._lock:
            if jti in self._revoked_jti:
                return None
            self._seen_jti.add(jti)
        return claims

    def _post(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            msg = json.loads(raw)
        except ValueError:
            self._send(h, 400, {"error": "bad json"})
            return
        method = msg.get("method", "") if isinstance(msg, dict) else "batch"
        claims, rec = self._authorized(h, method)
        if claims is None:
            return
        granted = set(str(claims.get("scope", "")).split())
        needed = [self.base_scope, *self.method_scopes.get(method, [])]
        if not all(s in granted for s in needed):
            rec["status"] = 403
            self._send(
                h,
                403,
                {"error": "insufficient_scope"},
                self._challenge(" ".join(needed), "insufficient_scope"),
            )
            return
        rec["status"] = 200
        if "id" not in msg:  # notification
            self._send(h, 202)
            return
        result: Any
        headers: dict[str, str] = {}
        if method == "initialize":
            asked = (msg.get("params") or {}).get("protocolVersion")
            sid = uuid.uuid4().hex
            with self._lock:
                self._sessions.add(sid)
            headers["Mcp-Session-Id"] = sid
            result = {
                "protocolVersion": asked if asked in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "protected-test-server", "version": "1.0.0"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {
                "tools": [
                    {
                        "name": "whoami",
                        "description": "who is calling",
                        "inputSchema": {"type": "object"},
                    }
                ]
            }
        elif method == "tools/call":
            text = json.dumps(
                {"sub": claims.get("sub") or claims.get("client_id"), "scope": sorted(granted)}
            )
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            self._send(
                h,
                200,
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "error": {"code": -32601, "message": "Method not found"},
                },
            )
            return
        self._send(h, 200, {"jsonrpc": "2.0", "id": msg["id"], "result": result}, headers)

    def revoke_all(self) -> None:
        """Reject every token seen so far (as if they had been revoked)."""
        with self._lock:
            self._revoked_jti |= self._seen_jti
