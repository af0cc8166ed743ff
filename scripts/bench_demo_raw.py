"""Ceiling for any stdio client: a bare write-a-line/read-a-line loop against the demo server.

Usage: .venv/bin/python scripts/bench_demo_raw.py [N]   (prints calls/s for ping and echo,
and MB/s for one 50 MB `big` result). No mcpsync client code is involved.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync.demo_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    write, flush, readline = proc.stdin.write, proc.stdin.flush, proc.stdout.readline

    def round_trip(message: dict) -> dict:
        write(json.dumps(message).encode() + b"\n")
        flush()
        return json.loads(readline())

    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    }
    round_trip({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for label, method, params in (
        ("ping", "ping", {}),
        ("tools/call echo", "tools/call", {"name": "echo", "arguments": {"message": "hi"}}),
    ):
        started = time.perf_counter()
        for i in range(1, n + 1):
            round_trip({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
        print(f"{label:16s} {n / (time.perf_counter() - started):10,.0f} calls/s")
    size = 50_000_000
    started = time.perf_counter()
    reply = round_trip(
        {
            "jsonrpc": "2.0",
            "id": "big",
            "method": "tools/call",
            "params": {"name": "big", "arguments": {"size_bytes": size}},
        }
    )
    assert len(reply["result"]["content"][0]["text"]) == size
    print(f"{'big 50 MB':16s} {size / 1e6 / (time.perf_counter() - started):10,.0f} MB/s")
    proc.stdin.close()
    return proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
