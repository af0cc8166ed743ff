"""Soak: many bring-ups, crashes mid-call and racing threads; print what was left behind.

Run::

    .venv/bin/python benchmarks/soak.py [--cycles 300] [--crashes 100] [--threads 16 --calls 500]

Owns: the leak soak quoted in the Guarantees notes. Three phases against the bundled demo
server (``python -m mcpsync.demo_server``), each bounded in count and time:

- ``cycles``: connect → ``call_tool("echo")`` → close, N times;
- ``crashes``: connect, start a ``long_running`` call, kill the server mid-call (SIGKILL),
  check the call fails with the exit code, close; N times;
- ``threads``: T threads × C calls on one session, each call an ``echo`` with a unique
  message (checked against its reply: nothing lost or misrouted), a random short timeout on
  some ``long_running`` calls and a ``cancel()`` of some futures.

After each phase it prints the threads, file descriptors, child processes and RSS of this
process against the figures before the phase. Nothing here asserts: the numbers are printed.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psutil

import mcpsync

SERVER = [sys.executable, "-m", "mcpsync.demo_server"]


def _state() -> dict[str, float]:
    me = psutil.Process()
    return {
        "threads": threading.active_count(),
        "fds": len(os.listdir("/proc/self/fd")),
        "children": len(me.children(recursive=True)),
        "rss_mb": me.memory_info().rss / 1e6,
    }


def _settled(before: dict[str, float], bound: float = 5.0) -> dict[str, float]:
    """The state once closed things had ``bound`` seconds to go (children reaped, threads ended)."""
    deadline = time.monotonic() + bound
    now = _state()
    while time.monotonic() < deadline and any(
        now[k] > before[k] for k in ("threads", "fds", "children")
    ):
        time.sleep(0.05)
        now = _state()
    return now


def _report(phase: str, before: dict[str, float], after: dict[str, float], extra: str) -> None:
    left = ", ".join(
        f"{k} {after[k] - before[k]:+.0f}"
        if k != "rss_mb"
        else f"rss {after[k] - before[k]:+.1f} MB"
        for k in ("threads", "fds", "children", "rss_mb")
    )
    print(f"{phase:8} {extra:48} left behind: {left}", flush=True)


def cycles(n: int) -> None:
    before = _state()
    start = time.monotonic()
    for i in range(n):
        with mcpsync.Session.connect(SERVER, connect_timeout=30) as s:
            text = s.call_tool("echo", {"message": f"c{i}"}, timeout=30).content[0].text
            assert text == f"c{i}", text
    _report(
        "cycles",
        before,
        _settled(before),
        f"{n} connect→call→close in {time.monotonic() - start:.1f} s",
    )


def crashes(n: int) -> None:
    before = _state()
    start = time.monotonic()
    with_code = 0
    for _ in range(n):
        s = mcpsync.Session.connect(SERVER, connect_timeout=30)
        try:
            f = s.submit_call_tool("long_running", {"duration": 30, "steps": 30}, timeout=60)
            s.transport.process.kill()  # type: ignore[attr-defined]
            try:
                f.result(30)
            except mcpsync.MCPSyncError as exc:
                with_code += "-9" in str(exc) or "SIGKILL" in str(exc) or "signal 9" in str(exc)
        finally:
            s.close()
    _report(
        "crashes",
        before,
        _settled(before),
        f"{n} killed mid-call ({with_code} named the signal) in {time.monotonic() - start:.1f} s",
    )


def racing(threads: int, calls: int) -> None:
    before = _state()
    start = time.monotonic()
    lost = misrouted = timeouts = cancelled = 0
    lock = threading.Lock()
    errors: list[str] = []
    with mcpsync.Session.connect(SERVER, connect_timeout=30) as s:

        def work(t: int) -> None:
            nonlocal lost, misrouted, timeouts, cancelled
            rnd = random.Random(t)
            for i in range(calls):
                kind = rnd.random()
                try:
                    if kind < 0.05:
                        s.call_tool("long_running", {"duration": 1, "steps": 2}, timeout=0.01)
                    elif kind < 0.10:
                        f = s.submit_call_tool("long_running", {"duration": 1, "steps": 2})
                        if f.cancel():
                            with lock:
                                cancelled += 1
                    else:
                        msg = f"{t}-{i}"
                        text = s.call_tool("echo", {"message": msg}, timeout=30).content[0].text
                        if text != msg:
                            with lock:
                                misrouted += 1
                except mcpsync.RequestTimeout:
                    with lock:
                        timeouts += 1
                except mcpsync.MCPSyncError as exc:
                    with lock:
                        lost += 1
                        errors.append(f"{type(exc).__name__}: {exc}")

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, range(threads)))
        pending = len(s.connection._pending)  # noqa: SLF001 - a soak looks inside
    _report(
        "threads",
        before,
        _settled(before),
        f"{threads}x{calls}: lost {lost}, misrouted {misrouted}, pending {pending}, "
        f"timeouts {timeouts}, cancels {cancelled} in {time.monotonic() - start:.1f} s",
    )
    for line in errors[:5]:
        print(f"         lost: {line}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=300)
    p.add_argument("--crashes", type=int, default=100)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--calls", type=int, default=500)
    a = p.parse_args()
    cycles(1)  # warm-up: the first typed result imports mcp_types and pydantic (~16 MB)
    cycles(a.cycles)
    crashes(a.crashes)
    racing(a.threads, a.calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
