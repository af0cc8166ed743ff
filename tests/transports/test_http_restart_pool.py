"""A keep-alive connection to an HTTP server that was restarted on its port (issue 14).

The server processes here are real (a small stdlib Streamable HTTP server in this file,
the demo HTTP server, the official SDK's 2026-07-28 server), each run under
``--vanish``: on SIGUSR1 the process puts every TCP connection it holds into repair mode
and exits, so those connections disappear without a FIN or a reset, as when a server's
host or container goes away; a new process then listens on the same port. The client's
pooled connection still looks healthy (ESTABLISHED, nothing received), so the next
request goes out on it and meets a reset: it provably never reached a server
(``fastpool._Undelivered``), is sent once more on a new connection, and the new process
answers it (404 for the old session: re-initialized, then answered). A request the
server did read before it died is never sent again. Needs CAP_NET_ADMIN (TCP_REPAIR);
the tests are skipped without it.

Run as a script, this file is the test server: ``--serve --port N`` (stdlib, JSON
replies, sessions, a GET stream; tools ``echo`` and ``hang``; ``--tls CERT KEY``;
``--expire-first K``: the first K ``tools/call`` requests expire their session and get
404; ``GET /stats``), or
``--vanish -- <module or script> args...`` to run another server with the SIGUSR1 rule.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TCP_REPAIR = 19  # linux/tcp.h
READY = "restart_pool_server ready"


# -- the server side (run as a script) ---------------------------------------------------


def _vanish(signum: int, frame: Any) -> None:
    """Every TCP connection of this process disappears silently; then exit."""
    kept = []
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except (OSError, ValueError):
            continue
        kept.append(sock)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
        except OSError:
            pass  # not TCP, or a listening socket: closes as usual
    os._exit(0)


def _serve(port: int, expire_first: int, tls: tuple[str, str] | None) -> None:
    import ssl
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    lock = threading.Lock()
    state: dict[str, Any] = {"current": None, "next": 1, "expire": expire_first}
    stats: dict[str, Any] = {"initializes": 0, "calls": [], "not_found": 0}
    hold = threading.Event()  # never set: ``hang`` blocks until the process dies

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def reply(
            self, status: int, body: Any = None, headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/stats":
                with lock:
                    self.reply(200, stats)
                return
            sid = self.headers.get("Mcp-Session-Id")
            with lock:
                known = sid is not None and sid == state["current"]
            if not known:
                self.reply(404 if sid else 400)
                return
            self.send_response(200)  # the GET stream: open until the process ends
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.flush()
            print(f"GET stream for {sid}", file=sys.stderr, flush=True)
            hold.wait()

        def do_DELETE(self) -> None:
            self.reply(200)

        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            method, rid = message.get("method"), message.get("id")
            with lock:
                if method == "initialize":
                    sid = f"{os.getpid()}-{state['next']}"
                    state["next"] += 1
                    state["current"] = sid
                    stats["initializes"] += 1
                    result = {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "restart-pool", "version": "1"},
                    }
                    self.reply(
                        200,
                        {"jsonrpc": "2.0", "id": rid, "result": result},
                        {"Mcp-Session-Id": sid},
                    )
                    return
                if self.headers.get("Mcp-Session-Id") != state["current"]:
                    stats["not_found"] += 1
                    self.reply(
                        404,
                        {
                            "jsonrpc": "2.0",
                            "id": None,
                            "error": {"code": -32001, "message": "no session"},
                        },
                    )
                    return
                if rid is None:
                    self.reply(202)
                    return
                if method == "tools/call":
                    stats["calls"].append(message["params"])
                    if state["expire"] > 0:  # this session is gone now: 404
                        state["expire"] -= 1
                        state["current"] = None
                        stats["not_found"] += 1
                        self.reply(
                            404,
                            {
                                "jsonrpc": "2.0",
                                "id": None,
                                "error": {"code": -32001, "message": "expired"},
                            },
                        )
                        return
                if method == "tools/list":
                    tool = {"type": "object"}
                    tools = [{"name": n, "inputSchema": tool} for n in ("echo", "hang")]
                    self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
                    return
                if method != "tools/call":
                    self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {}})
                    return
            params = message["params"]
            if params["name"] == "hang":
                print(
                    f"hanging on {params['arguments'].get('message')}", file=sys.stderr, flush=True
                )
                hold.wait()
            text = str(params["arguments"].get("message", ""))
            result = {"content": [{"type": "text", "text": text}]}
            self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": result})

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    scheme = "https" if tls else "http"
    print(
        f"{READY}: {scheme}://127.0.0.1:{server.server_address[1]}/mcp", file=sys.stderr, flush=True
    )
    server.serve_forever()


def _main(argv: list[str]) -> None:
    import runpy

    signal.signal(signal.SIGUSR1, _vanish)
    if argv[0] == "--serve":
        expire = int(argv[argv.index("--expire-first") + 1]) if "--expire-first" in argv else 0
        tls = argv[argv.index("--tls") + 1 :][:2] if "--tls" in argv else None
        _serve(int(argv[argv.index("--port") + 1]), expire, (tls[0], tls[1]) if tls else None)
        return
    assert argv[0] == "--vanish" and argv[1] == "--"
    target, sys.argv = argv[2], argv[2:]
    if target.endswith(".py"):
        sys.path.insert(0, str(Path(target).parent))
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
    sys.exit(0)


# -- the tests -------------------------------------------------------------------------

import pytest  # noqa: E402
import requests  # noqa: E402
from servers.launch import SERVERS_DIR, free_port, start_server  # noqa: E402

import mcpsync  # noqa: E402
from mcpsync import RestartEvent, RestartPolicy, ServerRestarted  # noqa: E402
from mcpsync.errors import ConnectError, SessionExpired  # noqa: E402
from mcpsync.protocol.choose import Caches  # noqa: E402

try:
    from test_tls import pki  # noqa: F401  # the throwaway CA (needs cryptography)
except (ImportError, pytest.skip.Exception):

    @pytest.fixture
    def pki() -> Any:
        pytest.skip("cryptography is not installed")


WAIT = 30.0
HERE = str(Path(__file__).resolve())


def _can_repair() -> bool:
    """TCP_REPAIR needs CAP_NET_ADMIN (and Linux)."""
    if sys.platform != "linux":
        return False
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            accepted, _ = listener.accept()
            with accepted:
                try:
                    accepted.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
                except OSError:
                    return False
                accepted.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 0)
            del client
    return True


pytestmark = pytest.mark.skipif(not _can_repair(), reason="TCP_REPAIR needs CAP_NET_ADMIN")


def own_server(port: int, *extra: str) -> Any:
    argv = [sys.executable, HERE, "--serve", "--port", str(port), *extra]
    return start_server(argv, port=port, path="/mcp", ready_pattern=READY, timeout=WAIT)


@contextmanager
def own_tls_server(port: int, pki: dict[str, str]) -> Iterator[Any]:
    with own_server(port, "--tls", pki["server_cert"], pki["server_key"]) as server:
        server.url = server.url.replace("http://", "https://", 1)
        yield server


def vanishing(argv: list[str], port: int, path: str, ready: str | None) -> Any:
    return start_server(
        [sys.executable, HERE, "--vanish", "--", *argv], port=port, path=path,
        ready_pattern=ready, timeout=WAIT,
    )  # fmt: skip


def vanish(server: Any) -> None:
    """The server process goes; its connections disappear without a FIN or a reset."""
    os.kill(server.proc.pid, signal.SIGUSR1)
    assert server.proc.wait(WAIT) == 0


def stats(port: int) -> dict[str, Any]:
    reply = requests.get(f"http://127.0.0.1:{port}/stats", timeout=WAIT)
    reply.raise_for_status()
    return reply.json()


def echoed(session: mcpsync.Session, text: str) -> str:
    return session.call_tool("echo", {"message": text}).content[0].text


class Restarts:
    def __init__(self) -> None:
        self.events: list[RestartEvent] = []
        self._cond = threading.Condition()

    def __call__(self, event: RestartEvent) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def wait(self, count: int = 1) -> RestartEvent:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.events) >= count, WAIT), self.events
            return self.events[count - 1]


def restarted_between_calls(
    start: Callable[[], Any], check: Callable[[mcpsync.Session, Any], None], **kwargs: Any
) -> None:
    """A call on ``start()``'s server, the server vanishes, ``start()`` again on its port,
    then ``check(session, new_server)``."""
    with start() as first:
        s = mcpsync.Session.connect(first.url, timeout=WAIT, _caches=Caches(), **kwargs)
        try:
            assert echoed(s, "one") == "one"
            vanish(first)
            with start() as second:
                check(s, second)
        finally:
            s.close()


def test_a_call_on_a_dead_pooled_connection_goes_out_again_and_reinitializes(no_leaks):
    port = free_port()

    def check(s: mcpsync.Session, server: Any) -> None:
        # reset on the old connection (never acknowledged): sent again on a new one, 404
        # from the new process, initialized again, sent again, answered: once
        assert echoed(s, "two") == "two"
        assert s.reinitializations == 1
        counts = stats(port)
        assert counts["initializes"] == 1
        assert [c["arguments"]["message"] for c in counts["calls"]] == ["two"]
        assert echoed(s, "three") == "three"
        # the old session's GET stream sat on a connection that is gone (no FIN ends it):
        # ended at the re-initialization, one is opened for the new session
        assert server._stderr.wait_for("GET stream for ", WAIT)

    restarted_between_calls(lambda: own_server(port), check, era="legacy")


def test_with_the_restart_policy_the_session_comes_back_with_its_call(no_leaks):
    seen = Restarts()
    port = free_port()

    def check(s: mcpsync.Session, server: Any) -> None:
        assert echoed(s, "two") == "two"
        event = seen.wait()
        assert isinstance(event.reason, SessionExpired) and event.ok is True
        assert s.restarts == 1 and s.reinitializations == 1
        assert [c["arguments"]["message"] for c in stats(port)["calls"]] == ["two"]

    policy = RestartPolicy(backoff=0.05, on_restart=seen)
    restarted_between_calls(lambda: own_server(port), check, era="legacy", restart=policy)


def test_a_call_the_dead_server_had_read_is_not_sent_again(no_leaks):
    """The server read ``hang`` and died running it (its FIN acknowledges the request):
    the call fails, typed and worded, and the new process never sees it."""
    port = free_port()
    with own_server(port) as first:
        s = mcpsync.Session.connect(first.url, era="legacy", timeout=WAIT, _caches=Caches())
        try:
            assert echoed(s, "one") == "one"
            outcome: list[BaseException] = []

            def call() -> None:
                try:
                    s.call_tool("hang", {"message": "once"})
                except BaseException as exc:  # noqa: BLE001 - the test looks at it
                    outcome.append(exc)

            caller = threading.Thread(target=call, name="test-hang-caller")
            caller.start()
            assert first._stderr.wait_for("hanging on once", WAIT)
            first.proc.kill()
            first.proc.wait(WAIT)
            caller.join(WAIT)
            assert not caller.is_alive()
        except BaseException:
            s.close()
            raise
    try:
        assert len(outcome) == 1 and isinstance(outcome[0], ConnectError), outcome
        assert "may have received the request" in str(outcome[0])
        with own_server(port):
            assert echoed(s, "after") == "after"
            assert [c["arguments"]["message"] for c in stats(port)["calls"]] == ["after"]
    finally:
        s.close()


def test_with_the_restart_policy_a_call_the_server_had_read_is_server_restarted(no_leaks):
    seen = Restarts()
    port = free_port()
    policy = RestartPolicy(backoff=0.05, max_backoff=0.2, max_attempts=100, on_restart=seen)
    with own_server(port) as first:
        s = mcpsync.Session.connect(
            first.url, era="legacy", timeout=WAIT, connect_timeout=5, restart=policy,
            _caches=Caches(),
        )  # fmt: skip
        try:
            assert echoed(s, "one") == "one"
            outcome: list[BaseException] = []

            def call() -> None:
                try:
                    s.call_tool("hang", {"message": "once"})
                except BaseException as exc:  # noqa: BLE001 - the test looks at it
                    outcome.append(exc)

            caller = threading.Thread(target=call, name="test-hang-caller")
            caller.start()
            assert first._stderr.wait_for("hanging on once", WAIT)
            first.proc.kill()  # it read the call: its FIN acknowledges it
            first.proc.wait(WAIT)
            caller.join(WAIT)
        except BaseException:
            s.close()
            raise
    try:
        assert not caller.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], ServerRestarted), outcome
        assert outcome[0].method == "tools/call"
        with own_server(port):
            event = seen.wait()
            assert event.ok is True
            assert echoed(s, "back") == "back"
            assert [c["arguments"]["message"] for c in stats(port)["calls"]] == ["back"]
    finally:
        s.close()


def test_demo_http_server_sse_replies(no_leaks):
    port = free_port()
    argv = ["mcpsync.demo_server.http", "--port", str(port)]

    def check(s: mcpsync.Session, server: Any) -> None:
        assert echoed(s, "two") == "two"
        assert s.reinitializations == 1

    restarted_between_calls(lambda: vanishing(argv, port, "/mcp", None), check, era="legacy")


@pytest.mark.real
def test_official_sdk_stateless_2026_server(no_leaks):
    """The 2026-07-28 wire has no session: the request sent again is simply answered."""
    port = free_port()
    argv = [str(SERVERS_DIR / "modern_sdk_server.py"), "http", "--port", str(port), "--json"]

    def check(s: mcpsync.Session, server: Any) -> None:
        assert s.era == "modern"
        assert echoed(s, "two") == "two"
        assert echoed(s, "three") == "three"

    start = lambda: vanishing(argv, port, "/mcp", "modern_sdk_server ready")  # noqa: E731
    restarted_between_calls(start, check, era="modern")


def test_a_host_entry_with_a_restart_key(no_leaks):
    port = free_port()
    with own_server(port) as first:
        config = {"mcpServers": {"pool": {"url": first.url, "restart": {"backoff": 0.05}}}}
        with mcpsync.Host(config) as host:
            assert host.call_tool("pool__echo", {"message": "one"}).content[0].text == "one"
            vanish(first)
            with own_server(port):
                assert host.call_tool("pool__echo", {"message": "two"}).content[0].text == "two"
                (row,) = host.status()
                assert row.restarts == 1 and row.state == "ready"
                assert [c["arguments"]["message"] for c in stats(port)["calls"]] == ["two"]


def test_over_tls_the_same_rule_holds(pki, no_leaks):
    """TLS connections are checked by poll when idle and carry the same TCP record."""
    port = free_port()

    def check(s: mcpsync.Session, server: Any) -> None:
        assert s.transport.url.startswith("https://")
        assert echoed(s, "two") == "two"
        assert s.reinitializations == 1
        assert [c["arguments"]["message"] for c in stats_tls(port, pki)["calls"]] == ["two"]

    restarted_between_calls(
        lambda: own_tls_server(port, pki), check, era="legacy", verify=pki["ca"]
    )


def stats_tls(port: int, pki: dict[str, str]) -> dict[str, Any]:
    reply = requests.get(f"https://127.0.0.1:{port}/stats", timeout=WAIT, verify=pki["ca"])
    reply.raise_for_status()
    return reply.json()


@pytest.mark.real
def test_a_listen_stream_on_a_vanished_server_ends_and_listens_again(no_leaks):
    """The 2026-07-28 ``subscriptions/listen`` reply stream waits up to 24 h for data: on
    a connection that vanished, only TCP keep-alive (first probe after 15 s idle) tells."""
    from test_restart import LogWatch

    port = free_port()
    argv = [str(SERVERS_DIR / "modern_sdk_server.py"), "http", "--port", str(port)]
    ready = "modern_sdk_server ready"
    again = LogWatch("listening again")
    try:
        with vanishing(argv, port, "/mcp", ready) as first:
            s = mcpsync.Session.connect(first.url, era="modern", timeout=WAIT, _caches=Caches())
            try:
                updated = threading.Event()
                s.subscribe_resource("demo://readme", lambda uri: updated.set())
                vanish(first)
                with vanishing(argv, port, "/mcp", ready):
                    assert again.wait(WAIT)  # the dead stream ended: listening again
                    # a second subscription: returns once the new process acknowledged it
                    s.subscribe_resource("demo://item/1", lambda uri: None)
                    s.call_tool("touch_resource", {"uri": "demo://readme"})
                    assert updated.wait(WAIT)
            finally:
                s.close()
    finally:
        again.remove()


def test_eight_threads_on_one_session_each_call_answered_once(no_leaks):
    """8 threads keep 8 pooled connections; all of them vanish with the server: every call
    of the next round is sent again on a new connection, one re-initialization for all."""
    port = free_port()
    threads = 8

    def round_of(s: mcpsync.Session, tag: str) -> list[str]:
        start = threading.Barrier(threads)
        got: list[str] = []
        failures: list[BaseException] = []

        def call(n: int) -> None:
            try:
                start.wait(WAIT)
                got.append(echoed(s, f"{tag}-{n}"))
            except BaseException as exc:  # noqa: BLE001 - the test looks at it
                failures.append(exc)

        workers = [
            threading.Thread(target=call, args=(n,), name=f"test-caller-{n}")
            for n in range(threads)
        ]
        for t in workers:
            t.start()
        for t in workers:
            t.join(WAIT * 2)
        assert not any(t.is_alive() for t in workers)
        assert failures == [], failures
        return sorted(got)

    expected = sorted(f"b-{n}" for n in range(threads))
    with own_server(port) as first:
        s = mcpsync.Session.connect(first.url, era="legacy", timeout=WAIT, _caches=Caches())
        try:
            assert round_of(s, "a") == sorted(f"a-{n}" for n in range(threads))
            vanish(first)
            with own_server(port):
                assert round_of(s, "b") == expected
                assert s.reinitializations == 1
                assert sorted(c["arguments"]["message"] for c in stats(port)["calls"]) == expected
        finally:
            s.close()


def test_a_call_in_flight_when_the_server_vanished_is_server_restarted(no_leaks):
    """The server read ``hang`` and vanished: no FIN, no reply, ever. TCP finds the
    connection dead long before the call's 120 s timeout (our retransmission met by a
    reset while the server's ACK was still delayed, else keep-alive after 15 s idle):
    ``ServerRestarted``, not re-sent (the new process never sees ``hang``), and the
    session comes back on the new process."""
    seen = Restarts()
    port = free_port()
    policy = RestartPolicy(backoff=0.05, max_backoff=0.2, max_attempts=100, on_restart=seen)
    with own_server(port) as first:
        s = mcpsync.Session.connect(
            first.url, era="legacy", timeout=120, connect_timeout=5, restart=policy,
            _caches=Caches(),
        )  # fmt: skip
        try:
            assert echoed(s, "one") == "one"
            outcome: list[BaseException] = []

            def call() -> None:
                try:
                    s.call_tool("hang", {"message": "once"})
                except BaseException as exc:  # noqa: BLE001 - the test looks at it
                    outcome.append(exc)

            caller = threading.Thread(target=call, name="test-hang-caller")
            caller.start()
            assert first._stderr.wait_for("hanging on once", WAIT)
            vanish(first)
            with own_server(port):
                caller.join(WAIT * 2)
                assert not caller.is_alive()
                assert len(outcome) == 1 and isinstance(outcome[0], ServerRestarted), outcome
                assert "may have received the request" in str(outcome[0])
                assert seen.wait().ok is True
                assert echoed(s, "back") == "back"
                assert [c["arguments"]["message"] for c in stats(port)["calls"]] == ["back"]
        finally:
            s.close()
