"""Find out who guards an MCP server and how to talk to them.

Owns:
- Protected Resource Metadata discovery (RFC 9728): the ``resource_metadata`` URL from the
  401 challenge, else the path-based well-known URL, else the root one; then the check that
  the document's ``resource`` names this server (same origin, path prefix) - a mismatch
  aborts the flow.
- Authorization Server Metadata discovery (RFC 8414 + OpenID Connect Discovery) in the MCP
  order, with path insertion for issuers that have a path; the document's ``issuer`` must be
  identical to the issuer the URL was built from, else the metadata is refused.
- The 2025-03-26 fallbacks for servers without PRM: AS metadata at the server's origin,
  else the default endpoints ``/authorize``, ``/token``, ``/register`` there.

PKCE support (``S256`` in ``code_challenge_methods_supported``) is checked by the flow, which
knows whether it needs it (client_credentials does not).

Metadata fetches follow redirects on the same origin only (at most 5): a redirect to another
origin is refused with an ``AuthError`` naming both origins, before anything is sent there,
so a server cannot point the client's discovery at a third party. No credentials are ever
sent with these GETs. One deadline (``timeout``) bounds each discovery (every candidate URL,
redirect and body read; a trickled body is cut); a document over 1 MiB or nested deeper than
64 levels raises ``AuthError``; a reply that is not JSON counts as no document. The wire
rules are ``mcpsync.transports.http.fetch``'s.

>>> well_known_as_urls("https://auth.example.com/tenant1")[0]
'https://auth.example.com/.well-known/oauth-authorization-server/tenant1'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

from ..errors import AuthError
from ..transports.http.fetch import NOT_JSON, Deadline, fetch, load_json
from ._util import log, origin, short
from .www_authenticate import Challenge

__all__ = [
    "ProtectedResourceMetadata",
    "AuthServerMetadata",
    "prm_urls",
    "well_known_as_urls",
    "resource_matches",
    "discover_protected_resource",
    "discover_authorization_server",
    "legacy_authorization_server",
    "fetch_metadata",
]

_MAX_REDIRECTS = 5
_MAX_DOCUMENT = 1024 * 1024


def _origin_text(url: str) -> str:
    scheme, host, port = origin(url)
    return f"{scheme}://{host}:{port}" if port is not None else f"{scheme}://{host}"


def fetch_metadata(
    http: requests.Session,
    url: str,
    *,
    timeout: float,
    what: str,
    deadline: Deadline | None = None,
) -> tuple[int, Any]:
    """GET a metadata document: (status, parsed JSON or None). Redirects are followed on the
    same origin only; one to another origin raises ``AuthError`` naming both origins (nothing
    is sent there). ``deadline`` (else ``timeout`` from now) bounds the whole GET, redirects
    and body read included. Network failures, the deadline, a document over 1 MiB or nested
    deeper than 64 levels raise ``AuthError``; a 200 reply that is not JSON gives (200, None)."""
    deadline = deadline or Deadline.checked(timeout)

    def same_origin_only(current: str, target: str) -> None:
        if origin(target) != origin(current):
            raise AuthError(
                f"{what} at {short(current)} redirects to another origin "
                f"({_origin_text(target)}, from {_origin_text(current)}); not followed"
            )

    reply = fetch(
        http, url, deadline=deadline, what=what, error=AuthError, max_bytes=_MAX_DOCUMENT,
        max_redirects=_MAX_REDIRECTS, check_redirect=same_origin_only,
    )  # fmt: skip
    if reply.status == 0:
        raise AuthError(f"could not fetch {what} from {short(reply.url)}: {reply.problem}")
    if reply.status != 200:
        return reply.status, None
    document = load_json(reply.body, what=what, url=reply.url, error=AuthError, lenient=True)
    return 200, None if document is NOT_JSON else document


@dataclass
class ProtectedResourceMetadata:
    """RFC 9728 document of the MCP server (only the fields the client uses)."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str] | None = None
    url: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def dpop_signing_alg_values_supported(self) -> list[str] | None:
        """RFC 9728 section 2: proof algorithms the server accepts (None: not published)."""
        algs = self.raw.get("dpop_signing_alg_values_supported")
        return [a for a in algs if isinstance(a, str)] if isinstance(algs, list) else None

    @property
    def dpop_bound_access_tokens_required(self) -> bool:
        """RFC 9728 section 2: the server takes only DPoP-bound access tokens."""
        return self.raw.get("dpop_bound_access_tokens_required") is True


@dataclass
class AuthServerMetadata:
    """RFC 8414 / OIDC document of an authorization server (fields the client uses).

    ``legacy_defaults`` is True when no document existed and the 2025-03-26 default
    endpoints are assumed.
    """

    issuer: str
    authorization_endpoint: str | None
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    token_endpoint_auth_signing_alg_values_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    authorization_response_iss_parameter_supported: bool = False
    client_id_metadata_document_supported: bool = False
    url: str = ""
    legacy_defaults: bool = False
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_document(cls, doc: dict[str, Any], url: str) -> AuthServerMetadata:
        def strlist(name: str) -> list[str] | None:
            v = doc.get(name)
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return list(v)
            return None

        token_endpoint = doc.get("token_endpoint")
        if not isinstance(token_endpoint, str) or not token_endpoint:
            raise AuthError(f"authorization server metadata at {short(url)} has no token_endpoint")
        auth_ep = doc.get("authorization_endpoint")
        reg_ep = doc.get("registration_endpoint")
        return cls(
            issuer=doc["issuer"],
            authorization_endpoint=auth_ep if isinstance(auth_ep, str) and auth_ep else None,
            token_endpoint=token_endpoint,
            registration_endpoint=reg_ep if isinstance(reg_ep, str) and reg_ep else None,
            scopes_supported=strlist("scopes_supported"),
            grant_types_supported=strlist("grant_types_supported"),
            token_endpoint_auth_methods_supported=strlist("token_endpoint_auth_methods_supported"),
            token_endpoint_auth_signing_alg_values_supported=strlist(
                "token_endpoint_auth_signing_alg_values_supported"
            ),
            code_challenge_methods_supported=strlist("code_challenge_methods_supported"),
            authorization_response_iss_parameter_supported=doc.get(
                "authorization_response_iss_parameter_supported"
            )
            is True,
            client_id_metadata_document_supported=doc.get("client_id_metadata_document_supported")
            is True,
            url=url,
            raw=dict(doc),
        )

    @property
    def dpop_signing_alg_values_supported(self) -> list[str] | None:
        """RFC 9449 section 5.1: the proof algorithms the AS accepts (None: DPoP not advertised)."""
        algs = self.raw.get("dpop_signing_alg_values_supported")
        return [a for a in algs if isinstance(a, str)] if isinstance(algs, list) else None

    @property
    def supports_s256(self) -> bool:
        return bool(self.code_challenge_methods_supported) and "S256" in (
            self.code_challenge_methods_supported or []
        )

    @property
    def offers_offline_access(self) -> bool:
        return "offline_access" in (self.scopes_supported or [])


def prm_urls(server_url: str) -> list[str]:
    """Well-known PRM URLs for a server URL: path-based first (if the URL has a path), then root."""
    p = urlsplit(server_url)
    base = urlunsplit((p.scheme, p.netloc, "", "", ""))
    path = p.path.rstrip("/")
    urls = []
    if path:
        urls.append(f"{base}/.well-known/oauth-protected-resource{path}")
    urls.append(f"{base}/.well-known/oauth-protected-resource")
    return urls


def well_known_as_urls(issuer: str) -> list[str]:
    """Metadata URLs to try for an issuer, in the MCP priority order."""
    p = urlsplit(issuer)
    base = urlunsplit((p.scheme, p.netloc, "", "", ""))
    path = p.path.rstrip("/")
    if path:
        return [
            f"{base}/.well-known/oauth-authorization-server{path}",
            f"{base}/.well-known/openid-configuration{path}",
            f"{base}{path}/.well-known/openid-configuration",
        ]
    return [
        f"{base}/.well-known/oauth-authorization-server",
        f"{base}/.well-known/openid-configuration",
    ]


def resource_matches(server_url: str, resource: str) -> bool:
    """True when a PRM ``resource`` identifies this server: same origin and its path is the
    server path or a parent of it (segment-wise). No fragment allowed."""
    try:
        r = urlsplit(resource)
        s = urlsplit(server_url)
    except ValueError:
        return False
    if r.fragment or not r.scheme or not r.netloc:
        return False
    if origin(resource) != origin(server_url):
        return False
    rp = r.path.rstrip("/")
    sp = s.path.rstrip("/")
    return sp == rp or sp.startswith(rp + "/")


def discover_protected_resource(
    http: requests.Session,
    server_url: str,
    challenge: Challenge | None,
    *,
    timeout: float,
) -> ProtectedResourceMetadata | None:
    """Fetch and validate the PRM document; None when the server publishes none."""
    candidates: list[str] = []
    hinted = challenge.resource_metadata if challenge else None
    if hinted:
        candidates.append(urljoin(server_url, hinted))
    for u in prm_urls(server_url):
        if u not in candidates:
            candidates.append(u)
    deadline = Deadline.checked(timeout)  # one bound for every candidate
    for url in candidates:
        status, doc = fetch_metadata(
            http, url, timeout=timeout, what="protected resource metadata", deadline=deadline
        )
        log.debug("PRM %s -> %s", short(url), status)
        if status != 200 or not isinstance(doc, dict):
            continue
        resource = doc.get("resource")
        if not isinstance(resource, str) or not resource_matches(server_url, resource):
            raise AuthError(
                f"protected resource metadata at {short(url)} names resource {resource!r}, "
                f"which is not the server {short(server_url)}; refusing to authorize"
            )
        servers = doc.get("authorization_servers")
        if (
            not isinstance(servers, list)
            or not servers
            or not all(isinstance(s, str) for s in servers)
        ):
            raise AuthError(
                f"protected resource metadata at {short(url)} lists no authorization_servers"
            )
        scopes = doc.get("scopes_supported")
        if not (isinstance(scopes, list) and all(isinstance(s, str) for s in scopes)):
            scopes = None
        return ProtectedResourceMetadata(
            resource=resource,
            authorization_servers=list(servers),
            scopes_supported=scopes,
            url=url,
            raw=dict(doc),
        )
    return None


def discover_authorization_server(
    http: requests.Session, issuer: str, *, timeout: float
) -> AuthServerMetadata | None:
    """Try the well-known URLs for ``issuer``; None when none answers with a document.

    A document whose ``issuer`` is not identical to ``issuer`` raises AuthError: it must not
    be used (RFC 8414 section 3.3) and is a sign of a mix-up attempt.
    """
    deadline = Deadline.checked(timeout)  # one bound for every well-known URL
    for url in well_known_as_urls(issuer):
        status, doc = fetch_metadata(
            http, url, timeout=timeout, what="authorization server metadata", deadline=deadline
        )
        log.debug("AS metadata %s -> %s", short(url), status)
        if status != 200 or not isinstance(doc, dict):
            continue
        if doc.get("issuer") != issuer:
            raise AuthError(
                f"authorization server metadata at {short(url)} claims issuer "
                f"{doc.get('issuer')!r}, expected {issuer!r}; refusing to use it"
            )
        return AuthServerMetadata.from_document(doc, url)
    return None


def legacy_authorization_server(
    http: requests.Session, server_url: str, *, timeout: float
) -> AuthServerMetadata:
    """2025-03-26 behaviour for servers without PRM: the authorization base URL is the
    server's origin; use its RFC 8414 metadata, else the default endpoint paths."""
    p = urlsplit(server_url)
    base = urlunsplit((p.scheme, p.netloc, "", "", ""))
    found = discover_authorization_server(http, base, timeout=timeout)
    if found is not None:
        return found
    log.info("no authorization metadata at %s; using the 2025-03-26 default endpoints", base)
    return AuthServerMetadata(
        issuer=base,
        authorization_endpoint=f"{base}/authorize",
        token_endpoint=f"{base}/token",
        registration_endpoint=f"{base}/register",
        code_challenge_methods_supported=["S256"],
        url="",
        legacy_defaults=True,
    )
