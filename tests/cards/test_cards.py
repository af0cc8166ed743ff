"""Server Cards (SEP-2127) over real HTTP on 127.0.0.1: where cards are found, how they are
checked and filled, and Session.connect(..., card=...) reaching the demo HTTP server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import mcpsync
from mcpsync.cards import (
    CardCache,
    CardError,
    CardNotFound,
    Input,
    choose_remote,
    fill,
    parse_card,
    server_card,
    server_cards,
)
from mcpsync.demo_server.http import DemoHTTPServer

SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"


def card(name: str = "com.example/weather", **extra: Any) -> dict[str, Any]:
    return {"$schema": SCHEMA, "name": name, "version": "1.2.0", "description": "Weather.", **extra}


class CardSite:
    """An HTTP server answering GETs from ``routes``: path -> (status, headers, body)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.seen: list[tuple[str, dict[str, str]]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                site.seen.append((self.path, dict(self.headers)))
                status, headers, body = site.routes.get(self.path, (404, {}, b"not here"))
                if (
                    status == 200
                    and headers.get("ETag")
                    and self.headers.get("If-None-Match") == headers["ETag"]
                ):
                    status, body = 304, b""
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                       name="mcpsync-test-cards", daemon=True)  # fmt: skip
        self.thread.start()

    def json(self, path: str, document: Any, status: int = 200, **headers: str) -> None:
        self.routes[path] = (status, headers, json.dumps(document).encode())

    def paths(self) -> list[str]:
        return [p for p, _ in self.seen]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.thread.join(5)
        self.httpd.server_close()


@pytest.fixture
def site() -> Iterator[CardSite]:
    s = CardSite()
    yield s
    s.stop()


def find(url: str, **kwargs: Any):
    return server_card(url, cache=CardCache(), timeout=5, **kwargs)


def test_the_reserved_server_card_path_comes_first(site):
    site.json(
        "/mcp/server-card", card(remotes=[{"type": "streamable-http", "url": f"{site.origin}/mcp"}])
    )
    found = find(f"{site.origin}/mcp")
    assert found.name == "com.example/weather" and found.source == f"{site.origin}/mcp/server-card"
    assert site.paths() == ["/mcp/server-card"]
    assert site.seen[0][1]["Accept"].startswith("application/mcp-server-card+json")
    assert "Authorization" not in site.seen[0][1]


def test_domain_catalog_by_url_and_inline(site):
    site.json("/.well-known/mcp/catalog.json", {"specVersion": "draft", "entries": [
        {"identifier": "urn:air:example.com:weather", "type": "application/mcp-server-card+json",
         "url": "/cards/weather"},
        {"identifier": "urn:air:example.com:news", "type": "application/mcp-server-card+json",
         "data": card("com.example/news", remotes=[{"type": "sse", "url": f"{site.origin}/news/sse"}])},
        {"identifier": "urn:air:example.com:agent", "type": "application/a2a-agent-card+json", "url": "/x"},
    ]})  # fmt: skip
    site.json(
        "/cards/weather",
        card(remotes=[{"type": "streamable-http", "url": f"{site.origin}/weather/mcp"}]),
    )
    cards = server_cards(site.origin, cache=CardCache(), timeout=5)
    assert [c.name for c in cards] == ["com.example/weather", "com.example/news"]
    # a URL with a path: its own /server-card is missing, the catalog's matching card is used
    assert find(f"{site.origin}/news/sse").name == "com.example/news"
    # a bare domain with two cards is ambiguous
    with pytest.raises(CardError, match="lists 2 servers"):
        find(site.origin)


def test_ai_catalog_and_older_well_known_paths(site):
    site.json("/.well-known/ai-catalog.json", {"specVersion": "1.0", "entries": [
        {"identifier": "urn:air:x:mcp:one", "type": "application/mcp-server-card+json", "data": card()}]})  # fmt: skip
    assert find(site.origin).name == "com.example/weather"
    del site.routes["/.well-known/ai-catalog.json"]
    site.json("/.well-known/mcp/server-card.json", card("com.example/old"))
    assert find(site.origin).name == "com.example/old"
    assert site.paths()[-3:] == [
        "/.well-known/ai-catalog.json",
        "/.well-known/mcp/server-card",
        "/.well-known/mcp/server-card.json",
    ]


def test_nothing_found_lists_every_place_tried(site):
    site.routes["/app/server-card"] = (200, {"Content-Type": "text/html"}, b"<html>an app</html>")
    with pytest.raises(CardNotFound) as info:
        find(f"{site.origin}/app")
    assert [u.removeprefix(site.origin) for u in info.value.tried] == [
        "/app/server-card", "/.well-known/mcp/catalog.json", "/.well-known/ai-catalog.json",
        "/.well-known/mcp/server-card", "/.well-known/mcp/server-card.json",
        "/.well-known/mcp-server-card", "/.well-known/mcp.json",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("document", "words"),
    [
        (card(name="no-slash"), "reverse-DNS"),
        (card(version="^1.2.3"), "ranges are not allowed"),
        (card(remotes=[{"type": "websocket", "url": "wss://x"}]), "type 'websocket'"),
        (
            card(
                remotes=[
                    {
                        "type": "sse",
                        "url": "https://{tenant.example.com/mcp",
                        "variables": {"tenant": {}},
                    }
                ]
            ),
            "not closed",
        ),  # fmt: skip
        (card(remotes=[{"type": "sse", "url": "https://{region}.example.com/mcp"}]), "{region}"),
        (
            card(remotes=[{"type": "sse", "url": "https://x/{a-b}", "variables": {}}]),
            "not a variable name",
        ),
        (card(remotes=[{"type": "sse", "url": "ftp://x/mcp"}]), "must start with"),
        (
            card(
                remotes=[
                    {"type": "sse", "url": "https://x/mcp", "headers": [{"name": "Bad Header"}]}
                ]
            ),
            "HTTP header",
        ),
        (
            card(
                remotes=[
                    {
                        "type": "sse",
                        "url": "https://x/mcp",
                        "headers": [{"name": "Authorization", "value": "Bearer {token}"}],
                    }
                ]
            ),
            "{token}",
        ),  # fmt: skip
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_malformed_cards_are_refused_with_words(site, document, words):
    site.routes["/mcp/server-card"] = (
        200,
        {},
        (document if isinstance(document, str) else json.dumps(document)).encode(),
    )
    with pytest.raises(
        CardError, match=words.replace("{", r"\{").replace("}", r"\}").replace("^", r"\^")
    ):
        find(f"{site.origin}/mcp")


def test_not_json_and_too_big_are_refused(site):
    site.routes["/mcp/server-card"] = (200, {}, b"{not json")
    with pytest.raises(CardError, match="not valid JSON"):
        find(f"{site.origin}/mcp")
    site.routes["/mcp/server-card"] = (200, {}, b'{"a": "' + b"x" * (1024 * 1024 + 10) + b'"}')
    with pytest.raises(CardError, match="larger than"):
        find(f"{site.origin}/mcp")


def test_cache_revalidates_with_etag(site):
    site.json("/mcp/server-card", card(), ETag='"v1"')
    cache = CardCache()
    server_card(f"{site.origin}/mcp", cache=cache)
    server_card(f"{site.origin}/mcp", cache=cache)
    assert [h.get("If-None-Match") for _, h in site.seen] == [None, '"v1"']
    site.json("/mcp/server-card", card(), **{"Cache-Control": "public, max-age=3600"})
    cache = CardCache()
    server_card(f"{site.origin}/mcp", cache=cache)
    server_card(f"{site.origin}/mcp", cache=cache)
    assert len(site.seen) == 3  # the fresh one was not asked again


TEMPLATED = card(remotes=[
    {"type": "sse", "url": "https://{tenant}.example.com/sse", "variables": {"tenant": {"isRequired": True}},
     "supportedProtocolVersions": ["2024-11-05"]},
    {"type": "streamable-http", "url": "https://{tenant}.example.com/mcp",
     "variables": {"tenant": {"isRequired": True, "default": "default"}},
     "headers": [
         {"name": "Authorization", "isRequired": True, "isSecret": True, "value": "Bearer {token}",
          "variables": {"token": {"isRequired": True, "isSecret": True}}},
         {"name": "X-Region", "default": "us-east-1", "choices": ["us-east-1", "eu-west-1"]},
     ],
     "supportedProtocolVersions": ["2025-06-18", "2025-11-25"]},
])  # fmt: skip


def test_fill_asks_for_secrets_and_keeps_them_out_of_sight():
    parsed = parse_card(TEMPLATED)
    asked: list[tuple[str, Input]] = []

    def ask(name: str, spec: Input) -> str:
        asked.append((name, spec))
        return "s3cr3t-token"

    endpoint = fill(parsed, values={"tenant": "acme", "X-Region": "eu-west-1"}, ask=ask)
    assert (
        endpoint.url == "https://acme.example.com/mcp" and endpoint.transport == "streamable-http"
    )
    assert endpoint.headers == {"Authorization": "Bearer s3cr3t-token", "X-Region": "eu-west-1"}
    assert [(n, s.secret) for n, s in asked] == [("token", True)]
    assert "s3cr3t" not in repr(endpoint) and "***" in repr(endpoint)
    assert fill(parsed, ask=ask).url == "https://default.example.com/mcp"  # the default
    with pytest.raises(CardError, match="'token' is required") as info:
        fill(parsed)  # a secret nobody gave
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(CardError, match="not one of"):
        fill(parsed, values={"X-Region": "mars-1"}, ask=ask)
    with pytest.raises(CardError, match="control characters") as info:
        fill(parsed, ask=lambda n, s: "tok\r\nX-Evil: 1")
    assert "X-Evil" not in str(info.value)  # a secret's value is never shown


@pytest.mark.parametrize(
    "tenant", ["evil.com/#", "evil.com?", "a@evil.com", "x:1@evil.com", "../.."]
)
def test_a_value_cannot_move_the_request_to_another_host(tenant):
    with pytest.raises(CardError, match="host"):
        fill(parse_card(TEMPLATED), values={"tenant": tenant, "token": "t"})


def test_choose_remote_by_transport_and_version():
    parsed = parse_card(TEMPLATED)
    assert choose_remote(parsed).transport == "streamable-http"
    assert choose_remote(parsed, transport="sse").url.endswith("/sse")
    with pytest.raises(CardError, match="no remote"):
        choose_remote(parsed, transport="sse", protocol_versions=["2025-11-25"])
    with pytest.raises(CardError, match="no remote"):
        choose_remote(parse_card(card(remotes=[{"type": "sse", "url": "https://x/sse",
                                                 "supportedProtocolVersions": ["1999-01-01"]}])))  # fmt: skip


def test_connect_through_the_catalog_reaches_the_server(site, no_leaks):
    with DemoHTTPServer() as demo:
        site.json("/.well-known/mcp/catalog.json", {"specVersion": "draft", "entries": [
            {"identifier": "urn:air:127.0.0.1:demo", "type": "application/mcp-server-card+json", "data": card(
                "io.github.mcpsync/demo", remotes=[{"type": "streamable-http", "url": "{base}/mcp",
                "variables": {"base": {"default": demo.origin}},
                "headers": [{"name": "X-Demo", "default": "from-card"}]}])}]})  # fmt: skip
        mcpsync.cards.CARD_CACHE.clear()
        # without card= a bare URL is the endpoint itself: no card is read
        with pytest.raises(mcpsync.MCPSyncError):
            mcpsync.Session.connect(site.origin, connect_timeout=5, transport="streamable-http")
        assert not any(p.startswith("/.well-known") for p in site.paths())
        with mcpsync.Session.connect(site.origin, card=True, connect_timeout=10) as s:
            assert s.server_info.name  # the runtime's own answer, whatever the card said
            assert [t.name for t in s.list_tools()]
            assert s.transport.kind == "streamable-http"
        assert any(p == "/.well-known/mcp/catalog.json" for p in site.paths())


def test_top_level_names():
    assert mcpsync.server_card is server_card and mcpsync.server_cards is server_cards


def test_cli_inspect_card(site):
    import io

    from mcpsync.cli import main as cli_main

    site.json(
        "/mcp/server-card", TEMPLATED | {"title": "Weather", "icons": [{"src": "javascript:x"}]}
    )
    out, err = io.StringIO(), io.StringIO()
    assert cli_main(["inspect", f"{site.origin}/mcp", "--card"], stdout=out, stderr=err) == 0, (
        err.getvalue()
    )
    text = out.getvalue()
    assert "com.example/weather  1.2.0  (Weather)" in text
    assert "streamable-http  https://{tenant}.example.com/mcp  [2025-06-18, 2025-11-25]" in text
    assert (
        "header     Authorization required secret" in text
        and "variable   {tenant} required default default" in text
    )
    assert "javascript" not in text and "icons" not in text
    assert not any(p == "/mcp" for p in site.paths())  # no session was opened
    out = io.StringIO()
    assert (
        cli_main(["inspect", f"{site.origin}/mcp", "--card", "-o", "json"], stdout=out, stderr=err)
        == 0
    )
    assert json.loads(out.getvalue())["remotes"][1]["headers"][0] == {
        "name": "Authorization", "required": True, "secret": True, "variables": ["token"]}  # fmt: skip
    site.json("/mcp/server-card", card(name="bad"))
    err = io.StringIO()
    assert (
        cli_main(["inspect", f"{site.origin}/mcp", "--card"], stdout=io.StringIO(), stderr=err) == 1
    )
    assert "CardError" in err.getvalue() and "reverse-DNS" in err.getvalue()


def test_connect_card_the_callers_headers_and_transport_win(site):
    from mcpsync.cards import resolve_target

    site.json("/mcp/server-card", TEMPLATED)
    mcpsync.cards.CARD_CACHE.clear()
    target, headers, transport = resolve_target(
        f"{site.origin}/mcp", {"tenant": "acme", "token": "t0k"},
        headers={"X-Region": "eu-west-1"}, transport="auto", timeout=5,
    )  # fmt: skip
    assert target == "https://acme.example.com/mcp" and transport == "streamable-http"
    assert headers == {"Authorization": "Bearer t0k", "X-Region": "eu-west-1"}
    _, _, transport = resolve_target(f"{site.origin}/mcp", {"tenant": "a", "token": "t"},
                                     headers=None, transport="sse", timeout=5)  # fmt: skip
    assert transport == "sse"  # the sse remote, as asked
    with pytest.raises(CardError, match="needs an http"):
        resolve_target(["python", "server.py"], True, headers=None, transport="auto", timeout=5)
