"""A scripted, misbehaving HTTP/1.1 server on 127.0.0.1, in the test process.

Each path has a ``Route``: the status, headers and body to send, and how badly: a delay
before the status line (``head_delay``), the status line and headers sent one byte at a
time with ``head_every`` seconds between bytes, the body sent ``trickle`` bytes at a time with a
pause between pieces (``every``), no Content-Length (``length=False``: the body ends when
the connection closes). Unknown paths get 404 (with ``default`` they get that route).
Every wait is on the server's stop event, so ``stop()`` ends every connection at once and
joins every thread it started.

    with HostileHTTP() as site:
        site.routes["/card"] = Route(body=b"{}", trickle=1, every=0.5)
        ... site.url("/card") ...
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HostileHTTP", "Route"]

_REASONS = {200: "OK", 201: "Created", 302: "Found", 304: "Not Modified", 404: "Not Found"}


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    head_delay: float = 0.0
    head_every: float = 0.0  # > 0: the head sent one byte at a time, this pause between bytes
    trickle: int = 0  # bytes per piece; 0: the whole body at once
    every: float = 0.0  # pause between pieces
    length: bool = True  # send Content-Length (else the body ends at close)
    repeat: int = 1  # the body is sent this many times (a huge body without holding it)


class HostileHTTP:
    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        """``tls``: (certificate file, key file) to serve https."""
        self.routes: dict[str, Route] = {}
        self.default: Route | None = None
        self.seen: list[tuple[float, str, str]] = []  # (monotonic, method, path)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._tls: ssl.SSLContext | None = None
        if tls is not None:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(*tls)
        self.origin = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._accepter = threading.Thread(
            target=self._accept, name="test-hostile-http", daemon=True
        )
        self._accepter.start()

    def url(self, path: str) -> str:
        return self.origin + path

    def paths(self) -> list[str]:
        return [p for _, _, p in self.seen]

    def __enter__(self) -> HostileHTTP:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._accepter.join(5)
        self._listener.close()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in threads:
            t.join(5)
        assert not any(t.is_alive() for t in threads), "a hostile-http connection thread is stuck"

    # -- serving ---------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(
                target=self._serve, args=(conn,), name="test-hostile-conn", daemon=True
            )
            with self._lock:
                self._conns.add(conn)
                self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            if self._tls is not None:  # the handshake here, in the connection's thread
                wrapped = self._tls.wrap_socket(conn, server_side=True)
                with self._lock:  # stop() shuts down the socket that is in use
                    self._conns.discard(conn)
                    self._conns.add(wrapped)
                conn = wrapped
            data = b""
            while b"\r\n\r\n" not in data:
                piece = conn.recv(65536)
                if not piece:
                    return
                data += piece
            head, _, rest = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
            }
            need = int(headers.get("content-length", "0"))
            while len(rest) < need:  # a request body (POST): read it all
                piece = conn.recv(65536)
                if not piece:
                    return
                rest += piece
            self.seen.append((time.monotonic(), method, path))
            route = self.routes.get(path) or self.default or Route(404, b"not here")
            if route.head_delay and self._stop.wait(route.head_delay):
                return
            out = [f"HTTP/1.1 {route.status} {_REASONS.get(route.status, 'X')}"]
            out += [f"{k}: {v}" for k, v in route.headers.items()]
            if route.length:
                out.append(f"Content-Length: {len(route.body) * route.repeat}")
            out.append("Connection: close")
            whole = ("\r\n".join(out) + "\r\n\r\n").encode("latin-1")
            if not route.head_every:
                conn.sendall(whole)
            for i in range(len(whole) if route.head_every else 0):
                conn.sendall(whole[i : i + 1])
                if self._stop.wait(route.head_every):
                    return
            for _ in range(route.repeat):
                if not route.trickle:
                    conn.sendall(route.body)
                    continue
                for i in range(0, len(route.body), route.trickle):
                    conn.sendall(route.body[i : i + route.trickle])
                    if self._stop.wait(route.every):
                        return
        except OSError:
            pass  # the client hung up (as it should, once it gives up)
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()
