"""How long a stdio session is down when its server is killed, under the restart policy.

Kills the demo server (``python -m mcpsync.demo_server``) of a session with a resource
subscription, N times, and prints the median time from the kill to the first answered call
after it, and the restart thread's own time (bring-up and re-opening, ``RestartEvent.seconds``).

    .venv/bin/python benchmarks/restart_downtime.py [N]
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

import psutil

import mcpsync


def main(rounds: int = 10) -> None:
    answered: list[float] = []
    restart: list[float] = []
    for _ in range(rounds):
        back = threading.Event()
        events: list[mcpsync.RestartEvent] = []

        def on_restart(event: mcpsync.RestartEvent, events=events, back=back) -> None:
            events.append(event)
            back.set()

        policy = mcpsync.RestartPolicy(backoff=0, on_restart=on_restart)
        argv = [sys.executable, "-m", "mcpsync.demo_server"]
        with mcpsync.Session.connect(argv, restart=policy) as s:
            s.subscribe_resource("demo://readme", lambda uri: None)
            started = time.perf_counter()
            psutil.Process(s.transport.process.pid).kill()  # type: ignore[attr-defined]
            if not back.wait(30):
                raise SystemExit("no restart within 30 s")
            s.call_tool("echo", {"message": "x"})
            answered.append(time.perf_counter() - started)
            restart.append(events[0].seconds)
    ms = [t * 1000 for t in answered]
    print(
        f"kill -> first call answered: median {statistics.median(ms):.0f} ms "
        f"(min {min(ms):.0f}, max {max(ms):.0f}, {rounds} rounds); restart thread "
        f"(bring-up + re-open): median {statistics.median(restart) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
