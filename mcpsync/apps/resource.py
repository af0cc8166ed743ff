"""What an MCP App is made of, read and checked before anything reaches a browser.

Owns: the extension's names (``EXTENSION_ID``, ``MIME_TYPE``, ``PROTOCOL_VERSION``), a
tool's ``_meta.ui`` (``resource_uri``, ``visibility``; the deprecated flat
``_meta["ui/resourceUri"]`` key is read too), reading the ``ui://`` resource
(``read_app_resource`` -> ``AppResource``: the HTML, its declared CSP, permissions and border
preference; size-capped, MIME type and scheme checked), and the Content-Security-Policy
built from the declaration (``content_security_policy``: only well-formed source
expressions, never a keyword or a directive smuggled in a domain) and put in front of the
HTML (``with_csp``) so it governs everything the document loads.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MCPSyncError

__all__ = [
    "EXTENSION_ID",
    "MIME_TYPE",
    "PROTOCOL_VERSION",
    "MAX_RESOURCE_BYTES",
    "AppError",
    "AppResource",
    "tool_ui",
    "resource_uri",
    "visibility",
    "read_app_resource",
    "content_security_policy",
    "with_csp",
]

EXTENSION_ID = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
PROTOCOL_VERSION = "2026-01-26"  # the MCP Apps spec this host implements
MAX_RESOURCE_BYTES = 8 * 1024 * 1024  # an app's HTML (the budget allocator's is ~440 kB)

CSP_LISTS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")

# A CSP source expression naming an origin: scheme://host[:port], host may start with "*.".
# No quotes (keywords such as 'unsafe-eval'), no ";" or whitespace (a second directive),
# no path, no bare "*" or scheme-only source (they would allow everything).
_SOURCE = re.compile(
    r"(?:https?|wss?)://(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*(?::(?:[0-9]{1,5}|\*))?"
)
_DOCTYPE = re.compile(r"\s*<!doctype[^>]*>", re.IGNORECASE)


class AppError(MCPSyncError):
    """An MCP App cannot be shown or an app's request was refused (the session is unaffected)."""


def _meta_of(tool: Any) -> Mapping[str, Any]:
    meta = tool.get("_meta") if isinstance(tool, Mapping) else getattr(tool, "meta", None)
    return meta if isinstance(meta, Mapping) else {}


def tool_ui(tool: Any) -> Mapping[str, Any]:
    """The tool's ``_meta.ui`` object (empty when absent or malformed)."""
    ui = _meta_of(tool).get("ui")
    return ui if isinstance(ui, Mapping) else {}


def resource_uri(tool: Any) -> str | None:
    """The ``ui://`` URI a tool's results render with, or None (not an app tool)."""
    uri = tool_ui(tool).get("resourceUri")
    if uri is None:
        uri = _meta_of(tool).get("ui/resourceUri")  # the deprecated flat key
    if isinstance(uri, str) and uri.startswith("ui://"):
        return uri
    return None


def visibility(tool: Any) -> tuple[str, ...]:
    """Who may call the tool: ``("model", "app")`` unless ``_meta.ui.visibility`` says otherwise."""
    seen = tool_ui(tool).get("visibility")
    if seen is None:
        return ("model", "app")
    if not isinstance(seen, Sequence) or isinstance(seen, str):
        return ()  # malformed: nobody (refuse rather than guess)
    return tuple(v for v in seen if v in ("model", "app"))


@dataclass(frozen=True)
class AppResource:
    """A ``ui://`` resource as read: the HTML and the declarations that govern it."""

    uri: str
    html: str
    csp: dict[str, list[str]] = field(default_factory=dict)
    permissions: dict[str, Any] = field(default_factory=dict)
    prefers_border: bool | None = None

    @property
    def policy(self) -> str:
        """The Content-Security-Policy the document runs under."""
        return content_security_policy(self.csp)

    @property
    def srcdoc(self) -> str:
        """The HTML with the policy in front of everything it contains."""
        return with_csp(self.html, self.policy)


def _check_domains(csp: Any, uri: str) -> dict[str, list[str]]:
    if csp is None:
        return {}
    if not isinstance(csp, Mapping):
        raise AppError(f"app resource {uri!r}: _meta.ui.csp is not an object")
    checked: dict[str, list[str]] = {}
    for key in CSP_LISTS:
        values = csp.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise AppError(f"app resource {uri!r}: _meta.ui.csp.{key} is not a list of strings")
        for value in values:
            if not _SOURCE.fullmatch(value):
                raise AppError(
                    f"app resource {uri!r}: _meta.ui.csp.{key} entry {value[:80]!r} is not an "
                    "origin (scheme://host[:port]); refusing to build a policy from it"
                )
        checked[key] = list(values)
    return checked


def content_security_policy(csp: Mapping[str, Sequence[str]] | None) -> str:
    """The policy for a resource's declared domains (``_meta.ui.csp``): nothing but the
    document itself and inline code unless a domain is declared (checked already)."""
    csp = csp or {}
    resources = " ".join(csp.get("resourceDomains", ()))
    connect = " ".join(csp.get("connectDomains", ())) or "'none'"
    frames = " ".join(csp.get("frameDomains", ())) or "'none'"
    bases = " ".join(csp.get("baseUriDomains", ())) or "'self'"

    def plus(extra: str) -> str:
        return f" {extra}" if extra else ""

    directives = [
        "default-src 'none'",
        f"script-src 'self' 'unsafe-inline'{plus(resources)}",
        f"style-src 'self' 'unsafe-inline'{plus(resources)}",
        f"img-src 'self' data:{plus(resources)}",
        f"font-src 'self' data:{plus(resources)}",
        f"media-src 'self' data:{plus(resources)}",
        f"connect-src {connect}",
        f"frame-src {frames}",
        "object-src 'none'",
        f"base-uri {bases}",
        "form-action 'none'",
    ]
    return "; ".join(directives)


def _attribute(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def with_csp(html: str, policy: str) -> str:
    """``html`` with a ``<meta http-equiv="Content-Security-Policy">`` as its first element:
    right after the doctype, so the parser puts it in ``<head>`` before anything the document
    says (a second policy in the document can only restrict further, never loosen)."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{_attribute(policy)}">'
    html = html.lstrip("\ufeff")
    doctype = _DOCTYPE.match(html)
    if doctype:
        return html[: doctype.end()] + meta + html[doctype.end() :]
    return "<!DOCTYPE html>" + meta + html


def _content_html(content: Any, uri: str, max_bytes: int) -> str:
    text = getattr(content, "text", None)
    if isinstance(text, str):
        if len(text) > max_bytes:  # characters >= bytes / 4; checked on bytes below
            raise AppError(f"app resource {uri!r} is larger than {max_bytes} bytes")
        data = text.encode("utf-8", "surrogatepass")
    else:
        blob = getattr(content, "blob", None)
        if not isinstance(blob, str):
            raise AppError(f"app resource {uri!r} has neither text nor blob content")
        if len(blob) > max_bytes * 4 // 3 + 4:
            raise AppError(f"app resource {uri!r} is larger than {max_bytes} bytes")
        try:
            data = base64.b64decode(blob, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise AppError(f"app resource {uri!r}: blob is not valid base64") from exc
    if len(data) > max_bytes:
        raise AppError(f"app resource {uri!r} is {len(data)} bytes (limit {max_bytes})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AppError(f"app resource {uri!r} is not UTF-8 text") from exc


def read_app_resource(
    session: Any, uri: str, *, max_bytes: int = MAX_RESOURCE_BYTES, timeout: float | None = None
) -> AppResource:
    """Read ``uri`` with ``resources/read`` and check it is an MCP App's HTML."""
    if not uri.startswith("ui://"):
        raise AppError(f"{uri!r} is not a ui:// resource; MCP Apps render only ui:// resources")
    result = (
        session.read_resource(uri)
        if timeout is None
        else session.read_resource(uri, timeout=timeout)
    )
    contents = [c for c in result.contents if str(c.uri) == uri] or list(result.contents)
    if not contents:
        raise AppError(f"app resource {uri!r}: resources/read returned no contents")
    content = contents[0]
    mime = (getattr(content, "mime_type", None) or "").replace(" ", "").lower()
    if mime != MIME_TYPE:
        raise AppError(f"app resource {uri!r} has MIME type {mime or 'none'!r}, not {MIME_TYPE!r}")
    html = _content_html(content, uri, max_bytes)
    meta = getattr(content, "meta", None) or {}
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    ui = ui if isinstance(ui, Mapping) else {}
    permissions = ui.get("permissions")
    border = ui.get("prefersBorder")
    return AppResource(
        uri=uri,
        html=html,
        csp=_check_domains(ui.get("csp"), uri),
        permissions=dict(permissions) if isinstance(permissions, Mapping) else {},
        prefers_border=border if isinstance(border, bool) else None,
    )
