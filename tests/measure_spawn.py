"""What each parent-death method costs a stdio spawn: ``python tests/measure_spawn.py``.

Prints, per method (off, setpriv, preexec), the median time of ``spawn()`` in the calling
thread and from a worker thread (through the spawner thread), and the time until a trivial
server has exited, in this small process and with 200 MB of touched memory (a large host:
``preexec_fn`` costs ``vfork``, so the page tables are copied). Then the time from a host's
SIGKILL until its servers are dead. Figures vary with load: compare the ratios of one run.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcpsync.transports import spawn  # noqa: E402

RUNS = 40


def _once(argv: list[str], from_thread: bool) -> tuple[float, float]:
    box: dict[str, float] = {}

    def go() -> None:
        started = time.perf_counter()
        proc = spawn.spawn(argv, env=dict(os.environ), cwd=None)
        box["spawn"] = time.perf_counter() - started
        proc.wait()
        box["exit"] = time.perf_counter() - started
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.reaped()

    if from_thread:
        worker = threading.Thread(target=go)
        worker.start()
        worker.join(30)
    else:
        go()
    return box["spawn"], box["exit"]


def _row(method: str, from_thread: bool) -> str:
    spawn._resolved_method = method
    times = [_once(["/bin/true"], from_thread) for _ in range(RUNS)]
    where = "worker" if from_thread else "main"
    return (
        f"{method:8} {where:6} spawn {statistics.median(t[0] for t in times) * 1e3:6.3f} ms"
        f"  to exit {statistics.median(t[1] for t in times) * 1e3:6.3f} ms"
    )


def _kill_figure(method: str) -> str:
    from tests.test_orphans import HOST, STUBBORN, _env, _gone_within

    host = subprocess.Popen(
        [sys.executable, "-c", HOST, STUBBORN], stdout=subprocess.PIPE, text=True,
        env=_env(method), cwd=str(ROOT),
    )  # fmt: skip
    assert host.stdout is not None
    pids = json.loads(host.stdout.readline())
    started = time.monotonic()
    host.send_signal(signal.SIGKILL)
    host.wait(30)
    alive, _ = _gone_within(pids, 5.0)
    took = time.monotonic() - started
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return f"{method:8} host SIGKILL -> {len(pids) - len(alive)}/{len(pids)} servers dead in {took * 1e3:.0f} ms"


def main() -> None:
    methods = ["off", "preexec"] + (["setpriv"] if spawn._setpriv() else [])
    for label, ballast in (("small host", 0), ("200 MB host", 200)):
        data = bytearray(ballast * 1024 * 1024)
        for i in range(0, len(data), 4096):
            data[i] = 1
        print(f"-- {label} (rss {_rss_mb():.0f} MB)")
        for method in methods:
            for from_thread in (False, True):
                print(_row(method, from_thread))
        del data
    print("--")
    for method in methods:
        print(_kill_figure(method))


def _rss_mb() -> float:
    import psutil

    return float(psutil.Process().memory_info().rss) / 1e6


if __name__ == "__main__":
    main()
