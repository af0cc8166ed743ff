"""The official-SDK test server (``sdk_server.py``, mcp 2.3.0) with a ``nap`` tool that tells
a test what became of each call: for the submit tests (futures over every transport and era).

    python tests/servers/submit_sdk_server.py --witness PORT stdio
    python tests/servers/submit_sdk_server.py --witness PORT http --port 0 [--json]
    python tests/servers/submit_sdk_server.py --witness PORT sse --port 0

``nap(seconds, tag)`` sleeps; it sends one line to the test's witness socket
(127.0.0.1:PORT) when it starts (``started <tag>``), when it ends (``done <tag>``) and when
the SDK cancels it (``cancelled <tag>``: ``notifications/cancelled``, or on the 2026-07-28
HTTP wire a closed response stream). Everything else is ``sdk_server.py``'s, which serves
both eras (the 2026-07-28 wire by default, the initialize handshake when asked for it).
Once ready it prints ``sdk_server ready: <url or stdio>`` on stderr.
"""

from __future__ import annotations

import argparse
import socket
import sys

import anyio
from sdk_server import READY, build_server, listen, serve_http  # same folder

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="submit_sdk_server.py")
    parser.add_argument("--witness", type=int, required=True, help="the test's TCP port")
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    http = sub.add_parser("http")
    http.add_argument("--port", type=int, required=True)
    http.add_argument("--json", action="store_true", help="answer POSTs with JSON, not SSE")
    sse = sub.add_parser("sse")
    sse.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    def tell(line: str) -> None:
        with socket.create_connection(("127.0.0.1", args.witness), timeout=5) as conn:
            conn.sendall(line.encode() + b"\n")

    mcp = build_server()

    @mcp.tool(description="Sleep `seconds`; tell the test's witness how the call went.")
    async def nap(seconds: float, tag: str) -> str:
        tell(f"started {tag}")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            tell(f"cancelled {tag}")
            raise
        tell(f"done {tag}")
        return f"slept {seconds:g} s"

    if args.transport == "stdio":
        print(f"{READY}: stdio", file=sys.stderr, flush=True)
        mcp.run("stdio")
        return 0
    sock = listen(args.port)
    port = sock.getsockname()[1]
    if args.transport == "http":
        app = mcp.streamable_http_app(json_response=args.json)
        serve_http(app, sock, f"http://127.0.0.1:{port}/mcp")
    else:
        serve_http(mcp.sse_app(), sock, f"http://127.0.0.1:{port}/sse")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
