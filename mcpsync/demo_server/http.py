"""The demo server over Streamable HTTP, optionally behind the demo authorization server.

Owns: serving :class:`~mcpsync.demo_server.DemoServer` over HTTP with the standard library
(one DemoServer per MCP session, ``Mcp-Session-Id``; every POSTed request answered with an
SSE stream, so its progress and log notifications arrive before its response; server ->
client requests ride the same stream and come back as POSTs; ``DELETE`` ends a session;
``GET`` answers 405), the ``auth=True`` mode (bearer tokens from
:class:`~mcpsync.demo_server.auth.DemoAuthorizationServer` on the same origin, ``401`` with
``resource_metadata``, RFC 9728 protected-resource metadata), :class:`DemoHTTPServer`
(a context manager for notebooks and tests) and the command line, with ``--detach`` for
shell examples::

    python -m mcpsync.demo_server.http --port 8765                 # serve until Ctrl-C
    pid=$(python -m mcpsync.demo_server.http --port 8765 --detach) # in the background; kill $pid

Listens on 127.0.0.1 by default. A demo: sessions and tokens live in memory.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from . import Call, DemoServer, ToolSpec
from .auth import PATHS as AUTH_PATHS
from .auth import DemoAuthorizationServer

__all__ = ["DemoHTTPServer", "main"]

_END = object()  # ends a reply stream without a response (the request was cancelled)
_MAX_BODY = 8 * 1024 * 1024
_PRM = "/.well-known/oauth-protected-resource"


class _Quiet(io.TextIOBase):
    def write(self, text: str) -> int:
        return len(text)


class _SessionServer(DemoServer):
    """A DemoServer whose messages go to the reply stream of the request they belong to."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(stdin=io.BytesIO(), stdout=io.BytesIO(), **kwargs)
        self._routes: dict[Any, queue.Queue[Any]] = {}
        self._routes_lock = threading.Lock()
        self._local = threading.local()

    def send(self, message: dict[str, Any]) -> None:
        is_response = "method" not in message and "id" in message
        key = message.get("id") if is_response else getattr(self._local, "rid", None)
        with self._routes_lock:
            stream = self._routes.get(key)
        if stream is not None:
            stream.put(message)
        elif self.verbose:
            self.log(f"dropped {message.get('method') or 'a response'}: no open stream")

    def _run_threaded(self, call: Call, spec: ToolSpec, arguments: dict[str, Any]) -> None:
        self._local.rid = call.id  # the tool's notifications belong to its request
        super()._run_threaded(call, spec, arguments)

    def _on_notification(self, method: Any, params: Any) -> None:
        super()._on_notification(method, params)
        if method == "notifications/cancelled" and isinstance(params, dict):
            with self._routes_lock:
                stream = self._routes.get(params.get("requestId"))
            if stream is not None:
                stream.put(_END)

    def open_request(self, message: dict[str, Any]) -> queue.Queue[Any]:
        """Dispatch a request; its reply stream (notifications, then the response)."""
        rid = message["id"]
        stream: queue.Queue[Any] = queue.Queue()
        with self._routes_lock:
            self._routes[rid] = stream
        self._local.rid = rid
        try:
            self._dispatch(message)
        finally:
            self._local.rid = None
        return stream

    def close_request(self, rid: Any) -> None:
        with self._routes_lock:
            self._routes.pop(rid, None)

    def shutdown(self, timeout: float = 2.0) -> None:
        with self._routes_lock:
            streams = list(self._routes.values())
        for stream in streams:
            stream.put(_END)
        super().shutdown(timeout)


class _ThreadingServer(ThreadingHTTPServer):
    """A thread per connection, and a listen backlog for many clients at once: with the
    standard library's 5, 64 clients connecting together on Linux saw 25 of 320 requests
    reset (ConnectionResetError), as a burst of 32 token-store workers did in CI."""

    daemon_threads = True
    request_queue_size = 128


class DemoHTTPServer:
    """The demo MCP server at ``url`` (``http://127.0.0.1:<port>/mcp``), on a named thread.

    ``auth=True``: every MCP request needs a bearer token from :attr:`auth_server`
    (issuer: this server's origin); ``clients`` pre-registers confidential clients for
    ``client_credentials``. :attr:`requests` records each MCP request (method, whether a
    token came, status; never the token). ``stop()`` (or leaving the ``with``) closes every
    session and the socket; it is idempotent.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        auth: bool = False,
        clients: dict[str, str] | None = None,
        page_size: int = 0,
        token_seconds: float = 3600.0,
        verbose: bool = False,
    ) -> None:
        self.verbose = verbose
        self.page_size = page_size
        self.sessions: dict[str, _SessionServer] = {}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._httpd = _ThreadingServer((host, port), _handler_for(self))
        self.port: int = self._httpd.server_address[1]
        self.origin = f"http://{host}:{self.port}"
        self.url = f"{self.origin}/mcp"
        self.auth_server = (
            DemoAuthorizationServer(self.origin, clients=clients, token_seconds=token_seconds)
            if auth
            else None
        )
        self._thread: threading.Thread | None = None
        self._stopped = False

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return f"<DemoHTTPServer {self.url}{' (auth)' if self.auth_server else ''} ({state})>"

    @property
    def stopped(self) -> bool:
        return self._stopped

    def start(self) -> DemoHTTPServer:
        if self._thread is None and not self._stopped:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.2},
                name=f"mcpsync-demo-http[{self.port}]",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout)
        self._httpd.server_close()
        with self._lock:
            sessions, self.sessions = list(self.sessions.values()), {}
        for server in sessions:
            server.shutdown()

    close = stop

    def __enter__(self) -> DemoHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def new_session_server(self) -> _SessionServer:
        err = sys.stderr if self.verbose else _Quiet()
        return _SessionServer(page_size=self.page_size, stderr=err, verbose=self.verbose)

    def resource_metadata(self) -> dict[str, Any]:
        return {
            "resource": self.url,
            "authorization_servers": [self.origin],
            "scopes_supported": ["mcp"],
            "bearer_methods_supported": ["header"],
        }


def _handler_for(app: DemoHTTPServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "mcpsync-demo-http"

        def log_message(self, format: str, *args: Any) -> None:
            if app.verbose:
                super().log_message(format, *args)

        # -- plumbing -------------------------------------------------------------------
        def _reply(self, status: int, body: bytes = b"", **headers: str) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, value: Any, **headers: str) -> None:
            data = json.dumps(value).encode()
            self._reply(status, data, Content_Type="application/json", **headers)

        def _body(self) -> bytes | None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY:
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
                return None
            return self.rfile.read(length) if length > 0 else b""

        def _route(self, method: str) -> None:
            parts = urlsplit(self.path)
            path = parts.path.rstrip("/") or "/"
            auth = app.auth_server
            if path == "/mcp":
                return self._mcp(method)
            if auth is not None and path in AUTH_PATHS:
                body = self._body() if method == "POST" else b""
                if body is None:
                    return None
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, extra, data = auth.handle(method, path, parts.query, headers, body)
                return self._reply(status, data, **extra)
            if auth is not None and path in (_PRM, _PRM + "/mcp") and method == "GET":
                return self._json(200, app.resource_metadata())
            return self._reply(HTTPStatus.NOT_FOUND)

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_DELETE(self) -> None:
            self._route("DELETE")

        # -- MCP ------------------------------------------------------------------------
        def _authorized(self) -> bool:
            auth = app.auth_server
            if auth is None:
                return True
            header = self.headers.get("Authorization", "")
            token = header[7:].strip() if header.lower().startswith("bearer ") else ""
            if token and auth.check(token, app.url):
                return True
            challenge = f'Bearer resource_metadata="{app.origin}{_PRM}/mcp", scope="mcp"'
            if token:
                challenge += ', error="invalid_token"'
            self._json(401, {"error": "unauthorized"}, WWW_Authenticate=challenge)
            return False

        def _record(self, method: Any, status: int) -> None:
            token = self.headers.get("Authorization", "").lower().startswith("bearer ")
            with app._lock:
                app.requests.append({"method": method, "token": token, "status": status})

        def _mcp(self, verb: str) -> None:
            origin = self.headers.get("Origin")
            if origin and urlsplit(origin).hostname not in ("127.0.0.1", "localhost", "::1"):
                self._record(verb, 403)  # a web page elsewhere (DNS rebinding): refused
                return self._json(403, {"error": "origin not allowed"})
            sid = self.headers.get("Mcp-Session-Id")
            body = self._body() if verb == "POST" else b""
            if body is None:
                return
            try:
                message = json.loads(body) if verb == "POST" else None
            except ValueError:
                message = None
            method = message.get("method") if isinstance(message, dict) else None
            if not self._authorized():
                return self._record(method, 401)
            if verb == "GET":
                self._record("GET", 405)
                return self._reply(HTTPStatus.METHOD_NOT_ALLOWED, Allow="POST, DELETE")
            if verb == "DELETE":
                with app._lock:
                    server = app.sessions.pop(sid or "", None)
                if server is not None:
                    server.shutdown()
                self._record("DELETE", 200 if server else 404)
                return self._reply(200 if server else 404)
            if not isinstance(message, dict) or not isinstance(message.get("id", 0), (str, int)):
                self._record(method, 400)
                return self._json(400, {"error": "one JSON-RPC message per POST"})
            with app._lock:
                server = app.sessions.get(sid) if sid else None
            if sid and server is None:
                self._record(method, 404)
                return self._json(404, {"error": "unknown or ended session"})
            if method is None or "id" not in message:  # a notification or a response
                if server is not None:
                    server._dispatch(message)
                self._record(method or "response", 202)
                return self._reply(HTTPStatus.ACCEPTED)
            new_sid = None
            throwaway = False
            if server is None:
                server = app.new_session_server()
                if method == "initialize":
                    new_sid = secrets.token_hex(16)
                    with app._lock:
                        app.sessions[new_sid] = server
                else:  # outside a session (an era probe): answered by a fresh server
                    throwaway = True
            self._record(method, 200)
            self._stream(server, message, new_sid, throwaway)

        def _stream(
            self, server: _SessionServer, message: dict[str, Any], sid: str | None, once: bool
        ) -> None:
            rid = message["id"]
            replies = server.open_request(message)
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                if sid is not None:
                    self.send_header("Mcp-Session-Id", sid)
                self.end_headers()
                self.close_connection = True
                while not app.stopped:
                    try:
                        item = replies.get(timeout=0.5)
                    except queue.Empty:
                        continue
                    if item is _END:
                        break
                    self.wfile.write(
                        b"event: message\ndata: " + json.dumps(item).encode() + b"\n\n"
                    )
                    self.wfile.flush()
                    if "method" not in item and item.get("id") == rid:
                        break
            except OSError:
                pass  # the client went away
            finally:
                server.close_request(rid)
                if once:
                    server.shutdown()

    return Handler


def _detach(argv: list[str]) -> int:
    """Start this server in its own session; print its pid once it listens."""
    child = [sys.executable, "-m", "mcpsync.demo_server.http", *argv, "--ready-line"]
    proc = subprocess.Popen(
        child,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    out = proc.stdout
    threading.Thread(target=lambda: lines.put(out.readline()), daemon=True).start()
    try:
        ready = lines.get(timeout=30)
    except queue.Empty:
        ready = ""
    out.close()
    if not ready.startswith("ready "):
        proc.kill()
        print("demo_http: the server did not start (is the port free?)", file=sys.stderr)
        return 1
    print(proc.pid)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpsync.demo_server.http",
        description="The mcpsync demo server over Streamable HTTP (optionally behind OAuth).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any)")
    parser.add_argument("--auth", action="store_true", help="require OAuth bearer tokens")
    parser.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="ID:SECRET",
        help="pre-register a client_credentials client (with --auth; repeatable)",
    )
    parser.add_argument("--page-size", type=int, default=0, help="items per list page")
    parser.add_argument(
        "--detach", action="store_true", help="run in the background; print its pid and return"
    )
    parser.add_argument("--ready-line", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = parser.parse_args(argv)
    if args.detach:
        return _detach([a for a in (argv if argv is not None else sys.argv[1:]) if a != "--detach"])
    clients = dict(c.partition(":")[::2] for c in args.client)
    try:
        server = DemoHTTPServer(
            args.host, args.port, auth=args.auth, clients=clients, page_size=args.page_size,
            verbose=args.verbose,
        )  # fmt: skip
    except OSError as exc:
        print(f"demo_http: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    with server:
        if args.ready_line:  # the --detach parent reads this line, then stdout goes away
            print(f"ready {server.url}", flush=True)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        else:
            print(f"serving {server.url}{' (OAuth: ' + server.origin + ')' if args.auth else ''}")
            print("Ctrl-C to stop", flush=True)
        stop = threading.Event()
        try:
            while not stop.wait(3600):
                pass
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
