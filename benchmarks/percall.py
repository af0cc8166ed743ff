"""Per-call cost of mcpsync's stdio hot path, layer by layer, against a bare loop (A/B).

Run::

    .venv/bin/python benchmarks/percall.py [--calls 3000] [--rounds 7]

Owns: a quick, low-noise comparison for work on the hot path. In one process it keeps
three clients of ``python -m mcpsync.demo_server`` open and runs blocks of sequential
``tools/call echo`` on each in turn (interleaved, so machine load hits all alike):

- ``bare``: json.dumps + write + flush + readline + json.loads on buffered pipes;
- ``connection``: ``Connection.call(...)`` (futures, ids, timer, pump);
- ``connection+typed``: the same, plus the typed ``CallToolResult`` (pydantic validation);
- ``session``: ``Session.call_tool`` (capability check, typed ``CallToolResult``).

It prints, per client, the best wall time and process CPU time per call over the rounds,
and the ratios to the bare loop. ``bench.py`` is the full benchmark; this one isolates the
sequential case.

``--pin`` runs everything (this process and the three servers) on one CPU. On the 2-vCPU
VMs this was written on, a round trip between two CPUs costs a wake-up of the other CPU
(tens of microseconds, and it varies from run to run); on one CPU the wall time is the sum of
both sides' work, which makes the client's own share stable and easy to compare.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import mcpsync  # noqa: E402
from benchmarks.bench import DEMO_ARGV, ECHO_ARGS, _BareStdio  # noqa: E402
from mcpsync.session import _validate  # noqa: E402

PARAMS = {"name": "echo", "arguments": ECHO_ARGS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pin", action="store_true", help="run client and servers on one CPU")
    args = parser.parse_args()
    if args.pin:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the servers inherit it

    bare = _BareStdio(DEMO_ARGV)
    session = mcpsync.Session.connect(DEMO_ARGV)
    raw = mcpsync.Session.connect(DEMO_ARGV)
    conn = raw._conn

    def run_bare() -> None:
        bare.request("tools/call", PARAMS)

    def run_conn() -> None:
        conn.call("tools/call", PARAMS)

    def run_conn_typed() -> None:
        _validate("CallToolResult", conn.call("tools/call", PARAMS))

    def run_session() -> None:
        session.call_tool("echo", ECHO_ARGS)

    clients = {
        "bare": run_bare,
        "connection": run_conn,
        "connection+typed": run_conn_typed,
        "session": run_session,
    }
    best: dict[str, tuple[float, float]] = {}
    try:
        for fn in clients.values():  # warm up (imports, caches)
            for _ in range(200):
                fn()
        for r in range(args.rounds):
            order = list(clients.items())
            order = order[r % len(order) :] + order[: r % len(order)]
            for name, fn in order:
                wall0, cpu0 = time.perf_counter(), time.process_time()
                for _ in range(args.calls):
                    fn()
                wall = (time.perf_counter() - wall0) / args.calls * 1e6
                cpu = (time.process_time() - cpu0) / args.calls * 1e6
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], wall), min(old[1], cpu))
    finally:
        bare.close()
        session.close()
        raw.close()
    base_wall, base_cpu = best["bare"]
    print(f"{'client':<18}{'wall us/call':>14}{'cpu us/call':>13}{'rate/bare':>11}{'cpu/bare':>10}")
    for name, (wall, cpu) in best.items():
        print(
            f"{name:<18}{wall:>14.1f}{cpu:>13.1f}{base_wall / wall:>10.2f}x{cpu / base_cpu:>9.2f}x"
        )


if __name__ == "__main__":
    main()
