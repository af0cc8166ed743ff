"""OpenTelemetry through the public API against real servers: the demo server over stdio and
Streamable HTTP, and a server built with the official ``mcp`` SDK that reads ``_meta``; both
eras; a Host with two servers; the smoke runner; without OpenTelemetry at all."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from typing import Any

import pytest
from opentelemetry.trace import SpanKind
from servers.launch import demo_argv, sdk_server_http, sdk_server_sse, sdk_stdio_argv
from test_telemetry_memory import Recorded, names

import mcpsync
from mcpsync.demo_server.http import DemoHTTPServer


@pytest.fixture
def otel() -> Any:
    recorded = Recorded()
    yield recorded
    recorded.close()


def check_call(otel: Recorded, s: mcpsync.Session, caller: Any, transport: str) -> None:
    """A traced tools/call on ``s``: every attribute of the conventions, for ``transport``."""
    assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
    (span,) = [x for x in otel.spans("tools/call echo")]
    assert span.kind is SpanKind.CLIENT
    assert span.parent.span_id == caller.get_span_context().span_id
    attrs = span.attributes
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "echo"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["mcp.protocol.version"] == s.protocol_version
    assert int(attrs["jsonrpc.request.id"]) > 0
    assert attrs["network.transport"] == transport
    assert attrs["mcpsync.server.name"] == s.name
    if transport == "tcp":
        assert attrs["network.protocol.name"] == "http"
        assert attrs["network.protocol.version"] == "1.1"
        assert attrs["server.address"] == "127.0.0.1"
        assert isinstance(attrs["server.port"], int)
    (point,) = [p for p in otel.points("mcp.client.operation.duration")
                if p.attributes.get("gen_ai.tool.name") == "echo"]  # fmt: skip
    assert point.attributes["network.transport"] == transport
    assert point.count == 1 and point.sum > 0


STDIO = {"legacy": demo_argv, "modern": sdk_stdio_argv}  # the demo server speaks legacy only


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_stdio(otel, era):
    with otel.tracer.start_as_current_span("caller") as caller:
        with mcpsync.Session.connect(STDIO[era](), era=era, **otel.providers) as s:
            assert s.era == era
            check_call(otel, s, caller, "pipe")
    assert otel.span("connect").parent.span_id == caller.get_span_context().span_id
    (session,) = otel.points("mcp.client.session.duration")
    assert session.attributes["network.transport"] == "pipe"


def test_a_server_that_dies_ends_the_session_duration_at_once(otel):
    """Recorded when the server dies (no restart follows), with why, not only at close()."""
    import threading

    s = mcpsync.Session.connect(demo_argv(), **otel.providers)
    try:
        died = threading.Event()
        s.connection.on_closed(lambda error: died.set())
        s.transport.process.kill()  # type: ignore[attr-defined]
        assert died.wait(30)
        deadline = time.monotonic() + 30
        while not otel.points("mcp.client.session.duration") and time.monotonic() < deadline:
            died.wait(0.02)  # the session's own on_closed callback runs beside ours
        (point,) = otel.points("mcp.client.session.duration")
        assert point.attributes["error.type"] == "mcpsync.errors.ServerExited"
    finally:
        s.close()
    assert len(otel.points("mcp.client.session.duration")) == 1  # close() records no second


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_streamable_http(otel, era):
    peer = DemoHTTPServer() if era == "legacy" else sdk_server_http()
    with peer as server, otel.tracer.start_as_current_span("caller") as caller:
        with mcpsync.Session.connect(server.url, era=era, **otel.providers) as s:
            assert s.era == era
            check_call(otel, s, caller, "tcp")
            if era == "legacy":  # the HTTP session the server assigned
                assert otel.span("tools/call echo").attributes["mcp.session.id"]


PEERS = {
    "stdio-legacy": (sdk_stdio_argv, "legacy"),
    "stdio-modern": (sdk_stdio_argv, "modern"),
    "http-legacy": (sdk_server_http, "legacy"),
    "http-modern": (sdk_server_http, "modern"),
    "sse-legacy": (sdk_server_sse, "legacy"),  # legacy HTTP+SSE carries no other era
}


@pytest.mark.parametrize("peer", list(PEERS))
def test_an_sdk_server_receives_a_traceparent_naming_the_client_span(otel, peer):
    start, era = PEERS[peer]
    with contextlib.ExitStack() as stack:
        if start is sdk_stdio_argv:
            target = start()
        else:
            target = stack.enter_context(start()).url
        with otel.tracer.start_as_current_span("caller"):
            with mcpsync.Session.connect(target, era=era, **otel.providers) as s:
                assert s.era == era
                got = json.loads(s.call_tool("lookup_meta", {}).content[0].text)
    span = otel.span("tools/call lookup_meta")
    assert names(span, got["traceparent"])


def test_server_requests_from_a_real_server_run_in_server_spans(otel):
    with mcpsync.Session.connect(
        demo_argv(), roots=["file:///tmp"], era="legacy", **otel.providers
    ) as s:
        with otel.tracer.start_as_current_span("caller"):
            s.call_tool("list_roots", {})
    call = otel.span("tools/call list_roots")
    (served,) = otel.spans("roots/list")
    assert served.kind is SpanKind.SERVER
    assert served.attributes["mcp.method.name"] == "roots/list"
    assert served.context.trace_id in (call.context.trace_id, served.context.trace_id)


def test_a_host_with_two_servers_parents_every_bring_up_on_the_caller(otel):
    config = {"mcpServers": {"one": {"command": demo_argv()[0], "args": demo_argv()[1:]},
                             "two": {"command": demo_argv()[0], "args": demo_argv()[1:]}}}  # fmt: skip
    with otel.tracer.start_as_current_span("caller") as caller:
        with mcpsync.Host(config, **otel.providers) as host:
            (echo,) = [t.name for t in host.list_tools() if t.server == "one" and t.name == "echo"]
            host.call_tool(echo, {"message": "x"})
    caller_id = caller.get_span_context().span_id
    connects = otel.spans("connect")
    assert len(connects) == 2
    assert all(c.parent.span_id == caller_id for c in connects)
    assert otel.span("tools/call echo").parent.span_id == caller_id


_SMOKE = """
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mcpsync.smoke import run

OUT = sys.argv[2]


class FileExporter(SpanExporter):
    def export(self, spans):
        with open(OUT, "a") as f:
            for span in spans:
                f.write(f"{{span.name}} {{span.context.trace_id:032x}}\\n")
        return SpanExportResult.SUCCESS


def setup():  # this process's global provider (the worker's too): nothing leaks into pytest
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
    trace.set_tracer_provider(provider)


if __name__ == "__main__":
    setup()
    config = {{"mcpServers": {{"demo": {{"command": {command!r}, "args": {args!r}}}}}}}
    calls = [("echo", {{"message": "hi"}})]
    with trace.get_tracer("t").start_as_current_span("caller") as caller:
        if sys.argv[1] == "thread":
            report = run(config, calls=calls)
        elif sys.argv[1] == "process":
            spawn = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(1, mp_context=spawn, initializer=setup) as pool:
                report = run(config, calls=calls, executor=pool)
        else:
            from distributed import Client, LocalCluster

            with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                client.run(setup)
                report = run(config, calls=calls, executor=client.get_executor())
    assert report.ok, report
    print(f"{{caller.get_span_context().trace_id:032x}}")
"""


@pytest.mark.parametrize("executor", ["thread", "process", "dask"])
def test_the_smoke_runner_carries_the_context_to_its_workers(tmp_path, executor):
    argv = demo_argv()
    script = tmp_path / "smoke_traced.py"
    script.write_text(_SMOKE.format(command=argv[0], args=argv[1:]))
    spans = tmp_path / "spans.txt"
    out = subprocess.run([sys.executable, str(script), executor, str(spans)],
                         capture_output=True, text=True, timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stderr
    caller = out.stdout.split()[-1]
    seen = [line.rsplit(" ", 1) for line in spans.read_text().splitlines()]
    connects = [trace_id for name, trace_id in seen if name == "connect"]
    calls = [trace_id for name, trace_id in seen if name == "tools/call echo"]
    assert connects == [caller] and calls == [caller]


_WITHOUT = """
import sys
sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
import mcpsync
with mcpsync.Session.connect({argv!r}) as s:
    assert s.call_tool("echo", {{"message": "x"}}).content[0].text == "x"
    assert s.submit_call_tool("echo", {{"message": "y"}}).result(timeout=30).content[0].text == "y"
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m] is not None)
print(loaded)
"""

_OFF = """
import sys
import mcpsync
with mcpsync.Session.connect({argv!r}, telemetry=False) as s:
    assert s.call_tool("echo", {{"message": "x"}}).content[0].text == "x"
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


@pytest.mark.parametrize("code", [_WITHOUT, _OFF], ids=["not-installed", "telemetry-off"])
def test_without_opentelemetry_nothing_is_imported(code):
    out = subprocess.run([sys.executable, "-c", code.format(argv=demo_argv())],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_an_oauth_bring_up_shows_its_steps_under_connect(otel):
    from mcpsync.auth import OAuth

    with DemoHTTPServer(auth=True, clients={"svc": "s3cret"}) as server:
        auth = OAuth.client_credentials("svc", "s3cret")
        with mcpsync.Session.connect(server.url, auth=auth, **otel.providers) as s:
            s.call_tool("echo", {"message": "m2m"})
    connect, handshake = otel.span("connect"), otel.span("handshake")
    auth_span = otel.span("auth")
    assert handshake.parent.span_id == connect.context.span_id
    assert auth_span.parent.span_id == handshake.context.span_id
    assert otel.span("discovery").parent.span_id == auth_span.context.span_id
    assert otel.span("token").parent.span_id == auth_span.context.span_id
    assert handshake.attributes["mcpsync.phase.auth"] > 0


_LATER = """
import sys, time
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import mcpsync

with mcpsync.Session.connect({argv!r}) as s:
    s.call_tool("echo", {{"message": "before"}})  # no SDK yet: nothing recorded
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the application configures its SDK now
    deadline = time.monotonic() + 30
    calls = 0
    while not exporter.get_finished_spans() and time.monotonic() < deadline:
        s.call_tool("echo", {{"message": "after"}})
        calls += 1
    names = {{span.name for span in exporter.get_finished_spans()}}
print(sorted(names), calls > 0)
"""


def test_a_global_provider_set_after_connect_is_used_from_then_on():
    code = _LATER.format(argv=demo_argv())
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("]")[0] + "]" == "['tools/call echo']"
