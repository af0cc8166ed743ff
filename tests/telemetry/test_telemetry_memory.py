"""OpenTelemetry through the public API against an in-memory scripted server (quick tier).

Spans and metrics go to the SDK's in-memory exporter and metric reader, through providers
passed to ``connect`` (never the global ones, which would leak across tests)."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

import pytest
from fakes import FakeServer
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import mcpsync
from mcpsync.errors import RequestTimeout, ServerError
from mcpsync.telemetry import Telemetry, carried, carry


class Recorded:
    """An SDK tracer provider and meter provider writing to memory, for one test."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")

    @property
    def providers(self) -> dict[str, Any]:
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return found if name is None else [s for s in found if s.name == name]

    def span(self, name: str) -> ReadableSpan:
        (found,) = self.spans(name)
        return found

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        out = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        assert m.unit == "s"
                        out += list(m.data.data_points)
        return out

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def otel() -> Any:
    recorded = Recorded()
    yield recorded
    recorded.close()


def names(span: Any, traceparent: str) -> bool:
    """``traceparent`` (W3C) names ``span``: its trace id and span id (flags aside)."""
    ctx = span.get_span_context()
    return traceparent.rsplit("-", 1)[0] == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}"


def tools_server(**kwargs: Any) -> FakeServer:
    def call(message: dict[str, Any]) -> Any:
        name = message["params"]["name"]
        if name == "boom":
            server.send({"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32602, "message": "bad arguments"}})  # fmt: skip
            return None
        if name == "silent":
            return None  # never answered: the client times out
        if name == "fails":
            return {"content": [{"type": "text", "text": "no"}], "isError": True}
        return {"content": [{"type": "text", "text": "ok"}]}

    server = FakeServer(handlers={"tools/call": call, "prompts/get": lambda m: {"messages": []},
                                  "resources/read": lambda m: {"contents": []}}, **kwargs)  # fmt: skip
    server.capabilities = {"tools": {}, "prompts": {}, "resources": {}}
    return server


def connect(server: FakeServer, otel: Recorded, **kwargs: Any) -> mcpsync.Session:
    return mcpsync.Session.connect(
        server.transport, name="mem", timeout=5, connect_timeout=5, era="legacy",
        **{**otel.providers, **kwargs},
    )  # fmt: skip


def test_a_tool_call_is_a_client_span_child_of_the_callers_with_its_context_in_meta(otel):
    server = tools_server()
    with otel.tracer.start_as_current_span("caller") as caller, connect(server, otel) as s:
        assert s.call_tool("echo", {"x": 1}).content[0].text == "ok"
        sent = server.expect("tools/call")
    span = otel.span("tools/call echo")
    assert span.kind is SpanKind.CLIENT
    assert span.parent is not None and span.parent.span_id == caller.get_span_context().span_id
    assert span.attributes["mcp.method.name"] == "tools/call"
    assert span.attributes["gen_ai.tool.name"] == "echo"
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["jsonrpc.request.id"] == str(sent["id"])
    assert span.attributes["mcp.protocol.version"] == "2025-11-25"
    assert "gen_ai.tool.call.arguments" not in span.attributes  # not without opting in
    assert span.status.status_code is StatusCode.UNSET
    assert names(span, sent["params"]["_meta"]["traceparent"])
    assert sent["params"]["arguments"] == {"x": 1}
    # the bring-up: one connect span over the transport and handshake phases
    connect_span = otel.span("connect")
    assert connect_span.parent.span_id == caller.get_span_context().span_id
    init = otel.span("initialize")
    handshake = otel.span("handshake")
    assert init.parent.span_id == handshake.context.span_id
    assert handshake.parent.span_id == connect_span.context.span_id
    assert otel.span("transport").parent.span_id == connect_span.context.span_id
    initialized = otel.span("notifications/initialized")
    assert initialized.attributes["mcp.protocol.version"] == "2025-11-25"


def test_prompt_resource_and_notification_spans(otel):
    server = tools_server()
    with connect(server, otel) as s:
        s.get_prompt("greet", {"name": "Ada"})
        s.read_resource("demo://readme")
        s.connection.notify("notifications/roots/list_changed")
        sent = server.expect("notifications/roots/list_changed")
    prompt = otel.span("prompts/get greet")
    assert prompt.attributes["gen_ai.prompt.name"] == "greet"
    read = otel.span("resources/read")  # no URI in the name by default
    assert read.attributes["mcp.resource.uri"] == "demo://readme"
    note = otel.span("notifications/roots/list_changed")
    assert "jsonrpc.request.id" not in note.attributes
    assert names(note, sent["params"]["_meta"]["traceparent"])


def test_errors_are_mapped(otel):
    server = tools_server()
    with connect(server, otel) as s:
        with pytest.raises(ServerError):
            s.call_tool("boom", {})
        assert s.call_tool("fails", {}).is_error
        with pytest.raises(RequestTimeout):
            s.call_tool("silent", {}, timeout=0.2)
        future = s.submit_call_tool("silent", {"n": 2})
        while server.expect("tools/call")["params"].get("arguments") != {"n": 2}:
            pass  # (the earlier calls' requests)
        assert future.cancel()
    boom = otel.span("tools/call boom")
    assert boom.status.status_code is StatusCode.ERROR
    assert boom.attributes["error.type"] == "-32602"
    assert boom.attributes["rpc.response.status_code"] == "-32602"
    fails = otel.span("tools/call fails")
    assert fails.status.status_code is StatusCode.ERROR
    assert fails.attributes["error.type"] == "tool_error"
    silent, cancelled = otel.spans("tools/call silent")
    assert silent.attributes["error.type"] == "timeout"
    assert cancelled.attributes["error.type"] == "cancelled"
    assert silent.status.status_code is StatusCode.ERROR
    by_tool = {
        p.attributes.get("gen_ai.tool.name"): p
        for p in otel.points("mcp.client.operation.duration")
    }
    assert by_tool["boom"].attributes["error.type"] == "-32602"
    assert by_tool["fails"].attributes["error.type"] == "tool_error"
    silent_points = [p for p in otel.points("mcp.client.operation.duration")
                     if p.attributes.get("gen_ai.tool.name") == "silent"]  # fmt: skip
    assert {p.attributes["error.type"] for p in silent_points} == {"timeout", "cancelled"}
    assert "jsonrpc.request.id" not in by_tool["boom"].attributes  # span-only
    (session,) = otel.points("mcp.client.session.duration")
    assert session.count == 1 and session.attributes["mcp.protocol.version"] == "2025-11-25"


def test_the_users_meta_is_kept_and_their_traceparent_wins(otel):
    server = tools_server()
    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with connect(server, otel) as s, otel.tracer.start_as_current_span("caller"):
        s.connection.call("tools/call", {"name": "echo", "_meta": {"traceparent": mine, "k": "v"}})
        sent = server.expect("tools/call")
        s.connection.call("tools/call", {"name": "echo", "_meta": {"k2": 2}})
        sent2 = server.expect("tools/call")
    assert sent["params"]["_meta"] == {"traceparent": mine, "k": "v"}
    assert sent2["params"]["_meta"]["k2"] == 2
    assert sent2["params"]["_meta"]["traceparent"].startswith("00-")


def test_capture_content_is_opt_in(otel):
    server = tools_server()
    options = Telemetry(capture_content=True)
    with connect(server, otel, telemetry=options) as s:
        s.call_tool("echo", {"secret": "s3"})
    span = otel.span("tools/call echo")
    assert '"s3"' in span.attributes["gen_ai.tool.call.arguments"]
    assert '"ok"' in span.attributes["gen_ai.tool.call.result"]


def test_telemetry_false_sends_no_context_and_makes_no_span(otel):
    server = tools_server()
    with connect(server, otel, telemetry=False) as s, otel.tracer.start_as_current_span("caller"):
        s.call_tool("echo", {})
        sent = server.expect("tools/call")
    assert "_meta" not in sent["params"]
    assert [s.name for s in otel.spans()] == ["caller"]
    assert otel.points("mcp.client.operation.duration") == []


def test_server_requests_run_in_a_server_span_parented_on_their_meta(otel, caplog):
    server = tools_server()
    remote = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with connect(server, otel, roots=[{"uri": "file:///tmp", "name": "tmp"}]) as s:
        reply = server.request("roots/list", {"_meta": {"traceparent": remote}})
        assert reply["result"]["roots"][0]["uri"] == "file:///tmp"
        with caplog.at_level(logging.DEBUG, logger="mcpsync.telemetry"):
            bad = server.request("roots/list", {"_meta": {"traceparent": "00-zz-not-a-parent"}})
            worse = server.request("roots/list", {"_meta": {"traceparent": 7, "tracestate": []}})
        assert "result" in bad and "result" in worse  # answered as usual
        assert not s.closed
    good, malformed, wrong_type = otel.spans("roots/list")
    assert good.kind is SpanKind.SERVER
    assert good.parent is not None and good.parent.is_remote
    assert f"{good.context.trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert good.parent.span_id == 0x00F067AA0BA902B7
    assert good.attributes["mcp.method.name"] == "roots/list"
    assert malformed.parent is None  # a new trace: the malformed parent was ignored
    assert wrong_type.parent is None
    assert caplog.text.count("malformed traceparent") == 2


def test_submit_futures_and_threads_keep_the_callers_context(otel):
    server = tools_server()
    with connect(server, otel) as s, otel.tracer.start_as_current_span("caller") as caller:
        s.submit_call_tool("echo", {}).result(timeout=10)
        with ThreadPoolExecutor(1, thread_name_prefix="test-carry") as pool:
            pool.submit(carry(lambda: s.call_tool("other", {}))).result(timeout=10)
    parent = caller.get_span_context().span_id
    assert otel.span("tools/call echo").parent.span_id == parent
    assert otel.span("tools/call other").parent.span_id == parent


def _current_trace_id() -> int:
    return trace.get_current_span().get_span_context().trace_id


def test_carried_takes_the_context_to_another_process(otel):
    with otel.tracer.start_as_current_span("caller") as caller:
        job = carried(_current_trace_id)
    with ProcessPoolExecutor(1) as pool:
        assert pool.submit(job).result(timeout=60) == caller.get_span_context().trace_id


def test_an_adapters_dispatch_keeps_the_callers_context(otel):
    from mcpsync import adapters

    server = tools_server()
    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    server.handlers["tools/list"] = lambda m: {"tools": [{"name": "echo", "inputSchema": schema}]}
    calls = [{"id": f"c{i}", "type": "function",
              "function": {"name": "echo", "arguments": json.dumps({"message": f"m{i}"})}}
             for i in range(3)]  # fmt: skip
    with connect(server, otel) as s, otel.tracer.start_as_current_span("model turn") as turn:
        adapters.to_openai(s)
        out = adapters.dispatch(s, {"role": "assistant", "content": None, "tool_calls": calls})
    assert [m["tool_call_id"] for m in out] == ["c0", "c1", "c2"]
    spans = otel.spans("tools/call echo")
    assert len(spans) == 3
    assert {sp.parent.span_id for sp in spans} == {turn.get_span_context().span_id}


def test_a_restart_brings_the_session_up_in_a_connect_span_of_its_own(otel):
    from test_restart import Fakes, Restarts

    from mcpsync import RestartPolicy
    from mcpsync.protocol.choose import Caches

    fakes, seen = Fakes(), Restarts()
    policy = RestartPolicy(make_transport=fakes, backoff=0.0, on_restart=seen)
    with mcpsync.Session.connect(fakes(), restart=policy, timeout=10, connect_timeout=5,
                                 _caches=Caches(), era="legacy", **otel.providers):  # fmt: skip
        fakes.crash()
        seen.wait()
    first, second = otel.spans("connect")
    assert second.start_time > first.end_time
    handshake, again = otel.spans("handshake")  # connect()'s phases, then the restart's
    first_init, second_init = otel.spans("initialize")
    assert first_init.parent.span_id == handshake.context.span_id
    assert again.parent.span_id == second.context.span_id  # under the restart's connect span
    assert second_init.parent.span_id == again.context.span_id
    transports = otel.spans("transport")
    assert [t.parent.span_id for t in transports] == [first.context.span_id, second.context.span_id]


def test_a_restart_policy_that_gives_up_ends_the_session_duration(otel):
    """The session ends when the policy gives up (not at each death it restarts from)."""
    from test_restart import Fakes, Restarts

    from mcpsync import RestartPolicy
    from mcpsync.protocol.choose import Caches

    fakes, seen = Fakes(), Restarts()
    policy = RestartPolicy(make_transport=fakes, backoff=0.0, max_attempts=1, on_restart=seen)
    with mcpsync.Session.connect(fakes(), restart=policy, timeout=10, connect_timeout=5,
                                 _caches=Caches(), era="legacy", **otel.providers):  # fmt: skip
        fakes.crash()
        assert seen.wait().ok  # restarted: the session goes on
        assert otel.points("mcp.client.session.duration") == []
        fakes.broken = 5  # every further bring-up meets a dead server
        fakes.crash()
        assert not seen.wait(2).ok  # given up
        (point,) = otel.points("mcp.client.session.duration")
        assert point.attributes["error.type"] == "mcpsync.errors.RestartLimitReached"
    assert len(otel.points("mcp.client.session.duration")) == 1  # close() records no second


def test_the_docstring_examples_run():
    import doctest
    import importlib

    for name in ("mcpsync.telemetry", "mcpsync.telemetry.carry", "mcpsync.telemetry.instrument"):
        module = importlib.import_module(name)
        failed, tried = doctest.testmod(module)
        assert tried and not failed, module.__name__
