"""mcpsync vs a bare JSON-RPC loop vs the official ``mcp`` SDK client, against the same server.

Run::

    .venv/bin/python benchmarks/bench.py [--quick] [--json out.json] [--only stdio|http|threads|replay|otel]
                                         [--http-server stdlib|sdk] [--rounds N] [--profile stdio|http]

Owns: the benchmark. Every client runs its whole workload in its own subprocess (this file
with ``--worker``), bounded by a timeout, and reports its numbers back as one JSON line, so
that the clients never share an interpreter, an event loop or a peak RSS. Clients:

- ``mcpsync``: ``mcpsync.Session.connect(...)`` and ``call_tool``;
- ``bare``: the ceiling for a synchronous Python client: per message one ``json.dumps``, one
  write (+flush) and one ``readline`` on a buffered pipe, one ``json.loads`` (stdio); one
  ``http.client`` keep-alive POST per message (HTTP). No validation, no typing, nothing else;
- ``sdk``: the official ``mcp`` SDK client (``ClientSession`` over ``stdio_client`` /
  ``streamable_http_client``) inside ``asyncio.run``.

Workloads (stdio against ``python -m mcpsync.demo_server``; HTTP against the stdlib endpoint in
``benchmarks/http_server.py``, or the official-SDK server with ``--http-server sdk``):
bring-up (spawn + initialize, median of N sessions), sequential ``tools/call echo`` (rate,
p50/p99 latency), 8 threads sharing one session (the bare loop: 8 threads sharing one pipe,
a lock around each round trip; over HTTP one keep-alive connection per thread; the SDK: 8
tasks on one session), ``big`` results of 1 MB and 10 MB (MB/s, median), peak RSS
(``ru_maxrss`` of the worker, after the sequential phase and at the end), import time in a
fresh interpreter (median) and the cold time from a fresh interpreter to the first result.

Rounds (3 by default, 1 with ``--quick``) run the clients interleaved, rotating their order;
each number is the best over the rounds (highest rate, lowest time), so that load from other
processes on the machine disturbs the ratios as little as possible. Nothing here asserts a
timing: the targets are printed next to the ratios.

``--profile stdio|http`` runs mcpsync's workload (sequential echo, then 10 MB results) under
cProfile instead and prints where its time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

__all__ = ["main"]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = sys.executable
DEMO_ARGV = [PYTHON, "-m", "mcpsync.demo_server"]
CLIENTS = ("mcpsync", "bare", "sdk")
ECHO_ARGS = {"message": "hello"}
RESULT_MARK = "BENCH-RESULT "
LATEST_VERSION = "2025-11-25"
INIT_PARAMS = {
    "protocolVersion": LATEST_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "bench-bare", "version": "0"},
}
MB = 1_000_000

# Targets from the issue: (metric, kind, bound); kind "min" = ratio >= bound, "max" = <= bound.
STDIO_TARGETS = {
    "bringup_ms": ("max", 1.15),
    "seq_rate": ("min", 0.85),
    "threads_rate": ("min", 0.5),
    "big10_mbps": ("min", 0.8),
}
HTTP_TARGETS = {
    "seq_rate": ("min", 0.55),
    "big10_mbps": ("min", 0.8),
}


def _now() -> float:
    return time.perf_counter()


def _cpu() -> float:
    """CPU seconds (user + system) of this process so far, all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _maxrss_mb() -> float:
    # Linux reports kilobytes, macOS bytes.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


# ======================================================================================
# Workers: one client, one workload, in this (sub)process. Output: one JSON line.
# ======================================================================================


class _BareStdio:
    """Write a JSON line, read a JSON line: buffered pipes, a lock around each round trip."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._write, self._flush = self.proc.stdin.write, self.proc.stdin.flush
        self._readline = self.proc.stdout.readline
        self._lock = threading.Lock()
        self._ids = iter(range(1, 1 << 62))
        self.request("initialize", INIT_PARAMS)
        self._send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def _send(self, data: bytes) -> None:
        with self._lock:
            self._write(data)
            self._flush()

    def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self._ids)
        data = (
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
            + b"\n"
        )
        with self._lock:
            self._write(data)
            self._flush()
            line = self._readline()
        reply = json.loads(line)
        if reply.get("id") != rid or "result" not in reply:
            raise RuntimeError(f"unexpected reply to {method}: {line[:200]!r}")
        return reply["result"]

    def echo(self) -> None:
        result = self.request("tools/call", {"name": "echo", "arguments": ECHO_ARGS})
        assert result["content"][0]["text"] == ECHO_ARGS["message"]

    def big(self, size: int) -> None:
        result = self.request("tools/call", {"name": "big", "arguments": {"size_bytes": size}})
        assert len(result["content"][0]["text"]) == size

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class _BareHttp:
    """One ``http.client`` keep-alive connection per thread; one POST per request."""

    def __init__(self, url: str) -> None:
        import http.client
        import urllib.parse

        self._http = http.client
        parsed = urllib.parse.urlsplit(url)
        self._host, self._port, self._path = parsed.hostname, parsed.port, parsed.path or "/"
        self._local = threading.local()
        self._ids = iter(range(1, 1 << 62))
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LATEST_VERSION,
        }
        self._conns: list[Any] = []
        self.request("initialize", INIT_PARAMS)
        self._post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._http.HTTPConnection(self._host, self._port, timeout=60)
            self._conns.append(conn)
        return conn

    def _post(self, body: bytes) -> bytes:
        conn = self._conn()
        conn.request("POST", self._path, body, self._headers)
        response = conn.getresponse()
        data = response.read()
        if response.status not in (200, 202):
            raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
        return data

    def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self._ids)
        data = self._post(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        )
        reply = json.loads(data)
        if reply.get("id") != rid or "result" not in reply:
            raise RuntimeError(f"unexpected reply to {method}: {data[:200]!r}")
        return reply["result"]

    echo = _BareStdio.echo
    big = _BareStdio.big

    def close(self) -> None:
        for conn in self._conns:
            conn.close()


class _Mcpsync:
    def __init__(self, target: Any) -> None:
        import mcpsync

        self.session = mcpsync.Session.connect(target, name="bench")

    def echo(self) -> None:
        result = self.session.call_tool("echo", ECHO_ARGS)
        assert result.content[0].text == ECHO_ARGS["message"]

    def big(self, size: int) -> None:
        result = self.session.call_tool("big", {"size_bytes": size})
        assert len(result.content[0].text) == size

    def close(self) -> None:
        self.session.close()


def _percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    n = len(ordered)
    return {"p50_ms": ordered[n // 2] * 1e3, "p99_ms": ordered[min(n - 1, int(n * 0.99))] * 1e3}


def _run_sync(conf: dict[str, Any]) -> dict[str, Any]:
    """The workload for a blocking client (mcpsync or bare)."""
    client, transport = conf["client"], conf["transport"]
    target: Any = conf["server_argv"] if transport == "stdio" else conf["url"]
    out: dict[str, Any] = {"rss_mb": {"start": _maxrss_mb()}}

    def connect() -> Any:
        if client == "mcpsync":
            return _Mcpsync(target)
        return _BareStdio(target) if transport == "stdio" else _BareHttp(target)

    if client == "mcpsync":
        import mcpsync  # noqa: F401  (the import is measured separately, not as bring-up)
    out["rss_mb"]["imported"] = _maxrss_mb()

    times = []
    for _ in range(conf["bringup_n"]):
        started = _now()
        c = connect()
        times.append(_now() - started)
        c.close()
    out["bringup_s"] = times

    c = connect()
    try:
        for _ in range(conf["warmup"]):
            c.echo()
        out["rss_mb"]["warm"] = _maxrss_mb()
        # sequential
        latencies: list[float] = []
        add = latencies.append
        echo = c.echo
        limit, count = conf["seq_seconds"], conf["seq_max"]
        cpu = _cpu()
        started = _now()
        deadline = started + limit
        t = started
        while len(latencies) < count and t < deadline:
            echo()
            t2 = _now()
            add(t2 - t)
            t = t2
        cpu = _cpu() - cpu
        out["seq"] = {
            "n": len(latencies),
            "s": t - started,
            "cpu_s": cpu,
            **_percentiles(latencies),
        }
        out["rss_mb"]["after_seq"] = _maxrss_mb()
        # n threads sharing the client
        cpu = _cpu()
        out["threads"] = _threaded(echo, conf["threads"], conf["thread_seconds"])
        out["threads"]["cpu_s"] = _cpu() - cpu
        out["rss_mb"]["after_threads"] = _maxrss_mb()
        # big results
        c.big(MB)  # warm
        out["big_s"] = {}
        for size, reps in conf["big"]:
            runs = []
            for _ in range(reps):
                started = _now()
                c.big(size)
                runs.append(_now() - started)
            out["big_s"][str(size)] = runs
    finally:
        c.close()
    out["rss_mb"]["peak"] = _maxrss_mb()
    return out


def _threaded(call: Any, n: int, seconds: float) -> dict[str, Any]:
    counts = [0] * n
    errors: list[str] = []
    barrier = threading.Barrier(n + 1)
    deadline = [0.0]

    def run(i: int) -> None:
        barrier.wait()
        end, done = deadline[0], 0
        try:
            while _now() < end:
                call()
                done += 1
        except Exception as exc:  # reported, not raised: the other threads go on
            errors.append(repr(exc))
        counts[i] = done

    threads = [
        threading.Thread(target=run, args=(i,), name=f"bench-caller[{i}]", daemon=True)
        for i in range(n)
    ]
    for thread in threads:
        thread.start()
    deadline[0] = _now() + seconds
    barrier.wait()
    started = _now()
    for thread in threads:
        thread.join(seconds + 60)
    elapsed = _now() - started
    if errors:
        raise RuntimeError(f"{len(errors)} caller thread(s) failed: {errors[0]}")
    return {"n": sum(counts), "s": elapsed, "per_thread": counts}


async def _run_sdk(conf: dict[str, Any]) -> dict[str, Any]:
    """The same workload with the official SDK client (in this worker's event loop)."""
    import asyncio
    import contextlib

    out: dict[str, Any] = {"rss_mb": {"start": _maxrss_mb()}}
    from mcp.client.session import ClientSession

    transport = conf["transport"]
    devnull = open(os.devnull, "w")  # the server's stderr (the SDK needs a real file)
    if transport == "stdio":
        from mcp.client.stdio import StdioServerParameters, stdio_client

        argv = conf["server_argv"]
        params = StdioServerParameters(command=argv[0], args=argv[1:])

        def streams() -> Any:
            return stdio_client(params, errlog=devnull)
    else:
        from mcp.client.streamable_http import streamable_http_client

        def streams() -> Any:
            return streamable_http_client(conf["url"])

    out["rss_mb"]["imported"] = _maxrss_mb()

    async def connect(stack: contextlib.AsyncExitStack) -> ClientSession:
        read, write = await stack.enter_async_context(streams())
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        return session

    async def echo(session: ClientSession) -> None:
        result = await session.call_tool("echo", ECHO_ARGS)
        assert result.content[0].text == ECHO_ARGS["message"]  # type: ignore[union-attr]

    async def big(session: ClientSession, size: int) -> None:
        result = await session.call_tool("big", {"size_bytes": size})
        assert len(result.content[0].text) == size  # type: ignore[union-attr]

    times = []
    for _ in range(conf["bringup_n"]):
        async with contextlib.AsyncExitStack() as stack:
            started = _now()
            await connect(stack)
            times.append(_now() - started)
    out["bringup_s"] = times

    async with contextlib.AsyncExitStack() as stack:
        session = await connect(stack)
        for _ in range(conf["warmup"]):
            await echo(session)
        out["rss_mb"]["warm"] = _maxrss_mb()
        latencies: list[float] = []
        limit, count = conf["seq_seconds"], conf["seq_max"]
        cpu = _cpu()
        started = _now()
        deadline = started + limit
        t = started
        while len(latencies) < count and t < deadline:
            await echo(session)
            t2 = _now()
            latencies.append(t2 - t)
            t = t2
        cpu = _cpu() - cpu
        out["seq"] = {
            "n": len(latencies),
            "s": t - started,
            "cpu_s": cpu,
            **_percentiles(latencies),
        }
        out["rss_mb"]["after_seq"] = _maxrss_mb()

        n = conf["threads"]
        counts = [0] * n
        end = _now() + conf["thread_seconds"]

        async def task(i: int) -> None:
            while _now() < end:
                await echo(session)
                counts[i] += 1

        cpu = _cpu()
        started = _now()
        await asyncio.gather(*(task(i) for i in range(n)))
        elapsed, cpu = _now() - started, _cpu() - cpu
        out["threads"] = {"n": sum(counts), "s": elapsed, "cpu_s": cpu, "per_thread": counts}
        out["rss_mb"]["after_threads"] = _maxrss_mb()

        await big(session, MB)
        out["big_s"] = {}
        for size, reps in conf["big"]:
            runs = []
            for _ in range(reps):
                started = _now()
                await big(session, size)
                runs.append(_now() - started)
            out["big_s"][str(size)] = runs
    devnull.close()
    out["rss_mb"]["peak"] = _maxrss_mb()
    return out


def worker_main(conf: dict[str, Any]) -> int:
    try:
        if conf["client"] == "sdk":
            import asyncio

            result = asyncio.run(_run_sdk(conf))
        else:
            result = _run_sync(conf)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
        import traceback

        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


# ======================================================================================
# Parent: spawn workers, gather, print.
# ======================================================================================


def _run_child(
    argv: list[str], timeout: float, cwd: str | None = None
) -> tuple[int | None, str, str]:
    """Run a child in its own process group (in ``cwd``, default the checkout: its
    ``mcpsync`` is the one imported); on timeout kill the whole group."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd or ROOT,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate(timeout=10)
        return None, out, err


def run_worker(conf: dict[str, Any], timeout: float) -> dict[str, Any]:
    code, out, err = _run_child(
        [PYTHON, os.path.abspath(__file__), "--worker", json.dumps(conf)], timeout
    )
    if code is None:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_MARK):
            result = json.loads(line[len(RESULT_MARK) :])
            if "error" in result and err.strip():
                result["stderr_tail"] = err.strip().splitlines()[-3:]
            return result
    return {"error": f"worker exited {code} without a result: {err.strip()[-300:]}"}


def _median_time_of(code: str, reps: int, timeout: float = 60.0) -> float | None:
    """Median over ``reps`` fresh interpreters of the float that ``code`` prints."""
    values = []
    for _ in range(reps):
        rc, out, err = _run_child([PYTHON, "-c", code], timeout)
        try:
            values.append(float(out.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            print(f"  (failed: {err.strip()[-200:]})", file=sys.stderr)
            return None
    return statistics.median(values)


IMPORTS = (
    ("import mcpsync", "import mcpsync"),
    ("import mcpsync + mcp_types (typed results, lazy)", "import mcpsync, mcp_types"),
    ("import mcp.client.session (official)", "import mcp.client.session"),
    (
        "import mcp.client.session + .stdio (official)",
        "import mcp.client.session, mcp.client.stdio",
    ),
)


def measure_imports(reps: int) -> dict[str, float | None]:
    out = {}
    for label, stmt in IMPORTS:
        code = f"import time\nt = time.perf_counter()\n{stmt}\nprint(time.perf_counter() - t)"
        out[label] = _median_time_of(code, reps)
    return out


_COLD = {
    "mcpsync": """
import time; t0 = time.perf_counter()
import sys, mcpsync
s = mcpsync.Session.connect({argv!r})
assert s.call_tool("echo", {{"message": "hello"}}).content[0].text == "hello"
print(time.perf_counter() - t0, flush=True)
s.close()
""",
    "bare": """
import time; t0 = time.perf_counter()
import json, subprocess
p = subprocess.Popen({argv!r}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
def rt(m):
    p.stdin.write(json.dumps(m).encode() + b"\\n"); p.stdin.flush(); return json.loads(p.stdout.readline())
rt({{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {init!r}}})
p.stdin.write(b'{{"jsonrpc":"2.0","method":"notifications/initialized"}}\\n')
r = rt({{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {{"name": "echo", "arguments": {{"message": "hello"}}}}}})
assert r["result"]["content"][0]["text"] == "hello"
print(time.perf_counter() - t0, flush=True)
p.stdin.close(); p.wait(5)
""",
    "sdk": """
import time; t0 = time.perf_counter()
import asyncio, os
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
async def main():
    with open(os.devnull, "w") as devnull:
        params = StdioServerParameters(command={argv0!r}, args={args!r})
        async with stdio_client(params, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("echo", {{"message": "hello"}})
            assert res.content[0].text == "hello"
            print(time.perf_counter() - t0, flush=True)
asyncio.run(main())
""",
}


def measure_cold(reps: int, argv: list[str]) -> dict[str, float | None]:
    out = {}
    for client in CLIENTS:
        code = _COLD[client].format(argv=argv, init=INIT_PARAMS, argv0=argv[0], args=argv[1:])
        out[client] = _median_time_of(code, reps)
    return out


def _best(values: list[float], higher: bool) -> float | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return max(values) if higher else min(values)


def summarize(rounds: list[dict[str, Any]], sizes: list[int]) -> dict[str, dict[str, Any]]:
    """Per client: the best value over the rounds of every metric."""
    summary: dict[str, dict[str, Any]] = {}
    for client in CLIENTS:
        runs = [r[client] for r in rounds if client in r and "error" not in r[client]]
        errors = [r[client]["error"] for r in rounds if client in r and "error" in r[client]]
        if not runs:
            summary[client] = {"error": errors[0] if errors else "not run"}
            continue
        m: dict[str, Any] = {}
        m["bringup_ms"] = _best(
            [statistics.median(r["bringup_s"]) * 1e3 for r in runs if r["bringup_s"]], False
        )
        m["seq_rate"] = _best([r["seq"]["n"] / r["seq"]["s"] for r in runs], True)
        m["seq_p50_ms"] = _best([r["seq"]["p50_ms"] for r in runs], False)
        m["seq_p99_ms"] = _best([r["seq"]["p99_ms"] for r in runs], False)
        m["seq_cpu_us"] = _best([r["seq"]["cpu_s"] / r["seq"]["n"] * 1e6 for r in runs], False)
        m["threads_rate"] = _best([r["threads"]["n"] / r["threads"]["s"] for r in runs], True)
        m["threads_cpu_us"] = _best(
            [r["threads"]["cpu_s"] / r["threads"]["n"] * 1e6 for r in runs], False
        )
        for size in sizes:
            key = f"big{size // MB}_mbps"
            m[key] = _best(
                [size / MB / statistics.median(r["big_s"][str(size)]) for r in runs], True
            )
        m["rss_seq_mb"] = max(r["rss_mb"]["after_seq"] for r in runs)
        m["rss_peak_mb"] = max(r["rss_mb"]["peak"] for r in runs)
        if errors:
            m["partial_errors"] = errors
        summary[client] = m
    return summary


ROWS = (
    # key, label, format, higher_is_better
    ("bringup_ms", "bring-up: spawn+initialize (ms, median)", "{:.1f}", False),
    ("seq_rate", "sequential echo (calls/s)", "{:,.0f}", True),
    ("seq_p50_ms", "sequential echo p50 (ms)", "{:.3f}", False),
    ("seq_p99_ms", "sequential echo p99 (ms)", "{:.3f}", False),
    ("seq_cpu_us", "sequential: client CPU per call (us)", "{:.1f}", False),
    ("threads_rate", "8 threads, one session (calls/s)", "{:,.0f}", True),
    ("threads_cpu_us", "8 threads: client CPU per call (us)", "{:.1f}", False),
    ("big1_mbps", "1 MB result (MB/s, median)", "{:,.1f}", True),
    ("big10_mbps", "10 MB result (MB/s, median)", "{:,.1f}", True),
    ("rss_seq_mb", "peak RSS after sequential (MB)", "{:.1f}", False),
    ("rss_peak_mb", "peak RSS incl. 10 MB results (MB)", "{:.1f}", False),
    ("cold_ms", "cold: fresh python -> 1st result (ms)", "{:.0f}", False),
)


def _fmt(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def _verdict(ratio: float | None, target: tuple[str, float] | None) -> str:
    if target is None:
        return ""
    kind, bound = target
    text = f"{'>=' if kind == 'min' else '<='} {bound:.2f}x"
    if ratio is None:
        return f"{text}  ?"
    ok = ratio >= bound if kind == "min" else ratio <= bound
    return f"{text}  {'ok' if ok else 'MISS'}"


def per_round_ratios(rounds: list[dict[str, Any]]) -> dict[str, list[float]]:
    """mcpsync/bare of the sequential and 8-thread rates, round by round (the spread)."""
    out: dict[str, list[float]] = {"seq": [], "threads": []}
    for r in rounds:
        ours, bare = r.get("mcpsync", {}), r.get("bare", {})
        if "error" in ours or "error" in bare or not ours or not bare:
            continue
        for key in out:
            out[key].append((ours[key]["n"] / ours[key]["s"]) / (bare[key]["n"] / bare[key]["s"]))
    return out


def render(
    title: str,
    summary: dict[str, dict[str, Any]],
    targets: dict[str, tuple[str, float]],
    rounds: list[dict[str, Any]] | None = None,
) -> str:
    lines = [title]
    for client in CLIENTS:
        if "error" in summary[client]:
            lines.append(f"  !! {client}: {summary[client]['error']}")
    head = f"  {'metric':40s} {'mcpsync':>10s} {'bare':>10s} {'SDK':>10s} {'mcpsync/bare':>12s} {'SDK/bare':>9s}   target (mcpsync/bare)"
    lines += [head, "  " + "-" * (len(head) - 2)]
    for key, label, fmt, _higher in ROWS:
        values = {c: summary[c].get(key) for c in CLIENTS}
        if all(v is None for v in values.values()):
            continue
        bare = values["bare"]

        def ratio(v: float | None, bare: float | None = bare) -> float | None:
            return None if v is None or not bare else v / bare

        r_m, r_s = ratio(values["mcpsync"]), ratio(values["sdk"])
        lines.append(
            f"  {label:40s} {_fmt(values['mcpsync'], fmt):>10s} {_fmt(values['bare'], fmt):>10s}"
            f" {_fmt(values['sdk'], fmt):>10s} {_fmt(r_m, '{:.2f}x'):>12s} {_fmt(r_s, '{:.2f}x'):>9s}"
            f"   {_verdict(r_m, targets.get(key))}"
        )
    lines.append(
        "  (each number: the best over the rounds; ratios are of the numbers shown: for rates higher"
        " is better, for times and MB lower is better)"
    )
    spread = per_round_ratios(rounds or [])
    if len(spread["seq"]) > 1:
        lines.append(
            "  mcpsync/bare round by round: sequential "
            + ", ".join(f"{x:.2f}x" for x in spread["seq"])
            + "; 8 threads "
            + ", ".join(f"{x:.2f}x" for x in spread["threads"])
        )
    return "\n".join(lines)


def render_imports(imports: dict[str, float | None]) -> str:
    lines = ["import time (fresh interpreter, in-process perf_counter around the import, median)"]
    for label, value in imports.items():
        lines.append(f"  {label:52s} {_fmt(None if value is None else value * 1e3, '{:8.1f}')} ms")
    ours, theirs = imports.get(IMPORTS[0][0]), imports.get(IMPORTS[2][0])
    if ours and theirs:
        ratio = ours / theirs
        lines.append(
            f"  {'import mcpsync / import mcp.client.session':52s} {ratio:8.2f}x   target: well under 1x  "
            f"{'ok' if ratio < 0.5 else 'MISS'}"
        )
    return "\n".join(lines)


def _start_http_server(kind: str) -> tuple[subprocess.Popen[str], str]:
    """Start the HTTP peer; return it and its URL once it listens (bounded)."""
    if kind == "stdlib":
        argv = [PYTHON, os.path.join(HERE, "http_server.py"), "--port", "0"]
        stream_name, prefix = "stdout", "listening "
    else:
        argv = [PYTHON, os.path.join(HERE, "sdk_http_server.py"), "--port", "0"]
        stream_name, prefix = "stderr", "sdk_server ready: "
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    stream = getattr(proc, stream_name)
    found: list[str] = []

    def watch() -> None:
        for line in stream:
            if line.startswith(prefix):
                found.append(line[len(prefix) :].strip())
                break

    watcher = threading.Thread(target=watch, name="bench-http-ready", daemon=True)
    watcher.start()
    watcher.join(30)
    if not found:
        _stop(proc)
        raise RuntimeError(f"the {kind} HTTP server did not come up within 30 s")
    # keep draining its output so it never blocks on a full pipe
    for name in ("stdout", "stderr"):
        pipe = getattr(proc, name)
        threading.Thread(target=pipe.read, name=f"bench-http-drain[{name}]", daemon=True).start()
    return proc, found[0]


def _stop(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


def _conf(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    return {
        "bringup_n": 7 if quick else 10,
        "warmup": 200,
        "seq_seconds": 0.6 if quick else 1.0,
        "seq_max": 50_000,
        "threads": 8,
        "thread_seconds": 0.6 if quick else 1.0,
        "big": [[MB, 3 if quick else 5], [10 * MB, 2 if quick else 3]],
    }


def run_part(
    transport: str, args: argparse.Namespace, base: dict[str, Any], clients: tuple[str, ...]
) -> list[dict[str, Any]]:
    rounds = []
    timeout = 45.0 if args.quick else 90.0
    for index in range(args.rounds):
        order = clients[index % len(clients) :] + clients[: index % len(clients)]
        results: dict[str, Any] = {}
        for client in order:
            t = _now()
            results[client] = run_worker(
                {**base, "client": client, "transport": transport}, timeout
            )
            status = results[client].get("error", "ok")
            print(
                f"  [{transport} round {index + 1}] {client:8s} {_now() - t:5.1f} s  {status}",
                file=sys.stderr,
            )
        rounds.append(results)
    return rounds


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return " ".join(f"{x:.2f}" for x in os.getloadavg())


def profile_main(args: argparse.Namespace) -> int:
    """cProfile mcpsync's hot path in this thread (stdio: the caller reads its own reply;
    HTTP: the caller POSTs and reads the JSON reply), then a few 10 MB results."""
    import cProfile
    import pstats

    import mcpsync

    proc = None
    if args.profile == "http":
        proc, target = _start_http_server(args.http_server)
    else:
        target = DEMO_ARGV
    seconds = 3.0
    try:
        with mcpsync.Session.connect(target, name="bench") as session:
            for _ in range(200):
                session.call_tool("echo", ECHO_ARGS)
            profiler = cProfile.Profile()
            count, started = 0, _now()
            profiler.enable()
            while _now() - started < seconds:
                session.call_tool("echo", ECHO_ARGS)
                count += 1
            profiler.disable()
            print(
                f"== {args.profile}: sequential echo under cProfile: {count} calls in {seconds:.0f} s"
                " (profiling slows it down)"
            )
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(3):
                session.call_tool("big", {"size_bytes": 10 * MB})
            profiler.disable()
            print(f"== {args.profile}: 3 x 10 MB results under cProfile")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    finally:
        if proc is not None:
            _stop(proc)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="mcpsync vs a bare loop vs the official SDK client"
    )
    parser.add_argument("--quick", action="store_true", help="shorter phases, one round (< 40 s)")
    parser.add_argument(
        "--json", metavar="FILE", help="write every raw number and the summary here"
    )
    parser.add_argument(
        "--plot",
        metavar="FILE",
        help="write an SVG figure of the ratios to the bare loop here (benchmarks/plot.py)",
    )
    parser.add_argument(
        "--only",
        choices=("stdio", "http", "threads", "replay", "otel"),
        help="run one part only (threads: 8 threads on one session, shared_session.py; "
        "replay: a recorded session vs live, replay_bench.py; "
        "otel: what OpenTelemetry costs, otel_bench.py)",
    )
    parser.add_argument(
        "--http-server", choices=("stdlib", "sdk"), default="stdlib", help="the HTTP peer"
    )
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3, 1 with --quick)")
    parser.add_argument(
        "--profile",
        choices=("stdio", "http"),
        help="instead: cProfile mcpsync's hot path over this transport",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(json.loads(args.worker))
    if args.profile:
        return profile_main(args)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3

    started = _now()
    base = _conf(args)
    sizes = [size for size, _ in base["big"]]
    report: dict[str, Any] = {"config": base, "rounds": args.rounds, "uptime_before": _uptime()}
    print(f"load before: {report['uptime_before']}", file=sys.stderr)
    output = [
        f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs; rounds: {args.rounds}; {report['uptime_before']}"
    ]

    if args.only in (None, "stdio"):
        rounds = run_part("stdio", args, {**base, "server_argv": DEMO_ARGV}, CLIENTS)
        summary = summarize(rounds, sizes)
        reps = 3 if args.quick else 5
        cold = measure_cold(2 if args.quick else 3, DEMO_ARGV)
        for client in CLIENTS:
            if "error" not in summary[client]:
                summary[client]["cold_ms"] = None if cold[client] is None else cold[client] * 1e3
        imports = measure_imports(reps)
        report["stdio"] = {
            "rounds": rounds,
            "summary": summary,
            "cold_s": cold,
            "imports_s": imports,
        }
        title = f"stdio: {' '.join(['python', *DEMO_ARGV[1:]])}, echo {json.dumps(ECHO_ARGS)}"
        output += ["", render(title, summary, STDIO_TARGETS, rounds), "", render_imports(imports)]

    if args.only in (None, "http"):
        output.append("")
        output.append(run_http(args, base, sizes, report))
        output += ["", run_auth(args, report)]  # OAuth vs no auth, one server (auth_bench.py)

    if args.only in (None, "otel"):  # none vs API only vs SDK, stdio sequential (otel_bench.py)
        import otel_bench

        telemetry = otel_bench.measure(args.rounds, 0.6 if args.quick else 1.5)
        report["otel"] = telemetry
        output += ["", otel_bench.render(telemetry)]

    if args.only in (None, "threads"):  # 8 threads sharing one session (shared_session.py)
        import shared_session

        shared = shared_session.run_all(args.rounds, 0.8 if args.quick else 1.5)
        report["threads"] = shared
        output += ["", shared_session.render(shared)]

    if args.only in (None, "replay"):  # a replayed session vs the live demo server
        import replay_bench

        replayed = replay_bench.measure(args.rounds, 0.6 if args.quick else 1.0)
        report["replay"] = replayed
        output += ["", replay_bench.render(replayed)]

    report["uptime_after"] = _uptime()
    report["elapsed_s"] = _now() - started
    output += ["", f"load after: {report['uptime_after']}; whole run {report['elapsed_s']:.0f} s"]
    print("\n".join(output))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    if args.plot:
        import plot

        plot.write_svg(report, args.plot)
    return 0


def run_auth(args: argparse.Namespace, report: dict[str, Any]) -> str:
    """The auth row (issue 13): sequential calls with mcpsync's OAuth (client_credentials;
    Bearer, and DPoP-bound) vs no auth, one server, one run (benchmarks/auth_bench.py)."""
    import auth_bench

    result = auth_bench.measure(args.rounds, 0.6 if args.quick else 1.0)
    report["auth"] = result
    return auth_bench.render(result)


def run_http(
    args: argparse.Namespace, base: dict[str, Any], sizes: list[int], report: dict[str, Any]
) -> str:
    import importlib.util

    have_transport = importlib.util.find_spec("mcpsync.transports.http.streamable") is not None
    clients = CLIENTS if have_transport else ("bare", "sdk")
    note = "" if have_transport else (
        "  !! mcpsync: skipped: mcpsync/transports/http/streamable.py is not there yet "
        "(the Streamable HTTP transport has not landed); bare and SDK numbers only"
    )  # fmt: skip
    try:
        proc, url = _start_http_server(args.http_server)
    except (OSError, RuntimeError) as exc:
        return f"http: skipped: {exc}"
    try:
        rounds = run_part(
            "http", args, {**base, "url": url, "bringup_n": 3 if args.quick else 5}, clients
        )
    finally:
        _stop(proc)
    summary = summarize(rounds, sizes)
    if not have_transport:
        summary["mcpsync"] = {"error": "skipped (no Streamable HTTP transport yet)"}
    report["http"] = {"server": args.http_server, "url": url, "rounds": rounds, "summary": summary}
    server = "benchmarks/http_server.py (stdlib, stateless JSON)" if args.http_server == "stdlib" else (
        "benchmarks/sdk_http_server.py (official SDK server, stateless JSON)"
    )  # fmt: skip
    text = render(
        f"http: {server}; bare = http.client keep-alive, a connection per thread",
        summary,
        HTTP_TARGETS,
        rounds,
    )
    text = text.replace("bring-up: spawn+initialize", "bring-up: connect+initialize")
    return text + ("\n" + note if note else "")


if __name__ == "__main__":
    sys.exit(main())
