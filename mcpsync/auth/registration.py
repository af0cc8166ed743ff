"""How this client gets a ``client_id`` at an authorization server.

Owns :class:`ClientInfo` and the three ways to obtain one, in the MCP priority order:

1. pre-registered credentials given by the caller (bound to one issuer);
2. a Client ID Metadata Document URL used as ``client_id`` when the AS advertises
   ``client_id_metadata_document_supported`` (portable across servers, never stored);
3. Dynamic Client Registration (RFC 7591) at ``registration_endpoint``, sending
   ``application_type`` (``native`` for loopback/custom-scheme redirects) and
   ``refresh_token`` in ``grant_types`` when the AS offers refresh. DCR credentials are
   stored under ``client <issuer>`` and only ever used with that issuer, so a change of
   authorization server means a new registration.

Also picks the token-endpoint authentication method (``client_secret_basic``,
``client_secret_post``, ``none``, ``private_key_jwt``) from what the registration answered
and what the AS supports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import requests

from ..errors import AuthError, ConfigError
from ..transports.http.fetch import Deadline, fetch, load_json
from ._util import is_loopback_url, log, redact, require_secure, short
from .discovery import AuthServerMetadata

__all__ = [
    "ClientInfo",
    "client_metadata",
    "register_client",
    "choose_auth_method",
    "validate_client_metadata_url",
    "redirect_uri_registered",
]

_SECRET_METHODS = ("client_secret_basic", "client_secret_post")


@dataclass
class ClientInfo:
    """A client identity at one authorization server. ``repr`` never shows secrets."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    auth_method: str | None = None
    issuer: str | None = None
    source: str = "pre-registered"  # "pre-registered" | "cimd" | "dcr"
    redirect_uris: list[str] = field(default_factory=list)
    grant_types: list[str] = field(default_factory=list)
    secret_expires_at: float | None = None
    private_key_pem: str | None = field(default=None, repr=False)
    signing_algorithm: str = "ES256"
    key_id: str | None = None

    def __repr__(self) -> str:
        return (
            f"ClientInfo(client_id={self.client_id!r}, source={self.source!r}, "
            f"auth_method={self.auth_method!r}, issuer={self.issuer!r}, "
            f"has_secret={self.client_secret is not None})"
        )

    @property
    def expired(self) -> bool:
        return bool(self.secret_expires_at) and time.time() >= float(self.secret_expires_at or 0)

    def to_store(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "auth_method": self.auth_method,
            "issuer": self.issuer,
            "source": self.source,
            "redirect_uris": list(self.redirect_uris),
            "grant_types": list(self.grant_types),
            "secret_expires_at": self.secret_expires_at,
        }

    @classmethod
    def from_store(cls, d: dict[str, Any]) -> ClientInfo | None:
        if not isinstance(d, dict) or not isinstance(d.get("client_id"), str):
            return None
        return cls(
            client_id=d["client_id"],
            client_secret=d.get("client_secret"),
            auth_method=d.get("auth_method"),
            issuer=d.get("issuer"),
            source=d.get("source") or "dcr",
            redirect_uris=list(d.get("redirect_uris") or []),
            grant_types=list(d.get("grant_types") or []),
            secret_expires_at=d.get("secret_expires_at"),
        )


def validate_client_metadata_url(url: str) -> str:
    """A CIMD client_id must be an https URL with a path (and no fragment)."""
    p = urlsplit(url)
    if p.scheme != "https" or not p.netloc or p.path in ("", "/") or p.fragment:
        raise ConfigError(
            f"client_metadata_url {url!r} must be an https URL with a path, "
            "e.g. https://example.com/client.json"
        )
    return url


def redirect_uri_registered(uri: str, registered: list[str]) -> bool:
    """True when ``uri`` is among ``registered``, loopback IP ports aside (RFC 8252 7.3)."""
    if uri in registered:
        return True
    p = urlsplit(uri)
    if p.scheme != "http" or not is_loopback_url(uri):
        return False
    for r in registered:
        q = urlsplit(r)
        if (q.scheme, q.hostname, q.path) == (p.scheme, p.hostname, p.path):
            return True
    return False


def _application_type(redirect_uri: str) -> str:
    p = urlsplit(redirect_uri)
    if p.scheme not in ("http", "https") or is_loopback_url(redirect_uri):
        return "native"
    return "web"


def _wants_refresh(asm: AuthServerMetadata) -> bool:
    return "refresh_token" in (asm.grant_types_supported or []) or asm.offers_offline_access


def client_metadata(
    asm: AuthServerMetadata,
    *,
    client_name: str,
    redirect_uri: str,
    application_type: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The RFC 7591 registration request body for this client at ``asm``."""
    grant_types = ["authorization_code"]
    if _wants_refresh(asm):
        grant_types.append("refresh_token")
    md: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": grant_types,
        "response_types": ["code"],
        "application_type": application_type or _application_type(redirect_uri),
    }
    supported = asm.token_endpoint_auth_methods_supported
    if supported:
        for m in ("none", "client_secret_basic", "client_secret_post"):
            if m in supported:
                md["token_endpoint_auth_method"] = m
                break
    if extra:
        md.update(extra)
    return md


def register_client(
    http: requests.Session,
    asm: AuthServerMetadata,
    metadata: dict[str, Any],
    *,
    timeout: float,
    allow_insecure: bool,
) -> ClientInfo:
    """Dynamic Client Registration (RFC 7591). Raises AuthError with the AS's reason."""
    endpoint = asm.registration_endpoint
    if not endpoint:
        raise AuthError(
            f"authorization server {asm.issuer} offers no way to register this client "
            "(no registration endpoint, no client ID metadata document support); "
            "pass client_id= (pre-registered credentials) or client_metadata_url="
        )
    require_secure(endpoint, "registration endpoint", allow_insecure)
    what = f"client registration at {short(endpoint)}"
    reply = fetch(
        http, endpoint, deadline=Deadline.checked(timeout), what="the registration reply",
        error=AuthError, method="POST", json_body=metadata, max_redirects=0, body_for=None,
    )  # fmt: skip
    if reply.status == 0:
        raise AuthError(f"{what} failed: {reply.problem}")
    doc = load_json(reply.body, what="the registration reply", url=endpoint, error=AuthError,
                    lenient=True)  # fmt: skip
    if (
        reply.status not in (200, 201)
        or not isinstance(doc, dict)
        or not isinstance(doc.get("client_id"), str)
    ):
        reason = ""
        if isinstance(doc, dict) and doc.get("error"):
            reason = f": {doc.get('error')}"
            if doc.get("error_description"):
                reason += f" ({str(doc.get('error_description'))[:200]})"
        raise AuthError(f"{what} was refused (HTTP {reply.status}){reason}")
    secret = doc.get("client_secret") if isinstance(doc.get("client_secret"), str) else None
    method = doc.get("token_endpoint_auth_method")
    if not isinstance(method, str):
        method = metadata.get("token_endpoint_auth_method")
        if method is None:
            method = "client_secret_basic" if secret else "none"
    if method in _SECRET_METHODS and not secret:
        method = "none"
    expires = doc.get("client_secret_expires_at")
    info = ClientInfo(
        client_id=doc["client_id"],
        client_secret=secret,
        auth_method=method,
        issuer=asm.issuer,
        source="dcr",
        redirect_uris=list(doc.get("redirect_uris") or metadata.get("redirect_uris") or []),
        grant_types=list(doc.get("grant_types") or metadata.get("grant_types") or []),
        secret_expires_at=float(expires)
        if isinstance(expires, (int, float)) and expires > 0
        else None,
    )
    log.info("registered client at %s (%s)", short(endpoint), redact(info.client_id, [secret]))
    return info


def choose_auth_method(client: ClientInfo, asm: AuthServerMetadata) -> str:
    """The token-endpoint authentication method to use for ``client`` at ``asm``."""
    if client.private_key_pem:
        return "private_key_jwt"
    supported = asm.token_endpoint_auth_methods_supported
    if client.auth_method and (
        supported is None or client.auth_method in supported or client.source == "dcr"
    ):
        return client.auth_method
    if client.client_secret:
        # RFC 8414: absent list means client_secret_basic
        for m in _SECRET_METHODS:
            if supported is None or m in supported:
                return m
        raise AuthError(
            f"authorization server {asm.issuer} supports none of client_secret_basic, "
            f"client_secret_post (it offers {', '.join(supported or [])})"
        )
    return "none"
