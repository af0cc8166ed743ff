"""No orphans, the whole tree: a server that starts children of its own (a shell wrapper
that backgrounds a process, as ``npx``/``uv run`` keep one) leaves nothing behind when its
host is SIGKILLed (the reaper ends the server's process group), nor after ``close()``; and
the reaper never signals a group it was told had ended (pids are recycled)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

import mcpsync
from mcpsync.transports import reaper, spawn

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX's")

#: a server whose shell wrapper backgrounds a grandchild (it stays in the server's group)
WRAPPED = ["sh", "-c", f"sleep 300 & exec {sys.executable} -m mcpsync.demo_server"]

# The host: one session from the main thread, one from a Host's bring-up thread, both
# wrapped; with --fork a forked child of the host lives on (holding its copies of the
# host's descriptors). Prints every pid of the two trees, then waits to be killed.
HOST = textwrap.dedent(
    """
    import json, os, sys, threading
    import psutil
    import mcpsync
    from mcpsync.host import Host

    argv = json.loads(sys.argv[1])
    sessions = [mcpsync.Session.connect(argv, name="main")]
    host = Host({"h": {"command": argv[0], "args": argv[1:]}}).start()
    sessions.append(host.session("h"))
    pids = []
    for s in sessions:
        assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
        server = psutil.Process(s.transport.process.pid)
        kids = [c.pid for c in server.children(recursive=True)]
        assert kids, "the wrapper's background child is there"
        pids += [server.pid, *kids]
    if "--fork" in sys.argv and os.fork() == 0:
        threading.Event().wait(60)  # a child that lives on, holding the fork's copies
        os._exit(0)
    print(json.dumps(pids), flush=True)
    threading.Event().wait(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _alive_after(pids: list[int], bound: float) -> list[int]:
    """Poll (bounded) until every pid has exited (gone or a zombie); those still running."""
    deadline = time.monotonic() + bound
    while True:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.01)


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _host(env_over: dict[str, str], *flags: str) -> tuple[subprocess.Popen[str], list[int]]:
    env = dict(os.environ, **env_over)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, json.dumps(WRAPPED), *flags],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(WAIT)
        pytest.fail(f"the host script failed (exit {proc.returncode})")
    pids = json.loads(line)
    assert len(pids) >= 4 and all(_alive(pid) for pid in pids)
    return proc, pids


@posix_only
@pytest.mark.parametrize(
    "pdeathsig, flags",
    [("auto", ()), ("off", ()), ("auto", ("--fork",))],
    ids=["with-pdeathsig", "reaper-alone", "a-forked-child-lives-on"],
)
def test_sigkilled_host_takes_servers_and_their_children_along(
    pdeathsig: str, flags: tuple[str, ...]
) -> None:
    """The server and its wrapper's background child, started from the main thread and
    from a Host: all gone within 2 s of the host's SIGKILL. "reaper-alone": without the
    parent-death signal (macOS, the BSDs) the reaper ends the server too. With a forked
    child of the host alive, its copy of the reaper's pipe was closed at the fork."""
    host, pids = _host({"MCPSYNC_PDEATHSIG": pdeathsig}, *flags)
    forked = [c.pid for c in psutil.Process(host.pid).children() if c.pid not in pids]
    try:
        killed = time.monotonic()
        host.send_signal(signal.SIGKILL)
        alive = _alive_after(pids, 2.0)
        took = time.monotonic() - killed
        assert alive == [], f"{alive} outlived the host's SIGKILL"
        print(f"{len(pids)} processes gone {took * 1000:.0f} ms after the host's SIGKILL")
        host.wait(WAIT)
    finally:
        host.kill()
        host.wait(WAIT)
        _kill(pids + forked)


@posix_only
def test_without_the_reaper_the_wrappers_children_would_be_orphans() -> None:
    """The control: with the reaper off, the parent-death signal ends each server but not
    the child its wrapper started (so the test above sees the reaper's work)."""
    host, pids = _host({"MCPSYNC_REAPER": "off"})
    try:
        servers = pids[0 :: len(pids) // 2]  # each tree's first pid is its server
        host.send_signal(signal.SIGKILL)
        host.wait(WAIT)
        if spawn.method() != "off":
            assert _alive_after(servers, 2.0) == []
        survivors = [pid for pid in pids if pid not in servers]
        assert _alive_after(survivors, 0.5) == survivors
    finally:
        _kill(pids)
        _alive_after(pids, WAIT)


@posix_only
def test_close_ends_the_whole_tree_and_the_reaper_forgets_it(no_leaks) -> None:
    others = reaper.REAPER.watched()  # servers of this process still up (none, normally)
    session = mcpsync.Session.connect(WRAPPED, name="wrapped", timeout=20)
    try:
        server = psutil.Process(session.transport.process.pid)
        kids = [c.pid for c in server.children(recursive=True)]
        assert kids and all(_alive(pid) for pid in kids)
        assert server.pid in reaper.REAPER.watched()
        reaper_pid = reaper.REAPER.pid
        assert reaper_pid is not None and _alive(reaper_pid)
    finally:
        session.close()
    assert _alive_after([server.pid, *kids], 2.0) == []
    assert server.pid not in reaper.REAPER.watched()
    if others:  # another session's server is still up: the reaper keeps guarding it
        assert reaper.REAPER.pid == reaper_pid and _alive(reaper_pid)
        return
    # the reaper is nobody's child here (the leak check cannot see it): with the last server
    # gone it ends too, nothing of ours outlives close(); the next spawn starts another
    assert reaper.REAPER.watched() == frozenset() and reaper.REAPER.pid is None
    assert _alive_after([reaper_pid], WAIT) == []
    with mcpsync.Session.connect(WRAPPED, name="again", timeout=20) as again:
        assert again.transport.process.pid in reaper.REAPER.watched()
        assert reaper.REAPER.pid not in (None, reaper_pid) and _alive(reaper.REAPER.pid)


@posix_only
def test_the_reaper_ends_what_it_knows_and_never_a_forgotten_group() -> None:
    """Closing the pipe is exactly what the host's death does: the reaper then ends the
    groups it still knows (SIGTERM; a member that ignores it gets SIGKILL after the
    grace) and leaves alone a group it was told had ended (its id may be someone else's)."""
    mine = reaper.Reaper()
    stubborn = "trap '' TERM; sleep 300 & while :; do sleep 1; done"
    known = subprocess.Popen(["sh", "-c", stubborn], start_new_session=True)
    told_gone = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        for proc in (known, told_gone):
            mine.watch(proc.pid)
        assert mine.pid is not None and _alive(mine.pid)
        assert mine.pid not in {p.pid for p in psutil.Process().children(recursive=True)}
        # the shell's background child, in the known group
        deadline = time.monotonic() + WAIT
        while not psutil.Process(known.pid).children() and time.monotonic() < deadline:
            time.sleep(0.01)
        members = [known.pid] + [c.pid for c in psutil.Process(known.pid).children()]
        assert len(members) >= 2
        mine.forget(told_gone.pid)
        assert mine.watched() == {known.pid}
        reaper_pid = mine.pid
        mine.close()
        assert known.wait(WAIT) == -signal.SIGKILL  # it ignored SIGTERM: the grace, then KILL
        assert _alive_after(members, WAIT) == []
        assert _alive_after([reaper_pid], WAIT) == []  # the reaper exits when done
        assert told_gone.poll() is None  # forgotten: never signalled
    finally:
        mine.close()
        for proc in (known, told_gone):
            proc.kill()
            proc.wait(WAIT)


@posix_only
def test_a_killed_reaper_is_replaced_and_told_every_group() -> None:
    mine = reaper.Reaper()
    server = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        mine.watch(server.pid)
        first = mine.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert _alive_after([first], WAIT) == []
        other = subprocess.Popen(["sleep", "300"], start_new_session=True)
        try:
            mine.watch(other.pid)  # the write fails: a new reaper, told both groups
            assert mine.pid not in (None, first)
            mine.close()
            assert server.wait(WAIT) == -signal.SIGTERM
            assert other.wait(WAIT) == -signal.SIGTERM
        finally:
            other.kill()
            other.wait(WAIT)
    finally:
        mine.close()
        server.kill()
        server.wait(WAIT)


@posix_only
def test_the_reaper_ends_with_the_last_group_and_a_new_one_comes_with_the_next() -> None:
    """Forgetting one of two groups keeps the reaper; forgetting the last ends it (and it
    signals nothing: the group was told gone first); the next watch starts another, which
    guards the new group."""
    mine = reaper.Reaper()
    servers = [subprocess.Popen(["sleep", "300"], start_new_session=True) for _ in range(3)]
    try:
        mine.watch(servers[0].pid)
        mine.watch(servers[1].pid)
        first = mine.pid
        assert first is not None and _alive(first)
        mine.forget(servers[0].pid)
        assert mine.pid == first and _alive(first)
        mine.forget(servers[1].pid)  # the last one
        assert mine.pid is None and mine.watched() == frozenset()
        assert _alive_after([first], WAIT) == []
        assert servers[0].poll() is None and servers[1].poll() is None  # never signalled
        mine.watch(servers[2].pid)
        second = mine.pid
        assert second not in (None, first) and _alive(second)
        mine.close()  # as the host's death: the new reaper ends the new group
        assert servers[2].wait(WAIT) == -signal.SIGTERM
        assert servers[0].poll() is None and servers[1].poll() is None
    finally:
        mine.close()
        for proc in servers:
            proc.kill()
            proc.wait(WAIT)


@posix_only
def test_a_killed_reaper_told_of_the_last_group_is_not_replaced_until_the_next_watch() -> None:
    """The reaper killed by someone, then its last group forgotten: the failed write is
    noticed and no reaper is started for nothing; the next watch starts a live one."""
    mine = reaper.Reaper()
    server = subprocess.Popen(["sleep", "300"], start_new_session=True)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        mine.watch(server.pid)
        first = mine.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        assert _alive_after([first], WAIT) == []
        mine.forget(server.pid)
        assert mine.pid is None and mine.watched() == frozenset()
        mine.watch(other.pid)
        assert mine.pid not in (None, first) and _alive(mine.pid)
        mine.close()
        assert other.wait(WAIT) == -signal.SIGTERM
        assert server.poll() is None
    finally:
        mine.close()
        for proc in (server, other):
            proc.kill()
            proc.wait(WAIT)


def test_the_reaper_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPSYNC_REAPER", "off")
    assert not reaper.enabled()
    monkeypatch.setenv("MCPSYNC_REAPER", "on")
    assert reaper.enabled() is (os.name == "posix")


@posix_only
def test_a_dead_reaper_never_kills_a_host_that_does_not_ignore_sigpipe() -> None:
    """Python ignores SIGPIPE; a program embedding it may not. Telling a reaper that was
    killed must not end the host: the write raises no SIGPIPE (a socket pair, MSG_NOSIGNAL)."""
    code = textwrap.dedent(
        """
        import os, signal, subprocess, time
        import psutil
        from mcpsync.transports import reaper
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as in a C host
        mine = reaper.Reaper()
        server = subprocess.Popen(
            ["sleep", "300"], start_new_session=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        mine.watch(server.pid)
        first = mine.pid
        os.kill(first, signal.SIGKILL)
        try:
            psutil.Process(first).wait(30)
        except psutil.NoSuchProcess:
            pass
        mine.forget(server.pid)  # a write to the dead reaper
        mine.watch(server.pid)  # and another, which starts a new one
        print("alive", mine.pid not in (None, first), flush=True)
        mine.forget(server.pid)
        mine.close()
        server.kill()
        server.wait()
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.split() == ["alive", "True"]


@posix_only
def test_a_crashed_servers_group_is_forgotten_once_it_was_waited_for(no_leaks) -> None:
    """A server that dies by itself while its session stays open: once it was waited for
    and its group is empty, the reaper forgets the group (its id may be recycled long
    before the session is closed)."""
    session = mcpsync.Session.connect(
        [sys.executable, "-m", "mcpsync.demo_server"], name="crashing", timeout=20
    )
    try:
        proc = session.transport.process
        assert proc.pid in reaper.REAPER.watched()
        os.kill(proc.pid, signal.SIGKILL)
        with pytest.raises(mcpsync.MCPSyncError):
            session.call_tool("echo", {"message": "x"})  # sees the death (and waits for it)
        deadline = time.monotonic() + WAIT
        while proc.pid in reaper.REAPER.watched() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.returncode is not None and proc.pid not in reaper.REAPER.watched()
    finally:
        session.close()


NODE_DIR = ROOT / "tests" / "node"

# npx as users write it: npm exec (node) -> sh -> node (server-everything), run offline
# from the pinned local install.
NPX_HOST = textwrap.dedent(
    """
    import json, sys, threading
    import psutil
    import mcpsync

    argv = ["npx", "--no-install", "mcp-server-everything", "stdio"]
    session = mcpsync.Session.connect(argv, inherit_env=True, cwd=sys.argv[1], timeout=60)
    assert session.list_tools()
    top = psutil.Process(session.transport.process.pid)
    print(json.dumps([top.pid] + [c.pid for c in top.children(recursive=True)]), flush=True)
    threading.Event().wait(120)
    """
)


@posix_only
@pytest.mark.real
def test_sigkilled_host_takes_an_npx_tree_along() -> None:
    """The real thing: the whole npx tree is gone within 2 s. (node also ends at its stdin's
    EOF; the tests above, with children that read no stdin, tell the reaper's work apart.)"""
    if shutil.which("npx") is None or not (NODE_DIR / "node_modules" / ".bin").is_dir():
        pytest.skip("npx or the pinned npm peers are not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env["PATH"] = str(NODE_DIR / "node_modules" / ".bin") + os.pathsep + env["PATH"]
    host = subprocess.Popen(
        [sys.executable, "-c", NPX_HOST, str(NODE_DIR)], stdout=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    assert host.stdout is not None
    pids: list[int] = []
    try:
        line = host.stdout.readline()
        assert line, "the host script failed"
        pids = json.loads(line)
        assert len(pids) >= 3  # npm exec, the shell, node
        host.send_signal(signal.SIGKILL)
        alive = _alive_after(pids, 2.0)
        assert alive == [], f"{alive} outlived the host"
    finally:
        host.kill()
        host.wait(WAIT)
        _kill(pids)
