"""What OpenTelemetry costs on sequential stdio calls: none vs the API alone vs an SDK, one run.

Owns: the telemetry rows of ``benchmarks/bench.py`` (issue 28, point 6). Three variants of
the same workload (``mcpsync.Session.connect`` to ``python -m mcpsync.demo_server``, 300
warm-up calls, then sequential ``tools/call echo`` for ``seconds``, three phases, the best kept),
each in a fresh worker process (this file with ``--worker VARIANT``):

- ``none``: as if ``opentelemetry-api`` were not installed (``sys.modules["opentelemetry"]``
  is None in the worker before mcpsync is imported: the import fails as for a missing
  package, so ``mcpsync.telemetry.make`` returns None);
- ``api``: the API installed, no SDK configured (the global providers are the API's proxies):
  what every user with ``opentelemetry-api`` in their environment gets;
- ``sdk``: the SDK configured as an application does, globally: a ``TracerProvider`` with a
  ``BatchSpanProcessor`` and a ``MeterProvider`` with a ``PeriodicExportingMetricReader``,
  both exporting to a no-op exporter (every span and data point is made and handed over).

Rounds interleave the variants in a rotating order; per variant the best rate and the lowest
client CPU per call (this process, all threads: ``time.process_time``; the server apart) over
the rounds. Targets (printed, never asserted): api >= 0.98x none, sdk >= 0.85x none.

    python benchmarks/otel_bench.py [--rounds 3] [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

__all__ = ["measure", "render", "main", "VARIANTS"]

VARIANTS = ("none", "api", "sdk")
TARGETS = {"api": 0.98, "sdk": 0.85}
ECHO_ARGS = {"message": "hello"}
MARK = "OTEL-BENCH "


def _configure_sdk() -> None:
    """Global SDK providers exporting to nothing (the ``sdk`` variant)."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class NoSpans(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class NoMetrics(MetricExporter):
        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            pass

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(NoSpans()))
    trace.set_tracer_provider(tracer_provider)
    reader = PeriodicExportingMetricReader(NoMetrics(), export_interval_millis=5_000)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))


def worker(variant: str, seconds: float) -> dict[str, Any]:
    if variant == "none":
        sys.modules["opentelemetry"] = None  # type: ignore[assignment]  # "not installed"
    elif variant == "sdk":
        _configure_sdk()
    import mcpsync

    best_rate, best_cpu = 0.0, float("inf")
    argv = [sys.executable, "-m", "mcpsync.demo_server"]
    with mcpsync.Session.connect(argv, name="bench-otel") as session:
        call = session.call_tool
        for _ in range(300):
            call("echo", ECHO_ARGS)
        for _ in range(3):
            count, started, cpu = 0, time.perf_counter(), time.process_time()
            deadline = started + seconds / 3
            while True:
                call("echo", ECHO_ARGS)
                count += 1
                if count % 50 == 0 and time.perf_counter() >= deadline:
                    break
            best_rate = max(best_rate, count / (time.perf_counter() - started))
            best_cpu = min(best_cpu, (time.process_time() - cpu) / count)
    loaded = any(name.startswith("opentelemetry.sdk") for name in sys.modules)
    out = {"rate": best_rate, "cpu_us": best_cpu * 1e6, "sdk_loaded": loaded}
    if variant == "sdk":
        out["sdk_floor_us"] = _sdk_floor()
    return out


def _sdk_floor(count: int = 3000) -> float:
    """CPU us per call of what the SDK itself does for one traced call, without mcpsync: a
    CLIENT span with the attributes of an echo call, the context injected into a dict, the
    span ended, one histogram data point (best of 3 runs, this process's CPU)."""
    from opentelemetry import metrics, propagate, trace

    tracer = trace.get_tracer("floor")
    histogram = metrics.get_meter("floor").create_histogram("floor.duration", unit="s")
    attrs = {"network.transport": "pipe", "mcp.protocol.version": "2025-11-25",
             "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
             "gen_ai.tool.name": "echo"}  # fmt: skip
    best = float("inf")
    for _ in range(3):
        cpu = time.process_time()
        for rid in range(count):
            span = tracer.start_span(
                "tools/call echo", kind=trace.SpanKind.CLIENT,
                attributes={**attrs, "jsonrpc.request.id": str(rid)},
            )  # fmt: skip
            carrier: dict[str, str] = {}
            propagate.inject(carrier, context=trace.set_span_in_context(span))
            span.end()
            histogram.record(0.0001, attrs)
        best = min(best, (time.process_time() - cpu) / count)
    return best * 1e6


def _run(variant: str, seconds: float) -> dict[str, Any]:
    argv = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        variant,
        "--seconds",
        str(seconds),
    ]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 120 s"}
    for line in reversed(out.stdout.splitlines()):
        if line.startswith(MARK):
            return dict(json.loads(line[len(MARK) :]))
    return {"error": f"worker exited {out.returncode}: {out.stderr.strip()[-300:]}"}


def measure(rounds: int = 3, seconds: float = 1.0) -> dict[str, Any]:
    """Every variant ``rounds`` times, interleaved; the raw runs and the best of each."""
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for index in range(rounds):
        order = VARIANTS[index % 3 :] + VARIANTS[: index % 3]
        for variant in order:
            result = _run(variant, seconds)
            runs[variant].append(result)
            print(f"  [otel round {index + 1}] {variant:5s} {result}", file=sys.stderr)
    best: dict[str, dict[str, float | None]] = {}
    for variant, results in runs.items():
        good = [r for r in results if "error" not in r]
        best[variant] = {
            "rate": max((r["rate"] for r in good), default=None),
            "cpu_us": min((r["cpu_us"] for r in good), default=None),
        }
    floors = [r["sdk_floor_us"] for r in runs["sdk"] if "sdk_floor_us" in r]
    best["sdk"]["floor_us"] = min(floors, default=None)
    return {"rounds": rounds, "seconds": seconds, "runs": runs, "best": best}


def render(result: dict[str, Any]) -> str:
    best = result["best"]
    base = best["none"]
    lines = [
        "telemetry (stdio, sequential echo, python -m mcpsync.demo_server; best of "
        f"{result['rounds']} interleaved rounds)",
        f"  {'variant':44s} {'calls/s':>9s} {'CPU/call us':>12s} {'rate vs none':>13s} "
        f"{'CPU vs none':>12s}   target (rate)",
    ]
    labels = {
        "none": "no OpenTelemetry (as if not installed)",
        "api": "opentelemetry-api, no SDK configured",
        "sdk": "SDK: batch spans + metrics, no-op exporters",
    }
    for variant in VARIANTS:
        row = best[variant]
        rate, cpu = row["rate"], row["cpu_us"]
        if rate is None or cpu is None:
            lines.append(f"  {labels[variant]:44s} failed: {result['runs'][variant]}")
            continue
        ratio = rate / base["rate"] if base["rate"] else None
        cpu_ratio = cpu / base["cpu_us"] if base["cpu_us"] else None
        target = TARGETS.get(variant)
        verdict = ""
        if target is not None and ratio is not None:
            verdict = f">= {target:.2f}x  {'ok' if ratio >= target else 'MISS'}"
        lines.append(
            f"  {labels[variant]:44s} {rate:9,.0f} {cpu:12.1f} "
            f"{'-' if ratio is None else f'{ratio:.3f}x':>13s} "
            f"{'-' if cpu_ratio is None else f'{cpu_ratio:.3f}x':>12s}   {verdict}"
        )
    floor = best["sdk"].get("floor_us")
    if floor is not None and best["sdk"]["cpu_us"] is not None and base["cpu_us"] is not None:
        extra = best["sdk"]["cpu_us"] - base["cpu_us"]
        lines.append(
            f"  the SDK's own work for one traced call, without mcpsync (a span with these "
            f"attributes, inject, end, one histogram point): {floor:.1f} us of the {extra:.1f} us "
            "added per call"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="per worker, in 3 phases")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(MARK + json.dumps(worker(args.worker, args.seconds)), flush=True)
        return 0
    print(render(measure(args.rounds, args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
