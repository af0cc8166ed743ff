"""A small but complete MCP server in pure Python (stdlib only): mcpsync's demo and bench peer.

Owns: the demo server run by ``python -m mcpsync.demo_server``. It speaks newline-delimited
JSON-RPC on stdin/stdout (logs go to stderr) and negotiates protocol versions 2024-11-05,
2025-03-26, 2025-06-18 and 2025-11-25. It offers tools, resources (static, a template,
subscriptions), a prompt, completions, logging, progress, cancellation and the three
server-to-client requests (sampling, elicitation, roots), so a client can be exercised end
to end without Node or the SDK.

Threads: the reader loop (the caller's thread) handles cheap requests inline, which keeps the
benchmark hot path to one ``readline``, one ``json.loads``, one ``json.dumps`` and one
``write``+``flush``. Tools that wait (``long_running``, ``sample``, ``elicit``,
``list_roots``) run on their own worker thread, so the reader keeps serving other requests
and can deliver the client's responses to requests this server sent.

Extending: tests subclass :class:`DemoServer` or call :meth:`DemoServer.register_tool` to
add fault behaviour (see ``tests/servers/faulty_server.py``); this module stays clean.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any, TypeGuard

from .._version import __version__

__all__ = [
    "SUPPORTED_VERSIONS",
    "LATEST_VERSION",
    "LOG_LEVELS",
    "RpcError",
    "Call",
    "ToolSpec",
    "DemoServer",
    "main",
]

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = SUPPORTED_VERSIONS[-1]
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

SERVER_NAME = "mcpsync-demo"
SERVER_VERSION = __version__  # the demo server ships with mcpsync

# JSON-RPC / MCP error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002

GREET_NAMES = ("Ada", "Alan", "Alice", "Barbara", "Bob", "Carol", "Dave", "Eve", "Grace", "Linus")
ITEM_IDS = tuple(str(i) for i in range(1, 51))
MAX_BIG_BYTES = 512 * 1024 * 1024
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_ITEM_URI = re.compile(r"^demo://item/([^/]+)$")


class RpcError(Exception):
    """A JSON-RPC error to send back (or one the client sent us)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class _Cancelled(Exception):
    """The request was cancelled by the client (or the server is shutting down)."""


@dataclass
class Call:
    """One in-flight client request, as seen by a tool handler."""

    id: Any
    method: str
    params: dict[str, Any]
    cancelled: threading.Event = field(default_factory=threading.Event)
    outgoing: set[int] = field(default_factory=set)

    @property
    def progress_token(self) -> Any:
        meta = self.params.get("_meta")
        return meta.get("progressToken") if isinstance(meta, dict) else None


@dataclass
class ToolSpec:
    """A tool: its ``tools/list`` definition, its handler, and where it runs."""

    definition: dict[str, Any]
    handler: Callable[[Call, dict[str, Any]], dict[str, Any] | None]
    threaded: bool = False  # True: runs on a worker thread (may wait on the client)


class _Pending:
    __slots__ = ("event", "result", "error")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: Any = None
        self.error: dict[str, Any] | None = None


def _text(text: str, *, is_error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if is_error:
        result["isError"] = True
    return result


def _schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class DemoServer:
    """The demo MCP server over a pair of binary streams (stdin/stdout by default)."""

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
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._templates_list,
            "resources/read": self._resources_read,
            "resources/subscribe": self._subscribe,
            "resources/unsubscribe": self._unsubscribe,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "completion/complete": self._complete,
            "logging/setLevel": self._set_level,
        }
        self._register_builtin_tools()

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
                except (
                    Exception
                ) as exc:  # e.g. an unhashable id: never let one message kill the loop
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
        except Exception as exc:  # a bug in a handler must not kill the server
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
            except Exception as exc:
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

    # tools
    def register_tool(
        self,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        handler: Callable[[Call, dict[str, Any]], dict[str, Any] | None],
        *,
        threaded: bool = False,
        output_schema: dict[str, Any] | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
    ) -> ToolSpec:
        """Add (or replace) a tool. Does not notify; see the ``add_tool`` tool for that."""
        definition: dict[str, Any] = {
            "name": name,
            "description": description,
            "inputSchema": input_schema,
        }
        if title is not None:
            definition["title"] = title
        if output_schema is not None:
            definition["outputSchema"] = output_schema
        if annotations is not None:
            definition["annotations"] = annotations
        spec = ToolSpec(definition, handler, threaded)
        self.tools[name] = spec
        return spec

    def _tool_definition(self, definition: dict[str, Any]) -> dict[str, Any]:
        if self._version_at_least("2025-06-18"):
            return definition
        drop = {"title", "outputSchema"} | (
            set() if self._version_at_least("2025-03-26") else {"annotations"}
        )
        return {k: v for k, v in definition.items() if k not in drop}

    def _tools_list(self, call: Call) -> dict[str, Any]:
        tools = [self._tool_definition(spec.definition) for spec in list(self.tools.values())]
        return self._page(call, tools, "tools")

    def _tools_call(self, call: Call) -> dict[str, Any] | None:
        name = call.params.get("name")
        spec = self.tools.get(name) if isinstance(name, str) else None
        if spec is None:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = call.params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "tools/call: arguments must be an object")
        if not spec.threaded:
            return spec.handler(call, arguments)
        worker = threading.Thread(
            target=self._run_threaded,
            args=(call, spec, arguments),
            name=f"mcpsync-demo-worker[{name}:{call.id}]",
            daemon=True,
        )
        with self._state_lock:
            self._inflight[call.id] = call
            self._workers.add(worker)
        worker.start()
        return None

    def _register_builtin_tools(self) -> None:
        reg = self.register_tool
        reg(
            "echo",
            "Echo the message back.",
            _schema({"message": {"type": "string"}}, ("message",)),
            self._tool_echo,
            annotations={"readOnlyHint": True},
        )
        reg(
            "add",
            "Add two numbers.",
            _schema({"a": {"type": "number"}, "b": {"type": "number"}}, ("a", "b")),
            self._tool_add,
            output_schema=_schema({"sum": {"type": "number"}}, ("sum",)),
            title="Add",
            annotations={"readOnlyHint": True},
        )
        reg(
            "long_running",
            "Run for `duration` seconds in `steps` steps, reporting progress; honours cancellation.",
            _schema(
                {
                    "duration": {"type": "number", "default": 1},
                    "steps": {"type": "integer", "default": 5},
                }
            ),
            self._tool_long_running,
            threaded=True,
        )
        reg(
            "sample",
            "Ask the client's LLM (sampling/createMessage) and return its text.",
            _schema({"prompt": {"type": "string"}, "max_tokens": {"type": "integer"}}, ("prompt",)),
            self._tool_sample,
            threaded=True,
        )
        reg(
            "elicit",
            "Ask the user for input (elicitation/create, form mode) and return the action and content.",
            _schema({"message": {"type": "string"}}, ("message",)),
            self._tool_elicit,
            threaded=True,
        )
        reg(
            "list_roots",
            "Ask the client for its roots (roots/list).",
            _schema({}),
            self._tool_list_roots,
            threaded=True,
        )
        reg("fail", "Always fails with isError: true.", _schema({}), self._tool_fail)
        reg(
            "big",
            "Return a text of exactly `size_bytes` bytes.",
            _schema({"size_bytes": {"type": "integer", "minimum": 0}}, ("size_bytes",)),
            self._tool_big,
        )
        reg(
            "add_tool",
            "Add a new tool (it echoes its arguments) and send notifications/tools/list_changed.",
            _schema({"name": {"type": "string"}, "description": {"type": "string"}}, ("name",)),
            self._tool_add_tool,
        )
        reg(
            "log",
            "Emit a notifications/message at `level` (subject to logging/setLevel).",
            _schema(
                {
                    "level": {"type": "string", "enum": list(LOG_LEVELS)},
                    "message": {"type": "string"},
                },
                ("level", "message"),
            ),
            self._tool_log,
        )
        reg(
            "touch_resource",
            "Mark a resource as changed: notifies subscribers with notifications/resources/updated.",
            _schema({"uri": {"type": "string"}}, ("uri",)),
            self._tool_touch_resource,
        )

    def _tool_echo(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        message = args.get("message")
        if not isinstance(message, str):
            return _text("echo: `message` must be a string", is_error=True)
        return {"content": [{"type": "text", "text": message}]}

    def _tool_add(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        a, b = args.get("a"), args.get("b")
        if not (_number(a) and _number(b)):
            return _text("add: `a` and `b` must be numbers", is_error=True)
        total = a + b
        result = _text(json.dumps(total))
        if self._version_at_least("2025-06-18"):
            result["structuredContent"] = {"sum": total}
        return result

    def _tool_long_running(self, call: Call, args: dict[str, Any]) -> dict[str, Any] | None:
        duration, steps = args.get("duration", 1), args.get("steps", 5)
        if not _number(duration) or duration < 0 or not isinstance(steps, int) or steps < 1:
            return _text("long_running: need duration >= 0 and steps >= 1", is_error=True)
        token = call.progress_token
        with_message = self._version_at_least("2025-03-26")
        interval = duration / steps
        for step in range(1, steps + 1):
            if call.cancelled.wait(interval):
                return None
            if token is not None:
                params: dict[str, Any] = {"progressToken": token, "progress": step, "total": steps}
                if with_message:
                    params["message"] = f"step {step}/{steps}"
                self.notify("notifications/progress", params)
        return _text(f"long_running done: {steps} steps in {duration:g}s")

    def _require_client_capability(self, name: str) -> dict[str, Any] | None:
        if name in self.client_capabilities:
            return None
        return _text(f"the client did not declare the `{name}` capability", is_error=True)

    def _tool_sample(self, call: Call, args: dict[str, Any]) -> dict[str, Any] | None:
        missing = self._require_client_capability("sampling")
        if missing:
            return missing
        prompt = args.get("prompt")
        max_tokens = args.get("max_tokens", 100)
        if not isinstance(prompt, str) or not isinstance(max_tokens, int):
            return _text("sample: `prompt` must be a string", is_error=True)
        result = self.request_client(
            call,
            "sampling/createMessage",
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                "maxTokens": max_tokens,
            },
        )
        content = result.get("content") if isinstance(result, dict) else None
        blocks = content if isinstance(content, list) else [content]
        texts = [
            b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        ]
        if not texts:
            return _text("sample: the client returned no text", is_error=True)
        return _text("".join(texts))

    def _tool_elicit(self, call: Call, args: dict[str, Any]) -> dict[str, Any] | None:
        missing = self._require_client_capability("elicitation")
        if missing:
            return missing
        message = args.get("message")
        if not isinstance(message, str):
            return _text("elicit: `message` must be a string", is_error=True)
        params: dict[str, Any] = {
            "message": message,
            "requestedSchema": _schema(
                {
                    "name": {"type": "string", "description": "Your name"},
                    "confirm": {"type": "boolean", "description": "Proceed?"},
                },
                ("name",),
            ),
        }
        if self._version_at_least("2025-11-25"):
            params["mode"] = "form"
        result = self.request_client(call, "elicitation/create", params)
        if not isinstance(result, dict) or result.get("action") not in (
            "accept",
            "decline",
            "cancel",
        ):
            return _text("elicit: invalid elicitation result from the client", is_error=True)
        answer = {"action": result["action"], "content": result.get("content")}
        out = _text(json.dumps(answer))
        if self._version_at_least("2025-06-18"):
            out["structuredContent"] = answer
        return out

    def _tool_list_roots(self, call: Call, args: dict[str, Any]) -> dict[str, Any] | None:
        missing = self._require_client_capability("roots")
        if missing:
            return missing
        result = self.request_client(call, "roots/list", {})
        roots = result.get("roots") if isinstance(result, dict) else None
        if not isinstance(roots, list):
            return _text("list_roots: invalid roots/list result from the client", is_error=True)
        return _text(json.dumps(roots))

    def _tool_fail(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        return _text("this tool always fails", is_error=True)

    def _tool_big(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        size = args.get("size_bytes")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_BIG_BYTES:
            return _text(
                f"big: size_bytes must be an integer in [0, {MAX_BIG_BYTES}]", is_error=True
            )
        return _text("x" * size)

    def _tool_add_tool(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            return _text("add_tool: name must match [A-Za-z0-9_.-]{1,64}", is_error=True)
        if name in self.tools:
            return _text(f"add_tool: tool {name!r} already exists", is_error=True)
        description = args.get("description")
        if not isinstance(description, str):
            description = f"Dynamically added tool {name}: echoes its arguments."

        def dynamic(call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
            return _text(f"{name} called with {json.dumps(arguments, sort_keys=True)}")

        self.register_tool(
            name, description, {"type": "object", "additionalProperties": True}, dynamic
        )
        self.notify("notifications/tools/list_changed", {})
        return _text(f"added tool {name}")

    def _tool_log(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        level, message = args.get("level"), args.get("message")
        if level not in LOG_LEVELS or not isinstance(message, str):
            return _text(f"log: level must be one of {', '.join(LOG_LEVELS)}", is_error=True)
        if LOG_LEVELS.index(level) < self.log_threshold:
            return _text(f"suppressed: {level} is below {LOG_LEVELS[self.log_threshold]}")
        self.notify("notifications/message", {"level": level, "logger": "demo", "data": message})
        return _text(f"logged at {level}")

    def _tool_touch_resource(self, call: Call, args: dict[str, Any]) -> dict[str, Any]:
        uri = args.get("uri")
        if not isinstance(uri, str) or not self._resource_exists(uri):
            return _text(f"touch_resource: no such resource: {uri}", is_error=True)
        self.touches[uri] = self.touches.get(uri, 0) + 1
        notified = uri in self.subscriptions
        if notified:
            self.notify("notifications/resources/updated", {"uri": uri})
        return _text(f"touched {uri}; {'notified 1 subscriber' if notified else 'no subscribers'}")

    # resources
    _STATIC_RESOURCES: tuple[dict[str, Any], ...] = (
        {
            "uri": "demo://readme",
            "name": "readme",
            "mimeType": "text/markdown",
            "description": "About this server",
        },
        {
            "uri": "demo://data.json",
            "name": "data",
            "mimeType": "application/json",
            "description": "Some JSON",
        },
        {
            "uri": "demo://bytes.bin",
            "name": "bytes",
            "mimeType": "application/octet-stream",
            "description": "Bytes 0..255 (blob)",
        },
        {
            "uri": "demo://counter",
            "name": "counter",
            "mimeType": "text/plain",
            "description": "How often it was touched",
        },
    )
    _TEMPLATE = {
        "uriTemplate": "demo://item/{id}",
        "name": "item",
        "mimeType": "text/plain",
        "description": "One item by id (1-50 complete)",
    }

    def _resource_exists(self, uri: str) -> bool:
        return any(r["uri"] == uri for r in self._STATIC_RESOURCES) or bool(_ITEM_URI.match(uri))

    def _resources_list(self, call: Call) -> dict[str, Any]:
        return self._page(call, list(self._STATIC_RESOURCES), "resources")

    def _templates_list(self, call: Call) -> dict[str, Any]:
        return self._page(call, [self._TEMPLATE], "resourceTemplates")

    def _require_uri(self, call: Call) -> str:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, f"{call.method}: uri is required")
        if not self._resource_exists(uri):
            raise RpcError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        return uri

    def _resources_read(self, call: Call) -> dict[str, Any]:
        uri = self._require_uri(call)
        if uri == "demo://readme":
            content = {
                "uri": uri,
                "mimeType": "text/markdown",
                "text": "# mcpsync demo\n\nA pure-Python MCP server.\n",
            }
        elif uri == "demo://data.json":
            content = {
                "uri": uri,
                "mimeType": "application/json",
                "text": json.dumps({"answer": 42, "items": [1, 2, 3]}),
            }
        elif uri == "demo://bytes.bin":
            content = {"uri": uri, "mimeType": "application/octet-stream", "blob": _BYTES_B64}
        elif uri == "demo://counter":
            content = {"uri": uri, "mimeType": "text/plain", "text": str(self.touches.get(uri, 0))}
        else:
            item = _ITEM_URI.match(uri)
            assert item is not None
            content = {"uri": uri, "mimeType": "text/plain", "text": f"item {item.group(1)}"}
        return {"contents": [content]}

    def _subscribe(self, call: Call) -> dict[str, Any]:
        self.subscriptions.add(self._require_uri(call))
        return {}

    def _unsubscribe(self, call: Call) -> dict[str, Any]:
        uri = call.params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "resources/unsubscribe: uri is required")
        self.subscriptions.discard(uri)
        return {}

    # prompts
    _GREET = {
        "name": "greet",
        "description": "Greet someone by name.",
        "arguments": [
            {"name": "name", "description": "Who to greet", "required": True},
            {"name": "style", "description": "formal or casual", "required": False},
        ],
    }

    def _prompts_list(self, call: Call) -> dict[str, Any]:
        return self._page(call, [self._GREET], "prompts")

    def _prompts_get(self, call: Call) -> dict[str, Any]:
        if call.params.get("name") != "greet":
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {call.params.get('name')}")
        arguments = call.params.get("arguments") or {}
        name = arguments.get("name") if isinstance(arguments, dict) else None
        if not isinstance(name, str) or not name:
            raise RpcError(INVALID_PARAMS, "prompts/get greet: argument `name` is required")
        style = arguments.get("style", "casual")
        text = f"Please write a {style} greeting for {name}."
        return {
            "description": f"Greet {name}",
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }

    # completion
    def _complete(self, call: Call) -> dict[str, Any]:
        ref, argument = call.params.get("ref"), call.params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise RpcError(INVALID_PARAMS, "completion/complete: ref and argument are required")
        arg_name, value = argument.get("name"), argument.get("value", "")
        if not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, "completion/complete: argument.value must be a string")
        if ref.get("type") == "ref/prompt" and ref.get("name") == "greet":
            pool: tuple[str, ...] = (
                GREET_NAMES
                if arg_name == "name"
                else ("casual", "formal")
                if arg_name == "style"
                else ()
            )
            values = [v for v in pool if v.lower().startswith(value.lower())]
        elif ref.get("type") == "ref/resource" and ref.get("uri") == self._TEMPLATE["uriTemplate"]:
            values = [v for v in ITEM_IDS if v.startswith(value)] if arg_name == "id" else []
        else:
            raise RpcError(INVALID_PARAMS, "completion/complete: unknown reference")
        return {
            "completion": {
                "values": values[:100],
                "total": len(values),
                "hasMore": len(values) > 100,
            }
        }

    # logging
    def _set_level(self, call: Call) -> dict[str, Any]:
        level = call.params.get("level")
        if level not in LOG_LEVELS:
            raise RpcError(
                INVALID_PARAMS, f"logging/setLevel: level must be one of {', '.join(LOG_LEVELS)}"
            )
        self.log_threshold = LOG_LEVELS.index(level)
        return {}


_BYTES_B64 = base64.b64encode(bytes(range(256))).decode()


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mcpsync.demo_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--page-size", type=int, default=0, help="items per list page (0 = no pagination)"
    )
    parser.add_argument(
        "--reverse-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the client's answers",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request to stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    server = DemoServer(
        page_size=args.page_size, reverse_timeout=args.reverse_timeout, verbose=args.verbose
    )
    server.log(f"ready on stdio (pid {os.getpid()})")
    return server.serve()

