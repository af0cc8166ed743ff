"""Which authorization server, and which client to present there, for one MCP server.

Owns the part of :class:`~mcpsync.auth.oauth.OAuth` that decides *where* and *as whom*:
discovery for the bound server (Protected Resource Metadata, else the 2025-03-26 fallback;
a pinned issuer wins when the server lists it), and the client in the MCP priority order
(pre-registered, Client ID Metadata Document, a stored registration, a new Dynamic Client
Registration that is then stored). A mixin: ``OAuth`` holds the state declared below.
"""

from __future__ import annotations

from typing import Any

import requests

from ..errors import AuthError
from ._util import log, short
from .discovery import (
    AuthServerMetadata,
    ProtectedResourceMetadata,
    discover_authorization_server,
    discover_protected_resource,
    legacy_authorization_server,
)
from .registration import ClientInfo, client_metadata, redirect_uri_registered, register_client
from .storage import TokenStore
from .www_authenticate import Challenge

__all__: list[str] = []  # private to mcpsync.auth


class _Selection:
    """Discovery and client choice; the attributes are :class:`OAuth`'s (set in its ``__init__``)."""

    client_name: str
    timeout: float
    allow_insecure_http: bool
    _http: requests.Session
    _server_url: str | None
    _bound_issuer: str | None
    _store: TokenStore
    _client_id: str | None
    _client_secret: str | None
    _auth_method: str | None
    _private_key_pem: str | None
    _signing_algorithm: str
    _key_id: str | None
    _cimd_url: str | None
    _application_type: str | None
    _client_metadata_extra: dict[str, Any]

    def _discover(
        self, challenge: Challenge | None
    ) -> tuple[ProtectedResourceMetadata | None, str, AuthServerMetadata]:
        assert self._server_url is not None
        prm = discover_protected_resource(
            self._http, self._server_url, challenge, timeout=self.timeout
        )
        if prm is None:
            log.info(
                "%s publishes no protected resource metadata; using 2025-03-26 discovery",
                self._server_url,
            )
            asm = legacy_authorization_server(self._http, self._server_url, timeout=self.timeout)
            return None, self._server_url, asm
        issuer = prm.authorization_servers[0]
        if self._bound_issuer and self._bound_issuer in prm.authorization_servers:
            issuer = self._bound_issuer
        found = discover_authorization_server(self._http, issuer, timeout=self.timeout)
        if found is None:
            raise AuthError(
                f"authorization server {issuer} publishes no metadata (RFC 8414 / OpenID discovery)"
            )
        return prm, prm.resource, found

    def _preregistered(self, asm: AuthServerMetadata) -> ClientInfo | None:
        if self._client_id is None:
            return None
        if self._bound_issuer is not None and self._bound_issuer != asm.issuer:
            raise AuthError(
                f"the pre-registered client belongs to {self._bound_issuer}, but {short(self._server_url or '')} "
                f"now uses {asm.issuer}; not presenting its credentials there"
            )
        self._bound_issuer = asm.issuer
        return ClientInfo(
            client_id=self._client_id,
            client_secret=self._client_secret,
            auth_method=self._auth_method,
            issuer=asm.issuer,
            source="pre-registered",
            private_key_pem=self._private_key_pem,
            signing_algorithm=self._signing_algorithm,
            key_id=self._key_id,
        )

    def _known_client(self, asm: AuthServerMetadata) -> ClientInfo | None:
        """The client usable at ``asm`` without registering (for refresh)."""
        pre = self._preregistered(asm) if self._client_id else None
        if pre is not None:
            return pre
        if self._cimd_url and asm.client_id_metadata_document_supported:
            return ClientInfo(
                client_id=self._cimd_url, auth_method="none", issuer=asm.issuer, source="cimd"
            )
        stored = ClientInfo.from_store(self._store.get(f"client {asm.issuer}") or {})
        if stored is not None and stored.issuer == asm.issuer and not stored.expired:
            return stored
        if self._cimd_url:
            return ClientInfo(
                client_id=self._cimd_url, auth_method="none", issuer=asm.issuer, source="cimd"
            )
        return None

    def _client_for(self, asm: AuthServerMetadata, redirect_uri: str) -> ClientInfo:
        """Priority: pre-registered, Client ID Metadata Document, stored DCR, new DCR."""
        pre = self._preregistered(asm)
        if pre is not None:
            return pre
        if self._cimd_url and asm.client_id_metadata_document_supported:
            return ClientInfo(
                client_id=self._cimd_url, auth_method="none", issuer=asm.issuer, source="cimd"
            )
        key = f"client {asm.issuer}"
        stored = ClientInfo.from_store(self._store.get(key) or {})
        if (
            stored is not None
            and stored.issuer == asm.issuer
            and not stored.expired
            and redirect_uri_registered(redirect_uri, stored.redirect_uris)
        ):
            return stored
        md = client_metadata(
            asm,
            client_name=self.client_name,
            redirect_uri=redirect_uri,
            application_type=self._application_type,
            extra=self._client_metadata_extra,
        )
        info = register_client(
            self._http, asm, md, timeout=self.timeout, allow_insecure=self.allow_insecure_http
        )
        self._store.set(key, info.to_store())
        return info
