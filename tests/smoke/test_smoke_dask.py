"""mcpsync.smoke.run() on a Dask cluster (LocalCluster, worker processes): 100 entries, the same
results as the local run, nothing left running on the workers; and ``mcpsync smoke --dask``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_smoke import entry, tiny, write_config

import mcpsync

distributed = pytest.importorskip("distributed")

N_ENTRIES = 100


def _worker_leftovers() -> dict[str, list[str]]:
    """Run on each worker: child processes (not multiprocessing's) and mcpsync threads."""
    import psutil

    children = [
        " ".join(p.cmdline())
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE and "multiprocessing" not in " ".join(p.cmdline())
    ]
    threads = [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-")]
    return {"children": children, "threads": threads}


@pytest.fixture(scope="module")
def cluster():
    with (
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=2, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield cluster, client


@pytest.mark.slow
def test_dask_100_entries_same_as_local_and_nothing_left(tmp_path: Path, cluster):
    _, client = cluster
    server = tiny(tmp_path)
    servers = {f"s{i:03d}": entry(server) for i in range(N_ENTRIES - 2)}
    servers["exits"] = entry(server, "exit")
    servers["typo"] = {"command": "node", "args": "x.js"}
    cfg = write_config(tmp_path / "mcp.json", servers)
    calls = [("echo", {"message": "hi"}), "fail"]

    t0 = time.monotonic()
    local = mcpsync.smoke.run(cfg, calls=calls)
    local_seconds = time.monotonic() - t0
    t0 = time.monotonic()
    remote = mcpsync.smoke.run(cfg, calls=calls, executor=client.get_executor(pure=False))
    remote_seconds = time.monotonic() - t0

    assert len(remote.entries) == N_ENTRIES
    assert remote.to_json(timings=False) == local.to_json(timings=False)
    by = {e.name: e for e in remote.entries}
    assert by["s000"].ok and [c.ok for c in by["s000"].calls] == [True, False]
    assert by["exits"].failure == "spawn" and by["typo"].failure == "config"
    assert local_seconds < 90 and remote_seconds < 90, (local_seconds, remote_seconds)
    left = client.run(_worker_leftovers)
    assert len(left) == 2
    assert all(v == {"children": [], "threads": []} for v in left.values()), left


def test_cli_dask_scheduler_address(tmp_path: Path, cluster):
    local_cluster, _ = cluster
    server = tiny(tmp_path)
    cfg = write_config(tmp_path / "mcp.json", {f"s{i}": entry(server) for i in range(4)})
    p = subprocess.run(
        [sys.executable, "-m", "mcpsync", "smoke", str(cfg), "--dask", local_cluster.scheduler_address,
         "--call", "echo", "--json", "-q"],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    data = json.loads(p.stdout)
    assert [s["call"]["ok"] for s in data["servers"]] == [True] * 4


# ----------------------------------------------------------------- --parallel and Ctrl-C

PROBE_SERVER = """import json, os, sys, time
name, where = sys.argv[1], sys.argv[2]
def note(what):
    fd = os.open(os.path.join(where, "log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{what} {name} {time.monotonic()}\\n".encode())
    os.close(fd)
with open(os.path.join(where, name + ".pid"), "w") as f:
    f.write(str(os.getpid()))
note("start")
TOOLS = [{"name": n, "inputSchema": {"type": "object"}} for n in ("hold", "block")]
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "probe", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        if msg["params"]["name"] == "block":
            open(os.path.join(where, name + ".blocking"), "w").close()
            time.sleep(120)
        time.sleep(float((msg["params"].get("arguments") or {}).get("seconds", 0)))
        result = {"content": [{"type": "text", "text": "held"}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\\n")
    sys.stdout.flush()
note("end")
"""


def _probe_config(tmp_path: Path, names: list[str]) -> Path:
    server = tmp_path / "probe_server.py"
    server.write_text(PROBE_SERVER)
    servers = {
        n: {"command": sys.executable, "args": ["-I", "-S", str(server), n, str(tmp_path)]}
        for n in names
    }
    return write_config(tmp_path / "mcp.json", servers)


def _most_at_once(log: Path) -> int:
    events = []
    for line in log.read_text().split("\n"):
        if line:
            what, _, t = line.split()
            events.append((float(t), 1 if what == "start" else -1))
    most = now = 0
    for _, step in sorted(events):
        now += step
        most = max(most, now)
    return most


def test_dask_keeps_at_most_parallel_entries_in_flight(tmp_path: Path, cluster):
    _, client = cluster
    names = [f"p{i}" for i in range(5)]
    cfg = _probe_config(tmp_path, names)
    t0 = time.monotonic()
    report = mcpsync.smoke.run(
        cfg,
        calls=[("hold", {"seconds": 0.5})],
        parallel=2,
        executor=client.get_executor(pure=False),
    )
    assert time.monotonic() - t0 < 60
    assert [e.name for e in report.entries] == names
    assert all(e.ok and e.calls[0].ok for e in report.entries), report.to_json()
    log = (tmp_path / "log").read_text().split()
    assert sorted(log[1::3]) == sorted(names * 2)  # every server started and ended once
    assert _most_at_once(tmp_path / "log") <= 2


def test_ctrl_c_under_dask_stops_the_running_entries_and_their_servers(tmp_path: Path, cluster):
    import signal

    import psutil

    _, client = cluster
    names = ["b0", "b1", "b2"]
    cfg = _probe_config(tmp_path, names)
    signalled: list[float] = []

    def interrupt_once_running() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all((tmp_path / f"{n}.blocking").exists() for n in names):
                signalled.append(time.monotonic())
                signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=interrupt_once_running, daemon=True)
    watcher.start()
    with pytest.raises(KeyboardInterrupt):
        mcpsync.smoke.run(cfg, calls=["block"], executor=client.get_executor(pure=False))
    raised = time.monotonic()
    watcher.join(5)
    assert signalled, "the entries never ran"
    assert raised - signalled[0] < 15, raised - signalled[0]
    servers = []
    for n in names:
        try:
            servers.append(psutil.Process(int((tmp_path / f"{n}.pid").read_text())))
        except psutil.NoSuchProcess:
            pass
    gone, alive = psutil.wait_procs(servers, timeout=5)
    alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], alive
    deadline = time.monotonic() + 10  # the workers' entry threads end too
    while time.monotonic() < deadline:
        left = client.run(_worker_leftovers)
        if all(v == {"children": [], "threads": []} for v in left.values()):
            break
        time.sleep(0.1)
    assert all(v == {"children": [], "threads": []} for v in left.values()), left
