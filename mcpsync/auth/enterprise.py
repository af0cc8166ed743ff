"""The enterprise IdP leg of enterprise-managed authorization (SEP-990, ID-JAG).

Owns :func:`request_id_jag`: an RFC 8693 token exchange at the enterprise IdP's token
endpoint that trades the user's ID token
(``subject_token_type=urn:ietf:params:oauth:token-type:id_token``) for an Identity
Assertion JWT Authorization Grant (``requested_token_type=urn:ietf:params:oauth:token-type:id-jag``)
whose ``audience`` is the MCP server's authorization server (the issuer named by its
protected resource metadata) and whose ``resource`` is the MCP server. The client
authenticates at the IdP with its IdP credentials (``client_secret_basic`` when it has a
secret, else its ``client_id`` in the body).

The ID-JAG is not an access token: it is used once, at once, in the jwt-bearer grant
(:class:`mcpsync.auth.grants.EnterpriseManaged`), and never stored. A refusal raises a
:class:`~mcpsync.errors.TokenError` subclass with ``step="token-exchange"``. Neither the ID
token, the ID-JAG nor the secret appears in a message or log.
"""

from __future__ import annotations

from typing import Any

import requests

from ..errors import AuthError, TokenError
from ..transports.http.fetch import NOT_JSON, Deadline, fetch, load_json
from ._util import log, redact, require_secure, short
from .flow import _basic_header

__all__ = [
    "TOKEN_EXCHANGE_GRANT",
    "ID_TOKEN_TYPE",
    "ID_JAG_TOKEN_TYPE",
    "request_id_jag",
]

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
STEP = "token-exchange"


def request_id_jag(
    http: requests.Session,
    idp_token_endpoint: str,
    id_token: str,
    *,
    audience: str,
    resource: str,
    scopes: list[str] | None,
    client_id: str | None,
    client_secret: str | None,
    timeout: float,
    allow_insecure: bool,
) -> str:
    """Exchange ``id_token`` at the IdP for an ID-JAG for ``audience`` + ``resource``."""
    require_secure(idp_token_endpoint, "IdP token endpoint", allow_insecure)
    data: dict[str, str] = {
        "grant_type": TOKEN_EXCHANGE_GRANT,
        "requested_token_type": ID_JAG_TOKEN_TYPE,
        "subject_token": id_token,
        "subject_token_type": ID_TOKEN_TYPE,
        "audience": audience,
        "resource": resource,
    }
    if scopes:
        data["scope"] = " ".join(scopes)
    headers = {"Accept": "application/json"}
    if client_id and client_secret:
        headers["Authorization"] = _basic_header(client_id, client_secret)
    elif client_id:
        data["client_id"] = client_id
    secrets = [id_token, client_secret]
    where = short(idp_token_endpoint)
    r = fetch(  # one deadline for the reply, its body capped, its nesting too
        http, idp_token_endpoint, deadline=Deadline.checked(timeout), what="token exchange",
        error=AuthError, method="POST", data=data, headers=headers, max_redirects=0,
        body_for=None,
    )  # fmt: skip
    if r.status == 0:
        raise AuthError(f"token exchange for an ID-JAG at {where} failed: {r.problem}")
    doc: Any = load_json(r.body, what="token exchange", url=idp_token_endpoint,
                         error=AuthError, lenient=True)  # fmt: skip
    doc = None if doc is NOT_JSON else doc
    log.debug("token exchange (ID-JAG) at %s -> HTTP %s", where, r.status)
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        msg = f"token exchange for an ID-JAG refused by {where}: {doc['error'][:100]}"
        if doc.get("error_description"):
            msg += f" ({str(doc['error_description'])[:200]})"
        raise TokenError.of(
            redact(msg, secrets), error=doc["error"][:100], step=STEP, status=r.status
        )
    if r.status != 200 or not isinstance(doc, dict):
        kind = "JSON" if isinstance(doc, dict) else "not JSON"
        raise AuthError(
            f"token exchange for an ID-JAG at {where} gave no usable answer "
            f"(HTTP {r.status}, {kind})"
        )
    jag = doc.get("access_token")
    issued = doc.get("issued_token_type")
    if not isinstance(jag, str) or not jag:
        raise AuthError(f"token exchange at {where} answered without an ID-JAG (no access_token)")
    if issued is not None and issued != ID_JAG_TOKEN_TYPE:
        raise AuthError(
            f"token exchange at {where} issued a {str(issued)[:80]!r}, not an ID-JAG "
            f"({ID_JAG_TOKEN_TYPE})"
        )
    log.info("obtained an ID-JAG for %s from %s", short(resource), where)
    return jag
