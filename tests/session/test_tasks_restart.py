"""Tasks picked up by id (``Session.task``) in the 2025-11-25 era: after the restart
policy brought a killed server back, from another process, and against the npm
server-everything (``tasks/get`` polls, then ``tasks/result``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import mcp_types
import psutil
import pytest
from servers.launch import SERVERS_DIR, everything_stdio_argv
from test_restart import Restarts

import mcpsync
from mcpsync import RestartPolicy

WAIT = 30.0
ROOT = Path(__file__).resolve().parents[2]


def tasks_argv(store: Path) -> list[str]:
    return [sys.executable, str(SERVERS_DIR / "tasks_server.py"), str(store)]


def start_task(session: mcpsync.Session, name: str, arguments: dict[str, Any]) -> str:
    """A task-augmented tools/call, sent raw (the server answers CreateTaskResult)."""
    params = {"name": name, "arguments": arguments, "task": {"ttl": 60000}}
    created = session.connection.wait(session.connection.request("tools/call", params))
    task_id = created["task"]["taskId"]
    assert created["task"]["status"] == "working" and isinstance(task_id, str)
    return task_id


def test_a_task_is_picked_up_after_a_restart_and_in_another_process(no_leaks, tmp_path: Path):
    seen = Restarts()
    policy = RestartPolicy(backoff=0, on_restart=seen)
    with mcpsync.Session.connect(tasks_argv(tmp_path), restart=policy, timeout=10) as s:
        assert s.protocol_version == "2025-11-25"
        task_id = start_task(s, "slow", {"message": "m1"})
        first = s.transport.process.pid
        psutil.Process(first).kill()
        assert seen.wait().ok and s.restarts == 1
        assert s.transport.process.pid != first  # a new server, the same task store
        picked = s.task(task_id)
        assert picked.task_id == task_id and not picked.done()  # working until released
        (tmp_path / "release").touch()
        result = picked.result(WAIT)
        assert isinstance(result, mcp_types.CallToolResult)
        assert result.content[0].text == "done: m1"
        # another process: its own session and server, the same id
        code = textwrap.dedent(
            """
            import json, sys
            import mcpsync
            argv, task_id = json.loads(sys.argv[1]), sys.argv[2]
            with mcpsync.Session.connect(argv, timeout=10) as other:
                result = other.task(task_id).result(30)
                print(json.dumps(result.content[0].text))
            """
        )
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps(tasks_argv(tmp_path)), task_id],
            capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.strip().splitlines()[-1]) == "done: m1"


def test_a_task_of_an_unknown_id_fails_with_the_servers_error(no_leaks, tmp_path: Path):
    with mcpsync.Session.connect(tasks_argv(tmp_path), timeout=10) as s:
        with pytest.raises(mcpsync.ServerError, match="no task"):
            s.task("nope").result(WAIT)


def test_picking_up_needs_a_tasks_capability(no_leaks):
    with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
        with pytest.raises(mcpsync.CapabilityError, match="no tasks capability"):
            s.task("task-1")


@pytest.mark.real
def test_server_everything_task_picked_up_by_id_through_tasks_result(no_leaks):
    try:
        argv = everything_stdio_argv()
    except Exception as exc:  # noqa: BLE001 - LaunchError: the npm peers are missing
        pytest.skip(str(exc))
    with mcpsync.Session.connect(argv, timeout=20, restart=True) as s:
        task_id = start_task(s, "simulate-research-query", {"topic": "reapers"})
        picked = s.task(task_id)
        result = picked.result(WAIT)
        text = result.content[0].text
        assert "Research Report: reapers" in text and result.is_error is not True
        # picked up again once it ended: tasks/result answers at once with the same result
        assert s.task(task_id).result(WAIT).content[0].text == text


@pytest.mark.real
def test_server_everything_input_required_task_answered_through_tasks_result(no_leaks):
    """An ambiguous research query: the task turns input_required; the server's elicitation
    comes over the tasks/result stream and the session's handler answers it."""
    try:
        argv = everything_stdio_argv()
    except Exception as exc:  # noqa: BLE001 - LaunchError: the npm peers are missing
        pytest.skip(str(exc))
    asked: list[Any] = []

    def elicit(request: Any) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"interpretation": "the language"}}

    with mcpsync.Session.connect(argv, timeout=20, elicitation_handler=elicit) as s:
        task_id = start_task(s, "simulate-research-query", {"topic": "python", "ambiguous": True})
        text = s.task(task_id).result(WAIT).content[0].text
        assert len(asked) == 1 and "Clarification**: the language" in text


@pytest.mark.real
def test_server_everything_task_cancelled_through_the_picked_up_future(no_leaks):
    try:
        argv = everything_stdio_argv()
    except Exception as exc:  # noqa: BLE001 - LaunchError: the npm peers are missing
        pytest.skip(str(exc))
    with mcpsync.Session.connect(argv, timeout=20) as s:
        task_id = start_task(s, "simulate-research-query", {"topic": "cancel me"})
        picked = s.task(task_id)
        assert picked.cancel() and picked.cancelled()
        deadline = time.monotonic() + WAIT
        status = None
        while time.monotonic() < deadline:  # tasks/cancel was sent without waiting
            got = s.connection.wait(s.connection.request("tasks/get", {"taskId": task_id}))
            status = got["status"]
            if status == "cancelled":
                break
            time.sleep(0.05)
        assert status == "cancelled"
        with pytest.raises(mcpsync.RequestCancelled):
            s.task(task_id).result(WAIT)  # picked up again: it was cancelled
