"""The demo server's tools: ``register_tool`` (tests add fault behaviour with it), ``tools/list``
and ``tools/call``, and the built-in tools (echo, add, long_running, sample, elicit,
list_roots, fail, big, add_tool, log, touch_resource).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from .content import ContentServer
from .wire import (
    _TOOL_NAME,
    INVALID_PARAMS,
    LOG_LEVELS,
    MAX_BIG_BYTES,
    Call,
    RpcError,
    ToolSpec,
    _number,
    _schema,
    _text,
)

__all__ = ["ToolsServer"]


class ToolsServer(ContentServer):
    """Tools on top of :class:`~mcpsync.demo_server.content.ContentServer`."""

    def _install(self) -> None:
        super()._install()
        self._methods.update({"tools/list": self._tools_list, "tools/call": self._tools_call})
        self._register_builtin_tools()

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
