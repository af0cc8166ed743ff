"""A replayed ``call_tool`` (a recorded session, ``Cassette``) vs the same call live, one run.

Owns: the replay row of ``benchmarks/bench.py`` (issue 29, item 6). In one process:

1. record a session with the bundled stdio demo server (``python -m mcpsync.demo_server``):
   connect, ``echo`` a few times, close (``Cassette(path, mode="all")``);
2. open two sessions: one live against the demo server, one replaying that file
   (``mode="none"``: no process, no socket);
3. call ``echo`` for ``seconds`` on each, alternating ``rounds`` times, the order rotating;
   keep the best rate of each, and the client CPU per call.

Also the bring-up: ``Session.connect`` to ``close`` for each, median of a few.

    python benchmarks/replay_bench.py            # ~10 s; prints the row
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from auth_bench import _rounds  # the same phases and rotation as the auth row

__all__ = ["measure", "render", "main"]

DEMO_ARGV = [sys.executable, "-m", "mcpsync.demo_server"]
ECHO_ARGS = {"message": "hello"}
TARGET = ("ratio", 10.0)


def _bringup(connect: Any, n: int) -> float:
    """Median seconds of connect + close."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        connect().close()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(rounds: int = 3, seconds: float = 1.0, warmup: int = 300) -> dict[str, Any]:
    """Best calls/s of a replayed and a live session, phases interleaved."""
    import mcpsync
    from mcpsync.testing import Cassette

    with tempfile.TemporaryDirectory(prefix="mcpsync-replay-bench-") as folder:
        path = Path(folder) / "echo.jsonl"
        with mcpsync.connect(DEMO_ARGV, cassette=Cassette(path, mode="all")) as s:
            for _ in range(3):
                s.call_tool("echo", ECHO_ARGS)

        def replayed() -> Any:
            return mcpsync.connect(DEMO_ARGV, cassette=Cassette(path, mode="none"))

        def live() -> Any:
            return mcpsync.connect(DEMO_ARGV)

        bringup = {"live": _bringup(live, 5), "replay": _bringup(replayed, 5)}
        with live() as live_s, replayed() as replay_s:
            sessions = {"live": live_s, "replay": replay_s}
            for s in sessions.values():
                for _ in range(warmup):
                    s.call_tool("echo", ECHO_ARGS)
            rates: dict[str, list[float]] = {name: [] for name in sessions}
            cpus: dict[str, list[float]] = {name: [] for name in sessions}
            _rounds(sessions, rounds, seconds, rates, cpus)
    best = {name: max(values) for name, values in rates.items()}
    return {
        "rates": rates,
        "best": best,
        "cpu_per_call": {name: min(values) for name, values in cpus.items()},
        "bringup_s": bringup,
        "ratio": best["replay"] / best["live"],
    }


def render(result: dict[str, Any]) -> str:
    best, cpu, up = result["best"], result["cpu_per_call"], result["bringup_s"]
    ratio = result["ratio"]
    verdict = "ok" if ratio >= TARGET[1] else "MISS"
    lines = [
        "replay: sequential call_tool echo, a recorded session (Cassette) vs the stdio demo server",
        f"  {'':28s} {'calls/s':>9s} {'x live':>7s} {'client CPU/call':>16s} {'bring-up':>10s}",
    ]
    for label, key in (("live (demo server, stdio)", "live"), ("replayed (mode='none')", "replay")):
        lines.append(
            f"  {label:28s} {best[key]:9.0f} {best[key] / best['live']:6.2f}x "
            f"{cpu[key] * 1e6:13.1f} us {up[key] * 1e3:8.1f} ms"
        )
    rounds = ", ".join(
        f"{a / b:.1f}x"
        for a, b in zip(result["rates"]["replay"], result["rates"]["live"], strict=True)
    )
    lines.append(
        f"  replayed / live (calls/s)    {ratio:9.1f}x   target: >= {TARGET[1]:.0f}x  {verdict}"
        f"   (round by round: {rounds})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    print(render(measure(args.rounds, args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
