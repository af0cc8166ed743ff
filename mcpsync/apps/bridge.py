"""The host side of the MCP Apps bridge, in Python, testable without a browser.

Owns: ``AppBridge``, which answers every JSON-RPC message an app posts (``ui/initialize``,
``ping``, ``tools/call`` and ``resources/read`` proxied to the session, ``ui/open-link``,
``ui/message``, ``ui/update-model-context``, ``ui/request-display-mode``, the
``ui/notifications/*`` the app sends, its log messages) and sends the host's side
(``ui/notifications/tool-input`` and ``tool-result`` once the app said it is initialized,
``host-context-changed``, ``ui/resource-teardown``); the refusals (malformed messages,
unknown methods, oversized payloads, calls to tools the server did not make callable by
apps, links that are not http(s)), each answered with a JSON-RPC error that says why and
recorded in ``refusals``; and the proxy thread (``mcpsync-app[NAME]``) that sends the
app's requests with the session's ``submit_*`` calls and posts their answers, so the
caller (a notebook kernel's message loop) never waits on the server.

Everything leaves through ``post(envelope)``: ``{"kind": "rpc", "message": ...}`` goes to
the app, ``{"kind": "resize", ...}``, ``{"kind": "ask-link", ...}`` and ``{"kind": "open",
...}`` to the widget around it (``mcpsync.apps.widget``).
"""

from __future__ import annotations

import itertools
import json
import logging
import queue
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal

from .._version import __version__
from ..errors import MCPSyncError, ServerError
from .resource import PROTOCOL_VERSION, AppResource, visibility

__all__ = [
    "AppBridge",
    "AppMessage",
    "MAX_MESSAGE_BYTES",
    "MAX_RESULT_BYTES",
    "MAX_IN_FLIGHT",
    "HOST_INFO",
]

log = logging.getLogger("mcpsync.apps")

MAX_MESSAGE_BYTES = 1024 * 1024  # one message from the app, as JSON
MAX_RESULT_BYTES = 16 * 1024 * 1024  # one answer the host relays to the app
MAX_IN_FLIGHT = 16  # app requests proxied to the server at once
MAX_HEIGHT = 4000  # pixels a view may ask for
HOST_INFO = {"name": "mcpsync", "version": __version__}

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
REFUSED = -32000  # the spec's implementation-defined "denied" code

OpenLinks = Literal["ask", "decline"] | Callable[[str], bool]


@dataclass(frozen=True)
class AppMessage:
    """A ``ui/message`` request: what the app wants added to the conversation."""

    role: str
    content: Any

    @property
    def text(self) -> str:
        content = self.content
        if isinstance(content, Mapping) and content.get("type") == "text":
            return str(content.get("text", ""))
        return ""


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _dump(model: Any) -> Any:
    dump = getattr(model, "model_dump", None)
    return dump(by_alias=True, exclude_none=True, mode="json") if dump else model


class AppBridge:
    """One rendered app's bridge to ``session``: ``receive(message)`` for each message the
    app posts; everything the host says goes through ``post``. Thread-safe."""

    def __init__(
        self,
        session: Any,
        tool: Any,
        resource: AppResource,
        *,
        post: Callable[[dict[str, Any]], None],
        arguments: Mapping[str, Any] | None = None,
        result: Any = None,
        host_context: Mapping[str, Any] | None = None,
        on_message: Callable[[AppMessage], bool] | None = None,
        open_links: OpenLinks = "ask",
        on_model_context: Callable[[dict[str, Any]], None] | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_result_bytes: int = MAX_RESULT_BYTES,
        max_in_flight: int = MAX_IN_FLIGHT,
        call_timeout: float | None = None,
    ) -> None:
        self.session = session
        self.tool = tool
        self.resource = resource
        self.arguments = dict(arguments or {})
        self.result = result
        self.host_context: dict[str, Any] = {
            "theme": "light",
            "displayMode": "inline",
            "availableDisplayModes": ["inline"],
            "platform": "web",
            "containerDimensions": {"maxHeight": MAX_HEIGHT},
            "toolInfo": {"tool": _dump(tool)},
            **dict(host_context or {}),
        }
        self.on_message = on_message
        self.open_links = open_links
        self.on_model_context = on_model_context
        self.max_message_bytes = max_message_bytes
        self.max_result_bytes = max_result_bytes
        self.max_in_flight = max_in_flight
        self.call_timeout = call_timeout
        #: every refusal, in words (also sent to the app as the error's message)
        self.refusals: list[str] = []
        #: the app's ``appInfo`` and ``appCapabilities`` from ``ui/initialize``
        self.app_info: dict[str, Any] = {}
        self.app_capabilities: dict[str, Any] = {}
        self.initialized = threading.Event()
        self.model_context: dict[str, Any] | None = None
        self.size: tuple[float | None, float | None] | None = None
        #: (method, params) of every tool call / resource read sent for the app
        self.proxied: list[tuple[str, dict[str, Any]]] = []
        self._post = post
        self._post_lock = threading.Lock()
        self._state = threading.Lock()
        self._links: dict[str, Any] = {}  # ask-link token -> the app's request id
        self._link_ids = itertools.count(1)
        self._host_ids = itertools.count(1)
        self._pending_host: dict[int, threading.Event] = {}
        self._closed = False
        self._proxy = _Proxy(self, getattr(session, "name", "app"))

    # -- out ---------------------------------------------------------------------------

    def post(self, envelope: dict[str, Any]) -> None:
        with self._post_lock:
            self._post(envelope)

    def _to_app(self, message: dict[str, Any]) -> None:
        self.post({"kind": "rpc", "message": {"jsonrpc": "2.0", **message}})

    def _reply(self, rid: Any, result: Any) -> None:
        self._to_app({"id": rid, "result": result})

    def _error(self, rid: Any, code: int, message: str) -> None:
        self.refusals.append(message)
        log.info("mcpsync.apps: refused: %s", message)
        self._to_app({"id": rid, "error": {"code": code, "message": message}})

    def notify(self, method: str, params: Mapping[str, Any]) -> None:
        """Send a notification to the app (only once it said it is initialized)."""
        if self.initialized.is_set() and not self._closed:
            self._to_app({"method": method, "params": dict(params)})

    # -- in ----------------------------------------------------------------------------

    def receive(self, raw: Any) -> None:
        """Handle one message the app posted (a parsed object or a JSON string)."""
        if self._closed:
            return
        try:
            size = len(raw.encode("utf-8", "surrogatepass")) if isinstance(raw, str) else None
            if size is None:
                size = len(json.dumps(raw, separators=(",", ":"), default=str))
        except (TypeError, ValueError, RecursionError):
            self._error(None, INVALID_REQUEST, "the app sent a message that is not JSON")
            return
        if size > self.max_message_bytes:
            rid = raw.get("id") if isinstance(raw, dict) else None
            self._error(
                rid if _valid_id(rid) else None,
                INVALID_REQUEST,
                f"the app sent a {size}-byte message; the limit is {self.max_message_bytes} "
                "bytes (nothing was done with it)",
            )
            return
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                self._error(None, PARSE_ERROR, "the app sent a message that is not valid JSON")
                return
        self._dispatch(raw)

    def _dispatch(self, msg: Any) -> None:
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            self._error(None, INVALID_REQUEST, "the app sent something that is not JSON-RPC 2.0")
            return
        rid, method = msg.get("id"), msg.get("method")
        if "id" in msg and not _valid_id(rid):
            self._error(
                None, INVALID_REQUEST, "the app sent a request whose id is not a string or number"
            )
            return
        if method is None and "id" in msg and ("result" in msg or "error" in msg):
            self._on_response(rid, msg)
            return
        if not isinstance(method, str):
            self._error(
                rid if "id" in msg else None,
                INVALID_REQUEST,
                "the app sent a message without a method",
            )
            return
        params = msg.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            if "id" in msg:
                self._error(rid, INVALID_PARAMS, f"{method}: params must be an object")
            return
        if "id" not in msg:
            self._on_notification(method, params)
            return
        handler = self._requests.get(method)
        if handler is None:
            self._error(
                rid,
                METHOD_NOT_FOUND,
                f"method {method[:100]!r} is not something an app can ask this host (mcpsync)",
            )
            return
        try:
            answer = handler(self, rid, params)
        except _Refused as refused:
            self._error(rid, refused.code, refused.message)
            return
        if answer is not _LATER:
            self._reply(rid, answer)

    # -- requests ----------------------------------------------------------------------

    def _initialize(self, rid: Any, params: dict[str, Any]) -> Any:
        info, caps = params.get("appInfo", {}), params.get("appCapabilities", {})
        self.app_info = dict(info) if isinstance(info, dict) else {}
        self.app_capabilities = dict(caps) if isinstance(caps, dict) else {}
        approved = {k: list(v) for k, v in self.resource.csp.items()}
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "hostInfo": dict(HOST_INFO),
            "hostCapabilities": {
                "openLinks": {},
                "serverTools": {},
                "serverResources": {},
                "logging": {},
                "sandbox": {"permissions": {}, "csp": approved},
            },
            "hostContext": dict(self.host_context),
        }

    def _ping(self, rid: Any, params: dict[str, Any]) -> Any:
        return {}

    def _tools_call(self, rid: Any, params: dict[str, Any]) -> Any:
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not name:
            raise _Refused(INVALID_PARAMS, "tools/call: name must be a non-empty string")
        if arguments is not None and not isinstance(arguments, dict):
            raise _Refused(
                INVALID_PARAMS, f"tools/call {name[:100]!r}: arguments must be an object"
            )
        tools = {t.name: t for t in self.session.list_tools()}
        tool = tools.get(name)
        if tool is None:
            raise _Refused(INVALID_PARAMS, f"tools/call: the server offers no tool {name[:100]!r}")
        who = visibility(tool)
        if "app" not in who:
            raise _Refused(
                REFUSED,
                f"tools/call {name!r} refused: the server made this tool visible to "
                f"{list(who)} only, not to apps (_meta.ui.visibility)",
            )
        self._proxy.start(rid, "tools/call", {"name": name, "arguments": arguments or {}})
        return _LATER

    def _resources_read(self, rid: Any, params: dict[str, Any]) -> Any:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise _Refused(INVALID_PARAMS, "resources/read: uri must be a non-empty string")
        self._proxy.start(rid, "resources/read", {"uri": uri})
        return _LATER

    def _open_link(self, rid: Any, params: dict[str, Any]) -> Any:
        url = params.get("url")
        if not isinstance(url, str):
            raise _Refused(INVALID_PARAMS, "ui/open-link: url must be a string")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _Refused(
                REFUSED, f"ui/open-link refused: only http(s) links open, not {url[:100]!r}"
            )
        if parts.username or parts.password:
            raise _Refused(REFUSED, "ui/open-link refused: the link carries credentials")
        policy = self.open_links
        if policy == "decline":
            raise _Refused(REFUSED, "ui/open-link declined: this host does not open links")
        if policy == "ask":
            token = f"link-{next(self._link_ids)}"
            with self._state:
                self._links[token] = rid
            self.post({"kind": "ask-link", "token": token, "url": url})
            return _LATER
        if not callable(policy) or not policy(url):
            raise _Refused(REFUSED, "ui/open-link declined by the user")
        self.post({"kind": "open", "url": url})
        return {}

    def link_decision(self, token: str, accepted: bool) -> None:
        """The person's answer to an ``ask-link`` (the widget's Open / Dismiss)."""
        with self._state:
            rid = self._links.pop(token, _MISSING)
        if rid is _MISSING:
            return
        if accepted:
            self._reply(rid, {})
        else:
            self._error(rid, REFUSED, "ui/open-link declined by the user")

    def _message(self, rid: Any, params: dict[str, Any]) -> Any:
        role, content = params.get("role"), params.get("content")
        if role != "user" or not isinstance(content, (dict, list)):
            raise _Refused(INVALID_PARAMS, "ui/message: want role 'user' and a content object")
        if self.on_message is None:
            raise _Refused(
                REFUSED,
                "ui/message declined: this notebook has no conversation to add it to "
                "(pass on_message= to receive app messages)",
            )
        if not self.on_message(AppMessage(role, content)):
            raise _Refused(REFUSED, "ui/message declined by the host")
        return {}

    def _update_model_context(self, rid: Any, params: dict[str, Any]) -> Any:
        self.model_context = dict(params)
        if self.on_model_context is not None:
            self.on_model_context(dict(params))
        return {}

    def _display_mode(self, rid: Any, params: dict[str, Any]) -> Any:
        return {"mode": "inline"}  # the only mode a notebook cell offers

    _requests: dict[str, Callable[[AppBridge, Any, dict[str, Any]], Any]] = {
        "ui/initialize": _initialize,
        "ping": _ping,
        "tools/call": _tools_call,
        "resources/read": _resources_read,
        "ui/open-link": _open_link,
        "ui/message": _message,
        "ui/update-model-context": _update_model_context,
        "ui/request-display-mode": _display_mode,
    }

    # -- notifications and responses -----------------------------------------------------

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "ui/notifications/initialized":
            first = not self.initialized.is_set()
            self.initialized.set()
            if first:
                self.notify("ui/notifications/tool-input", {"arguments": self.arguments})
                if self.result is not None:
                    self._send_result()
        elif method == "ui/notifications/size-changed":
            self._resize(params)
        elif method == "notifications/message":
            level = params.get("level")
            data = json.dumps(params.get("data"), default=str)[:2000]
            log.log(logging.WARNING if level in ("warning", "error") else logging.INFO,
                    "app %s: %s", self.resource.uri, data)  # fmt: skip
        else:
            self.refusals.append(f"ignored notification {method[:100]!r} from the app")
            log.debug("mcpsync.apps: ignored notification %r", method[:100])

    def _resize(self, params: dict[str, Any]) -> None:
        def number(key: str) -> float | None:
            value = params.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None
            return float(min(max(value, 0), MAX_HEIGHT if key == "height" else 100_000))

        width, height = number("width"), number("height")
        if width is None and height is None:
            self.refusals.append("ui/notifications/size-changed without a number: ignored")
            return
        self.size = (width, height)
        self.post({"kind": "resize", "width": width, "height": height})

    def _on_response(self, rid: Any, msg: dict[str, Any]) -> None:
        with self._state:
            done = self._pending_host.pop(rid, None) if isinstance(rid, int) else None
        if done is not None:
            done.set()

    def set_result(self, result: Any) -> None:
        """The tool result arrived (or changed): tell the app."""
        self.result = result
        if self.initialized.is_set():
            self._send_result()

    def _send_result(self) -> None:
        self.notify("ui/notifications/tool-result", _dump(self.result))

    def set_host_context(self, **changes: Any) -> None:
        """Change the host context (``theme="dark"``, ...) and tell the app."""
        self.host_context.update(changes)
        self.notify("ui/notifications/host-context-changed", changes)

    def teardown(self, reason: str = "closed", timeout: float = 2.0) -> bool:
        """Ask the app to tear down (``ui/resource-teardown``), wait for its answer (bounded),
        then stop proxying. True when the app answered in time."""
        answered = False
        if self.initialized.is_set() and not self._closed:
            rid = next(self._host_ids)
            event = threading.Event()
            with self._state:
                self._pending_host[rid] = event
            self._to_app(
                {"id": rid, "method": "ui/resource-teardown", "params": {"reason": reason}}
            )
            answered = event.wait(timeout)
        self.close()
        return answered

    def close(self) -> None:
        """Stop the proxy thread and cancel what it still waits for. Idempotent."""
        self._closed = True
        self._proxy.stop()

    # -- the proxy's answers (on the proxy thread) ----------------------------------------

    def _finish(self, rid: Any, method: str, future: Future[Any]) -> None:
        try:
            answer = _dump(future.result(timeout=0))
        except ServerError as exc:
            self._error(rid, exc.code, f"{method}: the server answered: {exc}")
            return
        except MCPSyncError as exc:
            self._error(rid, REFUSED, f"{method}: {type(exc).__name__}: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - any failure becomes the app's error, never the kernel's
            self._error(rid, REFUSED, f"{method}: {type(exc).__name__}")
            return
        size = len(json.dumps(answer, separators=(",", ":")))
        if size > self.max_result_bytes:
            self._error(
                rid,
                REFUSED,
                f"{method}: the answer is {size} bytes, over the {self.max_result_bytes}-byte limit",
            )
            return
        self._reply(rid, answer)


_LATER = object()  # the answer is posted later (proxied, or waiting for a person)
_MISSING = object()


def _valid_id(rid: Any) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


class _Proxy:
    """The thread that sends the app's requests to the session and posts the answers."""

    def __init__(self, bridge: AppBridge, name: str) -> None:
        self._bridge = bridge
        self._name = name
        self._jobs: queue.Queue[tuple[Any, str, Any] | None] = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._futures: dict[Any, Future[Any]] = {}

    def start(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        bridge = self._bridge
        with self._lock:
            if self._stop.is_set():
                raise _Refused(REFUSED, f"{method}: the app was closed")
            if len(self._futures) >= bridge.max_in_flight:
                raise _Refused(
                    REFUSED,
                    f"{method} refused: {bridge.max_in_flight} requests from this app are "
                    "already waiting for the server",
                )
            if rid in self._futures:
                raise _Refused(INVALID_REQUEST, f"{method}: request id {rid!r} is already in use")
            self._futures[rid] = Future()  # reserved; replaced by the session's future
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"mcpsync-app[{self._name}]", daemon=True
                )
                self._thread.start()
        bridge.proxied.append((method, params))
        self._jobs.put((rid, method, params))

    def _run(self) -> None:
        bridge, session = self._bridge, self._bridge.session
        timeout = {} if bridge.call_timeout is None else {"timeout": bridge.call_timeout}
        while not self._stop.is_set():
            job = self._jobs.get()
            if job is None:
                return
            rid, method, payload = job
            if method == "done":  # a future finished: post its answer from this thread
                with self._lock:
                    self._futures.pop(rid, None)
                done_method, future = payload
                bridge._finish(rid, done_method, future)
                continue
            try:
                if method == "tools/call":
                    future = session.submit_call_tool(
                        payload["name"], payload["arguments"], **timeout
                    )
                else:
                    future = session.submit_read_resource(payload["uri"], **timeout)
            except MCPSyncError as exc:
                with self._lock:
                    self._futures.pop(rid, None)
                bridge._error(rid, REFUSED, f"{method}: {type(exc).__name__}: {exc}")
                continue
            with self._lock:
                self._futures[rid] = future
            future.add_done_callback(
                lambda f, rid=rid, method=method: self._jobs.put((rid, "done", (method, f)))
            )

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stop.set()
            futures = list(self._futures.values())
            thread = self._thread
        for future in futures:
            future.cancel()
        self._jobs.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
