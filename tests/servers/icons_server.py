"""A test peer built with the official MCP Python SDK (mcp 2.3.0) that declares icons
(2025-11-25): on itself, its tools, a resource and a prompt, some of them unsafe.

    python tests/servers/icons_server.py        # stdio

Icons: a real 1x1 PNG as ``data:`` (shown), an ``https:`` link (shown as a link, never
fetched unless asked), a ``javascript:`` one, an ``http:`` one, a ``data:`` icon whose
bytes are not the PNG it claims, and an oversized one (all dropped).
"""

from __future__ import annotations

import base64
import sys

from mcp.server.mcpserver import MCPServer
from mcp_types import Icon

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
DATA_PNG = "data:image/png;base64," + base64.b64encode(PNG_1X1).decode()
HTTPS = "https://icons.example.invalid/tool.png"
FAKE_PNG = "data:image/png;base64," + base64.b64encode(b"<script>alert(1)</script>").decode()
HUGE = "data:image/png;base64," + base64.b64encode(PNG_1X1 + b"\0" * 200_000).decode()


def build() -> MCPServer:
    mcp = MCPServer(
        "icons-test-server",
        version="1.0.0",
        icons=[Icon(src=DATA_PNG, mimeType="image/png", sizes=["1x1"])],
    )

    @mcp.tool(
        description="Has a data: icon.",
        icons=[Icon(src=DATA_PNG, mimeType="image/png", sizes=["16x16"])],
    )
    def painted(x: str = "") -> str:
        return x

    @mcp.tool(description="Has only an https: icon.", icons=[Icon(src=HTTPS, mimeType="image/png")])
    def linked() -> str:
        return "ok"

    @mcp.tool(
        description="Has only unsafe icons.",
        icons=[
            Icon(src="javascript:alert(1)"),
            Icon(src="http://plain.example/i.png"),
            Icon(src=FAKE_PNG),
            Icon(src=HUGE),
        ],
    )
    def hostile() -> str:
        return "ok"

    @mcp.tool(description="No icon.")
    def plain() -> str:
        return "ok"

    @mcp.resource(
        "icons://readme",
        description="A resource with an icon.",
        icons=[Icon(src=DATA_PNG, mimeType="image/png")],
    )
    def readme() -> str:
        return "hello"

    @mcp.prompt(description="A prompt with an https icon.", icons=[Icon(src=HTTPS)])
    def greet(name: str) -> str:
        return f"Hello {name}"

    return mcp


if __name__ == "__main__":
    if sys.argv[1:] not in ([], ["stdio"]):
        sys.exit("usage: icons_server.py [stdio]")
    build().run("stdio")
