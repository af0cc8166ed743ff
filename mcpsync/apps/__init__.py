"""MCP Apps (extension ``io.modelcontextprotocol/ui``, spec 2026-01-26) rendered in a notebook.

Owns: the notebook user's entry points. ``call(session, tool, arguments)`` calls a tool and
returns an ``AppView`` (an ``anywidget`` widget: JupyterLab, Notebook 7, VS Code) showing
the tool's ``ui://`` app; ``render(session, tool, result)`` does the same for a result in
hand; ``EXTENSION`` / ``settings()`` are what ``Session.connect(extensions=...)`` advertises
(``settings()`` raises ``ConfigError`` when ``anywidget`` is missing: the client offers the
extension only when it can render it).

Example (in a notebook)::

    import mcpsync, mcpsync.apps
    s = mcpsync.Session.connect(argv, extensions=mcpsync.apps.EXTENSION)
    mcpsync.apps.call(s, "get-time")        # the app, live, in the cell output

The package: ``resource`` (tool ``_meta.ui``, the ``ui://`` resource and its CSP),
``bridge`` (``AppBridge``: the app <-> host JSON-RPC, tested without a browser),
``widget`` (``AppView`` and its front-end ``app_view.js``, shipped in the package),
``demo`` (a standard-library MCP Apps server, ``python -m mcpsync.apps.demo``).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .bridge import AppBridge, AppMessage
from .resource import (
    EXTENSION_ID,
    MIME_TYPE,
    PROTOCOL_VERSION,
    AppError,
    AppResource,
    content_security_policy,
    read_app_resource,
    resource_uri,
    visibility,
)

if TYPE_CHECKING:
    from .widget import AppView

__all__ = [
    "EXTENSION",
    "EXTENSION_ID",
    "MIME_TYPE",
    "PROTOCOL_VERSION",
    "AppBridge",
    "AppError",
    "AppMessage",
    "AppResource",
    "AppView",
    "app_tools",
    "call",
    "content_security_policy",
    "read_app_resource",
    "render",
    "resource_uri",
    "settings",
    "visibility",
]

#: what ``Session.connect(extensions=mcpsync.apps.EXTENSION)`` advertises
EXTENSION: Mapping[str, Mapping[str, Any]] = {EXTENSION_ID: {"mimeTypes": [MIME_TYPE]}}


def settings() -> dict[str, Any]:
    """The extension's client settings; ConfigError when this Python cannot render apps."""
    if importlib.util.find_spec("anywidget") is None:
        raise ConfigError(
            "MCP Apps need anywidget to render (pip install 'mcpsync[apps]' or pip install "
            "anywidget); the extension is not advertised without it"
        )
    return {"mimeTypes": [MIME_TYPE]}


def app_tools(session: Any) -> dict[str, str]:
    """Tool name -> ``ui://`` URI for every listed tool that renders as an app."""
    return {t.name: uri for t in session.list_tools() if (uri := resource_uri(t))}


def _tool(session: Any, name: str, timeout: float | None = None) -> Any:
    kwargs = {} if timeout is None else {"timeout": timeout}
    for tool in session.list_tools(**kwargs):
        if tool.name == name:
            return tool
    raise AppError(f"session {session.name!r} lists no tool {name!r}")


def _view_class() -> type[AppView]:
    """``AppView``; ``ConfigError`` naming the extra when anywidget cannot be imported."""
    try:
        from .widget import AppView
    except ImportError as exc:
        raise ConfigError(
            f"MCP Apps need anywidget to render (pip install 'mcpsync[apps]'): {exc}"
        ) from exc
    return AppView


def render(
    session: Any,
    tool: str | Any,
    result: Any,
    *,
    arguments: Mapping[str, Any] | None = None,
    **options: Any,
) -> AppView:
    """An ``AppView`` for ``result`` of ``tool`` (a name or the listed ``Tool``); display it
    (the last expression of a cell) to see the app. ``options`` go to ``AppView``;
    ``ConfigError`` (naming the extra) when anywidget cannot be imported."""
    tool_obj = _tool(session, tool) if isinstance(tool, str) else tool
    return _render(session, tool_obj, result, arguments, None, options)


def _render(
    session: Any,
    tool_obj: Any,
    result: Any,
    arguments: Mapping[str, Any] | None,
    deadline: float | None,
    options: dict[str, Any],
) -> AppView:
    view = _view_class()
    uri = resource_uri(tool_obj)
    if uri is None:
        raise AppError(f"tool {tool_obj.name!r} has no _meta.ui.resourceUri: it is not an app")
    resource = read_app_resource(session, uri, timeout=_left(deadline))
    return view(session, tool_obj, resource, arguments=arguments, result=result, **options)


def _left(deadline: float | None) -> float | None:
    """What is left of ``deadline`` (monotonic), at least a sliver; None: no bound."""
    return None if deadline is None else max(deadline - time.monotonic(), 0.001)


def call(
    session: Any,
    tool: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    **options: Any,
) -> AppView:
    """Call ``tool`` and return the ``AppView`` of its result (``view.result``); without
    anywidget, ``ConfigError`` before anything is sent. ``timeout`` bounds the whole of it:
    finding the tool, the call and reading the app's ``ui://`` resource."""
    _view_class()
    deadline = None if timeout is None else time.monotonic() + timeout
    tool_obj = _tool(session, tool, _left(deadline))
    if resource_uri(tool_obj) is None:
        raise AppError(f"tool {tool!r} has no _meta.ui.resourceUri: it is not an app")
    kwargs = {} if deadline is None else {"timeout": _left(deadline)}
    result = session.call_tool(tool, arguments, **kwargs)
    return _render(session, tool_obj, result, arguments, deadline, options)


def __getattr__(name: str) -> Any:
    if name == "AppView":  # imports anywidget: only when asked for
        from .widget import AppView

        return AppView
    raise AttributeError(name)
