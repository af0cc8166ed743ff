"""Parse ``WWW-Authenticate`` headers (RFC 9110 section 11.6.1, RFC 6750 section 3, RFC 9728 section 5.1).

Owns: turning a header value into a list of :class:`Challenge` objects, tolerant of what
real servers send: several challenges in one header (or several headers joined with
", "), quoted strings with escapes and commas, token68 credentials, parameters without
separating commas, odd spacing and case. It never raises on malformed input; it returns
what it could read.

>>> ch = bearer_challenge('Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", scope="a b"')
>>> ch.resource_metadata, ch.scopes
('https://x/.well-known/oauth-protected-resource', ['a', 'b'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Challenge", "parse_www_authenticate", "bearer_challenge", "oauth_challenges"]

# RFC 9110 tchar
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# token68 followed by the end of the challenge (end of input or a comma)
_TOKEN68 = re.compile(r"([A-Za-z0-9\-._~+/]+=*)[ \t]*(?=,|$)")
# a bare (unquoted) parameter value: be lenient, servers put URLs here unquoted
_BARE_VALUE = re.compile(r"[^\s,\"]+")


@dataclass
class Challenge:
    """One authentication challenge: a scheme plus parameters (names lower-cased)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)
    token68: str | None = None

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.params.get(name.lower(), default)

    @property
    def error(self) -> str | None:
        return self.get("error")

    @property
    def resource_metadata(self) -> str | None:
        return self.get("resource_metadata")

    @property
    def scopes(self) -> list[str] | None:
        """The ``scope`` parameter split on spaces, or None when absent or empty."""
        raw = self.get("scope")
        if raw is None:
            return None
        parts = [s for s in raw.split() if s]
        return parts or None


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\r\n":
        i += 1
    return i


def _skip_ws_commas(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\r\n,":
        i += 1
    return i


def _read_quoted(s: str, i: int) -> tuple[str, int]:
    """Read a quoted-string starting at s[i] == '"'; return (value, index after it)."""
    out: list[str] = []
    i += 1
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            out.append(s[i + 1])
            i += 2
            continue
        if c == '"':
            return "".join(out), i + 1
        out.append(c)
        i += 1
    return "".join(out), i  # unterminated: take the rest


def parse_www_authenticate(value: str | list[str] | tuple[str, ...] | None) -> list[Challenge]:
    """Parse one header value (or several) into challenges, in order."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        out: list[Challenge] = []
        for v in value:
            out.extend(parse_www_authenticate(v))
        return out
    s = str(value)
    n = len(s)
    i = 0
    challenges: list[Challenge] = []
    while i < n:
        i = _skip_ws_commas(s, i)
        m = _TOKEN.match(s, i)
        if not m:
            i += 1  # garbage: skip one character
            continue
        ch = Challenge(scheme=m.group(0))
        i = _skip_ws(s, m.end())
        challenges.append(ch)
        # token68 form: "Basic dXNlcjpwYXNz"
        m68 = _TOKEN68.match(s, i)
        if m68 and not _looks_like_param(s, i):
            ch.token68 = m68.group(1)
            i = m68.end()
            continue
        # auth-param list
        while i < n:
            i = _skip_ws_commas(s, i)
            if i >= n:
                break
            start = i
            pm = _TOKEN.match(s, i)
            if not pm:
                i += 1
                continue
            j = _skip_ws(s, pm.end())
            if j < n and s[j] == "=":
                j = _skip_ws(s, j + 1)
                if j < n and s[j] == '"':
                    val, j = _read_quoted(s, j)
                else:
                    vm = _BARE_VALUE.match(s, j)
                    val = vm.group(0) if vm else ""
                    j = vm.end() if vm else j
                ch.params.setdefault(pm.group(0).lower(), val)
                i = j
            else:
                # a token not followed by "=": the next challenge's scheme
                i = start
                break
    return challenges


def _looks_like_param(s: str, i: int) -> bool:
    """True when s[i:] starts with ``name =`` followed by a value (not token68 padding)."""
    m = _TOKEN.match(s, i)
    if not m:
        return False
    j = _skip_ws(s, m.end())
    if j >= len(s) or s[j] != "=":
        return False
    # "abc==" (token68 padding) vs "abc=value"/'abc="v"'
    k = j
    while k < len(s) and s[k] == "=":
        k += 1
    k2 = _skip_ws(s, k)
    return k == j + 1 and k2 < len(s) and s[k2] != ","


def bearer_challenge(value: str | list[str] | None) -> Challenge | None:
    """The first ``Bearer`` challenge in a header value, or None."""
    for ch in parse_www_authenticate(value):
        if ch.scheme.lower() == "bearer":
            return ch
    return None


def oauth_challenges(value: str | list[str] | None) -> tuple[Challenge | None, Challenge | None]:
    """The first ``Bearer`` and the first ``DPoP`` (RFC 9449 section 7.1) challenge, or None each."""
    bearer = dpop = None
    for ch in parse_www_authenticate(value):
        scheme = ch.scheme.lower()
        if scheme == "bearer" and bearer is None:
            bearer = ch
        elif scheme == "dpop" and dpop is None:
            dpop = ch
    return bearer, dpop
