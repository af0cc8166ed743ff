"""Server-to-client requests: ``ping``, and the handlers a client declared (sampling,
elicitation, roots), each run on its own bounded ``mcpsync-handler[name]`` thread.

Owns: the handler slots (at most ``max_concurrent`` at once; more are answered "busy"),
the handler threads (for the close join), the requests the server cancelled meanwhile
(no answer is sent for them), and sending the replies. Used by ``mcpsync.rpc.connection``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .. import jsonrpc
from ..errors import MCPSyncError, ServerError
from ..telemetry import Instrument, Served
from ..transports.base import Message

__all__ = ["ServerRequests"]

log = logging.getLogger("mcpsync")


class ServerRequests:
    """Runs the server's requests to this client for one connection."""

    def __init__(
        self,
        name: str,
        handlers: Callable[[], Mapping[str, Callable[[dict[str, Any]], Any]]],
        send: Callable[[Message], None],
        closed: Callable[[], bool],
        max_concurrent: int,
        instrument: Instrument | None = None,
    ) -> None:
        self.name = name
        self._handlers = handlers  # the connection's request_handlers, read at each request
        self._send = send
        self._closed = closed
        self._slots = threading.BoundedSemaphore(max_concurrent)
        #: the session's telemetry: each request is handled inside a SERVER span
        self._instrument = instrument
        #: handler threads still running (joined by the connection's close)
        self.threads: set[threading.Thread] = set()
        #: ids of requests the server cancelled (``notifications/cancelled``)
        self.cancelled: set[Any] = set()

    def on_request(self, message: Message) -> None:
        method = message.get("method")
        rid = message.get("id")
        handler = self._handlers().get(method)  # type: ignore[arg-type]
        if method == "ping":
            self.reply(rid, {})
        elif handler is None:
            self.reply_error(rid, jsonrpc.METHOD_NOT_FOUND, f"client does not handle {method!r}")
        elif not self._slots.acquire(blocking=False):
            self.reply_error(
                rid, jsonrpc.INTERNAL_ERROR, "client is busy: too many server requests at once"
            )
        else:
            # daemon: a handler stuck in user code must not keep the interpreter alive; the
            # connection's close joins it within its one deadline and names it if it stays
            thread = threading.Thread(
                target=self._run,
                args=(handler, message),
                name=f"mcpsync-handler[{self.name}]",
                daemon=True,
            )
            self.threads.add(thread)
            thread.start()

    def _run(self, handler: Callable[[dict[str, Any]], Any], message: Message) -> None:
        instrument = self._instrument
        if instrument is None:
            self._handle(handler, message, None)
            return
        params = message.get("params")
        with instrument.serving(
            str(message.get("method")),
            message.get("id"),
            params if isinstance(params, dict) else {},
        ) as served:
            self._handle(handler, message, served)

    def _handle(
        self, handler: Callable[[dict[str, Any]], Any], message: Message, served: Served | None
    ) -> None:
        rid = message.get("id")
        try:
            result = handler(message.get("params") or {})
            if hasattr(result, "model_dump"):
                result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
            if rid in self.cancelled:
                self.cancelled.discard(rid)  # the server no longer wants an answer
            else:
                self.reply(rid, result if result is not None else {})
        except ServerError as exc:
            self.reply_error(rid, exc.code, exc.message, exc.data)
            if served is not None:
                served(exc.code, exc.message)
        except Exception as exc:
            log.exception("mcpsync: handler for %s failed", message.get("method"))
            text = f"client handler failed: {type(exc).__name__}: {exc}"
            self.reply_error(rid, jsonrpc.INTERNAL_ERROR, text)
            if served is not None:
                served(jsonrpc.INTERNAL_ERROR, text)
        finally:
            self._slots.release()
            self.threads.discard(threading.current_thread())

    def reply(self, rid: Any, result: Any) -> None:
        self.send_quietly({"jsonrpc": "2.0", "id": rid, "result": result})

    def reply_error(self, rid: Any, code: int, message: str, data: Any = None) -> None:
        self.send_quietly(jsonrpc.error_response(rid, code, message, data))

    def send_quietly(self, message: Message) -> None:
        if self._closed():
            return
        try:
            self._send(message)
        except MCPSyncError as exc:
            log.warning("mcpsync: could not send to %s: %s", self.name, exc)
