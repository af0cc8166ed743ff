"""The official-SDK test server plus a ``big`` tool, over Streamable HTTP (stateless, JSON).

Owns: the ``--http-server sdk`` peer of ``benchmarks/bench.py``. It builds the server of
``tests/servers/sdk_server.py`` (``build_server()``), adds ``big`` {size_bytes} (the demo
server's tool, which that server lacks) and serves it with uvicorn at ``/mcp`` in stateless
JSON mode. Once listening it prints ``sdk_server ready: <url>`` on stderr.

Run: ``python benchmarks/sdk_http_server.py [--port N]``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

import anyio

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
)

from servers.sdk_server import READY, build_server  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)

    mcp = build_server()

    @mcp.tool(description="Return a text of exactly `size_bytes` bytes.")
    def big(size_bytes: int) -> str:
        return "x" * size_bytes

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this on Linux; without it a keep-alive request waits ~40 ms
    # (Nagle on the server's reply vs. the client's delayed ACK).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    app = mcp.streamable_http_app(json_response=True, stateless_http=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(30):
                while not server.started:  # uvicorn has no startup event
                    await anyio.sleep(0.01)
            print(f"{READY}: {url}", file=sys.stderr, flush=True)

    anyio.run(run)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
