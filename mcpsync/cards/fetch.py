"""Reading Server Cards over HTTP before any session: where to look, and how safely.

Owns: ``server_card`` (one card for an MCP URL or a domain: the URL itself when it names a
card, ``<mcp-url>/server-card`` (the reserved default), the domain catalog
``/.well-known/mcp/catalog.json`` then ``/.well-known/ai-catalog.json``, then the older
well-known card paths), ``server_cards`` (every card a domain's catalog lists),
``CardNotFound`` and ``CardCache`` (responses kept as ``Cache-Control: max-age`` allows,
revalidated with ``If-None-Match``), ``CardTimeout``. One deadline (``timeout``) bounds a
whole call, all places, redirects and body reads; every GET is capped in size (1 MiB, while
read) and nesting (64 levels), follows at most three redirects and never from https to
http, and sends no credential: a card is public metadata and advisory only. The wire rules
are ``mcpsync.transports.http.fetch``'s.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from ..transports.http.fetch import Deadline, Fetched, fetch, load_json
from .model import CARD_MEDIA_TYPE, CardError, ServerCard, parse_card, parse_catalog

__all__ = [
    "CATALOG_PATHS",
    "LEGACY_CARD_PATHS",
    "CardCache",
    "CardNotFound",
    "CardTimeout",
    "server_card",
    "server_cards",
]

#: domain catalogs, in the order tried (the MCP Catalog, then the AI Catalog it subsets)
CATALOG_PATHS = ("/.well-known/mcp/catalog.json", "/.well-known/ai-catalog.json")
#: where earlier drafts put a card (tried last, for servers that still serve them)
LEGACY_CARD_PATHS = (
    "/.well-known/mcp/server-card",
    "/.well-known/mcp/server-card.json",
    "/.well-known/mcp-server-card",
    "/.well-known/mcp.json",
)
MAX_BYTES = 1024 * 1024
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)", re.I)


class CardNotFound(CardError, LookupError):
    """No Server Card at any of the places tried (``tried`` lists them)."""

    def __init__(self, message: str, tried: Sequence[str]) -> None:
        self.tried = list(tried)
        super().__init__(message + ": tried " + ", ".join(self.tried))


class CardTimeout(CardError, TimeoutError):
    """The whole ``server_card``/``server_cards`` call ran past its ``timeout`` (every place
    tried, every redirect and body read count against one deadline)."""


class CardCache:
    """Card and catalog responses by URL, fresh while ``max-age`` lasts, then revalidated."""

    def __init__(self, max_entries: int = 256) -> None:
        self.max_entries = max_entries
        self._entries: dict[str, tuple[float, str | None, Any]] = {}
        self._lock = threading.Lock()

    def get(self, url: str) -> tuple[bool, str | None, Any]:
        """(fresh, etag, document) for ``url``; document None when nothing is kept."""
        with self._lock:
            entry = self._entries.get(url)
        if entry is None:
            return False, None, None
        expires, etag, document = entry
        return time.monotonic() < expires, etag, document

    def put(self, url: str, response: Fetched | requests.Response, document: Any) -> None:
        """Keep ``document`` as the reply's ``Cache-Control``/``ETag`` headers allow."""
        control = response.headers.get("Cache-Control", "")
        match = _MAX_AGE.search(control)
        age = 0 if "no-store" in control.lower() or not match else min(int(match.group(1)), 86400)
        etag = response.headers.get("ETag")
        if age <= 0 and not etag:
            return
        with self._lock:
            if len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)))
            self._entries[url] = (time.monotonic() + age, etag, document)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


CARD_CACHE = CardCache()


def _get_json(
    url: str, accept: str, http: requests.Session, deadline: Deadline, cache: CardCache | None
) -> Any:
    """The JSON document at ``url``; None when there is none (404/410, not JSON, an error
    status, unreachable); ``CardError`` when it is JSON that cannot be used, too large or
    too deep, ``CardTimeout`` when ``deadline`` passes (while the body is read too)."""
    fresh, etag, kept = cache.get(url) if cache else (False, None, None)
    if fresh:
        return kept
    headers = {"Accept": accept}
    if etag and kept is not None:
        headers["If-None-Match"] = etag
    reply = fetch(
        http, url, deadline=deadline, what="card document", error=CardError,
        timeout_error=CardTimeout, headers=headers, max_bytes=MAX_BYTES, max_redirects=3,
    )  # fmt: skip
    if reply.status == 304 and kept is not None:
        if cache:
            cache.put(url, reply, kept)
        return kept
    if reply.status != 200:
        return None
    kind = reply.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if kind and "json" not in kind:
        return None  # e.g. an HTML page at that path: no card here
    document = load_json(reply.body, what="card document", url=reply.url, error=CardError)
    if cache:
        cache.put(url, reply, document)
    return document


def _origin(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CardError(f"{url!r} is not an http(s) URL")
    return f"{parts.scheme}://{parts.netloc}"


class _Using:
    """The caller's session, or one of ours (no .netrc credentials on a public document)
    closed at the end of the call, so no connection outlives it."""

    def __init__(self, http_session: requests.Session | None) -> None:
        self.own = http_session is None
        if http_session is None:
            http_session = requests.Session()
            http_session.trust_env = False
        self.http = http_session

    def __enter__(self) -> requests.Session:
        return self.http

    def __exit__(self, *exc: object) -> None:
        if self.own:
            self.http.close()


def _catalog_cards(
    origin: str,
    http: requests.Session,
    deadline: Deadline,
    cache: CardCache | None,
    tried: list[str],
) -> list[ServerCard]:
    for path in CATALOG_PATHS:
        url = origin + path
        tried.append(url)
        document = _get_json(
            url, "application/ai-catalog+json, application/json", http, deadline, cache
        )
        if document is None:
            continue
        cards = []
        for entry in parse_catalog(document, url):
            if entry.data is not None:
                cards.append(parse_card(entry.data, f"{url} ({entry.identifier or 'inline'})"))
                continue
            assert entry.url is not None
            card_url = urljoin(url, entry.url)
            _origin(card_url)
            found = _get_json(
                card_url, f"{CARD_MEDIA_TYPE}, application/json", http, deadline, cache
            )
            if found is None:
                raise CardError(
                    f"{url}: entry {entry.identifier or entry.url!r} points at {card_url}, which has no card"
                )
            cards.append(parse_card(found, card_url))
        return cards
    return []


def server_cards(
    url: str,
    *,
    http_session: requests.Session | None = None,
    timeout: float = 10.0,
    cache: CardCache | None = CARD_CACHE,
) -> list[ServerCard]:
    """Every Server Card the catalog of ``url``'s domain lists (``CardNotFound`` without one).

    ``timeout`` bounds the whole call (the catalogs, every entry's card, redirects and body
    reads): past it, ``CardTimeout``."""
    tried: list[str] = []
    deadline = Deadline.checked(timeout)
    with _Using(http_session) as http:
        cards = _catalog_cards(_origin(url), http, deadline, cache, tried)
    if not cards:
        raise CardNotFound(f"no catalog with Server Cards for {_origin(url)}", tried)
    return cards


def _matches(card: ServerCard, url: str) -> bool:
    want = url.rstrip("/")
    return any(r.url.rstrip("/") == want for r in card.remotes)


def server_card(
    url: str,
    *,
    http_session: requests.Session | None = None,
    timeout: float = 10.0,
    cache: CardCache | None = CARD_CACHE,
) -> ServerCard:
    """The Server Card for an MCP URL or a domain, read before any session.

    Tried in order: ``url`` itself when it names a card (ends in ``/server-card`` or
    ``.json``); ``<url>/server-card`` when ``url`` has a path; the domain catalog
    (``/.well-known/mcp/catalog.json``, ``/.well-known/ai-catalog.json``: the card whose
    remote is ``url``, or its only card); the older well-known card paths. A place that
    answers with a malformed card raises ``CardError``; nothing anywhere raises
    ``CardNotFound``. The card is advisory: runtime values win once connected.

    ``timeout`` bounds the whole call, every place tried, every redirect and every body
    read (a body that trickles in is cut): past it, ``CardTimeout`` (a ``CardError`` and a
    ``TimeoutError``). A document over 1 MiB or nested deeper than 64 levels is a
    ``CardError``.
    """
    deadline = Deadline.checked(timeout)
    _origin(url)
    with _Using(http_session) as http:
        return _find_card(url, http, deadline, cache)


def _find_card(
    url: str, http: requests.Session, deadline: Deadline, cache: CardCache | None
) -> ServerCard:
    origin = _origin(url)
    path = urlsplit(url).path.rstrip("/")
    tried: list[str] = []
    accept = f"{CARD_MEDIA_TYPE}, application/json"
    direct = [url] if path.endswith(("/server-card", ".json")) else []
    if not direct and path:
        direct = [url.rstrip("/") + "/server-card"]
    for candidate in direct:
        tried.append(candidate)
        document = _get_json(candidate, accept, http, deadline, cache)
        if document is not None:
            return parse_card(document, candidate)
    cards = _catalog_cards(origin, http, deadline, cache, tried)
    matching = [c for c in cards if _matches(c, url)] if path else []
    if len(matching) == 1 or (len(cards) == 1 and not matching):
        return (matching or cards)[0]
    if cards:
        names = ", ".join(c.name for c in cards)
        raise CardError(
            f"the catalog of {origin} lists {len(cards)} servers ({names}); none is {url}: use server_cards()"
        )
    for legacy in LEGACY_CARD_PATHS:
        candidate = origin + legacy
        tried.append(candidate)
        document = _get_json(candidate, accept, http, deadline, cache)
        if document is not None:
            return parse_card(document, candidate)
    raise CardNotFound(f"no Server Card for {url}", tried)
