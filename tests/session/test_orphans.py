"""No orphans: a host killed by SIGKILL takes its stdio servers with it (Linux: the
parent-death signal, set so that it survives the spawning thread's end), and an
interpreter that exits without close() closes its sessions (atexit, one bound)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from mcpsync.transports import spawn

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)

# A server that outlives stdin EOF and ignores SIGTERM: only a SIGKILL (or the
# parent-death signal) ends it, so its disappearance proves which one did.
STUBBORN = textwrap.dedent(
    """
    import signal, sys, threading
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    from mcpsync.demo_server import main
    try:
        main([])
    finally:
        threading.Event().wait(60)
    """
)

# A server that notes its start, and at stdin EOF notes that and exits 0: the files prove
# a clean close (and that nothing started a server again).
MARKING = textwrap.dedent(
    """
    import os, sys
    open(os.path.join(sys.argv[1], f"start-{os.getpid()}"), "w").close()
    from mcpsync.demo_server import main
    main([])
    with open(os.path.join(sys.argv[1], f"eof-{os.getpid()}"), "w") as f:
        f.write("clean")
    """
)

# The host: sessions started from the main thread, from a worker thread that has ended,
# and from a Host's bring-up threads (ended too). It prints the server pids, shows the
# worker's server still answers after its thread ended, then waits to be killed.
HOST = textwrap.dedent(
    """
    import json, sys, threading
    import mcpsync
    from mcpsync.host import Host

    server = [sys.executable, "-c", sys.argv[1], *sys.argv[2:]]
    kw = {"restart": mcpsync.RestartPolicy(backoff=0.0)} if "--restart" in sys.argv else {}
    sessions = [mcpsync.Session.connect(server, name="main", **kw)]
    box = {}
    worker = threading.Thread(
        target=lambda: box.update(s=mcpsync.Session.connect(server, name="worker", **kw))
    )
    worker.start()
    worker.join(60)
    assert not worker.is_alive()
    sessions.append(box["s"])
    entry = {"command": server[0], "args": server[1:]}
    host = Host({"h1": entry, "h2": entry}).start()
    sessions += [host.session("h1"), host.session("h2")]
    for s in sessions:  # every server still answers: none died with its spawning thread
        assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
    print(json.dumps([s.transport.process.pid for s in sessions]), flush=True)
    if sys.argv[-1] == "--exit":
        sys.exit(0)  # without close(): atexit closes them
    threading.Event().wait(120)
    """
)


def _env(method: str, reaper: str = "off") -> dict[str, str]:
    env = dict(os.environ)
    env["MCPSYNC_PDEATHSIG"] = method
    # by default the parent-death signal alone (the reaper, which ends whole groups, has
    # its own tests: tests/session/test_orphans_tree.py)
    env["MCPSYNC_REAPER"] = reaper
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _start_host(
    method: str, *args: str, reaper: str = "off"
) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, *args],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(method, reaper),
        cwd=str(ROOT),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the host prints once its four servers answered
    if not line:
        _end(proc)
        pytest.fail(f"the host script failed (exit {proc.returncode})")
    pids = json.loads(line)
    assert len(pids) == 4 and len(set(pids)) == 4
    return proc, pids


def _end(proc: subprocess.Popen[str]) -> None:
    """The host process killed (if still there), reaped, and its pipe closed."""
    proc.kill()
    proc.wait(WAIT)
    if proc.stdout is not None:
        proc.stdout.close()


def _gone_within(pids: list[int], bound: float) -> tuple[list[int], float]:
    """Poll (bounded) until every pid has exited; return those still running and the time.

    Exited means gone or a zombie: an orphan's zombie waits for the container's init to
    reap it (here that takes a second or two), but it is dead."""
    started = time.monotonic()
    while True:
        alive = [pid for pid in pids if _running_pid(pid)]
        took = time.monotonic() - started
        if not alive or took >= bound:
            return alive, took
        time.sleep(0.01)


def _running_pid(pid: int) -> bool:
    try:
        return _running(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@linux_only
@pytest.mark.parametrize("method", ["setpriv", "preexec"])
def test_sigkilled_host_takes_its_servers_along(method: str) -> None:
    if method == "setpriv" and spawn._setpriv() is None:
        pytest.skip("util-linux setpriv with --pdeathsig is not installed")
    host, pids = _start_host(method, STUBBORN)
    try:
        assert all(_running(psutil.Process(pid)) for pid in pids)
        killed = time.monotonic()
        host.send_signal(signal.SIGKILL)
        alive, _ = _gone_within(pids, 2.0)
        took = time.monotonic() - killed
        assert alive == [], f"{method}: servers {alive} outlived the host's SIGKILL"
        print(f"{method}: 4 servers dead {took * 1000:.0f} ms after the host's SIGKILL")
        host.wait(WAIT)
    finally:
        _end(host)
        _kill_all(pids)


@linux_only
def test_without_the_signal_the_stubborn_servers_would_be_orphans() -> None:
    """The control: with the parent-death signal off, the same servers survive the kill
    (so the test above sees the signal's work, not the servers ending by themselves)."""
    host, pids = _start_host("off", STUBBORN)
    try:
        host.send_signal(signal.SIGKILL)
        host.wait(WAIT)
        alive, _ = _gone_within(pids, 1.0)
        assert sorted(alive) == sorted(pids)
    finally:
        _end(host)
        _kill_all(pids)
        _gone_within(pids, WAIT)


@pytest.mark.parametrize("restart", [False, True])
def test_interpreter_exit_closes_open_sessions(tmp_path: Path, restart: bool) -> None:
    """The host exits without close(): every server saw stdin EOF and exited cleanly; with
    a restart policy, the exit's EOF is not taken for a crash (no server starts again)."""
    flags = ["--restart"] if restart else []
    # as users run it: the reaper on (the closed sessions' groups were forgotten: it
    # signals nothing when the host's exit closes its pipe)
    host, pids = _start_host(spawn.method(), MARKING, str(tmp_path), *flags, "--exit", reaper="on")
    try:
        assert host.wait(WAIT) == 0
        alive, _ = _gone_within(pids, 2.0)
        assert alive == []
        marks = sorted(p.name for p in tmp_path.iterdir())
        expected = [f"eof-{pid}" for pid in pids] + [f"start-{pid}" for pid in pids]
        assert marks == sorted(expected)
    finally:
        _end(host)
        _kill_all(pids)


# Registered before mcpsync's own atexit hook, so it runs right after it (LIFO): how long
# the exit hooks took from sys.exit(), without the interpreter's teardown after them (its
# garbage collection took 4-10 s on a machine with both CPUs busy several times over).
EXIT_SPAN = """
import atexit, sys, time
_exit_at = []
_main_exit = sys.exit
sys.exit = lambda code=0: (_exit_at.append(time.monotonic()), _main_exit(code))
atexit.register(lambda: print("exit-hooks", time.monotonic() - _exit_at[0], flush=True))
"""


def test_interpreter_exit_is_bounded_with_stubborn_servers() -> None:
    """Servers that ignore stdin EOF and SIGTERM: exit still ends them (the ladder's
    SIGKILL) within the exit bound (2 s here), without waiting for the parent-death signal."""
    code = EXIT_SPAN + "import mcpsync.runtime.lifecycle as l; l.EXIT_TIMEOUT = 2.0\n" + HOST
    proc = subprocess.Popen(
        [sys.executable, "-c", code, STUBBORN, "--exit"],
        stdout=subprocess.PIPE,
        text=True,
        env=_env("off"),  # so only the exit hook can end them
        cwd=str(ROOT),
    )
    assert proc.stdout is not None
    pids: list[Any] = []
    try:
        pids = json.loads(proc.stdout.readline())
        mark, took = proc.stdout.readline().split()
        assert mark == "exit-hooks"
        assert proc.wait(WAIT) == 0
        alive, _ = _gone_within(pids, 1.0)
        assert alive == []  # only the exit hook could end them (no parent-death signal)
        assert float(took) < 2.0 + 1.0, took  # the hooks kept their bound (and a margin)
    finally:
        _end(proc)
        _kill_all(pids)


NODE_BIN = ROOT / "tests" / "node" / "node_modules" / ".bin"

# server-everything behind a shell that stays its parent (as npx does): the grandchild too.
EVERYTHING_HOST = textwrap.dedent(
    """
    import json, os, sys, threading
    import psutil
    import mcpsync

    argv = ["sh", "-c", "mcp-server-everything stdio; exit 0"]
    box = {}
    worker = threading.Thread(target=lambda: box.update(
        s=mcpsync.Session.connect(argv, inherit_env=True, name="everything")))
    worker.start()
    worker.join(60)
    session = box["s"]
    assert session.list_tools()
    shell = psutil.Process(session.transport.process.pid)
    tree = [shell.pid] + [c.pid for c in shell.children(recursive=True)]
    print(json.dumps(tree), flush=True)
    threading.Event().wait(120)
    """
)


@linux_only
@pytest.mark.real
def test_sigkilled_host_takes_server_everything_and_its_wrapper_along() -> None:
    """The real peer, as npx runs it (a parent process that stays, node under it): the
    wrapper gets the parent-death signal, node sees its stdin end (the host held the only
    writer). The stubborn test above is the one that tells the signal's work apart."""
    if not (NODE_BIN / "mcp-server-everything").exists():
        pytest.skip("the npm peers are not installed")
    env = _env(spawn.method(), reaper="on")  # as users run it
    env["PATH"] = str(NODE_BIN) + os.pathsep + env["PATH"]
    host = subprocess.Popen(
        [sys.executable, "-c", EVERYTHING_HOST], stdout=subprocess.PIPE, text=True, env=env
    )
    assert host.stdout is not None
    pids: list[int] = []
    try:
        pids = json.loads(host.stdout.readline())
        assert len(pids) >= 2  # the shell and node under it
        host.send_signal(signal.SIGKILL)
        host.wait(WAIT)
        alive, took = _gone_within(pids, 2.0)
        assert alive == [], f"{alive} outlived the host"
        print(f"server-everything tree gone {took * 1000:.0f} ms after the host died")
    finally:
        _end(host)
        _kill_all(pids)


@linux_only
def test_the_spawner_thread_lives_exactly_as_long_as_its_children() -> None:
    if spawn.method() == "off":
        pytest.skip("no parent-death signal here: no spawner")
    procs: list[spawn.ServerProcess] = []

    def start() -> None:
        procs.append(spawn.spawn(["cat"], env=dict(os.environ), cwd=None))

    for _ in range(2):
        worker = threading.Thread(target=start)
        worker.start()
        worker.join(WAIT)
    spawner = spawn._SPAWNER.thread
    assert spawner is not None and spawner.name == "mcpsync-spawner" and spawner.is_alive()
    assert all(psutil.Process(p.pid).ppid() == os.getpid() for p in procs)
    first, second = procs
    for proc in procs:
        assert proc.stdin is not None
    first.stdin.close()  # type: ignore[union-attr]
    first.wait(WAIT)
    first.reaped()
    spawner.join(0.5)
    assert spawner.is_alive()  # the second child still depends on it
    assert _running_pid(second.pid)
    second.stdin.close()  # type: ignore[union-attr]
    second.wait(WAIT)
    second.reaped()
    spawner.join(WAIT)
    assert not spawner.is_alive()  # nothing left to outlive: it ended
    for proc in procs:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    # and it comes back on demand
    worker = threading.Thread(target=start)
    worker.start()
    worker.join(WAIT)
    again = spawn._SPAWNER.thread
    assert again is not None and again is not spawner and again.is_alive()
    third = procs[-1]
    third.kill()
    third.wait(WAIT)
    third.reaped()
    for pipe in (third.stdin, third.stdout, third.stderr):
        if pipe is not None:
            pipe.close()
    again.join(WAIT)
    assert not again.is_alive()


@linux_only
def test_reaped_counts_once_however_many_threads_report_it() -> None:
    if spawn.method() == "off":
        pytest.skip("no parent-death signal here: no spawner")
    procs: list[spawn.ServerProcess] = []
    worker = threading.Thread(
        target=lambda: procs.extend(
            spawn.spawn(["cat"], env=dict(os.environ), cwd=None) for _ in range(2)
        )
    )
    worker.start()
    worker.join(WAIT)
    first, second = procs
    spawner = spawn._SPAWNER
    count = spawner._children  # these two (and any other test's still running)
    assert count >= 2
    first.kill()
    first.wait(WAIT)
    start = threading.Barrier(8)

    def report() -> None:
        start.wait(WAIT)
        first.reaped()

    threads = [threading.Thread(target=report) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert spawner._children == count - 1  # once: the second child still holds the spawner
    second.reaped()  # still running: no effect
    assert spawner._children == count - 1
    second.kill()
    second.wait(WAIT)
    second.reaped()
    assert spawner._children == count - 2
    for proc in procs:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
