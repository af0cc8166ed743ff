"""Transport selection (mcpsync.transports.select): target -> transports to try, in order."""

from __future__ import annotations

import sys
import time

import pytest

from mcpsync.errors import ConfigError
from mcpsync.transports import select
from mcpsync.transports.http.legacy_sse import LegacySSETransport
from mcpsync.transports.http.streamable import StreamableHTTPTransport
from mcpsync.transports.memory import memory_pair
from mcpsync.transports.stdio import StdioTransport


def test_url_auto_is_streamable_then_legacy_sse() -> None:
    name, factories = select.candidates("http://127.0.0.1:9/mcp", timeout=5.0)
    assert name == "127.0.0.1:9"
    made = [f() for f in factories]
    try:
        assert [type(t) for t in made] == [StreamableHTTPTransport, LegacySSETransport]
        assert all(t.name == "127.0.0.1:9" and t.timeout == 5.0 for t in made)  # type: ignore[attr-defined]
    finally:
        for t in made:
            t.close()


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("streamable-http", [StreamableHTTPTransport]),
        ("http", [StreamableHTTPTransport]),
        ("sse", [LegacySSETransport]),
    ],
)
def test_url_named_transport(kind: str, expected: list[type]) -> None:
    _, factories = select.candidates("http://127.0.0.1:9/mcp", transport=kind, name="srv")
    made = [f() for f in factories]
    try:
        assert [type(t) for t in made] == expected
        assert made[0].name == "srv"
    finally:
        for t in made:
            t.close()


def test_url_with_stdio_transport_is_refused() -> None:
    with pytest.raises(ConfigError, match="does not fit a URL"):
        select.candidates("http://127.0.0.1:9/mcp", transport="stdio")


def test_legacy_fallback_gets_what_is_left_of_the_deadline() -> None:
    deadline = time.monotonic() + 2.0
    factories = select.http_candidates(
        "http://127.0.0.1:9/sse", "auto", deadline, connect_timeout=10.0
    )
    legacy = factories[1]()
    try:
        assert isinstance(legacy, LegacySSETransport)
        assert legacy.connect_timeout is not None and 0 < legacy.connect_timeout <= 2.0
    finally:
        legacy.close()


def test_argv_is_one_stdio_transport_named_by_argv_name() -> None:
    argv = [sys.executable, "-c", "pass"]
    name, factories = select.candidates(argv, argv_name=lambda a: "the-script", env={"A": "1"})
    assert name == "the-script"
    assert len(factories) == 1
    transport = factories[0]()
    assert isinstance(transport, StdioTransport) and transport.name == "the-script"
    transport.close()  # never started: nothing to stop
    assert select.candidates(argv, name="mine")[0] == "mine"


def test_a_transport_is_used_as_given() -> None:
    client, _server = memory_pair()
    name, factories = select.candidates(client, name=None)
    assert factories[0]() is client
    assert name == (getattr(client, "name", None) or client.kind)


@pytest.mark.parametrize("target", [42, [], "not a url", ("x",)])
def test_anything_else_is_a_config_error(target: object) -> None:
    transport = "sse" if target == ("x",) else "auto"
    with pytest.raises(ConfigError, match="cannot connect"):
        select.candidates(target, transport=transport)
