"""The demo server's core: JSON-RPC framing on stdin/stdout, dispatch, requests to the client
(sampling, elicitation, roots) with their answers, worker threads, the ``initialize``
handshake with version negotiation, ``ping`` and cursor pagination.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from .wire import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_VERSION,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    SERVER_NAME,
    SERVER_VERSION,
    SUPPORTED_VERSIONS,
    Call,
    RpcError,
    ToolSpec,
    _Cancelled,
    _Pending,
    _text,
)

__all__ = ["ServerCore"]


class ServerCore:
    """The wire and the session: newline-delimited JSON-RPC over two binary streams, dispatch
    to ``self._methods`` (subclasses add theirs in :meth:`_install`), requests to the client,
    worker threads for handlers that wait, ``initialize``/``ping`` and pagination."""

    def __init__(
        self,
        *,
        page_size: int = 0,
        reverse_timeout: float = 60.0,
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
        stderr: IO[str] | None = None,
        verbose: bool = False,
    ) -> None:
        self.page_size = max(0, page_size)
        self.reverse_timeout = reverse_timeout
        self.verbose = verbose
        self._in = stdin if stdin is not None else sys.stdin.buffer
        self._out = stdout if stdout is not None else sys.stdout.buffer
        self._err = stderr if stderr is not None else sys.stderr
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._closing = threading.Event()
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._inflight: dict[Any, Call] = {}
        self._workers: set[threading.Thread] = set()
        # session state
        self.protocol_version: str | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.client_info: dict[str, Any] = {}
        self.initialized = False
        self.log_threshold: int = 0  # index into LOG_LEVELS; 0 = everything
        self.subscriptions: set[str] = set()
        self.touches: dict[str, int] = {}
        self.tools: dict[str, ToolSpec] = {}
        self._methods: dict[str, Callable[[Call], dict[str, Any] | None]] = {
            "initialize": self._initialize,
            "ping": self._ping,
        }
        self._install()

    def _install(self) -> None:
        """Add this layer's JSON-RPC methods to ``self._methods`` (call ``super()._install()``)."""

    # ------------------------------------------------------------------ wire
    def log(self, text: str) -> None:
        """One line on stderr (never stdout)."""
        try:
            self._err.write(f"[{SERVER_NAME}] {text}\n")
            self._err.flush()
        except (OSError, ValueError):
            pass

    def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line; safe from any thread."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (OSError, ValueError):
                self._closing.set()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def _reply(self, rid: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def _reply_error(self, rid: Any, err: RpcError) -> None:
        self.send({"jsonrpc": "2.0", "id": rid, "error": err.to_json()})

    def serve(self) -> int:
        """Read messages until EOF; return the process exit code."""
        readline = self._in.readline
        dispatch = self._dispatch
        try:
            while not self._closing.is_set():
                line = readline()
                if not line:
                    break
                if line.isspace():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    self._reply_error(None, RpcError(PARSE_ERROR, "Parse error"))
                    continue
                try:
                    dispatch(message)
                # e.g. an unhashable id: never let one message kill the loop
                except Exception as exc:  # noqa: BLE001
                    self.log(f"dropped a message: {type(exc).__name__}: {exc}")
        except KeyboardInterrupt:
            pass
        self.shutdown()
        return 0

    def shutdown(self, timeout: float = 2.0) -> None:
        """Wake every waiting worker and join them (bounded)."""
        self._closing.set()
        with self._state_lock:
            pending = list(self._pending.values())
            calls = list(self._inflight.values())
            workers = list(self._workers)
        for call in calls:
            call.cancelled.set()
        for slot in pending:
            slot.event.set()
        for worker in workers:
            worker.join(timeout)

    # -------------------------------------------------------------- dispatch
    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            self._reply_error(
                None, RpcError(INVALID_REQUEST, "Invalid Request (batches are not supported)")
            )
            return
        method = message.get("method")
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                self._on_response(message)
            else:
                self._reply_error(message.get("id"), RpcError(INVALID_REQUEST, "Invalid Request"))
            return
        if "id" not in message:
            self._on_notification(method, message.get("params"))
            return
        rid = message["id"]
        params = message.get("params")
        if params is None:
            params = {}
        if self.verbose:
            self.log(f"<- {method} id={rid!r}")
        if not isinstance(method, str) or not isinstance(params, dict):
            self._reply_error(rid, RpcError(INVALID_REQUEST, "Invalid Request"))
            return
        handler = self._methods.get(method)
        if handler is None:
            self._reply_error(rid, RpcError(METHOD_NOT_FOUND, f"Method not found: {method}"))
            return
        if not self.initialized and method not in ("initialize", "ping"):
            self._reply_error(rid, RpcError(INVALID_REQUEST, "Server not initialized"))
            return
        call = Call(rid, method, params)
        try:
            result = handler(call)
        except RpcError as err:
            self._reply_error(rid, err)
            return
        except Exception as exc:  # noqa: BLE001 - a bug in a handler must not kill the server
            self.log(f"internal error in {method}: {exc!r}")
            self._reply_error(
                rid, RpcError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
            )
            return
        if result is not None:
            self._reply(rid, result)

    def _on_response(self, message: dict[str, Any]) -> None:
        with self._state_lock:
            slot = self._pending.get(message["id"])
        if slot is None:
            self.log(f"response for unknown request id {message['id']!r}")
            return
        slot.result = message.get("result")
        slot.error = message.get("error")
        slot.event.set()

    def _on_notification(self, method: Any, params: Any) -> None:
        if method == "notifications/initialized":
            return
        if method == "notifications/cancelled" and isinstance(params, dict):
            with self._state_lock:
                call = self._inflight.get(params.get("requestId"))
                slots = (
                    [self._pending[o] for o in call.outgoing if o in self._pending] if call else []
                )
            if call is not None:
                call.cancelled.set()
                for slot in slots:
                    slot.event.set()
            return
        if self.verbose:
            self.log(f"<- notification {method}")

    # ----------------------------------------------------- server -> client
    def request_client(self, call: Call, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the client and wait for its result (bounded).

        Raises RpcError if the client answered with an error, TimeoutError if it did not
        answer in time, _Cancelled if ``call`` was cancelled or the server is closing.
        """
        oid = next(self._ids)
        slot = _Pending()
        with self._state_lock:
            self._pending[oid] = slot
            call.outgoing.add(oid)
        try:
            self.send({"jsonrpc": "2.0", "id": oid, "method": method, "params": params})
            answered = slot.event.wait(self.reverse_timeout)
        finally:
            with self._state_lock:
                self._pending.pop(oid, None)
                call.outgoing.discard(oid)
        if call.cancelled.is_set() or self._closing.is_set():
            if not self._closing.is_set():
                self.notify(
                    "notifications/cancelled", {"requestId": oid, "reason": "request cancelled"}
                )
            raise _Cancelled
        if not answered:
            self.notify("notifications/cancelled", {"requestId": oid, "reason": "timed out"})
            raise TimeoutError(f"client did not answer {method} in {self.reverse_timeout:g}s")
        if slot.error is not None:
            err = slot.error if isinstance(slot.error, dict) else {}
            raise RpcError(
                err.get("code", INTERNAL_ERROR), str(err.get("message", "")), err.get("data")
            )
        return slot.result

    def _run_threaded(self, call: Call, spec: ToolSpec, arguments: dict[str, Any]) -> None:
        try:
            try:
                result = spec.handler(call, arguments)
            except _Cancelled:
                result = None
            except TimeoutError as exc:
                result = _text(str(exc), is_error=True)
            except RpcError as err:
                result = _text(f"client error {err.code}: {err.message}", is_error=True)
            except Exception as exc:  # noqa: BLE001 - a failing tool is an isError result
                self.log(f"tool {spec.definition['name']} failed: {exc!r}")
                result = _text(f"tool failed: {type(exc).__name__}", is_error=True)
            if result is not None and not call.cancelled.is_set():
                self._reply(call.id, result)
        finally:
            with self._state_lock:
                self._inflight.pop(call.id, None)
                self._workers.discard(threading.current_thread())

    # ------------------------------------------------------------- handlers
    def _version_at_least(self, version: str) -> bool:
        return (self.protocol_version or LATEST_VERSION) >= version

    def _initialize(self, call: Call) -> dict[str, Any]:
        if self.protocol_version is not None:
            raise RpcError(INVALID_REQUEST, "Already initialized")
        params = call.params
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "initialize: protocolVersion is required")
        version = requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
        caps = params.get("capabilities")
        info = params.get("clientInfo")
        self.protocol_version = version
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        self.client_info = info if isinstance(info, dict) else {}
        self.initialized = True
        capabilities: dict[str, Any] = {
            "tools": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "logging": {},
        }
        if version >= "2025-03-26":
            capabilities["completions"] = {}
        server_info: dict[str, Any] = {"name": SERVER_NAME, "version": SERVER_VERSION}
        if version >= "2025-06-18":
            server_info["title"] = "mcpsync demo server"
        self.log(f"initialized: version {version}, client {self.client_info.get('name', '?')}")
        return {
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": server_info,
            "instructions": "Demo server for mcpsync: try the echo, add and long_running tools, "
            "the demo:// resources and the greet prompt.",
        }

    def _ping(self, call: Call) -> dict[str, Any]:
        return {}

    def _page(self, call: Call, items: list[Any], key: str) -> dict[str, Any]:
        cursor = call.params.get("cursor")
        start = 0
        if cursor is not None:
            try:
                start = int(str(cursor).removeprefix("page:"))
            except ValueError:
                start = -1
            if not str(cursor).startswith("page:") or not 0 <= start <= len(items):
                raise RpcError(INVALID_PARAMS, "Invalid cursor")
        if self.page_size <= 0:
            return {key: items}
        end = start + self.page_size
        result: dict[str, Any] = {key: items[start:end]}
        if end < len(items):
            result["nextCursor"] = f"page:{end}"
        return result
