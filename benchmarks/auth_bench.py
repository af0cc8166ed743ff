"""Sequential ``call_tool`` with mcpsync's own ``OAuth`` vs no auth, against one server, one run.

Owns: the auth row of ``benchmarks/bench.py`` (issue 13, item 6) and its peer. The peer
(``python benchmarks/auth_bench.py --serve``, a subprocess) is a near-zero-cost Streamable
HTTP endpoint in stateless JSON mode (the ``echo`` tool of ``benchmarks/http_server.py``,
same hand-written HTTP/1.1 keep-alive loop) that answers two paths:

- ``POST /open/mcp``: no auth;
- ``POST /mcp``: a ``Bearer`` token the in-process
  :class:`~mcpsync.demo_server.auth.DemoAuthorizationServer` issued (``client_credentials``,
  client ``bench``), else ``401`` with ``WWW-Authenticate: Bearer resource_metadata=...``;
  plus the RFC 9728 / RFC 8414 metadata documents and ``/token``. A ``DPoP Authorization``
  is taken as well, and a token request with a ``DPoP`` proof gets ``token_type`` ``DPoP``;
  the peer does not verify proofs (that would be the server's cost): the DPoP row measures
  what the client pays, a fresh ES256 proof per request.

The client side connects ``mcpsync.Session`` to each path (auth:
``OAuth.client_credentials("bench", ...)``: discovery + token inside the first POST), warms
up, then calls ``echo`` for ``seconds`` per phase, alternating auth / no-auth phases
``rounds`` times; the best rate of each is kept and the ratio printed. Then the same rounds
pinned (client on CPU 0, server on CPU 1, as ``shared_session.py`` pins): on these 2-vCPU
VMs a floating run flips between two regimes (a wake-up of the other CPU per round trip or
not), which moves calls/s by up to 2x between phases; pinned, the ratio is steadier.

    python benchmarks/auth_bench.py            # ~10 s; prints the row
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import http_server  # noqa: E402  (benchmarks/http_server.py: _dispatch, _respond)
import shared_session  # noqa: E402  (benchmarks/shared_session.py: _pin)

__all__ = ["measure", "render", "main"]

CLIENT_ID, CLIENT_SECRET = "bench", "bench-secret"
ECHO_ARGS = {"message": "hello"}
TARGET = ("ratio", 0.8)


class _AuthHandler(socketserver.StreamRequestHandler):
    """One keep-alive HTTP/1.1 connection (the parsing of http_server.MCPHandler, headers kept)."""

    disable_nagle_algorithm = True
    rbufsize = 65536
    server: _Server

    def handle(self) -> None:
        rfile, sock = self.rfile, self.connection
        try:
            while True:
                line = rfile.readline(65537)
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    continue
                method, target, _version = line.decode("latin-1").split()
                headers: dict[str, str] = {}
                while True:
                    h = rfile.readline(65537)
                    if h in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = h.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = rfile.read(length) if length else b""
                self._route(sock, method, target.split("?", 1)[0], headers, body)
        except (ConnectionError, OSError, ValueError):
            return

    def _route(
        self, sock: socket.socket, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> None:
        srv = self.server
        if path in ("/mcp", "/open/mcp") and method == "POST":
            if path == "/mcp":
                scheme, _, token = headers.get("authorization", "").partition(" ")
                token = token if scheme.lower() in ("bearer", "dpop") else ""
                if not token or not srv.auth.check(token, srv.base + "/mcp"):
                    challenge = (
                        f'WWW-Authenticate: Bearer resource_metadata="{srv.base}'
                        '/.well-known/oauth-protected-resource/mcp"\r\n'
                    ).encode()
                    http_server.MCPHandler._respond(sock, 401, b"", close=False, extra=challenge)
                    return
            self._mcp(sock, body)
            return
        if path.startswith("/.well-known/oauth-protected-resource"):
            doc = {"resource": srv.base + "/mcp", "authorization_servers": [srv.base]}
            self._json(sock, 200, doc)
            return
        status, extra, payload = srv.auth.handle(method, path, "", headers, body)
        if path == "/token" and status == 200 and "dpop" in headers:
            payload = json.dumps({**json.loads(payload), "token_type": "DPoP"}).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in extra.items() if k.lower() != "content-type")
        http_server.MCPHandler._respond(sock, status, payload, close=False, extra=head.encode())

    @staticmethod
    def _json(sock: socket.socket, status: int, doc: Any) -> None:
        http_server.MCPHandler._respond(sock, status, json.dumps(doc).encode(), close=False)

    def _mcp(self, sock: socket.socket, body: bytes) -> None:
        message = json.loads(body)
        if "method" not in message or "id" not in message:
            http_server.MCPHandler._respond(sock, 202, b"", close=False)
            return
        result = http_server._dispatch(message)
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        data = json.dumps(reply, separators=(",", ":")).encode()
        http_server.MCPHandler._respond(sock, 200, data, close=False)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    base = ""
    auth: Any = None


def serve() -> int:
    from mcpsync.demo_server.auth import DemoAuthorizationServer

    server = _Server(("127.0.0.1", 0), _AuthHandler)
    server.base = f"http://127.0.0.1:{server.server_address[1]}"
    server.auth = DemoAuthorizationServer(server.base, clients={CLIENT_ID: CLIENT_SECRET})
    thread = threading.Thread(target=server.serve_forever, name="mcpsync-bench-auth[serve]")
    thread.start()
    print(f"listening {server.base}", flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    except KeyboardInterrupt:
        pass
    server.shutdown()
    server.server_close()
    thread.join(timeout=5.0)
    return 0


def _start() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    found: list[str] = []

    def watch() -> None:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.startswith("listening "):
            found.append(line.split()[1])

    watcher = threading.Thread(target=watch, name="mcpsync-bench-auth[ready]", daemon=True)
    watcher.start()
    watcher.join(30)
    if not found:
        proc.kill()
        proc.wait(5)
        raise RuntimeError("the auth benchmark server did not come up within 30 s")
    return proc, found[0]


def _rate(session: Any, seconds: float) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call: this process, all threads; the peer is apart)."""
    count, started, cpu = 0, time.perf_counter(), time.process_time()
    deadline = started + seconds
    while True:
        session.call_tool("echo", ECHO_ARGS)
        count += 1
        if count % 50 == 0 and time.perf_counter() >= deadline:
            return count / (time.perf_counter() - started), (time.process_time() - cpu) / count


def _proof_cost(auth: Any, url: str, count: int = 2000) -> tuple[float, float]:
    """(us per proof, us per signature alone) with the session's own key and token."""
    tok = auth._token
    assert tok is not None and tok.token_type == "DPoP" and tok.dpop_key is not None
    key, data = tok.dpop_key, b"x" * 420  # about a proof's signing input
    started = time.perf_counter()
    for _ in range(count):
        key.proof("POST", url, access_token=tok.access_token)
    proof = (time.perf_counter() - started) / count
    started = time.perf_counter()
    for _ in range(count):
        key._sign(data)
    return proof * 1e6, (time.perf_counter() - started) / count * 1e6


def _can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2


def _rounds(
    sessions: dict[str, Any],
    rounds: int,
    seconds: float,
    rates: dict[str, list[float]],
    cpus: dict[str, list[float]],
) -> None:
    """``rounds`` phases of every session, the order rotating each round."""
    for index in range(rounds):
        order = list(sessions.items())
        turn = index % len(order)
        for name, s in order[turn:] + order[:turn]:
            rate, cpu = _rate(s, seconds)
            rates[name].append(rate)
            cpus[name].append(cpu)


def measure(rounds: int = 3, seconds: float = 1.0, warmup: int = 300) -> dict[str, Any]:
    """Best calls/s with OAuth (client_credentials) and without, phases interleaved."""
    import requests

    import mcpsync
    from mcpsync.auth import OAuth

    proc, base = _start()
    try:
        auth = OAuth.client_credentials(CLIENT_ID, CLIENT_SECRET)
        slow_auth = OAuth.client_credentials(CLIENT_ID, CLIENT_SECRET)
        dpop_auth = OAuth.client_credentials(CLIENT_ID, CLIENT_SECRET, dpop=True)
        eddsa_auth = OAuth.client_credentials(
            CLIENT_ID, CLIENT_SECRET, dpop=True, dpop_algorithm="EdDSA"
        )
        # the same OAuth through requests (a caller's own requests.Session: no fast pool),
        # which is the path every auth= object took before the RequestAuth interface
        with (
            mcpsync.Session.connect(f"{base}/mcp", auth=auth, name="auth") as authed,
            mcpsync.Session.connect(f"{base}/open/mcp", name="open") as plain,
            requests.Session() as http,
            mcpsync.Session.connect(
                f"{base}/mcp", auth=slow_auth, http_session=http, name="auth-requests"
            ) as slow,
            mcpsync.Session.connect(f"{base}/mcp", auth=dpop_auth, name="dpop") as dpop,
            mcpsync.Session.connect(f"{base}/mcp", auth=eddsa_auth, name="eddsa") as eddsa,
        ):
            sessions = {
                "oauth": authed,
                "none": plain,
                "oauth_requests": slow,
                "dpop": dpop,
                "dpop_eddsa": eddsa,
            }
            for s in sessions.values():
                for _ in range(warmup):
                    s.call_tool("echo", ECHO_ARGS)
            rates: dict[str, list[float]] = {name: [] for name in sessions}
            cpus: dict[str, list[float]] = {name: [] for name in sessions}
            _rounds(sessions, rounds, seconds, rates, cpus)
            pinned: dict[str, list[float]] = {name: [] for name in sessions}
            if _can_pin():  # the same again, client on CPU 0 and server on CPU 1
                shared_session._pin(proc.pid, {1})
                shared_session._pin(os.getpid(), {0})
                try:
                    _rounds(sessions, rounds, seconds, pinned, {n: [] for n in sessions})
                finally:
                    shared_session._pin(os.getpid(), set(range(os.cpu_count() or 1)))
            assert auth.authorized and slow_auth.authorized and dpop_auth.authorized
            proof_us = {
                name: _proof_cost(a, f"{base}/mcp")
                for name, a in (("dpop", dpop_auth), ("dpop_eddsa", eddsa_auth))
            }
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    best = {name: max(values) for name, values in rates.items()}
    cpu = {name: min(values) for name, values in cpus.items()}
    return {
        "rates": rates,
        "cpu_per_call": cpu,
        "best": best,
        "ratio": best["oauth"] / best["none"],
        "ratio_requests": best["oauth_requests"] / best["none"],
        "ratio_dpop": best["dpop"] / best["none"],
        "ratio_dpop_eddsa": best["dpop_eddsa"] / best["none"],
        "proof_us": proof_us,
        "pinned": {name: max(v) for name, v in pinned.items() if v},
    }


def render(result: dict[str, Any]) -> str:
    best, ratio, cpu = result["best"], result["ratio"], result["cpu_per_call"]
    verdict = "ok" if ratio >= TARGET[1] else "MISS"
    rows = (
        ("no auth", "none", ""),
        ("OAuth.client_credentials", "oauth", ""),
        ("OAuth through requests", "oauth_requests", "  (the path before RequestAuth)"),
        ("OAuth, DPoP-bound token", "dpop", "  (a fresh ES256 proof per call)"),
        ("OAuth, DPoP-bound (EdDSA)", "dpop_eddsa", "  (a fresh Ed25519 proof per call)"),
    )
    lines = [
        "auth: sequential call_tool echo, benchmarks/auth_bench.py peer (stdlib, stateless JSON)",
        f"  {'':28s} {'calls/s':>9s} {'x none':>7s} {'client CPU/call':>16s} {'x none':>7s}",
    ]
    for label, key, note in rows:
        lines.append(
            f"  {label:28s} {best[key]:9.0f} {best[key] / best['none']:6.2f}x "
            f"{cpu[key] * 1e6:13.0f} us {cpu[key] / cpu['none']:6.2f}x{note}"
        )
    rounds = ", ".join(
        f"{a / b:.2f}x"
        for a, b in zip(result["rates"]["oauth"], result["rates"]["none"], strict=True)
    )
    lines.append(
        f"  OAuth / no auth (calls/s)    {ratio:9.2f}x   target: >= {TARGET[1]}x  {verdict}"
        f"   (round by round: {rounds})"
    )
    dpop_ratio = result["ratio_dpop"]
    dpop_rounds = ", ".join(
        f"{a / b:.2f}x"
        for a, b in zip(result["rates"]["dpop"], result["rates"]["none"], strict=True)
    )
    lines.append(
        f"  DPoP (ES256) / no auth       {dpop_ratio:9.2f}x   target: >= {TARGET[1]}x  "
        f"{'ok' if dpop_ratio >= TARGET[1] else 'MISS'}   (round by round: {dpop_rounds}; "
        f"EdDSA: {result['ratio_dpop_eddsa']:.2f}x)"
    )
    lines.append(
        "  (each proof is signed while the previous request's reply is awaited: the client"
        " stays busy\n   instead of sleeping, so DPoP can beat no auth on calls/s while it"
        " costs more CPU per call)"
    )
    costs = ", ".join(
        f"{alg} {proof:.0f} us/proof ({sign:.0f} us signing)"
        for alg, (proof, sign) in zip(("ES256", "EdDSA"), result["proof_us"].values(), strict=True)
    )
    lines.append(f"  proof cost, same run: {costs}")
    pinned = result.get("pinned") or {}
    if pinned.get("none"):
        shown = ", ".join(
            f"{label} {pinned[key] / pinned['none']:.2f}x"
            for label, key in (("Bearer", "oauth"), ("DPoP ES256", "dpop"), ("EdDSA", "dpop_eddsa"))
        )
        verdict = (
            "ok" if min(pinned["oauth"], pinned["dpop"]) / pinned["none"] >= TARGET[1] else "MISS"
        )
        lines.append(
            f"  pinned (client CPU 0, server CPU 1; {pinned['none']:.0f} calls/s without auth): "
            f"{shown}  target >= {TARGET[1]}x {verdict}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.serve:
        return serve()
    print(render(measure(args.rounds, args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
