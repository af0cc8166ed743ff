"""``Session.connect(url, card=...)``: reach a server through its Server Card (opt-in).

Owns: ``resolve_target``, the one step ``Session.connect`` takes when given ``card``: read
the card for ``target`` (``fetch.server_card``), choose a remote, fill it, and return the
target, headers and transport to connect with. Opt-in only: a plain URL is always an MCP
endpoint, never a guess. Whatever the caller passed wins over the card (its headers, a
transport other than "auto"); the protocol version is left to the bring-up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .fetch import server_card
from .fill import Ask, choose_remote, fill
from .model import CardError

__all__ = ["CardOption", "resolve_target"]

#: ``connect(card=...)``: True (defaults only), a mapping of input values, or an ``ask`` callable
CardOption = bool | Mapping[str, str] | Callable[..., Any]


def resolve_target(
    target: Any,
    card: CardOption,
    *,
    headers: Mapping[str, str] | None,
    transport: str,
    timeout: float | None,
    http_session: Any = None,
) -> tuple[str, dict[str, str], Any]:
    """(target, headers, transport) for ``Session.connect`` from the card of ``target``."""
    if not isinstance(target, str) or "://" not in target:
        raise CardError("connect(card=...) needs an http(s) URL as the target")
    values: Mapping[str, str] = card if isinstance(card, Mapping) else {}
    ask: Ask | None = card if callable(card) else None  # type: ignore[assignment]
    found = server_card(target, http_session=http_session, timeout=timeout or 10.0)
    wanted = {"streamable-http": "streamable-http", "sse": "sse", "http": "streamable-http"}.get(
        transport
    )
    endpoint = fill(found, choose_remote(found, transport=wanted), values=values, ask=ask)
    merged = {**endpoint.headers, **dict(headers or {})}  # the caller's headers win
    return endpoint.url, merged, transport if transport != "auto" else endpoint.transport
