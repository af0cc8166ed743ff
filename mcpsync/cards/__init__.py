"""Server Cards (SEP-2127, draft): what a remote MCP server says about itself, before any session.

Owns: the public names. ``server_card(url)`` reads a card (``fetch``), ``parse_card``
checks one (``model``), ``choose_remote`` / ``fill`` turn it into an ``Endpoint`` to
connect to (``fill``), ``resolve_target`` is ``Session.connect(url, card=...)``
(``connect``). A card is advisory: runtime values win, nothing security-relevant is
decided from it. See README.md.

    card = mcpsync.server_card("https://example.com/mcp")
    endpoint = mcpsync.cards.fill(card, ask=lambda name, spec: getpass.getpass(name + ": "))
    with mcpsync.Session.connect(**endpoint.connect_args()) as s: ...
"""

from __future__ import annotations

from .connect import resolve_target
from .fetch import (
    CARD_CACHE,
    CATALOG_PATHS,
    LEGACY_CARD_PATHS,
    CardCache,
    CardNotFound,
    CardTimeout,
    server_card,
    server_cards,
)
from .fill import Ask, Endpoint, choose_remote, fill
from .model import (
    CARD_MEDIA_TYPE,
    CardEntry,
    CardError,
    HeaderInput,
    Input,
    Remote,
    ServerCard,
    parse_card,
    parse_catalog,
)

__all__ = [
    "Ask",
    "CARD_CACHE",
    "CARD_MEDIA_TYPE",
    "CATALOG_PATHS",
    "CardCache",
    "CardEntry",
    "CardError",
    "CardNotFound",
    "CardTimeout",
    "Endpoint",
    "HeaderInput",
    "Input",
    "LEGACY_CARD_PATHS",
    "Remote",
    "ServerCard",
    "choose_remote",
    "fill",
    "parse_card",
    "parse_catalog",
    "resolve_target",
    "server_card",
    "server_cards",
]
