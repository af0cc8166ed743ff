"""MCP authorization (OAuth 2.1) for HTTP servers, as a ``requests`` auth object.

Owns the public API of the auth package. Typical use::

    import mcpsync
    from mcpsync.auth import OAuth, FileTokenStore

    # a person approves in the browser (or pastes the redirected URL in a notebook)
    auth = OAuth(client_name="my-app", store=FileTokenStore("~/.cache/mcpsync/tokens.json"))
    session = mcpsync.Session.connect("https://mcp.example.com/mcp", auth=auth)

    # pre-registered client at a known authorization server
    auth = OAuth(client_id="abc", client_secret="s3cret", issuer="https://auth.example.com")

    # a service acting on its own behalf
    auth = OAuth.client_credentials("svc", "s3cret")
    auth = OAuth.client_credentials("svc", private_key_pem=pem, signing_algorithm="ES256")

    # a workload with a platform identity JWT (Kubernetes projected token), no registration
    auth = OAuth.workload_identity(assertion_file="/var/run/secrets/tokens/mcp")
    # the user's enterprise ID token -> ID-JAG at the IdP -> token at the server's AS
    auth = OAuth.enterprise_managed("app", "s3cret", id_token=get_id_token, idp_issuer=idp)

    # no browser here, nothing to paste: show a code, the person approves on another device
    auth = OAuth(redirect="device")

    # DPoP-bound tokens (RFC 9449) come by themselves when the server and its AS speak
    # DPoP (dpop="auto"); dpop=True always asks for one, dpop=False never
    auth = OAuth.client_credentials("svc", "s3cret", dpop=True)

    # tests / auto-approving servers: no browser, no listener
    auth = OAuth(redirect="headless")

Nothing happens until the server answers 401: then the object discovers the
authorization server (RFC 9728, RFC 8414, OpenID discovery), registers if needed
(pre-registered, Client ID Metadata Document, or RFC 7591 DCR), runs the flow (PKCE S256,
state, RFC 8707 resource, RFC 9207 iss check) and re-sends the request with the token.
Failures raise :class:`mcpsync.errors.AuthError`, whose text never holds a secret.
"""

from __future__ import annotations

from ..errors import AuthError
from .device import DeviceCode, DeviceFlow
from .discovery import AuthServerMetadata, ProtectedResourceMetadata
from .dpop import DPoPError, DPoPKey
from .flow import TokenSet
from .grants import AssertionProvider
from .oauth import OAuth
from .redirect import (
    DEFAULT_REDIRECT_URI,
    CallableRedirect,
    HeadlessRedirect,
    LoopbackRedirect,
    PasteRedirect,
    RedirectHandler,
    headless_redirect,
)
from .registration import ClientInfo
from .storage import FileTokenStore, MemoryTokenStore, TokenStore, TokenStoreSpec
from .www_authenticate import Challenge, bearer_challenge, parse_www_authenticate

__all__ = [
    "OAuth",
    "AuthError",
    "TokenStore",
    "MemoryTokenStore",
    "FileTokenStore",
    "TokenStoreSpec",
    "RedirectHandler",
    "LoopbackRedirect",
    "PasteRedirect",
    "CallableRedirect",
    "HeadlessRedirect",
    "headless_redirect",
    "DEFAULT_REDIRECT_URI",
    "TokenSet",
    "DPoPKey",
    "DPoPError",
    "AssertionProvider",
    "DeviceFlow",
    "DeviceCode",
    "ClientInfo",
    "ProtectedResourceMetadata",
    "AuthServerMetadata",
    "Challenge",
    "parse_www_authenticate",
    "bearer_challenge",
]
