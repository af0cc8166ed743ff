"""The notebook widget that shows an MCP App: ``AppView``, an ``anywidget`` widget.

Owns: the widget's synced state (the app's HTML with its policy as ``srcdoc``, the
iframe's height, border and label, the message size limit the front-end enforces) and the
custom-message link between the front-end (``app_view.js``, shipped in this package and
loaded by anywidget from disk: no JavaScript is fetched at run time) and the Python
``AppBridge``, which answers everything the app says.

The front-end puts the app in ``<iframe sandbox="allow-scripts" srcdoc=...>`` (an opaque
origin: no access to the notebook page, its cookies or its storage), relays the app's
``postMessage`` traffic to the kernel and back, and stops relaying if the frame navigates
away from the document it was given.
"""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import Mapping
from typing import Any

import anywidget
import traitlets

from .bridge import MAX_MESSAGE_BYTES, AppBridge, OpenLinks
from .resource import AppResource

__all__ = ["AppView"]

_HERE = pathlib.Path(__file__).parent
_MAX_VARIABLES = 200


class AppView(anywidget.AnyWidget):  # type: ignore[misc]
    """An MCP App in a notebook cell. Display it (the last expression of a cell).

    ``on_message(AppMessage) -> bool``: receives the app's ``ui/message`` requests (declined
    when not given). ``open_links``: "ask" (default: the widget shows the link and the person
    opens or dismisses it), "decline", or a callable ``url -> bool``; only http(s) links are
    ever considered. ``theme``: "light" / "dark" (default: the notebook's own theme).
    """

    _esm = _HERE / "app_view.js"
    _css = _HERE / "app_view.css"

    srcdoc = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Int(320).tag(sync=True)
    border = traitlets.Bool(True).tag(sync=True)
    label = traitlets.Unicode("").tag(sync=True)
    max_bytes = traitlets.Int(MAX_MESSAGE_BYTES).tag(sync=True)
    follow_theme = traitlets.Bool(True).tag(sync=True)
    app_id = traitlets.Unicode("").tag(sync=True)  # one live view per app (app_view.js)

    def __init__(
        self,
        session: Any,
        tool: Any,
        resource: AppResource,
        *,
        arguments: Mapping[str, Any] | None = None,
        result: Any = None,
        on_message: Any = None,
        open_links: OpenLinks = "ask",
        theme: str | None = None,
        height: int = 320,
        host_context: Mapping[str, Any] | None = None,
        **bridge_options: Any,
    ) -> None:
        context = dict(host_context or {})
        if theme is not None:
            context["theme"] = theme
        super().__init__(
            srcdoc=resource.srcdoc,
            height=height,
            border=resource.prefers_border is not False,
            label=f"{tool.name} · {resource.uri}",
            max_bytes=bridge_options.get("max_message_bytes", MAX_MESSAGE_BYTES),
            follow_theme=theme is None,
            app_id=uuid.uuid4().hex,
        )
        self.bridge = AppBridge(
            session,
            tool,
            resource,
            post=self._post,
            arguments=arguments,
            result=result,
            host_context=context,
            on_message=on_message,
            open_links=open_links,
            **bridge_options,
        )
        self.on_msg(self._on_front)

    # what a notebook user reads
    @property
    def result(self) -> Any:
        return self.bridge.result

    @property
    def tool(self) -> Any:
        return self.bridge.tool

    @property
    def resource(self) -> AppResource:
        return self.bridge.resource

    @property
    def refusals(self) -> list[str]:
        return self.bridge.refusals

    def set_theme(self, theme: str) -> None:
        """Switch the app to "light" or "dark" (``ui/notifications/host-context-changed``)."""
        self.follow_theme = False
        self.bridge.set_host_context(theme=theme)

    def close(self) -> None:
        """Stop the app: its proxy thread, then the widget (the app is told first)."""
        if not self.bridge._closed and self.bridge.initialized.is_set():
            self.bridge.teardown("closed by the notebook", timeout=0)
        self.bridge.close()
        super().close()

    def __repr__(self) -> str:
        state = "shown" if self.bridge.initialized.is_set() else "not shown yet"
        return f"<mcpsync.apps.AppView {self.tool.name!r} {self.resource.uri} ({state})>"

    # the front-end link
    def _post(self, envelope: dict[str, Any]) -> None:
        self.send(envelope)

    def _on_front(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("kind")
        if kind == "rpc":
            self.bridge.receive(content.get("message"))
        elif kind == "link":
            self.bridge.link_decision(str(content.get("token")), content.get("accepted") is True)
        elif kind == "host":
            self._host_from_front(content)
        elif kind == "dropped":
            size = content.get("bytes")
            self.bridge.refusals.append(
                f"the front-end dropped a {size}-byte message from the app (limit {self.max_bytes})"
            )

    def _host_from_front(self, content: dict[str, Any]) -> None:
        """The notebook's theme and style variables, reported by the front-end."""
        changes: dict[str, Any] = {}
        theme = content.get("theme")
        if self.follow_theme and theme in ("light", "dark"):
            changes["theme"] = theme
        variables = content.get("variables")
        if isinstance(variables, dict):
            kept = {
                k: v
                for k, v in list(variables.items())[:_MAX_VARIABLES]
                if isinstance(k, str) and k.startswith("--") and isinstance(v, str) and len(v) < 500
            }
            if kept:
                changes["styles"] = {"variables": kept}
        if not changes:
            return
        if self.bridge.initialized.is_set():
            self.bridge.set_host_context(**changes)
        else:
            self.bridge.host_context.update(changes)
