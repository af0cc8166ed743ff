"""Paginated lists over any era: every page of ``tools/list`` & co. as one future.

Owns: ``collect_pages`` (follows ``nextCursor``, validates each item, stops past a
million items) and the capability contract of client requests (``NEEDS``,
``require``): a request whose server capability was not advertised is refused, before
anything is sent, in strict mode.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..errors import CapabilityError, MCPSyncError, ProtocolError
from . import Era, settle

__all__ = ["NEEDS", "collect_pages", "require"]

#: Which server capability each client->server method needs (absent: always allowed).
NEEDS: dict[str, tuple[str, ...]] = {
    "tools/list": ("tools",),
    "tools/call": ("tools",),
    "resources/list": ("resources",),
    "resources/templates/list": ("resources",),
    "resources/read": ("resources",),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "prompts/list": ("prompts",),
    "prompts/get": ("prompts",),
    "completion/complete": ("completions",),
    "logging/setLevel": ("logging",),
    # the skills extension (SEP-2640): only after the server declared it
    "skills/list": ("extensions", "io.modelcontextprotocol/skills"),
    "skills/get": ("extensions", "io.modelcontextprotocol/skills"),
}

_MAX_ITEMS = 1_000_000


def require(capabilities: dict[str, Any], method: str, server: str) -> None:
    """``CapabilityError`` if ``capabilities`` lack what ``method`` needs."""
    path = NEEDS.get(method)
    node: Any = capabilities
    for key in path or ():
        if not isinstance(node, dict) or node.get(key) in (None, False):
            raise CapabilityError(
                f"server {server!r} did not advertise the {'.'.join(path or ())!r} capability needed for {method}; "
                "nothing was sent (connect with strict=False for lax servers)"
            )
        node = node[key]


def collect_pages(
    era: Era,
    method: str,
    key: str,
    validate_item: Callable[[Any], Any],
    what: str,
    params: dict[str, Any] | None = None,
) -> Future[Any]:
    """A future of every item over all pages of ``method``'s ``key`` list; ``validate_item``
    turns one raw item into its typed form (``what`` names it in errors)."""
    items: list[Any] = []
    result: Future[Any] = Future()

    def fetch(cursor: str | None) -> None:
        page_params = dict(params or {})
        if cursor is not None:
            page_params["cursor"] = cursor
        try:
            page = era.page(method, page_params or None)
        except MCPSyncError as exc:
            settle(result, exc)
            return
        result._mcpsync_call = getattr(page, "_mcpsync_call", None)  # type: ignore[attr-defined]
        page.add_done_callback(on_page)

    def on_page(page: Future[Any]) -> None:
        if page.cancelled() or result.done():
            return
        error = page.exception()
        if error is not None:
            settle(result, error)
            return
        data = page.result()
        try:
            found = data.get(key) if isinstance(data, dict) else None
            if not isinstance(found, list):
                raise ProtocolError(f"{method} result has no {key!r} list")
            items.extend(validate_item(item) for item in found)
        except ProtocolError as exc:
            settle(result, exc)
            return
        except Exception as exc:  # noqa: BLE001 - a model's validation error, whatever its type
            settle(result, ProtocolError(f"server sent an invalid {what} in {method}: {exc}"))
            return
        cursor = data.get("nextCursor")
        if cursor:
            if len(items) > _MAX_ITEMS:
                settle(result, ProtocolError(f"{method}: more than a million items; stopping"))
                return
            fetch(cursor)
        else:
            settle(result, None, items)

    fetch(None)
    return result
