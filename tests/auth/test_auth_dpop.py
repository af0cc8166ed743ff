"""DPoP (RFC 9449, MCP extension io.modelcontextprotocol/auth/dpop): proofs, key storage,
nonces at the authorization server and at the MCP server, opt-in vs automatic, bad input.

The peers (tests/auth_peers/dpop_world.py) verify every proof with their own code
(tests/auth_peers/dpop_check.py): signature, htm/htu, iat, ath, the token's key, replay."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
import requests
from auth_peers.dpop_check import ReplayCache, check_proof, thumbprint
from auth_peers.dpop_world import CLIENT_ID, CLIENT_SECRET, DPoPWorld

import mcpsync
from mcpsync.auth import FileTokenStore, OAuth, TokenSet
from mcpsync.auth.dpop import (
    EXTRA_HINT,
    MAX_NONCE_RETRIES,
    SUPPORTED_ALGS,
    DPoPError,
    DPoPKey,
    normalise_htu,
)
from mcpsync.errors import AuthError, ConfigError
from mcpsync.transports.http.client import HTTPClient
from mcpsync.transports.http.requestauth import RequestAuth

ROOT = Path(__file__).resolve().parents[2]


def _claims(proof: str) -> dict[str, Any]:
    header = jwt.get_unverified_header(proof)
    key = jwt.PyJWK(header["jwk"], algorithm=header["alg"]).key
    return jwt.decode(proof, key, algorithms=[header["alg"]])


def _cc(**kw: Any) -> OAuth:
    return OAuth.client_credentials(CLIENT_ID, CLIENT_SECRET, **kw)


def _no_secret(text: str, world: DPoPWorld) -> None:
    assert CLIENT_SECRET not in text
    for token in world.tokens:
        assert token not in text
    for rec in world.mcp_requests + world.token_requests:
        if rec.get("proof"):
            assert rec["proof"] not in text


# -- the proof itself -------------------------------------------------------------------


def test_proof_claims_header_and_signature():
    key = DPoPKey.generate()
    proof = key.proof(
        "post", "HTTPS://MCP.Example.com:443/mcp?session=1#x", access_token="tok-1", nonce="n-1"
    )
    header = jwt.get_unverified_header(proof)
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    assert set(header["jwk"]) == {"kty", "crv", "x", "y"}  # public members only
    claims = _claims(proof)
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://mcp.example.com/mcp"  # no query, fragment, default port
    assert abs(claims["iat"] - time.time()) < 5
    assert claims["nonce"] == "n-1"
    assert "ath" in claims and thumbprint(header["jwk"]) == key.thumbprint
    error, jkt = check_proof(
        proof,
        method="POST",
        url="https://mcp.example.com/mcp",
        replay=ReplayCache(),
        access_token="tok-1",
        jkt=key.thumbprint,
        nonce="n-1",
    )
    assert error is None and jkt == key.thumbprint
    assert "ath" not in _claims(key.proof("GET", "http://h/"))
    odd = 'n"1\\2 \u00e9'  # a nonce needing JSON escapes survives as is
    assert _claims(key.proof("GET", 'http://h/a"b', nonce=odd))["nonce"] == odd
    assert normalise_htu("http://H:8080") == "http://h:8080/"


def test_a_proof_is_never_reused():
    key = DPoPKey.generate()
    proofs = [key.proof("POST", "http://127.0.0.1:1/mcp", access_token="t") for _ in range(200)]
    assert len(set(proofs)) == 200
    assert len({_claims(p)["jti"] for p in proofs}) == 200
    replay = ReplayCache()
    assert (
        check_proof(proofs[0], method="POST", url="http://127.0.0.1:1/mcp", replay=replay)[0]
        is None
    )
    assert check_proof(proofs[0], method="POST", url="http://127.0.0.1:1/mcp", replay=replay)[
        0
    ] == ("jti replayed")


@pytest.mark.parametrize("alg", SUPPORTED_ALGS)
def test_every_algorithm_verifies(alg):
    key = DPoPKey.generate(alg)
    proof = key.proof("POST", "http://127.0.0.1:9/token")
    assert jwt.get_unverified_header(proof)["alg"] == alg
    assert (
        check_proof(proof, method="POST", url="http://127.0.0.1:9/token", replay=ReplayCache())[0]
        is None
    )


def test_unknown_algorithm_is_a_config_error():
    with pytest.raises(ConfigError, match="HS256"):
        DPoPKey.generate("HS256")


def test_key_and_token_survive_the_store_and_repr_hides_them():
    key = DPoPKey.generate()
    stored = key.to_store()
    again = DPoPKey.from_store(json.loads(json.dumps(stored)))
    assert again is not None and again.thumbprint == key.thumbprint
    assert stored["private_key_pem"].split("\n")[1] not in repr(key)
    tok = TokenSet(access_token="secret-token", token_type="DPoP", dpop_key=key, issuer="i")
    back = TokenSet.from_store(json.loads(json.dumps(tok.to_store())))
    assert back is not None and back.token_type == "DPoP"
    assert back.dpop_key is not None and back.dpop_key.thumbprint == key.thumbprint
    assert "secret-token" not in repr(back) and "PRIVATE" not in repr(back)
    # a DPoP token whose key is lost is no token at all (it could only be sent as Bearer)
    assert TokenSet.from_store({**tok.to_store(), "dpop_key": None}) is None
    assert DPoPKey.from_store({"alg": "ES256", "private_key_pem": "garbage"}) is None


def test_without_cryptography_dpop_fails_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric.ec", None)
    with pytest.raises(DPoPError, match=r"mcpsync\[jwt\]") as info:
        _cc(dpop=True)
    assert info.value.step == "configuration" and isinstance(info.value, AuthError)
    assert EXTRA_HINT in str(info.value)
    with DPoPWorld() as world:  # the server takes only DPoP: no way around the extra
        with pytest.raises(DPoPError, match=r"mcpsync\[jwt\]") as info:
            requests.post(world.url, json={"jsonrpc": "2.0", "method": "x"}, auth=_cc(), timeout=10)
        assert info.value.step == "discovery"
    with DPoPWorld(accept_bearer=True) as world:  # DPoP offered on both sides: Bearer instead
        r = requests.post(world.url, json={"jsonrpc": "2.0", "method": "x"}, auth=_cc(), timeout=10)
        assert r.status_code == 202
        assert world.token_requests[-1]["proof"] is None
        assert world.mcp_requests[-1]["scheme"] == "Bearer"


# -- sessions against the DPoP peers ----------------------------------------------------


def test_session_gets_a_dpop_token_and_presents_it_on_the_fast_path(no_leaks):
    with DPoPWorld() as world:
        auth = _cc()
        assert isinstance(auth, RequestAuth)
        with mcpsync.Session.connect(world.url, auth=auth, timeout=30) as s:
            assert s.transport._http.fast  # type: ignore[attr-defined]
            for i in range(5):
                out = json.loads(s.call_tool("echo", {"i": i}).content[0].text)
                assert out == {"scheme": "DPoP", "i": i}
        (req,) = world.token_requests
        assert req["proof"] and req["proof_error"] is None and req["status"] == 200
        first, *rest = world.mcp_requests
        assert first["status"] == 401 and first["scheme"] == ""  # the challenge starts it
        assert rest and all(r["scheme"] == "DPoP" and r["status"] in (200, 202) for r in rest)
        jtis = [_claims(r["proof"])["jti"] for r in rest]
        assert len(set(jtis)) == len(jtis)  # a fresh proof per request


def test_nonce_at_the_mcp_server_and_at_the_authorization_server(no_leaks):
    with DPoPWorld(as_nonce=True, rs_nonce=True) as world:
        with mcpsync.Session.connect(world.url, auth=_cc(), timeout=30) as s:
            for _ in range(3):
                assert json.loads(s.call_tool("echo", {}).content[0].text)["scheme"] == "DPoP"
        statuses = [(t["status"], t.get("proof_error")) for t in world.token_requests]
        assert statuses == [(400, "use_dpop_nonce"), (200, None)]
        assert _claims(world.token_requests[1]["proof"])["nonce"] == "as-nonce-1"
        nonce_401 = [r for r in world.mcp_requests if r.get("error") == "use_dpop_nonce"]
        assert len(nonce_401) == 1  # once learned, every later proof carries it
        later = [r for r in world.mcp_requests if r["status"] in (200, 202)]
        assert all(_claims(r["proof"])["nonce"] == "rs-nonce-1" for r in later)
        proofs = [r["proof"] for r in world.mcp_requests if r["proof"]]
        assert len(set(proofs)) == len(proofs)  # the re-send after the nonce has a new proof


def test_requests_path_answers_the_nonce_too():
    with DPoPWorld(rs_nonce=True) as world, requests.Session() as http:
        auth = _cc()
        for i in range(3):
            r = http.post(
                world.url,
                json={"jsonrpc": "2.0", "id": i, "method": "tools/list"},
                auth=auth,
                timeout=10,
            )
            assert r.status_code == 200
        assert [r["status"] for r in world.mcp_requests][:3] == [401, 401, 200]
        assert all(r["status"] == 200 for r in world.mcp_requests[3:])


def _assert_clean_failure(info: Any, world: DPoPWorld, caplog: Any, step: str) -> None:
    assert info.value.step == step
    assert str(info.value).startswith(f"DPoP {step}:")
    err: BaseException | None = info.value
    while err is not None:  # the whole chain, not only the error raised
        _no_secret(str(err), world)
        _no_secret(repr(err), world)
        err = err.__cause__ or err.__context__
    _no_secret(caplog.text, world)


def test_nonce_loop_at_the_mcp_server_is_bounded(caplog, no_leaks):
    caplog.set_level(logging.DEBUG)
    with DPoPWorld(rs_nonce_loop=True) as world:
        with pytest.raises(DPoPError, match="kept demanding a new DPoP nonce") as info:
            mcpsync.Session.connect(world.url, auth=_cc(), timeout=30, connect_timeout=30)
        _assert_clean_failure(info, world, caplog, "MCP request")
        loops = [r for r in world.mcp_requests if r.get("error") == "use_dpop_nonce"]
        assert len(loops) == MAX_NONCE_RETRIES + 1
        assert len(world.token_requests) == 1  # a nonce is not a reason to authorize again


def test_nonce_loop_at_the_authorization_server_is_bounded(caplog):
    caplog.set_level(logging.DEBUG)
    with DPoPWorld(as_nonce_loop=True) as world:
        with pytest.raises(DPoPError, match="kept demanding a new DPoP nonce") as info:
            requests.post(world.url, json={"jsonrpc": "2.0", "method": "x"}, auth=_cc(), timeout=10)
        _assert_clean_failure(info, world, caplog, "token request")
        assert len(world.token_requests) == MAX_NONCE_RETRIES + 1


def test_dpop_bound_tokens_required_but_bearer_issued(caplog, no_leaks):
    caplog.set_level(logging.DEBUG)
    with DPoPWorld(prm_required=True, issue_bearer=True, accept_bearer=True) as world:
        with pytest.raises(DPoPError, match="requires DPoP-bound tokens") as info:
            mcpsync.Session.connect(world.url, auth=_cc(), timeout=30, connect_timeout=30)
        _assert_clean_failure(info, world, caplog, "token response")
        assert world.token_requests[0]["proof"]  # we asked for a bound token
        assert all(r["scheme"] != "Bearer" for r in world.mcp_requests)  # and never sent it


def test_dpop_false_against_a_server_that_takes_only_dpop():
    with DPoPWorld() as world:
        with pytest.raises(DPoPError, match="dpop=False") as info:
            requests.post(
                world.url, json={"jsonrpc": "2.0", "method": "x"}, auth=_cc(dpop=False), timeout=10
            )
        assert info.value.step == "MCP request" and not world.token_requests
    with DPoPWorld(prm_required=True, accept_bearer=True) as world:
        with pytest.raises(DPoPError, match="dpop=False") as info:
            requests.post(
                world.url, json={"jsonrpc": "2.0", "method": "x"}, auth=_cc(dpop=False), timeout=10
            )
        assert info.value.step == "discovery" and not world.token_requests


def test_auto_needs_both_sides_opt_in_forces_it():
    msg = {"jsonrpc": "2.0", "method": "x"}
    # the AS offers DPoP, the MCP server takes Bearer only: auto stays with Bearer
    with DPoPWorld(rs_dpop=False) as world:
        assert requests.post(world.url, json=msg, auth=_cc(), timeout=10).status_code == 202
        assert world.token_requests[0]["proof"] is None
        assert world.mcp_requests[-1]["scheme"] == "Bearer"
    # ... dpop=True asks for a bound token anyway (and this server cannot take it)
    with DPoPWorld(rs_dpop=False) as world:
        with pytest.raises(AuthError, match="rejected the token"):
            requests.post(world.url, json=msg, auth=_cc(dpop=True), timeout=10)
        assert world.token_requests[0]["proof"] and world.mcp_requests[-1]["scheme"] == "DPoP"
    # both sides speak DPoP (the server also takes Bearer): auto uses DPoP, dpop=False not
    for mode, scheme in (("auto", "DPoP"), (False, "Bearer")):
        with DPoPWorld(accept_bearer=True) as world:
            assert (
                requests.post(world.url, json=msg, auth=_cc(dpop=mode), timeout=10).status_code
                == 202
            )
            assert world.mcp_requests[-1]["scheme"] == scheme
    # the server takes only DPoP but the AS does not advertise it: auto still tries DPoP
    with DPoPWorld(advertise=None) as world:
        assert requests.post(world.url, json=msg, auth=_cc(), timeout=10).status_code == 202
        assert world.mcp_requests[-1]["scheme"] == "DPoP"


def test_expired_dpop_token_is_renewed_with_a_proof(no_leaks):
    with DPoPWorld(token_seconds=30) as world:  # inside the 60 s renewal window
        with mcpsync.Session.connect(world.url, auth=_cc(), timeout=30) as s:
            s.call_tool("echo", {})
            world.revoke_all()  # and the server forgets it: a 401 mid-session
            assert json.loads(s.call_tool("echo", {}).content[0].text)["scheme"] == "DPoP"
        assert len(world.token_requests) >= 2
        assert all(t["proof"] and t["status"] == 200 for t in world.token_requests)


_NEXT_PROCESS = """
import json, sys
sys.path.insert(0, {tests!r})
import mcpsync
from mcpsync.auth import FileTokenStore, OAuth
auth = OAuth.client_credentials("svc", "s3cret", store=FileTokenStore({path!r}))
with mcpsync.Session.connect({url!r}, auth=auth, timeout=30) as s:
    print(json.loads(s.call_tool("echo", {{}}).content[0].text)["scheme"])
"""


def test_a_stored_dpop_token_works_in_the_next_process(tmp_path, no_leaks):
    path = str(tmp_path / "tokens.json")
    with DPoPWorld() as world:
        auth = _cc(store=FileTokenStore(path))
        with mcpsync.Session.connect(world.url, auth=auth, timeout=30) as s:
            s.call_tool("echo", {})
        assert len(world.token_requests) == 1
        stored = Path(path).read_text()
        assert "PRIVATE KEY" in stored  # the key pair lives with the token
        code = _NEXT_PROCESS.format(tests=str(ROOT / "tests"), path=path, url=world.url)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == "DPoP"
        assert len(world.token_requests) == 1  # no new token: the stored one, with its key
        assert (
            world.mcp_requests[-1]["scheme"] == "DPoP" and world.mcp_requests[-1]["status"] == 200
        )


# -- which path: the fast pool for RequestAuth, requests for any other auth -----------------


def test_http_client_fast_path_only_for_request_auth():
    class Own(requests.auth.AuthBase):
        def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
            return r

    def client(auth: Any) -> HTTPClient:
        return HTTPClient(
            "http://127.0.0.1:9/mcp", headers=None, http_session=None, auth=auth,
            connect_timeout=5, verify=None, cert=None,
        )  # fmt: skip

    for auth, fast in ((None, True), (_cc(), True), (Own(), False)):
        c = client(auth)
        try:
            assert c.fast is fast
        finally:
            c.close()


def test_threads_share_a_dpop_token_each_request_with_its_own_proof(no_leaks):
    import threading

    with DPoPWorld(rs_nonce=True) as world:
        with mcpsync.Session.connect(world.url, auth=_cc(), timeout=30) as s:
            start = threading.Barrier(8, timeout=30)
            errors: list[BaseException] = []

            def worker() -> None:
                try:
                    start.wait()
                    for _ in range(10):
                        assert (
                            json.loads(s.call_tool("echo", {}).content[0].text)["scheme"] == "DPoP"
                        )
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=worker, name=f"test-dpop[{i}]") for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors and not any(t.is_alive() for t in threads)
        assert len(world.token_requests) == 1
        proofs = [r["proof"] for r in world.mcp_requests if r["proof"]]
        assert len(proofs) >= 80 and len(set(proofs)) == len(proofs)
        assert not [r for r in world.mcp_requests if r.get("error") not in (None, "use_dpop_nonce")]


def test_the_proof_algorithm_is_one_both_servers_accept():
    msg = {"jsonrpc": "2.0", "method": "x"}
    with DPoPWorld(advertise=["ES384", "EdDSA"], rs_algs="EdDSA") as world:
        assert requests.post(world.url, json=msg, auth=_cc(), timeout=10).status_code == 202
        assert jwt.get_unverified_header(world.token_requests[0]["proof"])["alg"] == "EdDSA"
        assert jwt.get_unverified_header(world.mcp_requests[-1]["proof"])["alg"] == "EdDSA"
    with DPoPWorld(advertise=["ES384", "EdDSA"], rs_algs="PS256") as world:  # nothing common
        assert requests.post(world.url, json=msg, auth=_cc(), timeout=10).status_code == 202
        assert jwt.get_unverified_header(world.token_requests[0]["proof"])["alg"] == "ES384"
