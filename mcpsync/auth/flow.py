"""The OAuth 2.1 exchanges themselves, one function per step.

Owns:
- :class:`TokenSet` (what a token endpoint gave us, bound to issuer + resource) and
  :class:`PendingAuthorization` (PKCE verifier, ``state`` and the expected issuer of one
  authorization request);
- building the authorization URL: PKCE ``S256`` (verifier/challenge from oauthlib),
  ``state``, ``scope``, and the RFC 8707 ``resource``;
- validating the authorization response before the code goes anywhere: ``state`` must
  match; ``iss`` (RFC 9207) compared to the recorded issuer as a plain string, required
  when the AS advertises it; the AS's ``error`` is only reported after those checks;
- token requests (code exchange, refresh, client_credentials) with client authentication
  ``client_secret_basic``, ``client_secret_post``, ``none`` or ``private_key_jwt``; bodies
  and response parsing (expiry) come from oauthlib;
- DPoP on token requests (RFC 9449 section 5): with a :class:`~.dpop.DPoPProver` each token
  request carries a fresh proof, ``use_dpop_nonce`` is answered (bounded, in
  :func:`~.dpop.post_token_request`) and a ``DPoP`` token is kept with its key;
- scope selection: challenge ``scope``, else configured scopes, else PRM
  ``scopes_supported``, else none; union with what was requested before (step-up);
  ``offline_access`` only when the AS lists it.

No function here logs or raises with a token, secret, code or verifier in the text.
"""

from __future__ import annotations

import base64
import hmac
import secrets as _secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote_plus, urlencode, urlsplit, urlunsplit

import requests
from oauthlib.oauth2.rfc6749.clients.base import Client as _OAuthlibClient
from oauthlib.oauth2.rfc6749.errors import MissingTokenError, OAuth2Error
from oauthlib.oauth2.rfc6749.parameters import parse_token_response, prepare_token_request

from ..errors import AuthError, AuthServerUnreachable, ConfigError, TokenError
from ._util import log, redact, require_secure, short
from .discovery import AuthServerMetadata
from .dpop import DPoPKey, DPoPProver, Observer, post_token_request
from .registration import ClientInfo, choose_auth_method

__all__ = [
    "TokenSet",
    "PendingAuthorization",
    "new_pkce",
    "select_scopes",
    "build_authorization_request",
    "parse_authorization_response",
    "exchange_code",
    "refresh_access_token",
    "client_credentials_grant",
    "client_assertion",
]

JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


@dataclass
class TokenSet:
    """Tokens for one (issuer, resource). ``repr`` never shows token values."""

    access_token: str = field(repr=False)
    token_type: str = "Bearer"
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scopes: list[str] | None = None
    requested_scopes: list[str] | None = None
    issuer: str | None = None
    resource: str | None = None
    client_id: str | None = None
    token_endpoint: str | None = None
    #: the key pair a ``DPoP`` token is bound to (stored with it)
    dpop_key: DPoPKey | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (
            f"TokenSet(issuer={self.issuer!r}, resource={self.resource!r}, scopes={self.scopes!r}, "
            f"expires_at={self.expires_at!r}, has_refresh_token={self.refresh_token is not None}, "
            f"token_type={self.token_type!r})"
        )

    def expires_within(self, seconds: float) -> bool:
        return self.expires_at is not None and time.time() + seconds >= self.expires_at

    def to_store(self) -> dict[str, Any]:
        return {
            "access_token": self.access_token,
            "token_type": self.token_type,
            "refresh_token": self.refresh_token,
            "expires_at": self.expires_at,
            "scopes": self.scopes,
            "requested_scopes": self.requested_scopes,
            "issuer": self.issuer,
            "resource": self.resource,
            "client_id": self.client_id,
            "token_endpoint": self.token_endpoint,
            "dpop_key": self.dpop_key.to_store() if self.dpop_key is not None else None,
        }

    @classmethod
    def from_store(cls, d: Any) -> TokenSet | None:
        if not isinstance(d, dict) or not isinstance(d.get("access_token"), str):
            return None
        key = None
        if str(d.get("token_type") or "").lower() == "dpop":
            try:
                key = DPoPKey.from_store(d.get("dpop_key"))
            except AuthError as exc:  # no cryptography: the bound token is unusable here
                log.info("a stored DPoP token cannot be used: %s", exc)
            if key is None:
                return None
        return cls(
            access_token=d["access_token"],
            token_type=d.get("token_type") or "Bearer",
            refresh_token=d.get("refresh_token"),
            expires_at=d.get("expires_at"),
            scopes=d.get("scopes"),
            requested_scopes=d.get("requested_scopes"),
            issuer=d.get("issuer"),
            resource=d.get("resource"),
            client_id=d.get("client_id"),
            token_endpoint=d.get("token_endpoint"),
            dpop_key=key,
        )


@dataclass
class PendingAuthorization:
    """One authorization request in flight. ``repr`` hides the verifier, state and URL."""

    authorization_url: str = field(repr=False)
    state: str = field(repr=False)
    code_verifier: str = field(repr=False)
    redirect_uri: str
    issuer: str
    iss_supported: bool
    scopes: list[str] | None
    resource: str
    client_id: str


def new_pkce() -> tuple[str, str]:
    """(code_verifier, S256 code_challenge) via oauthlib's RFC 7636 helpers."""
    c = _OAuthlibClient("pkce")
    verifier = c.create_code_verifier(64)
    return verifier, c.create_code_challenge(verifier, "S256")


def select_scopes(
    *,
    challenge: list[str] | None,
    configured: list[str] | None,
    prm_supported: list[str] | None,
    previous: list[str] | None,
    asm: AuthServerMetadata | None,
    offline_access: bool,
) -> list[str] | None:
    """MCP scope selection (+ union with ``previous`` for step-up). None means omit ``scope``."""
    base = challenge or configured or prm_supported or []
    out: list[str] = []
    for s in [*(previous or []), *base]:
        if s and s not in out:
            out.append(s)
    offered = asm is not None and asm.offers_offline_access
    if not offered:
        out = [s for s in out if s != "offline_access"]
    elif offline_access and out and "offline_access" not in out:
        out.append("offline_access")
    return out or None


def _with_query(url: str, params: list[tuple[str, str]]) -> str:
    p = urlsplit(url)
    q = parse_qsl(p.query, keep_blank_values=True) + params
    return urlunsplit((p.scheme, p.netloc, p.path, urlencode(q), ""))


def build_authorization_request(
    asm: AuthServerMetadata,
    client: ClientInfo,
    *,
    redirect_uri: str,
    scopes: list[str] | None,
    resource: str,
    allow_insecure: bool,
) -> PendingAuthorization:
    """The authorization URL (code + PKCE S256 + state + resource) and what to check later."""
    if not asm.authorization_endpoint:
        raise AuthError(f"authorization server {asm.issuer} has no authorization_endpoint")
    if not asm.supports_s256:
        raise AuthError(
            f"authorization server {asm.issuer} does not advertise PKCE S256 "
            "(code_challenge_methods_supported); refusing to proceed"
        )
    require_secure(asm.authorization_endpoint, "authorization endpoint", allow_insecure)
    verifier, challenge = new_pkce()
    state = _secrets.token_urlsafe(32)
    params = [
        ("response_type", "code"),
        ("client_id", client.client_id),
        ("redirect_uri", redirect_uri),
        ("state", state),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ]
    if scopes:
        params.append(("scope", " ".join(scopes)))
    params.append(("resource", resource))
    return PendingAuthorization(
        authorization_url=_with_query(asm.authorization_endpoint, params),
        state=state,
        code_verifier=verifier,
        redirect_uri=redirect_uri,
        issuer=asm.issuer,
        iss_supported=asm.authorization_response_iss_parameter_supported,
        scopes=scopes,
        resource=resource,
        client_id=client.client_id,
    )


def parse_authorization_response(
    result: str, pending: PendingAuthorization, *, allow_bare_code: bool = False
) -> str:
    """Validate what came back to the redirect URI; return the authorization code.

    ``result`` is the full redirect URL (or its query string). A bare code is accepted only
    with ``allow_bare_code`` and only when the AS does not send ``iss`` (nothing to verify).
    """
    text = (result or "").strip()
    if not text:
        raise AuthError("no authorization response was received")
    if "://" in text or text.startswith("?") or "=" in text:
        query = urlsplit(text).query if "://" in text else text.lstrip("?")
        params: dict[str, str] = {}
        for k, v in parse_qsl(query, keep_blank_values=True):
            params.setdefault(k, v)
    else:
        if not allow_bare_code:
            raise AuthError("the authorization response is not a redirect URL")
        if pending.iss_supported:
            raise AuthError(
                "paste the full redirected URL (from the browser's address bar), not only the "
                "code: this authorization server signs its responses with an issuer"
            )
        return text
    state = params.get("state")
    if state is None or not hmac.compare_digest(state.encode(), pending.state.encode()):
        raise AuthError("authorization response rejected: state does not match the request")
    iss = params.get("iss")
    if iss is None:
        if pending.iss_supported:
            raise AuthError(
                "authorization response rejected: the server advertises the iss parameter "
                "(RFC 9207) but the response has none"
            )
    elif iss != pending.issuer:  # simple string comparison, no normalization (RFC 3986 6.2.1)
        raise AuthError(
            f"authorization response rejected: issued by {iss!r}, expected {pending.issuer!r} "
            "(possible mix-up attack)"
        )
    if "error" in params:
        desc = params.get("error_description") or ""
        msg = f"authorization was refused: {params['error'][:100]}"
        if desc:
            msg += f" ({desc[:200]})"
        raise AuthError(redact(msg, [params.get("code"), pending.code_verifier, pending.state]))
    code = params.get("code")
    if not code:
        raise AuthError("authorization response has no code")
    return code


def _basic_header(client_id: str, secret: str) -> str:
    raw = f"{quote_plus(client_id, safe='')}:{quote_plus(secret, safe='')}"
    return "Basic " + base64.b64encode(raw.encode()).decode()


def client_assertion(client: ClientInfo, audience: str, *, lifetime: int = 300) -> str:
    """An RFC 7523 client assertion JWT signed with the client's private key (PyJWT)."""
    try:
        import jwt  # PyJWT, needs the 'cryptography' package for ES*/RS*/PS*
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("private_key_jwt needs the PyJWT and cryptography packages") from None
    if not client.private_key_pem:
        raise ConfigError("private_key_jwt needs the client's private key (private_key_pem)")
    now = int(time.time())
    claims = {
        "iss": client.client_id,
        "sub": client.client_id,
        "aud": audience,
        "iat": now,
        "exp": now + lifetime,
        "jti": uuid.uuid4().hex,
    }
    headers = {"kid": client.key_id} if client.key_id else None
    try:
        return jwt.encode(
            claims, client.private_key_pem, algorithm=client.signing_algorithm, headers=headers
        )
    except Exception as exc:  # noqa: BLE001 - key errors: never echo the key
        raise ConfigError(
            f"cannot sign the client assertion with {client.signing_algorithm}: {type(exc).__name__}"
        ) from None


def _no_answer(exc: requests.RequestException) -> str:
    """What went wrong, by kind only (``ConnectionError (ConnectionResetError)``): the
    exception's text may quote the request, which holds secrets."""
    seen: list[BaseException] = []
    todo: list[object] = [exc]
    while todo and len(seen) < 8:
        item = todo.pop(0)
        if isinstance(item, BaseException) and item not in seen:
            seen.append(item)
            todo.extend(item.args)
            todo += [getattr(item, "reason", None), item.__cause__, item.__context__]
    cause = next((e for e in seen[1:] if type(e).__module__ == "builtins"), None)
    return type(exc).__name__ + (f" ({type(cause).__name__})" if cause is not None else "")


def _token_request(
    http: requests.Session,
    asm: AuthServerMetadata,
    client: ClientInfo,
    grant_type: str,
    params: dict[str, Any],
    *,
    timeout: float,
    allow_insecure: bool,
    secrets: list[str | None],
    dpop: DPoPProver | None = None,
    observe: Observer | None = None,
) -> TokenSet:
    endpoint = asm.token_endpoint
    require_secure(endpoint, "token endpoint", allow_insecure)
    method = choose_auth_method(client, asm)
    headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
    kw = {k: v for k, v in params.items() if v is not None}
    include_client_id = True
    secret_list = list(secrets) + [client.client_secret]
    if method == "client_secret_basic":
        if not client.client_secret:
            raise AuthError("client_secret_basic needs a client secret")
        headers["Authorization"] = _basic_header(client.client_id, client.client_secret)
        include_client_id = False
    elif method == "client_secret_post":
        if not client.client_secret:
            raise AuthError("client_secret_post needs a client secret")
        kw["client_secret"] = client.client_secret
    elif method == "private_key_jwt":
        assertion = client_assertion(client, asm.issuer)
        secret_list.append(assertion)
        kw["client_assertion_type"] = JWT_BEARER_ASSERTION
        kw["client_assertion"] = assertion
    body = prepare_token_request(
        grant_type, include_client_id=include_client_id, client_id=client.client_id or None, **kw
    )
    # Every failure below is raised outside its except block: the exception it replaces
    # (a requests error holding the request body, oauthlib's error quoting the response,
    # a JSON error holding the page) must not ride along as __context__.
    failure: AuthError | None = None
    try:
        r = post_token_request(
            http, endpoint, body, headers, timeout=timeout, dpop=dpop, observe=observe
        )
    except requests.RequestException as exc:  # no answer: nothing was refused
        failure = AuthServerUnreachable(
            f"token request to {short(endpoint)} failed: {_no_answer(exc)}"
        )
    if failure is not None:
        raise failure
    try:
        text = r.text
    finally:
        r.close()
    log.debug(
        "token request (%s, %s) to %s -> HTTP %s",
        grant_type,
        method,
        short(endpoint),
        r.status_code,
    )
    try:
        tok = parse_token_response(text)
    except MissingTokenError:  # neither a token nor an OAuth error: an HTML page, an empty body
        kind = (r.headers.get("Content-Type") or "no content type").split(";")[0].strip()[:60]
        failure = AuthError(
            f"token request ({grant_type.rsplit(':', 1)[-1]}) to {short(endpoint)} gave no "
            f"usable token (HTTP {r.status_code}, {kind})"
        )
    except OAuth2Error as exc:
        step = grant_type.rsplit(":", 1)[-1]  # urn:...:grant-type:jwt-bearer -> jwt-bearer
        msg = f"token request ({step}) refused by {short(endpoint)}: {exc.error}"
        if exc.description:
            msg += f" ({str(exc.description)[:200]})"
        failure = TokenError.of(
            redact(msg, secret_list), error=exc.error, step=step, status=r.status_code
        )
    except Exception as exc:  # noqa: BLE001 - non-JSON garbage, missing fields, oauthlib warnings
        failure = AuthError(
            f"token request ({grant_type}) to {short(endpoint)} gave no usable token "
            f"(HTTP {r.status_code}, {type(exc).__name__})"
        )
    if failure is not None:
        raise failure
    if r.status_code != 200:
        raise AuthError(
            f"token request ({grant_type}) to {short(endpoint)} answered HTTP {r.status_code}"
        )
    token_type = str(tok.get("token_type") or "Bearer")
    bound = token_type.lower() == "dpop"
    if token_type.lower() != "bearer" and not (bound and dpop is not None):
        raise AuthError(
            f"token request ({grant_type}): the authorization server issued a "
            f"{token_type[:20]!r} token"
            + ("" if bound else "; only Bearer and DPoP are supported")
            + (" although no DPoP proof was sent" if bound else "")
        )
    scope = tok.get("scope")
    expires_at = tok.get("expires_at")
    return TokenSet(
        access_token=str(tok["access_token"]),
        token_type="DPoP" if bound else "Bearer",
        dpop_key=dpop.key if bound and dpop is not None else None,
        refresh_token=tok.get("refresh_token")
        if isinstance(tok.get("refresh_token"), str)
        else None,
        expires_at=float(expires_at) if isinstance(expires_at, (int, float)) else None,
        scopes=list(scope) if isinstance(scope, (list, tuple)) else None,
        requested_scopes=(params.get("scope") or "").split() or None,
        issuer=asm.issuer,
        client_id=client.client_id,
        token_endpoint=endpoint,
    )


def exchange_code(
    http: requests.Session,
    asm: AuthServerMetadata,
    client: ClientInfo,
    code: str,
    pending: PendingAuthorization,
    *,
    timeout: float,
    allow_insecure: bool,
    dpop: DPoPProver | None = None,
) -> TokenSet:
    """authorization_code grant with the PKCE verifier and the same ``resource``."""
    tok = _token_request(
        http,
        asm,
        client,
        "authorization_code",
        {
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "code_verifier": pending.code_verifier,
            "resource": pending.resource,
        },
        timeout=timeout,
        allow_insecure=allow_insecure,
        secrets=[code, pending.code_verifier],
        dpop=dpop,
    )
    tok.resource = pending.resource
    tok.requested_scopes = pending.scopes
    return tok


def refresh_access_token(
    http: requests.Session,
    asm: AuthServerMetadata,
    client: ClientInfo,
    old: TokenSet,
    *,
    timeout: float,
    allow_insecure: bool,
    dpop: DPoPProver | None = None,
) -> TokenSet:
    """refresh_token grant; keeps the old refresh token if the AS does not rotate it."""
    if not old.refresh_token:
        raise AuthError("no refresh token")
    tok = _token_request(
        http,
        asm,
        client,
        "refresh_token",
        {"refresh_token": old.refresh_token, "resource": old.resource},
        timeout=timeout,
        allow_insecure=allow_insecure,
        secrets=[old.refresh_token, old.access_token],
        dpop=dpop,
    )
    tok.resource = old.resource
    tok.requested_scopes = old.requested_scopes
    if tok.refresh_token is None:
        tok.refresh_token = old.refresh_token
    if tok.scopes is None:
        tok.scopes = old.scopes
    return tok


def client_credentials_grant(
    http: requests.Session,
    asm: AuthServerMetadata,
    client: ClientInfo,
    *,
    scopes: list[str] | None,
    resource: str,
    timeout: float,
    allow_insecure: bool,
    dpop: DPoPProver | None = None,
) -> TokenSet:
    """client_credentials grant (the client acts on its own behalf)."""
    tok = _token_request(
        http,
        asm,
        client,
        "client_credentials",
        {"scope": " ".join(scopes) if scopes else None, "resource": resource},
        timeout=timeout,
        allow_insecure=allow_insecure,
        secrets=[],
        dpop=dpop,
    )
    tok.resource = resource
    tok.requested_scopes = scopes
    return tok
