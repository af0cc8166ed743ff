"""Fork safety: a session or host used in a child of os.fork() raises ForkedError; the
child's close() releases only its copies; the parent's sessions go on undisturbed."""

from __future__ import annotations

import faulthandler
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest

import mcpsync
from mcpsync.errors import ForkedError, MCPSyncError, SessionClosed
from mcpsync.host import Host
from mcpsync.runtime import lifecycle as _lifecycle
from tests.fakes import FakeServer

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

DEMO = [sys.executable, "-m", "mcpsync.demo_server"]
WAIT = 20.0


def _in_child(body: Callable[[], dict[str, Any]], *, hold: bool = False) -> tuple[int, int, int]:
    """Fork; run ``body`` in the child and send its dict back. Returns (pid, result fd,
    release fd): with ``hold`` the child then waits until the release fd is written/closed."""
    results_r, results_w = os.pipe()
    release_r, release_w = os.pipe()
    # (no thread is inside a logging handler at the fork: mcpsync.runtime.logfork's at-fork hook)
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            # a child that hangs says where: every thread's stack on stderr before the
            # parent's wait (WAIT) runs out
            faulthandler.dump_traceback_later(WAIT - 5, exit=False)
            os.close(results_r)
            os.close(release_w)
            try:
                out = body()
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                out = {"crash": f"{type(exc).__name__}: {exc}"}
            os.write(results_w, (json.dumps(out) + "\n").encode())
            os.close(results_w)
            if hold:
                os.read(release_r, 1)  # until the parent says so (or dies)
        except BaseException:  # noqa: BLE001 - a child must end here whatever happens
            code = 1
        finally:
            os._exit(code)
    os.close(results_w)
    os.close(release_r)
    return pid, results_r, release_w


def _read_result(fd: int) -> dict[str, Any]:
    import select

    ready, _, _ = select.select([fd], [], [], WAIT)
    assert ready, "the child did not report in time"
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return json.loads(data)  # type: ignore[no-any-return]


def _reap(pid: int) -> int:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the child did not exit in time")


def _attempt(what: str, call: Callable[[], Any]) -> dict[str, Any]:
    try:
        result = call()
        if isinstance(result, Future):  # the raw layer: its future fails (nothing was sent)
            result.result(timeout=WAIT)
    except ForkedError as exc:
        return {what: ["ForkedError", str(exc), exc.owner_pid, exc.pid]}
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        return {what: [type(exc).__name__, str(exc)]}
    return {what: ["returned"]}


@pytest.fixture
def demo() -> Iterator[mcpsync.Session]:
    with mcpsync.Session.connect(DEMO, name="demo-fork") as session:
        yield session


def test_forked_session_refuses_every_call_and_the_parent_goes_on(demo: mcpsync.Session) -> None:
    assert demo.call_tool("echo", {"message": "before"}).content[0].text == "before"
    demo.list_tools()  # a cached list: the child must not get it either
    server = demo.transport.process  # type: ignore[attr-defined]
    parent = os.getpid()

    def child() -> dict[str, Any]:
        out: dict[str, Any] = {"closed": demo.closed}
        out |= _attempt("call_tool", lambda: demo.call_tool("echo", {"message": "x"}))
        out |= _attempt("submit", lambda: demo.submit_call_tool("echo", {"message": "x"}))
        out |= _attempt("list_tools", demo.list_tools)
        out |= _attempt("ping", demo.ping)
        out |= _attempt("set_logging_level", lambda: demo.set_logging_level("info"))
        out |= _attempt("on_tools_changed", lambda: demo.on_tools_changed(lambda: None))
        out |= _attempt("submit_list_tools", demo.submit_list_tools)
        out |= _attempt("list_resources", demo.list_resources)
        out |= _attempt("list_resource_templates", demo.list_resource_templates)
        out |= _attempt("read_resource", lambda: demo.read_resource("demo://x"))
        out |= _attempt("subscribe", lambda: demo.subscribe_resource("demo://x", print))
        out |= _attempt("list_prompts", demo.list_prompts)
        out |= _attempt("get_prompt", lambda: demo.get_prompt("p"))
        out |= _attempt("raw request", lambda: demo.connection.request("ping"))
        out |= _attempt("close", demo.close)
        out |= _attempt("call_after_close", demo.ping)
        return out

    pid, results, release = _in_child(child)
    got = _read_result(results)
    os.close(release)
    assert _reap(pid) == 0
    assert got.pop("closed") is True
    assert got.pop("close") == ["returned"]
    for what, outcome in got.items():
        assert outcome[0] == "ForkedError", (what, outcome)
        assert outcome[2:] == [parent, pid], (what, outcome)
        assert (
            f"opened in process {parent}" in outcome[1]
            and f"os.fork() in process {pid}" in outcome[1]
        )
        named = "stdio transport to 'demo-fork'" if what == "raw request" else "session 'demo-fork'"
        assert named in outcome[1], (what, outcome)
    # The parent never noticed: same server, same session, every call answered.
    assert server.poll() is None
    assert not demo.closed
    for i in range(20):
        assert demo.call_tool("echo", {"message": f"after {i}"}).content[0].text == f"after {i}"


def test_child_holding_its_copies_does_not_keep_the_server_from_seeing_eof() -> None:
    """The at-fork hook closes the child's copies of the pipes at once: while the child
    lives on, the parent's close() still ends the server by stdin EOF (exit code 0),
    without the ladder's SIGTERM (shutdown_timeout 2 s)."""
    session = mcpsync.Session.connect(DEMO, name="demo-hold")
    server = session.transport.process  # type: ignore[attr-defined]
    pid, results, release = _in_child(lambda: {"ok": True}, hold=True)
    try:
        assert _read_result(results) == {"ok": True}
        started = time.monotonic()
        session.close()
        took = time.monotonic() - started
        assert server.returncode == 0, server.returncode  # EOF, not a signal
        assert took < 1.5, took
    finally:
        os.close(release)
        assert _reap(pid) == 0


def test_forked_host_refuses_and_its_close_signals_nothing() -> None:
    with Host({"demo": {"command": DEMO[0], "args": DEMO[1:]}}) as host:
        assert host.call_tool("echo", {"message": "up"}).content[0].text == "up"
        server = host.session("demo").transport.process

        def child() -> dict[str, Any]:
            out: dict[str, Any] = {}
            out |= _attempt("call_tool", lambda: host.call_tool("echo", {"message": "x"}))
            out |= _attempt("session", lambda: host.session("demo"))
            out |= _attempt("status", host.status)
            out |= _attempt("list_tools", host.list_tools)
            out |= _attempt("close", host.close)
            out |= _attempt("after_close", lambda: host.session("demo"))
            return out

        pid, results, release = _in_child(child)
        got = _read_result(results)
        os.close(release)
        assert _reap(pid) == 0
        assert got.pop("close") == ["returned"]
        for what, outcome in got.items():
            assert outcome[0] == "ForkedError", (what, outcome)
            assert "host" in outcome[1]
        assert server.poll() is None
        for i in range(10):
            assert host.call_tool("echo", {"message": str(i)}).content[0].text == str(i)
    assert server.returncode == 0  # the parent's close: stdin EOF, nothing else


def test_forked_http_session_sends_nothing() -> None:
    """Streamable HTTP: the child's call is refused and its close() sends no DELETE (the
    server still knows the parent's session, which goes on without re-initializing)."""
    from mcpsync.demo_server.http import DemoHTTPServer

    with DemoHTTPServer() as server:
        with mcpsync.Session.connect(server.url, name="demo-http-fork") as session:
            assert session.call_tool("echo", {"message": "a"}).content[0].text == "a"
            requests_before = len(server.requests)

            def child() -> dict[str, Any]:
                return _attempt(
                    "call_tool", lambda: session.call_tool("echo", {"message": "x"})
                ) | (_attempt("close", session.close))

            pid, results, release = _in_child(child)
            got = _read_result(results)
            os.close(release)
            assert _reap(pid) == 0
            assert got["call_tool"][0] == "ForkedError"
            assert got["close"] == ["returned"]
            assert len(server.requests) == requests_before  # the child sent nothing at all
            assert len(server.sessions) == 1
            for i in range(5):
                assert session.call_tool("echo", {"message": str(i)}).content[0].text == str(i)
            assert session.reinitializations == 0
        assert server.sessions == {}  # the parent's close() sent its DELETE


def _mp_target(session: mcpsync.Session, queue: Any) -> None:
    try:
        session.ping()
    except ForkedError as exc:
        queue.put(("ForkedError", isinstance(exc, SessionClosed), isinstance(exc, MCPSyncError)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        queue.put((type(exc).__name__, str(exc)))
    else:
        queue.put(("returned",))


def test_multiprocessing_fork_start(demo: mcpsync.Session) -> None:
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_mp_target, args=(demo, queue))
    proc.start()
    try:
        assert queue.get(timeout=WAIT) == ("ForkedError", True, True)
    finally:
        proc.join(WAIT)
    assert proc.exitcode == 0
    demo.ping()


def test_memory_session_in_child() -> None:
    server = FakeServer(handlers={"ping": lambda message: {}})
    session = mcpsync.Session.connect(server.transport, name="mem")
    try:
        session.ping()
        pid, results, release = _in_child(
            lambda: _attempt("ping", session.ping) | _attempt("close", session.close)
        )
        got = _read_result(results)
        os.close(release)
        assert _reap(pid) == 0
        assert got["ping"][0] == "ForkedError"
        assert got["close"] == ["returned"]
        session.ping()  # the parent's pair is intact: the child's close sent nothing
        assert not session.closed
    finally:
        session.close()
        server.end.close()


def test_the_child_opens_its_own_sessions_from_any_thread(demo: mcpsync.Session) -> None:
    """After the fork the child starts servers of its own, from a worker thread too (its
    spawner thread is its own: the parent's did not survive the fork), and closes them."""
    import threading

    # the parent has a spawner thread at work while it forks
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.update(s=mcpsync.Session.connect(DEMO)))
    worker.start()
    worker.join(WAIT)
    parents = box["s"]

    def child() -> dict[str, Any]:
        out: dict[str, Any] = {}

        def use() -> None:
            with mcpsync.Session.connect(DEMO, name="child-own", connect_timeout=15) as own:
                out["echo"] = own.call_tool("echo", {"message": "mine"}).content[0].text
                out["code"] = None
            out["code"] = own.transport.process.returncode  # type: ignore[attr-defined]

        thread = threading.Thread(target=use)
        thread.start()
        thread.join(WAIT)
        out["alive"] = thread.is_alive()
        return out

    try:
        pid, results, release = _in_child(child)
        got = _read_result(results)
        os.close(release)
        assert _reap(pid) == 0
        assert got == {"echo": "mine", "code": 0, "alive": False}
        assert parents.call_tool("echo", {"message": "p"}).content[0].text == "p"
    finally:
        parents.close()


HOOKLESS = """
import json, os, sys
import mcpsync
session = mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"], name="hookless")
server = session.transport.process
real = os.getpid()
os.getpid = lambda: real + 100000  # as in a child whose fork ran no at-fork hook
out = {}
try:
    session.ping()
except mcpsync.ForkedError as exc:
    out["error"] = [str(exc), exc.owner_pid, exc.pid]
session.close()  # the release: nothing sent, no signal
# the release closed this process's pipe ends (here, with no real fork, the only ones): the
# server may see EOF and end by itself (exit 0), but it is never signalled (negative code)
try:
    out["server_code"] = server.wait(10)
except Exception:  # noqa: BLE001 - still running: not signalled either
    out["server_code"] = None
out["closed"] = session.closed
print(json.dumps(out), flush=True)
server.kill()
"""


def test_a_fork_without_at_fork_hooks_is_noticed_at_the_first_call() -> None:
    """uwsgi without py-call-osafterfork forks without Python's hooks: the first call in the
    child sees the new pid (os.getpid), runs the release then, and raises the same error."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", HOOKLESS], capture_output=True, text=True, timeout=60, check=True
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    message, owner, pid = got["error"]
    assert pid == owner + 100000 and "session 'hookless'" in message
    assert got["server_code"] in (None, 0) and got["closed"] is True


def test_the_error_is_public_and_a_session_closed() -> None:
    assert mcpsync.ForkedError is ForkedError
    assert issubclass(ForkedError, SessionClosed) and issubclass(ForkedError, MCPSyncError)
    error = ForkedError("session 'x'", 10, 11)
    assert (error.owner_pid, error.pid) == (10, 11)
    assert "process 10" in str(error) and "os.fork() in process 11" in str(error)


def test_predicate_and_owning_again() -> None:
    """The hook a restart policy uses: forked(obj); own() makes it this process's again."""
    server = FakeServer(handlers={"ping": lambda message: {}})
    session = mcpsync.Session.connect(server.transport, name="own")
    try:
        assert not _lifecycle.forked(session)

        def child() -> dict[str, Any]:
            before = _lifecycle.forked(session)
            _lifecycle.own(session, "session 'own'")
            return {"before": before, "after": _lifecycle.forked(session)}

        pid, results, release = _in_child(child)
        assert _read_result(results) == {"before": True, "after": False}
        os.close(release)
        assert _reap(pid) == 0
    finally:
        session.close()
        server.end.close()


def test_a_validator_lock_held_by_a_parent_thread_does_not_block_the_child() -> None:
    """A parent thread building a validator (holding the build lock) at the fork instant:
    the child's own first builds must not wait for a thread it does not have."""
    import threading

    from mcpsync import typed as _typed

    _typed.types()
    held, release = threading.Event(), threading.Event()

    def builder() -> None:
        with _typed._build_lock:  # as _validator holds it while pydantic builds
            held.set()
            release.wait(WAIT)

    thread = threading.Thread(target=builder, name="mcpsync-test[builder]")
    thread.start()
    try:
        assert held.wait(WAIT)

        def child() -> dict[str, Any]:
            _typed._validators.pop("CompleteResult", None)  # not built in this child yet
            result = _typed.validate("CompleteResult", {"completion": {"values": ["a"]}})
            return {"values": list(result.completion.values)}

        pid, results, release_fd = _in_child(child)
        got = _read_result(results)
        os.close(release_fd)
        assert _reap(pid) == 0
        assert got == {"values": ["a"]}
    finally:
        release.set()
        thread.join(WAIT)
