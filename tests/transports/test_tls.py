"""Corporate TLS: ``verify=`` (a CA bundle or False) and ``cert=`` (a client certificate)
on ``Session.connect``, config entries, ``--cacert``/``--cert`` on the command line, and
the same settings on an ``OAuth``'s own requests, against real TLS servers on 127.0.0.1
(the demo HTTP server behind a throwaway CA made here with ``cryptography``)."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
import requests

cryptography = pytest.importorskip("cryptography")

from servers.selfsigned import make_pki  # noqa: E402

import mcpsync  # noqa: E402
from mcpsync import cli  # noqa: E402
from mcpsync.auth import OAuth  # noqa: E402
from mcpsync.config import parse_entry  # noqa: E402
from mcpsync.demo_server.auth import DemoAuthorizationServer  # noqa: E402
from mcpsync.demo_server.http import DemoHTTPServer  # noqa: E402
from mcpsync.errors import AuthError, TLSError  # noqa: E402

SECRET = "tls-client-SECRET-9f8e7d"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_server(
    pki: dict[str, str], *, client_cert: bool = False, clients: dict[str, str] | None = None
) -> DemoHTTPServer:
    """The demo HTTP server (with its authorization server when ``clients``) over TLS."""
    server = DemoHTTPServer()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["server_cert"], pki["server_key"])
    if client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki["ca"])
    # the handshake runs in each connection's handler thread (first read), not in accept()
    server._httpd.socket = context.wrap_socket(
        server._httpd.socket, server_side=True, do_handshake_on_connect=False
    )
    server._httpd.handle_error = lambda request, address: None  # refused handshakes: quiet
    server.origin = f"https://127.0.0.1:{server.port}"
    server.url = f"{server.origin}/mcp"
    if clients is not None:
        server.auth_server = DemoAuthorizationServer(server.origin, clients=clients)
    return server.start()


def _echo(s: mcpsync.Session) -> str:
    return s.call_tool("echo", {"message": "over tls"}).content[0].text


def test_default_verification_fails_with_a_typed_error(pki, no_leaks):
    with tls_server(pki) as server:
        with pytest.raises(TLSError) as info:
            mcpsync.Session.connect(server.url, connect_timeout=10)
        text = str(info.value)
        assert "TLS failure (unable to get local issuer certificate" in text
        assert "verify=<CA bundle>" in text  # says what to do
        assert f"127.0.0.1:{server.port}" in text
        with pytest.raises(TLSError, match="unable to get local issuer"):  # the wrong CA
            mcpsync.Session.connect(server.url, verify=pki["other_ca"], connect_timeout=10)


@pytest.mark.parametrize("fast", [True, False], ids=["fast-pool", "requests"])
def test_verify_with_the_ca_bundle(pki, no_leaks, fast):
    with tls_server(pki) as server:
        http = None if fast else requests.Session()  # a caller's session: the requests path
        with mcpsync.Session.connect(
            server.url, verify=pki["ca"], http_session=http, connect_timeout=10
        ) as s:
            assert s.transport._http.fast is fast  # the fast pool took the CA, not stepped aside
            assert _echo(s) == "over tls"
        if http is not None:
            http.close()


def test_verify_false_skips_verification(pki, no_leaks):
    with tls_server(pki) as server:
        with mcpsync.Session.connect(server.url, verify=False, connect_timeout=10) as s:
            assert _echo(s) == "over tls"


def test_client_certificate(pki, no_leaks):
    with tls_server(pki, client_cert=True) as server:
        with pytest.raises(TLSError):  # the server asks for a certificate; none given
            mcpsync.Session.connect(server.url, verify=pki["ca"], connect_timeout=10)
        pair = (pki["client_cert"], pki["client_key"])
        for cert in (pair, pki["client_both"]):
            with mcpsync.Session.connect(
                server.url, verify=pki["ca"], cert=cert, connect_timeout=10
            ) as s:
                assert s.transport._http.fast
                assert _echo(s) == "over tls"


def test_oauth_requests_use_the_same_tls(pki, no_leaks, caplog, monkeypatch):
    """Discovery and the token request go to the TLS server with the connection's CA and
    client certificate (the OAuth object made its own session); a caller's own
    ``http_session`` on the OAuth object is left as it is (and so fails here)."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", pki["other_ca"])  # requests would let it win
    with tls_server(pki, client_cert=True, clients={"svc": SECRET}) as server:
        tls: dict[str, Any] = {"verify": pki["ca"], "cert": pki["client_both"]}
        auth = OAuth.client_credentials("svc", SECRET)
        with mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20, **tls) as s:
            assert _echo(s) == "over tls" and auth.authorized
        assert (
            server.auth_server is not None
            and server.auth_server.stats()["tokens"].get("client_credentials", 0) >= 1
        )
        own = requests.Session()
        auth = OAuth.client_credentials("svc", SECRET, http_session=own)
        with pytest.raises((AuthError, TLSError)) as info:
            mcpsync.Session.connect(server.url, auth=auth, connect_timeout=20, **tls)
        assert SECRET not in str(info.value) and SECRET not in caplog.text
        own.close()


def test_config_entry_verify_and_cert(pki, no_leaks):
    with tls_server(pki, client_cert=True) as server:
        entry = parse_entry(
            "corp",
            {
                "url": server.url,
                "verify": pki["ca"],
                "cert": [pki["client_cert"], pki["client_key"]],
            },
        )
        kwargs = entry.connect_kwargs()
        assert kwargs["verify"] == pki["ca"]
        assert kwargs["cert"] == (pki["client_cert"], pki["client_key"])
        with mcpsync.Session.connect(**kwargs) as s:
            assert _echo(s) == "over tls"
        with mcpsync.Host([entry]) as host:
            assert host.call_tool("corp__echo", {"message": "host"}).content[0].text == "host"
        plain = parse_entry("corp", {"url": server.url})  # the TLS settings from the Host
        tls = {"verify": pki["ca"], "cert": pki["client_both"]}
        with mcpsync.Host([plain], session_kwargs=tls) as host:
            assert host.call_tool("corp__echo", {"message": "kw"}).content[0].text == "kw"


def test_config_entry_tls_settings_are_checked():
    from mcpsync.config import ConfigEntryError

    with pytest.raises(ConfigEntryError, match="verify"):
        parse_entry("x", {"url": "https://example.com/mcp", "verify": 3})
    with pytest.raises(ConfigEntryError, match="cert"):
        parse_entry("x", {"url": "https://example.com/mcp", "cert": ["a", "b", "c"]})
    with pytest.raises(ConfigEntryError, match="HTTP"):
        parse_entry("x", {"command": "python", "verify": False})


def test_cli_cacert_and_cert(pki, capsys, no_leaks):
    with tls_server(pki, client_cert=True) as server:
        code = cli.main(["tools", server.url, "--cacert", pki["ca"], "--cert", pki["client_both"]])
        out = capsys.readouterr()
        assert code == 0, out.err
        assert "echo" in out.out
        code = cli.main(
            ["call", server.url, "echo", "message=cli", "--cacert", pki["ca"],
             "--cert", pki["client_cert"], "--key", pki["client_key"]]
        )  # fmt: skip
        out = capsys.readouterr()
        assert code == 0 and "cli" in out.out, out.err
        code = cli.main(["tools", server.url, "--cert", pki["client_both"]])  # no --cacert
        out = capsys.readouterr()
        assert code == 3 and "TLS failure" in out.err and "--cacert FILE" in out.err
        code = cli.main(["tools", server.url, "--insecure", "--cert", pki["client_both"]])
        assert code == 0, capsys.readouterr().err


def test_cli_smoke_with_cacert(pki, capsys, tmp_path, no_leaks):
    """``mcpsync smoke`` applies --cacert / --cert to every HTTP entry of the file."""
    import json

    with tls_server(pki, client_cert=True) as server:
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"corp": {"url": server.url}}}))
        tls = ["--cacert", pki["ca"], "--cert", pki["client_cert"], "--key", pki["client_key"]]
        code = cli.main(["smoke", str(config), "--json", "--no-store", *tls])
        out = capsys.readouterr()
        assert code == 0, out.err
        (entry,) = json.loads(out.out)["servers"]
        assert entry["ok"] and "echo" in entry["tools"]
        code = cli.main(["smoke", str(config), "--json", "--no-store"])
        out = capsys.readouterr()
        (entry,) = json.loads(out.out)["servers"]
        assert code != 0 and not entry["ok"] and "TLS failure" in entry["error"]


def _tls_wrap(httpd: Any, pki: dict[str, str], *, client_cert: bool = False) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["server_cert"], pki["server_key"])
    if client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki["ca"])
    httpd.socket = context.wrap_socket(
        httpd.socket, server_side=True, do_handshake_on_connect=False
    )
    httpd.handle_error = lambda request, address: None


@pytest.mark.parametrize("fast", [True, False], ids=["fast-pool", "requests"])
def test_legacy_sse_over_tls_with_the_ca_bundle(pki, no_leaks, fast):
    """The 2024-11-05 HTTP+SSE transport (GET stream + POST endpoint) over TLS: the CA
    bundle and a client certificate reach both, explicitly and as the fallback of a URL."""
    from test_legacy_sse_transport import LEGACY, LegacyServer

    legacy = LegacyServer()
    _tls_wrap(legacy.server.server, pki, client_cert=True)
    url = f"https://127.0.0.1:{legacy.server.port}/sse"
    cert = (pki["client_cert"], pki["client_key"])
    with legacy:
        with pytest.raises(TLSError, match=r"TLS failure .*verify=<CA bundle>"):
            mcpsync.Session.connect(url, transport="sse", cert=cert, connect_timeout=10)
        for transport in ("sse", "auto"):  # auto: POST /sse answers 405, then legacy SSE
            http = None if fast else requests.Session()
            with mcpsync.Session.connect(
                url, transport=transport, verify=pki["ca"], cert=cert, http_session=http,
                connect_timeout=10, timeout=10,
            ) as s:  # fmt: skip
                assert s.transport.kind == "sse" and s.protocol_version == LEGACY
                assert s.call_tool("echo", {"message": "sse over tls"}).content[0].text == (
                    "sse over tls"
                )
            if http is not None:
                http.close()
        methods = [r.method for r in legacy.server.requests]
        assert methods.count("GET") == 2 and "POST" in methods  # the stream, the endpoint
