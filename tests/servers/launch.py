"""Start real test servers, wait (bounded) until they are usable, always clean up.

Owns: the launch helpers tests use to run peers as subprocesses, each in its own process
group that is killed at exit:

- ``StdioPeer(argv)``: a raw newline-delimited JSON-RPC peer over a child's stdio (no
  mcpsync, no SDK), for driving servers byte by byte.
- ``demo_argv()``, ``faulty_argv()``, ``sdk_stdio_argv()``, ``everything_stdio_argv()``:
  argv lists for stdio servers (hand them to a client, or to ``StdioPeer``).
- ``tasks_http(store, *flags)``: the on-disk tasks server (``tasks_server.py``) over HTTP,
  yielding its URL.
- ``sdk_server_http()``, ``sdk_server_sse()``, ``everything_http()``, ``everything_sse()``:
  context managers that start an HTTP server on a free 127.0.0.1 port and yield a
  ``RunningServer`` (``url``, ``port``, ``proc``, ``stderr_text()``) once it accepts
  TCP connections.

Import from tests as ``from servers.launch import ...`` (pytest puts ``tests/`` on sys.path).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "REPO_ROOT",
    "NODE_BIN",
    "SERVERS_DIR",
    "StdioPeer",
    "RunningServer",
    "LaunchError",
    "free_port",
    "node_bin",
    "have_everything",
    "demo_argv",
    "faulty_argv",
    "sdk_stdio_argv",
    "everything_stdio_argv",
    "node_env",
    "start_server",
    "sdk_server_http",
    "sdk_server_sse",
    "everything_http",
    "everything_sse",
    "kill_group",
    "tasks_http",
    "which",
]

SERVERS_DIR = Path(__file__).resolve().parent
REPO_ROOT = SERVERS_DIR.parent.parent
NODE_BIN = REPO_ROOT / "tests" / "node" / "node_modules" / ".bin"
LATEST_VERSION = "2025-11-25"


class LaunchError(RuntimeError):
    """A test server did not come up in time (message carries its stderr tail)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_bin(name: str) -> str | None:
    """Path of an npm-installed binary in tests/node, or None."""
    path = NODE_BIN / name
    return str(path) if path.exists() else None


def have_everything() -> bool:
    return node_bin("mcp-server-everything") is not None and node_bin("node") is not None


def node_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The parent environment with tests/node/node_modules/.bin first on PATH (Node 22)."""
    env = dict(os.environ)
    env["PATH"] = f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}"
    if extra:
        env.update(extra)
    return env


def demo_argv(*args: str) -> list[str]:
    """The stdlib demo server (``python -m mcpsync.demo_server``)."""
    return [sys.executable, "-m", "mcpsync.demo_server", *args]


def faulty_argv(*args: str) -> list[str]:
    """The demo server with fault flags (see tests/servers/faulty_server.py)."""
    return [sys.executable, str(SERVERS_DIR / "faulty_server.py"), *args]


def sdk_stdio_argv() -> list[str]:
    """The official-SDK server over stdio."""
    return [sys.executable, str(SERVERS_DIR / "sdk_server.py"), "stdio"]


def everything_stdio_argv() -> list[str]:
    """``mcp-server-everything stdio`` run by the pinned Node 22 (tests/node)."""
    server, node = node_bin("mcp-server-everything"), node_bin("node")
    if server is None or node is None:
        raise LaunchError(
            "mcp-server-everything is not installed: run scripts/install-test-deps.sh"
        )
    return [node, server, "stdio"]


def kill_group(proc: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    """SIGTERM then SIGKILL the child's process group; bounded."""
    if proc.poll() is None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                proc.wait(timeout)
                break
            except subprocess.TimeoutExpired:
                continue
    else:
        # the leader exited; children may linger in its group
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


class _Drain(threading.Thread):
    """Reads a byte stream to EOF, keeping the last ``keep`` bytes; never blocks the child."""

    def __init__(self, stream: Any, name: str, keep: int = 256 * 1024) -> None:
        super().__init__(name=name, daemon=True)
        self._stream = stream
        self._keep = keep
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.total = 0

    def run(self) -> None:
        try:
            while chunk := self._stream.read1(65536):
                with self._changed:
                    self.total += len(chunk)
                    self._buf += chunk
                    if len(self._buf) > self._keep * 2:
                        del self._buf[: -self._keep]
                    self._changed.notify_all()
        except (OSError, ValueError):
            pass
        with self._changed:
            self._changed.notify_all()

    def text(self) -> str:
        with self._lock:
            return self._buf[-self._keep :].decode(errors="replace")

    def wait_total(self, count: int, timeout: float) -> int:
        """Wait until ``count`` bytes were read (or EOF, or ``timeout``); the total read."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.total < count and self.is_alive():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(min(remaining, 0.5))
            return self.total

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str] | None:
        """Wait until ``pattern`` (a regex) matches the text kept so far; the match or None."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                match = regex.search(self._buf.decode(errors="replace"))
                remaining = deadline - time.monotonic()
                if match or remaining <= 0 or not self.is_alive():
                    return match
                self._changed.wait(min(remaining, 0.5))


class StdioPeer:
    """A raw JSON-lines peer for a stdio server: send dicts, wait (bounded) for dicts.

    Non-JSON stdout lines are kept in ``garbage``; stderr is drained continuously.
    Use as a context manager; ``close()`` closes stdin, waits briefly, then kills the group.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.garbage: list[bytes] = []
        self._messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._eof = False
        self._next_id = 0
        self._stderr = _Drain(self.proc.stderr, name=f"test-stderr[{Path(self.argv[-1]).name}]")
        self._stderr.start()
        self._reader = threading.Thread(target=self._read, name="test-stdout-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                try:
                    message = json.loads(line)
                except ValueError:
                    with self._cond:
                        self.garbage.append(line)
                        self._cond.notify_all()
                    continue
                with self._cond:
                    self._messages.append(message)
                    self._cond.notify_all()
        except (OSError, ValueError):
            pass
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    # sending
    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def send_request(self, method: str, params: dict[str, Any] | None = None) -> int:
        rid = self.new_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return rid

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def respond(self, rid: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    # receiving
    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any]:
        """Remove and return the first received message matching ``predicate``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i, message in enumerate(self._messages):
                    if predicate(message):
                        return self._messages.pop(i)
                remaining = deadline - time.monotonic()
                if self._eof:
                    raise EOFError(
                        f"server closed stdout; stderr tail:\n{self.stderr_text()[-2000:]}"
                    )
                if remaining <= 0:
                    raise TimeoutError(
                        f"no matching message in {timeout}s; pending: {self._messages[-5:]!r}"
                    )
                self._cond.wait(remaining)

    def response(self, rid: Any, timeout: float = 10.0) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def notification(self, method: str, timeout: float = 10.0) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("method") == method and "id" not in m, timeout)

    def server_request(self, method: str, timeout: float = 10.0) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("method") == method and "id" in m, timeout)

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 10.0
    ) -> dict[str, Any]:
        """Send a request and return its whole response message (result or error)."""
        return self.response(self.send_request(method, params), timeout)

    def result(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 10.0
    ) -> Any:
        """Send a request and return its result; AssertionError on a JSON-RPC error."""
        reply = self.request(method, params, timeout)
        assert "result" in reply, f"{method} failed: {reply.get('error')!r}"
        return reply["result"]

    def initialize(
        self,
        version: str = LATEST_VERSION,
        capabilities: dict[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        """The handshake: initialize + notifications/initialized; returns the InitializeResult."""
        result = self.result(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "mcpsync-tests", "version": "0"},
            },
            timeout,
        )
        self.notify("notifications/initialized")
        return result

    def drain(self) -> list[dict[str, Any]]:
        """Remove and return every message received so far."""
        with self._cond:
            messages, self._messages = self._messages, []
            return messages

    def read_to_eof(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until the server closes stdout; return every message not yet consumed."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._eof:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"server did not close stdout in {timeout}s")
                self._cond.wait(remaining)
        return self.drain()

    def stderr_text(self) -> str:
        """What the server wrote to stderr; once it has exited, all of it (the drain thread may
        still be reading the pipe when stdout's EOF has already been seen)."""
        if self.proc.poll() is not None:
            self._stderr.join(5.0)  # ends at the pipe's EOF (bounded: a grandchild may hold it)
        return self._stderr.text()

    @property
    def stderr_bytes_total(self) -> int:
        return self._stderr.total

    def wait_stderr_bytes(self, count: int, timeout: float = 10.0) -> int:
        """Wait until the drain has read ``count`` stderr bytes (bounded); the total read."""
        return self._stderr.wait_total(count, timeout)

    def wait_stderr(self, pattern: str, timeout: float = 10.0) -> bool:
        """Wait until ``pattern`` (a regex) shows in what the server wrote to stderr (bounded)."""
        return self._stderr.wait_for(pattern, timeout) is not None

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def wait(self, timeout: float = 10.0) -> int:
        return self.proc.wait(timeout)

    def close(self, timeout: float = 3.0) -> int | None:
        """Close stdin, give the server ``timeout`` seconds to exit, then kill its group."""
        self.close_stdin()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        kill_group(self.proc)
        self._reader.join(timeout)
        self._stderr.join(timeout)
        return self.proc.returncode

    def __enter__(self) -> StdioPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RunningServer:
    """A server process listening on 127.0.0.1:``port``."""

    proc: subprocess.Popen[bytes]
    port: int
    url: str
    _stderr: _Drain = field(repr=False)
    _stdout: _Drain = field(repr=False)

    def stderr_text(self) -> str:
        return self._stderr.text()

    def stdout_text(self) -> str:
        return self._stdout.text()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def start_server(
    argv: Sequence[str],
    *,
    port: int | None,
    path: str,
    env: dict[str, str] | None = None,
    ready_pattern: str | None = None,
    timeout: float = 30.0,
) -> Iterator[RunningServer]:
    """Run ``argv`` in a new process group; yield once 127.0.0.1:<port> accepts connections.

    ``ready_pattern`` (a regex) must first match the server's stderr; when ``port`` is None
    its group 1 is the port the server chose. Raises LaunchError (with the server's stderr)
    if the server exits or is not ready within ``timeout`` seconds. The process group is
    killed on exit, whatever happened.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    name = Path(argv[1] if len(argv) > 1 else argv[0]).name
    stderr, stdout = (
        _Drain(proc.stderr, f"test-stderr[{name}]"),
        _Drain(proc.stdout, f"test-stdout[{name}]"),
    )
    stderr.start()
    stdout.start()
    try:
        deadline = time.monotonic() + timeout
        if ready_pattern is not None:
            match = stderr.wait_for(ready_pattern, timeout)
            if match is None:
                raise LaunchError(
                    f"{name} not ready in {timeout}s (exit {proc.poll()}):\n{stderr.text()[-3000:]}"
                )
            if port is None:
                port = int(match.group(1))
        if port is None:
            raise ValueError("start_server needs a port or a ready_pattern that captures one")
        while not _accepts(port):
            if proc.poll() is not None:
                stderr.join(2)
                raise LaunchError(f"{name} exited with {proc.returncode}:\n{stderr.text()[-3000:]}")
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"{name} did not listen on {port} in {timeout}s:\n{stderr.text()[-3000:]}"
                )
            time.sleep(0.05)  # polling a port: there is no event to wait on
        yield RunningServer(proc, port, f"http://127.0.0.1:{port}{path}", stderr, stdout)
    finally:
        kill_group(proc)
        stderr.join(5)
        stdout.join(5)


SDK_READY = r"sdk_server ready: http://127\.0\.0\.1:(\d+)/"


@contextmanager
def sdk_server_http(
    *,
    stateless: bool = False,
    json_response: bool = False,
    resumable: bool = False,
    timeout: float = 30.0,
) -> Iterator[RunningServer]:
    """The official-SDK server over Streamable HTTP at ``http://127.0.0.1:<port>/mcp``.

    ``stateless``: no Mcp-Session-Id; ``json_response``: POSTs answered with JSON, not SSE;
    ``resumable``: events kept in memory so a GET with Last-Event-ID can resume.
    """
    argv = [sys.executable, str(SERVERS_DIR / "sdk_server.py"), "http", "--port", "0"]
    argv += ["--stateless"] * stateless + ["--json"] * json_response + ["--resumable"] * resumable
    with start_server(
        argv, port=None, path="/mcp", ready_pattern=SDK_READY, timeout=timeout
    ) as server:
        yield server


@contextmanager
def sdk_server_sse(*, timeout: float = 30.0) -> Iterator[RunningServer]:
    """The official-SDK server over legacy HTTP+SSE at ``http://127.0.0.1:<port>/sse``."""
    argv = [sys.executable, str(SERVERS_DIR / "sdk_server.py"), "sse", "--port", "0"]
    with start_server(
        argv, port=None, path="/sse", ready_pattern=SDK_READY, timeout=timeout
    ) as server:
        yield server


def _everything(mode: str, path: str, timeout: float) -> Any:
    if not have_everything():
        raise LaunchError(
            "mcp-server-everything is not installed: run scripts/install-test-deps.sh"
        )
    port = free_port()
    argv = [str(NODE_BIN / "node"), str(NODE_BIN / "mcp-server-everything"), mode]
    return start_server(
        argv, port=port, path=path, env=node_env({"PORT": str(port)}), timeout=timeout
    )


@contextmanager
def everything_http(*, timeout: float = 60.0) -> Iterator[RunningServer]:
    """``mcp-server-everything streamableHttp`` at ``http://127.0.0.1:<port>/mcp`` (stateful)."""
    with _everything("streamableHttp", "/mcp", timeout) as server:
        yield server


@contextmanager
def everything_sse(*, timeout: float = 60.0) -> Iterator[RunningServer]:
    """``mcp-server-everything sse`` at ``http://127.0.0.1:<port>/sse`` (legacy HTTP+SSE)."""
    with _everything("sse", "/sse", timeout) as server:
        yield server


def which(name: str) -> str | None:
    """``shutil.which`` with tests/node/node_modules/.bin searched first."""
    return node_bin(name) or shutil.which(name)


@contextmanager
def tasks_http(store: Path, *flags: str) -> Iterator[str]:
    """``tasks_server.py STORE --http FLAGS``: yields its URL once it listens; killed after
    (its pipes closed too)."""
    server = subprocess.Popen(
        [sys.executable, str(SERVERS_DIR / "tasks_server.py"), str(store), "--http", *flags],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    try:
        yield server.stdout.readline().split()[1]
    finally:
        server.kill()
        server.communicate(timeout=10)
