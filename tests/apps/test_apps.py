"""mcpsync.apps without a browser: the bridge's answers and refusals, the CSP, the resource
checks, ``connect(extensions=...)``, and the widget's Python side, against the apps demo
server (``python -m mcpsync.apps.demo``, a real subprocess over stdio)."""

from __future__ import annotations

import json
import queue
import sys
import threading
from typing import Any

import pytest

import mcpsync
import mcpsync.apps as apps
from mcpsync.apps import AppBridge, AppError, AppMessage, read_app_resource
from mcpsync.apps.demo import COUNTER_URI, LEAKY_URI
from mcpsync.apps.resource import content_security_policy, with_csp
from mcpsync.errors import ConfigError

DEMO = [sys.executable, "-m", "mcpsync.apps.demo"]
WAIT = 20.0


@pytest.fixture(scope="module")
def session():
    with mcpsync.Session.connect(DEMO, extensions=apps.EXTENSION, name="apps-demo") as s:
        yield s


class Front:
    """What the bridge posts, as a queue, with helpers to wait for one kind (bounded)."""

    def __init__(self) -> None:
        self.posted: queue.Queue[dict[str, Any]] = queue.Queue()

    def __call__(self, envelope: dict[str, Any]) -> None:
        self.posted.put(envelope)

    def next(self, kind: str = "rpc") -> dict[str, Any]:
        while True:
            envelope = self.posted.get(timeout=WAIT)
            if envelope["kind"] == kind:
                return envelope["message"] if kind == "rpc" else envelope

    def empty(self) -> bool:
        return self.posted.empty()


def _tool(session: Any, name: str) -> Any:
    return next(t for t in session.list_tools() if t.name == name)


def _bridge(session: Any, tool: str = "counter", **options: Any) -> tuple[AppBridge, Front]:
    front = Front()
    resource = read_app_resource(session, COUNTER_URI)
    bridge = AppBridge(session, _tool(session, tool), resource, post=front, **options)
    return bridge, front


def _request(bridge: AppBridge, front: Front, rid: Any, method: str, params: Any = None) -> dict:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    bridge.receive(message)
    reply = front.next()
    assert reply.get("id") == rid, reply
    return reply


def _initialized(session: Any, **options: Any) -> tuple[AppBridge, Front]:
    bridge, front = _bridge(session, **options)
    _request(bridge, front, 1, "ui/initialize", {"appInfo": {"name": "t", "version": "1"}})
    bridge.receive({"jsonrpc": "2.0", "method": "ui/notifications/initialized"})
    assert front.next()["method"] == "ui/notifications/tool-input"
    return bridge, front


def _server_calls(session: Any) -> list[str]:
    return session.call_tool("calls").structured_content["calls"]


# ----------------------------------------------------------------------- extensions=


def test_the_server_sees_the_extension_advertised(session):
    seen = session.call_tool("client").structured_content["extensions"]
    assert seen == {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
    assert session.client_capabilities["extensions"] == seen


def test_extensions_as_ids_use_the_extension_defaults():
    with mcpsync.Session.connect(DEMO, extensions=["io.modelcontextprotocol/ui"]) as s:
        assert s.call_tool("client").structured_content["extensions"] == dict(apps.EXTENSION)


def test_extensions_settings_are_passed_through_and_absent_by_default():
    given = {"example.com/thing": {"level": 2}}
    with mcpsync.Session.connect(DEMO, extensions=given) as s:
        assert s.call_tool("client").structured_content["extensions"] == given
    with mcpsync.Session.connect(DEMO) as s:
        assert "extensions" not in s.client_capabilities
        assert s.call_tool("client").structured_content["extensions"] == {}


@pytest.mark.parametrize("bad", ["io.modelcontextprotocol/ui", ["no-prefix"], {"a/b": 3}, [7]])
def test_malformed_extensions_fail_before_anything_starts(bad):
    with pytest.raises(ConfigError):
        mcpsync.Session.connect(["/nonexistent/never-started"], extensions=bad)


def test_the_ui_extension_is_not_offered_when_it_cannot_render(monkeypatch):
    real = apps.importlib.util.find_spec
    monkeypatch.setattr(
        apps.importlib.util, "find_spec", lambda n, *a: None if n == "anywidget" else real(n, *a)
    )
    with pytest.raises(ConfigError, match="anywidget"):
        mcpsync.Session.connect(
            ["/nonexistent/never-started"], extensions=["io.modelcontextprotocol/ui"]
        )


# ----------------------------------------------------------------------- the bridge


def test_initialize_answers_with_host_info_capabilities_and_context(session):
    bridge, front = _bridge(session, host_context={"theme": "dark"})
    reply = _request(bridge, front, "init", "ui/initialize", {"appInfo": {"name": "t"}})
    result = reply["result"]
    assert result["protocolVersion"] == "2026-01-26"
    assert result["hostInfo"]["name"] == "mcpsync"
    assert {"serverTools", "serverResources", "openLinks", "logging"} <= set(
        result["hostCapabilities"]
    )
    assert result["hostContext"]["theme"] == "dark"
    assert result["hostContext"]["toolInfo"]["tool"]["name"] == "counter"
    assert bridge.app_info == {"name": "t"}
    bridge.close()


def test_nothing_is_sent_before_initialized_then_input_and_result(session):
    bridge, front = _bridge(session, arguments={"a": 1})
    bridge.set_result(session.call_tool("counter"))
    bridge.set_host_context(theme="dark")
    assert front.empty()  # the app has not said it is initialized
    bridge.receive({"jsonrpc": "2.0", "method": "ui/notifications/initialized"})
    first, second = front.next(), front.next()
    assert first == {
        "jsonrpc": "2.0",
        "method": "ui/notifications/tool-input",
        "params": {"arguments": {"a": 1}},
    }
    assert second["method"] == "ui/notifications/tool-result"
    assert second["params"]["structuredContent"] == {"count": 0}
    bridge.set_host_context(theme="light")
    changed = front.next()
    assert changed["method"] == "ui/notifications/host-context-changed"
    assert changed["params"] == {"theme": "light"}
    bridge.close()


def test_an_app_tool_call_reaches_the_server_on_the_proxy_thread(session):
    bridge, front = _initialized(session)
    before = _server_calls(session).count("increment")
    reply = _request(bridge, front, 7, "tools/call", {"name": "increment", "arguments": {}})
    assert reply["result"]["structuredContent"]["count"] >= 1
    assert _server_calls(session).count("increment") == before + 1
    assert any(t.name == "mcpsync-app[apps-demo]" for t in threading.enumerate())
    bridge.close()
    assert not any(t.name == "mcpsync-app[apps-demo]" for t in threading.enumerate())


def test_a_resource_read_is_proxied(session):
    bridge, front = _initialized(session)
    reply = _request(bridge, front, "r", "resources/read", {"uri": "demo://readme"})
    assert reply["result"]["contents"][0]["uri"] == "demo://readme"
    assert bridge.proxied[-1] == ("resources/read", {"uri": "demo://readme"})
    bridge.close()


def test_ping_display_mode_and_model_context(session):
    seen: list[dict] = []
    bridge, front = _initialized(session, on_model_context=seen.append)
    assert _request(bridge, front, 2, "ping")["result"] == {}
    mode = _request(bridge, front, 3, "ui/request-display-mode", {"mode": "fullscreen"})
    assert mode["result"] == {"mode": "inline"}
    ctx = {"structuredContent": {"picked": 3}}
    assert _request(bridge, front, 4, "ui/update-model-context", ctx)["result"] == {}
    assert bridge.model_context == ctx and seen == [ctx]
    bridge.close()


def test_size_changes_resize_the_frame_within_bounds(session):
    bridge, front = _initialized(session)
    bridge.receive(
        {
            "jsonrpc": "2.0",
            "method": "ui/notifications/size-changed",
            "params": {"width": 300, "height": 10**9},
        }
    )
    resize = front.next("resize")
    assert resize["width"] == 300 and resize["height"] == 4000
    bridge.receive(
        {"jsonrpc": "2.0", "method": "ui/notifications/size-changed", "params": {"height": "tall"}}
    )
    assert "size-changed without a number" in bridge.refusals[-1]
    assert front.empty()
    bridge.close()


def test_teardown_waits_for_the_app_answer(session):
    bridge, front = _initialized(session)
    answered: list[bool] = []
    waiter = threading.Thread(target=lambda: answered.append(bridge.teardown("bye", timeout=WAIT)))
    waiter.start()
    request = front.next()
    assert request["method"] == "ui/resource-teardown" and request["params"] == {"reason": "bye"}
    bridge.receive({"jsonrpc": "2.0", "id": request["id"], "result": {}})
    waiter.join(WAIT)
    assert answered == [True]


# ----------------------------------------------------------------------- refusals


def _refusal(bridge: AppBridge, front: Front, rid: Any, method: str, params: Any = None) -> dict:
    reply = _request(bridge, front, rid, method, params)
    assert "error" in reply, reply
    assert bridge.refusals[-1] == reply["error"]["message"]
    return reply["error"]


def test_unknown_methods_get_method_not_found(session):
    bridge, front = _initialized(session)
    error = _refusal(bridge, front, 5, "sampling/createMessage", {})
    assert error["code"] == -32601 and "sampling/createMessage" in error["message"]
    bridge.receive({"jsonrpc": "2.0", "method": "ui/notifications/whatever", "params": {}})
    assert "ignored notification 'ui/notifications/whatever'" in bridge.refusals[-1]
    assert front.empty()  # a notification is never answered
    bridge.close()


def test_a_call_to_a_tool_not_visible_to_apps_is_refused_and_never_sent(session):
    bridge, front = _initialized(session)
    calls_before = _server_calls(session)
    error = _refusal(bridge, front, 6, "tools/call", {"name": "reset", "arguments": {}})
    assert error["code"] == -32000
    assert "'reset'" in error["message"] and "['model']" in error["message"]
    error = _refusal(bridge, front, 7, "tools/call", {"name": "no_such_tool"})
    assert "offers no tool 'no_such_tool'" in error["message"]
    assert _server_calls(session) == calls_before  # nothing reached the server
    assert bridge.proxied == []
    bridge.close()


@pytest.mark.parametrize(
    "raw, words",
    [
        ("{not json", "not valid JSON"),
        ([1, 2], "not JSON-RPC 2.0"),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, "not JSON-RPC 2.0"),
        ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}, "id is not a string or number"),
        ({"jsonrpc": "2.0", "id": 1}, "without a method"),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, "params must be an object"),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 3}},
            "name must be",
        ),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "increment", "arguments": [1]},
            },
            "arguments must be an object",
        ),
    ],
)
def test_malformed_messages_are_refused_with_words(session, raw, words):
    bridge, front = _initialized(session)
    bridge.receive(raw)
    reply = front.next()
    assert "error" in reply and words in reply["error"]["message"], reply
    assert bridge.proxied == []
    bridge.close()


def test_huge_payloads_are_refused_before_anything_is_done(session):
    bridge, front = _initialized(session, max_message_bytes=10_000)
    huge = {"name": "increment", "arguments": {"blob": "x" * 20_000}}
    error = _refusal(bridge, front, 8, "tools/call", huge)
    assert error["code"] == -32600 and "limit is 10000 bytes" in error["message"]
    bridge.receive(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping", "pad": "y" * 20_000}))
    assert "limit is 10000 bytes" in front.next()["error"]["message"]
    assert bridge.proxied == []
    bridge.close()


def test_too_many_requests_in_flight_are_refused(session):
    bridge, front = _initialized(session, max_in_flight=1)
    bridge.receive({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                    "params": {"name": "long_running", "arguments": {"duration": 1, "steps": 1}}})  # fmt: skip
    error = _refusal(bridge, front, "second", "tools/call", {"name": "increment"})
    assert "1 requests from this app are already waiting" in error["message"]
    assert front.next()["id"] == "slow"  # the first one still finishes
    bridge.close()


def test_the_session_stays_usable_after_every_refusal(session):
    bridge, front = _initialized(session, max_message_bytes=1000)
    for raw in ("garbage", {"jsonrpc": "2.0", "id": 1, "method": "evil"}, {"x": "y" * 5000}):
        bridge.receive(raw)
        assert "error" in front.next()
    assert _request(bridge, front, 2, "tools/call", {"name": "increment"})["result"]["content"]
    session.ping()
    assert (
        session.call_tool("echo", {"message": "still here"}).content[0].text.endswith("still here")
    )
    bridge.close()


@pytest.mark.parametrize(
    "url, words",
    [
        ("javascript:alert(1)", "only http(s) links"),
        ("file:///etc/passwd", "only http(s) links"),
        ("data:text/html,hi", "only http(s) links"),
        ("https://user:pw@example.com/", "carries credentials"),
    ],
)
def test_open_link_refuses_anything_but_plain_http(session, url, words):
    bridge, front = _initialized(session)
    error = _refusal(bridge, front, 1, "ui/open-link", {"url": url})
    assert words in error["message"]
    assert front.empty()  # no ask-link shown
    bridge.close()


def test_open_link_asks_the_person(session):
    bridge, front = _initialized(session)
    bridge.receive(
        {
            "jsonrpc": "2.0",
            "id": "l1",
            "method": "ui/open-link",
            "params": {"url": "https://example.com/a"},
        }
    )
    ask = front.next("ask-link")
    assert ask["url"] == "https://example.com/a"
    bridge.link_decision(ask["token"], True)
    assert front.next() == {"jsonrpc": "2.0", "id": "l1", "result": {}}
    bridge.receive(
        {
            "jsonrpc": "2.0",
            "id": "l2",
            "method": "ui/open-link",
            "params": {"url": "http://example.com/b"},
        }
    )
    bridge.link_decision(front.next("ask-link")["token"], False)
    assert "declined by the user" in front.next()["error"]["message"]
    bridge.close()


def test_open_link_decline_and_callable_policies(session):
    bridge, front = _initialized(session, open_links="decline")
    assert (
        "does not open links"
        in _refusal(bridge, front, 1, "ui/open-link", {"url": "https://a.example"})["message"]
    )
    bridge.close()
    asked: list[str] = []
    bridge, front = _initialized(session, open_links=lambda url: asked.append(url) or True)
    bridge.receive(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "ui/open-link",
            "params": {"url": "https://a.example/x"},
        }
    )
    assert front.next("open") == {"kind": "open", "url": "https://a.example/x"}
    assert front.next() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert asked == ["https://a.example/x"]
    bridge.close()


def test_ui_message_is_declined_unless_a_callback_takes_it(session):
    params = {"role": "user", "content": {"type": "text", "text": "hello host"}}
    bridge, front = _initialized(session)
    assert "pass on_message=" in _refusal(bridge, front, 1, "ui/message", params)["message"]
    bridge.close()
    got: list[AppMessage] = []
    bridge, front = _initialized(session, on_message=lambda m: got.append(m) or True)
    assert _request(bridge, front, 2, "ui/message", params)["result"] == {}
    assert got[0].text == "hello host" and got[0].role == "user"
    assert (
        "role 'user'"
        in _refusal(bridge, front, 3, "ui/message", {"role": "system", "content": {}})["message"]
    )
    bridge.close()


# ----------------------------------------------------------------------- resource and CSP


def test_the_default_policy_allows_nothing_outside_the_document():
    policy = content_security_policy({})
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    assert "frame-src 'none'" in policy and "object-src 'none'" in policy
    assert "base-uri 'self'" in policy


def test_declared_domains_go_to_their_directives():
    policy = content_security_policy(
        {"connectDomains": ["https://api.example.com", "wss://rt.example.com:8443"],
         "resourceDomains": ["https://*.cdn.example"], "frameDomains": ["https://www.youtube.com"]}
    )  # fmt: skip
    directives = dict(d.split(" ", 1) for d in policy.split("; "))
    assert directives["connect-src"] == "https://api.example.com wss://rt.example.com:8443"
    assert "https://*.cdn.example" in directives["script-src"]
    assert "https://*.cdn.example" in directives["img-src"]
    assert directives["frame-src"] == "https://www.youtube.com"


def test_a_csp_smuggling_a_directive_refuses_the_app(session):
    with pytest.raises(AppError, match="is not an origin"):
        read_app_resource(session, LEAKY_URI)
    with pytest.raises(AppError, match="is not an origin"):
        apps.call(session, "leaky")
    session.ping()


@pytest.mark.parametrize(
    "entry",
    ["'unsafe-eval'", "*", "https:", "https://a.example/path", "https://a.example x", "data:"],
)
def test_only_origins_are_accepted_as_csp_entries(entry):
    from mcpsync.apps.resource import _check_domains

    with pytest.raises(AppError):
        _check_domains({"resourceDomains": [entry]}, "ui://x")


def test_the_policy_meta_is_the_first_element():
    page = with_csp("<!doctype html><html><head><script>x()</script>", "default-src 'none'")
    assert page.startswith(
        '<!doctype html><meta http-equiv="Content-Security-Policy" content="default-src \'none\'">'
    )
    bare = with_csp("<script>x()</script>", 'a "b"')
    assert bare.startswith(
        '<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="a &quot;b&quot;">'
    )


class _Content:
    def __init__(self, **fields: Any) -> None:
        self.uri = "ui://x/app.html"
        self.mime_type = "text/html;profile=mcp-app"
        self.text = None
        self.blob = None
        self.meta = None
        self.__dict__.update(fields)


class _Reader:
    name = "fake"

    def __init__(self, content: _Content) -> None:
        self.content = content

    def read_resource(self, uri: str) -> Any:
        return type("R", (), {"contents": [self.content]})()


def test_resource_checks():
    import base64

    html = "<!DOCTYPE html><p>hi</p>"
    blob = base64.b64encode(html.encode()).decode()
    assert read_app_resource(_Reader(_Content(blob=blob)), "ui://x/app.html").html == html
    with pytest.raises(AppError, match="not 'text/html;profile=mcp-app'"):
        read_app_resource(_Reader(_Content(text=html, mime_type="text/html")), "ui://x/app.html")
    with pytest.raises(AppError, match="larger than 10 bytes|limit 10"):
        read_app_resource(_Reader(_Content(text=html)), "ui://x/app.html", max_bytes=10)
    with pytest.raises(AppError, match="not valid base64"):
        read_app_resource(_Reader(_Content(blob="%%%")), "ui://x/app.html")
    with pytest.raises(AppError, match="not a ui:// resource"):
        read_app_resource(_Reader(_Content(text=html)), "https://x/app.html")
    with pytest.raises(AppError, match="neither text nor blob"):
        read_app_resource(_Reader(_Content()), "ui://x/app.html")


def test_tool_meta_keys(session):
    assert apps.app_tools(session)["counter"] == COUNTER_URI
    assert apps.visibility(_tool(session, "increment")) == ("app",)
    assert apps.visibility(_tool(session, "echo")) == ("model", "app")
    assert apps.resource_uri({"_meta": {"ui/resourceUri": "ui://old/flat"}}) == "ui://old/flat"
    assert apps.resource_uri({"_meta": {"ui": {"resourceUri": "https://not-ui"}}}) is None
    assert apps.visibility({"_meta": {"ui": {"visibility": "app"}}}) == ()  # malformed: nobody
    with pytest.raises(AppError, match="not an app"):
        apps.call(session, "echo", {"message": "x"})


# ----------------------------------------------------------------------- the widget (Python side)


def test_the_widget_relays_between_front_end_and_bridge(session):
    pytest.importorskip("anywidget")
    view = apps.call(session, "counter", theme=None)
    sent: list[dict] = []
    view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    assert view.srcdoc.startswith('<!DOCTYPE html><meta http-equiv="Content-Security-Policy"')
    assert view.result.structured_content["count"] >= 0
    view._on_front(
        view,
        {"kind": "host", "theme": "dark", "variables": {"--font-sans": "Inter", "bad": "x"}},
        [],
    )
    view._on_front(
        view,
        {
            "kind": "rpc",
            "message": {"jsonrpc": "2.0", "id": 1, "method": "ui/initialize", "params": {}},
        },
        [],
    )
    context = sent[-1]["message"]["result"]["hostContext"]
    assert context["theme"] == "dark" and context["styles"] == {
        "variables": {"--font-sans": "Inter"}
    }
    view._on_front(view, {"kind": "dropped", "bytes": 5_000_000}, [])
    assert "dropped a 5000000-byte message" in view.refusals[-1]
    assert "not shown yet" in repr(view)
    view.close()


def test_receive_never_waits_for_the_server(session):
    """The caller (a kernel's message loop) gets control back before the server answers."""
    bridge, front = _initialized(session)
    bridge.receive({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
                    "params": {"name": "long_running", "arguments": {"duration": 1.5, "steps": 3}}})  # fmt: skip
    assert front.empty()  # receive() returned; the answer is not there yet
    assert _request(bridge, front, "quick", "ping")["result"] == {}  # answered meanwhile
    slow = front.next()
    assert slow["id"] == "slow" and "long_running done" in slow["result"]["content"][0]["text"]
    bridge.close()
