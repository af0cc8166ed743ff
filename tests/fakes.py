"""A scripted MCP server on the far end of an in-memory pair, for edge-case tests.

``FakeServer`` answers ``initialize`` and whatever handlers a test registers; it records
every message it receives and lets the test send notifications, requests and raw
messages (including wrong ones) to the client.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from mcpsync.transports.memory import MemoryTransport, memory_pair

Handler = Callable[[dict[str, Any]], Any]


class FakeServer:
    def __init__(
        self,
        *,
        version: str = "2025-11-25",
        capabilities: dict[str, Any] | None = None,
        handlers: dict[str, Handler] | None = None,
    ) -> None:
        self.client_end, self.end = memory_pair("fake")
        self.version = version
        self.capabilities = {"tools": {}} if capabilities is None else capabilities
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self.received: queue.Queue[dict[str, Any]] = queue.Queue()
        self.log: list[dict[str, Any]] = []
        self._responses: dict[Any, queue.Queue[dict[str, Any]]] = {}
        self._next_id = 1000
        #: set once the client's end closed and every message before that was handled
        #: (wait on it before reading ``log`` for what the client sent while closing)
        self.ended = threading.Event()
        self.end.start(self._on_message, lambda error: self.ended.set())

    @property
    def transport(self) -> MemoryTransport:
        return self.client_end

    def _on_message(self, message: dict[str, Any]) -> None:
        self.log.append(message)
        if "method" not in message:  # a response to one of our requests
            self._responses.setdefault(message.get("id"), queue.Queue()).put(message)
            return
        self.received.put(message)
        if "id" not in message:
            return
        method = message["method"]
        if method == "initialize":
            self.reply(message["id"], {
                "protocolVersion": self.version,
                "capabilities": self.capabilities,
                "serverInfo": {"name": "fake", "version": "1"},
            })  # fmt: skip
            return
        handler = self.handlers.get(method)
        if handler is None:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": {"code": -32601, "message": "nope"},
                }
            )
            return
        threading.Thread(target=self._run, args=(handler, message), daemon=True).start()

    def _run(self, handler: Handler, message: dict[str, Any]) -> None:
        result = handler(message)
        if result is not None:
            self.reply(message["id"], result)

    def reply(self, rid: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def send(self, message: dict[str, Any]) -> None:
        self.end.send(message)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 5.0
    ) -> dict[str, Any]:
        """Send a server->client request and wait (bounded) for the client's response."""
        self._next_id += 1
        rid = self._next_id
        box = self._responses.setdefault(rid, queue.Queue())
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return box.get(timeout=timeout)

    def expect(self, method: str, timeout: float = 5.0) -> dict[str, Any]:
        """The next received message with this method (others are skipped)."""
        while True:
            message = self.received.get(timeout=timeout)
            if message.get("method") == method:
                return message

    def crash(self) -> None:
        """Drop the connection as a dying server would."""
        self.end.abort(ConnectionResetError("fake server crashed"))
