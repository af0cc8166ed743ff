"""Pick the ``mcpsync.auth`` object a conformance scenario needs (test helper, not library API).

Owns: ``auth_for_conformance(scenario, context)`` for the MCP conformance harness
(@modelcontextprotocol/conformance). The harness's authorization servers approve without
a person and answer ``/authorize`` with a 302 to the redirect URI, on which nothing
listens, so every authorization-code scenario uses the headless redirect handler.

- ``auth/client-credentials-basic``: client_credentials with client_secret_basic (context);
- ``auth/client-credentials-jwt``: client_credentials with private_key_jwt (context key, ES256);
- ``auth/wif-jwt-bearer``: workload identity federation with the context's valid assertion;
- ``auth/enterprise-managed-authorization``: the context's ID token exchanged at its IdP;
- ``auth/pre-registration``: the context's pre-registered client, bound to its issuer;
- everything else: a client that offers the Client ID Metadata Document URL
  ``https://conformance-test.local/client-metadata.json`` (used only where the AS
  supports CIMD) and otherwise registers dynamically.

Usage (conformance client)::

    ctx = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "null")
    auth = auth_for_conformance(os.environ["MCP_CONFORMANCE_SCENARIO"], ctx)
    requests.post(url, json=..., auth=auth)
"""

from __future__ import annotations

from typing import Any

from requests.auth import AuthBase

from mcpsync.auth import OAuth

__all__ = ["auth_for_conformance", "CIMD_URL", "REDIRECT_URI"]

CIMD_URL = "https://conformance-test.local/client-metadata.json"
REDIRECT_URI = "http://localhost:3000/callback"


def auth_for_conformance(scenario: str, context: dict[str, Any] | None = None) -> AuthBase:
    """The auth object for one conformance scenario (``context`` = MCP_CONFORMANCE_CONTEXT)."""
    ctx = context or {}
    name = scenario.removeprefix("auth/")
    if name == "client-credentials-basic":
        return OAuth.client_credentials(
            ctx["client_id"], ctx["client_secret"], token_endpoint_auth_method="client_secret_basic"
        )
    if name == "client-credentials-jwt":
        return OAuth.client_credentials(
            ctx["client_id"],
            private_key_pem=ctx["private_key_pem"],
            signing_algorithm=ctx.get("signing_algorithm") or "ES256",
        )
    if name == "wif-jwt-bearer":  # workload identity: the valid assertion, no registration
        return OAuth.workload_identity(ctx["valid_jwt"], client_id=ctx.get("client_id"))
    if name == "enterprise-managed-authorization":  # ID token -> ID-JAG at the IdP -> token
        return OAuth.enterprise_managed(
            ctx["client_id"],
            ctx["client_secret"],
            id_token=ctx["idp_id_token"],
            idp_token_endpoint=ctx["idp_token_endpoint"],
            idp_client_id=ctx.get("idp_client_id"),
        )
    if name == "pre-registration" and ctx.get("client_id"):
        return OAuth(
            client_name="mcpsync-conformance",
            client_id=ctx["client_id"],
            client_secret=ctx.get("client_secret"),
            issuer=ctx.get("issuer"),
            redirect="headless",
            redirect_uri=REDIRECT_URI,
        )
    return OAuth(
        client_name="mcpsync-conformance",
        client_metadata_url=CIMD_URL,
        redirect="headless",
        redirect_uri=REDIRECT_URI,
    )
