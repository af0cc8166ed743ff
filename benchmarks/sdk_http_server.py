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
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
)

from servers.sdk_server import READY, build_server, listen, serve_http  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)

    mcp = build_server()

    @mcp.tool(description="Return a text of exactly `size_bytes` bytes.")
    def big(size_bytes: int) -> str:
        return "x" * size_bytes

    sock = listen(args.port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    serve_http(mcp.streamable_http_app(json_response=True, stateless_http=True), sock, url, READY)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
