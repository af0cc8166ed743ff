"""The glue: a ``requests`` auth object that runs MCP authorization when a server asks.

Owns :class:`OAuth`. Give it to ``requests`` (``auth=``) or to ``mcpsync.Session.connect``.
It is bound to one MCP server: the first URL it sees (or ``server_url=``). For requests to
that origin it adds ``Authorization: Bearer <token>`` (or ``DPoP <token>`` and a proof); for
any other origin it adds nothing and ignores their replies, and ``requests`` itself drops
the header on a redirect to another origin, so a token never leaves its server.

``OAuth`` keeps the token (store, refresh, the flow that obtains a new one) and holds the
rest as members, each given what it needs when ``OAuth`` is made:

- ``_presenter``: :class:`~.presenting.Presenter`, the per-request half (the bound server,
  headers, the response hook and re-sends, the 401/403 answers and attempt counting);
  ``OAuth`` is the ``requests`` auth object and declares the transports' fast-path
  interface ``RequestAuth``, and forwards both to it;
- ``_clients``: :class:`~.selection.ClientSelection`, discovery and which client to
  present (pre-registered, CIMD, DCR);
- ``_dpop``: :class:`~.binding.DPoPBinding`, whether tokens are DPoP-bound and with what key;
- ``_machine``: a :class:`~.grants.Grant` (workload identity, enterprise-managed) run
  instead of the redirect, given a :class:`~.grants.GrantContext`.

On ``401`` and ``403 insufficient_scope`` (under a lock, so concurrent requests share one
flow) it re-reads the Protected Resource Metadata (which may name a new authorization
server: old tokens and client credentials are not reused there), refreshes the token when
it can, else runs the authorization (code + PKCE, or client_credentials), and re-sends the
original request once per attempt. Step-up requests the union of previous and challenged
scopes, at most ``max_auth_attempts`` (3) authorizations per request, then raises
:class:`AuthError`. Tokens about to expire are refreshed before a request is sent.

A refresh holds the token store's lock (``locked()``: across threads and processes for a
:class:`FileTokenStore`) and reads the store again first, so threads, processes and
workers sharing one store refresh once per expiry: a token another of them stored is used
(or refreshed with its own refresh token; a rotated one is never sent again), and an
``invalid_grant`` for a refresh token someone else already used falls back to the token
they stored. A refresh that gets no answer (connection refused or reset, a timeout) is not
a refusal: it raises :class:`~mcpsync.errors.AuthServerUnreachable` for the request that
needed it, keeps the token and its refresh token, and never starts an authorization.

>>> auth = OAuth(client_name="my-app", store=FileTokenStore("~/.cache/mcpsync/tokens.json"))  # doctest: +SKIP
>>> requests.post("https://mcp.example.com/mcp", json=msg, auth=auth)                      # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import requests
from requests.auth import AuthBase

from .. import telemetry as _telemetry
from ..errors import AuthError, AuthServerUnreachable, ConfigError, InvalidGrant, TokenError
from ..transports.http.requestauth import ReplyHeaders, RequestAuth
from ._util import canonical_server_url, log, short
from .binding import DPoPBinding
from .device import DeviceFlow, DeviceUnavailable, device_flow_for
from .discovery import (
    AuthServerMetadata,
    discover_authorization_server,
)
from .dpop import require_cryptography
from .flow import (
    TokenSet,
    build_authorization_request,
    client_credentials_grant,
    exchange_code,
    parse_authorization_response,
    refresh_access_token,
    select_scopes,
)
from .grants import (
    AssertionProvider,
    EnterpriseManaged,
    Grant,
    GrantContext,
    WorkloadIdentity,
    assertion_source,
)
from .presenting import Obtained, Presenter
from .redirect import RedirectHandler, resolve_redirect
from .registration import (
    validate_client_metadata_url,
)
from .selection import ClientSelection
from .storage import LockableTokenStore, MemoryTokenStore, TokenStore
from .tls import pin_tls
from .www_authenticate import Challenge

__all__ = ["OAuth"]

#: an assertion or ID token: the JWT, a callable returning it, or an AssertionProvider
_Source = str | Callable[[], str] | AssertionProvider | None
_O = TypeVar("_O", bound="OAuth")


class OAuth(RequestAuth, AuthBase):
    """MCP authorization for one server, as a ``requests`` auth object.

    Authorization code flow (a person approves in a browser)::

        auth = OAuth(client_name="my-app")                      # DCR / CIMD, browser or paste
        auth = OAuth(client_id="abc", client_secret="s3cret",   # pre-registered at an AS
                     issuer="https://auth.example.com")
        auth = OAuth(client_metadata_url="https://app.example.com/client.json",
                     redirect_uri="http://127.0.0.1:8976/callback", redirect="paste")
        auth = OAuth(redirect=lambda url: robot_visits(url))    # programmatic

    Machine-to-machine: :meth:`client_credentials`, :meth:`workload_identity` (a workload's
    platform JWT), :meth:`enterprise_managed` (the user's enterprise ID token, via an ID-JAG).

    Parameters (all keyword-only):
        client_name: shown by the AS on its consent page (DCR).
        redirect: "auto" (default), "terminal", "paste", "headless", a callable
            ``f(authorization_url) -> redirected_url``, or a :class:`RedirectHandler`; or
            "device" / a :class:`DeviceFlow`: the RFC 8628 device grant (show a code, poll).
            "auto" opens the browser with a loopback redirect; where no browser can be
            opened (no display, SSH, a notebook) it uses the device grant when the AS
            offers it and no ``redirect_uri`` is given, else the paste redirect.
        redirect_uri: the redirect URI to use (default: loopback on an ephemeral port for
            "terminal", ``http://127.0.0.1:8976/callback`` otherwise). It must be registered
            with pre-registered clients and listed in a client metadata document.
        client_id, client_secret, issuer: pre-registered credentials; ``issuer`` binds them
            to one authorization server (else they bind to the first one used).
        client_metadata_url: your Client ID Metadata Document URL (https, with a path), used
            as ``client_id`` when the AS supports it.
        scopes: scopes to ask for when the server's challenge names none (default: the
            server's ``scopes_supported``).
        store: a :class:`TokenStore` (default in-memory; :class:`FileTokenStore` persists).
        offline_access: ask for ``offline_access`` when the AS offers it (refresh tokens).
        application_type, client_metadata: override / extend the DCR registration body.
        token_endpoint_auth_method: force one for pre-registered clients.
        http_session: a ``requests.Session`` for talking to authorization servers
            (proxies, certificates); never given this auth object.
        timeout: seconds per HTTP request to authorization servers.
        authorization_timeout: seconds to wait for the person to approve.
        max_auth_attempts: authorizations per request before giving up (step-up loops).
        allow_insecure_http: allow plain-http authorization endpoints off loopback.
        server_url: bind to this MCP server up front instead of the first request's URL.
        dpop: DPoP-bound tokens (RFC 9449): "auto" (default) when the MCP server takes DPoP
            and the authorization server advertises it, or the MCP server takes only DPoP;
            True always; False never. Needs ``cryptography`` (``mcpsync[jwt]``).
        dpop_algorithm: the proof algorithm to prefer (ES256; ES384, ES512, EdDSA).
    """

    def __init__(
        self,
        *,
        client_name: str = "mcpsync",
        redirect: str | Callable[[str], str] | RedirectHandler | DeviceFlow = "auto",
        redirect_uri: str | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        issuer: str | None = None,
        client_metadata_url: str | None = None,
        scopes: Sequence[str] | str | None = None,
        store: TokenStore | None = None,
        offline_access: bool = True,
        application_type: str | None = None,
        client_metadata: dict[str, Any] | None = None,
        token_endpoint_auth_method: str | None = None,
        http_session: requests.Session | None = None,
        timeout: float = 30.0,
        authorization_timeout: float = 300.0,
        max_auth_attempts: int = 3,
        allow_insecure_http: bool = False,
        server_url: str | None = None,
        dpop: bool | str = "auto",
        dpop_algorithm: str = "ES256",
    ) -> None:
        if dpop not in (True, False, "auto"):
            raise ConfigError("dpop must be True, False or 'auto'")
        if dpop is True:
            require_cryptography("configuration")
        if client_secret is not None and client_id is None:
            raise ConfigError("client_secret given without client_id")
        if max_auth_attempts < 1:
            raise ConfigError("max_auth_attempts must be at least 1")
        cimd_url = (
            validate_client_metadata_url(client_metadata_url) if client_metadata_url else None
        )
        self._grant = "authorization_code"
        self._machine: Grant | None = None  # workload_identity / enterprise_managed (grants.py)
        self._redirect_spec = redirect
        self._redirect_uri = redirect_uri
        self._redirect: RedirectHandler | None = None
        self._scopes = _scope_list(scopes)
        self._store: TokenStore = store if store is not None else MemoryTokenStore()
        self._offline_access = offline_access
        self._http = http_session or requests.Session()
        self._own_http = http_session is None
        self._clients = ClientSelection(
            client_name=client_name,
            client_id=client_id,
            client_secret=client_secret,
            issuer=issuer,
            auth_method=token_endpoint_auth_method,
            cimd_url=cimd_url,
            application_type=application_type,
            client_metadata_extra=dict(client_metadata or {}),
            http=self._http,
            timeout=timeout,
            allow_insecure_http=allow_insecure_http,
            store=self._store,
        )
        self._dpop = DPoPBinding(dpop, dpop_algorithm)
        self.authorization_timeout = authorization_timeout
        self.refresh_skew = 60.0
        self._lock = threading.RLock()
        self._presenter = Presenter(
            server_url=canonical_server_url(server_url) if server_url else None,
            lock=self._lock,
            dpop=self._dpop,
            max_auth_attempts=max_auth_attempts,
            usable_token=self._usable_token,
            current_token=self._current_token,
            obtain_token=self._obtain_token,
        )
        self._token: TokenSet | None = None
        #: the access token last taken from the store as another user of it left it
        self._adopted: str | None = None
        self._loaded = False
        self._requested_scopes: list[str] | None = None
        self._asm: dict[str, AuthServerMetadata] = {}

    # -- construction ----------------------------------------------------------------
    @classmethod
    def client_credentials(
        cls,
        client_id: str,
        client_secret: str | None = None,
        *,
        private_key_pem: str | None = None,
        signing_algorithm: str = "ES256",
        key_id: str | None = None,
        scopes: Sequence[str] | str | None = None,
        issuer: str | None = None,
        store: TokenStore | None = None,
        token_endpoint_auth_method: str | None = None,
        http_session: requests.Session | None = None,
        timeout: float = 30.0,
        allow_insecure_http: bool = False,
        server_url: str | None = None,
        dpop: bool | str = "auto",
        dpop_algorithm: str = "ES256",
    ) -> OAuth:
        """A client acting on its own behalf (``client_credentials`` grant).

        Authenticate with ``client_secret`` (``client_secret_basic`` or ``_post``, as the
        AS supports) or with ``private_key_pem`` (``private_key_jwt``: an RFC 7523
        assertion signed with ``signing_algorithm``, e.g. ES256, RS256; needs PyJWT).

        >>> auth = OAuth.client_credentials("svc", "s3cret")                     # doctest: +SKIP
        >>> auth = OAuth.client_credentials("svc", private_key_pem=open("k.pem").read())  # doctest: +SKIP
        """
        if not client_secret and not private_key_pem:
            raise ConfigError("client_credentials needs client_secret or private_key_pem")
        self = cls(
            client_id=client_id,
            client_secret=client_secret,
            issuer=issuer,
            scopes=scopes,
            store=store,
            offline_access=False,
            token_endpoint_auth_method=token_endpoint_auth_method,
            http_session=http_session,
            timeout=timeout,
            allow_insecure_http=allow_insecure_http,
            server_url=server_url,
            redirect="headless",  # never used
            dpop=dpop,
            dpop_algorithm=dpop_algorithm,
        )
        self._grant = "client_credentials"
        self._clients.use_private_key(private_key_pem, signing_algorithm, key_id)
        return self

    @classmethod
    def workload_identity(
        cls: type[_O],
        assertion: _Source = None,
        *,
        assertion_file: str | os.PathLike[str] | None = None,
        assertion_env: str | None = None,
        client_id: str | None = None,
        scopes: Sequence[str] | str | None = None,
        issuer: str | None = None,
        store: TokenStore | None = None,
        http_session: requests.Session | None = None,
        timeout: float = 30.0,
        allow_insecure_http: bool = False,
        server_url: str | None = None,
        dpop: bool | str = "auto",
        dpop_algorithm: str = "ES256",
    ) -> _O:
        """A workload authenticating with its platform identity JWT (workload identity
        federation, SEP-1933; RFC 7523 jwt-bearer grant). No client registration, no secret.

        The assertion comes from exactly one of ``assertion`` (the JWT, or a callable
        returning it), ``assertion_file`` (re-read on every use: a Kubernetes projected
        token stays fresh) or ``assertion_env``. ``client_id`` is sent only when given.
        A refusal raises ``InvalidGrant`` / ``UnauthorizedClient`` / ``InvalidScope``.
        ``dpop`` and ``dpop_algorithm`` as for ``OAuth`` (the jwt-bearer request then carries
        a DPoP proof).

        >>> OAuth.workload_identity(assertion_file="/var/run/secrets/tokens/mcp")  # doctest: +SKIP
        """
        source = assertion_source(
            assertion, file=assertion_file, env=assertion_env, what="workload assertion"
        )
        self = cls(
            scopes=scopes, issuer=issuer, store=store, offline_access=False,
            http_session=http_session, timeout=timeout, allow_insecure_http=allow_insecure_http,
            server_url=server_url, dpop=dpop, dpop_algorithm=dpop_algorithm,
            redirect="headless",  # never used
        )  # fmt: skip
        self._use_grant(WorkloadIdentity(source, client_id=client_id))
        return self

    @classmethod
    def enterprise_managed(
        cls: type[_O],
        client_id: str,
        client_secret: str | None = None,
        *,
        id_token: _Source = None,
        id_token_file: str | os.PathLike[str] | None = None,
        id_token_env: str | None = None,
        idp_token_endpoint: str | None = None,
        idp_issuer: str | None = None,
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
        scopes: Sequence[str] | str | None = None,
        issuer: str | None = None,
        store: TokenStore | None = None,
        token_endpoint_auth_method: str | None = None,
        http_session: requests.Session | None = None,
        timeout: float = 30.0,
        allow_insecure_http: bool = False,
        server_url: str | None = None,
        dpop: bool | str = "auto",
        dpop_algorithm: str = "ES256",
    ) -> _O:
        """Enterprise-managed authorization (SEP-990, ID-JAG): the user's ID token is
        exchanged at the enterprise IdP (RFC 8693, at ``idp_token_endpoint`` or the token
        endpoint of ``idp_issuer``) for an ID-JAG whose audience is the MCP server's
        authorization server and whose resource is the MCP server; the ID-JAG then goes to
        that authorization server in the jwt-bearer grant, authenticated as ``client_id``
        (+ ``client_secret``). The ID token comes from ``id_token`` (value or callable),
        ``id_token_file`` or ``id_token_env``; ``idp_client_id`` / ``idp_client_secret``
        are the client's credentials at the IdP.

        >>> OAuth.enterprise_managed("app", "s3cret", id_token=get_id_token,
        ...                          idp_issuer="https://idp.example.com")  # doctest: +SKIP
        """
        source = assertion_source(id_token, file=id_token_file, env=id_token_env, what="ID token")
        self = cls(
            client_id=client_id, client_secret=client_secret, issuer=issuer, scopes=scopes,
            store=store, offline_access=False, token_endpoint_auth_method=token_endpoint_auth_method,
            http_session=http_session, timeout=timeout, allow_insecure_http=allow_insecure_http,
            server_url=server_url, dpop=dpop, dpop_algorithm=dpop_algorithm,
            redirect="headless",  # never used
        )  # fmt: skip
        self._use_grant(
            EnterpriseManaged(
                source,
                idp_token_endpoint=idp_token_endpoint,
                idp_issuer=idp_issuer,
                idp_client_id=idp_client_id,
                idp_client_secret=idp_client_secret,
            )
        )
        return self

    def _use_grant(self, grant: Grant) -> None:
        """Obtain tokens with ``grant`` (grants.py) instead of the redirect."""
        self._machine = grant
        self._grant = grant.name

    def __repr__(self) -> str:
        return (
            f"OAuth(client_name={self.client_name!r}, grant={self._grant!r}, "
            f"server={self.server_url!r}, authorized={self._token is not None})"
        )

    # -- settings held by the members --------------------------------------------------
    @property
    def client_name(self) -> str:
        """Shown by the AS on its consent page (DCR)."""
        return self._clients.client_name

    @client_name.setter
    def client_name(self, value: str) -> None:
        self._clients.client_name = value

    @property
    def timeout(self) -> float:
        """Seconds per HTTP request to authorization servers."""
        return self._clients.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self._clients.timeout = value

    @property
    def allow_insecure_http(self) -> bool:
        """Plain-http authorization endpoints allowed off loopback."""
        return self._clients.allow_insecure_http

    @allow_insecure_http.setter
    def allow_insecure_http(self, value: bool) -> None:
        self._clients.allow_insecure_http = value

    @property
    def max_auth_attempts(self) -> int:
        """Authorizations per request before giving up (step-up loops)."""
        return self._presenter.max_auth_attempts

    @max_auth_attempts.setter
    def max_auth_attempts(self, value: int) -> None:
        self._presenter.max_auth_attempts = value

    @property
    def flow_seconds(self) -> float:
        """Seconds spent answering 401/403 challenges (discovery, registration, tokens)."""
        return self._presenter.flow_seconds

    @flow_seconds.setter
    def flow_seconds(self, value: float) -> None:
        self._presenter.flow_seconds = value

    # -- read-only state -------------------------------------------------------------
    @property
    def server_url(self) -> str | None:
        """The MCP server this object is bound to (None until the first request)."""
        return self._presenter.server_url

    @property
    def authorized(self) -> bool:
        """True when a token is held for the server."""
        return self._token is not None

    @property
    def issuer(self) -> str | None:
        """Issuer of the current token."""
        return self._token.issuer if self._token else None

    @property
    def granted_scopes(self) -> list[str] | None:
        """Scopes of the current token (as granted, else as requested)."""
        if self._token is None:
            return None
        return self._token.scopes or self._token.requested_scopes

    def logout(self) -> None:
        """Forget the token for this server (in memory and in the store)."""
        with self._lock:
            self._drop_token(everywhere=True)

    def close(self) -> None:
        """Close the HTTP session this object created (it stays usable)."""
        if self._own_http:
            self._http.close()

    def use_tls(
        self, *, verify: bool | str | None = None, cert: str | tuple[str, str] | None = None
    ) -> None:
        """TLS for the requests to metadata and authorization servers, as in ``requests``:
        ``verify`` a CA bundle path or False, ``cert`` a client certificate path or (cert,
        key). ``Session.connect(verify=, cert=)`` calls this; a caller's ``http_session``
        is left as it is."""
        if self._own_http:
            pin_tls(self._http, verify, cert)  # over REQUESTS_CA_BUNDLE too

    # -- presenting: requests' auth object and the transports' RequestAuth ----------------
    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        return self._presenter.prepare(r)

    @property
    def max_resends(self) -> int:
        """Step-up authorizations, a refresh, and the nonce re-sends of one request."""
        return self._presenter.max_resends

    def request_headers(self, method: str, url: str, state: dict[str, Any]) -> Mapping[str, str]:
        return self._presenter.headers(method, url, renew=not state.get("answered"), state=state)

    def request_sent(self, method: str, url: str, state: dict[str, Any]) -> None:
        """A DPoP-bound request is on the wire: sign the next one's proof while it is answered."""
        ahead = state.get("ahead")
        if ahead is not None:
            self._presenter.sign_ahead(method, url, ahead)

    def answer(
        self,
        method: str,
        url: str,
        status: int,
        headers: ReplyHeaders,
        sent: Mapping[str, str],
        state: dict[str, Any],
    ) -> bool:
        return self._presenter.answer(method, url, status, headers, sent, state)

    # -- tokens -----------------------------------------------------------------------
    def _token_key(self, issuer: str | None, resource: str | None, client: str | None) -> str:
        return f"token {issuer} {resource} {client or '-'}"  # bound to issuer, resource, client

    def _index_key(self) -> str:  # which token a server URL used last, per pre-registered client
        return f"server {self.server_url}" + (
            f" {self._clients.client_id}" if self._clients.client_id else ""
        )

    def _current_token(self) -> TokenSet | None:
        return self._token

    def _usable_token(self) -> TokenSet | None:
        if self._token is None and not self._loaded:
            self._loaded = True
            self._load_from_store()
        tok = self._token
        if tok is None:
            return None
        if tok.expires_within(self.refresh_skew):
            if self._grant != "authorization_code" and tok.issuer in self._asm and tok.resource:
                try:
                    self._client_credentials(
                        self._asm[tok.issuer], tok.resource, tok.requested_scopes
                    )
                    return self._token
                except AuthError as exc:
                    log.info("%s renewal failed: %s", self._grant, exc)
                    self._drop_token()
                    if self._machine is not None and isinstance(exc, TokenError):
                        raise  # a refused assertion is not tried again, by any grant
                    return None
            if tok.refresh_token:
                try:
                    self._refresh(tok)
                    return self._token
                except AuthServerUnreachable as exc:  # nothing refused: the token stays
                    if tok.expires_within(0):
                        raise
                    log.info("token refresh failed (%s); the token is still valid", exc)
                    return tok
                except AuthError as exc:
                    log.info("token refresh failed: %s", exc)
                    self._drop_token()
                    return None
            if tok.expires_within(0):
                self._drop_token()
                return None
        return tok

    def _load_from_store(self) -> None:
        idx = self._store.get(self._index_key())
        if not isinstance(idx, dict):
            return
        if self._clients.client_id and idx.get("client_id") != self._clients.client_id:
            return  # another client's token
        key = self._token_key(idx.get("issuer"), idx.get("resource"), idx.get("client_id"))
        tok = TokenSet.from_store(self._store.get(key))
        if tok is not None:
            self._token = tok
            self._requested_scopes = tok.requested_scopes
            log.debug(
                "using a stored token for %s from %s", short(self.server_url or ""), tok.issuer
            )

    def _set_token(self, tok: TokenSet) -> None:
        self._dpop.check(tok, self.server_url or "")
        self._token = tok
        self._store.set(self._token_key(tok.issuer, tok.resource, tok.client_id), tok.to_store())
        index = {"issuer": tok.issuer, "resource": tok.resource, "client_id": tok.client_id}
        self._store.set(self._index_key(), index)

    def _drop_token(self, *, everywhere: bool = False) -> None:
        """Forget the current token; in the store too when the store still holds that one
        (or ``everywhere``): a newer token another user of the store obtained stays."""
        tok, self._token = self._token, None
        if tok is None:
            return
        with self._store_locked():
            if everywhere or self._stored_instead(tok) is None:
                self._store.delete(self._token_key(tok.issuer, tok.resource, tok.client_id))

    def _store_locked(self) -> contextlib.AbstractContextManager[None]:
        """The store held against its other users (threads, processes), when it can be
        (``locked()``: :class:`FileTokenStore`, :class:`MemoryTokenStore`, the keyring
        store); a store without it has only this object's lock. The wait is bounded by
        what the holder's refresh may take (a discovery and a token request)."""
        if not isinstance(self._store, LockableTokenStore):
            return contextlib.nullcontext()
        return self._store.locked(2 * self.timeout + 5.0)

    def _stored_instead(self, tok: TokenSet) -> TokenSet | None:
        """The store's token for ``tok``'s key when it is another one than ``tok`` (another
        thread or process refreshed it), else None."""
        stored = TokenSet.from_store(
            self._store.get(self._token_key(tok.issuer, tok.resource, tok.client_id))
        )
        if stored is None or (
            stored.access_token == tok.access_token and stored.refresh_token == tok.refresh_token
        ):
            return None
        return stored

    def _adopt(self, tok: TokenSet, why: str) -> None:
        self._dpop.check(tok, self.server_url or "")
        self._token = tok
        self._adopted = tok.access_token
        log.info("using the token %s for %s", why, short(self.server_url or ""))

    def _refresh(self, tok: TokenSet) -> None:
        """A new access token for ``tok`` (expiring, or refused by the server): one refresh
        for every user of the store. Under the store's lock the store is read again: a
        token another thread or process stored meanwhile is used as it is (when it is not
        about to expire) or refreshed with *its* refresh token (a rotated one is never sent
        again); an ``invalid_grant`` answer is checked against the store once more (a
        process that refreshed without the lock) before it counts as a failure."""
        with self._store_locked():
            newer = self._stored_instead(tok)
            if newer is not None and not newer.expires_within(self.refresh_skew):
                self._adopt(newer, "another user of the token store obtained")
                return
            if newer is not None and newer.refresh_token:
                tok = newer
            try:
                new = self._refresh_grant(tok)
            except InvalidGrant:
                again = self._stored_instead(tok)
                if again is None or again.expires_within(0):
                    raise
                self._adopt(again, "stored meanwhile (the refresh token had been used)")
                return
            self._set_token(new)
        log.info("refreshed the access token for %s", short(self.server_url or ""))

    def _refresh_grant(self, tok: TokenSet) -> TokenSet:
        asm = self._asm.get(tok.issuer or "")
        if asm is None and tok.issuer:
            try:
                asm = discover_authorization_server(self._http, tok.issuer, timeout=self.timeout)
            except AuthError:
                asm = None
        if asm is None:
            if not tok.token_endpoint or not tok.issuer:
                raise AuthError("cannot refresh: authorization server unknown")
            asm = AuthServerMetadata(
                issuer=tok.issuer, authorization_endpoint=None, token_endpoint=tok.token_endpoint
            )
        client = self._clients.known_client(asm, self.server_url)
        if client is None or client.client_id != tok.client_id:
            raise AuthError("cannot refresh: the client that obtained the token is unknown")
        return refresh_access_token(
            self._http,
            asm,
            client,
            tok,
            timeout=self.timeout,
            allow_insecure=self.allow_insecure_http,
            dpop=self._dpop.for_token(tok),
        )

    # -- the flow ---------------------------------------------------------------------
    def _obtain_token(
        self, challenge: Challenge | None, step_up: bool, allow_refresh: bool
    ) -> Obtained:
        """Get a new token for the server; returns how (a refresh, an authorization, ...).
        During a session's bring-up with telemetry, inside an ``auth`` span with a span per
        step (``mcpsync.telemetry.step``)."""
        with _telemetry.step("auth"):
            return self._obtain(challenge, step_up=step_up, allow_refresh=allow_refresh)

    def _obtain(
        self, challenge: Challenge | None, *, step_up: bool, allow_refresh: bool
    ) -> Obtained:
        server = self.server_url
        assert server is not None
        with _telemetry.step("discovery"):
            prm, resource, asm = self._clients.discover(server, challenge)
        self._asm[asm.issuer] = asm
        self._dpop.select(prm, asm, self._token, server)
        old = self._token
        if old is not None and (old.issuer != asm.issuer or old.resource != resource):
            log.info(
                "authorization server for %s is now %s (was %s)",
                short(self.server_url or ""),
                asm.issuer,
                old.issuer,
            )
            self._drop_token()
            old = None
        # a token taken from the store that the server refused too may be refreshed once more
        retry = old is not None and old.access_token == self._adopted
        if (allow_refresh or retry) and not step_up and old is not None and old.refresh_token:
            try:
                with _telemetry.step("token"):
                    self._refresh(old)
                return Obtained.REFRESH
            except AuthServerUnreachable:
                raise  # the refresh token was not refused: no authorization in its place
            except AuthError as exc:
                log.info("token refresh failed (%s); authorizing again", exc)
        scopes_args = dict(
            challenge=challenge.scopes if challenge else None,
            configured=self._scopes,
            prm_supported=prm.scopes_supported if prm else None,
            previous=self._requested_scopes,
        )
        if self._grant != "authorization_code":  # client_credentials, or a Grant (grants.py)
            with _telemetry.step("token"):
                self._client_credentials(
                    asm, resource, select_scopes(**scopes_args, asm=None, offline_access=False)
                )
            return Obtained.GRANT
        scopes = select_scopes(**scopes_args, asm=asm, offline_access=self._offline_access)
        device = device_flow_for(self._redirect_spec, asm, self._redirect_uri)
        if device is not None:  # RFC 8628: no redirect at all (device.py); "auto" too
            try:  # when no browser can be opened here
                tok = device.obtain(self._grant_context(), asm, resource, scopes)
            except DeviceUnavailable as exc:  # "auto": the AS refused it; a redirect then
                log.info("%s; using a redirect", exc)
            else:
                self._requested_scopes = scopes
                self._set_token(tok)
                return Obtained.DEVICE
        handler = self._redirect_handler()
        try:
            redirect_uri = handler.prepare()
            with _telemetry.step("registration"):
                client = self._clients.client_for(asm, redirect_uri, self.server_url)
            pending = build_authorization_request(
                asm, client, redirect_uri=redirect_uri, scopes=scopes, resource=resource,
                allow_insecure=self.allow_insecure_http,
            )  # fmt: skip
            log.info(
                "authorizing %s at %s (scope %s)",
                short(self.server_url or ""),
                asm.issuer,
                " ".join(scopes or []) or "-",
            )
            result = handler.complete(
                pending.authorization_url, pending.state, self.authorization_timeout
            )
        finally:
            handler.close()
        code = parse_authorization_response(
            result, pending, allow_bare_code=handler.allow_bare_code
        )
        with _telemetry.step("token"):
            tok = exchange_code(
                self._http, asm, client, code, pending, timeout=self.timeout,
                allow_insecure=self.allow_insecure_http, dpop=self._dpop.prover,
            )  # fmt: skip
        self._requested_scopes = scopes
        self._set_token(tok)
        log.info("authorized %s with %s", short(self.server_url or ""), asm.issuer)
        return Obtained.AUTHORIZE

    def _client_credentials(
        self, asm: AuthServerMetadata, resource: str, scopes: list[str] | None
    ) -> None:
        if self._machine is not None:  # jwt-bearer: workload identity, enterprise-managed
            tok = self._machine.obtain(self._grant_context(), asm, resource, scopes)
        else:
            client = self._clients.preregistered(asm, self.server_url)
            assert client is not None
            tok = client_credentials_grant(
                self._http, asm, client, scopes=scopes, resource=resource,
                timeout=self.timeout, allow_insecure=self.allow_insecure_http,
                dpop=self._dpop.prover,
            )  # fmt: skip
        self._requested_scopes = scopes
        self._set_token(tok)
        log.info("obtained a %s token from %s", self._grant, asm.issuer)

    def _grant_context(self) -> GrantContext:
        """What a grant (device, workload identity, enterprise-managed) runs with."""
        return GrantContext(
            self._clients,
            prover=self._dpop.prover,
            authorization_timeout=self.authorization_timeout,
            server_url=self.server_url,
        )

    def _redirect_handler(self) -> RedirectHandler:
        if self._redirect is None:
            self._redirect = resolve_redirect(self._redirect_spec, self._redirect_uri)
        return self._redirect


def _scope_list(scopes: Sequence[str] | str | None) -> list[str] | None:
    if scopes is None:
        return None
    if isinstance(scopes, str):
        scopes = scopes.split()
    out = [s for s in scopes if s]
    return out or None
