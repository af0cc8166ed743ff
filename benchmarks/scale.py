"""Scale in one process (issue 14, item 5): hundreds of stdio servers behind one Host, and
hundreds of HTTP sessions to one server.

Owns: the measurement, printed one figure a line beside its target::

    nice -n 10 .venv/bin/python benchmarks/scale.py [--servers 500] [--http 200] [--json FILE]

stdio: ``--servers`` copies of ``benchmarks/tiny_server.py`` (``python -S -E``: the
near-zero-cost server) in one ``Host`` (``max_parallel`` bring-ups at a time). Measured:

* up: ``Host.start()`` until every entry is ready (then one ``echo`` per session, each
  reply checked against its request);
* threads per session: the process's threads with every session up and idle, minus those
  before the Host, divided by the number of sessions (and the mcpsync threads by name);
* memory per session: (RSS with every session up - RSS before the Host) / n, where
  "before" is after a warm-up session was connected, used and closed (imports, the typed
  result models, the allocator's arenas: paid once per process, not per session); USS too;
* descriptors per session: open fds with every session up minus before, / n;
* close: ``Host.close()``; then what is left: child processes (psutil, recursive, not
  zombies), mcpsync threads, descriptors above the starting count.

HTTP: ``--http`` sessions to one official-SDK server (``tests/servers/sdk_server.py http
--json``: JSON replies), opened from 8 threads, one call each, then counted while idle:
threads per session, then closed, and what is left. Twice: ``era="legacy"`` (2025-11-25:
a session id and a GET back-channel each session keeps open, its reader being the one
thread an idle session needs) and ``era="auto"`` (what bring-up picks: this server speaks
the stateless 2026-07-28 wire too, which has no back-channel).

The descriptor limit: 500 servers take 3 pipes each plus 4 for the stop and wake pipes; the
soft ``RLIMIT_NOFILE`` is raised to what that needs (within the hard limit) and printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TINY = [sys.executable, "-S", "-E", os.path.join(HERE, "tiny_server.py")]
SDK_SERVER = os.path.join(ROOT, "tests", "servers", "sdk_server.py")
TARGETS = {
    "up_s": ("<=", 10.0),
    "threads_per_session": ("<=", 2.0),
    "kb_per_session": ("<=", 300.0),
    "close_s": ("<=", 2.0),
    "http_idle_threads_per_session": ("<=", 1.0),
}


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.is_alive()]


def _mcpsync_threads() -> list[str]:
    return sorted(t.name for t in _threads() if t.name.startswith("mcpsync-"))


def _children(me: psutil.Process) -> list[int]:
    alive = []
    for child in me.children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _settle(predicate: Any, timeout: float) -> bool:
    """Wait (bounded) until ``predicate()``: threads and processes end asynchronously."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def raise_fd_limit(needed: int) -> tuple[int, int]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        new = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def measure_stdio(n: int, max_parallel: int) -> dict[str, Any]:
    import mcpsync

    me = psutil.Process()
    # warm-up: imports, typed models, one session's worth of one-time costs
    with mcpsync.Session.connect(TINY, name="warmup") as s:
        assert s.call_tool("echo", {"message": "w"}).content[0].text == "w"
    _settle(lambda: not _mcpsync_threads(), 10)
    threads0 = me.num_threads()
    fds0 = me.num_fds()
    mem0 = me.memory_full_info()
    config = {"mcpServers": {f"s{i}": {"command": TINY[0], "args": TINY[1:]} for i in range(n)}}
    out: dict[str, Any] = {"servers": n, "max_parallel": max_parallel}
    host = mcpsync.Host(config, max_parallel=max_parallel, start_timeout=120)
    try:
        started = time.monotonic()
        host.start()
        out["up_s"] = time.monotonic() - started
        states = [st.state for st in host.status()]
        out["ready"] = sum(1 for st in states if st == "ready")
        failed = {name: repr(err)[:200] for name, err in list(host.errors.items())[:3]}
        if failed:
            out["errors"] = failed
        # one call each, every reply checked
        mismatched = 0
        started = time.monotonic()
        for i in range(n):
            text = f"hello {i}"
            if host.session(f"s{i}").call_tool("echo", {"message": text}).content[0].text != text:
                mismatched += 1
        out["calls_s"] = time.monotonic() - started
        out["mismatched"] = mismatched
        _settle(lambda: not any(t.name.startswith("mcpsync-host-") for t in _threads()), 10)
        # idle: the bring-up threads are gone, the dispatch workers end after 2 s idle
        _settle(lambda: not any(t.name == "mcpsync-dispatch[shared]" for t in _threads()), 10)
        mem1 = me.memory_full_info()
        names = _mcpsync_threads()
        out["threads_total"] = me.num_threads()
        out["threads_added"] = me.num_threads() - threads0
        out["threads_per_session"] = out["threads_added"] / n
        out["mcpsync_threads"] = {
            "readers": sum(1 for x in names if x.startswith("mcpsync-stdio-reader[")),
            "shared": sorted({x for x in names if x.endswith("[shared]")}),
            "other": sorted(
                {
                    x
                    for x in names
                    if not x.startswith("mcpsync-stdio-reader[") and not x.endswith("[shared]")
                }
            ),
        }
        out["fds_per_session"] = (me.num_fds() - fds0) / n
        out["kb_per_session"] = (mem1.rss - mem0.rss) / n / 1024
        out["uss_kb_per_session"] = (mem1.uss - mem0.uss) / n / 1024
        out["rss_mb"] = {"before": mem0.rss / 2**20, "up": mem1.rss / 2**20}
        started = time.monotonic()
    finally:
        host.close()
    out["close_s"] = time.monotonic() - started
    _settle(lambda: not _children(me), 5)
    out["left"] = {
        "children": len(_children(me)),
        "mcpsync_threads": _mcpsync_threads(),
        "fds_above_start": max(0, me.num_fds() - fds0),
    }
    return out


def _sdk_http_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, SDK_SERVER, "http", "--port", "0", "--json"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stderr is not None
    found: list[str] = []

    def watch() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if not found and line.startswith("sdk_server ready: "):
                found.append(line.split(": ", 1)[1].strip())
                ready.set()
        ready.set()

    ready = threading.Event()
    threading.Thread(target=watch, name="scale-http-stderr", daemon=True).start()
    ready.wait(60)
    if not found:
        proc.kill()
        raise RuntimeError("the SDK HTTP server did not come up")
    return proc, found[0]


def measure_http(n: int, era: str) -> dict[str, Any]:
    import mcpsync

    me = psutil.Process()
    proc, url = _sdk_http_server()
    out: dict[str, Any] = {
        "sessions": n,
        "era": era,
        "server": "tests/servers/sdk_server.py http --json",
    }
    try:
        with mcpsync.Session.connect(url, name="warmup") as s:
            s.call_tool("echo", {"message": "w"})
        _settle(lambda: not _mcpsync_threads(), 10)
        threads0 = me.num_threads()
        sessions: list[Any] = []
        lock = threading.Lock()

        def open_one(i: int) -> None:
            s = mcpsync.Session.connect(url, name=f"h{i}", era=era)
            with lock:
                sessions.append(s)
            text = f"hello {i}"
            if s.call_tool("echo", {"message": text}).content[0].text != text:
                raise AssertionError(f"session h{i}: wrong reply")

        started = time.monotonic()
        try:
            with ThreadPoolExecutor(8, thread_name_prefix="scale-open") as pool:
                for future in [pool.submit(open_one, i) for i in range(n)]:
                    future.result(120)
            out["up_s"] = time.monotonic() - started
            _settle(lambda: not any(t.name.startswith("scale-open") for t in _threads()), 10)
            _settle(lambda: not any(t.name == "mcpsync-dispatch[shared]" for t in _threads()), 10)
            # every back-channel is open (or refused) once the count stops moving
            if era == "legacy":  # every session opens its GET back-channel: wait for them all
                _settle(
                    lambda: (
                        sum(1 for x in _mcpsync_threads() if x.startswith("mcpsync-http-get[")) >= n
                    ),
                    10,
                )
            names = _mcpsync_threads()
            out["idle_threads_added"] = me.num_threads() - threads0
            out["idle_threads_per_session"] = out["idle_threads_added"] / n
            own: dict[str, int] = {}
            for name in names:
                if name.endswith("]") and not name.endswith("[shared]"):
                    key = name.rsplit("[", 1)[1]
                    own[key] = own.get(key, 0) + 1
            out["http_idle_threads_per_session"] = max(own.values(), default=0)
            out["other_new_threads"] = sorted(
                t.name for t in _threads() if not t.name.startswith("mcpsync-")
            )
            kinds: dict[str, int] = {}
            for name in names:
                kinds[name.split("[")[0]] = kinds.get(name.split("[")[0], 0) + 1
            out["mcpsync_threads_by_kind"] = kinds
            started = time.monotonic()
        finally:
            with ThreadPoolExecutor(16, thread_name_prefix="scale-close") as pool:
                list(pool.map(lambda s: s.close(), sessions))
        out["close_s"] = time.monotonic() - started
        _settle(lambda: not _mcpsync_threads(), 10)
        out["left"] = {"mcpsync_threads": _mcpsync_threads()}
    finally:
        proc.kill()
        proc.wait(10)
    return out


def _line(label: str, value: float, unit: str, key: str) -> str:
    target = TARGETS.get(key)
    verdict = ""
    if target is not None:
        op, bound = target
        ok = value <= bound if op == "<=" else value >= bound
        verdict = f"   target {op} {bound:g} {unit}: {'ok' if ok else 'MISS'}"
    return f"  {label:44s} {value:10.2f} {unit}{verdict}"


def render(
    stdio: dict[str, Any] | None, https: list[dict[str, Any]], limits: tuple[int, int]
) -> str:
    lines = [
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f};"
        f" RLIMIT_NOFILE soft {limits[0]} hard {limits[1]}"
    ]
    if stdio is not None:
        n = stdio["servers"]
        lines.append(
            f"stdio: {n} x tiny_server.py in one Host (max_parallel {stdio['max_parallel']})"
        )
        lines.append(
            f"  ready {stdio.get('ready')}/{n}; {stdio.get('mismatched')} mismatched replies; errors: {stdio.get('errors', 'none')}"
        )
        if "up_s" in stdio:
            lines.append(_line("all up (Host.start)", stdio["up_s"], "s", "up_s"))
            lines.append(_line("one echo per session, in turn", stdio["calls_s"], "s", ""))
            lines.append(
                _line(
                    "threads per session (process threads added / n)",
                    stdio["threads_per_session"],
                    "",
                    "threads_per_session",
                )
            )
            lines.append(f"  mcpsync threads: {stdio['mcpsync_threads']}")
            lines.append(
                _line(
                    "client memory per session (RSS delta / n)",
                    stdio["kb_per_session"],
                    "KB",
                    "kb_per_session",
                )
            )
            lines.append(_line("  (USS delta / n)", stdio["uss_kb_per_session"], "KB", ""))
            lines.append(_line("descriptors per session", stdio["fds_per_session"], "", ""))
            lines.append(_line("close (Host.close)", stdio["close_s"], "s", "close_s"))
        lines.append(f"  left after close: {stdio['left']}")
    for http in https:
        lines.append(
            f"http: {http['sessions']} sessions to one server ({http['server']}), era={http['era']}"
        )
        if "up_s" in http:
            lines.append(_line("all up (8 threads opening)", http["up_s"], "s", ""))
            lines.append(
                _line(
                    "threads of its own per idle session (max)",
                    http["http_idle_threads_per_session"],
                    "",
                    "http_idle_threads_per_session",
                )
            )
            lines.append(
                _line(
                    "  process threads added / n (shared incl.)",
                    http["idle_threads_per_session"],
                    "",
                    "",
                )
            )
            lines.append(f"  mcpsync threads by kind: {http['mcpsync_threads_by_kind']}")
            lines.append(_line("close (16 threads closing)", http["close_s"], "s", ""))
        lines.append(f"  left after close: {http['left']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mcpsync at scale in one process")
    parser.add_argument("--servers", type=int, default=500)
    parser.add_argument("--http", type=int, default=200)
    parser.add_argument("--max-parallel", type=int, default=16)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    limits = raise_fd_limit(args.servers * 8 + args.http * 4 + 256)
    stdio = measure_stdio(args.servers, args.max_parallel) if args.servers else None
    # the 2025-11-25 wire: a GET back-channel per session; auto: what bring-up picks (the
    # SDK server speaks the stateless 2026-07-28 wire too: no back-channel, no session)
    https = [measure_http(args.http, era) for era in ("legacy", "auto")] if args.http else []
    print(render(stdio, https, limits))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"stdio": stdio, "http": https, "rlimit_nofile": limits}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
