"""Icons servers declare (2025-11-25 ``icons`` on tools, resources, prompts, implementations),
shown safely.

Owns: ``Icon`` and ``safe_icons`` (only ``data:`` images of an allowed type whose bytes
match it — PNG, JPEG, GIF, WebP, SVG — within ``MAX_ICON_BYTES``, and ``https:`` links;
everything else dropped), ``best_icon`` (by size and theme), ``icon_text`` (a terminal
cell: ``png 16x16`` or the link), ``icon_html`` (a notebook cell: a ``data:`` image inline
in an ``<img>``, where SVG scripts never run; an ``https:`` icon only as a link) and
``fetch_icon`` (the opt-in: read an ``https:`` icon, bounded, into a checked ``data:``
one; the wire rules are ``mcpsync.transports.http.fetch``'s). Nothing is fetched unless
``fetch_icon`` is called. Standard library only (``fetch_icon`` imports ``requests`` and
that module when called).
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..errors import MCPSyncError

__all__ = [
    "MAX_ICON_BYTES",
    "Icon",
    "best_icon",
    "fetch_icon",
    "icon_html",
    "icon_text",
    "safe_icons",
]

#: the largest icon shown (decoded bytes); larger ones are dropped
MAX_ICON_BYTES = 64 * 1024
_TYPES = {"image/png", "image/jpeg", "image/jpg", "image/gif", "image/webp", "image/svg+xml"}
_DATA = re.compile(
    r"data:(?P<mime>[\w.+-]+/[\w.+-]+)(?P<params>(;[\w-]+=[\w.-]+)*);base64,(?P<data>[A-Za-z0-9+/=\s]*)\Z",
    re.S,
)
_SIZE = re.compile(r"(\d{1,5})x(\d{1,5})\Z")


@dataclass(frozen=True)
class Icon:
    """One icon that passed the checks: ``kind`` is ``"data"`` (bytes here) or ``"https"``."""

    src: str
    kind: str
    mime_type: str = ""
    sizes: tuple[str, ...] = ()
    theme: str = ""
    data: bytes = b""


def _field(obj: Any, *names: str) -> Any:
    for name in names:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _matches(mime: str, data: bytes) -> bool:
    if mime == "image/png":
        return data.startswith(b"\x89PNG\r\n\x1a\n")
    if mime in ("image/jpeg", "image/jpg"):
        return data.startswith(b"\xff\xd8\xff")
    if mime == "image/gif":
        return data.startswith((b"GIF87a", b"GIF89a"))
    if mime == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    if mime == "image/svg+xml":
        head = data[:512].lstrip().lower()
        return head.startswith((b"<svg", b"<?xml"))
    return False


def _checked_data(src: str, declared: str, max_bytes: int) -> tuple[str, bytes] | None:
    if len(src) > max_bytes * 4 // 3 + 256:
        return None
    match = _DATA.match(src)
    if not match:
        return None
    mime = match.group("mime").lower()
    if declared and declared.lower() in _TYPES:
        mime = mime if mime in _TYPES else declared.lower()
    try:
        data = base64.b64decode(re.sub(r"\s", "", match.group("data")), validate=True)
    except (binascii.Error, ValueError):
        return None
    if mime not in _TYPES or len(data) > max_bytes or not _matches(mime, data):
        return None
    return mime, data


def safe_icons(source: Any, *, max_bytes: int = MAX_ICON_BYTES) -> list[Icon]:
    """The icons of ``source`` (a tool/resource/prompt/implementation, or a list of icons)
    that may be shown: checked ``data:`` images and ``https:`` links, in the server's order."""
    icons = source if isinstance(source, (list, tuple)) else _field(source, "icons")
    out: list[Icon] = []
    for raw in icons or ():
        src = _field(raw, "src")
        if not isinstance(src, str):
            continue
        declared = str(_field(raw, "mime_type", "mimeType") or "")
        sizes = tuple(str(s) for s in (_field(raw, "sizes") or ()) if isinstance(s, str))[:8]
        theme = str(_field(raw, "theme") or "")
        if src.startswith("data:"):
            checked = _checked_data(src, declared, max_bytes)
            if checked is not None:
                out.append(Icon(src, "data", checked[0], sizes, theme, checked[1]))
        elif src.startswith("https://") and urlsplit(src).hostname and len(src) <= 2048:
            if not any(ch in src for ch in "\"'<> \n\r\t"):
                out.append(Icon(src, "https", declared, sizes, theme))
    return out


def _px(icon: Icon) -> int:
    best = 0
    for s in icon.sizes:
        m = _SIZE.match(s)
        if m:
            best = max(best, int(m.group(1)))
        elif s == "any":
            return 10_000
    return best


def best_icon(icons: Iterable[Icon], *, size: int = 16, theme: str | None = None) -> Icon | None:
    """The icon to show at ``size`` px: a data icon before a link, the theme if asked for,
    then the smallest size at least ``size`` (or the largest)."""
    pool = list(icons)
    if not pool:
        return None

    def key(i: Icon) -> tuple[bool, bool, bool, int]:
        px = _px(i)
        off_theme = theme is not None and i.theme not in ("", theme)
        return (i.kind != "data", off_theme, px < size, px if px >= size else -px)

    return sorted(pool, key=key)[0]


def icon_text(icons: Iterable[Icon] | Any) -> str:
    """A terminal cell for an item's icons: ``png 16x16``, or the https link."""
    pool = list(icons) if isinstance(icons, (list, tuple)) else safe_icons(icons)
    icon = best_icon(pool)
    if icon is None:
        return ""
    if icon.kind == "data":
        kind = icon.mime_type.split("/")[-1].replace("+xml", "").replace("jpeg", "jpg")
        return f"{kind} {icon.sizes[0]}" if icon.sizes else kind
    return icon.src


def icon_html(icons: Iterable[Icon] | Any, *, size: int = 16) -> str:
    """A notebook cell: the best data icon inline (``<img>``), else the https icon as a link."""
    pool = list(icons) if isinstance(icons, (list, tuple)) else safe_icons(icons)
    icon = best_icon(pool, size=size)
    if icon is None:
        return ""
    if icon.kind == "data":
        src = f"data:{icon.mime_type};base64,{base64.b64encode(icon.data).decode('ascii')}"
        return (
            f"<img src='{html.escape(src, quote=True)}' width='{size}' height='{size}' alt='' "
            "style='vertical-align:middle' referrerpolicy='no-referrer'>"
        )
    href = html.escape(icon.src, quote=True)
    return f"<a href='{href}' target='_blank' rel='noopener noreferrer' title='{href}'>icon</a>"


class _IconRefused(MCPSyncError):
    """An icon fetch that went wrong (``fetch_icon`` answers None)."""


def fetch_icon(
    icon: Icon, *, max_bytes: int = MAX_ICON_BYTES, timeout: float = 5.0, http_session: Any = None
) -> Icon | None:
    """Opt-in: read an ``https:`` icon (no redirects, at most ``max_bytes``, all of it within
    ``timeout``: one deadline, checked while the body is read) and return it as a checked
    data icon; None when it is not a safe image or not read in time. Data icons pass."""
    if icon.kind == "data":
        return icon
    import requests

    from ..transports.http.fetch import Deadline, fetch

    deadline = Deadline.checked(timeout)
    http = http_session or requests.Session()
    try:
        reply = fetch(
            http, icon.src, deadline=deadline, what="icon", error=_IconRefused, max_redirects=0,
            headers={"Accept": "image/*"}, max_bytes=max_bytes,
        )  # fmt: skip
    except _IconRefused:
        return None  # too large, not read in time, broken off
    finally:
        if http_session is None:
            http.close()
    if reply.status != 200:
        return None
    mime = reply.headers.get("Content-Type", "").split(";")[0].strip().lower() or icon.mime_type
    body = reply.body
    if mime not in _TYPES or not _matches(mime, body):
        return None
    src = f"data:{mime};base64,{base64.b64encode(body).decode('ascii')}"
    return Icon(src, "data", mime, icon.sizes, icon.theme, body)
