"""Many threads on one session: mcpsync against a bare loop, floating and pinned.

Owns: the "8 threads sharing one session" comparison of issue 14 (item 6), run by
``bench.py --only threads`` (and in a full ``bench.py`` run), or alone::

    nice -n 10 .venv/bin/python benchmarks/shared_session.py [--rounds 3] [--seconds 1.5]

Clients (each run in its own worker subprocess, rounds interleaved):

* stdio ``bare``: the bare reader-thread loop: one reader thread reads the server's stdout
  line by line (buffered pipe), ``json.loads`` each line and hands the reply to the caller
  waiting for that id (a dict of ``threading.Event`` slots); callers write one JSON line
  each under a lock. No validation, no timeouts.
* HTTP ``bare``: one ``http.client`` keep-alive connection per thread, one POST per call.
* ``mcpsync``: one ``Session`` shared by all threads, ``call_tool("echo", ...)``: typed
  results, timeouts, everything a user gets.

Every call echoes a message unique to (thread, call) and checks the reply carries that
message: a lost or misrouted reply fails the run. "pinned": the client process on CPU 0,
the server (all its threads) on CPU 1 (``os.sched_setaffinity``); "floating": the
kernel's choice. Reported: calls/s per client, mcpsync/bare round by round, the best.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

__all__ = ["run_all", "render", "worker_main"]

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = sys.executable
DEMO_ARGV = [PYTHON, "-m", "mcpsync.demo_server"]
MARK = "SHARED-RESULT "
VERSION = "2025-11-25"
INIT = {
    "protocolVersion": VERSION,
    "capabilities": {},
    "clientInfo": {"name": "bare", "version": "0"},
}
#: issue 14: mcpsync / bare with 8 threads on one session
TARGETS = {"stdio": 0.9, "http": 0.8}


def _pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` onto ``cpus``."""
    try:
        tasks = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tasks = [pid]
    for tid in tasks:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


class _BareReaderStdio:
    """The bare reader-thread loop over a stdio server (see the module docstring)."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdin is not None
        self._stdin = self.proc.stdin
        self._lock = threading.Lock()
        self._pending: dict[int, list[Any]] = {}
        self._ids = iter(range(1, 1 << 62))
        self._reader = threading.Thread(target=self._read, name="bare-reader", daemon=True)
        self._reader.start()
        self.request("initialize", INIT)
        with self._lock:
            self._stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            self._stdin.flush()

    @property
    def server_pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            reply = json.loads(line)
            slot = self._pending.pop(reply.get("id"), None)
            if slot is not None:
                slot[1] = reply
                slot[0].set()

    def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = next(self._ids)
        slot: list[Any] = [threading.Event(), None]
        self._pending[rid] = slot
        data = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self._lock:
            self._stdin.write(data.encode() + b"\n")
            self._stdin.flush()
        if not slot[0].wait(60):
            raise TimeoutError(f"no reply to {rid}")
        reply = slot[1]
        if reply.get("id") != rid or "result" not in reply:
            raise RuntimeError(f"unexpected reply to {method}: {reply!r:.200}")
        return reply["result"]

    def echo(self, message: str) -> str:
        result = self.request("tools/call", {"name": "echo", "arguments": {"message": message}})
        return str(result["content"][0]["text"])

    def close(self) -> None:
        self._stdin.close()
        self.proc.wait(10)
        self._reader.join(10)


class _BareHttp:
    """One ``http.client`` keep-alive connection per thread, one POST per call."""

    def __init__(self, url: str, server_pid: int) -> None:
        import http.client
        import urllib.parse

        self.server_pid = server_pid
        self._http = http.client
        parts = urllib.parse.urlsplit(url)
        self._host, self._port, self._path = parts.hostname, parts.port, parts.path
        self._local = threading.local()
        self._conns: list[Any] = []
        self._ids = iter(range(1, 1 << 62))
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
        }
        self.request("initialize", INIT)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._http.HTTPConnection(self._host, self._port, timeout=60)
            self._conns.append(conn)
        rid = next(self._ids)
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        conn.request("POST", self._path, body.encode(), self._headers)
        response = conn.getresponse()
        reply = json.loads(response.read())
        if reply.get("id") != rid or "result" not in reply:
            raise RuntimeError(f"unexpected reply to {method}: {reply!r:.200}")
        return reply["result"]

    def echo(self, message: str) -> str:
        result = self.request("tools/call", {"name": "echo", "arguments": {"message": message}})
        return str(result["content"][0]["text"])

    def close(self) -> None:
        for conn in self._conns:
            conn.close()


class _Mcpsync:
    def __init__(self, target: Any, server_pid: int | None = None) -> None:
        import mcpsync

        self.session = mcpsync.Session.connect(target, name="bench")
        process = getattr(self.session.connection.transport, "process", None)
        self.server_pid = process.pid if process is not None else server_pid

    def echo(self, message: str) -> str:
        return str(self.session.call_tool("echo", {"message": message}).content[0].text)

    def close(self) -> None:
        self.session.close()


def _threaded(client: Any, n: int, seconds: float) -> dict[str, Any]:
    counts = [0] * n
    errors: list[str] = []
    barrier = threading.Barrier(n + 1)
    end = [0.0]

    def run(i: int) -> None:
        barrier.wait()
        done = 0
        try:
            while time.monotonic() < end[0]:
                message = f"t{i}-{done}"
                got = client.echo(message)
                if got != message:
                    raise AssertionError(f"thread {i} call {done}: sent {message!r}, got {got!r}")
                done += 1
        except Exception as exc:  # noqa: BLE001 - reported: the run fails on it
            errors.append(repr(exc)[:300])
        counts[i] = done

    threads = [threading.Thread(target=run, args=(i,), name=f"bench-caller[{i}]") for i in range(n)]
    for thread in threads:
        thread.start()
    end[0] = time.monotonic() + seconds
    cpu = time.process_time()
    barrier.wait()
    started = time.monotonic()
    for thread in threads:
        thread.join(seconds + 60)
    elapsed = time.monotonic() - started
    return {
        "n": sum(counts),
        "s": elapsed,
        "cpu_us": (time.process_time() - cpu) / max(sum(counts), 1) * 1e6,
        "errors": errors,
        "per_thread": counts,
    }


def worker_main(conf: dict[str, Any]) -> int:
    try:
        cpus = sorted(os.sched_getaffinity(0))
        pinned = conf["pin"] and len(cpus) >= 2
        client_cpus, server_cpus = ({cpus[0]}, {cpus[1]}) if pinned else (set(cpus), set(cpus))
        _pin(os.getpid(), client_cpus)
        if conf["transport"] == "stdio":
            client: Any = (_Mcpsync if conf["client"] == "mcpsync" else _BareReaderStdio)(DEMO_ARGV)
        elif conf["client"] == "mcpsync":
            client = _Mcpsync(conf["url"], conf["server_pid"])
        else:
            client = _BareHttp(conf["url"], conf["server_pid"])
        try:
            _pin(client.server_pid, server_cpus)
            for i in range(300):  # warm up (and the typed-result models)
                client.echo(f"warm-{i}")
            result = _threaded(client, conf["threads"], conf["seconds"])
            result["pinned"] = pinned
        finally:
            client.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as data
        result = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(MARK + json.dumps(result), flush=True)
    return 0


def _run_worker(conf: dict[str, Any], timeout: float) -> dict[str, Any]:
    proc = subprocess.Popen(
        [PYTHON, os.path.abspath(__file__), "--worker", json.dumps(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in out.splitlines():
        if line.startswith(MARK):
            return dict(json.loads(line[len(MARK) :]))
    return {"error": f"no result: {err.strip()[-300:]}"}


def _http_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [PYTHON, os.path.join(HERE, "http_server.py"), "--port", "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the server prints one line once it listens
    if not line.startswith("listening "):
        proc.kill()
        raise RuntimeError(f"HTTP peer did not start: {line!r}")
    return proc, line.split(" ", 1)[1].strip()


def run_all(
    rounds: int = 3,
    seconds: float = 1.5,
    threads: int = 8,
    transports: tuple[str, ...] = ("stdio", "http"),
) -> dict[str, Any]:
    """Every (transport, pinning) case, ``rounds`` interleaved rounds of both clients."""
    out: dict[str, Any] = {}
    server = None
    try:
        if "http" in transports:
            server, url = _http_server()
        for transport in transports:
            for pin in (False, True):
                case: list[dict[str, Any]] = []
                for index in range(rounds):
                    order = ("mcpsync", "bare") if index % 2 == 0 else ("bare", "mcpsync")
                    results = {}
                    for client in order:
                        conf = {"client": client, "transport": transport, "pin": pin,
                                "threads": threads, "seconds": seconds}  # fmt: skip
                        if transport == "http":
                            assert server is not None
                            conf.update(url=url, server_pid=server.pid)
                        results[client] = _run_worker(conf, 120)
                    case.append(results)
                    ours, bare = results["mcpsync"], results["bare"]
                    status = ours.get("error") or bare.get("error") or (
                        f"{_rate(ours):,.0f} vs {_rate(bare):,.0f} calls/s"
                        f" = {_rate(ours) / _rate(bare):.2f}x"
                    )  # fmt: skip
                    label = "pinned" if pin else "floating"
                    print(f"  [{transport} {label} round {index + 1}] {status}", file=sys.stderr)
                out[f"{transport}/{'pinned' if pin else 'floating'}"] = case
    finally:
        if server is not None:
            server.kill()
            server.wait(10)
    return out


def _rate(result: dict[str, Any]) -> float:
    return float(result["n"]) / float(result["s"]) if "n" in result and result["s"] else 0.0


def render(results: dict[str, Any], threads: int = 8) -> str:
    lines = [
        f"{threads} threads sharing one session (calls/s; every reply checked against its request)",
        f"  {'case':18s} {'mcpsync':>9s} {'bare':>9s} {'ratio':>7s}  {'round by round':28s}"
        f" {'CPU us/call':>13s}  target",
    ]
    for case, rounds in results.items():
        transport = case.split("/")[0]
        failures = [r[c]["error"] for r in rounds for c in ("mcpsync", "bare") if "error" in r[c]]
        failures += [e for r in rounds for c in ("mcpsync", "bare") for e in r[c].get("errors", [])]
        if failures:
            lines.append(f"  {case:18s} !! {failures[0]}")
            continue
        ours = max(_rate(r["mcpsync"]) for r in rounds)
        bare = max(_rate(r["bare"]) for r in rounds)
        spread = ", ".join(f"{_rate(r['mcpsync']) / _rate(r['bare']):.2f}x" for r in rounds)
        cpu = "/".join(f"{min(r[c]['cpu_us'] for r in rounds):.0f}" for c in ("mcpsync", "bare"))
        target = TARGETS[transport]
        verdict = "ok" if ours / bare >= target else "MISS"
        lines.append(
            f"  {case:18s} {ours:9,.0f} {bare:9,.0f} {ours / bare:6.2f}x  {spread:28s} {cpu:>13s}"
            f"  >= {target}x {verdict}"
        )
    lines.append(
        "  (ratio: best mcpsync / best bare over the rounds; bare stdio = a reader thread routing"
        " replies by id, bare HTTP = http.client, a connection per thread; CPU: the client"
        " process's, per call, mcpsync/bare, the lowest over the rounds)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--only", choices=("stdio", "http"))
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(json.loads(args.worker))
    transports = (args.only,) if args.only else ("stdio", "http")
    results = run_all(args.rounds, args.seconds, args.threads, transports)
    print(render(results, args.threads))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
