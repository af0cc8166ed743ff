"""A small MCP Apps server (standard library only): ``python -m mcpsync.apps.demo``.

Owns: ``AppsDemoServer``, the demo server plus an app: the ``counter`` tool renders
``ui://mcpsync-demo/counter.html``, a page whose "+1" button calls the app-only tool
``increment`` through the host; ``reset`` is visible to the model only (an app asking for
it must be refused); ``calls`` reports which tools were called (so a test or a notebook can
see what reached the server); ``leaky`` renders a resource whose declared CSP smuggles a
directive (a host must refuse it). Used by notebook 06 and the tests.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from ..demo_server import Call, DemoServer, RpcError, build_arg_parser

__all__ = ["AppsDemoServer", "COUNTER_URI", "LEAKY_URI", "main"]

COUNTER_URI = "ui://mcpsync-demo/counter.html"
LEAKY_URI = "ui://mcpsync-demo/leaky.html"
_MIME = "text/html;profile=mcp-app"
_EMPTY = {"type": "object", "properties": {}}

# The page speaks the bridge by hand (no SDK): initialize, then show tool input/result,
# and call `increment` when the button is pressed.
COUNTER_HTML = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>counter</title>
<style>
body { font-family: var(--font-sans, sans-serif); margin: 8px;
       background: var(--color-background-primary, #fff); color: var(--color-text-primary, #111); }
body.dark { background: #1e1e1e; color: #eee; }
#count { font-size: 28px; font-weight: bold; }
button { font-size: 16px; padding: 4px 16px; }
</style></head>
<body>
<div>count: <span id="count">?</span></div>
<button id="plus">+1</button>
<div id="status">starting</div>
<div id="theme"></div>
<script>
let next = 1;
const waiting = new Map();
function request(method, params) {
  const id = next++;
  window.parent.postMessage({jsonrpc: "2.0", id, method, params}, "*");
  return new Promise((resolve, reject) => waiting.set(id, {resolve, reject}));
}
function notify(method, params) {
  window.parent.postMessage({jsonrpc: "2.0", method, params}, "*");
}
function show(result) {
  const data = result && result.structuredContent;
  if (data && typeof data.count === "number") {
    document.getElementById("count").textContent = String(data.count);
  }
}
function theme(context) {
  if (context && context.theme) {
    document.body.classList.toggle("dark", context.theme === "dark");
    document.getElementById("theme").textContent = "theme: " + context.theme;
  }
}
window.addEventListener("message", (event) => {
  const msg = event.data;
  if (!msg || msg.jsonrpc !== "2.0") return;
  if (msg.id !== undefined && waiting.has(msg.id)) {
    const w = waiting.get(msg.id);
    waiting.delete(msg.id);
    if (msg.error) w.reject(msg.error); else w.resolve(msg.result);
  } else if (msg.method === "ui/notifications/tool-result") {
    show(msg.params);
  } else if (msg.method === "ui/notifications/host-context-changed") {
    theme(msg.params);
  } else if (msg.method === "ui/resource-teardown") {
    window.parent.postMessage({jsonrpc: "2.0", id: msg.id, result: {}}, "*");
  }
});
document.getElementById("plus").addEventListener("click", async () => {
  document.getElementById("status").textContent = "calling increment";
  try {
    show(await request("tools/call", {name: "increment", arguments: {}}));
    document.getElementById("status").textContent = "incremented";
  } catch (err) {
    document.getElementById("status").textContent = "refused: " + (err && err.message);
  }
});
request("ui/initialize", {
  protocolVersion: "2026-01-26",
  appInfo: {name: "mcpsync-counter", version: "1"},
  appCapabilities: {availableDisplayModes: ["inline"]},
}).then((init) => {
  theme(init.hostContext);
  notify("ui/notifications/initialized", {});
  document.getElementById("status").textContent = "ready";
  notify("ui/notifications/size-changed", {width: document.body.scrollWidth, height: 160});
});
</script>
</body></html>
"""


class AppsDemoServer(DemoServer):
    """DemoServer with one MCP App (a counter) and the tools around it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.count = 0
        self.calls: list[str] = []
        self._count_lock = threading.Lock()
        self._app_tool("counter", "Show the counter app.", self._counter, ["model", "app"])
        self._app_tool("increment", "Add one to the counter.", self._increment, ["app"])
        self._app_tool("reset", "Set the counter to zero.", self._reset, ["model"])
        self._app_tool("calls", "Which tools were called, in order.", self._calls, ["model"])
        self.register_tool("client", "The extensions the client advertised.", _EMPTY, self._client)
        leaky = self.register_tool("leaky", "An app whose CSP is malformed.", _EMPTY, self._counter)
        leaky.definition["_meta"] = {"ui": {"resourceUri": LEAKY_URI}}

    def _app_tool(self, name: str, description: str, handler: Any, who: list[str]) -> None:
        spec = self.register_tool(name, description, _EMPTY, handler)
        spec.definition["_meta"] = {"ui": {"resourceUri": COUNTER_URI, "visibility": who}}

    def _install(self) -> None:
        super()._install()
        plain_read = self._methods["resources/read"]

        def read(call: Call) -> dict[str, Any] | None:
            uri = call.params.get("uri")
            if uri == COUNTER_URI:
                meta = {"ui": {"prefersBorder": True}}
                return {
                    "contents": [
                        {"uri": uri, "mimeType": _MIME, "text": COUNTER_HTML, "_meta": meta}
                    ]
                }
            if uri == LEAKY_URI:
                csp = {"connectDomains": ["https://example.com; script-src *"]}
                return {
                    "contents": [
                        {
                            "uri": uri,
                            "mimeType": _MIME,
                            "text": COUNTER_HTML,
                            "_meta": {"ui": {"csp": csp}},
                        }
                    ]
                }
            return plain_read(call)

        self._methods["resources/read"] = read

    def _state(self, name: str, change: int | None) -> dict[str, Any]:
        with self._count_lock:
            self.calls.append(name)
            if change is None:
                self.count = 0
            else:
                self.count += change
            count = self.count
        return {
            "content": [{"type": "text", "text": f"count: {count}"}],
            "structuredContent": {"count": count},
        }

    def _counter(self, call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._state(str(call.params.get("name")), 0)

    def _increment(self, call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._state("increment", 1)

    def _reset(self, call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._state("reset", None)

    def _calls(self, call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
        with self._count_lock:
            calls = list(self.calls)
        if arguments:
            raise RpcError(-32602, "calls takes no arguments")
        return {
            "content": [{"type": "text", "text": json.dumps(calls)}],
            "structuredContent": {"calls": calls},
        }

    def _client(self, call: Call, arguments: dict[str, Any]) -> dict[str, Any]:
        extensions = self.client_capabilities.get("extensions") or {}
        return {
            "content": [{"type": "text", "text": json.dumps(extensions)}],
            "structuredContent": {"extensions": extensions},
        }


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    server = AppsDemoServer(
        page_size=args.page_size, reverse_timeout=args.reverse_timeout, verbose=args.verbose
    )
    server.log(f"apps demo ready on stdio (pid {os.getpid()})")
    return server.serve()


if __name__ == "__main__":
    sys.exit(main())
