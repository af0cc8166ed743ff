"""Tasks started by ``call_tool(task=...)`` / ``submit_call_tool(task=...)``.

2025-11-25 against real peers: the on-disk tasks server (``servers/tasks_server.py``: it logs
every request it reads, so "nothing sent" is checked on the server's side) and the npm
server-everything (``simulate-research-query``, ``execution.taskSupport`` "required").
The 2026-07-28 era (the server decides) against a scripted server over the memory pair.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

import mcp_types
import psutil
import pytest
from servers.launch import SERVERS_DIR, everything_stdio_argv
from test_restart import Restarts

import mcpsync
from mcpsync import RestartPolicy, TaskFuture

WAIT = 30.0
ROOT = Path(__file__).resolve().parents[2]


def tasks_argv(store: Path, *flags: str) -> list[str]:
    return [sys.executable, str(SERVERS_DIR / "tasks_server.py"), str(store), *flags]


def seen(store: Path, method: str | None = None) -> list[dict[str, Any]]:
    """Every request the tasks servers on ``store`` read (of ``method``), in order."""
    out = []
    for log in sorted(store.glob("requests-*.jsonl")):
        out += [json.loads(line) for line in log.read_text().splitlines()]
    return [r for r in out if method is None or r["method"] == method]


def tool_calls(store: Path) -> list[dict[str, Any]]:
    return [r["params"] for r in seen(store, "tools/call")]


def everything() -> list[str]:
    try:
        return everything_stdio_argv()
    except Exception as exc:  # noqa: BLE001 - LaunchError: the npm peers are missing
        pytest.skip(str(exc))


# -- the on-disk tasks server ------------------------------------------------------------------


def test_task_true_and_a_ttl_start_a_task_with_a_typed_checked_result(no_leaks, tmp_path: Path):
    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        s.list_tools()
        future = s.submit_call_tool("counted", {"n": 3}, task=True)
        assert isinstance(future, TaskFuture)
        task_id = future.wait_task_id(WAIT)
        assert isinstance(task_id, str) and future.task_id == task_id
        result = future.result(WAIT)
        assert isinstance(result, mcp_types.CallToolResult)
        assert result.structured_content == {"n": 3}
        # blocking, with a ttl in seconds: the wire has it in milliseconds
        assert s.call_tool("counted", {"n": 4}, task=90).structured_content == {"n": 4}
        # the outputSchema is checked on the task's result as on a plain call's
        with pytest.raises(mcpsync.ProtocolError, match="counted"):
            s.call_tool("counted", {"n": "four"}, task=True)
        # an optional tool without task=: a plain call
        assert s.call_tool("counted", {"n": 5}).structured_content == {"n": 5}
    calls = tool_calls(tmp_path)
    assert [c.get("task") for c in calls] == [{}, {"ttl": 90000}, {}, None]
    assert [r["params"]["taskId"] for r in seen(tmp_path, "tasks/result")][0] == task_id


def test_a_required_tool_called_plainly_goes_as_a_task_and_another_session_picks_it_up(
    no_leaks, tmp_path: Path
):
    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        s.list_tools()
        future = s.submit_call_tool("slow", {"message": "m1"})  # taskSupport "required"
        task_id = future.wait_task_id(WAIT)
        assert isinstance(task_id, str) and not future.done()  # working until released
        with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as other:
            picked = other.task(task_id)
            assert picked.task_id == task_id
            (tmp_path / "release").touch()
            assert picked.result(WAIT).content[0].text == "done: m1"
        assert future.result(WAIT).content[0].text == "done: m1"
        # blocking: released already, so it completes at the first poll
        assert s.call_tool("slow", {"message": "m2"}).content[0].text == "done: m2"
    assert [c.get("task") for c in tool_calls(tmp_path)] == [{}, {}]


def test_on_progress_hears_the_task_until_it_ends_then_the_token_is_dropped(
    no_leaks, tmp_path: Path
):
    reports: list[mcpsync.Progress] = []
    got = threading.Condition()

    def on_progress(p: mcpsync.Progress) -> None:
        with got:
            reports.append(p)
            got.notify_all()

    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        s.list_tools()
        future = s.submit_call_tool("slow", {"message": "p"}, on_progress=on_progress)
        assert isinstance(future.wait_task_id(WAIT), str)
        with got:  # reports after the CreateTaskResult: "created", then one a poll
            assert got.wait_for(lambda: len(reports) >= 3, WAIT), reports
        assert not future.done()
        (tmp_path / "release").touch()
        assert future.result(WAIT).content[0].text == "done: p"
        assert [r.progress for r in reports[:3]] == [1, 2, 3]
        assert reports[0].message == "created" and reports[1].message == "working"
        token = tool_calls(tmp_path)[0]["_meta"]["progressToken"]
        assert token not in s.connection.progress  # heard until the future resolved
        # blocking, with a ttl: the same
        blocking: list[mcpsync.Progress] = []
        assert s.call_tool("slow", {"message": "q"}, task=60, on_progress=blocking.append)
        assert blocking and blocking[0].message == "created"
        assert not s.connection.progress


def test_refused_task_calls_send_nothing(no_leaks, tmp_path: Path):
    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        s.list_tools()
        with pytest.raises(mcpsync.CapabilityError, match=r"'quick'.*forbidden"):
            s.call_tool("quick", {"message": "x"}, task=True)  # no execution: forbidden
        with pytest.raises(mcpsync.CapabilityError, match=r"'quick'.*forbidden"):
            s.submit_call_tool("quick", {"message": "x"}, task=5)
        with pytest.raises(mcpsync.CapabilityError, match=r"'slow'.*required"):
            s.call_tool("slow", {"message": "x"}, task=False)
        with pytest.raises(mcpsync.ConfigError, match="ttl in seconds"):
            s.call_tool("counted", {"n": 1}, task=0)
        assert s.call_tool("quick", {"message": "plain"}).content[0].text == "quick: plain"
    # the server read one tools/call: the plain one (and each reply came after its request)
    assert tool_calls(tmp_path) == [{"name": "quick", "arguments": {"message": "plain"}}]


def test_a_server_without_tasks_refuses_task_calls_unless_lax(no_leaks, tmp_path: Path):
    argv = tasks_argv(tmp_path, "--no-tasks")
    with mcpsync.Session.connect(argv, timeout=10) as s:
        s.list_tools()
        with pytest.raises(mcpsync.CapabilityError, match="tasks.requests.tools.call"):
            s.call_tool("counted", {"n": 1}, task=True)
        with pytest.raises(mcpsync.CapabilityError, match=r"'slow'.*tasks.requests.tools.call"):
            s.call_tool("slow", {"message": "x"})  # required, and the server takes no tasks
        s.ping()
    assert tool_calls(tmp_path) == []
    # strict=False sends it; the server ignores the task and answers plainly (the spec's
    # rule for a receiver without the capability): that result is the outcome
    with mcpsync.Session.connect(argv, timeout=10, strict=False) as s:
        s.list_tools()
        future = s.submit_call_tool("counted", {"n": 2}, task=True)
        assert future.result(WAIT).structured_content == {"n": 2}
        assert future.wait_task_id(0) is None
    assert [c.get("task") for c in tool_calls(tmp_path)] == [{}]


def test_cancelling_a_started_task_sends_tasks_cancel(no_leaks, tmp_path: Path):
    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        s.list_tools()
        future = s.submit_call_tool("slow", {"message": "never"}, task=True)
        task_id = future.wait_task_id(WAIT)
        assert future.cancel() and future.cancelled()
        with pytest.raises(CancelledError):
            future.result(0)
        s.ping()  # after tasks/cancel on the same pipe: the server has handled it
        assert [r["params"] for r in seen(tmp_path, "tasks/cancel")] == [{"taskId": task_id}]
        with pytest.raises(mcpsync.RequestCancelled):
            s.task(task_id).result(WAIT)  # picked up again: it was cancelled
        assert future.cancel()  # cancelled already (Future's rule), and not sent again:
        s.ping()
        assert len(seen(tmp_path, "tasks/cancel")) == 1


def test_ctrl_c_during_a_blocking_task_call_cancels_only_that_task(no_leaks, tmp_path: Path):
    code = textwrap.dedent(
        """
        import json, sys, threading
        import mcpsync
        from mcpsync.session import tasks as _tasks
        argv = json.loads(sys.argv[1])
        # The scenario: Ctrl-C while the blocking call waits for the task. The log line goes
        # out once the main thread waits there (on a loaded machine it may still be finishing
        # the creating request's write when the task is announced: another case).
        waiting = threading.Event()
        wait_for_task = _tasks.futures_wait  # what the blocking call waits on for the task
        def wait(futures, timeout=None):
            if threading.current_thread() is threading.main_thread():
                waiting.set()
            return wait_for_task(futures, timeout)
        _tasks.futures_wait = wait
        # (a main thread never seen waiting for the task says so: the test then fails)
        announce = lambda m: print("LOG" if waiting.wait(30) else "NEVER WAITED", m.data, flush=True)
        with mcpsync.Session.connect(argv, timeout=10, on_log=announce) as s:
            s.list_tools()
            try:
                s.call_tool("slow", {"message": "m", "announce": True})
                print("NOT INTERRUPTED", flush=True)
            except KeyboardInterrupt:
                print("INTERRUPTED", flush=True)
            print("AFTER", s.call_tool("quick", {"message": "still"}).content[0].text, flush=True)
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(tasks_argv(tmp_path))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT),
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line, deadline = "", time.monotonic() + 60
        with selectors.DefaultSelector() as sel:
            sel.register(child.stdout, selectors.EVENT_READ)
            while not line.startswith("LOG created") and time.monotonic() < deadline:
                if sel.select(timeout=deadline - time.monotonic()):
                    line = child.stdout.readline()
                    if not line:
                        break
        assert line.startswith("LOG created"), child.stderr.read() if child.stderr else ""
        task_id = line.split()[-1]
        child.send_signal(signal.SIGINT)  # the task id is known: the reply came first
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert child.returncode == 0, err
    assert out.splitlines() == ["INTERRUPTED", "AFTER quick: still"]
    assert [r["params"] for r in seen(tmp_path, "tasks/cancel")] == [{"taskId": task_id}]
    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        got = s.connection.wait(s.connection.request("tasks/get", {"taskId": task_id}))
        assert got["status"] == "cancelled"


def test_a_task_augmented_request_is_never_cancelled_with_notifications_cancelled(
    no_leaks, tmp_path: Path
):
    # the spec (cancellation): for task-augmented requests tasks/cancel MUST be used instead
    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        s.list_tools()
        with pytest.raises(mcpsync.RequestTimeout):  # the control: a plain request is
            s.call_tool("quick", {"silent": True}, timeout=0.3)
        with pytest.raises(mcpsync.RequestTimeout):
            s.call_tool("counted", {"n": 1, "silent": True}, task=True, timeout=0.3)
        s.ping()  # after everything the client wrote: the server has logged it
    assert [c.get("task") for c in tool_calls(tmp_path)] == [None, {}]
    assert len(seen(tmp_path, "notifications/cancelled")) == 1  # the plain one's only


def _in_poll(pid: int, tid: int) -> bool:
    """Thread ``tid`` of ``pid`` sits in poll(2) (Linux x86-64: syscall 7)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall") as f:
            return f.read().split()[0] == "7"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(
    not os.path.exists("/proc/self/syscall") or os.uname().machine != "x86_64",
    reason="reads /proc/<pid>/syscall (Linux x86-64)",
)
def test_ctrl_c_inside_the_creating_requests_write_still_cancels_the_task(no_leaks, tmp_path: Path):
    code = textwrap.dedent(
        """
        import json, sys
        import mcpsync
        import threading
        argv, hold = json.loads(sys.argv[1]), sys.argv[2]
        run = threading.Thread.run
        def told(self):  # the thread that sends the creating request says which it is
            if self.name.startswith("mcpsync-task-send"):
                print("SENDER", threading.get_native_id(), flush=True)
            run(self)
        threading.Thread.run = told
        with mcpsync.Session.connect(argv, timeout=30) as s:
            s.list_tools()
            # the server reads nothing more until `hold` exists: a big request's write waits
            held = s.submit_call_tool("quick", {"message": "held", "hold": hold})
            print("WRITING", flush=True)
            try:
                s.call_tool("slow", {"message": "x" * 300_000}, task=True)
                print("NOT INTERRUPTED", flush=True)
            except KeyboardInterrupt:
                print("INTERRUPTED", flush=True)
            print("HELD", held.result(30).content[0].text, flush=True)
            print("AFTER", s.call_tool("quick", {"message": "still"}).content[0].text, flush=True)
        """
    )
    hold = tmp_path / "go-on"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(tasks_argv(tmp_path)), str(hold)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(ROOT),
    )  # fmt: skip
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "WRITING\n", child.stderr.read() if child.stderr else ""
        sender = child.stdout.readline().split()
        assert sender[0] == "SENDER", sender
        deadline = time.monotonic() + 60
        pause = threading.Event()
        while not _in_poll(child.pid, int(sender[1])) and time.monotonic() < deadline:
            pause.wait(0.01)  # (the request's write waits in poll for the pipe to drain)
        assert _in_poll(child.pid, int(sender[1]))
        child.send_signal(signal.SIGINT)
        hold.touch()  # the server reads on: the request's rest goes with the next write
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert child.returncode == 0, err
    assert out.splitlines() == ["INTERRUPTED", "HELD quick: held", "AFTER quick: still"]
    calls = [c for c in tool_calls(tmp_path) if c["name"] == "slow"]
    assert len(calls) == 1 and calls[0]["task"] == {}  # the server got it whole, and made it
    tasks = [p.name[len("task-") : -len(".json")] for p in tmp_path.glob("task-*.json")]
    cancels = [r["params"] for r in seen(tmp_path, "tasks/cancel")]
    assert cancels == [{"taskId": t} for t in tasks], err
    assert len(tasks) == 1 and seen(tmp_path, "notifications/cancelled") == []


def test_a_session_closed_while_the_creating_requests_sender_lags_still_cancels_the_task(
    no_leaks, tmp_path: Path
):
    """The thread that sends a creating request (``mcpsync-task-send``) learns of its reply
    only once ``send()`` returned; under load it can wait for a CPU while the caller, back
    from its Ctrl-C, reads that reply, calls on and closes the session. The close must let it
    hand the reply over first, so that the tasks/cancel the Ctrl-C asked for goes out. Here
    that thread is held (after the request was written whole, and after the Ctrl-C) until
    the caller is about to close."""
    code = textwrap.dedent(
        """
        import json, signal, sys, threading
        import mcpsync
        argv = json.loads(sys.argv[1])
        closing = threading.Event()
        with mcpsync.Session.connect(argv, timeout=30) as s:
            s.list_tools()
            submit = s._submit
            def lagging(*args, **kwargs):
                sent = submit(*args, **kwargs)  # the creating request is written whole
                if threading.current_thread().name.startswith("mcpsync-task-send"):
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                    closing.wait(30)  # a thread that waits for a CPU until the close
                return sent
            s._submit = lagging
            try:
                s.call_tool("slow", {"message": "x"}, task=True)
                print("NOT INTERRUPTED", flush=True)
            except KeyboardInterrupt:
                print("INTERRUPTED", flush=True)
            # the CreateTaskResult is read here, before this call's reply
            print("AFTER", s.call_tool("quick", {"message": "still"}).content[0].text, flush=True)
            closing.set()
        """
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.run(
        [sys.executable, "-c", code, json.dumps(tasks_argv(tmp_path))],
        capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=90,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["INTERRUPTED", "AFTER quick: still"], child.stderr
    tasks = [p.name[len("task-") : -len(".json")] for p in tmp_path.glob("task-*.json")]
    assert len(tasks) == 1, child.stderr
    cancels = [r["params"] for r in seen(tmp_path, "tasks/cancel")]
    assert cancels == [{"taskId": tasks[0]}], child.stderr
    assert "could not cancel" not in child.stderr


def test_ctrl_c_while_a_task_is_created_over_http_still_cancels_the_task(no_leaks, tmp_path: Path):
    """Over HTTP the creating POST reads its own reply: a Ctrl-C while the server holds that
    reply must not drop it, or the task id is lost (the task lives on until its ttl). The
    server makes the task once released: tasks/cancel follows with nothing more done."""
    server = subprocess.Popen(
        [*tasks_argv(tmp_path), "--http"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    url = server.stdout.readline().split()[1]
    code = textwrap.dedent(
        """
        import sys
        import mcpsync
        url, hold = sys.argv[1], sys.argv[2]
        with mcpsync.Session.connect(url, timeout=30) as s:
            s.list_tools()
            print("CALLING", flush=True)
            try:
                s.call_tool("slow", {"message": "x", "hold": hold}, task=True)
                print("NOT INTERRUPTED", flush=True)
            except KeyboardInterrupt:
                print("INTERRUPTED", flush=True)
            sys.stdin.readline()  # the test saw tasks/cancel (or gave up)
            print("AFTER", s.call_tool("quick", {"message": "still"}).content[0].text, flush=True)
        """
    )
    hold = tmp_path / "go-on"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen(
        [sys.executable, "-c", code, url, str(hold)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=str(ROOT),
    )  # fmt: skip
    pause = threading.Event()
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "CALLING\n", child.stderr.read() if child.stderr else ""
        deadline = time.monotonic() + 60
        while not [c for c in tool_calls(tmp_path) if c["name"] == "slow"]:
            assert time.monotonic() < deadline, "the server never read the call"
            pause.wait(0.01)  # the server holds the POST's reply from here on
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline() == "INTERRUPTED\n"
        hold.touch()  # the server makes the task and answers the held POST
        deadline = time.monotonic() + 60
        while not seen(tmp_path, "tasks/cancel") and time.monotonic() < deadline:
            pause.wait(0.01)
        child.stdin.write("go on\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=60)
    finally:
        for process in (child, server):
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=10)  # (closes its pipes too)
    assert child.returncode == 0, err
    assert out.splitlines() == ["AFTER quick: still"]
    tasks = [p.name[len("task-") : -len(".json")] for p in tmp_path.glob("task-*.json")]
    assert len(tasks) == 1
    assert [r["params"] for r in seen(tmp_path, "tasks/cancel")] == [{"taskId": tasks[0]}]
    assert seen(tmp_path, "notifications/cancelled") == []


def test_a_started_task_is_followed_across_a_server_restart(no_leaks, tmp_path: Path):
    restarted = Restarts()
    policy = RestartPolicy(backoff=0, on_restart=restarted)
    with mcpsync.Session.connect(tasks_argv(tmp_path), restart=policy, timeout=10) as s:
        s.list_tools()
        future = s.submit_call_tool("slow", {"message": "across"})
        task_id = future.wait_task_id(WAIT)
        first = s.transport.process.pid
        psutil.Process(first).kill()
        assert restarted.wait().ok and s.restarts == 1
        (tmp_path / "release").touch()
        assert future.result(WAIT).content[0].text == "done: across"
        assert future.task_id == task_id
    later = [p for p in tmp_path.glob("requests-*.jsonl") if p.name != f"requests-{first}.jsonl"]
    assert len(later) == 1  # the restarted server was polled, and answered the result
    asked = [json.loads(line) for line in later[0].read_text().splitlines()]
    assert {"method": "tasks/result", "params": {"taskId": task_id}} in asked


# -- server-everything -------------------------------------------------------------------------


@pytest.mark.real
def test_server_everything_required_task_tool_called_plainly(no_leaks):
    with mcpsync.Session.connect(everything(), timeout=20) as s:
        tools = {t.name: t for t in s.list_tools()}
        assert tools["simulate-research-query"].execution.task_support == "required"
        result = s.call_tool("simulate-research-query", {"topic": "healing"})
        assert isinstance(result, mcp_types.CallToolResult) and result.is_error is not True
        assert "Research Report: healing" in result.content[0].text
        with pytest.raises(mcpsync.CapabilityError, match=r"'echo'.*forbidden"):
            s.call_tool("echo", {"message": "x"}, task=True)
        assert s.call_tool("echo", {"message": "x"}).content[0].text.endswith("x")


@pytest.mark.real
def test_server_everything_task_started_picked_up_and_cancelled(no_leaks):
    with mcpsync.Session.connect(everything(), timeout=20) as s:
        s.list_tools()
        future = s.submit_call_tool("simulate-research-query", {"topic": "ids"}, task=120)
        task_id = future.wait_task_id(WAIT)
        assert isinstance(task_id, str)
        text = s.task(task_id).result(WAIT).content[0].text  # the same task, by its id
        assert "Research Report: ids" in text
        assert future.result(WAIT).content[0].text == text
        doomed = s.submit_call_tool("simulate-research-query", {"topic": "doomed"}, task=True)
        doomed_id = doomed.wait_task_id(WAIT)
        assert doomed.cancel()
        with pytest.raises(mcpsync.RequestCancelled):
            s.task(doomed_id).result(WAIT)  # tasks/cancel was handled before this tasks/get


@pytest.mark.real
def test_server_everything_started_task_asks_for_input_through_tasks_result(no_leaks):
    asked: list[Any] = []

    def elicit(request: Any) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"interpretation": "the snake"}}

    with mcpsync.Session.connect(everything(), timeout=20, elicitation_handler=elicit) as s:
        s.list_tools()
        args = {"topic": "python", "ambiguous": True}
        text = s.call_tool("simulate-research-query", args).content[0].text
        assert len(asked) == 1 and "Clarification**: the snake" in text


# -- a scripted 2025-11-25 server: cancel before the CreateTaskResult -------------------------


def test_cancel_before_the_create_task_result_cancels_the_task_when_it_comes(no_leaks):
    from fakes import FakeServer

    task = {"taskId": "t-1", "status": "working", "ttl": 60000, "pollInterval": 10,
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}  # fmt: skip
    caps = {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
    answered = threading.Event()

    def cancel(message: dict[str, Any]) -> None:
        server.reply(message["id"], {**task, "status": "cancelled"})
        answered.set()  # before the session closes

    server = FakeServer(
        capabilities=caps,
        handlers={"tools/call": lambda m: None, "tasks/cancel": cancel},  # tools/call: held
    )
    with mcpsync.Session.connect(server.transport, timeout=10) as s:
        future = s.submit_call_tool("later", {}, task=True)  # not listed: the capability is enough
        held = server.expect("tools/call", timeout=WAIT)
        assert held["params"]["task"] == {} and future.task_id is None
        assert future.cancel() and future.cancelled()
        server.reply(held["id"], {"task": task})
        assert future.wait_task_id(WAIT) == "t-1"
        assert server.expect("tasks/cancel", timeout=WAIT)["params"] == {"taskId": "t-1"}
        assert answered.wait(WAIT)
    sent = [m.get("method") for m in server.log]
    assert "notifications/cancelled" not in sent  # tasks/cancel, as the spec says, only
    assert sent.count("tasks/cancel") == 1 and "tasks/get" not in sent


# -- the 2026-07-28 era: the server decides ----------------------------------------------------


def test_modern_task_option_is_checked_then_left_to_the_server(no_leaks):
    from fakes import FakeServer
    from test_modern_memory import connect, discover_result

    from mcpsync.protocol.modern.envelope import TASKS_EXTENSION

    def task(status: str, **extra: Any) -> dict[str, Any]:
        return {"taskId": "t-9", "status": status, "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttlMs": 60000, "pollIntervalMs": 5,
                **extra}  # fmt: skip

    done = task("completed", result={"content": [{"type": "text", "text": "ok"}]})
    handlers = {
        "tools/call": lambda m: {"resultType": "task", **task("working")},
        "tasks/get": lambda m: {"resultType": "complete", **done},
    }
    caps = {"tools": {}, "extensions": {TASKS_EXTENSION: {}}}
    server = FakeServer(
        handlers={"server/discover": lambda m: discover_result(capabilities=caps), **handlers}
    )
    with connect(server) as s:
        assert s.era == "modern"
        future = s.submit_call_tool("long", {}, task=30)
        assert future.result(WAIT).content[0].text == "ok" and future.task_id == "t-9"
        assert s.call_tool("long", {}, task=True).content[0].text == "ok"
    calls = [m["params"] for m in server.log if m.get("method") == "tools/call"]
    assert len(calls) == 2 and not any("task" in c for c in calls)  # no per-request flag
    plain = FakeServer(
        handlers={"server/discover": lambda m: discover_result(capabilities={"tools": {}})}
    )
    with connect(plain) as s:
        with pytest.raises(mcpsync.CapabilityError, match="tasks extension"):
            s.call_tool("long", {}, task=True)
    assert not [m for m in plain.log if m.get("method") == "tools/call"]
