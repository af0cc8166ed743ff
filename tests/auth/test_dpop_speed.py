"""The fast DPoP proof builder (``DPoPKey.proof``: cached header, ``ath`` and ``htu``, a
payload formatted as a string) makes proofs that verify and carry the right claims.

Correctness only: the speed is measured in ``benchmarks/auth_bench.py``, never asserted here.
Signatures are checked twice: with PyJWT and with ``cryptography`` directly (raw ``r||s`` for
ES256 turned back into DER), so a builder bug that both sides of one library share still shows.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from typing import Any

import pytest

jwt = pytest.importorskip("jwt")
pytest.importorskip("cryptography")

from cryptography.exceptions import InvalidSignature  # noqa: E402
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, ed25519  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature  # noqa: E402

from mcpsync.auth.dpop import DPoPKey, jwk_thumbprint  # noqa: E402

TOKEN = "tok-" + "A1b2" * 20
URL = "https://MCP.Example.COM:443/mcp?session=1#frag"


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _verify_with_cryptography(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) after checking the signature against the header's ``jwk``."""
    h, p, s = proof.split(".")
    header = json.loads(_unb64(h))
    signing_input, sig = f"{h}.{p}".encode("ascii"), _unb64(s)
    jwk = header["jwk"]
    if header["alg"] == "EdDSA":
        assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519"
        pub = ed25519.Ed25519PublicKey.from_public_bytes(_unb64(jwk["x"]))
        pub.verify(sig, signing_input)
    else:
        assert header["alg"] == "ES256" and jwk["kty"] == "EC" and jwk["crv"] == "P-256"
        assert len(sig) == 64  # JWS raw r||s, not DER
        x, y = (int.from_bytes(_unb64(jwk[c]), "big") for c in ("x", "y"))
        pub_ec = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
        der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big"))
        pub_ec.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))
    return header, json.loads(_unb64(p))


def _verify_with_pyjwt(proof: str) -> dict[str, Any]:
    header = jwt.get_unverified_header(proof)
    key = jwt.PyJWK(header["jwk"], algorithm=header["alg"]).key
    return dict(jwt.decode(proof, key, algorithms=[header["alg"]]))


def _ath(token: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_fast_proof_verifies_and_carries_the_claims(alg):
    key = DPoPKey.generate(alg)
    before = int(time.time())
    proof = key.proof("post", URL, access_token=TOKEN, nonce='n"1\\x')
    after = int(time.time())
    header, claims = _verify_with_cryptography(proof)
    assert _verify_with_pyjwt(proof) == claims
    assert header == {"typ": "dpop+jwt", "alg": alg, "jwk": key.public_jwk}
    assert "d" not in header["jwk"]  # the public half only
    assert jwk_thumbprint(header["jwk"]) == key.thumbprint
    assert set(claims) == {"jti", "htm", "htu", "iat", "ath", "nonce"}
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://mcp.example.com/mcp"  # no query, fragment, default port
    assert before <= claims["iat"] <= after
    assert claims["ath"] == _ath(TOKEN)
    assert claims["nonce"] == 'n"1\\x'  # escaped into valid JSON, read back intact
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_token_request_proof_has_no_ath_and_a_tampered_proof_fails(alg):
    key = DPoPKey.generate(alg)
    proof = key.proof("POST", "http://127.0.0.1:8123/token")
    _, claims = _verify_with_cryptography(proof)
    assert set(claims) == {"jti", "htm", "htu", "iat"}
    assert claims["htu"] == "http://127.0.0.1:8123/token"
    h, p, s = proof.split(".")
    forged = base64.urlsafe_b64encode(
        json.dumps({**claims, "htu": "http://evil.example/token"}).encode()
    )
    with pytest.raises(InvalidSignature):
        _verify_with_cryptography(f"{h}.{forged.rstrip(b'=').decode()}.{s}")
    with pytest.raises(jwt.InvalidSignatureError):
        _verify_with_pyjwt(f"{h}.{forged.rstrip(b'=').decode()}.{s}")


def test_cached_ath_follows_a_new_token_and_htu_each_url():
    key = DPoPKey.generate()
    first = _verify_with_pyjwt(key.proof("POST", URL, access_token=TOKEN))
    second = _verify_with_pyjwt(key.proof("POST", URL, access_token=TOKEN + "-renewed"))
    third = _verify_with_pyjwt(key.proof("GET", "http://h.example:8080/other", access_token=TOKEN))
    assert first["ath"] == _ath(TOKEN) == third["ath"]
    assert second["ath"] == _ath(TOKEN + "-renewed")
    assert (third["htm"], third["htu"]) == ("GET", "http://h.example:8080/other")
    explicit = _verify_with_pyjwt(key.proof("POST", URL, htu="https://x.example/a b"))
    assert explicit["htu"] == "https://x.example/a b"


def test_every_proof_is_new_across_threads():
    key = DPoPKey.generate()
    proofs: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        try:
            mine = [key.proof("POST", URL, access_token=TOKEN) for _ in range(100)]
        except BaseException as exc:  # reported below
            errors.append(exc)
            raise
        with lock:
            proofs.extend(mine)

    threads = [threading.Thread(target=work, name=f"mcpsync-test[proof{i}]") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(proofs) == 400 and len(set(proofs)) == 400
    jtis = {_verify_with_cryptography(p)[1]["jti"] for p in proofs[::7]}
    assert len(jtis) == len(proofs[::7])
    all_jtis = {json.loads(_unb64(p.split(".")[1]))["jti"] for p in proofs}
    assert len(all_jtis) == 400


def test_a_stored_key_signs_verifiable_proofs_with_the_same_jwk():
    key = DPoPKey.generate("EdDSA")
    again = DPoPKey.from_store(key.to_store())
    assert again is not None and again.public_jwk == key.public_jwk
    header, claims = _verify_with_cryptography(again.proof("POST", URL, access_token=TOKEN))
    assert header["jwk"] == key.public_jwk and claims["ath"] == _ath(TOKEN)


# -- proofs signed ahead (while the previous request's reply is awaited) --------------------
def test_a_proof_signed_ahead_is_taken_once_by_the_matching_request():
    key = DPoPKey.generate()
    key.sign_ahead("POST", URL, access_token=TOKEN, nonce="n1")
    ready = key._ready[0][2]
    proof = key.proof("POST", URL, access_token=TOKEN, nonce="n1")
    assert proof == ready  # signed ahead, taken now
    _, claims = _verify_with_cryptography(proof)
    assert claims["ath"] == _ath(TOKEN) and claims["nonce"] == "n1"
    assert claims["htu"] == "https://mcp.example.com/mcp"
    assert abs(claims["iat"] - time.time()) <= 2
    again = key.proof("POST", URL, access_token=TOKEN, nonce="n1")
    assert again != proof  # never twice
    assert _unb64(again.split(".")[1]) != _unb64(proof.split(".")[1])


@pytest.mark.parametrize(
    "changed",
    [
        {"nonce": "n2"},  # the server rotated its nonce meanwhile
        {"access_token": TOKEN + "-renewed"},  # the token was renewed meanwhile
        {"url": "https://mcp.example.com/other"},
        {"method": "GET"},
    ],
)
def test_a_proof_signed_ahead_for_something_else_is_never_sent(changed):
    key = DPoPKey.generate()
    key.sign_ahead("POST", URL, access_token=TOKEN, nonce="n1")
    ready = key._ready[0][2]
    want = {"method": "POST", "url": URL, "access_token": TOKEN, "nonce": "n1", **changed}
    proof = key.proof(
        want["method"], want["url"], access_token=want["access_token"], nonce=want["nonce"]
    )
    assert proof != ready
    _, claims = _verify_with_cryptography(proof)
    assert claims["nonce"] == want["nonce"] and claims["ath"] == _ath(want["access_token"])
    assert claims["htm"] == want["method"]
    assert not key._ready  # the wasted one is dropped


def test_an_old_proof_signed_ahead_is_not_used(monkeypatch):
    key = DPoPKey.generate()
    key.sign_ahead("POST", URL, access_token=TOKEN)
    ready = key._ready[0][2]
    later = time.time() + 5
    monkeypatch.setattr(time, "time", lambda: later)
    proof = key.proof("POST", URL, access_token=TOKEN)
    assert proof != ready
    assert _verify_with_cryptography(proof)[1]["iat"] == int(later)


def test_signing_ahead_backs_off_after_wasted_proofs():
    """A server that rotates its nonce on every reply wastes each proof signed ahead: signing
    ahead pauses for 2, 4, 8, ... requests instead of doubling the signing work."""
    key = DPoPKey.generate()
    signed = 0
    for request in range(200):
        before = len(key._ready)
        key.sign_ahead("POST", URL, access_token=TOKEN, nonce=f"n{request}")
        signed += len(key._ready) - before
        key.proof("POST", URL, access_token=TOKEN, nonce=f"n{request + 1}")
    assert signed <= 12  # 1 + 1 per back-off step (2, 4, ... 64), not 200


def test_proofs_signed_ahead_by_threads_are_each_used_once():
    key = DPoPKey.generate()
    sent: list[str] = []
    lock = threading.Lock()

    def work() -> None:
        mine = []
        for _ in range(200):
            mine.append(key.proof("POST", URL, access_token=TOKEN))
            key.sign_ahead("POST", URL, access_token=TOKEN)
        with lock:
            sent.extend(mine)

    threads = [threading.Thread(target=work, name=f"mcpsync-test[ahead{i}]") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    jtis = [json.loads(_unb64(p.split(".")[1]))["jti"] for p in sent]
    assert len(sent) == 800 and len(set(jtis)) == 800
