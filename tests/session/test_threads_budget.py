"""Threads and descriptors per session: at most 2 threads per stdio session (issue 14, item 5),
one while idle over HTTP; the timer and the dispatch workers shared by the process; nothing
(thread, descriptor, process) outlives the close of the last session."""

from __future__ import annotations

import os
import threading
import time

import psutil
from fakes import FakeServer
from servers.launch import demo_argv

import mcpsync


def _mcpsync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mcpsync-") and t.is_alive()]


def _wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_stdio_sessions_cost_one_thread_each_plus_shared_ones(no_leaks):
    me = psutil.Process(os.getpid())
    fds_before = me.num_fds()
    before = set(_mcpsync_threads())
    sessions = []
    try:
        for i in range(6):
            s = mcpsync.Session.connect(demo_argv(), name=f"budget{i}")
            sessions.append(s)
            # progress notifications go through the dispatch queue (the shared workers)
            seen = []
            s.call_tool("long_running", {"duration": 0.05, "steps": 2}, on_progress=seen.append)
            assert len(seen) == 2
        threads = [t for t in _mcpsync_threads() if t not in before]
        names = sorted(t.name for t in threads)
        for i in range(6):
            own = [n for n in names if n.endswith(f"[budget{i}]")]
            assert own == [f"mcpsync-stdio-reader[budget{i}]"], names
        shared = [n for n in names if n.endswith("[shared]")]
        assert shared.count("mcpsync-timer[shared]") == 1, names
        # everything else is shared: well under 2 threads per session in all
        assert len(threads) <= 2 * len(sessions), names
        assert len(threads) - len(shared) == len(sessions), names
    finally:
        for s in sessions:
            s.close()
    assert not [t for t in _mcpsync_threads() if t not in before]  # close() joined them all
    assert _wait_for(lambda: me.num_fds() <= fds_before), (me.num_fds(), fds_before)


def test_dispatch_order_holds_per_session_on_the_shared_workers(no_leaks):
    """Twelve sessions, each flooded with numbered notifications at once: every session's
    callbacks see its own in wire order, none of another's."""
    servers = [FakeServer() for _ in range(12)]
    sessions = [
        mcpsync.Session.connect(f.transport, name=f"order{i}") for i, f in enumerate(servers)
    ]
    seen: list[list[int]] = [[] for _ in servers]
    done = [threading.Event() for _ in servers]
    try:
        for i, s in enumerate(sessions):

            def record(method: str, params: dict, i: int = i) -> None:
                seen[i].append(params["n"])
                if params["n"] == 199:
                    done[i].set()

            s.on_notification(record)
        for n in range(200):
            for f in servers:
                f.notify("notifications/custom", {"n": n})
        for event in done:
            assert event.wait(20)
        assert all(numbers == list(range(200)) for numbers in seen)
        workers = [t for t in _mcpsync_threads() if t.name == "mcpsync-dispatch[shared]"]
        assert len(workers) <= len(sessions)  # at most one per busy queue
        # idle sessions cost no dispatch thread: the workers end after a while without work
        assert _wait_for(lambda: not any(t.is_alive() for t in workers), 15)
    finally:
        for s in sessions:
            s.close()


def test_a_slow_callback_in_one_session_does_not_stop_another(no_leaks):
    slow, fast = FakeServer(), FakeServer()
    release = threading.Event()
    started = threading.Event()
    got = threading.Event()
    with (
        mcpsync.Session.connect(slow.transport, name="slow") as a,
        mcpsync.Session.connect(fast.transport, name="fast") as b,
    ):
        a.on_notification(lambda m, p: (started.set(), release.wait(10)))
        b.on_notification(lambda m, p: got.set())
        slow.notify("notifications/custom", {})
        assert started.wait(10)
        fast.notify("notifications/custom", {})
        try:
            assert got.wait(10)  # another worker ran it while the first one is blocked
        finally:
            release.set()


def test_the_last_close_ends_the_shared_threads_and_a_new_session_starts_them_again(no_leaks):
    before = set(_mcpsync_threads())
    with mcpsync.Session.connect(demo_argv(), name="gen1") as s:
        s.call_tool("echo", {"message": "a"})
    assert not [t for t in _mcpsync_threads() if t not in before]
    with mcpsync.Session.connect(demo_argv(), name="gen2") as s:
        assert s.call_tool("echo", {"message": "b"}, timeout=5).content[0].text == "b"
        timers = [t for t in _mcpsync_threads() if t.name == "mcpsync-timer[shared]"]
        assert len(timers) == 1
    assert not [t for t in _mcpsync_threads() if t not in before]
