"""The 2026-07-28 (modern) era against scripted servers over the in-memory pair.

Era decisions (probe, fallback, verdict cache), the per-request envelope, multi
round-trip requests, -32022 and -32020 retries, the tasks extension, cache hints,
subscriptions/listen, and the HTTP header helpers.
"""

from __future__ import annotations

import base64
import itertools
import queue
import threading
import time
from typing import Any

import pytest
from fakes import FakeServer

import mcpsync
from mcpsync.errors import (
    CapabilityError,
    ConfigError,
    HandshakeError,
    ProtocolError,
    RequestCancelled,
    ServerError,
    TransportError,
    VersionMismatch,
)
from mcpsync.protocol import choose
from mcpsync.protocol.choose import Caches, server_identity
from mcpsync.protocol.modern.cache import HintCache
from mcpsync.protocol.modern.envelope import (
    CLIENT_CAPABILITIES_KEY,
    CLIENT_INFO_KEY,
    DEFAULT_MAX_ROUNDS,
    LOG_LEVEL_KEY,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
    SUBSCRIPTION_ID_KEY,
    TASKS_EXTENSION,
    InputRequiredRoundsExceeded,
    InvalidToolHeaders,
)
from mcpsync.transports.base import Features
from mcpsync.transports.http.headers import (
    encode_header_value,
    header_declarations,
    param_headers,
    standard_headers,
)

MODERN = "2026-07-28"
_identities = itertools.count(1)


def discover_result(versions=(MODERN,), capabilities=None, **extra: Any) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "supportedVersions": list(versions),
        "capabilities": {"tools": {}} if capabilities is None else capabilities,
        "instructions": "be nice",
        "_meta": {SERVER_INFO_KEY: {"name": "fake-modern", "version": "9"}},
        **extra,
    }


def modern_fake(
    handlers: dict[str, Any] | None = None, capabilities=None, **kwargs: Any
) -> FakeServer:
    all_handlers = {"server/discover": lambda m: discover_result(capabilities=capabilities)}
    all_handlers.update(handlers or {})
    return FakeServer(handlers=all_handlers, **kwargs)


def connect(server: FakeServer, **kwargs: Any) -> mcpsync.Session:
    kwargs.setdefault("_caches", _caches)
    return mcpsync.Session.connect(server.transport, timeout=5, connect_timeout=5, **kwargs)


def methods(server: FakeServer) -> list[str]:
    return [m["method"] for m in server.log if "method" in m]


def error(code: int, message: str = "no", data: Any = None) -> dict[str, Any]:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return err


def reply_error(server: FakeServer, message: dict[str, Any], err: dict[str, Any]) -> None:
    server.send({"jsonrpc": "2.0", "id": message["id"], "error": err})


_caches = Caches()


@pytest.fixture(autouse=True)
def caches() -> Caches:
    """Fresh era-verdict and hint caches for each test: every connect() below gets them."""
    global _caches
    _caches = Caches()
    return _caches


def text_result(text: str, **extra: Any) -> dict[str, Any]:
    return {"resultType": "complete", "content": [{"type": "text", "text": text}], **extra}


# -- choosing the era --------------------------------------------------------------------------


def test_auto_goes_modern_when_discover_answers(no_leaks):
    server = modern_fake(capabilities={"tools": {"listChanged": True}, "resources": {}})
    with connect(server, elicitation_handler=lambda p: {}, roots=["file:///w"]) as s:
        assert (s.era, s.protocol_version) == ("modern", MODERN)
        assert "server/discover answered" in s.era_reason
        assert s.server_info.name == "fake-modern" and s.server_info.version == "9"
        assert s.server_capabilities.tools.list_changed is True
        assert s.instructions == "be nice"
        assert "discover" in s.phases and "initialize" not in s.phases
        probe = server.expect("server/discover")
        meta = probe["params"]["_meta"]
        assert meta[PROTOCOL_VERSION_KEY] == MODERN
        assert meta[CLIENT_INFO_KEY]["name"] == "mcpsync"
        assert meta[CLIENT_CAPABILITIES_KEY] == {
            "roots": {},
            "elicitation": {"form": {}, "url": {}},
            "extensions": {TASKS_EXTENSION: {}},
        }
    assert "initialize" not in methods(server)


def test_auto_falls_back_to_initialize_on_a_legacy_error(no_leaks):
    server = FakeServer(handlers={"tools/list": lambda m: {"tools": []}})  # server/discover: -32601
    with connect(server) as s:
        assert (s.era, s.protocol_version) == ("legacy", "2025-11-25")
        assert "-32601" in s.era_reason and "legacy" in s.era_reason
        s.list_tools()
    assert methods(server)[:3] == ["server/discover", "initialize", "notifications/initialized"]
    tools_list = next(m for m in server.log if m.get("method") == "tools/list")
    assert PROTOCOL_VERSION_KEY not in (tools_list.get("params") or {}).get("_meta", {})


def test_auto_falls_back_when_the_probe_gets_no_answer(no_leaks, monkeypatch):
    monkeypatch.setattr(choose, "DEFAULT_PROBE_TIMEOUT", 0.3)
    server = FakeServer(handlers={"server/discover": lambda m: None})  # a silent legacy server
    with connect(server) as s:
        assert s.era == "legacy"
        assert "no answer to server/discover within 0.3 s" in s.era_reason
    assert server.ended.wait(10)  # the server's end has handled all the client sent
    probe = next(m for m in server.log if m.get("method") == "server/discover")
    cancelled = [m for m in server.log if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancelled] == [probe["id"]]


def test_unsupported_version_naming_a_modern_version_probes_again(no_leaks):
    calls = []

    def discover(message):
        calls.append(message)
        if len(calls) == 1:
            reply_error(
                server,
                message,
                error(
                    -32022,
                    "Unsupported protocol version",
                    {"supported": [MODERN, "2025-11-25"], "requested": "x"},
                ),
            )
            return None
        return discover_result()

    server = FakeServer(handlers={"server/discover": discover})
    with connect(server) as s:
        assert s.era == "modern"
        assert "-32022" in s.era_reason
    assert len(calls) == 2 and calls[0]["id"] != calls[1]["id"]
    assert "initialize" not in methods(server)


def test_unsupported_version_naming_only_legacy_versions_falls_back(no_leaks):
    def discover(message):
        reply_error(
            server, message, error(-32022, "no", {"supported": ["2025-06-18"], "requested": MODERN})
        )

    server = FakeServer(version="2025-06-18", handlers={"server/discover": discover})
    with connect(server) as s:
        assert (s.era, s.protocol_version) == ("legacy", "2025-06-18")
        assert "supports only 2025-06-18" in s.era_reason


def test_unsupported_version_naming_nothing_we_speak_fails(no_leaks):
    def discover(message):
        reply_error(
            server, message, error(-32022, "no", {"supported": ["2099-01-01"], "requested": MODERN})
        )

    server = FakeServer(handlers={"server/discover": discover})
    with pytest.raises(VersionMismatch, match="2099-01-01"):
        connect(server)
    assert "initialize" not in methods(server)
    with pytest.raises(TransportError):  # the client hung up
        server.client_end.send({"jsonrpc": "2.0", "method": "x"})


def test_discover_listing_only_legacy_versions_means_legacy(no_leaks):
    server = FakeServer(
        handlers={"server/discover": lambda m: discover_result(versions=["2025-11-25"])}
    )
    with connect(server) as s:
        assert s.era == "legacy"
        assert "lists no modern version" in s.era_reason


def test_forced_modern_against_a_legacy_server_fails_without_initialize(no_leaks):
    server = FakeServer()
    with pytest.raises(HandshakeError, match="does not speak 2026-07-28"):
        connect(server, era="modern")
    assert "initialize" not in methods(server)


def test_forced_legacy_and_pinned_versions(no_leaks):
    server = modern_fake()
    with connect(server, era="legacy") as s:
        assert s.era == "legacy" and "era='legacy'" in s.era_reason
    assert "server/discover" not in methods(server)
    server = modern_fake()
    with connect(server, protocol_version="2025-06-18") as s:
        assert s.era == "legacy"
    assert server.expect("initialize")["params"]["protocolVersion"] == "2025-06-18"
    assert "server/discover" not in methods(server)
    server = modern_fake()
    with connect(server, protocol_version=MODERN) as s:
        assert s.era == "modern" and "pinned" in s.era_reason
    never_started = ["no-such-server-is-started"]  # the arguments are refused before any start
    with pytest.raises(ConfigError, match="modern era"):
        mcpsync.Session.connect(never_started, era="legacy", protocol_version=MODERN)
    with pytest.raises(ConfigError, match="unknown protocol version"):
        mcpsync.Session.connect(never_started, protocol_version="1999-01-01")
    with pytest.raises(ConfigError, match="era must be"):
        mcpsync.Session.connect(never_started, era="future")


def test_verdict_is_remembered_per_server(no_leaks):
    identity = f"legacy-{next(_identities)}"
    first = FakeServer()
    first.client_end.identity = identity
    with connect(first) as s:
        assert s.era == "legacy"
    second = FakeServer()
    second.client_end.identity = identity
    with connect(second) as s:
        assert s.era == "legacy" and "remembered" in s.era_reason
    assert "server/discover" not in methods(second)
    other = FakeServer()
    other.client_end.identity = f"other-{next(_identities)}"
    with connect(other):
        pass
    assert "server/discover" in methods(other)


class ModernOnly(FakeServer):
    """A modern-only server: initialize is answered with -32022 naming its versions."""

    def _on_message(self, message):
        if message.get("method") == "initialize":
            self.log.append(message)
            self.received.put(message)
            reply_error(
                self,
                message,
                error(
                    -32022,
                    "initialize is not supported",
                    {"supported": [MODERN], "requested": "2025-11-25"},
                ),
            )
            return
        super()._on_message(message)


def test_remembered_legacy_verdict_is_reprobed_when_initialize_says_modern(no_leaks, caches):
    server = ModernOnly(handlers={"server/discover": lambda m: discover_result()})
    server.client_end.identity = f"changed-{next(_identities)}"
    key, _ = server_identity(server.transport)
    caches.verdicts.remember(key, "legacy")
    with connect(server) as s:
        assert s.era == "modern"
    assert methods(server)[:2] == ["initialize", "server/discover"]
    assert caches.verdicts.era(key) == "modern"


def test_slow_modern_server_locked_in_by_a_late_probe(no_leaks, monkeypatch):
    monkeypatch.setattr(choose, "DEFAULT_PROBE_TIMEOUT", 0.2)
    seen = []

    def discover(message):
        seen.append(message)
        return None if len(seen) == 1 else discover_result()  # too slow the first time

    server = ModernOnly(handlers={"server/discover": discover})
    with connect(server) as s:
        assert s.era == "modern"
        assert "initialize answered -32022" in s.era_reason
    # initialize went out beside the unanswered probe; its -32022 says modern: the first
    # probe is given up (the server is told) and a second one is answered
    assert methods(server)[:4] == [
        "server/discover", "initialize", "notifications/cancelled", "server/discover",
    ]  # fmt: skip
    cancelled = next(m for m in server.log if m.get("method") == "notifications/cancelled")
    assert cancelled["params"]["requestId"] == seen[0]["id"]


# -- the modern wire -----------------------------------------------------------------------------


def test_every_request_carries_the_envelope(no_leaks):
    server = modern_fake(handlers={"tools/list": lambda m: {"resultType": "complete", "tools": []}})
    with connect(server, client_info={"name": "me", "version": "2"}) as s:
        s.list_tools()
        s.ping()
    sent = [m for m in server.log if "id" in m and "method" in m]
    assert [m["method"] for m in sent] == [
        "server/discover",
        "tools/list",
        "server/discover",
    ]  # ping = discover
    for message in sent:
        meta = message["params"]["_meta"]
        assert meta[PROTOCOL_VERSION_KEY] == MODERN
        assert meta[CLIENT_INFO_KEY] == {"name": "me", "version": "2"}
        assert meta[CLIENT_CAPABILITIES_KEY] == {"extensions": {TASKS_EXTENSION: {}}}
        assert LOG_LEVEL_KEY not in meta


def test_log_level_travels_with_each_request_instead_of_set_level(no_leaks):
    logs = []
    server = modern_fake(
        capabilities={"tools": {}, "logging": {}},
        handlers={
            "tools/call": lambda m: (
                server.notify("notifications/message", {"level": "info", "data": "hi"}),
                text_result("ok"),
            )[1]
        },
    )
    with connect(server, on_log=logs.append) as s:
        s.set_logging_level("info")
        s.call_tool("x", {})
        s.ping()
    assert "logging/setLevel" not in methods(server)
    call = next(m for m in server.log if m.get("method") == "tools/call")
    assert call["params"]["_meta"][LOG_LEVEL_KEY] == "info"
    ping = [m for m in server.log if m.get("method") == "server/discover"][-1]
    assert LOG_LEVEL_KEY not in ping["params"]["_meta"]
    assert [entry.data for entry in logs] == ["hi"]


STATE = 'opaque "state" \\u00e9 é 🚀 \n  '


def test_input_required_is_fulfilled_and_retried_with_state(no_leaks):
    asked = []
    calls = []

    def call(message):
        calls.append(message)
        params = message["params"]
        if "inputResponses" not in params:
            return {
                "resultType": "input_required",
                "inputRequests": {
                    "who": {
                        "method": "elicitation/create",
                        "params": {
                            "mode": "form",
                            "message": "Name?",
                            "requestedSchema": {
                                "type": "object",
                                "properties": {"name": {"type": "string"}},
                            },
                        },
                    },
                    "where": {"method": "roots/list", "params": {}},
                },
                "requestState": STATE,
            }
        return text_result("done")

    def elicit(params):
        asked.append(params.message)
        return {"action": "accept", "content": {"name": "Ann"}}

    server = modern_fake(handlers={"tools/call": call})
    with connect(server, elicitation_handler=elicit, roots=["file:///w"]) as s:
        result = s.call_tool("greet", {"x": 1})
    assert result.content[0].text == "done" and asked == ["Name?"]
    first, retry = calls
    assert first["id"] != retry["id"]
    assert retry["params"]["name"] == "greet" and retry["params"]["arguments"] == {"x": 1}
    assert retry["params"]["requestState"] == STATE
    assert retry["params"]["inputResponses"] == {
        "who": {"action": "accept", "content": {"name": "Ann"}},
        "where": {"roots": [{"uri": "file:///w"}]},
    }
    raw = [m for m in server.log if m.get("id") == retry["id"]]
    assert raw and raw[0]["params"]["requestState"] == STATE


def test_no_request_state_means_none_in_the_retry_and_missing_result_type_is_complete(no_leaks):
    calls = []

    def call(message):
        calls.append(message)
        name = message["params"]["name"]
        if name == "plain":
            return {"content": [{"type": "text", "text": "no resultType"}]}
        if "inputResponses" not in message["params"]:
            return {
                "resultType": "input_required",
                "inputRequests": {
                    "k": {
                        "method": "elicitation/create",
                        "params": {
                            "message": "ok?",
                            "requestedSchema": {"type": "object", "properties": {}},
                        },
                    }
                },
            }
        return text_result("fine")

    server = modern_fake(handlers={"tools/call": call})
    with connect(server, elicitation_handler=lambda p: {"action": "decline"}) as s:
        assert s.call_tool("plain").content[0].text == "no resultType"
        assert s.call_tool("nostate").content[0].text == "fine"
    assert len(calls) == 3
    assert "requestState" not in calls[2]["params"]
    assert calls[2]["params"]["inputResponses"] == {"k": {"action": "decline"}}


def test_state_only_rounds_retry_without_input(no_leaks):
    calls = []

    def read(message):
        calls.append(message)
        if len(calls) < 3:
            return {"resultType": "input_required", "requestState": f"s{len(calls)}"}
        return {"resultType": "complete", "contents": [{"uri": "a://b", "text": "t"}]}

    server = modern_fake(capabilities={"resources": {}}, handlers={"resources/read": read})
    with connect(server) as s:
        assert s.read_resource("a://b").contents[0].text == "t"
    assert [c["params"].get("requestState") for c in calls] == [None, "s1", "s2"]
    assert all("inputResponses" not in c["params"] for c in calls)


def test_round_limit(no_leaks):
    calls = []

    def call(message):
        calls.append(message)
        return {
            "resultType": "input_required",
            "inputRequests": {"again": {"method": "roots/list", "params": {}}},
            "requestState": "s",
        }

    server = modern_fake(handlers={"tools/call": call})
    with connect(server, roots=[]) as s:
        with pytest.raises(InputRequiredRoundsExceeded, match="10 rounds"):
            s.call_tool("loop")
    assert len(calls) == DEFAULT_MAX_ROUNDS + 1


def test_input_required_where_not_allowed_and_unknown_result_types_are_errors(no_leaks):
    server = modern_fake(
        handlers={
            "tools/list": lambda m: {"resultType": "input_required", "requestState": "x"},
            "tools/call": lambda m: {"resultType": "mystery", "content": []},
        }
    )
    with connect(server) as s:
        with pytest.raises(ProtocolError, match="input_required"):
            s.list_tools()
        with pytest.raises(ProtocolError, match="mystery"):
            s.call_tool("x")


def test_input_for_an_undeclared_capability_is_refused(no_leaks):
    server = modern_fake(
        handlers={
            "tools/call": lambda m: {
                "resultType": "input_required",
                "inputRequests": {
                    "s": {
                        "method": "sampling/createMessage",
                        "params": {"messages": [], "maxTokens": 5},
                    }
                },
            }
        }
    )
    with connect(server) as s:
        with pytest.raises(CapabilityError, match="sampling/createMessage"):
            s.call_tool("x")
    assert methods(server).count("tools/call") == 1


def test_submit_runs_further_rounds_on_a_named_thread(no_leaks):
    threads = []

    def call(message):
        if "inputResponses" not in message["params"]:
            return {
                "resultType": "input_required",
                "inputRequests": {"r": {"method": "roots/list", "params": {}}},
            }
        return text_result("async done")

    def roots():
        threads.append(threading.current_thread().name)
        return ["file:///a"]

    server = modern_fake(handlers={"tools/call": call})
    with connect(server, roots=roots) as s:
        future = s.submit_call_tool("x")
        assert future.result(timeout=5).content[0].text == "async done"
        plain = modern_fake(handlers={"tools/call": lambda m: text_result("one shot")})
        with connect(plain) as p:
            assert p.submit_call_tool("y").result(timeout=5).content[0].text == "one shot"
    assert threads and threads[0].startswith("mcpsync-modern[")


def test_get_prompt_through_input_required(no_leaks):
    def get(message):
        if "inputResponses" not in message["params"]:
            return {
                "resultType": "input_required",
                "inputRequests": {"r": {"method": "roots/list", "params": {}}},
            }
        return {
            "resultType": "complete",
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        }

    server = modern_fake(capabilities={"prompts": {}}, handlers={"prompts/get": get})
    with connect(server, roots=[]) as s:
        assert s.get_prompt("p").messages[0].content.text == "hi"


def test_unsupported_version_mid_session_is_retried_once(no_leaks):
    calls = []

    def call(message):
        calls.append(message)
        if message["params"]["name"] == "twice" or len(calls) == 1:
            reply_error(
                server,
                message,
                error(
                    -32022,
                    "Unsupported protocol version",
                    {"supported": [MODERN], "requested": MODERN},
                ),
            )
            return None
        return text_result("ok")

    server = modern_fake(handlers={"tools/call": call})
    with connect(server) as s:
        assert s.call_tool("once").content[0].text == "ok"
        with pytest.raises(ServerError) as info:
            s.call_tool("twice")
        assert info.value.code == -32022
        assert s.submit_call_tool("once").result(timeout=5).content[0].text == "ok"
    assert [c["params"]["name"] for c in calls] == ["once", "once", "twice", "twice", "once"]
    assert len({c["id"] for c in calls}) == 5


def test_header_mismatch_relists_and_retries_once(no_leaks):
    lists = []
    calls = []

    def call(message):
        calls.append(message)
        if len(calls) in (1, 3, 4):
            reply_error(server, message, error(-32020, "Header mismatch"))
            return None
        return text_result("ok")

    def tools(message):
        lists.append(message)
        return {
            "resultType": "complete",
            "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
        }

    server = modern_fake(handlers={"tools/call": call, "tools/list": tools})
    with connect(server) as s:
        assert s.call_tool("t").content[0].text == "ok"
        assert len(lists) == 1
        with pytest.raises(ServerError) as info:
            s.call_tool("t")
        assert info.value.code == -32020
    assert len(lists) == 2 and len(calls) == 4


# -- tasks extension -----------------------------------------------------------------------------


def task(status: str, **extra: Any) -> dict[str, Any]:
    return {"taskId": "task-1", "status": status, "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttlMs": 60000, "pollIntervalMs": 10, **extra}  # fmt: skip


def test_a_task_is_polled_fed_input_and_resolved(no_leaks):
    states = iter([
        task("working"),
        task("input_required", inputRequests={"confirm": {"method": "elicitation/create", "params": {"message": "go?", "requestedSchema": {"type": "object", "properties": {}}}}}),
        task("input_required", inputRequests={"confirm": {"method": "elicitation/create", "params": {"message": "go?", "requestedSchema": {"type": "object", "properties": {}}}}}),
        task("completed", result={"content": [{"type": "text", "text": "task done"}], "isError": False}),
    ])  # fmt: skip
    updates = []
    asked = []
    server = modern_fake(
        handlers={
            "tools/call": lambda m: {"resultType": "task", **task("working")},
            "tasks/get": lambda m: {"resultType": "complete", **next(states)},
            "tasks/update": lambda m: (updates.append(m["params"]), {"resultType": "complete"})[1],
        }
    )
    with connect(
        server,
        elicitation_handler=lambda p: (
            asked.append(p.message),
            {"action": "accept", "content": {}},
        )[1],
    ) as s:
        result = s.call_tool("slow")
    assert result.content[0].text == "task done"
    assert asked == ["go?"]  # the same key seen twice is answered once
    assert updates == [
        {
            "taskId": "task-1",
            "inputResponses": {"confirm": {"action": "accept", "content": {}}},
            "_meta": updates[0]["_meta"],
        }
    ]
    gets = [m for m in server.log if m.get("method") == "tasks/get"]
    assert len(gets) == 4 and all(g["params"]["taskId"] == "task-1" for g in gets)


def test_failed_and_cancelled_tasks(no_leaks):
    outcome = {}
    server = modern_fake(
        handlers={
            "tools/call": lambda m: {"resultType": "task", **task("working")},
            "tasks/get": lambda m: {"resultType": "complete", **outcome["next"]},
        }
    )
    with connect(server) as s:
        outcome["next"] = task(
            "failed", error={"code": -32000, "message": "boom", "data": {"why": 1}}
        )
        with pytest.raises(ServerError) as info:
            s.call_tool("x")
        assert (info.value.code, info.value.message, info.value.data) == (
            -32000,
            "boom",
            {"why": 1},
        )
        outcome["next"] = task("cancelled", statusMessage="operator said no")
        with pytest.raises(RequestCancelled, match="operator said no"):
            s.call_tool("x")


def test_cancelling_a_task_future_sends_tasks_cancel(no_leaks):
    polled = threading.Event()
    cancels: queue.Queue = queue.Queue()

    def get(message):
        polled.set()
        return {"resultType": "complete", **task("working", pollIntervalMs=50)}

    server = modern_fake(
        handlers={
            "tools/call": lambda m: {"resultType": "task", **task("working", pollIntervalMs=50)},
            "tasks/get": get,
            "tasks/cancel": lambda m: (
                cancels.put(m["params"]["taskId"]),
                {"resultType": "complete"},
            )[1],
        }
    )
    with connect(server) as s:
        future = s.submit_call_tool("forever")
        assert polled.wait(5)
        assert future.task_id == "task-1"
        assert future.cancel()
        assert cancels.get(timeout=5) == "task-1"
        assert future.cancelled()


def test_tasks_are_not_accepted_on_other_methods(no_leaks):
    server = modern_fake(
        capabilities={"prompts": {}},
        handlers={"prompts/get": lambda m: {"resultType": "task", **task("working")}},
    )
    with connect(server) as s:
        with pytest.raises(ProtocolError, match="'task'"):
            s.get_prompt("p")


# -- cache hints ----------------------------------------------------------------------------------


def test_hint_cache_scopes_and_lifetimes():
    cache = HintCache()
    private = {"resultType": "complete", "tools": [1], "ttlMs": 60000, "cacheScope": "private"}
    public = {"resultType": "complete", "tools": [2], "ttlMs": 60000, "cacheScope": "public"}
    assert cache.put("srv", "alice", "tools/list", {"cursor": "a"}, private)
    assert cache.get("srv", "alice", "tools/list", {"cursor": "a", "_meta": {"x": 1}}) == private
    assert (
        cache.get("srv", "bob", "tools/list", {"cursor": "a"}) is None
    )  # never across credentials
    assert (
        cache.get("srv", "alice", "tools/list", {"cursor": "b"}) is None
    )  # params are part of the key
    assert cache.get("other", "alice", "tools/list", {"cursor": "a"}) is None
    assert cache.put("srv", "alice", "prompts/list", None, public)
    assert cache.get("srv", "bob", "prompts/list", None) == public  # public is shared
    assert cache.get("srv", None, "prompts/list", None) == public
    assert not cache.put("srv", None, "resources/list", None, private)  # private needs a credential
    assert not cache.put("srv", "alice", "tools/list", {"cursor": "a"}, {**private, "ttlMs": 0})
    assert (
        cache.get("srv", "alice", "tools/list", {"cursor": "a"}) is None
    )  # a stale answer replaced it
    assert not cache.put("srv", "alice", "x", None, {"ttlMs": -5})
    assert not cache.put("srv", "alice", "x", None, {"ttlMs": True})
    got = cache.get("srv", "bob", "prompts/list", None)
    got["tools"].append(3)
    assert cache.get("srv", "bob", "prompts/list", None) == public  # callers cannot change entries
    cache.invalidate("srv", ["prompts/list"])
    assert cache.get("srv", "bob", "prompts/list", None) is None


def test_hint_cache_expires(monkeypatch):
    cache = HintCache()
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    cache.put("s", "c", "tools/list", None, {"ttlMs": 1500})
    now[0] += 1.4
    assert cache.get("s", "c", "tools/list", None) is not None
    now[0] += 0.2
    assert cache.get("s", "c", "tools/list", None) is None


def test_list_caches_follow_ttl_and_list_changed(no_leaks):
    lists = []

    def tools(message):
        lists.append(message)
        return {
            "resultType": "complete",
            "tools": [{"name": f"t{len(lists)}", "inputSchema": {"type": "object"}}],
            "ttlMs": 60000,
            "cacheScope": "private",
        }

    server = modern_fake(
        handlers={
            "tools/list": tools,
            "prompts/list": lambda m: {"resultType": "complete", "prompts": [], "ttlMs": 0},
        },
        capabilities={"tools": {}, "prompts": {}},
    )
    server.client_end.identity = f"cache-{next(_identities)}"
    with connect(server) as s:
        assert [t.name for t in s.list_tools()] == ["t1"]
        assert [t.name for t in s.list_tools()] == ["t1"] and len(lists) == 1  # fresh
        s.list_prompts()
        s.list_prompts()
        assert methods(server).count("prompts/list") == 2  # ttlMs 0: immediately stale
        changed = threading.Event()
        s.on_notification(
            lambda method, params: changed.set() if method.endswith("list_changed") else None
        )
        server.notify("notifications/tools/list_changed")
        assert changed.wait(5)
        assert [t.name for t in s.list_tools()] == ["t2"]
        assert [t.name for t in s.list_tools()] == ["t2"] and len(lists) == 2
        assert [t.name for t in s.list_tools(refresh=True)] == ["t3"]  # refresh bypasses the cache
    server2 = modern_fake(handlers={"tools/list": tools})
    server2.client_end.identity = server.client_end.identity
    with connect(server2) as s:
        assert [t.name for t in s.list_tools()] == [
            "t3"
        ]  # same server and credential: served from cache
    assert "tools/list" not in methods(server2)


# -- subscriptions/listen ---------------------------------------------------------------------------


class ListenFake:
    """Records listen requests; acknowledges them with the honored filter."""

    def __init__(self, server_factory=modern_fake, honor_uris: bool = True) -> None:
        self.listens: queue.Queue = queue.Queue()
        self.honor_uris = honor_uris
        self.server = server_factory(
            capabilities={
                "tools": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True},
            },
            handlers={"subscriptions/listen": self.listen},
        )

    def listen(self, message):
        wanted = dict(message["params"]["notifications"])
        if not self.honor_uris:
            wanted.pop("resourceSubscriptions", None)
        self.server.notify(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION_ID_KEY: message["id"]}, "notifications": wanted},
        )
        self.listens.put(message)
        return None  # the stream stays open

    def send(self, method: str, subscription: Any, **params: Any) -> None:
        self.server.notify(method, {"_meta": {SUBSCRIPTION_ID_KEY: subscription}, **params})


def test_resource_updates_arrive_on_a_listen_stream(no_leaks):
    fake = ListenFake()
    updates: queue.Queue = queue.Queue()
    with connect(fake.server) as s:
        s.subscribe_resource("file:///a", updates.put)
        first = fake.listens.get(timeout=5)
        assert first["params"]["notifications"] == {"resourceSubscriptions": ["file:///a"]}
        assert "resources/subscribe" not in methods(fake.server)
        fake.send("notifications/resources/updated", first["id"], uri="file:///a")
        assert updates.get(timeout=5) == "file:///a"
        changed: queue.Queue = queue.Queue()
        s.on_tools_changed(lambda: changed.put("tools"))
        second = fake.listens.get(timeout=5)
        assert second["params"]["notifications"] == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["file:///a"],
        }
        cancelled = fake.server.expect("notifications/cancelled")
        assert cancelled["params"]["requestId"] == first["id"]  # the old stream is left
        marker = threading.Event()
        s.on_notification(
            lambda method, params: marker.set() if method == "notifications/marker" else None
        )
        fake.send(
            "notifications/tools/list_changed", first["id"]
        )  # from the stream we left: dropped
        fake.send("notifications/tools/list_changed", second["id"])
        fake.send("notifications/marker", second["id"])
        assert marker.wait(5)
        assert changed.qsize() == 1
        s.unsubscribe_resource("file:///a")
        third = fake.listens.get(timeout=5)
        assert third["params"]["notifications"] == {"toolsListChanged": True}


def test_unhonored_resource_subscription_raises(no_leaks):
    fake = ListenFake(honor_uris=False)
    with connect(fake.server) as s:
        with pytest.raises(CapabilityError, match="did not agree"):
            s.subscribe_resource("file:///nope", lambda uri: None)
        # forgotten: subscribing again asks the server again (and is refused again)
        with pytest.raises(CapabilityError, match="did not agree"):
            s.subscribe_resource("file:///nope", lambda uri: None)


def test_listen_stream_that_ends_gracefully_is_not_reopened(no_leaks):
    fake = ListenFake()
    with connect(fake.server) as s:
        s.on_resources_changed(lambda: None)
        listen = fake.listens.get(timeout=5)
        fake.server.reply(
            listen["id"], {"resultType": "complete", "_meta": {SUBSCRIPTION_ID_KEY: listen["id"]}}
        )
        with pytest.raises(queue.Empty):
            fake.listens.get(timeout=0.5)


# -- HTTP header helpers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
        ("a\tb", "=?base64?" + base64.b64encode(b"a\tb").decode() + "?="),
        ("has inner spaces", "has inner spaces"),
        ("", ""),
    ],
)
def test_header_value_encoding(value, expected):
    assert encode_header_value(value) == expected


def test_standard_headers():
    meta = {PROTOCOL_VERSION_KEY: MODERN}
    assert standard_headers({"method": "tools/call", "params": {"name": "get_weather", "_meta": meta}}) == {
        "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "get_weather",
    }  # fmt: skip
    assert (
        standard_headers(
            {"method": "resources/read", "params": {"uri": "file:///a b", "_meta": meta}}
        )["Mcp-Name"]
        == "file:///a b"
    )
    assert (
        standard_headers({"method": "prompts/get", "params": {"name": "é", "_meta": meta}})[
            "Mcp-Name"
        ]
        == "=?base64?w6k=?="
    )
    assert (
        standard_headers({"method": "tasks/get", "params": {"taskId": "t-1", "_meta": meta}})[
            "Mcp-Name"
        ]
        == "t-1"
    )
    assert "Mcp-Name" not in standard_headers({"method": "tools/list", "params": {"_meta": meta}})
    assert standard_headers({"method": "tools/list", "params": {}}) == {}  # legacy traffic
    assert (
        standard_headers({"method": "initialize", "params": {"protocolVersion": "2025-11-25"}})
        == {}
    )


INVALID_TOOLS = {
    "empty": {"value": {"type": "string", "x-mcp-header": ""}},
    "object": {"data": {"type": "object", "x-mcp-header": "Data"}},
    "array": {"items": {"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"}},
    "null": {"nil": {"type": "null", "x-mcp-header": "Nil"}},
    "number": {"score": {"type": "number", "x-mcp-header": "Score"}},
    "untyped": {"v": {"x-mcp-header": "V"}},
    "duplicate": {
        "a": {"type": "string", "x-mcp-header": "Region"},
        "b": {"type": "string", "x-mcp-header": "Region"},
    },
    "duplicate-case": {
        "a": {"type": "string", "x-mcp-header": "MyField"},
        "b": {"type": "string", "x-mcp-header": "myfield"},
    },
    "space": {"value": {"type": "string", "x-mcp-header": "My Region"}},
    "colon": {"value": {"type": "string", "x-mcp-header": "Region:Primary"}},
    "non-ascii": {"value": {"type": "string", "x-mcp-header": "Région"}},
    "control": {"value": {"type": "string", "x-mcp-header": "Region\t1"}},
    "in-items": {
        "list": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"r": {"type": "string", "x-mcp-header": "R"}},
            },
        }
    },
}


@pytest.mark.parametrize("case", sorted(INVALID_TOOLS))
def test_invalid_header_declarations(case):
    with pytest.raises(InvalidToolHeaders):
        header_declarations({"type": "object", "properties": INVALID_TOOLS[case]})


def test_header_declarations_elsewhere_in_the_schema_are_invalid():
    for schema in (
        {
            "type": "object",
            "anyOf": [{"properties": {"r": {"type": "string", "x-mcp-header": "R"}}}],
        },
        {
            "type": "object",
            "$defs": {"d": {"type": "string", "x-mcp-header": "D"}},
            "properties": {"p": {"$ref": "#/$defs/d"}},
        },
        {"type": "string", "x-mcp-header": "Root"},
    ):
        with pytest.raises(InvalidToolHeaders):
            header_declarations(schema)


def test_valid_header_declarations_and_param_headers():
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "nested": {
                "type": "object",
                "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
            },
            "x-mcp-header": {"type": "string"},  # a property with that name is not an annotation
            "query": {"type": "string", "default": {"x-mcp-header": "not a declaration"}},
        },
    }
    decls = header_declarations(schema)
    assert decls == {
        "Region": (("region",), "string"),
        "Priority": (("priority",), "integer"),
        "Verbose": (("verbose",), "boolean"),
        "Zone": (("nested", "zone"), "string"),
    }
    headers = param_headers(
        decls,
        {
            "region": "Hello, 世界",
            "priority": 42,
            "verbose": False,
            "nested": {"zone": "z1"},
            "query": "q",
        },
    )
    assert headers == {
        "Mcp-Param-Region": "=?base64?SGVsbG8sIOS4lueVjA==?=",
        "Mcp-Param-Priority": "42",
        "Mcp-Param-Verbose": "false",
        "Mcp-Param-Zone": "z1",
    }
    assert param_headers(decls, {"region": None, "priority": 7.0}) == {"Mcp-Param-Priority": "7"}
    with pytest.raises(ConfigError, match="safe integer"):
        param_headers(decls, {"priority": 2**60})


def test_invalid_tools_are_dropped_and_never_called_on_http(no_leaks):
    tools = [
        {
            "name": "good",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        {
            "name": "bad",
            "inputSchema": {
                "type": "object",
                "properties": {"n": {"type": "number", "x-mcp-header": "N"}},
            },
        },
    ]
    server = modern_fake(
        handlers={"tools/list": lambda m: {"resultType": "complete", "tools": tools}}
    )
    # the checks apply where per-request headers reach the wire (Streamable HTTP) only
    server.client_end.features = Features(bounded_probe=True, per_request_headers=True)
    with connect(server) as s:
        assert [t.name for t in s.list_tools()] == ["good"]
        with pytest.raises(InvalidToolHeaders, match="nothing was sent"):
            s.call_tool("bad", {"n": 1})
    assert "tools/call" not in methods(server)
    stdio_like = modern_fake(
        handlers={"tools/list": lambda m: {"resultType": "complete", "tools": tools}}
    )
    with connect(stdio_like) as s:
        assert [t.name for t in s.list_tools()] == ["good", "bad"]


def test_server_identity_separates_credentials():
    url = "https://mcp.example.com/mcp"
    server, alice = server_identity(url, headers={"Authorization": "Bearer alice"})
    same_server, bob = server_identity(url + "/", headers={"Authorization": "Bearer bob"})
    assert server == same_server and alice != bob
    assert "alice" not in alice and "alice" not in server  # digests, not secrets
    auth_a, auth_b = object(), object()
    assert server_identity(url, auth=auth_a)[1] != server_identity(url, auth=auth_b)[1]
    assert server_identity(url, auth=auth_a)[1] == server_identity(url, auth=auth_a)[1]
    one = server_identity(["srv", "--x"], env={"TOKEN": "1"})
    two = server_identity(["srv", "--x"], env={"TOKEN": "2"})
    assert one[0] != two[0] and one[1] != two[1]  # another environment is another server
    assert server_identity(["srv", "--x"], env={"TOKEN": "1"}) == one
    assert server_identity(object()) == (None, None)


def test_a_failing_cursor_drops_the_cached_pages(no_leaks):
    pages = []

    def tools(message):
        pages.append(message["params"].get("cursor"))
        if message["params"].get("cursor") is None:
            return {"resultType": "complete", "tools": [], "nextCursor": "c2", "ttlMs": 60000}
        if len(pages) == 2:
            reply_error(server, message, error(-32602, "Invalid cursor"))
            return None
        return {
            "resultType": "complete",
            "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
            "ttlMs": 60000,
        }

    server = modern_fake(handlers={"tools/list": tools})
    server.client_end.identity = f"cursor-{next(_identities)}"
    with connect(server) as s:
        with pytest.raises(ServerError, match="Invalid cursor"):
            s.list_tools()
        assert [t.name for t in s.list_tools()] == ["t"]
    assert pages == [None, "c2", None, "c2"]  # page one was fetched again, not served from cache


def test_forced_legacy_is_not_remembered_as_a_verdict(no_leaks):
    identity = f"forced-{next(_identities)}"
    first = modern_fake()
    first.client_end.identity = identity
    with connect(first, era="legacy"):
        pass
    second = modern_fake()
    second.client_end.identity = identity
    with connect(second) as s:
        assert s.era == "modern"
        assert "probe" not in s.phases
    third = FakeServer()
    with connect(third) as s:
        assert s.era == "legacy" and s.phases["probe"] > 0


@pytest.mark.parametrize("bad", [2026, "2026-07-28", None])
def test_discover_reply_with_malformed_supported_versions_falls_back_to_legacy(no_leaks, bad):
    server = FakeServer(
        handlers={"server/discover": lambda m: discover_result(supportedVersions=bad)}
    )
    with connect(server) as s:
        assert s.era == "legacy" and s.protocol_version == "2025-11-25"
    assert "initialize" in methods(server)


def test_reset_timeout_on_progress_without_an_on_progress_callback(no_leaks):
    import time

    finished = threading.Semaphore(0)

    def slow(message):  # 2 s of work, a progress report every 0.2 s
        token = message["params"].get("_meta", {}).get("progressToken")
        for step in range(10):
            time.sleep(0.2)  # the server's work, not synchronisation
            if token is not None:
                server.notify("notifications/progress", {"progressToken": token, "progress": step})
        server.reply(message["id"], text_result("done"))
        finished.release()  # after the reply: nothing is sent once the test moves on

    server = modern_fake(handlers={"tools/call": slow})
    with connect(server) as s:
        assert s.era == "modern"
        result = s.call_tool("slow", {}, timeout=1.0, reset_timeout_on_progress=True)
        assert result.content[0].text == "done"
        with pytest.raises(mcpsync.RequestTimeout):
            s.call_tool("slow", {}, timeout=1.0)
        for _ in range(2):  # both handlers done before the pair closes
            assert finished.acquire(timeout=30)


def test_a_submitted_modern_call_that_times_out_ends_its_wait(no_leaks):
    # ModernFuture.wait: result(timeout=) raises a RequestTimeout outcome as it raises
    # "not done yet" (both are TimeoutErrors); the wait must end with the outcome
    answered = threading.Event()

    def never(message):  # the request is read and left unanswered
        answered.set()

    server = modern_fake(handlers={"tools/call": never})
    with connect(server) as s:
        future = s.submit_call_tool("silent", {}, timeout=0.3)
        assert answered.wait(30)
        done = threading.Event()
        outcome: list[BaseException] = []

        def waiter() -> None:
            try:
                future.wait()
            except BaseException as exc:  # noqa: BLE001 - checked below
                outcome.append(exc)
            done.set()

        threading.Thread(target=waiter, daemon=True).start()
        assert done.wait(30), "ModernFuture.wait() did not end"
        assert isinstance(outcome[0], mcpsync.RequestTimeout)
