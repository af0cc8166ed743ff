"""How :class:`~mcpsync.auth.oauth.OAuth` presents its token and answers a server's challenges.

Owns :class:`Presenter`, the per-request half of ``OAuth`` (a member of it, given the
``OAuth``'s lock, its :class:`~.binding.DPoPBinding` and three callables: the token to
present, renewed or as it is, and "obtain a new token"):

- the server the token is bound to (the first URL seen, or ``server_url=``);
- the headers of one request to it: ``Authorization: Bearer <token>``, or
  ``Authorization: DPoP <token>`` plus a fresh ``DPoP`` proof (with ``ath`` and the
  server's latest nonce) for a DPoP-bound token; nothing for any other origin;
- answering a reply: ``DPoP-Nonce`` headers are remembered per origin; a ``401`` or
  ``403 insufficient_scope`` with a ``Bearer`` or ``DPoP`` challenge runs the flow
  (refresh, authorization, client credentials; step-up, at most ``max_auth_attempts``
  per request, counted here); a ``DPoP error="use_dpop_nonce"`` challenge is re-sent with
  the new nonce, at most ``MAX_NONCE_RETRIES`` times per request, then
  :class:`~.dpop.DPoPError`;
- both ways of being called, through ``OAuth``: as a ``requests`` auth object
  (``prepare`` + a response hook that re-sends through ``r.connection.send`` like
  ``HTTPDigestAuth``), and as the transports'
  :class:`~mcpsync.transports.http.requestauth.RequestAuth` (the fast path), which
  ``OAuth`` declares and answers with ``headers``, ``sign_ahead``, ``answer`` and
  ``max_resends``;
- ``flow_seconds``: the time spent answering 401/403 replies.
"""

from __future__ import annotations

import base64
import enum
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import requests
from requests.cookies import extract_cookies_to_jar
from requests.utils import rewind_body

from ..errors import AuthError
from ..transports.http.requestauth import ReplyHeaders
from ._util import canonical_server_url, log, same_origin, short
from .binding import DPoPBinding
from .dpop import MAX_NONCE_RETRIES, DPoPError, DPoPKey
from .flow import TokenSet
from .www_authenticate import Challenge, oauth_challenges

__all__: list[str] = []  # private to mcpsync.auth

_CREDENTIAL_HEADERS = ("Authorization", "DPoP")


class Obtained(enum.Enum):
    """How ``OAuth`` got a new token (``Presenter`` counts all but a refresh as an
    authorization attempt)."""

    REFRESH = "refresh"  # the refresh token: silent, not an attempt
    AUTHORIZE = "authorize"  # the authorization code flow (a person, or a redirect callable)
    DEVICE = "device"  # the RFC 8628 device grant
    GRANT = "grant"  # a grant without a person: client_credentials, workload / enterprise


#: ``obtain(challenge, step_up, allow_refresh)``: a new token for the bound server
ObtainToken = Callable[[Challenge | None, bool, bool], Obtained]


class Presenter:
    """Token presentation and challenge answers for one ``OAuth`` (see the module doc)."""

    #: re-sends per request: step-up authorizations, a refresh, the nonce re-sends (set
    #: with ``max_auth_attempts``)
    max_resends: int

    def __init__(
        self,
        *,
        server_url: str | None,
        lock: threading.RLock,
        dpop: DPoPBinding,
        max_auth_attempts: int,
        usable_token: Callable[[], TokenSet | None],
        current_token: Callable[[], TokenSet | None],
        obtain_token: ObtainToken,
    ) -> None:
        #: the MCP server the token is bound to (None until the first request)
        self.server_url = server_url
        self.max_auth_attempts = max_auth_attempts  # and max_resends
        #: seconds spent answering 401/403 challenges (discovery, registration, tokens)
        self.flow_seconds = 0.0
        self._lock = lock
        self._dpop = dpop
        self._usable_token = usable_token
        self._current_token = current_token
        self._obtain_token = obtain_token
        #: step-up scopes still refused after ``max_auth_attempts`` authorizations
        self._hopeless: set[frozenset[str]] = set()

    # -- the headers -------------------------------------------------------------------
    def headers(
        self, method: str, url: str, *, renew: bool = True, state: dict[str, Any] | None = None
    ) -> dict[str, str]:
        """The credential headers; ``renew=False`` (a re-send after a flow) takes the token
        as it is instead of renewing one about to expire. ``state``: the transport's dict
        of the request (``RequestAuth``), where a DPoP proof's key is left for
        :meth:`sign_ahead`."""
        with self._lock:
            if self.server_url is None:
                self.server_url = canonical_server_url(url)
            if not same_origin(url, self.server_url):
                return {}
            tok = self._usable_token() if renew else self._current_token()
            if tok is None:
                return {}
            key = tok.dpop_key
            if tok.token_type != "DPoP" or key is None:
                return {"Authorization": f"Bearer {tok.access_token}"}
            self._dpop.key_of(key)  # a stored token: its renewals sign with its key too
        # signed outside the lock: threads sharing the token do not queue behind each other
        nonce = self._dpop.nonces.get(url)
        proof = key.proof(method, url, access_token=tok.access_token, nonce=nonce)
        if state is not None:
            state["ahead"] = (key, tok.access_token)
        return {"Authorization": f"DPoP {tok.access_token}", "DPoP": proof}

    def _auth_header(self) -> str | None:
        tok = self._current_token()
        return f"{tok.token_type} {tok.access_token}" if tok else None

    # -- RequestAuth (the transports' fast path; ``OAuth``'s methods call these) ---------
    @property
    def max_auth_attempts(self) -> int:
        """Authorizations per request before giving up (step-up loops)."""
        return self._max_auth_attempts

    @max_auth_attempts.setter
    def max_auth_attempts(self, value: int) -> None:
        self._max_auth_attempts = value
        self.max_resends = 2 * value + 2 + MAX_NONCE_RETRIES

    def sign_ahead(self, method: str, url: str, ahead: tuple[DPoPKey, str]) -> None:
        """A DPoP-bound request is on the wire (``RequestAuth.request_sent``; ``ahead`` is
        what :meth:`headers` left in its state): sign the next one's proof while it is
        answered."""
        key, access_token = ahead
        nonce = self._dpop.nonces.get(url)
        key.sign_ahead(method, url, access_token=access_token, nonce=nonce)

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

    # -- requests.auth.AuthBase (``OAuth.__call__``) -----------------------------------
    def prepare(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.update(self.headers(r.method or "GET", r.url or ""))
        r.register_hook("response", self._on_response)
        return r

    def _on_response(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        if self.server_url is None or not same_origin(r.request.url or "", self.server_url):
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
        prep.headers.update(self.headers(prep.method or "GET", prep.url or "", renew=False))
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
        server = self.server_url
        if server is None or not same_origin(url, server):
            return False
        nonce = headers.get("DPoP-Nonce")
        if nonce:
            self._dpop.nonces.update(url, nonce)
        if status not in (401, 403):
            return False
        state["answered"] = True
        header = headers.get("WWW-Authenticate")
        bearer, dpop = oauth_challenges(header)
        if dpop is not None and dpop.error == "use_dpop_nonce" and sent.get("DPoP"):
            return self._nonce_resend(nonce, sent, state)
        if dpop is not None and bearer is None and self._dpop.mode is False:
            raise DPoPError(
                f"{short(server)} accepts only DPoP-bound tokens, but this OAuth object has "
                "dpop=False",
                step="MCP request",
            )
        challenge = dpop if dpop is not None and (bearer is None or self._dpop.mode) else bearer
        if header and challenge is None:
            return False  # another scheme (Basic, ...): not ours to answer
        step_up = challenge is not None and challenge.error == "insufficient_scope"
        if status == 403 and not step_up:
            return False
        with self._lock:
            current = self._auth_header()
            if current is None or current == sent.get("Authorization"):
                algs = (dpop.get("algs") or "").split() if dpop is not None else []
                self._dpop.note_challenge(
                    dpop_only=dpop is not None and bearer is None,
                    dpop_named=dpop is not None,
                    algs=algs,
                )
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
        how = self._obtain_token(challenge, step_up, not state.get("refresh_tried"))
        if how is Obtained.REFRESH:
            state["refresh_tried"] = True  # a silent refresh is not an authorization attempt
        else:
            state["attempts"] = attempts + 1
            state["full_auth_done"] = True


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
