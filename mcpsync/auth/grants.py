"""Token grants that need no browser redirect, and where their assertions come from.

Owns:

- :class:`AssertionProvider` and :func:`assertion_source`: a JWT read fresh on every use
  from a callable, a file (e.g. a Kubernetes projected service-account token, which the
  kubelet rotates in place) or an environment variable; a literal string is accepted too.
  A JWT whose ``exp`` is already past is refused before it is sent.
- :func:`jwt_bearer_grant`: the RFC 7523 section 2.1 grant
  (``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``, ``assertion``, ``scope``,
  RFC 8707 ``resource``) through the shared token request of :mod:`.flow` (so client
  authentication and DPoP proofs are the same as for every other grant).
- :class:`Grant` (what ``OAuth`` runs instead of the authorization-code redirect) and
  :class:`WorkloadIdentity` (workload identity federation, SEP-1933: the workload's platform
  JWT is the credential; no client registration, no secret).
- :class:`EnterpriseManaged` (SEP-990): the ID-JAG from :mod:`.enterprise`'s token exchange,
  then the jwt-bearer grant as the pre-registered client.
- :class:`GrantHost`, the interface a grant is given, and :class:`GrantContext`, what
  ``OAuth`` gives: its client selection, the DPoP prover of this token request and the
  timeouts (``OAuth.workload_identity`` / ``enterprise_managed`` make the grants above).

A refused grant raises a :class:`~mcpsync.errors.TokenError` subclass (``InvalidGrant`` for an
expired or wrong-audience assertion, ``UnauthorizedClient``, ``InvalidScope``) naming the
step; it is never retried with another grant. No assertion appears in a message or log.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import requests

from ..errors import AuthError, ConfigError, InvalidGrant
from ._util import log, short
from .discovery import AuthServerMetadata, discover_authorization_server
from .enterprise import request_id_jag
from .flow import TokenSet, _token_request
from .registration import ClientInfo

if TYPE_CHECKING:
    from .dpop import DPoPProver
    from .selection import ClientSelection
    from .storage import TokenStore

__all__ = [
    "JWT_BEARER_GRANT",
    "AssertionProvider",
    "assertion_source",
    "jwt_bearer_grant",
    "Grant",
    "GrantHost",
    "GrantContext",
    "WorkloadIdentity",
    "EnterpriseManaged",
]

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"

#: seconds past ``exp`` an assertion may be before it is refused locally (clock skew)
EXPIRY_LEEWAY = 30.0


class AssertionProvider:
    """A JWT fetched fresh on every call: ``provider() -> str``.

    Build with :meth:`from_callable`, :meth:`from_file`, :meth:`from_env` or
    :meth:`literal` (or :func:`assertion_source`). ``what`` names it in messages
    ("workload assertion", "ID token"); ``repr`` and messages name the source, never the
    value.
    """

    def __init__(self, read: Callable[[], Any], source: str, what: str = "assertion") -> None:
        self._read = read
        self.source = source
        self.what = what

    def __repr__(self) -> str:
        return f"AssertionProvider({self.source})"

    @classmethod
    def from_callable(cls, fn: Callable[[], str], what: str = "assertion") -> AssertionProvider:
        return cls(fn, f"callable {getattr(fn, '__name__', 'fn')}", what)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], what: str = "assertion") -> AssertionProvider:
        p = Path(path).expanduser()

        def read() -> str:
            try:
                return p.read_text(encoding="utf-8")
            except OSError as exc:
                raise AuthError(
                    f"cannot read the {what} file {p}: {exc.strerror or type(exc).__name__}"
                ) from None

        return cls(read, f"file {p}", what)

    @classmethod
    def from_env(cls, name: str, what: str = "assertion") -> AssertionProvider:
        def read() -> str:
            value = os.environ.get(name)
            if value is None:
                raise AuthError(f"the {what} environment variable {name} is not set")
            return value

        return cls(read, f"environment variable {name}", what)

    @classmethod
    def literal(cls, value: str, what: str = "assertion") -> AssertionProvider:
        return cls(lambda: value, "a literal value", what)

    def __call__(self) -> str:
        try:
            value = self._read()
        except AuthError:
            raise
        except Exception as exc:  # noqa: BLE001 - the caller's provider: named by type, chained
            raise AuthError(
                f"the {self.what} provider ({self.source}) failed: {type(exc).__name__}"
            ) from exc
        if not isinstance(value, str) or not value.strip():
            raise AuthError(f"the {self.what} from {self.source} is empty")
        value = value.strip()
        exp = _jwt_exp(value)
        if exp is not None and exp + EXPIRY_LEEWAY < time.time():
            raise InvalidGrant(
                f"the {self.what} from {self.source} expired {time.time() - exp:.0f} s ago; "
                "not sending it",
                error="invalid_grant",
                step="assertion",
            )
        return value


def _jwt_exp(value: str) -> float | None:
    """The ``exp`` claim of a compact JWT (unverified: only to avoid sending a dead one)."""
    parts = value.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


def assertion_source(
    value: str | Callable[[], str] | AssertionProvider | None = None,
    *,
    file: str | os.PathLike[str] | None = None,
    env: str | None = None,
    what: str = "assertion",
) -> AssertionProvider:
    """Exactly one of: ``value`` (the JWT itself, or a callable returning it), ``file``, ``env``."""
    given = [x for x in (value, file, env) if x is not None]
    if len(given) != 1:
        raise ConfigError(
            f"give exactly one {what} source: the value or a callable, a file, or an "
            "environment variable name"
        )
    if isinstance(value, AssertionProvider):
        return value
    if callable(value):
        return AssertionProvider.from_callable(value, what)
    if isinstance(value, str):
        return AssertionProvider.literal(value, what)
    if file is not None:
        return AssertionProvider.from_file(file, what)
    assert env is not None
    return AssertionProvider.from_env(env, what)


def jwt_bearer_grant(
    http: requests.Session,
    asm: AuthServerMetadata,
    client: ClientInfo,
    assertion: str,
    *,
    scopes: list[str] | None,
    resource: str,
    timeout: float,
    allow_insecure: bool,
    dpop: DPoPProver | None = None,
) -> TokenSet:
    """RFC 7523 section 2.1: trade a JWT assertion for an access token at ``asm``
    (DPoP-bound when ``dpop`` is given)."""
    offered = asm.grant_types_supported
    if offered is not None and JWT_BEARER_GRANT not in offered:
        log.info("%s does not list the jwt-bearer grant; asking anyway", asm.issuer)
    tok = _token_request(
        http,
        asm,
        client,
        JWT_BEARER_GRANT,
        {
            "assertion": assertion,
            "scope": " ".join(scopes) if scopes else None,
            "resource": resource,
        },
        timeout=timeout,
        allow_insecure=allow_insecure,
        secrets=[assertion],
        dpop=dpop,
    )
    tok.resource = resource
    tok.requested_scopes = scopes
    return tok


class GrantHost(Protocol):
    """What a :class:`Grant` (and :class:`~.device.DeviceFlow`) is given to run with:
    :class:`GrantContext`."""

    client_name: str
    timeout: float
    authorization_timeout: float
    allow_insecure_http: bool
    http: requests.Session
    store: TokenStore
    cimd_url: str | None
    client_metadata_extra: dict[str, Any]
    prover: DPoPProver | None  # set when the token should be DPoP-bound (binding.py)

    def preregistered(self, asm: AuthServerMetadata) -> ClientInfo | None: ...


class GrantContext:
    """What ``OAuth`` hands a :class:`Grant` for one token request (a :class:`GrantHost`):
    read from its client selection (session, timeout, store, client settings, the
    pre-registered client), plus the DPoP prover of this request and the time a person
    has to approve (the device grant)."""

    def __init__(
        self,
        clients: ClientSelection,
        *,
        prover: DPoPProver | None,
        authorization_timeout: float,
        server_url: str | None,
    ) -> None:
        self._clients = clients
        self._server_url = server_url
        self.client_name = clients.client_name
        self.timeout = clients.timeout
        self.authorization_timeout = authorization_timeout
        self.allow_insecure_http = clients.allow_insecure_http
        self.http = clients.http
        self.store = clients.store
        self.cimd_url = clients.cimd_url
        self.client_metadata_extra = clients.client_metadata_extra
        self.prover = prover

    def preregistered(self, asm: AuthServerMetadata) -> ClientInfo | None:
        return self._clients.preregistered(asm, self._server_url)


class Grant:
    """A way to obtain a token other than the authorization-code redirect."""

    #: the grant's name in ``repr`` and logs
    name: str = "grant"
    #: a person takes part (device flow): ``offline_access`` may be asked for
    interactive: bool = False

    def obtain(
        self, host: GrantHost, asm: AuthServerMetadata, resource: str, scopes: list[str] | None
    ) -> TokenSet:
        """A new token for ``resource`` at ``asm``; raises AuthError (TokenError when refused)."""
        raise NotImplementedError


class WorkloadIdentity(Grant):
    """Workload identity federation (SEP-1933): the platform JWT through the jwt-bearer grant."""

    name = "jwt-bearer"

    def __init__(self, assertion: AssertionProvider, *, client_id: str | None = None) -> None:
        self.assertion = assertion
        self.client_id = client_id

    def __repr__(self) -> str:
        return f"WorkloadIdentity({self.assertion.source}, client_id={self.client_id!r})"

    def obtain(
        self, host: GrantHost, asm: AuthServerMetadata, resource: str, scopes: list[str] | None
    ) -> TokenSet:
        # no registration: the assertion authenticates the workload; client_id only if given
        client = ClientInfo(client_id=self.client_id or "", auth_method="none", issuer=asm.issuer)
        tok = jwt_bearer_grant(
            host.http, asm, client, self.assertion(), scopes=scopes, resource=resource,
            timeout=host.timeout, allow_insecure=host.allow_insecure_http, dpop=host.prover,
        )  # fmt: skip
        log.info(
            "obtained a token for %s from %s with the workload assertion from %s",
            short(resource),
            asm.issuer,
            self.assertion.source,
        )
        return tok


class EnterpriseManaged(Grant):
    """Enterprise-managed authorization (SEP-990): ID token -> ID-JAG at the IdP -> token."""

    name = "enterprise-managed"

    def __init__(
        self,
        id_token: AssertionProvider,
        *,
        idp_token_endpoint: str | None = None,
        idp_issuer: str | None = None,
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
    ) -> None:
        if not idp_token_endpoint and not idp_issuer:
            raise ConfigError("enterprise_managed needs idp_token_endpoint or idp_issuer")
        self.id_token = id_token
        self.idp_token_endpoint = idp_token_endpoint
        self.idp_issuer = idp_issuer
        self.idp_client_id = idp_client_id
        self._idp_client_secret = idp_client_secret

    def __repr__(self) -> str:
        where = self.idp_token_endpoint or self.idp_issuer
        return f"EnterpriseManaged(idp={where!r}, idp_client_id={self.idp_client_id!r})"

    def _idp_endpoint(self, host: GrantHost) -> str:
        if self.idp_token_endpoint:
            return self.idp_token_endpoint
        assert self.idp_issuer is not None
        idp = discover_authorization_server(host.http, self.idp_issuer, timeout=host.timeout)
        if idp is None:
            raise AuthError(f"the enterprise IdP {self.idp_issuer} publishes no metadata")
        self.idp_token_endpoint = idp.token_endpoint
        return idp.token_endpoint

    def obtain(
        self, host: GrantHost, asm: AuthServerMetadata, resource: str, scopes: list[str] | None
    ) -> TokenSet:
        client = host.preregistered(asm)
        if client is None:  # pragma: no cover - enterprise_managed always has a client_id
            raise ConfigError("enterprise-managed authorization needs the client's client_id")
        jag = request_id_jag(
            host.http, self._idp_endpoint(host), self.id_token(), audience=asm.issuer,
            resource=resource, scopes=scopes, client_id=self.idp_client_id,
            client_secret=self._idp_client_secret, timeout=host.timeout,
            allow_insecure=host.allow_insecure_http,
        )  # fmt: skip
        tok = jwt_bearer_grant(
            host.http, asm, client, jag, scopes=scopes, resource=resource,
            timeout=host.timeout, allow_insecure=host.allow_insecure_http, dpop=host.prover,
        )  # fmt: skip
        log.info("obtained a token for %s from %s with an ID-JAG", short(resource), asm.issuer)
        return tok
