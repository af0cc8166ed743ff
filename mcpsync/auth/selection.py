"""Which authorization server, and which client to present there, for one MCP server.

Owns :class:`ClientSelection`, a member of :class:`~mcpsync.auth.oauth.OAuth` that decides
*where* and *as whom*: discovery for the bound server (Protected Resource Metadata, else
the 2025-03-26 fallback; a pinned issuer wins when the server lists it), and the client in
the MCP priority order (pre-registered, Client ID Metadata Document, a stored
registration, a new Dynamic Client Registration that is then stored). It holds its own
settings (client name, pre-registered credentials, the CIMD URL, the registration's
extras), the issuer pre-registered credentials are bound to, and its collaborators (the
HTTP session to authorization servers, the timeout, the store of registrations).
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


class ClientSelection:
    """Discovery and client choice for one ``OAuth`` object (see the module doc)."""

    def __init__(
        self,
        *,
        client_name: str,
        client_id: str | None,
        client_secret: str | None,
        issuer: str | None,
        auth_method: str | None,
        cimd_url: str | None,
        application_type: str | None,
        client_metadata_extra: dict[str, Any],
        http: requests.Session,
        timeout: float,
        allow_insecure_http: bool,
        store: TokenStore,
    ) -> None:
        self.client_name = client_name
        self.client_id = client_id
        self.client_secret = client_secret
        self.auth_method = auth_method
        #: ``private_key_jwt`` client authentication (``OAuth.client_credentials``)
        self.private_key_pem: str | None = None
        self.signing_algorithm = "ES256"
        self.key_id: str | None = None
        self.cimd_url = cimd_url
        self.application_type = application_type
        self.client_metadata_extra = client_metadata_extra
        self.http = http
        self.timeout = timeout
        self.allow_insecure_http = allow_insecure_http
        self.store = store
        #: the issuer the pre-registered credentials belong to (``issuer=``, else the first used)
        self.bound_issuer = issuer

    def use_private_key(self, pem: str | None, algorithm: str, key_id: str | None) -> None:
        """Authenticate the pre-registered client with ``private_key_jwt`` (RFC 7523)."""
        self.private_key_pem, self.signing_algorithm, self.key_id = pem, algorithm, key_id

    def discover(
        self, server_url: str, challenge: Challenge | None
    ) -> tuple[ProtectedResourceMetadata | None, str, AuthServerMetadata]:
        """The server's resource metadata (None: 2025-03-26 fallback), the resource, the AS."""
        prm = discover_protected_resource(self.http, server_url, challenge, timeout=self.timeout)
        if prm is None:
            log.info(
                "%s publishes no protected resource metadata; using 2025-03-26 discovery",
                server_url,
            )
            asm = legacy_authorization_server(self.http, server_url, timeout=self.timeout)
            return None, server_url, asm
        issuer = prm.authorization_servers[0]
        if self.bound_issuer and self.bound_issuer in prm.authorization_servers:
            issuer = self.bound_issuer
        found = discover_authorization_server(self.http, issuer, timeout=self.timeout)
        if found is None:
            raise AuthError(
                f"authorization server {issuer} publishes no metadata (RFC 8414 / OpenID discovery)"
            )
        return prm, prm.resource, found

    def preregistered(self, asm: AuthServerMetadata, server_url: str | None) -> ClientInfo | None:
        """The pre-registered client at ``asm`` (None without ``client_id``); binds it to
        ``asm`` the first time, and refuses another AS later (``server_url`` names the
        MCP server in that error)."""
        if self.client_id is None:
            return None
        if self.bound_issuer is not None and self.bound_issuer != asm.issuer:
            raise AuthError(
                f"the pre-registered client belongs to {self.bound_issuer}, but {short(server_url or '')} "
                f"now uses {asm.issuer}; not presenting its credentials there"
            )
        self.bound_issuer = asm.issuer
        return ClientInfo(
            client_id=self.client_id,
            client_secret=self.client_secret,
            auth_method=self.auth_method,
            issuer=asm.issuer,
            source="pre-registered",
            private_key_pem=self.private_key_pem,
            signing_algorithm=self.signing_algorithm,
            key_id=self.key_id,
        )

    def known_client(self, asm: AuthServerMetadata, server_url: str | None) -> ClientInfo | None:
        """The client usable at ``asm`` without registering (for refresh)."""
        pre = self.preregistered(asm, server_url) if self.client_id else None
        if pre is not None:
            return pre
        if self.cimd_url and asm.client_id_metadata_document_supported:
            return ClientInfo(
                client_id=self.cimd_url, auth_method="none", issuer=asm.issuer, source="cimd"
            )
        stored = ClientInfo.from_store(self.store.get(f"client {asm.issuer}") or {})
        if stored is not None and stored.issuer == asm.issuer and not stored.expired:
            return stored
        if self.cimd_url:
            return ClientInfo(
                client_id=self.cimd_url, auth_method="none", issuer=asm.issuer, source="cimd"
            )
        return None

    def client_for(
        self, asm: AuthServerMetadata, redirect_uri: str, server_url: str | None
    ) -> ClientInfo:
        """Priority: pre-registered, Client ID Metadata Document, stored DCR, new DCR."""
        pre = self.preregistered(asm, server_url)
        if pre is not None:
            return pre
        if self.cimd_url and asm.client_id_metadata_document_supported:
            return ClientInfo(
                client_id=self.cimd_url, auth_method="none", issuer=asm.issuer, source="cimd"
            )
        key = f"client {asm.issuer}"
        stored = ClientInfo.from_store(self.store.get(key) or {})
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
            application_type=self.application_type,
            extra=self.client_metadata_extra,
        )
        info = register_client(
            self.http, asm, md, timeout=self.timeout, allow_insecure=self.allow_insecure_http
        )
        self.store.set(key, info.to_store())
        return info
