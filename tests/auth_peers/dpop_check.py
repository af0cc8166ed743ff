"""A resource server's (or authorization server's) check of a DPoP proof (RFC 9449 section 4.3).

Owns: :func:`check_proof`, written for the test peers from the RFC (not mcpsync's code):
one JWS in the ``DPoP`` header, ``typ`` ``dpop+jwt``, an asymmetric ``alg``, a public
``jwk`` (no private members) that verifies the signature (PyJWT), ``jti`` never seen
before, ``htm`` and ``htu`` (scheme/host/port/path; no query or fragment) matching the
request, ``iat`` within 60 s, ``ath`` = base64url(SHA-256(token)) when a token is
presented, the token's key thumbprint (``cnf.jkt``) equal to the proof key's, and the
nonce the server asked for.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import jwt

__all__ = ["check_proof", "thumbprint", "ReplayCache"]

ASYMMETRIC = {
    "ES256",
    "ES384",
    "ES512",
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "EdDSA",
}
_PORTS = {"http": 80, "https": 443}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 SHA-256 thumbprint."""
    names = {"EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x"), "RSA": ("e", "kty", "n")}
    members = {k: jwk[k] for k in names[jwk["kty"]]}
    return _b64(
        hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest()
    )


def _target(url: str) -> tuple[str, str, int | None, str]:
    p = urlsplit(url)
    scheme = p.scheme.lower()
    return scheme, (p.hostname or "").lower(), p.port or _PORTS.get(scheme), p.path or "/"


class ReplayCache:
    """``jti`` values already used (thread-safe)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._lock = threading.Lock()

    def first_use(self, jti: str) -> bool:
        with self._lock:
            if jti in self.seen:
                return False
            self.seen.add(jti)
            return True


def check_proof(
    proof_header: str | None,
    *,
    method: str,
    url: str,
    replay: ReplayCache,
    access_token: str | None = None,
    jkt: str | None = None,
    nonce: str | None = None,
) -> tuple[str | None, str | None]:
    """(error or None, the proof key's thumbprint). ``error`` "use_dpop_nonce" means only
    the nonce was missing or stale."""
    if not proof_header:
        return "missing DPoP proof", None
    if "," in proof_header or proof_header.count(".") != 2:
        return "not exactly one compact JWS", None
    try:
        header = jwt.get_unverified_header(proof_header)
    except jwt.PyJWTError:
        return "undecodable header", None
    if header.get("typ") != "dpop+jwt":
        return "typ is not dpop+jwt", None
    alg = header.get("alg")
    if alg not in ASYMMETRIC:
        return "alg is not asymmetric", None
    key_jwk = header.get("jwk")
    if not isinstance(key_jwk, dict) or any(
        k in key_jwk for k in ("d", "p", "q", "dp", "dq", "qi")
    ):
        return "jwk missing or private", None
    try:
        key = jwt.PyJWK(key_jwk, algorithm=alg).key
        claims = jwt.decode(proof_header, key, algorithms=[alg], options={"verify_aud": False})
    except jwt.PyJWTError:
        return "signature does not verify", None
    jkt_of_proof = thumbprint(key_jwk)
    if not isinstance(claims.get("jti"), str) or not claims["jti"]:
        return "no jti", jkt_of_proof
    if claims.get("htm") != method:
        return "htm mismatch", jkt_of_proof
    htu = claims.get("htu")
    if not isinstance(htu, str) or "?" in htu or "#" in htu or _target(htu) != _target(url):
        return "htu mismatch", jkt_of_proof
    iat = claims.get("iat")
    if not isinstance(iat, int) or abs(time.time() - iat) > 60:
        return "iat outside the window", jkt_of_proof
    if access_token is not None:
        expected = _b64(hashlib.sha256(access_token.encode("ascii")).digest())
        if claims.get("ath") != expected:
            return "ath mismatch", jkt_of_proof
    if jkt is not None and jkt != jkt_of_proof:
        return "proof key is not the token's key (cnf.jkt)", jkt_of_proof
    if not replay.first_use(claims["jti"]):
        return "jti replayed", jkt_of_proof
    if nonce is not None and claims.get("nonce") != nonce:
        return "use_dpop_nonce", jkt_of_proof
    return None, jkt_of_proof
