"""From a Server Card to a connection: pick a remote, fill its URL template and headers.

Owns: ``choose_remote`` (by transport — Streamable HTTP before legacy SSE — and by the
protocol versions this client speaks), ``fill`` (URL variables and header inputs from the
caller's ``values``, secrets asked through ``ask``, then defaults; required inputs that
stay empty are a ``CardError``) and ``Endpoint`` (the filled URL, transport and headers;
its repr and errors never show a secret). A filled URL must still be ``http(s)`` with a
plain host name: variable values are percent-encoded (only a variable that opens the
template supplies a scheme and host), so no value can move the request elsewhere.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from ..versions import ALL_VERSIONS
from .model import CardError, Input, Remote, ServerCard, template_names

__all__ = ["Ask", "Endpoint", "choose_remote", "fill"]

#: asks a person for one input: ``(name, input) -> value`` (None: not given)
Ask = Callable[[str, Input], "str | None"]

_HOST = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\Z"
)
_BAD_VALUE = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Endpoint:
    """Where and how to connect, filled from a card. Secret header values never show."""

    url: str
    transport: str
    headers: dict[str, str] = field(repr=False)
    protocol_versions: tuple[str, ...] = ()
    #: header names whose values are secrets
    secret_headers: frozenset[str] = frozenset()
    card: str = ""

    def __repr__(self) -> str:
        shown = {k: ("***" if k in self.secret_headers else v) for k, v in self.headers.items()}
        return f"Endpoint(url={self.url!r}, transport={self.transport!r}, headers={shown!r}, card={self.card!r})"

    def connect_args(self) -> dict[str, Any]:
        """Keyword arguments for ``Session.connect``: ``target``, ``headers``, ``transport``.
        The card is advisory: the session's own bring-up decides the protocol version."""
        return {"target": self.url, "headers": dict(self.headers), "transport": self.transport}


def choose_remote(
    card: ServerCard,
    *,
    transport: str | None = None,
    protocol_versions: Sequence[str] | None = None,
) -> Remote:
    """The remote to use: of ``transport`` if given, speaking one of ``protocol_versions``
    (default: every version this client speaks) when it lists any; Streamable HTTP first."""
    wanted = tuple(protocol_versions or ALL_VERSIONS)
    if not card.remotes:
        raise CardError(f"server card {card.name!r} lists no remotes to connect to")
    fitting = [
        r for r in card.remotes
        if (transport is None or r.transport == transport)
        and (not r.protocol_versions or set(r.protocol_versions) & set(wanted))
    ]  # fmt: skip
    if not fitting:
        offered = "; ".join(
            f"{r.transport} ({', '.join(r.protocol_versions) or 'any version'})"
            for r in card.remotes
        )
        raise CardError(
            f"server card {card.name!r}: no remote{' of type ' + transport if transport else ''} "
            f"speaks {', '.join(wanted)} (it offers: {offered})"
        )
    fitting.sort(key=lambda r: r.transport != "streamable-http")
    return fitting[0]


def _check_value(name: str, spec: Input, value: str) -> str:
    shown = "(secret)" if spec.secret else repr(value)
    if _BAD_VALUE.search(value):
        raise CardError(f"input {name!r}: control characters are not allowed in {shown}")
    if spec.choices and value not in spec.choices:
        raise CardError(f"input {name!r}: {shown} is not one of {', '.join(spec.choices)}")
    if spec.format == "number":
        try:
            float(value)
        except ValueError:
            raise CardError(f"input {name!r}: {shown} is not a number") from None
    if spec.format == "boolean" and value not in ("true", "false"):
        raise CardError(f"input {name!r}: {shown} is not true or false")
    return value


def _resolve(name: str, spec: Input, values: Mapping[str, str], ask: Ask | None) -> str | None:
    """One input's value: pre-set (filled), given, asked (secrets), default, asked (required)."""
    if spec.value is not None:
        return _fill_template(
            spec.value, spec.variables, values, ask, encode=False, where=f"input {name!r}"
        )
    value = values.get(name)
    if value is None and spec.secret and ask is not None:
        value = ask(name, spec)
    if value is None and spec.default is not None:
        value = spec.default
    if value is None and spec.required and ask is not None:
        value = ask(name, spec)
    if value is None or value == "":
        if spec.required:
            raise CardError(
                f"input {name!r} is required ({spec.description or 'no description'}) and was not given"
            )
        return None
    if not isinstance(value, str):
        value = str(value).lower() if isinstance(value, bool) else str(value)
    return _check_value(name, spec, value)


def _fill_template(
    template: str,
    variables: Mapping[str, Input],
    values: Mapping[str, str],
    ask: Ask | None,
    *,
    encode: bool,
    where: str,
) -> str:
    out = template
    for i, var in enumerate(template_names(template, where)):
        spec = variables.get(var)
        if spec is None:
            raise CardError(f"{where}: {{{var}}} is not declared")
        value = _resolve(var, spec, values, ask)
        if value is None:
            value = ""
        leading = i == 0 and template.startswith("{" + var + "}")
        out = out.replace(
            "{" + var + "}", value if (leading or not encode) else quote(value, safe=""), 1
        )
    return out


def _check_url(url: str, card: str) -> str:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise CardError(f"server card {card!r}: the filled URL is malformed") from None
    host = parts.hostname or ""
    is_ip = False
    try:
        ipaddress.ip_address(host)
        is_ip = True
    except ValueError:
        pass
    if parts.scheme not in ("http", "https") or parts.username or parts.password:
        raise CardError(f"server card {card!r}: the filled URL must be http(s) without credentials")
    if not host or not (is_ip or _HOST.match(host)) or (port is not None and not 0 < port < 65536):
        raise CardError(f"server card {card!r}: the filled URL has no valid host name")
    return url


def fill(
    card: ServerCard,
    remote: Remote | None = None,
    *,
    values: Mapping[str, str] | None = None,
    ask: Ask | None = None,
) -> Endpoint:
    """Fill ``remote`` (default: ``choose_remote(card)``) into an ``Endpoint``.

    ``values``: URL variables and header values by name (header names or their
    variables); ``ask(name, input)``: asked for secrets, and for required inputs nobody
    gave. Defaults fill the rest; a required input left empty is a ``CardError``.
    """
    remote = remote or choose_remote(card)
    values = dict(values or {})
    url = _fill_template(
        remote.url, remote.variables, values, ask, encode=True, where=f"{card.name}: url"
    )
    url = _check_url(url, card.name)
    headers: dict[str, str] = {}
    secrets: set[str] = set()
    for h in remote.headers:
        value = _resolve(h.name, h, values, ask)
        if value is None:
            continue
        if _BAD_VALUE.search(value):
            raise CardError(f"header {h.name!r}: control characters are not allowed")
        headers[h.name] = value
        if h.secret or any(v.secret for v in h.variables.values()):
            secrets.add(h.name)
    return Endpoint(
        url, remote.transport, headers, remote.protocol_versions, frozenset(secrets), card.name
    )
