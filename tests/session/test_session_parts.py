"""The Session as one class whose parts are members (issue 27 point 3), through the public
API: the restart policy's new connections are made as connections, not by building a
second Session whose registration would outlive it.
"""

from __future__ import annotations

import gc
import threading

import psutil
import pytest
from servers.launch import demo_argv

import mcpsync
from mcpsync import RestartEvent, RestartPolicy
from mcpsync.runtime import lifecycle as _lifecycle

#: the demo server runs as a real process (tests/tiers.py: the spawn audit wants the mark)
pytestmark = pytest.mark.real_server

WAIT = 20.0


def test_a_restart_registers_no_second_session(no_leaks):
    """After the server was killed and brought back, this process's registry of live
    sessions (what the at-fork hook releases and the exit hook closes) holds the one
    session, with the cyclic collector off so that nothing is hidden by a collection."""
    came_back = threading.Event()
    events: list[RestartEvent] = []

    def on_restart(event: RestartEvent) -> None:
        events.append(event)
        came_back.set()

    before = {id(s) for s in _lifecycle.live("session")}
    gc.disable()
    try:
        policy = RestartPolicy(backoff=0.05, on_restart=on_restart)
        with mcpsync.Session.connect(demo_argv(), restart=policy, timeout=10) as s:
            assert [x for x in _lifecycle.live("session") if id(x) not in before] == [s]
            psutil.Process(s.transport.process.pid).kill()  # type: ignore[attr-defined]
            assert came_back.wait(WAIT) and events[0].ok, events
            assert s.call_tool("echo", {"message": "back"}).content[0].text == "back"
            new = [x for x in _lifecycle.live("session") if id(x) not in before]
            assert new == [s], f"{len(new)} sessions registered after one restart"
    finally:
        gc.enable()
