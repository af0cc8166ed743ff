"""The restart policy in a child of ``os.fork()``: a session used there brings up its own
connection (its own server process) instead of raising ``ForkedError``; the parent's
session and server are never touched. Without the policy the child gets ``ForkedError``
(``tests/session/test_fork.py`` covers that side)."""

from __future__ import annotations

import os
import threading

import psutil
import pytest
from servers.launch import demo_argv
from test_fork import _in_child, _read_result, _reap

import mcpsync
from mcpsync import RestartPolicy
from mcpsync.errors import ForkedError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def test_a_forked_child_brings_up_its_own_connection(no_leaks):
    updated = threading.Event()
    with mcpsync.Session.connect(demo_argv(), restart=RestartPolicy(backoff=0), timeout=10) as s:
        s.subscribe_resource("demo://readme", lambda uri: updated.set())
        parent_server = s.transport.process.pid  # type: ignore[attr-defined]

        def child() -> dict:
            text = s.call_tool("echo", {"message": "from the child"}).content[0].text
            touched = s.call_tool("touch_resource", {"uri": "demo://readme"}).content[0].text
            own = s.transport.process.pid  # type: ignore[attr-defined]
            event = s.restart_history[-1]
            out = {
                "text": text,
                "touched": touched,
                "server": own,
                "parent_of_server": psutil.Process(own).ppid(),
                "restarts": s.restarts,
                "reason": type(event.reason).__name__,
                "reopened": event.reopened,
                "updated": updated.wait(10),
            }
            s.close()
            out["closed"] = s.closed
            out["server_gone"] = not psutil.pid_exists(own) or (
                psutil.Process(own).status() == psutil.STATUS_ZOMBIE
            )
            return out

        pid, results, release = _in_child(child)
        result = _read_result(results)
        os.close(release)
        assert _reap(pid) == 0
        assert result["text"] == "from the child"
        assert result["server"] != parent_server and result["parent_of_server"] == pid
        assert result["restarts"] == 1 and result["reason"] == ForkedError.__name__
        assert result["reopened"] == ["subscription demo://readme"]
        assert "notified 1 subscriber" in result["touched"] and result["updated"]
        assert result["closed"] and result["server_gone"]
        # the parent's session and server never noticed
        assert s.transport.process.pid == parent_server  # type: ignore[attr-defined]
        assert psutil.Process(parent_server).is_running()
        assert s.call_tool("echo", {"message": "parent"}).content[0].text == "parent"
        assert s.restarts == 0 and s.restart_history == [] and not updated.is_set()


def test_a_forked_child_of_a_host_with_restart_policies(no_leaks):
    """A ``Host`` whose entries have a restart policy, used in a child of ``os.fork()``: the
    host's own calls raise ``ForkedError`` (it routes over the parent's sessions); a session
    the parent got from it brings up the child's own server; the child's close() of the host
    releases only its copies; the parent's servers are never touched. The child ends
    without closing its session (``os._exit``): its own reaper ends its server."""
    from mcpsync.host import Host

    argv = demo_argv()
    entry = {"command": argv[0], "args": argv[1:], "restart": {"backoff": 0}}
    with Host({"a": entry, "b": entry}) as host:
        a = host.session("a")
        parents = {name: host.session(name).transport.process.pid for name in ("a", "b")}

        def child() -> dict:
            out: dict = {}
            for what, call in (
                ("call_tool", lambda: host.call_tool("a__echo", {"message": "x"})),
                ("session", lambda: host.session("b")),
                ("status", host.status),
            ):
                try:
                    call()
                    out[what] = "returned"
                except ForkedError as exc:
                    out[what] = [type(exc).__name__, exc.owner_pid, exc.pid]
            out["text"] = a.call_tool("echo", {"message": "mine"}).content[0].text
            own = a.transport.process.pid
            out["server"], out["parent_of_server"] = own, psutil.Process(own).ppid()
            out["restarts"] = a.restarts
            host.close()  # the child's copies only
            out["host_closed"] = host.closed
            return out

        pid, results, release = _in_child(child)
        result = _read_result(results)
        os.close(release)
        assert _reap(pid) == 0
        for what in ("call_tool", "session", "status"):
            assert result[what] == ["ForkedError", os.getpid(), pid], what
        assert result["text"] == "mine" and result["restarts"] == 1
        assert result["server"] not in parents.values() and result["parent_of_server"] == pid
        assert result["host_closed"] is True
        # the child died without closing its session: the server it started goes too
        # (stdin EOF, the parent-death signal, the child's own reaper)
        try:
            psutil.Process(result["server"]).wait(10)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            pytest.fail(f"the child's server {result['server']} outlived the child")
        # the parent's servers never noticed
        for name, server in parents.items():
            assert host.session(name).transport.process.pid == server
            assert psutil.Process(server).is_running()
        assert host.call_tool("a__echo", {"message": "p"}).content[0].text == "p"
        assert host.call_tool("b__echo", {"message": "q"}).content[0].text == "q"
        assert all(row.restarts == 0 and row.state == "ready" for row in host.status())
