"""mcpsync.host with an injected fake session factory (real servers: test_host_real below)."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from mcpsync.config import load_config
from mcpsync.errors import ConfigError, ConnectError, SessionClosed
from mcpsync.errors import MCPSyncError as MCPSyncErrorBase
from mcpsync.host import ConsentDenied, Host, UnknownTool, qualified_name

WAIT = 5.0


@dataclass
class FakeTool:
    name: str
    description: str = ""


@dataclass
class Behaviour:
    tools: list[str] = field(default_factory=list)
    fail: BaseException | None = None
    gate: threading.Event | None = None  # connect blocks until set
    close_gate: threading.Event | None = None  # close blocks until set


class FakeSession:
    def __init__(self, net: FakeNet, name: str, b: Behaviour) -> None:
        self.net, self.name, self.b = net, name, b
        self.protocol_version = "2025-11-25"
        self.server_info = {"name": name, "version": "1"}
        self.closed_event = threading.Event()

    @property
    def closed(self) -> bool:
        return self.closed_event.is_set()

    def list_tools(self) -> list[FakeTool]:
        return [FakeTool(t) for t in self.b.tools]

    def call_tool(self, name: str, arguments: Any = None, **kw: Any) -> tuple:
        return (self.name, name, arguments, kw)

    def submit_call_tool(self, name: str, arguments: Any = None, **kw: Any) -> Future:
        f: Future = Future()
        f.set_result(self.call_tool(name, arguments, **kw))
        return f

    def close(self) -> None:
        with self.net.lock:
            self.net.closing += 1
            self.net.max_closing = max(self.net.max_closing, self.net.closing)
        try:
            if self.b.close_gate is not None:
                self.b.close_gate.wait(WAIT)
        finally:
            with self.net.lock:
                self.net.closing -= 1
            self.closed_event.set()


class FakeNet:
    def __init__(self, **behaviours: Behaviour) -> None:
        self.b = behaviours
        self.lock = threading.Condition()
        self.inside: list[str] = []
        self.connects: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self.closing = 0
        self.max_closing = 0
        self.sessions: dict[str, FakeSession] = {}

    def connect(self, **kw: Any) -> FakeSession:
        name = kw["name"]
        b = self.b[name]
        with self.lock:
            self.connects.append(kw)
            self.active += 1
            self.inside.append(name)
            self.max_active = max(self.max_active, self.active)
            self.lock.notify_all()
        try:
            if b.gate is not None:
                assert b.gate.wait(WAIT), "gate never opened"
            if b.fail is not None:
                raise b.fail
            s = FakeSession(self, name, b)
            self.sessions[name] = s
            return s
        finally:
            with self.lock:
                self.active -= 1
                self.inside.remove(name)
                self.lock.notify_all()


def cfg(*names: str, lazy: tuple[str, ...] = ()) -> dict:
    return {n: {"command": f"srv-{n}", "lazy": n in lazy} for n in names}


def test_eager_start_parallel_and_failure_isolated():
    barrier = threading.Barrier(3, timeout=WAIT)

    class Gate(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:  # all three meet here at once
            barrier.wait()
            return True

    net = FakeNet(
        a=Behaviour(tools=["x"], gate=Gate()),
        b=Behaviour(fail=ConnectError("connection refused"), gate=Gate()),
        c=Behaviour(tools=["y"], gate=Gate()),
    )
    with Host(cfg("a", "b", "c"), connect=net.connect) as host:
        assert net.max_active == 3  # they were all inside connect at the same time
        states = {r.name: r.state for r in host.status()}
        assert states == {"a": "ready", "b": "failed", "c": "ready"}
        assert isinstance(host.errors["b"], ConnectError)
        with pytest.raises(ConnectError, match="connection refused"):
            host.session("b")
        assert [t.name for t in host.list_tools()] == ["x", "y"]
        assert host.call_tool("y", {"k": 1}) == ("c", "y", {"k": 1}, {})
        html = host._repr_html_()
        assert "<table" in html and "connection refused" in html and "Servers (3)" in html
        row = {r.name: r for r in host.status()}["a"]
        assert row.tools == 1 and row.protocol_version == "2025-11-25" and row.seconds is not None
        assert not {r.name: r for r in host.status()}["b"].ok


def test_parallelism_is_bounded():
    gates = {n: threading.Event() for n in "abcd"}
    net = FakeNet(**{n: Behaviour(tools=[n], gate=g) for n, g in gates.items()})
    host = Host(cfg(*"abcd"), connect=net.connect, max_parallel=2)
    t = threading.Thread(target=host.start, name="test-start")
    t.start()
    # release whichever is inside connect, one at a time; two are always inside until the end
    for remaining in (4, 3, 2, 1):
        with net.lock:
            assert net.lock.wait_for(lambda r=remaining: net.active == min(2, r), WAIT)
            n = net.inside[0]
        gates[n].set()
        with net.lock:
            assert net.lock.wait_for(lambda n=n: n not in net.inside, WAIT)
    t.join(WAIT)
    assert not t.is_alive()
    assert net.max_active == 2
    assert sorted(t.name for t in host.list_tools()) == list("abcd")
    host.close()


def test_lazy_connects_on_first_use_only():
    net = FakeNet(a=Behaviour(tools=["x"]), z=Behaviour(tools=["zz"]))
    with Host(cfg("a", "z", lazy=("z",)), connect=net.connect) as host:
        assert [k["name"] for k in net.connects] == ["a"]
        assert {r.name: r.state for r in host.status()}["z"] == "idle"
        assert [t.name for t in host.list_tools()] == ["x"]
        # an unknown name brings up lazy servers before giving up
        assert host.call_tool("zz") == ("z", "zz", None, {})
        assert [k["name"] for k in net.connects] == ["a", "z"]
        host.session("z")
        assert len(net.connects) == 2  # not again


def test_consent_asked_once_before_connect_and_refusal_kept():
    asked: list[str] = []

    def consent(entry) -> bool:
        asked.append(entry.name)
        return entry.name != "b"

    net = FakeNet(a=Behaviour(tools=["x"]), b=Behaviour(tools=["y"]), z=Behaviour(tools=["w"]))
    with Host(cfg("a", "b", "z", lazy=("z",)), connect=net.connect, consent=consent) as host:
        assert asked == ["a", "b"]  # the lazy one is not asked yet
        assert [k["name"] for k in net.connects] == ["a"]
        with pytest.raises(ConsentDenied, match="'b': consent refused"):
            host.session("b")
        host.session("z")
        assert asked == ["a", "b", "z"]
        with pytest.raises(ConsentDenied):
            host.session("b")
        assert asked == ["a", "b", "z"]
        assert {r.name: r.state for r in host.status()}["b"] == "refused"


def test_consent_hook_that_raises_counts_as_refusal():
    def consent(entry) -> bool:
        raise RuntimeError("no tty")

    net = FakeNet(a=Behaviour())
    with Host(cfg("a"), connect=net.connect, consent=consent) as host:
        assert net.connects == []
        assert "consent hook failed: no tty" in str(host.errors["a"])


def test_collisions_first_in_config_order_keeps_bare_name():
    # b answers first, but a is first in the config: a owns "echo"
    gate_a = threading.Event()
    net = FakeNet(
        a=Behaviour(tools=["echo", "only_a"], gate=gate_a),
        b=Behaviour(tools=["echo"]),
        z=Behaviour(tools=["echo", "only_a"]),
    )
    host = Host({"z": {"command": "z", "lazy": True}, **cfg("a", "b")}, connect=net.connect)
    t = threading.Thread(target=host.start, name="test-start")
    t.start()
    assert host._servers["b"].done.wait(WAIT)
    gate_a.set()
    t.join(WAIT)
    names = {t.name: t.server for t in host.list_tools()}
    assert names == {"echo": "a", "only_a": "a", "b__echo": "b"}
    assert host.call_tool("echo")[0] == "a"
    assert host.call_tool("b__echo")[0] == "b"
    assert host.call_tool("a__echo")[0] == "a"  # qualified always routes
    # z is first in config order but comes up later: it does not take bare names (sticky)
    host.session("z")
    names = {t.name: t.server for t in host.list_tools()}
    assert names == {"echo": "a", "only_a": "a", "b__echo": "b", "z__echo": "z", "z__only_a": "z"}
    # a drops "echo": the bare name goes to the next server in config order (z)
    net.b["a"].tools = ["only_a"]
    names = {t.name: t.server for t in host.list_tools()}
    assert names["echo"] == "z" and "b__echo" in names and "z__echo" not in names
    host.close()


def test_unknown_tool_lists_known_and_down_servers():
    net = FakeNet(a=Behaviour(tools=["x"]), b=Behaviour(fail=ConnectError("down")))
    with Host(cfg("a", "b"), connect=net.connect) as host:
        with pytest.raises(UnknownTool, match=r"no tool named 'nope'; tools: x; servers not up: b"):
            host.call_tool("nope")
        with pytest.raises(ConfigError, match=r"no server named 'q'"):
            host.session("q")


def test_unknown_tool_says_why_a_qualified_name_does_not_route():
    """``b__x`` of a server that is down says so with the server's error (the cause); a
    near miss (``a.x``, ``a__xx``) gets a did-you-mean."""
    down = ConnectError("cannot reach b: connection refused")
    net = FakeNet(a=Behaviour(tools=["x", "search_files"]), b=Behaviour(fail=down))
    with Host(cfg("a", "b"), connect=net.connect) as host:
        with pytest.raises(UnknownTool) as caught:
            host.call_tool("b__x")
        assert str(caught.value) == (
            "no tool named 'b__x': server 'b' is not up (failed: cannot reach b: connection refused)"
        )
        assert caught.value.__cause__ is down
        with pytest.raises(UnknownTool, match=r"no tool named 'a\.x'; did you mean 'a__x'\?"):
            host.call_tool("a.x")
        with pytest.raises(
            UnknownTool, match=r"did you mean 'search_files'\?; tools: search_files, x"
        ):
            host.call_tool("search_file")


def test_close_is_parallel_and_bounded():
    stuck = threading.Event()  # never set during close: that session's close hangs
    parties = threading.Barrier(2, timeout=WAIT)

    class MeetGate(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            parties.wait()
            return True

    net = FakeNet(
        a=Behaviour(close_gate=MeetGate()),
        b=Behaviour(close_gate=MeetGate()),
        c=Behaviour(close_gate=stuck),
    )
    host = Host(cfg("a", "b", "c"), connect=net.connect).start()
    host.close(timeout=0.5)  # a and b meet inside close(); c hangs past the bound
    assert net.sessions["a"].closed and net.sessions["b"].closed
    assert not parties.broken
    assert not net.sessions["c"].closed
    assert host.closed
    with pytest.raises(SessionClosed):
        host.call_tool("x")
    stuck.set()
    assert net.sessions["c"].closed_event.wait(WAIT)
    host.close()  # idempotent


def test_config_errors_show_as_failed_servers_in_file_order():
    config = load_config(
        {"a": {"command": "x"}, "bad": {"command": 3}, "c": {"url": "http://127.0.0.1:1/mcp"}}
    )
    net = FakeNet(a=Behaviour(tools=["t"]), c=Behaviour())
    with Host(config, connect=net.connect) as host:
        rows = host.status()
        assert [r.name for r in rows] == ["a", "bad", "c"]
        assert rows[1].state == "failed" and "expected a string" in str(rows[1].error)
        assert [k["name"] for k in net.connects] == ["a", "c"]


def test_session_kwargs_and_connect_kwargs_reach_connect():
    net = FakeNet(a=Behaviour(), w=Behaviour())
    config = {
        "a": {"command": "srv", "args": ["-v"], "env": {"K": "v"}, "timeout": 3},
        "w": {"url": "https://h.example/mcp", "auth": {"client_id": "c"}},
    }
    with Host(
        config,
        connect=net.connect,
        session_kwargs={"client_info": {"name": "t", "version": "0"}},
        auth_factory=lambda e: f"auth-for-{e.name}",
    ):
        by_name = {k["name"]: k for k in net.connects}
    assert by_name["a"] == {
        "target": ["srv", "-v"],
        "name": "a",
        "transport": "stdio",
        "env": {"K": "v"},
        "timeout": 3.0,
        "client_info": {"name": "t", "version": "0"},
    }
    assert by_name["w"]["auth"] == "auth-for-w" and by_name["w"]["transport"] == "auto"


def test_disabled_entries_are_not_started_and_reconnect():
    net = FakeNet(a=Behaviour(tools=["x"]), d=Behaviour())
    with Host(
        {"a": {"command": "a"}, "d": {"command": "d", "disabled": True}}, connect=net.connect
    ) as host:
        assert [k["name"] for k in net.connects] == ["a"]
        with pytest.raises(ConfigError, match="disabled"):
            host.session("d")
        first = host.session("a")
        second = host.reconnect("a")
        assert first is not second and first.closed
        assert host.submit_call_tool("x").result(WAIT)[0] == "a"


def test_qualified_name_sanitises_server():
    assert qualified_name("Zuplo MCP", "echo") == "Zuplo_MCP__echo"


# ---------------------------------------------------------------- real servers

NODE_BIN = Path(__file__).resolve().parents[1] / "node" / "node_modules" / ".bin"
DEMO = {"command": sys.executable, "args": ["-m", "mcpsync.demo_server"]}


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.mark.real
def test_host_real_servers_namespace_and_cleanup():
    everything = shutil.which("mcp-server-everything", path=str(NODE_BIN))
    assert everything, "npm peers not installed"
    before = _children()
    config = {
        "demo": DEMO,
        "every": {"command": everything, "args": ["stdio"]},
        "broken": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        "later": {**DEMO, "lazy": True},
    }
    host = Host(config).start()
    try:
        rows = {r.name: r for r in host.status()}
        assert rows["demo"].state == "ready" and rows["demo"].transport == "stdio"
        assert rows["demo"].protocol_version == "2025-11-25" and rows["demo"].tools >= 10
        assert rows["every"].state == "ready" and rows["every"].tools > 5
        assert rows["broken"].state == "failed" and rows["broken"].error is not None
        assert rows["later"].state == "idle"
        names = [t.name for t in host.list_tools()]
        assert "echo" in names and "every__echo" in names and "later__echo" not in names
        assert host.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
        assert "hi" in host.call_tool("every__echo", {"message": "hi"}).content[0].text
        # the lazy one comes up on first use, and never takes a bare name
        assert host.call_tool("later__echo", {"message": "x"}).content[0].text == "x"
        assert "later__add" in [t.name for t in host.list_tools()]
    finally:
        host.close()
    assert _children() - before == set()


@pytest.mark.real
def test_host_follows_tools_list_changed():
    with Host({"demo": DEMO}) as host:
        changed = threading.Event()
        host.session("demo").on_tools_changed(changed.set)
        host.call_tool("add_tool", {"name": "brand_new"})
        assert changed.wait(WAIT)
        assert "brand_new" in [t.name for t in host.list_tools()]
        assert host.call_tool("brand_new", {"a": 1}).is_error is not True


HANG = {
    "command": sys.executable,
    "args": ["-c", "import time; time.sleep(60)"],
    "connect_timeout": 20,
}


def test_close_stops_a_server_that_is_still_starting():
    before = _children()
    host = Host({"hang": HANG, "demo": DEMO}).start(timeout=0)  # returns at once
    assert host._servers["demo"].done.wait(WAIT)  # (waiting on the bring-up, not a clock)
    rows = {r.name: r.state for r in host.status()}
    assert rows == {"hang": "connecting", "demo": "ready"}
    started = [psutil.Process(pid) for pid in _children() - before]
    assert len(started) == 2
    t0 = time.monotonic()
    host.close(timeout=10)
    gone, alive = psutil.wait_procs(started, timeout=10)
    assert alive == [] and time.monotonic() - t0 < 10
    assert host._servers["hang"].done.wait(WAIT)
    assert {r.name: r.state for r in host.status()}["hang"] in ("failed", "closed")


def test_ctrl_c_during_start_closes_everything(monkeypatch: pytest.MonkeyPatch):
    before = _children()
    host = Host({"hang": HANG, "demo": DEMO})
    waited = threading.Event()
    real_wait = threading.Event.wait

    def interrupting_wait(self, timeout=None):
        # the first bounded wait in start() for the hanging server: simulate Ctrl-C there
        if self is host._servers["hang"].done and not waited.is_set():
            waited.set()
            assert host._servers["demo"].done.wait(WAIT)  # demo got up meanwhile
            raise KeyboardInterrupt
        return real_wait(self, timeout)

    monkeypatch.setattr(threading.Event, "wait", interrupting_wait)
    with pytest.raises(KeyboardInterrupt):
        with host:
            pytest.fail("not reached")
    monkeypatch.undo()
    assert host.closed
    leftover = [psutil.Process(pid) for pid in _children() - before]
    gone, alive = psutil.wait_procs(leftover, timeout=10)
    assert alive == []


def test_a_server_that_dies_turns_failed_and_reconnects():
    with Host({"demo": DEMO, "other": {**DEMO}}) as host:
        session = host.session("demo")
        session.transport.process.kill()
        ping = session.submit_ping()
        with pytest.raises(MCPSyncErrorBase):
            ping.result(WAIT)
        rows = {r.name: r for r in host.status()}
        assert rows["demo"].state == "failed" and rows["demo"].error is not None
        assert "echo" not in [t.name for t in host.list_tools() if t.server == "demo"]
        # "other" took over the bare names the dead server owned
        assert host.resolve("echo").server == "other"
        with pytest.raises(MCPSyncErrorBase):
            host.session("demo")
        fresh = host.reconnect("demo")
        assert fresh is not session and host.session("demo") is fresh
        assert fresh.call_tool("echo", {"message": "back"}).content[0].text == "back"
        assert host.resolve("echo").server == "other"  # sticky: the bare name stays


def test_reconnect_of_a_broken_entry_raises_its_config_error():
    with Host({"bad": {"command": 3}}, connect=FakeNet().connect) as host:
        with pytest.raises(ConfigError, match="expected a string"):
            host.reconnect("bad")
