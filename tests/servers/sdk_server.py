"""A test peer built with the official MCP Python SDK (mcp 2.3.0, MCPServer): a server no one here wrote.

Owns: the SDK server used by mcpsync's tests, over every transport the SDK offers:

    python tests/servers/sdk_server.py stdio
    python tests/servers/sdk_server.py http --port N [--stateless] [--json] [--resumable]
    python tests/servers/sdk_server.py sse --port N

``--port 0`` picks a free port. Once the HTTP server is listening it prints one line on
stderr: ``sdk_server ready: <url>`` (stdio prints ``sdk_server ready: stdio``).

Features: tools ``echo``, ``add`` (structured output), ``long_running`` (progress),
``sample`` (sampling), ``elicit`` (form elicitation), ``list_roots``, ``log``
(notifications/message), ``fail`` (isError), ``lookup_meta`` (the ``_meta`` it got, as
JSON), ``touch_resource`` (resources/updated);
resources ``demo://readme``, ``demo://bytes.bin`` and template ``demo://item/{id}``;
prompt ``greet``; completions for the prompt argument and the template variable;
logging/setLevel and resources/(un)subscribe.
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel, Field

__all__ = ["build_server", "main", "READY"]

READY = "sdk_server ready"
GREET_NAMES = ("Ada", "Alan", "Alice", "Barbara", "Bob", "Carol", "Dave", "Eve", "Grace", "Linus")
ITEM_IDS = tuple(str(i) for i in range(1, 51))

# This peer deliberately exercises the handshake-era features (sampling, roots, logging,
# resources/subscribe) that the SDK marks deprecated for 2026-07-28.
warnings.simplefilter("ignore", MCPDeprecationWarning)


class AddResult(BaseModel):
    sum: float


class NameForm(BaseModel):
    name: str = Field(description="Your name")


def build_server() -> MCPServer:
    """The SDK server with every feature registered."""
    mcp = MCPServer(
        "mcpsync-sdk-test-server",
        version="1.0.0",
        instructions="Official-SDK test peer for mcpsync.",
    )
    subscriptions: set[str] = set()

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

    @mcp.tool(description="Ask the client's LLM via sampling/createMessage.")
    async def sample(prompt: str, ctx: Context) -> str:
        result = await ctx.session.create_message(
            [
                types.SamplingMessage(
                    role="user", content=types.TextContent(type="text", text=prompt)
                )
            ],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
        content = result.content
        return content.text if isinstance(content, types.TextContent) else str(content)

    @mcp.tool(description="Ask the user for their name via elicitation/create (form mode).")
    async def elicit(message: str, ctx: Context) -> str:
        result = await ctx.elicit(message, NameForm)
        if result.action == "accept":
            return f"accept: {result.data.name}"
        return result.action

    @mcp.tool(description="Ask the client for its roots.")
    async def list_roots(ctx: Context) -> str:
        result = await ctx.session.list_roots()
        return ", ".join(str(root.uri) for root in result.roots)

    @mcp.tool(description="Send a notifications/message at `level`.")
    async def log(level: types.LoggingLevel, message: str, ctx: Context) -> str:
        await ctx.log(level, message, logger_name="sdk")
        return f"logged at {level}"

    @mcp.tool(description="The request's params._meta as JSON (trace context: traceparent, ...).")
    def lookup_meta(ctx: Context) -> str:
        params = ctx.request_context.params or {}
        meta = params.get("_meta") or ctx.request_context.meta or {}
        return json.dumps(dict(meta), default=str)

    @mcp.tool(description="Always fails (isError: true).")
    def fail() -> str:
        raise ToolError("this tool always fails")

    @mcp.tool(description="Notify subscribers that a resource changed.")
    async def touch_resource(uri: str, ctx: Context) -> str:
        if uri in subscriptions:
            await ctx.session.send_resource_updated(uri)
            return f"notified subscribers of {uri}"
        return f"no subscribers for {uri}"

    @mcp.resource("demo://readme", name="readme", mime_type="text/markdown")
    def readme() -> str:
        return "# SDK test server\n"

    @mcp.resource("demo://bytes.bin", name="bytes", mime_type="application/octet-stream")
    def blob() -> bytes:
        return bytes(range(256))

    @mcp.resource("demo://item/{id}", name="item", mime_type="text/plain")
    def item(id: str) -> str:
        return f"item {id}"

    @mcp.prompt(description="Greet someone by name.")
    def greet(name: str) -> str:
        return f"Please write a greeting for {name}."

    @mcp.completion()
    async def complete(
        ref: Any, argument: types.CompletionArgument, context: Any
    ) -> types.Completion | None:
        if (
            isinstance(ref, types.PromptReference)
            and ref.name == "greet"
            and argument.name == "name"
        ):
            values = [n for n in GREET_NAMES if n.lower().startswith(argument.value.lower())]
        elif isinstance(ref, types.ResourceTemplateReference) and argument.name == "id":
            values = [i for i in ITEM_IDS if i.startswith(argument.value)]
        else:
            return None
        return types.Completion(values=values, total=len(values), has_more=False)

    lowlevel = mcp._lowlevel_server  # no public hook for these three handshake-era methods

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscriptions.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscriptions.discard(str(params.uri))
        return types.EmptyResult()

    lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler(
        "resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe
    )
    return mcp


class MemoryEventStore(EventStore):
    """Keeps every event in memory so clients can resume a stream with Last-Event-ID."""

    def __init__(self) -> None:
        self._events: list[tuple[str, str, Any]] = []  # (event id, stream id, message)
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(next(self._ids))
        self._events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        index = next((i for i, e in enumerate(self._events) if e[0] == last_event_id), None)
        if index is None:
            return None
        stream_id = self._events[index][1]
        for event_id, sid, message in self._events[index + 1 :]:
            if sid == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


def listen(port: int) -> socket.socket:
    """A 127.0.0.1 listening socket (port 0: a free one) with TCP_NODELAY."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit it on Linux: without it every keep-alive reply after the
    # first waits ~40 ms (Nagle + delayed ACK), since asyncio does not set it on them.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def serve_http(app: Any, sock: socket.socket, url: str, ready: str = READY) -> None:
    """Serve an ASGI app on ``sock`` with uvicorn; print ``<ready>: <url>`` once it accepts."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(30):
                while not server.started:  # uvicorn offers no startup event
                    await anyio.sleep(0.01)
            print(f"{ready}: {url}", file=sys.stderr, flush=True)

    anyio.run(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sdk_server.py", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="transport", required=True)
    sub.add_parser("stdio")
    http = sub.add_parser("http", help="Streamable HTTP at /mcp")
    http.add_argument("--port", type=int, required=True)
    http.add_argument("--stateless", action="store_true", help="no sessions (stateless_http)")
    http.add_argument("--json", action="store_true", help="answer POSTs with JSON instead of SSE")
    http.add_argument(
        "--resumable", action="store_true", help="keep events for Last-Event-ID resumption"
    )
    sse = sub.add_parser("sse", help="legacy HTTP+SSE at /sse (+ /messages/)")
    sse.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    mcp = build_server()
    if args.transport == "stdio":
        print(f"{READY}: stdio", file=sys.stderr, flush=True)
        mcp.run("stdio")
        return 0
    sock = listen(args.port)
    port = sock.getsockname()[1]
    if args.transport == "http":
        app = mcp.streamable_http_app(
            json_response=args.json,
            stateless_http=args.stateless,
            event_store=MemoryEventStore() if args.resumable else None,
        )
        serve_http(app, sock, f"http://127.0.0.1:{port}/mcp")
    else:
        serve_http(mcp.sse_app(), sock, f"http://127.0.0.1:{port}/sse")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
