"""The OpenTelemetry implementation of ``Instrument``, per the MCP semantic conventions.

Owns: ``OtelInstrument`` (one per session: the CLIENT span of every request and notification,
its attributes and error mapping, the trace context injected into ``params._meta``, the
SERVER span of the server's requests parented on the context extracted from theirs, the
``connect`` span and its phases, the two client histograms), ``error_of`` (an outcome as
``error.type``) and ``extract`` (a ``_meta`` as a parent context; a malformed
``traceparent`` is dropped with a debug log). Imports ``opentelemetry`` (the API only) at
import: ``mcpsync.telemetry.make`` imports this module only when telemetry is on.

No SDK configured (the API's own proxy or no-op providers) costs one look at the provider
and the current context per message: no span is made, and a context the caller holds is
still propagated (as the API's no-op tracer would).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import SpanKind, StatusCode

from .._version import __version__
from ..errors import RequestCancelled, RequestTimeout, ServerError
from .instrument import Served, Telemetry

__all__ = ["OtelInstrument", "error_of", "extract", "SCOPE"]

log = logging.getLogger("mcpsync.telemetry")

#: the instrumentation scope of every span and metric
SCOPE = "mcpsync"
#: the histograms' bucket boundaries the conventions recommend (seconds)
BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
#: seconds between two looks at the global providers while they are the API's own
_RECHECK = 0.5
#: messages between two looks at the clock while no provider is live
_COUNTDOWN = 16
#: the current OpenTelemetry context (empty: nothing to propagate)
_current = otel_context.get_current
_TRACEPARENT = re.compile(
    r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}"
)
_TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def _propagator() -> Any:
    """The configured propagators (``opentelemetry.propagate``, imported on first use: its
    import reads entry points, a cost the common case, no SDK and no context, never pays)."""
    from opentelemetry import propagate

    return propagate


def _api_only(provider: Any) -> bool:
    """True for the API's own providers (proxy or no-op): no SDK behind them."""
    return type(provider).__module__.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


def error_of(value: Any, error: BaseException | None) -> tuple[str, str | None, str] | None:
    """An outcome as (``error.type``, ``rpc.response.status_code``, description); None: success.

    A JSON-RPC error reply: its code, in both; a result with ``isError``: ``tool_error``; a
    timeout: ``timeout``; a cancellation: ``cancelled``; any other client-side failure: the
    error's class (qualified name)."""
    if error is None:
        if type(value) is dict and value.get("isError") is True:
            return "tool_error", None, "the tool's result has isError: true"
        return None
    if isinstance(error, ServerError):
        code = str(error.code)
        return code, code, error.message
    if isinstance(error, RequestTimeout):
        return "timeout", None, str(error)
    if isinstance(error, RequestCancelled):
        return "cancelled", None, str(error)
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}", None, str(error)


def extract(meta: Any) -> Any:
    """The context ``meta`` (a message's ``_meta``) carries, for a SERVER span's parent; None
    when it carries none. A ``traceparent`` that is not W3C's form is ignored (debug log)."""
    if not isinstance(meta, dict):
        return None
    carrier = {k: v for k in _TRACE_KEYS if isinstance(v := meta.get(k), str)}
    if "traceparent" in meta and "traceparent" not in carrier:
        log.debug("mcpsync: ignoring a malformed traceparent in _meta: %.80r", meta["traceparent"])
    if not carrier:
        return None
    parent = carrier.get("traceparent")
    if parent is not None and not _TRACEPARENT.fullmatch(parent.strip()):
        log.debug("mcpsync: ignoring a malformed traceparent in _meta: %.80r", parent)
        carrier.pop("traceparent")
        carrier.pop("tracestate", None)
    return _propagator().extract(carrier) if carrier else None


def _target(method: str, params: dict[str, Any] | None, attrs: dict[str, Any]) -> str:
    """The span name's target, putting the tool, prompt or resource attributes in ``attrs``."""
    if not params:
        return method
    if method == "tools/call":
        tool = params.get("name")
        attrs["gen_ai.operation.name"] = "execute_tool"
        if isinstance(tool, str):
            attrs["gen_ai.tool.name"] = tool
            return f"{method} {tool}"
    elif method == "prompts/get":
        prompt = params.get("name")
        if isinstance(prompt, str):
            attrs["gen_ai.prompt.name"] = prompt
            return f"{method} {prompt}"
    elif method.startswith("resources/"):
        uri = params.get("uri")
        if isinstance(uri, str):
            attrs["mcp.resource.uri"] = uri
    return method


def _inject(params: dict[str, Any] | None, carrier: dict[str, str]) -> dict[str, Any] | None:
    """``params`` with ``carrier`` in a copy of its ``_meta``; the user's own keys are kept,
    and a ``traceparent`` of theirs wins (with its ``tracestate``)."""
    if not carrier:
        return params
    params = dict(params) if params else {}
    given = params.get("_meta")
    meta = dict(given) if isinstance(given, dict) else {}
    if "traceparent" in meta:
        carrier.pop("traceparent", None)
        carrier.pop("tracestate", None)
    for key, value in carrier.items():
        meta.setdefault(key, value)
    params["_meta"] = meta
    return params


class _Ending:
    """The ``Finish`` of one request: ends its span, records its duration (once)."""

    __slots__ = ("owner", "span", "attrs", "started", "tool", "metering")

    def __init__(
        self, owner: OtelInstrument, span: Any, attrs: dict[str, Any], tool: bool, metering: bool
    ) -> None:
        self.owner = owner
        self.span = span
        self.attrs = attrs  # the metric's (the span has its own)
        self.tool = tool
        self.metering = metering
        self.started = time.perf_counter()

    def __call__(self, value: Any, error: BaseException | None) -> None:
        seconds = time.perf_counter() - self.started
        owner, span, attrs = self.owner, self.span, self.attrs
        failure = error_of(value, error) if (error is not None or self.tool) else None
        if failure is not None:
            kind, code, description = failure
            attrs["error.type"] = kind
            if code is not None:
                attrs["rpc.response.status_code"] = code
        if span is not None:
            if failure is not None:
                span.set_attribute("error.type", failure[0])
                if failure[1] is not None:
                    span.set_attribute("rpc.response.status_code", failure[1])
                span.set_status(StatusCode.ERROR, failure[2])
            if owner.capture_content and self.tool and error is None:
                span.set_attribute("gen_ai.tool.call.result", _json(value))
            span.end()
        if attrs.get("mcp.method.name") == "initialize" and type(value) is dict:
            version = value.get("protocolVersion")  # what follows (initialized) carries it
            if isinstance(version, str):
                owner.common = {**owner.common, "mcp.protocol.version": version}
        if self.metering:
            owner.operation_duration.record(seconds, attrs)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


class _Mark:
    """The ``Served`` of one SERVER span."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def __call__(self, code: int, message: str) -> None:
        if self.span is not None:
            self.span.set_attribute("error.type", str(code))
            self.span.set_attribute("rpc.response.status_code", str(code))
            self.span.set_status(StatusCode.ERROR, message)


class OtelInstrument:
    """One session's telemetry through the OpenTelemetry API (see the module docstring)."""

    def __init__(self, options: Telemetry, name: str) -> None:
        self.name = name
        self.capture_content = options.capture_content
        self._tracer_provider = options.tracer_provider
        self._meter_provider = options.meter_provider
        provider = options.tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer(SCOPE, __version__)
        meter = (options.meter_provider or metrics.get_meter_provider()).get_meter(
            SCOPE, __version__
        )
        self.operation_duration = meter.create_histogram(
            "mcp.client.operation.duration", unit="s",
            description="Duration of an MCP request or notification as the client saw it",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )  # fmt: skip
        self.session_duration = meter.create_histogram(
            "mcp.client.session.duration", unit="s",
            description="Duration of an MCP session as the client saw it",
            explicit_bucket_boundaries_advisory=BUCKETS,
        )  # fmt: skip
        # None: follow the global provider (looked at again every _RECHECK s while it is
        # the API's own); True/False: fixed (a provider given, or an SDK found globally)
        self._tracing: bool | None = (
            None if options.tracer_provider is None else not _api_only(provider)
        )
        self._metering: bool | None = None
        if options.meter_provider is not None:
            self._metering = not _api_only(options.meter_provider)
        self._next_look = 0.0
        self._global = (False, False)
        #: neither provider live as of the last look: messages skip everything but the
        #: context check until ``_countdown`` reaches 0 (then ``_live`` looks again)
        self._asleep = False
        self._countdown = 0
        self._live()
        #: attributes every span and metric of the session carries
        self.common: dict[str, Any] = {}
        self._session_id: Callable[[], str | None] = lambda: None
        self._started = time.perf_counter()
        self._ended = False

    # -- which providers are live --------------------------------------------------------

    def _live(self) -> tuple[bool, bool]:
        """(tracing, metering): an SDK (or any non-API provider) behind each. The global
        providers are looked at again every ``_RECHECK`` s while they are the API's own
        (an application may configure its SDK after connecting); once one is found, it stays
        (a global provider is set once)."""
        tracing, metering = self._tracing, self._metering
        if tracing is not None and metering is not None:
            return tracing, metering
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + _RECHECK
            self._global = (
                not _api_only(trace.get_tracer_provider()),
                not _api_only(metrics.get_meter_provider()),
            )
        found = (
            self._global[0] if tracing is None else tracing,
            self._global[1] if metering is None else metering,
        )
        if tracing is None and found[0]:
            self._tracing = True
        if metering is None and found[1]:
            self._metering = True
        self._asleep = not (found[0] or found[1])
        self._countdown = _COUNTDOWN
        return found

    def metering(self) -> bool:
        return self._live()[1]

    # -- requests and notifications --------------------------------------------------------

    def notification(
        self, method: str, params: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, _Ending | None]:
        return self.request(method, None, params)

    def request(
        self, method: str, rid: int | None, params: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, _Ending | None]:
        if self._asleep:  # no SDK (as of the last look, at most _COUNTDOWN messages ago)
            self._countdown -= 1
            if self._countdown > 0 or not any(self._live()):
                if not _current():  # nothing to carry (the common case)
                    return params, None
                carrier: dict[str, str] = {}
                _propagator().inject(carrier)
                return _inject(params, carrier), None
        tracing, metering = self._live()
        attrs = dict(self.common)
        attrs["mcp.method.name"] = method
        name = _target(method, params, attrs)
        if method == "initialize" and params and "mcp.protocol.version" not in attrs:
            version = params.get("protocolVersion")
            if isinstance(version, str):
                attrs["mcp.protocol.version"] = version
        metric_attrs = dict(attrs) if metering else attrs
        if rid is not None:
            attrs["jsonrpc.request.id"] = str(rid)
        session_id = self._session_id()
        if session_id:
            attrs["mcp.session.id"] = session_id
        tool = method == "tools/call"
        if tool and self.capture_content and params and "arguments" in params:
            attrs["gen_ai.tool.call.arguments"] = _json(params["arguments"])
        span = None
        carrier = {}
        if tracing:
            span = self._tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
            _propagator().inject(carrier, context=trace.set_span_in_context(span))
        elif otel_context.get_current():
            _propagator().inject(carrier)
        return _inject(params, carrier), _Ending(self, span, metric_attrs, tool, metering)

    # -- the server's requests -----------------------------------------------------------

    @contextmanager
    def serving(self, method: str, rid: Any, params: dict[str, Any]) -> Iterator[Served]:
        parent = extract(params.get("_meta"))
        if not self._live()[0]:
            token = otel_context.attach(parent) if parent is not None else None
            try:
                yield _Mark(None)
            finally:
                if token is not None:
                    otel_context.detach(token)
            return
        attrs = dict(self.common)
        attrs["mcp.method.name"] = method
        attrs["jsonrpc.request.id"] = str(rid)
        span = self._tracer.start_span(
            method, context=parent, kind=SpanKind.SERVER, attributes=attrs
        )
        with trace.use_span(span, end_on_exit=True):
            yield _Mark(span)

    # -- the bring-up and the session ------------------------------------------------------

    def connecting(self, name: str) -> Any:
        if not self._live()[0]:
            return nullcontext()
        return self._tracer.start_as_current_span(
            "connect", kind=SpanKind.INTERNAL, attributes={"mcpsync.server.name": name}
        )

    def phase(self, name: str) -> Any:
        if not self._live()[0]:
            return nullcontext()
        return self._tracer.start_as_current_span(name, attributes=self.common)

    def bind(self, kind: str, url: str | None, session_id: Callable[[], str | None]) -> None:
        # the session's name (a Host's entry name): for stdio servers the only one they have
        common: dict[str, Any] = {"mcpsync.server.name": self.name}
        if kind == "stdio":
            common["network.transport"] = "pipe"
        elif url is not None:
            parts = urlsplit(url)
            common["network.transport"] = "tcp"
            common["network.protocol.name"] = "http"
            common["network.protocol.version"] = "1.1"
            if parts.hostname:
                common["server.address"] = parts.hostname
                try:
                    port = parts.port
                except ValueError:
                    port = None
                common["server.port"] = port or (443 if parts.scheme == "https" else 80)
        version = self.common.get("mcp.protocol.version")
        if version is not None:
            common["mcp.protocol.version"] = version
        self.common = common
        self._session_id = session_id

    def agreed(self, protocol_version: str, phases: dict[str, float]) -> None:
        self.common = {**self.common, "mcp.protocol.version": protocol_version}
        span = trace.get_current_span()
        if span.is_recording():
            for phase, seconds in phases.items():
                span.set_attribute(f"mcpsync.phase.{phase}", seconds)

    def session_ended(self, error: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        if not self.metering():
            return
        attrs = dict(self.common)
        failure = error_of(None, error)
        if failure is not None:
            attrs["error.type"] = failure[0]
        self.session_duration.record(time.perf_counter() - self._started, attrs)
