"""Reading Server Cards over HTTP before any session: where to look, and how safely.

Owns: ``server_card`` (one card for an MCP URL or a domain: the URL itself when it names a
card, ``<mcp-url>/server-card`` (the reserved default), the domain catalog
``/.well-known/mcp/catalog.json`` then ``/.well-known/ai-catalog.json``, then the older
well-known card paths), ``server_cards`` (every card a domain's catalog lists),
``CardNotFound`` and ``CardCache`` (responses kept as ``Cache-Control: max-age`` allows,
revalidated with ``If-None-Match``). Every GET is bounded in time and size (1 MiB), follows
at most three redirects and never from https to http, and sends no credential: a card is
public metadata and advisory only.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from .model import CARD_MEDIA_TYPE, CardError, ServerCard, parse_card, parse_catalog

__all__ = [
    "CATALOG_PATHS",
    "LEGACY_CARD_PATHS",
    "CardCache",
    "CardNotFound",
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

    def put(self, url: str, response: requests.Response, document: Any) -> None:
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
    url: str, accept: str, http: requests.Session, timeout: float, cache: CardCache | None
) -> Any:
    """The JSON document at ``url``; None when there is none (404/410, not JSON, or
    an error status); ``CardError`` when it is JSON that cannot be used."""
    fresh, etag, kept = cache.get(url) if cache else (False, None, None)
    if fresh:
        return kept
    headers = {"Accept": accept}
    if etag and kept is not None:
        headers["If-None-Match"] = etag
    current = url
    deadline = time.monotonic() + timeout
    for _ in range(4):
        left = max(deadline - time.monotonic(), 0.1)
        try:
            response = http.get(
                current, headers=headers, timeout=left, stream=True, allow_redirects=False
            )
        except requests.RequestException:
            return None
        with response:
            if response.status_code in (301, 302, 303, 307, 308):
                target = urljoin(current, response.headers.get("Location", ""))
                if urlsplit(target).scheme not in ("http", "https") or (
                    urlsplit(current).scheme == "https" and urlsplit(target).scheme != "https"
                ):
                    raise CardError(f"{url}: refusing a redirect to {target!r}")
                current = target
                continue
            if response.status_code == 304 and kept is not None:
                if cache:
                    cache.put(url, response, kept)
                return kept
            if response.status_code != 200:
                return None
            kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if kind and "json" not in kind:
                return None  # e.g. an HTML page at that path: no card here
            body = b""
            for chunk in response.iter_content(65536):
                body += chunk
                if len(body) > MAX_BYTES:
                    raise CardError(f"{url}: larger than {MAX_BYTES} bytes; not read")
            try:
                document = json.loads(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise CardError(f"{url}: not valid JSON ({exc})") from None
            if cache:
                cache.put(url, response, document)
            return document
    raise CardError(f"{url}: too many redirects")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CardError(f"{url!r} is not an http(s) URL")
    return f"{parts.scheme}://{parts.netloc}"


def _http(http_session: requests.Session | None) -> requests.Session:
    if http_session is not None:
        return http_session
    session = requests.Session()
    session.trust_env = False  # no .netrc credentials on a public document
    return session


def _catalog_cards(
    origin: str, http: requests.Session, timeout: float, cache: CardCache | None, tried: list[str]
) -> list[ServerCard]:
    for path in CATALOG_PATHS:
        url = origin + path
        tried.append(url)
        document = _get_json(
            url, "application/ai-catalog+json, application/json", http, timeout, cache
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
                card_url, f"{CARD_MEDIA_TYPE}, application/json", http, timeout, cache
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
    """Every Server Card the catalog of ``url``'s domain lists (``CardNotFound`` without one)."""
    tried: list[str] = []
    cards = _catalog_cards(_origin(url), _http(http_session), timeout, cache, tried)
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
    """
    origin = _origin(url)
    http = _http(http_session)
    path = urlsplit(url).path.rstrip("/")
    tried: list[str] = []
    accept = f"{CARD_MEDIA_TYPE}, application/json"
    direct = [url] if path.endswith(("/server-card", ".json")) else []
    if not direct and path:
        direct = [url.rstrip("/") + "/server-card"]
    for candidate in direct:
        tried.append(candidate)
        document = _get_json(candidate, accept, http, timeout, cache)
        if document is not None:
            return parse_card(document, candidate)
    cards = _catalog_cards(origin, http, timeout, cache, tried)
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
        document = _get_json(candidate, accept, http, timeout, cache)
        if document is not None:
            return parse_card(document, candidate)
    raise CardNotFound(f"no Server Card for {url}", tried)
