"""The rest of the timeout audit (issue 31 point 12): the parameters docs/timeouts.md listed
as "Not audited yet", each measured against a server on 127.0.0.1 that stalls at exactly
the step the parameter bounds.

Owns: tasks (``Session.task(timeout=)``, ``TaskFuture.wait_task_id(timeout=)``), MCP Apps
(``AppBridge(call_timeout=)``, ``apps.call(timeout=)``, ``apps.read_app_resource(timeout=)``),
2026-07-28-era futures over Streamable HTTP (``ModernFuture.result(timeout)``), the OAuth
machine grants (``OAuth.client_credentials``, ``enterprise_managed``, ``workload_identity``:
``timeout=``), ``LegacySSETransport(sse_read_timeout=)``, the headless authorization
(``headless_redirect(timeout=)``, ``OAuth(redirect="headless", authorization_timeout=)``),
``to_langchain(timeout=)`` and ``SmokeOptions(close_timeout=)``. Same rules as
tests/project/test_timeouts_audit.py (whose ``timed``/``check_bound`` it uses): the typed error
within the bound + 0.5 s, and not before the bound - 0.05 s where the bound is used up.

Servers: ``tests/servers/stall_more_server.py`` (stdio: tasks and apps), the official-SDK
``tests/servers/submit_sdk_server.py`` (2026-07-28 era over Streamable HTTP), ``StallHTTP``
(legacy HTTP+SSE) and ``StallAS`` below (an MCP server that asks for OAuth, its protected
resource metadata, an authorization server and an IdP whose token endpoints stall).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import queue
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from servers.launch import SDK_READY, SERVERS_DIR, start_server
from servers.stall_http import HOLD, StallHTTP
from test_submit_everywhere import Witness
from test_timeouts_audit import EARLY, SLACK, check_bound, timed

import mcpsync
import mcpsync.apps as apps
from mcpsync.apps import AppBridge, read_app_resource
from mcpsync.errors import AuthError, MCPSyncError, RequestTimeout
from mcpsync.protocol import choose
from mcpsync.transports.http.legacy_sse import LegacySSETransport

pytestmark = pytest.mark.real

MORE = [sys.executable, str(SERVERS_DIR / "stall_more_server.py")]
SDK = str(SERVERS_DIR / "submit_sdk_server.py")
WAIT = 20.0
#: the stdio session's default request timeout: well past every bound tested (1 s + SLACK)
DEFAULT = 5.0


@pytest.fixture(autouse=True)
def _fresh_verdicts() -> Iterator[None]:
    choose.VERDICTS.forget()
    yield
    choose.VERDICTS.forget()


@pytest.fixture(scope="module")
def more() -> Iterator[mcpsync.Session]:
    """The tasks-and-apps stall server (2025-11-25, handshake), session default timeout
    ``DEFAULT`` s: only the parameter under test (1 s) can end a stalled step within it."""
    with mcpsync.Session.connect(
        MORE, connect_timeout=20, timeout=DEFAULT, era="legacy", extensions=apps.EXTENSION
    ) as session:
        yield session


def usable(session: mcpsync.Session) -> None:
    result = session.call_tool("echo", {"message": "still here"}, timeout=10)
    assert getattr(result.content[0], "text", None) == "still here"


# ======================================================================== tasks (2025-11-25)


def test_session_task_timeout_bounds_each_request_of_the_task(more: mcpsync.Session) -> None:
    # the task exists and is working; the server never answers its tasks/get
    created = more.submit_call_tool("slow", {}, task=True, timeout=10)
    task_id = created.wait_task_id(timeout=10)  # type: ignore[attr-defined]
    assert isinstance(task_id, str), created
    created.cancel()
    picked = more.task(task_id, timeout=1)
    elapsed, error = timed(lambda: picked.result(timeout=WAIT))
    check_bound(elapsed, error, 1)
    assert "tasks/" in str(error), error
    usable(more)


def test_task_future_wait_task_id_timeout_bounds_only_that_wait(more: mcpsync.Session) -> None:
    # a task-augmented tools/call never answered: no CreateTaskResult, so no task id
    future = more.submit_call_tool("hang", {}, task=True, timeout=10)
    try:
        found: list[str | None] = []
        elapsed, error = timed(lambda: found.append(future.wait_task_id(timeout=1)))  # type: ignore[attr-defined]
        assert error is None and found == [None], (error, found)
        assert 1 - EARLY <= elapsed <= 1 + SLACK, f"wait_task_id(timeout=1) took {elapsed:.2f} s"
        assert not future.done()  # only the wait ended: the call goes on
    finally:
        future.cancel()
    usable(more)


def test_a_task_calls_timeout_ends_its_wait_task_id_too(more: mcpsync.Session) -> None:
    future = more.submit_call_tool("hang", {}, task=True, timeout=1)
    found: list[str | None] = []
    elapsed, error = timed(lambda: found.append(future.wait_task_id(timeout=WAIT)))  # type: ignore[attr-defined]
    assert error is None and found == [None], (error, found)
    assert 1 - EARLY <= elapsed <= 1 + SLACK, f"wait_task_id after a 1 s call: {elapsed:.2f} s"
    with pytest.raises(RequestTimeout):
        future.result(timeout=SLACK)
    usable(more)


# ================================================================================ MCP Apps


def test_read_app_resource_timeout(more: mcpsync.Session) -> None:
    elapsed, error = timed(lambda: read_app_resource(more, "ui://stall/hang", timeout=1))
    check_bound(elapsed, error, 1)
    usable(more)


@pytest.fixture(scope="module")
def app_ready(more: mcpsync.Session) -> mcpsync.Session:
    """anywidget imported (a one-time local cost, 0.7 s under load, that is no wait on the
    server) and the tools listed, so a timed ``apps.call`` measures its calls only."""
    assert apps.AppView is not None
    more.list_tools()
    return more


def test_apps_call_timeout_bounds_the_tool_call(app_ready: mcpsync.Session) -> None:
    more = app_ready
    elapsed, error = timed(lambda: apps.call(more, "hang", {}, timeout=1))
    check_bound(elapsed, error, 1)
    usable(more)


def test_apps_call_timeout_bounds_the_read_of_the_app(app_ready: mcpsync.Session) -> None:
    more = app_ready
    # the tool answers at once; its ui:// resource is never read
    elapsed, error = timed(lambda: apps.call(more, "hang_app", {}, timeout=1))
    check_bound(elapsed, error, 1)
    usable(more)


class Front:
    """What the bridge posts to the app, as a queue."""

    def __init__(self) -> None:
        self.posted: queue.Queue[dict[str, Any]] = queue.Queue()

    def __call__(self, envelope: dict[str, Any]) -> None:
        self.posted.put(envelope)

    def reply_to(self, rid: Any, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            envelope = self.posted.get(timeout=max(0.0, deadline - time.monotonic()))
            message = envelope.get("message")
            if envelope.get("kind") == "rpc" and isinstance(message, dict):
                if message.get("id") == rid and "method" not in message:
                    return message


def test_app_bridge_call_timeout_bounds_a_call_the_app_makes(more: mcpsync.Session) -> None:
    tool = next(t for t in more.list_tools() if t.name == "hang")
    resource = read_app_resource(more, "ui://stall/ok", timeout=10)
    front = Front()
    bridge = AppBridge(more, tool, resource, post=front, call_timeout=1)
    try:
        init = {"appInfo": {"name": "t", "version": "1"}}
        bridge.receive({"jsonrpc": "2.0", "id": 1, "method": "ui/initialize", "params": init})
        assert "result" in front.reply_to(1, WAIT)
        bridge.receive({"jsonrpc": "2.0", "method": "ui/notifications/initialized"})
        call = {"name": "hang", "arguments": {}}
        started = time.monotonic()
        bridge.receive({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        answer = front.reply_to(2, WAIT)
        elapsed = time.monotonic() - started
    finally:
        bridge.close()
    # the app gets a JSON-RPC error naming the timeout, within the bound
    assert "error" in answer, answer
    assert "RequestTimeout" in answer["error"]["message"], answer
    assert 1 - EARLY <= elapsed <= 1 + SLACK, f"call_timeout=1 answered after {elapsed:.2f} s"
    usable(more)


# ================================================= 2026-07-28 futures over Streamable HTTP


@pytest.fixture(scope="module")
def witness() -> Iterator[Witness]:
    w = Witness()
    yield w
    w.close()


@pytest.fixture(scope="module")
def modern_http(witness: Witness) -> Iterator[mcpsync.Session]:
    argv = [sys.executable, SDK, "--witness", str(witness.port), "http", "--port", "0"]
    with start_server(argv, port=None, path="/mcp", ready_pattern=SDK_READY, timeout=60) as server:
        with mcpsync.Session.connect(
            server.url, transport="streamable-http", era="modern", timeout=WAIT,
            connect_timeout=60,
        ) as session:  # fmt: skip
            assert session.era == "modern", session.era_reason
            yield session


def nap(session: mcpsync.Session, tag: str, **kw: Any) -> concurrent.futures.Future[Any]:
    return session.submit_call_tool("nap", {"seconds": HOLD, "tag": tag}, **kw)


def test_modern_future_result_timeout_bounds_only_that_wait(
    modern_http: mcpsync.Session, witness: Witness
) -> None:
    future = nap(modern_http, "wait-only")
    try:
        assert witness.wait_for("started wait-only")
        elapsed, error = timed(lambda: future.result(timeout=1))
        assert isinstance(error, TimeoutError) and not isinstance(error, RequestTimeout), error
        assert 1 - EARLY <= elapsed <= 1 + SLACK, f"result(timeout=1) took {elapsed:.2f} s"
        assert not future.done()  # only the wait ended: the call goes on
    finally:
        future.cancel()
    assert witness.wait_for("cancelled wait-only")


def test_a_modern_futures_own_timeout_ends_a_longer_result_wait(
    modern_http: mcpsync.Session, witness: Witness
) -> None:
    future = nap(modern_http, "own-timeout", timeout=1)
    elapsed, error = timed(lambda: future.result(timeout=WAIT))
    check_bound(elapsed, error, 1)
    assert witness.wait_for("cancelled own-timeout")  # the server was told
    usable_modern(modern_http)


def usable_modern(session: mcpsync.Session) -> None:
    result = session.call_tool("nap", {"seconds": 0, "tag": "usable"}, timeout=10)
    assert "slept" in str(getattr(result.content[0], "text", ""))


# ==================================================== LegacySSETransport(sse_read_timeout=)


def test_legacy_sse_read_timeout_ends_an_idle_stream(no_leaks: None) -> None:
    # the stream sends the endpoint event and the initialize reply, then nothing; the call
    # is accepted (202) and never answered: only sse_read_timeout can end it before 20 s
    with StallHTTP({"tools/call:hang": "silent"}) as peer:
        transport = LegacySSETransport(peer.sse_url, sse_read_timeout=1)
        with mcpsync.Session.connect(
            transport, connect_timeout=20, timeout=WAIT, era="legacy"
        ) as session:
            idle_since = time.monotonic()  # the initialize reply was the stream's last event
            elapsed, error = timed(lambda: session.call_tool("hang", {}))
            idle = time.monotonic() - idle_since
    assert isinstance(error, MCPSyncError), f"got {error!r} after {elapsed:.2f} s"
    assert 1 - EARLY <= idle <= 1 + SLACK, f"sse_read_timeout=1 ended it after {idle:.2f} s idle"
    assert "stream" in str(error).lower(), error


# ====================================================== OAuth machine grants: token requests

TOKEN = json.dumps({"access_token": "at", "token_type": "Bearer", "expires_in": 3600}).encode()
JAG = json.dumps({
    "access_token": "id-jag", "token_type": "N_A", "expires_in": 300,
    "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
}).encode()  # fmt: skip


class _ASHandler(BaseHTTPRequestHandler):
    peer: StallAS
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:
        path, base = self.path.split("?")[0], self.peer.base
        self.peer.requested.put(f"GET {path}")
        self.peer.arrived.setdefault(path, time.monotonic())
        if path == self.peer.stalled:  # the authorization endpoint (a headless redirect)
            return self._stall_head()
        if path.startswith("/.well-known/oauth-protected-resource") or path == "/prm":
            body = {"resource": base + "/mcp", "authorization_servers": [base]}
        elif path.startswith("/.well-known/oauth-authorization-server"):
            body = {
                "issuer": base,
                "token_endpoint": base + "/token",
                "authorization_endpoint": base + "/authorize",
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code",
                    "client_credentials",
                    "urn:ietf:params:oauth:grant-type:jwt-bearer",
                ],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "none"],
            }
        else:
            return self._json(404, b"{}")
        self._json(200, json.dumps(body).encode())

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.peer.requested.put(f"POST {path}")
        if path == "/mcp":
            prm = f'Bearer resource_metadata="{self.peer.base}/prm"'
            return self._json(401, b"{}", WWW_Authenticate=prm)
        if path == self.peer.stalled:
            return self._stall()
        self._json(200, JAG if path == "/idp-token" else TOKEN)

    def _stall_head(self) -> None:
        """The redirect's head: none ("silent"), or one byte every 0.2 s ("trickle")."""
        if self.peer.mode == "silent":
            self.peer.stop.wait(HOLD)
            self.close_connection = True
            return
        state = parse_qs(urlsplit(self.path).query).get("state", ["s"])[0]
        location = f"http://127.0.0.1:8976/callback?code=c&state={state}"
        head = f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
        give_up = time.monotonic() + HOLD
        with contextlib.suppress(OSError):
            for i in range(len(head)):
                if self.peer.stop.wait(0.2) or time.monotonic() > give_up:
                    break
                self.wfile.write(head[i : i + 1].encode())
                self.wfile.flush()
        self.close_connection = True

    def _stall(self) -> None:
        if self.peer.mode == "silent":
            self.peer.stop.wait(HOLD)
            self.close_connection = True
            return
        self.send_response(200)  # "trickle": the token response, one byte every 0.2 s
        self.send_header("Content-Type", "application/json")
        padded = TOKEN + b" " * 4096
        self.send_header("Content-Length", str(len(padded)))
        self.end_headers()
        give_up = time.monotonic() + HOLD
        with contextlib.suppress(OSError):
            for i in range(len(padded)):
                if self.peer.stop.wait(0.2) or time.monotonic() > give_up:
                    break
                self.wfile.write(padded[i : i + 1])
                self.wfile.flush()
        self.close_connection = True


class StallAS:
    """An MCP server at ``/mcp`` that answers 401 (resource metadata at ``/prm``), the
    authorization server's metadata, a token endpoint ``/token`` and an IdP token endpoint
    ``/idp-token``; the POST to ``stalled`` gets ``mode`` ("silent": no response;
    "trickle": one byte every 0.2 s); a GET of ``stalled`` (``/authorize``) gets no
    response or its 302's head one byte every 0.2 s. ``requested``: "METHOD path" of each
    request; ``arrived``: path -> when it first came (``time.monotonic()``)."""

    def __init__(self, stalled: str, mode: str) -> None:
        self.stalled, self.mode = stalled, mode
        self.stop = threading.Event()
        self.requested: queue.Queue[str] = queue.Queue()
        self.arrived: dict[str, float] = {}
        handler = type("ASHandler", (_ASHandler,), {"peer": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="test-stall-as", daemon=True
        )
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def seen(self) -> list[str]:
        out = []
        while not self.requested.empty():
            out.append(self.requested.get_nowait())
        return out

    def __enter__(self) -> StallAS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def grant(kind: str, peer: StallAS) -> Any:
    from mcpsync.auth import MemoryTokenStore, OAuth

    common: dict[str, Any] = {"store": MemoryTokenStore(), "timeout": 1}
    if kind == "client_credentials":
        return OAuth.client_credentials("svc", "s3cret", **common)
    if kind == "workload_identity":
        return OAuth.workload_identity("header.payload.signature", **common)
    return OAuth.enterprise_managed(
        "app", "s3cret", id_token="header.payload.signature",
        idp_token_endpoint=peer.base + "/idp-token", idp_client_id="idp-app", **common,
    )  # fmt: skip


GRANTS = [
    ("client_credentials", "/token"),
    ("workload_identity", "/token"),
    ("enterprise_managed", "/idp-token"),  # the ID token exchanged at the IdP
    ("enterprise_managed", "/token"),  # the ID-JAG at the authorization server
]


@pytest.mark.parametrize("mode", ["silent", "trickle"])
@pytest.mark.parametrize(("kind", "stalled"), GRANTS)
def test_oauth_grant_timeout_bounds_its_token_request(
    kind: str, stalled: str, mode: str, no_leaks: None
) -> None:
    with StallAS(stalled, mode) as peer:
        auth = grant(kind, peer)
        elapsed, error = timed(
            lambda: mcpsync.Session.connect(
                peer.base + "/mcp", auth=auth, transport="streamable-http", connect_timeout=20
            )
        )
        seen = peer.seen()
    assert f"POST {stalled}" in seen, seen  # the stall was reached
    check_bound(elapsed, error, 1, MCPSyncError)


# =================================================== RestartPolicy(backoff, max_backoff)


def test_close_ends_a_restart_backoff_at_once(no_leaks: None) -> None:
    # backoff and max_backoff are delays, not waits on a server: close() ends them at once
    from test_restart import LogWatch, kill

    from mcpsync import RestartPolicy

    restarting = LogWatch("restarting it")
    policy = RestartPolicy(backoff=60, max_backoff=60)
    session = mcpsync.Session.connect(MORE, connect_timeout=20, era="legacy", restart=policy)
    try:
        kill(session)
        assert restarting.wait(WAIT)  # the restart began: its 60 s backoff
    finally:
        restarting.remove()
        elapsed, error = timed(session.close)
    assert error is None, error
    assert elapsed <= SLACK, f"close() during a 60 s backoff took {elapsed:.2f} s"


# ============================================ headless authorization: headless_redirect(timeout=)

HEADLESS = ["silent", "trickle"]  # no reply; the 302's head 1 byte / 0.2 s (60 s before)


@pytest.mark.parametrize("mode", HEADLESS)
def test_headless_redirect_timeout_bounds_the_authorization_request(
    mode: str, no_leaks: None
) -> None:
    from mcpsync.auth import headless_redirect

    with StallAS("/authorize", mode) as peer:
        url = peer.base + "/authorize?response_type=code&state=s"
        elapsed, error = timed(lambda: headless_redirect(url, timeout=1))
        seen = peer.seen()
    assert "GET /authorize" in seen, seen
    check_bound(elapsed, error, 1, AuthError)
    assert "timeout=1 s" in str(error), error


@pytest.mark.parametrize("mode", HEADLESS)
def test_oauth_headless_redirect_is_bounded_by_authorization_timeout(
    mode: str, no_leaks: None
) -> None:
    # OAuth(redirect="headless"): the hops to the redirect URI within authorization_timeout
    from mcpsync.auth import MemoryTokenStore, OAuth

    with StallAS("/authorize", mode) as peer:
        auth = OAuth(
            redirect="headless", client_id="app", store=MemoryTokenStore(),
            authorization_timeout=1, timeout=20,
        )  # fmt: skip
        _, error = timed(
            lambda: mcpsync.Session.connect(
                peer.base + "/mcp", auth=auth, transport="streamable-http", connect_timeout=20
            )
        )
        ended = time.monotonic()
        asked = peer.arrived.get("/authorize")
    assert asked is not None, peer.seen()  # the flow reached the authorization endpoint
    check_bound(ended - asked, error, 1, AuthError)


# ================================================================= to_langchain(timeout=)


@pytest.mark.parametrize("how", ["invoke", "ainvoke", "3 ainvoke at once"])
def test_to_langchain_timeout_bounds_each_tool_call(how: str, more: mcpsync.Session) -> None:
    # the model asked for a tool that never answers; the session's default is 5 s
    pytest.importorskip("langchain_core")
    import asyncio

    from mcpsync.adapters import to_langchain

    (tool,) = [t for t in to_langchain(more, timeout=1) if t.name == "hang"]
    outputs: list[Any] = []

    async def at_once(n: int) -> list[Any]:
        return list(await asyncio.gather(*(tool.ainvoke({}) for _ in range(n))))

    def run() -> None:
        if how == "invoke":
            outputs.append(tool.invoke({}))
        elif how == "ainvoke":
            outputs.append(asyncio.run(tool.ainvoke({})))
        else:
            outputs.extend(asyncio.run(at_once(3)))

    elapsed, error = timed(run)
    assert error is None, error  # handle_tool_error: the model reads the timeout
    assert 1 - EARLY <= elapsed <= 1 + SLACK, f"to_langchain(timeout=1) took {elapsed:.2f} s"
    assert len(outputs) == (3 if how.startswith("3") else 1), outputs
    assert all("RequestTimeout" in str(o) and "1 s" in str(o) for o in outputs), outputs
    usable(more)


# =========================================================== SmokeOptions(close_timeout=)


def test_smoke_close_timeout_bounds_closing_a_server_that_will_not_stop(no_leaks: None) -> None:
    # the server is deaf to stdin EOF and SIGTERM: its own ladder (2 s + 2 s, then SIGKILL)
    # is longer than the bound; run_entry's close returns at close_timeout, the ladder goes on
    import psutil
    from test_timeouts_audit import STALL, wait_gone

    from mcpsync.config import load_config
    from mcpsync.smoke import SmokeOptions, run_entry

    config = load_config(
        {"mcpServers": {"deaf": {"command": sys.executable, "args": [STALL, "--deaf"]}}}
    )
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    started = time.monotonic()
    result = run_entry(config.entries["deaf"], SmokeOptions(close_timeout=1))
    elapsed = time.monotonic() - started
    pids = {p.pid for p in me.children(recursive=True)} - before
    assert result.state == "ready" and result.failure is None, result
    assert result.seconds is not None
    closing = elapsed - result.seconds  # what came after the bring-up: tools/list and close
    assert 1 - EARLY <= closing <= 1 + SLACK, f"close_timeout=1: {closing:.2f} s after bring-up"
    assert pids, "the deaf server was stopped within close_timeout (it cannot be)"
    assert not wait_gone(pids, 10), "the deaf server outlived the background ladder"
