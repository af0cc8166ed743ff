"""Server Cards (SEP-2127, draft) as checked values: the card, its remotes, their inputs.

Owns: ``CardError`` (a malformed card or catalog: the message names the field),
``Input`` / ``HeaderInput`` / ``Remote`` / ``ServerCard`` and ``parse_card`` (a card
checked field by field: reverse-DNS ``name``, a ``version`` that is not a range,
``remotes`` of type ``streamable-http`` / ``sse`` whose URL templates are well formed and
name only declared variables, header names that are HTTP tokens), ``parse_catalog``
(an MCP / AI Catalog: its Server Card entries, by ``url`` or inline ``data``).
A card is advisory: these are descriptions to choose and fill a connection from, never
grounds for a security decision. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import MCPSyncError

__all__ = [
    "CARD_MEDIA_TYPE",
    "CardEntry",
    "CardError",
    "HeaderInput",
    "Input",
    "Remote",
    "ServerCard",
    "parse_card",
    "parse_catalog",
    "template_names",
]

CARD_MEDIA_TYPE = "application/mcp-server-card+json"
TRANSPORTS = ("streamable-http", "sse")

_NAME = re.compile(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+\Z")
_RANGE = re.compile(r"^[\^~<>=]|(^|\.)[xX*](\.|$)|\s-\s|\|\|")
_VAR = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_REMOTE_URL = re.compile(r"(https?://\S+|\{[a-zA-Z_][a-zA-Z0-9_]*\}\S*)\Z")


class CardError(MCPSyncError, ValueError):
    """A Server Card or catalog is malformed, or cannot be filled in; the message says where."""


def template_names(template: str, where: str) -> list[str]:
    """The ``{variable}`` names of a template, in order; ``CardError`` when malformed."""
    names: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "}":
            raise CardError(f"{where}: '}}' without '{{' at position {i} in {template!r}")
        if ch == "{":
            end = template.find("}", i + 1)
            if end < 0:
                raise CardError(f"{where}: '{{' not closed in {template!r}")
            name = template[i + 1 : end]
            if not _VAR.match(name):
                raise CardError(f"{where}: {{{name}}} is not a variable name in {template!r}")
            names.append(name)
            i = end + 1
            continue
        i += 1
    return names


@dataclass(frozen=True)
class Input:
    """A value a person (or the caller) supplies: a URL variable or a header value."""

    name: str
    description: str = ""
    required: bool = False
    secret: bool = False
    format: str = "string"
    default: str | None = None
    placeholder: str = ""
    #: a pre-set value (may reference ``variables``); not configurable by people
    value: str | None = None
    choices: tuple[str, ...] = ()
    variables: Mapping[str, Input] = field(default_factory=dict)


@dataclass(frozen=True)
class HeaderInput(Input):
    """An HTTP header a remote needs or accepts."""


@dataclass(frozen=True)
class Remote:
    """One way to reach the server: a transport, a URL template, its headers and variables."""

    transport: str
    url: str
    headers: tuple[HeaderInput, ...] = ()
    variables: Mapping[str, Input] = field(default_factory=dict)
    protocol_versions: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServerCard:
    """A checked Server Card. ``raw`` keeps the document as fetched (advisory metadata)."""

    name: str
    version: str
    description: str
    title: str = ""
    website_url: str = ""
    icons: tuple[dict[str, Any], ...] = ()
    remotes: tuple[Remote, ...] = ()
    #: where the card came from (a URL, or ``"inline"`` from a catalog entry)
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class CardEntry:
    """A Server Card entry of a catalog: a URL to fetch, or the card inline."""

    identifier: str
    url: str | None
    data: dict[str, Any] | None


def _str(data: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None:
        if required:
            raise CardError(f"{where}: {key!r} is required")
        return ""
    if not isinstance(value, str):
        raise CardError(f"{where}: {key!r} must be a string, not {type(value).__name__}")
    return value


def _bool(data: Mapping[str, Any], key: str, where: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise CardError(f"{where}: {key!r} must be true or false")
    return value


def _input(name: str, data: Any, where: str, cls: type[Input] = Input, depth: int = 0) -> Input:
    if not isinstance(data, Mapping):
        raise CardError(f"{where}: must be an object")
    choices = data.get("choices") or ()
    if not isinstance(choices, (list, tuple)) or not all(isinstance(c, str) for c in choices):
        raise CardError(f"{where}: 'choices' must be a list of strings")
    fmt = _str(data, "format", where) or "string"
    if fmt not in ("string", "number", "boolean", "filepath"):
        raise CardError(f"{where}: unknown format {fmt!r}")
    variables = _variables(data.get("variables"), where, depth + 1)
    value = data.get("value")
    if value is not None:
        if not isinstance(value, str):
            raise CardError(f"{where}: 'value' must be a string")
        for var in template_names(value, f"{where}.value"):
            if var not in variables:
                raise CardError(
                    f"{where}: value uses {{{var}}}, which its 'variables' do not declare"
                )
    default = data.get("default")
    if default is not None and not isinstance(default, str):
        default = str(default).lower() if isinstance(default, bool) else str(default)
    if choices and default is not None and default not in choices:
        raise CardError(f"{where}: default {default!r} is not one of its choices")
    return cls(
        name=name, description=_str(data, "description", where), required=_bool(data, "isRequired", where),
        secret=_bool(data, "isSecret", where), format=fmt, default=default,
        placeholder=_str(data, "placeholder", where), value=value, choices=tuple(choices),
        variables=variables,
    )  # fmt: skip


def _variables(data: Any, where: str, depth: int = 0) -> dict[str, Input]:
    if data is None:
        return {}
    if depth > 3:
        raise CardError(f"{where}: variables nest too deeply")
    if not isinstance(data, Mapping):
        raise CardError(f"{where}: 'variables' must be an object")
    out: dict[str, Input] = {}
    for name, spec in data.items():
        if not isinstance(name, str) or not _VAR.match(name):
            raise CardError(f"{where}: {name!r} is not a variable name")
        out[name] = _input(name, spec, f"{where}.variables.{name}", depth=depth)
    return out


def _remote(data: Any, where: str) -> Remote:
    if not isinstance(data, Mapping):
        raise CardError(f"{where}: must be an object")
    transport = _str(data, "type", where, required=True)
    if transport not in TRANSPORTS:
        raise CardError(f"{where}: type {transport!r} is not one of {', '.join(TRANSPORTS)}")
    url = _str(data, "url", where, required=True)
    if not _REMOTE_URL.match(url):
        raise CardError(f"{where}: url {url!r} must start with http://, https:// or a {{variable}}")
    variables = _variables(data.get("variables"), where)
    for var in template_names(url, f"{where}.url"):
        if var not in variables:
            raise CardError(f"{where}: url uses {{{var}}}, which 'variables' does not declare")
    headers_raw = data.get("headers") or []
    if not isinstance(headers_raw, list):
        raise CardError(f"{where}: 'headers' must be a list")
    headers = []
    seen: set[str] = set()
    for i, h in enumerate(headers_raw):
        hwhere = f"{where}.headers[{i}]"
        name = _str(h if isinstance(h, Mapping) else {}, "name", hwhere, required=True)
        if not _TOKEN.match(name):
            raise CardError(f"{hwhere}: {name!r} is not an HTTP header name")
        if name.lower() in seen:
            raise CardError(f"{hwhere}: header {name!r} is listed twice")
        seen.add(name.lower())
        headers.append(_input(name, h, hwhere, HeaderInput))
    versions = data.get("supportedProtocolVersions") or []
    if not isinstance(versions, list) or not all(isinstance(v, str) for v in versions):
        raise CardError(f"{where}: 'supportedProtocolVersions' must be a list of strings")
    return Remote(transport, url, tuple(headers), variables, tuple(versions))  # type: ignore[arg-type]


def parse_card(data: Any, source: str = "") -> ServerCard:
    """A ``ServerCard`` from a parsed JSON document; ``CardError`` naming what is wrong."""
    where = f"server card {source}".strip()
    if not isinstance(data, Mapping):
        raise CardError(f"{where}: not a JSON object")
    schema = data.get("$schema")
    if schema is not None and not isinstance(schema, str):
        raise CardError(f"{where}: '$schema' must be a string")
    name = _str(data, "name", where, required=True)
    if not 3 <= len(name) <= 200 or not _NAME.match(name):
        raise CardError(f"{where}: name {name!r} is not 'namespace/name' in reverse-DNS form")
    version = _str(data, "version", where, required=True)
    if not version or len(version) > 255 or _RANGE.search(version):
        raise CardError(f"{where}: version {version!r} is not a version (ranges are not allowed)")
    remotes_raw = data.get("remotes") or []
    if not isinstance(remotes_raw, list):
        raise CardError(f"{where}: 'remotes' must be a list")
    icons = data.get("icons") or []
    if not isinstance(icons, list) or not all(isinstance(i, Mapping) for i in icons):
        raise CardError(f"{where}: 'icons' must be a list of objects")
    return ServerCard(
        name=name, version=version, description=_str(data, "description", where),
        title=_str(data, "title", where), website_url=_str(data, "websiteUrl", where),
        icons=tuple(dict(i) for i in icons),
        remotes=tuple(_remote(r, f"{where}: remotes[{i}]") for i, r in enumerate(remotes_raw)),
        source=source, raw=dict(data),
    )  # fmt: skip


def parse_catalog(data: Any, source: str = "") -> list[CardEntry]:
    """The Server Card entries of a catalog (other artifact types are skipped)."""
    where = f"catalog {source}".strip()
    if not isinstance(data, Mapping) or not isinstance(data.get("entries"), list):
        raise CardError(f"{where}: not a catalog (an object with an 'entries' list)")
    out: list[CardEntry] = []
    for i, entry in enumerate(data["entries"]):
        if not isinstance(entry, Mapping):
            raise CardError(f"{where}: entries[{i}] is not an object")
        kind = entry.get("type", entry.get("mediaType"))
        if kind != CARD_MEDIA_TYPE:
            continue
        url, inline = entry.get("url"), entry.get("data")
        if (url is None) == (inline is None):
            raise CardError(f"{where}: entries[{i}] needs exactly one of 'url' and 'data'")
        if url is not None and not isinstance(url, str):
            raise CardError(f"{where}: entries[{i}].url must be a string")
        if inline is not None and not isinstance(inline, Mapping):
            raise CardError(f"{where}: entries[{i}].data must be an object")
        out.append(
            CardEntry(str(entry.get("identifier") or ""), url, dict(inline) if inline else None)
        )
    return out
