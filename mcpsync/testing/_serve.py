"""In-process servers: an ``mcp`` SDK or ``fastmcp`` server object behind a blocking Session.

Owns: :func:`serve`, which runs the server's async loop (``Server.run(read, write,
options)``) on a private event-loop thread and connects a :class:`~mcpsync.Session` to it
over the in-memory transport (:mod:`mcpsync.transports.memory`): no subprocess, no port.
The adapter between the two sides: messages from our memory transport are validated
into the SDK's ``SessionMessage`` objects and fed to the server's anyio read stream;
what the server writes is dumped back to JSON-RPC dicts and sent on our transport.

Closing the session (``session.close()`` or leaving ``with``) ends the server's read
stream, waits (bounded) for the server loop to finish, and joins the loop thread.

Servers accepted:

- ``mcp.server.mcpserver.MCPServer`` (the SDK's high-level server, decorators)
- ``mcp.server.lowlevel.Server`` (the SDK's low-level server, handlers by hand)
- ``fastmcp.FastMCP`` (its lifespan is entered around the run)

Example (the SDK's high-level server)::

    from mcp.server.mcpserver import MCPServer
    from mcpsync.testing import serve

    app = MCPServer("calc")

    @app.tool()
    def add(a: int, b: int) -> int:
        return a + b

    with serve(app) as session:
        assert session.call_tool("add", {"a": 1, "b": 2}).structured_content == {"result": 3}

Example (fastmcp)::

    from fastmcp import FastMCP
    from mcpsync.testing import serve

    app = FastMCP("calc")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    with serve(app) as session:
        assert session.call_tool("add", {"a": 1, "b": 2}).content[0].text == "3"
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..errors import ConfigError, TransportError
from ..transports.memory import MemoryTransport

__all__ = ["serve"]

log = logging.getLogger("mcpsync.testing")

_STOP_GRACE = 5.0  # seconds for the server loop to finish after its read stream ended
_ABORT_WAIT = 1.0  # seconds for a cancelled server loop to finish (a failed start)


def _resolve(server: Any) -> tuple[Any, Callable[[], Any]]:
    """(the low-level ``Server`` to run, an async context manager factory for the lifespan)."""

    @contextlib.asynccontextmanager
    async def nothing() -> AsyncIterator[None]:
        yield

    fastmcp_mod = sys.modules.get("fastmcp.server.server")
    if fastmcp_mod is not None and isinstance(server, fastmcp_mod.FastMCP):
        return server._mcp_server, server._lifespan_manager
    mcpserver_mod = sys.modules.get("mcp.server.mcpserver.server")
    if mcpserver_mod is not None and isinstance(server, mcpserver_mod.MCPServer):
        return server._lowlevel_server, nothing
    lowlevel_mod = sys.modules.get("mcp.server.lowlevel.server")
    if lowlevel_mod is not None and isinstance(server, lowlevel_mod.Server):
        return server, nothing
    raise ConfigError(
        f"serve() takes an mcp MCPServer, an mcp low-level Server or a fastmcp FastMCP, "
        f"not {type(server).__name__}"
    )


class _LoopServer:
    """The server's event loop on its own thread, wired to the server end of a memory pair."""

    def __init__(self, server: Any, transport: MemoryTransport, name: str) -> None:
        self.lowlevel, self.lifespan = _resolve(server)
        self.transport = transport
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._inbox: Any = None  # the anyio send side feeding the server's read stream
        self._main: asyncio.Task[None] | None = None
        self.thread = threading.Thread(target=self._run, name=f"mcpsync-serve[{name}]", daemon=True)

    def start(self, timeout: float) -> None:
        self.thread.start()
        if not self.ready.wait(timeout):
            self.abort()
            raise TransportError(f"the in-process server did not start within {timeout:g} s")
        if self.error is not None:
            self.abort()
            raise TransportError(f"the in-process server failed to start: {self.error}")

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self._main = self.loop.create_task(self._serve())
            self.loop.run_until_complete(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported through the session
            if not isinstance(exc, asyncio.CancelledError):
                log.warning("in-process server ended with %s: %s", type(exc).__name__, exc)
            self.error = self.error or exc
        finally:
            self.ready.set()
            self.transport.close()  # the client sees the stream end if the server died
            try:
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    async def _serve(self) -> None:
        import anyio
        from mcp.shared.message import SessionMessage

        to_server, server_reads = anyio.create_memory_object_stream[Any](math.inf)
        server_writes, from_server = anyio.create_memory_object_stream[Any](math.inf)
        self._inbox = to_server
        self.transport.start(self._on_message, self._on_close)
        self.ready.set()

        async def forward() -> None:
            async with from_server:
                async for item in from_server:
                    if not isinstance(item, SessionMessage):
                        continue
                    message = item.message.model_dump(
                        mode="json", by_alias=True, exclude_unset=True
                    )
                    try:
                        self.transport.send(message)
                    except TransportError:
                        return  # the client went away; the read side ends too

        async with self.lifespan(), anyio.create_task_group() as tg:
            tg.start_soon(forward)
            async with server_reads, server_writes:
                await self.lowlevel.run(
                    server_reads,
                    server_writes,
                    self.lowlevel.create_initialization_options(),
                    raise_exceptions=False,
                )
            tg.cancel_scope.cancel()

    # called on the memory transport's reader thread
    def _on_message(self, message: dict[str, Any]) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import jsonrpc_message_adapter
        from pydantic import ValidationError

        item: Any
        try:
            item = SessionMessage(jsonrpc_message_adapter.validate_python(message, by_name=False))
        except ValidationError as exc:
            item = exc
        self._call_soon(self._push, item)

    def _on_close(self, error: BaseException | None) -> None:
        self._call_soon(self._end)

    def _call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop already closed
            pass

    def _push(self, item: Any) -> None:
        import anyio

        if self._inbox is not None:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._inbox.send_nowait(item)

    def _end(self) -> None:
        if self._inbox is not None:
            self._inbox.close()  # the server reads end-of-stream and returns from run()

    def stop(self) -> None:
        """End the server's read stream, wait for its loop (bounded), join the thread."""
        self._call_soon(self._end)
        if threading.current_thread() is self.thread:
            return
        self.thread.join(_STOP_GRACE)
        if self.thread.is_alive() and self._main is not None:
            log.warning("in-process server did not stop within %.0fs; cancelling it", _STOP_GRACE)
            self._call_soon(self._main.cancel)
            self.thread.join(_STOP_GRACE)

    def abort(self) -> None:
        """A failed start or bring-up (its caller has the error already): end the server at
        once, no grace (its read stream ended and its loop cancelled), the thread joined
        within ``_ABORT_WAIT``. A server that never read its stream (a lifespan that never
        ends) would otherwise hold the caller the whole ``_STOP_GRACE``."""
        self._call_soon(self._end)
        main = self._main
        if main is not None:
            self._call_soon(main.cancel)
        if threading.current_thread() is self.thread:
            return
        self.thread.join(_ABORT_WAIT)
        if self.thread.is_alive():
            log.warning("in-process server did not stop within %.0fs of its cancel", _ABORT_WAIT)


class _ClientEnd(MemoryTransport):
    """The client end: closing it also stops the in-process server and its thread."""

    runner: _LoopServer | None = None

    def describe(self) -> str:
        return f"memory: in-process server {self.name.rsplit('/', 1)[0]!r}"

    def close(self) -> None:
        super().close()
        if self.runner is not None:
            self.runner.stop()


def serve(
    server: Any,
    *,
    name: str | None = None,
    start_timeout: float = 10.0,
    **connect_kwargs: Any,
) -> Any:
    """Run ``server`` in this process and return a connected :class:`~mcpsync.Session`.

    ``server``: an ``mcp`` ``MCPServer`` or low-level ``Server``, or a ``fastmcp``
    ``FastMCP``. The session is also a context manager; closing it stops the server
    and its event-loop thread. ``connect_kwargs`` go to ``Session.connect`` (``timeout``,
    ``on_log``, ``sampling_handler``, ``era`` ...). See the module docstring for examples.
    ``start_timeout`` bounds the start of the server's event-loop thread; a server that
    starts and never answers (a lifespan that never ends) is bounded by ``connect_timeout``
    (default 30 s), the failed bring-up's unwinding included.
    """
    from ..session import Session

    label = name or str(getattr(server, "name", None) or type(server).__name__)
    client = _ClientEnd(f"{label}/client")
    server_end = MemoryTransport(f"{label}/server")
    client.peer, server_end.peer = server_end, client
    runner = _LoopServer(server, server_end, label)
    client.runner = runner
    runner.start(start_timeout)
    try:
        return Session.connect(client, name=label, **connect_kwargs)
    except BaseException:
        runner.abort()  # within connect's bound: no stop grace for a failed bring-up
        client.close()
        raise
