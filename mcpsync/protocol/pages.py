"""Paginated lists over any era: every page of ``tools/list`` & co. as one future.

Owns: ``collect_pages`` (follows ``nextCursor`` under one deadline for the whole list,
validates each item, stops at a cursor seen before, past ``MAX_PAGES`` pages or a million
items) and the capability contract of client requests (``NEEDS``,
``require``): a request whose server capability was not advertised is refused, before
anything is sent, in strict mode.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..errors import CapabilityError, MCPSyncError, ProtocolError, RequestTimeout
from ..rpc.calls import CallFuture, Default, call_of
from . import UNSET, Era, settle

__all__ = ["MAX_PAGES", "NEEDS", "collect_pages", "require"]

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
#: pages one list may take (a server with a million items sends them in pages of 100 or more)
MAX_PAGES = 10_000
#: characters of a cursor shown in an error
_SHOWN = 80
#: a page that timed out this close to the list's deadline ran into it
_EARLY = 0.05


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
    timeout: float | None | Default = UNSET,
) -> Future[Any]:
    """A future of every item over all pages of ``method``'s ``key`` list; ``validate_item``
    turns one raw item into its typed form (``what`` names it in errors).

    ``timeout`` (None: no limit; ``UNSET``: each page the connection's default) bounds the
    whole list: each page is sent with what is left of it, and ``RequestTimeout`` names the list when it runs out. A ``nextCursor`` this list
    was already given, more than ``MAX_PAGES`` pages, or more than a million items end it
    with a ``ProtocolError`` naming the cursor. Cancelling the future cancels the page in
    flight (the server is told)."""
    items: list[Any] = []
    result = CallFuture()
    deadline = (
        None if timeout is None or isinstance(timeout, Default) else time.monotonic() + timeout
    )
    seen: set[str] = set()
    pages = [0]  # pages received
    current: list[Future[Any] | None] = [None]

    def fail_late(cause: BaseException | None = None) -> None:
        error = RequestTimeout(
            f"{method}: the list did not arrive whole within timeout={timeout} s "
            f"({pages[0]} pages, {len(items)} items received)"
        )
        error.__cause__ = cause
        settle(result, error)

    def fetch(cursor: str | None) -> None:
        while not result.done():  # a loop, not recursion: replies may be there at once
            page_params = dict(params or {})
            if cursor is not None:
                page_params["cursor"] = cursor
            if deadline is None:
                left: float | None | Default = timeout
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    fail_late()
                    return
            try:
                page = era.page(method, page_params or None, left)
            except MCPSyncError as exc:
                settle(result, exc)
                return
            current[0] = page
            result.call = call_of(page)
            if not page.done():
                page.add_done_callback(on_page)
                return
            cursor = take(page)
            if cursor is None:
                return

    def on_page(page: Future[Any]) -> None:
        cursor = take(page)
        if cursor is not None:
            fetch(cursor)

    def take(page: Future[Any]) -> str | None:
        """Take one page's items; the next cursor, or None when the list is settled."""
        if page.cancelled() or result.done():
            return None
        error = page.exception()
        if error is not None:
            if isinstance(error, RequestTimeout) and deadline is not None:
                if time.monotonic() >= deadline - _EARLY:
                    fail_late(error)  # the list's deadline, not one page's
                    return None
            settle(result, error)
            return None
        data = page.result()
        pages[0] += 1
        try:
            found = data.get(key) if isinstance(data, dict) else None
            if not isinstance(found, list):
                raise ProtocolError(f"{method} result has no {key!r} list")
            items.extend(validate_item(item) for item in found)
        except ProtocolError as exc:
            settle(result, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - a model's validation error, whatever its type
            settle(result, ProtocolError(f"server sent an invalid {what} in {method}: {exc}"))
            return None
        cursor = data.get("nextCursor")
        if not cursor:
            settle(result, None, items)
            return None
        problem = None
        if not isinstance(cursor, str):
            problem = "a nextCursor that is not a string"
        elif cursor in seen:
            problem = "a nextCursor it had already sent (the pages would go round for ever)"
        elif pages[0] >= MAX_PAGES:
            problem = f"more than {MAX_PAGES} pages"
        elif len(items) > _MAX_ITEMS:
            problem = "more than a million items"
        if problem is not None:
            settle(
                result,
                ProtocolError(
                    f"{method}: the server sent {problem}; stopping after {pages[0]} pages "
                    f"and {len(items)} items (nextCursor {_show(cursor)})"
                ),
            )
            return None
        seen.add(cursor)
        return cursor  # type: ignore[no-any-return]

    def on_result(_: Future[Any]) -> None:
        page = current[0]
        if result.cancelled() and page is not None and not page.done():
            page.cancel()  # the caller gave up (Ctrl-C, cancel()): so does the page in flight

    result.add_done_callback(on_result)
    fetch(None)
    return result


def _show(cursor: Any) -> str:
    """A cursor for a message: its repr, at most ``_SHOWN`` characters."""
    text = repr(cursor)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 5]}...{text[-2:]}"
