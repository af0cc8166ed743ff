"""Per-entry restart policies of a Host: the ``restart`` key of a config entry (and
``session_kwargs``), restarts in ``Host.status()``, a crash loop that leaves the entry failed
with ``RestartLimitReached``, and ``Host.reconnect(name)`` with a policy on.
"""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from servers.launch import demo_argv
from test_restart import CRASHY, LogWatch, Restarts, children

from mcpsync import RestartLimitReached, RestartPolicy, ServerExited
from mcpsync.config import ConfigEntryError, parse_entry
from mcpsync.host import Host
from mcpsync.host.servers import ServerStatus

WAIT = 20.0


def entry(restart: object, argv: list[str] | None = None) -> dict:
    argv = argv or demo_argv()
    return {"command": argv[0], "args": argv[1:], "restart": restart}


def test_the_restart_key_of_a_config_entry():
    parsed = parse_entry("demo", entry({"maxAttempts": 2, "backoff": 0.1}))
    assert parsed.restart == {"maxAttempts": 2, "backoff": 0.1}
    assert parsed.connect_kwargs()["restart"] == {"maxAttempts": 2, "backoff": 0.1}
    assert parse_entry("demo", entry(True)).connect_kwargs()["restart"] is True
    assert "restart" not in parse_entry("demo", {"command": "x"}).connect_kwargs()
    with pytest.raises(ConfigEntryError, match="restart"):
        parse_entry("demo", entry("always"))


def test_a_host_entry_with_a_restart_key_comes_back_and_status_counts_it(no_leaks):
    config = {"mcpServers": {"demo": entry({"backoff": 0.05}), "plain": entry(False)}}
    before = children()
    back = LogWatch("is back")  # the entry's policy has no callback: the restart's log line
    try:
        with Host(config) as host:
            s = host.session("demo")
            assert s.restart_policy is not None and s.restart_policy.backoff == 0.05
            assert host.session("plain").restart_policy is None
            pid = s.transport.process.pid
            psutil.Process(pid).kill()
            assert back.wait(WAIT)
            rows = {row.name: row for row in host.status()}
            assert rows["demo"].restarts == 1 and rows["demo"].state == "ready"
            assert rows["plain"].restarts == 0
            assert host.session("demo") is s and s.transport.process.pid != pid
            assert host.call_tool("demo__echo", {"message": "x"}).content[0].text == "x"
            # reconnect still works with a policy on: a new session, the old one closed
            again = host.reconnect("demo")
            assert again is not s and s.closed and again.restart_policy is not None
            assert again.call_tool("echo", {"message": "y"}).content[0].text == "y"
            assert host.status()[0].restarts == 0  # the new session's own count
    finally:
        back.remove()
    assert children() - before == set()


def test_session_kwargs_give_every_entry_a_policy_with_a_callback(no_leaks):
    seen = Restarts()
    policy = RestartPolicy(backoff=0.05, on_restart=seen)
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": demo_argv()[1:]}}}
    with Host(config, session_kwargs={"restart": policy}) as host:
        s = host.session("demo")
        psutil.Process(s.transport.process.pid).kill()
        event = seen.wait()
        assert event.ok and host.status()[0].restarts == 1


def test_a_crash_looping_entry_ends_failed_with_every_reason(no_leaks, tmp_path: Path):
    script = tmp_path / "crashy.py"
    script.write_text(CRASHY)
    seen = Restarts()
    policy = RestartPolicy(max_attempts=2, backoff=0.01, on_restart=seen)
    config = {"mcpServers": {"crashy": {"command": sys.executable, "args": [str(script)]}}}
    before = children()
    with Host(config, session_kwargs={"restart": policy}) as host:
        assert seen.wait(count=3).ok is False  # two restarts, then the limit
        row = host.status()[0]
        assert row.state == "failed" and isinstance(row.error, RestartLimitReached)
        assert len(row.error.reasons) == 3
        assert row.reasons == tuple(row.error.reasons) and not row.ok
        with pytest.raises(RestartLimitReached):
            host.session("crashy")
    assert children() - before == set()


# A demo server that, once ``hold`` exists, waits for ``go`` before it starts: the test
# holds a restart's bring-up as long as it needs to look at it.
HELD = textwrap.dedent(
    """
    import os, sys, time
    folder = sys.argv[1]
    if os.path.exists(os.path.join(folder, "hold")):
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(folder, "go")) and time.monotonic() < deadline:
            time.sleep(0.01)
    from mcpsync.demo_server import main
    main([])
    """
)


def _row(host: Host, name: str) -> ServerStatus:
    return {row.name: row for row in host.status()}[name]


def _until(predicate: Callable[[], bool], bound: float = WAIT) -> bool:
    deadline = time.monotonic() + bound
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def test_status_shows_a_restart_in_progress_then_ready_again(no_leaks, tmp_path: Path):
    script = tmp_path / "held.py"
    script.write_text(HELD)
    seen = Restarts()
    config = {
        "mcpServers": {
            "held": {"command": sys.executable, "args": [str(script), str(tmp_path)]},
        }
    }
    policy = RestartPolicy(backoff=0, on_restart=seen)
    with Host(config, session_kwargs={"restart": policy}) as host:
        s = host.session("held")
        row = _row(host, "held")
        assert row.state == "ready" and row.ok and row.reasons == () and not s.restarting
        (tmp_path / "hold").touch()  # the restart's server waits for "go"
        psutil.Process(s.transport.process.pid).kill()
        assert _until(lambda: _row(host, "held").state == "restarting")
        row = _row(host, "held")
        assert s.restarting and not row.ok and row.restarts == 0
        assert len(row.reasons) == 1 and isinstance(row.reasons[0], ServerExited)
        assert "restarting" in repr(row)
        assert host._servers["held"].shown_state == "restarting"  # (for Host.__repr__)
        # a call made now waits for the restart and goes to the new server
        box: dict[str, object] = {}
        caller = threading.Thread(
            target=lambda: box.update(r=host.call_tool("held__echo", {"message": "x"}))
        )
        caller.start()
        (tmp_path / "go").touch()
        event = seen.wait()
        assert event.ok
        caller.join(WAIT)
        assert not caller.is_alive() and box["r"].content[0].text == "x"  # type: ignore[attr-defined]
        row = _row(host, "held")
        assert row.state == "ready" and row.ok and row.restarts == 1 and row.reasons == ()
        assert not s.restarting
