"""The transport contract is declared (transports/base.py) and never probed by name."""

from __future__ import annotations

import ast
import queue
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mcpsync.errors import ProtocolError, RequestCancelled
from mcpsync.rpc.connection import Connection
from mcpsync.transports import base
from mcpsync.transports.base import Features, Message, OnClose, OnError, OnMessage, Transport
from mcpsync.transports.http.legacy_sse import LegacySSETransport
from mcpsync.transports.http.streamable import StreamableHTTPTransport
from mcpsync.transports.memory import MemoryTransport, memory_pair
from mcpsync.transports.stdio import StdioTransport

ROOT = Path(__file__).resolve().parents[2] / "mcpsync"
WAIT = 10.0

# The optional hooks and the abilities: callers use them as declared, never find them by name.
HOOKS = {"wait_for", "wakeup", "abort_request", "identity", "cancel_request", "features"}
# Files with a probe left today; the set may only shrink (it is empty: keep it so).
KNOWN_PROBES: set[str] = set()


def _probes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):  # policy from a transport's kind string
            left = node.left
            if isinstance(left, ast.Attribute) and left.attr == "kind":
                if "transport" in ast.unparse(left.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} transport.kind compared")
            continue
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name in ("getattr", "hasattr") and len(node.args) >= 2:
            arg = node.args[1]
            if isinstance(arg, ast.Constant) and arg.value in HOOKS:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}(..., {arg.value!r})")
        if name == "signature" and "send" in ast.unparse(node):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} inspect.signature(send)")
    return found


def test_no_caller_probes_a_transport() -> None:
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel.startswith("transports/") or rel in KNOWN_PROBES:
            continue
        problems += _probes(path)
    for rel in sorted(KNOWN_PROBES):
        if not (ROOT / rel).exists() or not _probes(ROOT / rel):
            problems.append(f"KNOWN_PROBES entry {rel} probes nothing now: delete it")
    assert not problems, "\n".join(problems)


def test_features_declared_per_transport() -> None:
    assert Transport.features == Features()  # a transport that declares nothing
    assert StdioTransport.features.bounded_probe and StdioTransport.features.restart_on_probe_death
    assert not StdioTransport.features.per_request_headers
    assert MemoryTransport.features.bounded_probe
    assert not MemoryTransport.features.restart_on_probe_death
    assert StreamableHTTPTransport.features.per_request_headers
    assert StreamableHTTPTransport.features.carries_modern
    assert not StreamableHTTPTransport.features.bounded_probe
    assert not LegacySSETransport.features.carries_modern
    with pytest.raises(AttributeError):
        StdioTransport.features.carries_modern = False  # type: ignore[misc]


class _Bare(Transport):
    """Declares only what is abstract."""

    kind = "bare"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        self._bind(on_message, on_close, on_error)

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        pass

    def close(self) -> None:
        self._report_close(None)


def test_hook_defaults() -> None:
    t = _Bare()
    assert t.identity is None
    assert t.abort_request(1) is False
    t.wakeup()  # a no-op
    with pytest.raises(NotImplementedError):
        t.wait_for(None, 0.0)


def test_close_is_reported_once_per_transport_under_races() -> None:
    assert not hasattr(base, "_ONCE")  # no process-wide lock shared by every transport
    closes: queue.SimpleQueue[Any] = queue.SimpleQueue()
    transports = [_Bare() for _ in range(4)]
    for t in transports:
        t.start(lambda m: None, closes.put)
    start = threading.Barrier(16)

    def close(t: _Bare) -> None:
        start.wait(WAIT)
        t.close()

    threads = [threading.Thread(target=close, args=(t,)) for t in transports for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(WAIT)
    assert closes.qsize() == 4


def test_memory_decodes_like_a_wire() -> None:
    client, server = memory_pair("contract")
    got: queue.SimpleQueue[Any] = queue.SimpleQueue()
    errors: queue.SimpleQueue[BaseException] = queue.SimpleQueue()
    client.start(got.put, lambda e: None, errors.put)
    server.start(lambda m: None, lambda e: None)
    try:
        server._inbox  # noqa: B018 - the pair exists
        client._inbox.put(b'"just a string"')  # what a broken peer could put on a wire
        client._inbox.put(b"{not json")
        server.send({"jsonrpc": "2.0", "method": "notifications/ok"})
        assert got.get(timeout=WAIT) == {"jsonrpc": "2.0", "method": "notifications/ok"}
        first, second = errors.get(timeout=WAIT), errors.get(timeout=WAIT)
        assert isinstance(first, ProtocolError) and isinstance(second, ProtocolError)
    finally:
        client.close()
        server.close()


class _Recording(MemoryTransport):
    """A memory end that records the hooks the connection calls."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.aborted: list[Any] = []
        self.waited = 0

    def wait_for(self, future: Any, deadline: float) -> None:  # must not be called: no caller_reads
        self.waited += 1
        raise AssertionError("wait_for called on a transport that does not read in the caller")

    def abort_request(self, request_id: Any) -> bool:
        self.aborted.append(request_id)
        return False


def test_connection_calls_declared_hooks_only() -> None:
    client = _Recording("rec/client")
    server = MemoryTransport("rec/server")
    client.peer, server.peer = server, client
    seen: queue.SimpleQueue[Any] = queue.SimpleQueue()
    server.start(seen.put, lambda e: None)
    conn = Connection(client, name="rec")
    conn.start()
    try:
        future = conn.request("tools/call", {"name": "slow"}, timeout=WAIT)
        request = seen.get(timeout=WAIT)
        assert future.cancel()
        with pytest.raises((RequestCancelled, Exception)):
            conn.wait(future)
        cancelled = seen.get(timeout=WAIT)
        assert cancelled["method"] == "notifications/cancelled"
        assert client.aborted == [request["id"]]
        assert client.waited == 0
    finally:
        conn.close()
        server.close()


def test_stdio_kill_ends_the_child_and_its_group_at_once() -> None:
    import sys

    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    t = StdioTransport([sys.executable, "-c", code], name="kill-me")
    t.start(lambda m: None, lambda e: None)
    try:
        proc = t.process
        assert proc is not None and proc.poll() is None
        t.kill()
        assert proc.poll() is not None  # kill() waited for it
        # the grandchild went with it (gone once init has reaped it: a bounded wait)
        deadline = time.monotonic() + WAIT
        while t.child._group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not t.child._group_alive(proc.pid)
        t.kill()  # a no-op once it exited
    finally:
        t.close()
