"""A 2026-07-28 test peer built with the official MCP Python SDK (mcp 2.3.0): input via MRTR.

Owns: the SDK server mcpsync's modern-era tests talk to. The SDK serves both eras; this
one's tools ask for client input the modern way (``Resolve(...)`` resolvers, which the
SDK turns into ``input_required`` results at 2026-07-28) and announce changes on
``subscriptions/listen`` (``ctx.notify_*``), which the handshake-era peer in
``sdk_server.py`` cannot.

    python tests/servers/modern_sdk_server.py stdio
    python tests/servers/modern_sdk_server.py http --port N [--json]

Once ready it prints ``modern_sdk_server ready: <url or stdio>`` on stderr.

Tools (named and shaped like the demo server's where they overlap): ``echo``, ``add``
(structured), ``long_running`` (progress), ``elicit`` and ``ask_name`` (elicitation),
``ask_twice`` (two dependent elicitations = two rounds), ``sample`` (sampling),
``list_roots`` (roots), ``log`` (notifications/message at the request's
log level), ``fail`` (isError), ``touch_resource`` (resources/updated), ``add_tool``
(registers a tool, then tools/list_changed), ``regional`` (a parameter mirrored into
the ``Mcp-Param-Region`` header on HTTP). Resources ``demo://readme`` and template
``demo://item/{id}``; prompt ``greet``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Annotated

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel, Field
from sdk_server import listen, serve_http  # same folder: run as a script or via servers.

__all__ = ["build_server", "main", "READY"]

READY = "modern_sdk_server ready"

warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is deprecated at 2026-07-28


class NameForm(BaseModel):
    name: str = Field(description="Your name")


class ColourForm(BaseModel):
    colour: str = Field(description="Your favourite colour")


class AddResult(BaseModel):
    sum: float


def ask_for_name() -> Elicit[NameForm]:
    return Elicit("What is your name?", NameForm)


def ask_for_colour(name: Annotated[NameForm, Resolve(ask_for_name)]) -> Elicit[ColourForm]:
    return Elicit(f"{name.name}, what is your favourite colour?", ColourForm)


def ask_with_message(message: str) -> Elicit[NameForm]:
    return Elicit(message, NameForm)


def sample_prompt(prompt: str) -> Sample:
    return Sample(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=50,
    )


def fetch_roots() -> ListRoots:
    return ListRoots()


def build_server() -> MCPServer:
    """The modern SDK server with every feature registered."""
    mcp = MCPServer(
        "mcpsync-modern-sdk-server",
        version="2.0.0",
        instructions="Official-SDK 2026-07-28 test peer for mcpsync.",
    )

    @mcp.tool(description="Echo the message back.")
    def echo(message: str) -> str:
        return message

    @mcp.tool(description="Add two numbers (structured output).")
    def add(a: float, b: float) -> AddResult:
        return AddResult(sum=a + b)

    @mcp.tool(description="Run `steps` steps over `duration` seconds, reporting progress.")
    async def long_running(ctx: Context, duration: float = 1.0, steps: int = 5) -> str:
        for step in range(1, steps + 1):
            await anyio.sleep(duration / steps)
            await ctx.report_progress(step, steps, f"step {step}/{steps}")
        return f"long_running done: {steps} steps"

    @mcp.tool(description="Greet the user by the name they give (elicitation).")
    def ask_name(name: Annotated[NameForm, Resolve(ask_for_name)]) -> str:
        return f"hello {name.name}"

    @mcp.tool(description="Ask for a name, then for a colour (two rounds).")
    def ask_twice(
        name: Annotated[NameForm, Resolve(ask_for_name)],
        colour: Annotated[ColourForm, Resolve(ask_for_colour)],
    ) -> str:
        return f"{name.name} likes {colour.colour}"

    @mcp.tool(description="Ask the user for their name with `message` (elicitation).")
    def elicit(message: str, answer: Annotated[NameForm, Resolve(ask_with_message)]) -> str:
        return f"accept: {answer.name}"

    @mcp.tool(description="Ask the client's LLM about `prompt` (sampling).")
    def sample(
        prompt: str, reply: Annotated[types.CreateMessageResult, Resolve(sample_prompt)]
    ) -> str:
        content = reply.content
        return content.text if isinstance(content, types.TextContent) else str(content)

    @mcp.tool(description="The client's roots (roots/list).")
    def list_roots(roots: Annotated[types.ListRootsResult, Resolve(fetch_roots)]) -> str:
        return ", ".join(str(root.uri) for root in roots.roots)

    @mcp.tool(description="Send a notifications/message at `level`.")
    async def log(level: types.LoggingLevel, message: str, ctx: Context) -> str:
        await ctx.log(level, message, logger_name="sdk")
        return f"logged at {level}"

    @mcp.tool(description="Always fails (isError: true).")
    def fail() -> str:
        raise ToolError("this tool always fails")

    @mcp.tool(description="Announce that a resource changed (subscriptions/listen).")
    async def touch_resource(uri: str, ctx: Context) -> str:
        await ctx.notify_resource_updated(uri)
        return f"touched {uri}"

    @mcp.tool(description="Register a tool called `name`, then announce the list change.")
    async def add_tool(name: str, ctx: Context) -> str:
        def extra() -> str:
            return f"I am {name}"

        mcp.add_tool(extra, name=name, description="added at run time")
        await ctx.notify_tools_changed()
        return f"added {name}"

    @mcp.tool(description="Echo the region (mirrored into the Mcp-Param-Region header on HTTP).")
    def regional(
        region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], query: str
    ) -> str:
        return f"{region}: {query}"

    @mcp.resource("demo://readme", name="readme", mime_type="text/markdown")
    def readme() -> str:
        return "# modern SDK test server\n"

    @mcp.resource("demo://item/{id}", name="item", mime_type="text/plain")
    def item(id: str) -> str:
        return f"item {id}"

    @mcp.prompt(description="Greet someone by name.")
    def greet(name: str) -> str:
        return f"Please write a greeting for {name}."

    return mcp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="modern_sdk_server.py", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    http = sub.add_parser("http", help="Streamable HTTP at /mcp")
    http.add_argument("--port", type=int, required=True)
    http.add_argument("--json", action="store_true", help="answer POSTs with JSON instead of SSE")
    args = parser.parse_args(argv)

    mcp = build_server()
    if args.transport == "stdio":
        print(f"{READY}: stdio", file=sys.stderr, flush=True)
        mcp.run("stdio")
        return 0
    sock = listen(args.port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    serve_http(
        mcp.streamable_http_app(json_response=args.json, stateless_http=True), sock, url, READY
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
