"""DPoP (RFC 9449; MCP extension ``io.modelcontextprotocol/auth/dpop``, SEP-1932).

Owns: :class:`DPoPKey` (the asymmetric key pair a token is bound to: generated with
``cryptography``, ES256 by default; stored next to the token so a DPoP-bound token still
works in the next process), the proof JWTs it signs (``typ: dpop+jwt``, public ``jwk``
header, a fresh random ``jti`` per proof, ``htm``, normalised ``htu``, ``iat``; ``ath``
when an access token is presented; ``nonce`` when the server gave one), the per-endpoint
server nonces (:class:`NonceCache`, fed by ``DPoP-Nonce`` reply headers), the two together
as a :class:`DPoPProver`, the token-endpoint POST with a proof and the bounded
``use_dpop_nonce`` retry (:func:`post_token_request`, RFC 9449 section 8), and
:class:`DPoPError` (an ``AuthError`` naming the step that failed).

``cryptography`` comes with the ``jwt`` extra (``pip install 'mcpsync[jwt]'``); without it
:func:`require_cryptography` raises a typed error naming that extra. Proofs are signed
here directly (JWS compact form), not through PyJWT: a proof per request is on the hot path.

No key material appears in ``repr``, logs or exception text.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from ..errors import AuthError, AuthServerUnreachable, ConfigError
from ..transports.http.fetch import MAX_BYTES, Deadline, load_json, read_body
from ..transports.http.headbound import send_bounded
from ._util import log, short

__all__ = [
    "DPoPKey",
    "DPoPError",
    "NonceCache",
    "DPoPProver",
    "post_token_request",
    "MAX_NONCE_RETRIES",
    "SUPPORTED_ALGS",
    "EXTRA_HINT",
    "dpop_available",
    "require_cryptography",
    "choose_alg",
    "normalise_htu",
    "access_token_hash",
    "jwk_thumbprint",
]

#: how to get ``cryptography``
EXTRA_HINT = "pip install 'mcpsync[jwt]'"
#: the algorithms this module signs with, in preference order. ES256 first also for speed:
#: measured with cryptography 50 / OpenSSL 4.0 on x86-64, a P-256 signature is ~20 us and an
#: Ed25519 one ~26 us (min of repeats), so EdDSA is taken only when a server wants it.
SUPPORTED_ALGS = ("ES256", "ES384", "ES512", "EdDSA")
_EC = {"ES256": ("P-256", 32), "ES384": ("P-384", 48), "ES512": ("P-521", 66)}
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: re-sends of one request for a new server nonce before giving up (a nonce loop)
MAX_NONCE_RETRIES = 2
#: a proof signed ahead (``DPoPKey.sign_ahead``) is used at most this many seconds after its
#: ``iat`` (whole seconds, so up to one more): servers allow far more clock skew than that
AHEAD_MAX_AGE = 1
#: proofs signed ahead that may wait at once (one per thread sharing a session, a few)
AHEAD_READY = 4


class DPoPError(AuthError):
    """A DPoP step failed; ``step`` names it ("token request", "MCP request", ...)."""

    def __init__(self, message: str, *, step: str) -> None:
        self.step = step
        super().__init__(f"DPoP {step}: {message}")


def dpop_available() -> bool:
    """True when ``cryptography`` can be imported."""
    try:
        import cryptography.hazmat.primitives.asymmetric.ec  # noqa: F401
    except ImportError:
        return False
    return True


def require_cryptography(step: str) -> None:
    """Raise :class:`DPoPError` naming the extra when ``cryptography`` is missing."""
    if not dpop_available():
        raise DPoPError(f"needs the 'cryptography' package ({EXTRA_HINT})", step=step)


def choose_alg(offered: Sequence[str] | None, preferred: str = "ES256") -> str | None:
    """The algorithm to sign with given what a server offers (None: no offer, take ours)."""
    if not offered:
        return preferred
    if preferred in offered:
        return preferred
    return next((a for a in SUPPORTED_ALGS if a in offered), None)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_b64(value: int, size: int) -> str:
    return _b64(value.to_bytes(size, "big"))


def normalise_htu(url: str) -> str:
    """``htu`` for a request URL (RFC 9449 section 4.2): no query or fragment, lower-case
    scheme and host, no default port, ``/`` for an empty path."""
    p = urlsplit(url)
    scheme = p.scheme.lower()
    host = (p.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = p.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, p.path or "/", "", ""))


@functools.lru_cache(maxsize=256)
def _htu_json(url: str) -> str:
    """``"htu"`` as a JSON string for a request URL (cached: the hot path asks per call)."""
    return json.dumps(normalise_htu(url))


@functools.lru_cache(maxsize=16)
def _htm_json(method: str) -> str:
    return json.dumps(method.upper())


def access_token_hash(access_token: str) -> str:
    """``ath``: base64url(SHA-256(ASCII access token))."""
    return _b64(hashlib.sha256(access_token.encode("ascii")).digest())


def jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 SHA-256 thumbprint of a public JWK (what an AS puts in ``cnf.jkt``)."""
    required = {
        "EC": ("crv", "kty", "x", "y"),
        "OKP": ("crv", "kty", "x"),
        "RSA": ("e", "kty", "n"),
    }
    members = {k: jwk[k] for k in required[jwk["kty"]]}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True)
    return _b64(hashlib.sha256(canonical.encode()).digest())


class DPoPKey:
    """An asymmetric key pair for DPoP proofs. ``repr`` shows the algorithm and thumbprint only.

    >>> key = DPoPKey.generate()                                 # doctest: +SKIP
    >>> key.proof("POST", "https://mcp.example.com/mcp", access_token=tok)  # doctest: +SKIP
    """

    __slots__ = (
        "alg",
        "_private",
        "public_jwk",
        "thumbprint",
        "_header",
        "_ath",
        "_ecdsa",
        "_dss",
        "_ready",
        "_ready_lock",
        "_ahead_skip",
        "_ahead_misses",
    )

    def __init__(self, private_key: Any, alg: str) -> None:
        if alg not in SUPPORTED_ALGS:
            raise ConfigError(
                f"DPoP algorithm {alg!r} is not supported (use one of {SUPPORTED_ALGS})"
            )
        self.alg = alg
        self._private = private_key
        self._ecdsa: Any = None
        self._dss: Any = None
        if alg in _EC:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

            self._dss = decode_dss_signature

            digests: dict[str, hashes.HashAlgorithm] = {
                "ES256": hashes.SHA256(),
                "ES384": hashes.SHA384(),
                "ES512": hashes.SHA512(),
            }
            self._ecdsa = ec.ECDSA(digests[alg])
        self.public_jwk = self._public_jwk()
        self.thumbprint = jwk_thumbprint(self.public_jwk)
        header = {"typ": "dpop+jwt", "alg": alg, "jwk": self.public_jwk}
        self._header = _b64(json.dumps(header, separators=(",", ":")).encode())
        self._ath: tuple[str, str] | None = None  # (access token, its hash): one cached
        # proofs signed ahead (sign_ahead), each taken at most once: (what it binds, iat, proof)
        self._ready: list[tuple[tuple[str, str, str | None, str | None], int, str]] = []
        self._ready_lock = threading.Lock()
        self._ahead_skip = 0  # requests to let pass before signing ahead again (after a miss)
        self._ahead_misses = 0

    def __repr__(self) -> str:
        return f"DPoPKey(alg={self.alg!r}, thumbprint={self.thumbprint!r})"

    @classmethod
    def generate(cls, alg: str = "ES256") -> DPoPKey:
        """A new key pair (ES256 / ES384 / ES512 on their curves, EdDSA = Ed25519)."""
        require_cryptography("key generation")
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519

        if alg == "EdDSA":
            return cls(ed25519.Ed25519PrivateKey.generate(), alg)
        curves: dict[str, ec.EllipticCurve] = {
            "ES256": ec.SECP256R1(),
            "ES384": ec.SECP384R1(),
            "ES512": ec.SECP521R1(),
        }
        if alg not in curves:
            raise ConfigError(
                f"DPoP algorithm {alg!r} is not supported (use one of {SUPPORTED_ALGS})"
            )
        return cls(ec.generate_private_key(curves[alg]), alg)

    def _public_jwk(self) -> dict[str, Any]:
        from cryptography.hazmat.primitives import serialization

        pub = self._private.public_key()
        if self.alg == "EdDSA":
            raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            return {"kty": "OKP", "crv": "Ed25519", "x": _b64(raw)}
        crv, size = _EC[self.alg]
        numbers = pub.public_numbers()
        return {
            "kty": "EC",
            "crv": crv,
            "x": _int_b64(numbers.x, size),
            "y": _int_b64(numbers.y, size),
        }

    # -- storage -----------------------------------------------------------------------
    def to_store(self) -> dict[str, str]:
        """The key pair for a token store (PKCS#8 PEM: a secret, like the token next to it)."""
        from cryptography.hazmat.primitives import serialization

        pem = self._private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return {"alg": self.alg, "private_key_pem": pem.decode("ascii")}

    @classmethod
    def from_store(cls, d: Any) -> DPoPKey | None:
        """The key pair :meth:`to_store` wrote; None when ``d`` is not one (or is unreadable)."""
        if not isinstance(d, dict) or d.get("alg") not in SUPPORTED_ALGS:
            return None
        pem = d.get("private_key_pem")
        if not isinstance(pem, str):
            return None
        require_cryptography("stored key")
        from cryptography.hazmat.primitives import serialization

        try:
            key = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
            return cls(key, str(d["alg"]))
        except (ValueError, TypeError, ConfigError):  # corrupt or wrong kind: no key, no text
            return None

    # -- proofs ------------------------------------------------------------------------
    def proof(
        self,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
        htu: str | None = None,
    ) -> str:
        """A fresh proof JWT for one request (a new ``jti`` every call: never reuse one).

        A proof :meth:`sign_ahead` made for the same method, URL, token and nonce is taken
        instead of signing now, if it is at most :data:`AHEAD_MAX_AGE` seconds old; each is
        taken once."""
        htu_json = json.dumps(htu) if htu is not None else _htu_json(url)
        now = int(time.time())
        if self._ready:
            ready = self._take((method, htu_json, access_token, nonce), now)
            if ready is not None:
                return ready
        return self._build(method, htu_json, access_token, nonce, now)

    def sign_ahead(
        self, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None
    ) -> None:
        """Sign a proof for a *next* request to ``url`` now, for :meth:`proof` to take.

        The HTTP transport calls this (through ``OAuth.request_sent``) after writing a
        request and before reading its reply: the signature is made while the server
        works, instead of before the next request goes out. At most :data:`AHEAD_READY`
        proofs wait; after a proof was wasted (the nonce or the token changed meanwhile),
        signing ahead pauses for a growing number of requests."""
        if self._ahead_skip:
            self._ahead_skip -= 1
            return
        if len(self._ready) >= AHEAD_READY:
            return
        htu_json = _htu_json(url)
        now = int(time.time())
        proof = self._build(method, htu_json, access_token, nonce, now)
        with self._ready_lock:
            self._ready.append(((method, htu_json, access_token, nonce), now, proof))

    def _take(self, binds: tuple[str, str, str | None, str | None], now: int) -> str | None:
        with self._ready_lock:
            ready, self._ready = self._ready, []
            found = None
            for entry in ready:
                if found is None and entry[0] == binds and now - entry[1] <= AHEAD_MAX_AGE:
                    found = entry[2]
                    self._ahead_misses = 0
                elif now - entry[1] <= AHEAD_MAX_AGE and entry[0][:3] == binds[:3]:
                    if entry[0] != binds:  # another nonce now: wasted
                        self._ahead_missed()
                    else:
                        self._ready.append(entry)  # a second one for the same request kind
                else:
                    self._ahead_missed()
        return found

    def _ahead_missed(self) -> None:
        self._ahead_misses = min(self._ahead_misses + 1, 6)
        self._ahead_skip = 1 << self._ahead_misses  # 2, 4, ... 64 requests

    def _build(
        self, method: str, htu_json: str, access_token: str | None, nonce: str | None, iat: int
    ) -> str:
        # the claims as compact JSON, from cached pieces (jti and ath are base64url: no escaping)
        payload = (
            f'{{"jti":"{secrets.token_urlsafe(18)}","htm":{_htm_json(method)},'
            f'"htu":{htu_json},"iat":{iat}'
        )
        if access_token is not None:
            cached = self._ath
            if cached is None or cached[0] != access_token:
                cached = (access_token, access_token_hash(access_token))
                self._ath = cached
            payload += f',"ath":"{cached[1]}"'
        if nonce is not None:
            payload += f',"nonce":{json.dumps(nonce)}'
        signing_input = f"{self._header}.{_b64((payload + '}').encode())}"
        return f"{signing_input}.{_b64(self._sign(signing_input.encode('ascii')))}"

    def _sign(self, data: bytes) -> bytes:
        if self._dss is None:  # EdDSA
            return bytes(self._private.sign(data))
        r, s = self._dss(self._private.sign(data, self._ecdsa))
        size = _EC[self.alg][1]
        return r.to_bytes(size, "big") + s.to_bytes(size, "big")


class NonceCache:
    """The latest ``DPoP-Nonce`` each endpoint gave (RFC 9449 sections 8 and 9); thread-safe."""

    def __init__(self) -> None:
        self._nonces: dict[str, str] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(url: str) -> str:
        # per endpoint (htu), not per origin: an AS and an MCP server may share an origin
        try:
            return _htu_json(url)
        except ValueError:
            return url

    def get(self, url: str) -> str | None:
        with self._lock:
            return self._nonces.get(self._key(url))

    def update(self, url: str, nonce: str | None) -> bool:
        """Remember ``nonce`` for ``url`` (without its query); True when it is new."""
        if not nonce or len(nonce) > 1024 or not nonce.isprintable():
            return False
        key = self._key(url)
        with self._lock:
            if self._nonces.get(key) == nonce:
                return False
            self._nonces[key] = nonce
            return True


@dataclass
class DPoPProver:
    """A key and the nonces servers gave: what signs the proofs of one ``OAuth`` object."""

    key: DPoPKey
    nonces: NonceCache = field(default_factory=NonceCache)

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        return self.key.proof(method, url, access_token=access_token, nonce=self.nonces.get(url))


def _oauth_error(r: requests.Response) -> str | None:
    doc = load_json(r.content, what="token reply", url=r.url, error=AuthError, lenient=True)
    error = doc.get("error") if isinstance(doc, dict) else None
    return error if isinstance(error, str) else None


#: what ``post_token_request`` tells an observer of each attempt: ``(status, None)`` when a
#: reply came, ``(None, kind)`` when none did (refused, reset, timed out: ``ConnectionError``,
#: ``ReadTimeout``, ...)
Observer = Callable[[int | None, str | None], None]


def post_token_request(
    http: requests.Session,
    endpoint: str,
    body: str,
    headers: Mapping[str, str],
    *,
    timeout: float,
    dpop: DPoPProver | None,
    observe: Observer | None = None,
) -> requests.Response:
    """POST a token request and read its reply, all within ``timeout`` (one deadline for
    every attempt, the status line, headers and body reads included: a reply trickled in
    is cut at the deadline, :class:`AuthServerUnreachable`; a reply over 1 MiB is an
    ``AuthError``); with ``dpop``, each attempt carries a fresh proof and an
    ``use_dpop_nonce`` answer is retried with the server's new nonce, at most
    :data:`MAX_NONCE_RETRIES` times (then :class:`DPoPError`, step "token request").
    Raises what ``requests`` raises when there is no answer before the deadline (refused,
    reset); ``observe`` (when given) hears of every attempt."""
    deadline = Deadline.checked(timeout)  # one bound for every attempt and its reply
    for attempt in range(MAX_NONCE_RETRIES + 1):
        sent = dict(headers)
        if dpop is not None:
            sent["DPoP"] = dpop.proof("POST", endpoint)
        left = max(deadline.left(), 0.001)  # spent: requests' own Timeout, as before
        cut = False
        try:  # the head too is read by the deadline (headbound), not per read
            reply = send_bounded(
                http, "POST", endpoint, by=deadline.at, headers=sent, json_body=None,
                data=body, timeout=(left, left),
            )  # fmt: skip
        except requests.RequestException as exc:
            if observe is not None and isinstance(
                exc, (requests.ConnectionError, requests.Timeout)
            ):
                observe(None, type(exc).__name__)
            if not deadline.expired:
                raise
            cut = True  # the deadline cut it: said so below, outside the except (the
        if cut:  # exception holds the request body: it must not ride along as __context__)
            raise AuthServerUnreachable(
                f"the token reply at {short(endpoint)}: not read within {deadline.words()}"
            )
        r = reply.response
        if observe is not None:
            observe(r.status_code, None)
        try:
            content = read_body(
                r, endpoint, deadline=deadline, max_bytes=MAX_BYTES, what="the token reply",
                error=AuthError, timeout_error=AuthServerUnreachable,
            )  # fmt: skip
        finally:
            reply.close()  # the reply and its one-request adapter: no connection kept
        # nesting too deep for any parser is refused here, naming it (a token reply is small)
        load_json(content, what="the token reply", url=endpoint, error=AuthError, lenient=True)
        # what requests itself keeps once it has read a body: r.text and r.json() work on it
        r._content, r._content_consumed = content, True
        if dpop is None:
            return r
        fresh = dpop.nonces.update(endpoint, r.headers.get("DPoP-Nonce"))
        if r.status_code not in (400, 401) or _oauth_error(r) != "use_dpop_nonce":
            return r
        r.close()
        if not fresh:
            raise DPoPError(
                "the authorization server asked for a DPoP nonce (use_dpop_nonce) without "
                "giving a new one in DPoP-Nonce",
                step="token request",
            )
        if attempt == MAX_NONCE_RETRIES:
            break
        log.debug("%s asked for a DPoP nonce (use_dpop_nonce); retrying with it", short(endpoint))
    raise DPoPError(
        f"the authorization server kept demanding a new DPoP nonce ({MAX_NONCE_RETRIES} "
        "retries with the nonces it gave); giving up",
        step="token request",
    )
