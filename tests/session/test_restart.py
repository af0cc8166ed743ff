"""The restart policy (``Session.connect(restart=...)``) through the public API: the demo
stdio server killed mid-session, in-scripted fakes (``tests/fakes.py``) for the edge cases
(reads re-sent or not, crash loops, close racing a restart, Ctrl-C while a restart runs,
tasks picked up by id). Every wait is on an Event or a callback, bounded.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from fakes import FakeServer
from servers.launch import demo_argv

import mcpsync
from mcpsync import RestartEvent, RestartLimitReached, RestartPolicy, ServerRestarted
from mcpsync.errors import ConfigError, ServerExited, SessionClosed, TransportError
from mcpsync.protocol.choose import Caches

WAIT = 20.0


class Restarts:
    """An ``on_restart`` that lets the test wait for the n-th event."""

    def __init__(self) -> None:
        self.events: list[RestartEvent] = []
        self.threads: list[str] = []  # where on_restart ran
        self._cond = threading.Condition()

    def __call__(self, event: RestartEvent) -> None:
        with self._cond:
            self.events.append(event)
            self.threads.append(threading.current_thread().name)
            self._cond.notify_all()

    def wait(self, count: int = 1, timeout: float = WAIT) -> RestartEvent:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.events) >= count, timeout), self.events
            return self.events[count - 1]


def kill(session: mcpsync.Session) -> int:
    pid = session.transport.process.pid  # type: ignore[attr-defined]
    psutil.Process(pid).kill()
    return pid


def children() -> set[int]:
    """This process's running descendants (one that ends while we look is not one)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


# -- the demo server, killed -------------------------------------------------------------------


def test_a_killed_stdio_server_comes_back_with_subscription_and_log_level(no_leaks):
    seen = Restarts()
    updated = threading.Event()
    policy = RestartPolicy(backoff=0.05, on_restart=seen)
    with mcpsync.Session.connect(demo_argv(), restart=policy, timeout=10) as s:
        s.subscribe_resource("demo://readme", lambda uri: updated.set())
        s.set_logging_level("error")
        changed = threading.Event()
        s.on_tools_changed(changed.set)
        assert s.restarts == 0 and s.restart_history == []
        first = kill(s)
        event = seen.wait()
        assert event.ok is True and event.number == 1 and event.failures == []
        assert isinstance(event.reason, ServerExited) and event.reason.exit_code == -9
        assert event.reopened == [
            "list changes: tools",
            "subscription demo://readme",
            "log level error",
        ]
        assert s.restarts == 1 and s.restart_history == [event] and not s.closed
        assert seen.threads == ["mcpsync-restart[demo_server]"]  # never the reader or dispatch
        assert s.transport.process.pid != first  # type: ignore[attr-defined]
        # the new server has the subscription: it notifies, and the callback runs
        text = s.call_tool("touch_resource", {"uri": "demo://readme"}).content[0].text
        assert "notified 1 subscriber" in text
        assert updated.wait(WAIT)
        # ... and the log level: a warning is below "error" on the new server too
        assert (
            "suppressed" in s.call_tool("log", {"level": "warning", "message": "x"}).content[0].text
        )
        s.call_tool("add_tool", {"name": "fresh"})
        assert changed.wait(WAIT)
        assert "fresh" in {t.name for t in s.list_tools()}
    assert s.closed


def test_calls_in_flight_fail_with_server_restarted_and_are_not_resent(no_leaks):
    seen = Restarts()
    policy = RestartPolicy(backoff=0.05, on_restart=seen, retry_reads=True)
    with mcpsync.Session.connect(demo_argv(), restart=policy, timeout=30) as s:
        started = threading.Event()
        outcome: dict[str, BaseException] = {}

        def blocking() -> None:
            try:
                s.call_tool("long_running", {"duration": 30, "steps": 300},
                            on_progress=lambda p: started.set())  # fmt: skip
            except BaseException as exc:  # noqa: BLE001 - checked below
                outcome["blocking"] = exc

        caller = threading.Thread(target=blocking)
        caller.start()
        assert started.wait(WAIT)
        future = s.submit_call_tool("long_running", {"duration": 30, "steps": 2})
        kill(s)
        caller.join(WAIT)
        assert not caller.is_alive()
        error = outcome["blocking"]
        assert isinstance(error, ServerRestarted) and error.method == "tools/call"
        assert isinstance(error, ServerExited) and isinstance(error, TransportError)
        assert error.exit_code == -9 and isinstance(error.reason, ServerExited)
        assert "was in flight" in str(error) and "not re-sent" in str(error)
        with pytest.raises(ServerRestarted):
            future.result(WAIT)
        seen.wait()
        assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
        assert s.restarts == 1


# -- fakes: a new FakeServer per bring-up ---------------------------------------------------------


class Fakes:
    """``make_transport`` for a restart policy: each bring-up gets a fresh FakeServer."""

    def __init__(self, handlers: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.handlers = handlers or {}
        #: the handlers of the n-th server (1-based); default: ``handlers``
        self.handlers_of = lambda n: self.handlers
        self.kwargs = kwargs
        self.servers: list[FakeServer] = []
        self.broken = 0  # the next n bring-ups meet a server that died at start

    def __call__(self) -> Any:
        server = FakeServer(handlers=dict(self.handlers_of(len(self.servers) + 1)), **self.kwargs)
        self.servers.append(server)
        if self.broken:
            self.broken -= 1
            server.end.abort(TransportError(f"fake #{len(self.servers)} crashed at start"))
        return server.transport

    def crash(self, n: int = -1) -> None:
        self.servers[n].end.abort(TransportError(f"fake #{len(self.servers)} crashed"))

    def methods(self, n: int) -> list[str]:
        return [m["method"] for m in self.servers[n].log if "method" in m]


def connect(fakes: Fakes, **policy: Any) -> mcpsync.Session:
    policy.setdefault("backoff", 0.0)
    return mcpsync.Session.connect(
        fakes(), restart=RestartPolicy(make_transport=fakes, **policy), timeout=10,
        connect_timeout=5, _caches=Caches(), era="legacy",
    )  # fmt: skip


def never_answers(entered: threading.Event, release: threading.Event) -> Any:
    """A handler that takes the request and never answers (the server dies first)."""

    def handle(message: dict[str, Any]) -> Any:
        entered.set()
        release.wait(WAIT)  # set by the test at its end

    return handle


@pytest.mark.parametrize("retry", [False, True])
def test_reads_in_flight_are_resent_only_when_the_policy_says_so(no_leaks, retry):
    contents = {"contents": [{"uri": "x://a", "text": "fresh"}]}
    arrived = threading.Semaphore(0)
    finished = threading.Event()

    def first_server_blocks(message: dict[str, Any]) -> Any:
        arrived.release()
        finished.wait(WAIT)  # never answers: the server dies first

    fakes = Fakes(capabilities={"resources": {}})
    fakes.handlers_of = lambda n: {
        "resources/read": first_server_blocks if n == 1 else (lambda m: contents)
    }
    seen = Restarts()
    s = connect(fakes, retry_reads=retry, on_restart=seen)
    try:
        outcome: queue.Queue[Any] = queue.Queue()
        reader = threading.Thread(target=lambda: outcome.put(_outcome(s.read_resource, "x://a")))
        reader.start()
        future = s.submit_read_resource("x://a")
        assert arrived.acquire(timeout=WAIT) and arrived.acquire(timeout=WAIT)  # both sent
        fakes.crash(0)
        got = outcome.get(timeout=WAIT)
        reader.join(WAIT)
        if retry:
            assert got.contents[0].text == "fresh"
            assert future.result(WAIT).contents[0].text == "fresh"
            assert fakes.methods(1).count("resources/read") == 2
        else:
            assert isinstance(got, ServerRestarted) and got.method == "resources/read"
            with pytest.raises(ServerRestarted):
                future.result(WAIT)
            seen.wait()
            assert "resources/read" not in fakes.methods(1)
    finally:
        finished.set()
        s.close()


def _outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except BaseException as exc:  # noqa: BLE001 - returned to the test
        return exc


def test_a_tool_call_is_never_resent_even_with_retry_reads(no_leaks):
    entered, release = threading.Event(), threading.Event()
    result = {"content": [{"type": "text", "text": "ran"}]}
    fakes = Fakes()
    fakes.handlers_of = lambda n: {
        "tools/call": never_answers(entered, release) if n == 1 else (lambda m: result)
    }
    seen = Restarts()
    try:
        with connect(fakes, retry_reads=True, on_restart=seen) as s:
            outcome: queue.Queue[Any] = queue.Queue()
            threading.Thread(target=lambda: outcome.put(_outcome(s.call_tool, "t"))).start()
            assert entered.wait(WAIT)
            fakes.crash(0)
            assert isinstance(outcome.get(timeout=WAIT), ServerRestarted)
            seen.wait()
            assert "tools/call" not in fakes.methods(1)
            assert s.call_tool("t").content[0].text == "ran"  # a new call: the new server
    finally:
        release.set()


def test_a_call_made_while_restarting_waits_and_goes_to_the_new_server(no_leaks):
    fakes = Fakes(handlers={"ping": lambda m: {}})
    release, making = threading.Event(), threading.Event()
    original = fakes.__call__

    def slow_make() -> Any:
        making.set()  # only the restart calls it (connect got fakes() itself)
        release.wait(WAIT)  # the restart's bring-up waits for the test
        return original()

    seen = Restarts()
    s = mcpsync.Session.connect(
        fakes(), restart=RestartPolicy(make_transport=slow_make, backoff=0, on_restart=seen),
        timeout=10, connect_timeout=5, _caches=Caches(), era="legacy",
    )  # fmt: skip
    try:
        fakes.crash(0)
        # the death seen and the restart begun: a call made now waits for the new server (a
        # call made before the client saw the death is one in flight: ServerRestarted)
        assert making.wait(WAIT)
        outcome: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=lambda: outcome.put(_outcome(s.ping))).start()
        assert outcome.empty() and not s.closed  # restarting: not closed
        release.set()
        assert outcome.get(timeout=WAIT) is None
        assert seen.wait().ok and fakes.methods(1).count("ping") == 1
    finally:
        s.close()


def test_a_crash_loop_hits_the_attempt_limit_and_keeps_every_reason(no_leaks):
    fakes = Fakes()
    seen = Restarts()
    s = connect(fakes, max_attempts=3, on_restart=seen)
    fakes.broken = 10  # every bring-up from now on meets a dead server
    fakes.crash(0)
    event = seen.wait()
    assert event.ok is False and len(event.failures) == 3
    assert s.closed and s.restarts == 0
    with pytest.raises(RestartLimitReached) as info:
        s.ping()
    error = info.value
    assert isinstance(error, SessionClosed) and isinstance(error, ServerExited)
    assert len(error.reasons) == 4  # the death and the three failed attempts
    assert error.reasons[0] is event.reason and error.reasons[1:] == event.failures
    text = str(error)
    assert "gave up after 3 bring-up attempts" in text and "max_attempts=3" in text
    for n, reason in enumerate(error.reasons, 1):
        assert f"  {n}. {type(reason).__name__}" in text
    assert "fake #1 crashed" in text
    assert len(fakes.servers) == 4  # no more bring-ups after the limit
    s.close()


CRASHY = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("method") == "initialize":
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "crashy", "version": "1"}}}), flush=True)
        elif msg.get("method") == "notifications/initialized":
            print("crashing after bring-up", file=sys.stderr, flush=True)
            sys.exit(3)
    """
)


def test_a_real_server_that_dies_after_each_bring_up_stays_failed(no_leaks, tmp_path: Path):
    script = tmp_path / "crashy.py"
    script.write_text(CRASHY)
    seen = Restarts()
    before = children()
    policy = RestartPolicy(max_attempts=3, backoff=0.01, reset_after=60, on_restart=seen)
    s = mcpsync.Session.connect([sys.executable, str(script)], timeout=5, restart=policy)
    try:
        last = seen.wait(count=4)  # three restarts come up and die again; the fourth death ends it
        assert [e.ok for e in seen.events] == [True, True, True, False]
        assert [e.number for e in seen.events] == [1, 2, 3, 4]
        assert s.closed and s.restarts == 3
        with pytest.raises(RestartLimitReached) as info:
            s.ping()
        reasons = info.value.reasons
        assert reasons == [e.reason for e in seen.events] and last.reason is reasons[-1]
        for reason in reasons:
            assert isinstance(reason, ServerExited) and reason.exit_code == 3
            assert "crashing after bring-up" in reason.stderr_tail
        assert str(info.value).count("ServerExited") == 4
    finally:
        s.close()
    assert children() - before == set()


# -- close racing a restart -----------------------------------------------------------------------


HANG_ON_RESTART = textwrap.dedent(
    """
    import os, runpy, sys, threading
    marker = sys.argv[1]
    if os.path.exists(marker):
        open(marker + ".again", "w").close()
        threading.Event().wait(120)  # a restart that never answers initialize
    open(marker, "w").close()
    sys.argv = ["mcpsync.demo_server"]
    runpy.run_module("mcpsync.demo_server", run_name="__main__")
    """
)


def test_close_racing_a_restart_never_leaves_a_process(no_leaks, tmp_path: Path):
    before = children()
    # 1. close at once after the death (the restart thread may not have started yet)
    for _ in range(5):
        s = mcpsync.Session.connect(demo_argv(), restart=RestartPolicy(backoff=0), timeout=10)
        kill(s)
        s.close()
        assert s.closed
    # 2. close during a long backoff: returns at once
    s = mcpsync.Session.connect(demo_argv(), restart=RestartPolicy(backoff=60), timeout=10)
    kill(s)
    started = time.monotonic()
    s.close()
    assert time.monotonic() - started < 5.0
    # 3. close while the restart's bring-up waits on a server that never answers
    script = tmp_path / "hang.py"
    script.write_text(HANG_ON_RESTART)
    marker = tmp_path / "started"
    restarting = LogWatch("restarting it")
    s = mcpsync.Session.connect(
        [sys.executable, str(script), str(marker)], restart=RestartPolicy(backoff=0),
        timeout=10, connect_timeout=60, inherit_env=True,
    )  # fmt: skip
    try:
        kill(s)
        assert restarting.wait(WAIT)
    finally:
        started = time.monotonic()
        s.close()
        restarting.remove()
    assert time.monotonic() - started < 8.0
    assert s.closed and s.restarts == 0
    assert children() - before == set()


class LogWatch(logging.Handler):
    """Sets an Event when the ``mcpsync`` logger says ``words``."""

    def __init__(self, words: str) -> None:
        super().__init__()
        self.words = words
        self.seen = threading.Event()
        logging.getLogger("mcpsync").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if self.words in record.getMessage():
            self.seen.set()

    def wait(self, timeout: float) -> bool:
        return self.seen.wait(timeout)

    def remove(self) -> None:
        logging.getLogger("mcpsync").removeHandler(self)


# -- Ctrl-C while a restart runs --------------------------------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="pthread_kill")
def test_ctrl_c_during_a_blocking_call_that_waits_for_a_restart_is_bounded(no_leaks):
    assert threading.current_thread() is threading.main_thread()
    before = children()
    restarting = LogWatch("restarting it")
    s = mcpsync.Session.connect(demo_argv(), restart=RestartPolicy(backoff=60), timeout=120)
    stop = threading.Event()
    main = threading.main_thread().ident
    assert main is not None

    def interrupt() -> None:  # Ctrl-C, again and again, until the main thread took one
        while not stop.wait(0.05):
            signal.pthread_kill(main, signal.SIGINT)

    try:
        kill(s)
        assert restarting.wait(WAIT)
        ctrl_c = threading.Thread(target=interrupt)
        started = time.monotonic()
        ctrl_c.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                s.call_tool("echo", {"message": "x"})  # waits for the restart (60 s backoff)
        finally:
            stop.set()
            ctrl_c.join(WAIT)
        assert time.monotonic() - started < 5.0
    finally:
        restarting.remove()
        started = time.monotonic()
        s.close()
        assert time.monotonic() - started < 5.0
    assert children() - before == set()


# -- misuse --------------------------------------------------------------------------------------


def test_policy_arguments_are_checked():
    with pytest.raises(ConfigError):
        RestartPolicy(max_attempts=0)
    with pytest.raises(ConfigError):
        RestartPolicy(backoff=-1)
    with pytest.raises(ConfigError):
        RestartPolicy.of({"maxAttempts": 2, "bogus": 1})
    assert RestartPolicy.of({"maxAttempts": 2, "retryReads": True}) == RestartPolicy(
        max_attempts=2, retry_reads=True
    )
    assert RestartPolicy.of(True) == RestartPolicy() and RestartPolicy.of(False) is None
    p = RestartPolicy(backoff=0.5, factor=2, max_backoff=3)
    assert [p.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_a_transport_target_needs_a_transport_factory(no_leaks):
    server = FakeServer()
    with pytest.raises(ConfigError, match="make_transport"):
        mcpsync.Session.connect(server.transport, restart=True, _caches=Caches(), era="legacy")
    assert server.ended.wait(WAIT)  # the session it brought up was closed


# -- the modern era: the listen stream, the log level, tasks picked up by id -----------------------


MODERN = "2026-07-28"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def discover(capabilities: dict[str, Any]) -> Any:
    return lambda m: {
        "resultType": "complete",
        "supportedVersions": [MODERN],
        "capabilities": capabilities,
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "fake-modern", "version": "1"}},
    }


def modern_connect(fakes: Fakes, **policy: Any) -> mcpsync.Session:
    policy.setdefault("backoff", 0.0)
    return mcpsync.Session.connect(
        fakes(), restart=RestartPolicy(make_transport=fakes, **policy), timeout=10,
        connect_timeout=5, _caches=Caches(), era="modern",
    )  # fmt: skip


def test_modern_listen_stream_and_log_level_are_reopened(no_leaks):
    listens: list[queue.Queue[dict[str, Any]]] = []
    caps = {"tools": {"listChanged": True}, "resources": {"subscribe": True}}

    def handlers(n: int) -> dict[str, Any]:
        listens.append(queue.Queue())

        def listen(message: dict[str, Any]) -> None:
            wanted = message["params"]["notifications"]
            fakes.servers[n - 1].notify(
                "notifications/subscriptions/acknowledged",
                {"_meta": {SUB: message["id"]}, "notifications": wanted},
            )
            listens[n - 1].put(message)
            return None  # the stream stays open

        text = {"resultType": "complete", "content": [{"type": "text", "text": "ok"}]}
        return {"server/discover": discover(caps), "subscriptions/listen": listen,
                "tools/call": lambda m: text}  # fmt: skip

    fakes = Fakes()
    fakes.handlers_of = handlers
    seen = Restarts()
    updates: queue.Queue[str] = queue.Queue()
    with modern_connect(fakes, on_restart=seen) as s:
        assert s.era == "modern"
        s.subscribe_resource("file:///a", updates.put)
        s.on_tools_changed(lambda: None)
        s.set_logging_level("error")
        while (
            listens[0].get(timeout=WAIT)["params"]["notifications"].get("toolsListChanged") is None
        ):
            pass  # the first stream had only the URI; the second adds the tools
        fakes.crash(0)
        event = seen.wait()
        assert event.ok and event.reopened[0] == "list changes: tools"
        reopened = listens[1].get(timeout=WAIT)
        assert reopened["params"]["notifications"] == {
            "toolsListChanged": True,
            "resourceSubscriptions": ["file:///a"],
        }
        fakes.servers[1].notify(
            "notifications/resources/updated", {"_meta": {SUB: reopened["id"]}, "uri": "file:///a"}
        )
        assert updates.get(timeout=WAIT) == "file:///a"
        s.call_tool("t")
        call = next(m for m in fakes.servers[1].log if m.get("method") == "tools/call")
        assert call["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "error"


SUB = "io.modelcontextprotocol/subscriptionId"


def a_task(status: str, **extra: Any) -> dict[str, Any]:
    return {"resultType": "complete", "taskId": "task-1", "status": status, "ttlMs": 60000,
            "pollIntervalMs": 10, "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", **extra}  # fmt: skip


DONE = {"content": [{"type": "text", "text": "task done"}], "isError": False}


def test_a_task_is_picked_up_by_id_after_a_restart_and_in_a_new_session(no_leaks):
    polled = threading.Event()

    def handlers(n: int) -> dict[str, Any]:
        def get(message: dict[str, Any]) -> Any:
            if n == 1:
                polled.set()
                return a_task("working")
            return a_task("completed", result=DONE)  # the task outlived the server process

        return {
            "server/discover": discover({"tools": {}, **TASKS}),
            "tools/call": lambda m: {**a_task("working"), "resultType": "task"},
            "tasks/get": get,
        }

    fakes = Fakes()
    fakes.handlers_of = handlers
    seen = Restarts()
    with modern_connect(fakes, on_restart=seen) as s:
        future = s.submit_call_tool("slow")
        assert polled.wait(WAIT)
        assert future.task_id == "task-1"
        fakes.crash(0)
        with pytest.raises(ServerRestarted):
            future.result(WAIT)
        seen.wait()
        picked = s.task("task-1")
        assert picked.task_id == "task-1"
        assert picked.result(WAIT).content[0].text == "task done"
        gets = [m for m in fakes.servers[1].log if m.get("method") == "tasks/get"]
        assert gets and gets[0]["params"]["taskId"] == "task-1"
        assert not any(m.get("method") == "tools/call" for m in fakes.servers[1].log)
    # another process (here: another session, no restart policy) picks it up by id too
    other = FakeServer(handlers=handlers(2))
    with mcpsync.Session.connect(other.transport, timeout=10, _caches=Caches(), era="modern") as s2:
        assert s2.task("task-1").result(WAIT).content[0].text == "task done"


def test_picking_up_a_task_needs_the_tasks_extension(no_leaks):
    with connect(Fakes()) as s:  # legacy era
        with pytest.raises(mcpsync.CapabilityError, match="tasks extension"):
            s.task("task-1")
