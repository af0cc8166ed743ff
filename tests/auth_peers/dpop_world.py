"""An authorization server and an MCP server that speak DPoP, on loopback, with knobs.

Owns: :class:`DPoPWorld` for the DPoP tests (tests/auth/test_auth_dpop.py). Two
``ThreadingHTTPServer`` s (two origins):

- the AS: RFC 8414 metadata (``dpop_signing_alg_values_supported`` unless ``advertise`` is
  None), ``/token`` for ``client_credentials`` (client ``svc``/``s3cret``, basic or post):
  checks the DPoP proof (:func:`auth_peers.dpop_check.check_proof`), demands its nonce
  when ``as_nonce`` (``use_dpop_nonce`` + ``DPoP-Nonce``), or a new one on every request
  when ``as_nonce_loop``; issues an opaque token bound to the proof key (``token_type``
  ``DPoP``), or a Bearer one when ``issue_bearer`` or no proof came;
- the MCP server (``/mcp``, stateless JSON: initialize, notifications, tools/list,
  tools/call ``echo``): RFC 9728 metadata (``dpop_bound_access_tokens_required`` when
  ``prm_required``); a DPoP-bound token needs ``Authorization: DPoP`` and a valid proof
  (ath, cnf key, no replayed jti); ``rs_nonce`` / ``rs_nonce_loop`` as at the AS; the 401
  challenge is ``DPoP`` only, or ``Bearer`` and ``DPoP`` when ``accept_bearer``; with
  ``rs_dpop=False`` the server takes only Bearer tokens (and says only ``Bearer``).

Records every token request and MCP request (scheme, proof error, jti) for assertions.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from auth_peers.dpop_check import ReplayCache, check_proof

__all__ = ["DPoPWorld"]

CLIENT_ID, CLIENT_SECRET = "svc", "s3cret"


class DPoPWorld:
    def __init__(
        self,
        *,
        advertise: list[str] | None = ("ES256",),  # type: ignore[assignment]
        as_nonce: bool = False,
        as_nonce_loop: bool = False,
        issue_bearer: bool = False,
        rs_nonce: bool = False,
        rs_nonce_loop: bool = False,
        accept_bearer: bool = False,
        prm_required: bool = False,
        rs_dpop: bool = True,
        rs_algs: str = "ES256",
        token_seconds: int = 3600,
    ) -> None:
        self.advertise = list(advertise) if advertise is not None else None
        self.as_nonce, self.as_nonce_loop, self.issue_bearer = as_nonce, as_nonce_loop, issue_bearer
        self.rs_nonce, self.rs_nonce_loop = rs_nonce, rs_nonce_loop
        self.accept_bearer, self.prm_required = accept_bearer or not rs_dpop, prm_required
        self.rs_dpop, self.rs_algs = rs_dpop, rs_algs
        self.token_seconds = token_seconds
        self.tokens: dict[str, str | None] = {}  # token -> jkt (None: Bearer)
        self.token_requests: list[dict[str, Any]] = []
        self.mcp_requests: list[dict[str, Any]] = []
        self.jtis: list[str] = []
        self._as_replay, self._rs_replay = ReplayCache(), ReplayCache()
        self._as_nonce_value, self._rs_nonce_value = "as-nonce-1", "rs-nonce-1"
        self._lock = threading.Lock()
        self._as = self._server(self._as_get, self._as_post)
        self._rs = self._server(self._rs_get, self._rs_post)
        self.issuer = f"http://127.0.0.1:{self._as.server_address[1]}"
        self.url = f"http://127.0.0.1:{self._rs.server_address[1]}/mcp"
        self.prm_url = f"http://127.0.0.1:{self._rs.server_address[1]}/.well-known/oauth-protected-resource/mcp"
        self._threads = [
            threading.Thread(target=s.serve_forever, name=f"test-dpop-world[{n}]", daemon=True)
            for n, s in (("as", self._as), ("rs", self._rs))
        ]

    def __enter__(self) -> DPoPWorld:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        for s in (self._as, self._rs):
            s.shutdown()
            s.server_close()
        for t in self._threads:
            t.join(5)

    def revoke_all(self) -> None:
        with self._lock:
            self.tokens.clear()

    # -- plumbing ----------------------------------------------------------------------
    @staticmethod
    def _server(get: Any, post: Any) -> ThreadingHTTPServer:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                get(self)

            def do_POST(self) -> None:  # noqa: N802
                post(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        return httpd

    @staticmethod
    def _send(
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

    @staticmethod
    def _body(h: BaseHTTPRequestHandler) -> bytes:
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n else b""

    def _next_nonce(self, which: str) -> str:
        with self._lock:
            value = f"{which}-nonce-{secrets.token_hex(4)}"
            if which == "as":
                self._as_nonce_value = value
            else:
                self._rs_nonce_value = value
            return value

    # -- the authorization server ------------------------------------------------------
    def _as_get(self, h: BaseHTTPRequestHandler) -> None:
        if h.path not in (
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ):
            self._send(h, 404, {"error": "not_found"})
            return
        doc: dict[str, Any] = {
            "issuer": self.issuer,
            "token_endpoint": f"{self.issuer}/token",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "response_types_supported": ["code"],
        }
        if self.advertise is not None:
            doc["dpop_signing_alg_values_supported"] = self.advertise
        self._send(h, 200, doc)

    def _as_post(self, h: BaseHTTPRequestHandler) -> None:
        form = {k: v[0] for k, v in parse_qs(self._body(h).decode()).items()}
        proof = h.headers.get("DPoP")
        rec: dict[str, Any] = {"form": form, "proof": proof, "status": 0}
        with self._lock:
            self.token_requests.append(rec)
        basic = h.headers.get("Authorization") or ""
        ok_client = (
            form.get("client_secret") == CLIENT_SECRET
            or basic
            == "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        )
        if form.get("grant_type") != "client_credentials" or not ok_client:
            rec["status"] = 400
            self._send(h, 400, {"error": "invalid_client"})
            return
        jkt = None
        if proof is not None:
            # a loop: every request must carry a nonce it cannot know yet
            nonce = self._next_nonce("as") if self.as_nonce_loop else None
            nonce = nonce or (self._as_nonce_value if self.as_nonce else None)
            error, jkt = check_proof(
                proof,
                method="POST",
                url=f"{self.issuer}/token",
                replay=self._as_replay,
                nonce=nonce,
            )
            rec["proof_error"] = error
            if error == "use_dpop_nonce":
                fresh = self._as_nonce_value
                rec["status"] = 400
                self._send(
                    h,
                    400,
                    {"error": "use_dpop_nonce", "error_description": "nonce"},
                    {"DPoP-Nonce": fresh},
                )
                return
            if error is not None:
                rec["status"] = 400
                self._send(h, 400, {"error": "invalid_dpop_proof", "error_description": error})
                return
        token = "at-" + secrets.token_urlsafe(24)
        bound = jkt if proof is not None and not self.issue_bearer else None
        with self._lock:
            self.tokens[token] = bound
        rec["status"] = 200
        self._send(
            h,
            200,
            {
                "access_token": token,
                "token_type": "DPoP" if bound else "Bearer",
                "expires_in": self.token_seconds,
            },
            {"Cache-Control": "no-store"},
        )

    # -- the MCP server ----------------------------------------------------------------
    def _challenge(self, error: str | None = None) -> dict[str, str]:
        params = f'resource_metadata="{self.prm_url}"'
        if not self.rs_dpop:
            return {
                "WWW-Authenticate": f'Bearer error="{error}", {params}'
                if error
                else f"Bearer {params}"
            }
        dpop = (
            f'DPoP error="{error}", {params}, algs="{self.rs_algs}"'
            if error
            else f'DPoP {params}, algs="{self.rs_algs}"'
        )
        value = (
            f"Bearer {params}, {dpop}" if self.accept_bearer and error != "use_dpop_nonce" else dpop
        )
        return {"WWW-Authenticate": value}

    def _rs_get(self, h: BaseHTTPRequestHandler) -> None:
        if h.path == "/.well-known/oauth-protected-resource/mcp":
            doc: dict[str, Any] = {"resource": self.url, "authorization_servers": [self.issuer]}
            if self.prm_required:
                doc["dpop_bound_access_tokens_required"] = True
            self._send(h, 200, doc)
        else:
            self._send(h, 405 if h.path == "/mcp" else 404, None, {"Allow": "POST"})

    def _rs_post(self, h: BaseHTTPRequestHandler) -> None:
        raw = self._body(h)
        auth = h.headers.get("Authorization") or ""
        scheme, _, token = auth.partition(" ")
        proof = h.headers.get("DPoP")
        rec: dict[str, Any] = {"scheme": scheme, "proof": proof, "status": 0}
        with self._lock:
            self.mcp_requests.append(rec)
            known = token in self.tokens
            jkt = self.tokens.get(token)
        if not known:
            rec["status"] = 401
            self._send(
                h,
                401,
                {"error": "invalid_token"},
                self._challenge("invalid_token" if token else None),
            )
            return
        if jkt is not None or scheme.lower() == "dpop":
            if scheme != "DPoP" or not self.rs_dpop:
                rec["status"], rec["error"] = 401, "DPoP-bound token presented as " + scheme
                self._send(h, 401, {"error": "invalid_token"}, self._challenge("invalid_token"))
                return
            nonce = self._next_nonce("rs") if self.rs_nonce_loop else None
            nonce = nonce or (self._rs_nonce_value if self.rs_nonce else None)
            error, _ = check_proof(
                proof,
                method="POST",
                url=self.url,
                replay=self._rs_replay,
                access_token=token,
                jkt=jkt,
                nonce=nonce,
            )
            rec["error"] = error
            if error == "use_dpop_nonce":
                fresh = self._rs_nonce_value
                rec["status"] = 401
                self._send(
                    h,
                    401,
                    {"error": "use_dpop_nonce"},
                    {**self._challenge("use_dpop_nonce"), "DPoP-Nonce": fresh},
                )
                return
            if error is not None:
                rec["status"] = 401
                self._send(
                    h, 401, {"error": "invalid_dpop_proof"}, self._challenge("invalid_dpop_proof")
                )
                return
        elif scheme != "Bearer" or not self.accept_bearer:
            rec["status"] = 401
            self._send(h, 401, {"error": "invalid_token"}, self._challenge("invalid_token"))
            return
        rec["status"] = 200
        msg = json.loads(raw)
        if "id" not in msg:
            self._send(h, 202)
            return
        method = msg.get("method")
        if method == "initialize":
            result: Any = {
                "protocolVersion": msg["params"].get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "dpop-world", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            text = json.dumps({"scheme": scheme, **(msg["params"].get("arguments") or {})})
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = {}
        self._send(h, 200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
