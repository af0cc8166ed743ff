"""The cookies of the fast HTTP path.

Owns: ``Cookies``, a session's ``requests`` cookie jar as the fast pool uses it: a reply's
``Set-Cookie`` fields kept (``keep``), and the ``Cookie`` field for a request's URL
(``field``), both by ``http.cookiejar``'s rules (domain, path, expiry, ``Secure``), as
``requests`` would send them. Asking the jar costs ~30 us, so a URL's field is reused
until a reply sets a cookie or ``RECHECK`` seconds pass (an expired cookie stops being sent
within that).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import requests
from requests.cookies import RequestsCookieJar, extract_cookies_to_jar, get_cookie_header

__all__ = ["Cookies", "RECHECK"]

#: seconds a URL's ``Cookie`` field is reused before the jar is asked again
RECHECK = 1.0
#: request URLs remembered (a session talks to one endpoint, a few at the most)
_URLS = 32


class Cookies:
    """The jar of one ``requests.Session`` for the fast path (see the module docstring)."""

    def __init__(self, jar: RequestsCookieJar) -> None:
        self.jar = jar
        self.active = False  # a reply set a cookie: requests carry the jar's from now on
        self._requests: dict[str, requests.PreparedRequest] = {}  # URL -> as the jar wants
        self._fields: dict[str, tuple[dict[str, str] | None, float]] = {}  # URL -> (field, until)

    def _request(self, url: str) -> requests.PreparedRequest:
        found = self._requests.get(url)
        if found is None:
            if len(self._requests) >= _URLS:
                self._requests.clear()
            found = self._requests[url] = requests.Request("GET", url).prepare()
        return found

    def keep(self, url: str, response: Any) -> None:
        """The ``Set-Cookie`` fields of ``response`` (a reply to ``url``) into the jar."""
        extract_cookies_to_jar(self.jar, self._request(url), response)
        self._fields = {}
        self.active = True

    def field(self, url: str, headers: Mapping[str, str]) -> dict[str, str] | None:
        """``{"Cookie": ...}`` for a request to ``url``; ``None`` when no cookie applies or
        the caller's ``headers`` carry their own (sent as they are, as requests does)."""
        for name in headers:
            if name.lower() == "cookie":
                return None
        now = time.monotonic()
        kept = self._fields.get(url)
        if kept is not None and now < kept[1]:
            return kept[0]
        value = get_cookie_header(self.jar, self._request(url))
        field = {"Cookie": value} if value else None
        if len(self._fields) >= _URLS:
            self._fields = {}
        self._fields[url] = (field, now + RECHECK)
        return field
