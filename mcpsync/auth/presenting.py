"""How :class:`~mcpsync.auth.oauth.OAuth` presents its token and answers a server's challenges.

Owns the per-request half of ``OAuth`` (a mixin over its state, declared below):

- the headers of one request to the bound server: ``Authorization: Bearer <token>``, or
  ``Authorization: DPoP <token>`` plus a fresh ``DPoP`` proof (with ``ath`` and the
  server's latest nonce) for a DPoP-bound token; nothing for any other origin;
- answering a reply: ``DPoP-Nonce`` headers are remembered per origin; a ``401`` or
  ``403 insufficient_scope`` with a ``Bearer`` or ``DPoP`` challenge runs the flow
  (``_obtain_token``: refresh, authorization, client credentials; step-up, at most
  ``max_auth_attempts`` per request); a ``DPoP error="use_dpop_nonce"`` challenge is
  re-sent with the new nonce, at most ``MAX_NONCE_RETRIES`` times per request, then
  :class:`~.dpop.DPoPError`;
- both ways of being called: as a ``requests`` auth object (``__call__`` + a response
  hook that re-sends through ``r.connection.send`` like ``HTTPDigestAuth``), and as the
  transports' :class:`~mcpsync.transports.http.requestauth.RequestAuth` (the fast path:
  ``request_headers`` and ``answer``);
- choosing DPoP for the next token (``_dpop_select``): ``dpop=True`` always, ``False``
  never, ``"auto"`` (default) when *both* sides speak it: the MCP server (a ``DPoP``
  challenge, or ``dpop_signing_alg_values_supported`` / ``dpop_bound_access_tokens_required``
  in its resource metadata) and the authorization server (its
  ``dpop_signing_alg_values_supported``). An authorization server that offers DPoP in
  front of a server that only takes Bearer tokens gets Bearer requests (oidc-provider
  advertises DPoP by default). A server that takes *only* DPoP (its challenge, or the
  metadata's ``..._required``) gets DPoP whatever the AS advertises, and a Bearer token
  issued for it is refused (``_dpop_check``).
"""

from __future__ import annotations

import base64
import enum
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

import requests
from requests.cookies import extract_cookies_to_jar
from requests.utils import rewind_body

from ..errors import AuthError
from ..transports.http.requestauth import ReplyHeaders, RequestAuth
from ._util import canonical_server_url, log, same_origin, short
from .discovery import AuthServerMetadata, ProtectedResourceMetadata
from .dpop import (
    EXTRA_HINT,
    MAX_NONCE_RETRIES,
    DPoPError,
    DPoPKey,
    DPoPProver,
    NonceCache,
    choose_alg,
    dpop_available,
    require_cryptography,
)
from .flow import TokenSet
from .www_authenticate import Challenge, oauth_challenges

__all__: list[str] = []  # private to mcpsync.auth

_CREDENTIAL_HEADERS = ("Authorization", "DPoP")


class Obtained(enum.Enum):
    """How ``_obtain_token`` got the new token (``_run_flow`` counts all but a refresh
    as an authorization attempt)."""

    REFRESH = "refresh"  # the refresh token: silent, not an attempt
    AUTHORIZE = "authorize"  # the authorization code flow (a person, or a redirect callable)
    DEVICE = "device"  # the RFC 8628 device grant
    GRANT = "grant"  # a grant without a person: client_credentials, workload / enterprise


class _Presenting(RequestAuth):
    """Token presentation and challenge answers; the attributes are :class:`OAuth`'s."""

    max_auth_attempts: int
    flow_seconds: float
    _lock: threading.RLock
    _server_url: str | None
    _token: TokenSet | None
    _hopeless: set[frozenset[str]]
    _dpop_mode: bool | str
    _dpop_alg: str
    _prover: DPoPProver | None
    _nonces: NonceCache
    _dpop_challenged: bool
    _dpop_server: bool
    _dpop_required: bool
    #: the algorithms the MCP server's DPoP challenge named (``algs``), if it did
    _dpop_rs_algs: list[str] | None = None

    def _usable_token(self) -> TokenSet | None:
        raise NotImplementedError

    def _obtain_token(
        self, challenge: Challenge | None, *, step_up: bool, allow_refresh: bool
    ) -> Obtained:
        raise NotImplementedError

    # -- the headers -------------------------------------------------------------------
    def _headers_for(
        self, method: str, url: str, *, renew: bool = True, state: dict[str, Any] | None = None
    ) -> dict[str, str]:
        """The credential headers; ``renew=False`` (a re-send after a flow) takes the token
        as it is instead of renewing one about to expire."""
        with self._lock:
            if self._server_url is None:
                self._server_url = canonical_server_url(url)
            if not same_origin(url, self._server_url):
                return {}
            tok = self._usable_token() if renew else self._token
            if tok is None:
                return {}
            key = tok.dpop_key
            if tok.token_type != "DPoP" or key is None:
                return {"Authorization": f"Bearer {tok.access_token}"}
            if self._prover is None:  # a stored token: its renewals sign with its key too
                self._prover = DPoPProver(key, self._nonces)
        # signed outside the lock: threads sharing the token do not queue behind each other
        proof = key.proof(method, url, access_token=tok.access_token, nonce=self._nonces.get(url))
        if state is not None:
            state["ahead"] = (key, tok.access_token)
        return {"Authorization": f"DPoP {tok.access_token}", "DPoP": proof}

    def _auth_header(self) -> str | None:
        tok = self._token
        return f"{tok.token_type} {tok.access_token}" if tok else None

    # -- RequestAuth (the transports' fast path) ----------------------------------------
    @property
    def max_resends(self) -> int:
        """Step-up authorizations, a refresh, and the nonce re-sends of one request."""
        return 2 * self.max_auth_attempts + 2 + MAX_NONCE_RETRIES

    def request_headers(self, method: str, url: str, state: dict[str, Any]) -> Mapping[str, str]:
        return self._headers_for(method, url, renew=not state.get("answered"), state=state)

    def request_sent(self, method: str, url: str, state: dict[str, Any]) -> None:
        """A DPoP-bound request is on the wire: sign the next one's proof while it is answered."""
        ahead = state.get("ahead")
        if ahead is not None:
            key, access_token = ahead
            key.sign_ahead(method, url, access_token=access_token, nonce=self._nonces.get(url))

    def answer(
        self,
        method: str,
        url: str,
        status: int,
        headers: ReplyHeaders,
        sent: Mapping[str, str],
        state: dict[str, Any],
    ) -> bool:
        started = time.perf_counter()
        try:
            return self._answer(url, status, headers, sent, state)
        finally:  # the session reports this as its "auth" bring-up phase
            if status in (401, 403):
                self.flow_seconds += time.perf_counter() - started

    # -- requests.auth.AuthBase ---------------------------------------------------------
    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.update(self._headers_for(r.method or "GET", r.url or ""))
        r.register_hook("response", self._on_response)
        return r

    def _on_response(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        if self._server_url is None or not same_origin(r.request.url or "", self._server_url):
            return r
        if r.status_code not in (401, 403) and "DPoP-Nonce" not in r.headers:
            return r
        started = time.perf_counter()
        try:
            return self._handle_challenge(r, **kwargs)
        except BaseException:
            r.close()  # give the connection back before the error propagates
            raise
        finally:
            if r.status_code in (401, 403):
                self.flow_seconds += time.perf_counter() - started

    def _handle_challenge(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        state: dict[str, Any] = {}
        for _ in range(self.max_resends):
            sent = r.request.headers
            if not self._answer(r.request.url or "", r.status_code, r.headers, sent, state):
                return r
            if not _resendable(r.request):
                log.warning("request body cannot be re-sent; returning the %s reply", r.status_code)
                return r
            r = self._resend(r, **kwargs)
        return r

    def _resend(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        r.content  # noqa: B018 - drain so the connection can be reused
        r.close()
        prep = r.request.copy()
        if hasattr(prep.body, "read"):
            rewind_body(prep)
        jar = getattr(prep, "_cookies", None)  # None for a request prepared without cookies
        if r.raw is not None and jar is not None:
            extract_cookies_to_jar(jar, r.request, r.raw)
            prep.prepare_cookies(jar)
        for name in _CREDENTIAL_HEADERS:
            prep.headers.pop(name, None)
        prep.headers.update(self._headers_for(prep.method or "GET", prep.url or "", renew=False))
        new = r.connection.send(prep, **kwargs)
        new.history.append(r)
        new.request = prep
        return new

    # -- one reply ---------------------------------------------------------------------
    def _answer(
        self,
        url: str,
        status: int,
        headers: ReplyHeaders,
        sent: Mapping[str, Any],
        state: dict[str, Any],
    ) -> bool:
        """Handle one reply to a request for ``url``; True: send the request again."""
        server = self._server_url
        if server is None or not same_origin(url, server):
            return False
        nonce = headers.get("DPoP-Nonce")
        if nonce:
            self._nonces.update(url, nonce)
        if status not in (401, 403):
            return False
        state["answered"] = True
        header = headers.get("WWW-Authenticate")
        bearer, dpop = oauth_challenges(header)
        if dpop is not None and dpop.error == "use_dpop_nonce" and sent.get("DPoP"):
            return self._nonce_resend(nonce, sent, state)
        if dpop is not None and bearer is None and self._dpop_mode is False:
            raise DPoPError(
                f"{short(server)} accepts only DPoP-bound tokens, but this OAuth object has "
                "dpop=False",
                step="MCP request",
            )
        challenge = dpop if dpop is not None and (bearer is None or self._dpop_mode) else bearer
        if header and challenge is None:
            return False  # another scheme (Basic, ...): not ours to answer
        step_up = challenge is not None and challenge.error == "insufficient_scope"
        if status == 403 and not step_up:
            return False
        with self._lock:
            current = self._auth_header()
            if current is None or current == sent.get("Authorization"):
                self._dpop_challenged = dpop is not None and bearer is None
                self._dpop_server = dpop is not None
                algs = (dpop.get("algs") or "").split() if dpop is not None else []
                self._dpop_rs_algs = algs or None
                self._run_flow(server, status, challenge, step_up, state)
        return True

    def _nonce_resend(
        self, nonce: str | None, sent: Mapping[str, Any], state: dict[str, Any]
    ) -> bool:
        used = _proof_nonce(sent.get("DPoP") or "")
        if not nonce or nonce == used:
            raise DPoPError(
                "the MCP server asked for a DPoP nonce (use_dpop_nonce) without giving a new "
                "one in DPoP-Nonce",
                step="MCP request",
            )
        count = state.get("nonce_resends", 0)
        if count >= MAX_NONCE_RETRIES:
            raise DPoPError(
                f"the MCP server kept demanding a new DPoP nonce ({count} re-sends with the "
                "nonces it gave); giving up",
                step="MCP request",
            )
        state["nonce_resends"] = count + 1
        return True

    def _run_flow(
        self,
        server: str,
        status: int,
        challenge: Challenge | None,
        step_up: bool,
        state: dict[str, Any],
    ) -> None:
        """One authorization for a request (state: its attempts so far); raises when hopeless."""
        attempts = state.get("attempts", 0)
        key = frozenset(challenge.scopes or []) if challenge and step_up else None
        if key and key in self._hopeless:
            raise AuthError(
                f"{short(server)} still wants scope {' '.join(sorted(key))!r} "
                "after earlier authorizations; not trying again"
            )
        if status == 401 and state.get("full_auth_done"):
            raise AuthError(f"{short(server)} rejected the token it had just authorized (HTTP 401)")
        if attempts >= self.max_auth_attempts:
            if key:
                self._hopeless.add(key)
            raise AuthError(
                f"{short(server)} still answers HTTP {status}"
                f"{' insufficient_scope' if step_up else ''} after {attempts} "
                "authorization attempts; giving up"
            )
        how = self._obtain_token(
            challenge, step_up=step_up, allow_refresh=not state.get("refresh_tried")
        )
        if how is Obtained.REFRESH:
            state["refresh_tried"] = True  # a silent refresh is not an authorization attempt
        else:
            state["attempts"] = attempts + 1
            state["full_auth_done"] = True

    # -- choosing DPoP -----------------------------------------------------------------
    def _dpop_select(self, prm: ProtectedResourceMetadata | None, asm: AuthServerMetadata) -> None:
        """Decide whether the next token request asks for a DPoP-bound token (``_prover``)."""
        required = self._dpop_challenged or (
            prm is not None and prm.dpop_bound_access_tokens_required
        )
        self._dpop_required = required
        offered = asm.dpop_signing_alg_values_supported
        rs_algs = self._dpop_rs_algs or (prm.dpop_signing_alg_values_supported if prm else None)
        if offered and rs_algs and set(offered) & set(rs_algs):
            offered = [a for a in offered if a in rs_algs]  # what both servers accept
        server_takes = (
            required
            or self._dpop_server
            or (prm is not None and prm.dpop_signing_alg_values_supported is not None)
        )
        mode = self._dpop_mode
        self._prover = None
        if mode is False:
            if required:
                raise DPoPError(
                    f"{short(self._server_url or '')} requires DPoP-bound tokens, but this "
                    "OAuth object has dpop=False",
                    step="discovery",
                )
            return
        if mode == "auto" and not required and not (offered and server_takes):
            return
        if not dpop_available() and mode == "auto" and not required:
            log.info("%s offers DPoP; using Bearer: no 'cryptography' (%s)", asm.issuer, EXTRA_HINT)
            return
        require_cryptography("discovery")
        alg = choose_alg(offered, self._dpop_alg)
        if alg is None:
            if required or mode is True:
                raise DPoPError(
                    f"{asm.issuer} accepts DPoP proofs signed with {', '.join(offered or [])[:200]}"
                    "; mcpsync signs ES256/ES384/ES512/EdDSA",
                    step="discovery",
                )
            return
        tok = self._token
        if tok is not None and tok.dpop_key is not None and tok.dpop_key.alg == alg:
            self._prover = DPoPProver(tok.dpop_key, self._nonces)  # one key per client
        else:
            self._prover = DPoPProver(DPoPKey.generate(alg), self._nonces)

    def _dpop_for(self, tok: TokenSet) -> DPoPProver | None:
        """The prover a refresh of ``tok`` must use (its own key; RFC 9449 section 5)."""
        return DPoPProver(tok.dpop_key, self._nonces) if tok.dpop_key is not None else None

    def _dpop_check(self, tok: TokenSet) -> None:
        """Refuse a Bearer token for a server that takes only DPoP-bound ones."""
        if self._dpop_required and tok.token_type != "DPoP":
            raise DPoPError(
                f"{short(self._server_url or '')} requires DPoP-bound tokens, but "
                f"{tok.issuer or 'the authorization server'} issued a Bearer token; "
                "not presenting it as Bearer",
                step="token response",
            )


def _proof_nonce(proof: str) -> str | None:
    """The ``nonce`` claim of a proof we signed (None when it has none)."""
    try:
        payload = proof.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    nonce = claims.get("nonce") if isinstance(claims, dict) else None
    return nonce if isinstance(nonce, str) else None


def _resendable(req: requests.PreparedRequest) -> bool:
    body = req.body
    if body is None or isinstance(body, (bytes, str)):
        return True
    return hasattr(body, "read") and getattr(req, "_body_position", None) is not None
