"""Drift checks: a server's tools, resources and prompts as stable JSON, and what changed.

Owns: :func:`snapshot_data` (the stable form of a listing), :func:`snapshot` (write it),
:func:`assert_matches_snapshot` (compare, with a readable list of changes) and
:func:`diff_snapshots` (the comparison, one line per change). ``mcpsync smoke --snapshot
DIR`` uses the same functions, one ``DIR/<entry>.json`` per server.

Stable means: lists sorted by name (or uri), keys sorted, ``_meta`` dropped, two-space
indentation, a final newline; the same server gives the same bytes on every run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import CapabilityError, MCPSyncError

__all__ = [
    "snapshot",
    "snapshot_data",
    "assert_matches_snapshot",
    "diff_snapshots",
    "listing_of",
    "write_snapshot",
]

_SECTIONS = (
    ("tools", "tool", "name"),
    ("resources", "resource", "uri"),
    ("resource_templates", "resource template", "uriTemplate"),
    ("prompts", "prompt", "name"),
)


def _dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


def listing_of(session: Any) -> dict[str, Any]:
    """What a session offers (a section the server does not offer is None)."""

    def safe(method: str) -> list[Any] | None:
        try:
            return [_dump(x) for x in getattr(session, method)()]
        except CapabilityError:
            return None

    return {
        "tools": safe("list_tools"),
        "resources": safe("list_resources"),
        "resource_templates": safe("list_resource_templates"),
        "prompts": safe("list_prompts"),
    }


def _clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if k != "_meta"}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def snapshot_data(listing: Mapping[str, Any]) -> dict[str, Any]:
    """The stable form of a listing (from :func:`listing_of` or a smoke ``EntryResult``)."""
    out: dict[str, Any] = {}
    for key, _, ident in _SECTIONS:
        items = listing.get(key)
        if items is None:
            out[key] = None
            continue
        cleaned = [_clean(i) for i in items]
        out[key] = sorted(cleaned, key=lambda i: str(i.get(ident, "")))
    return out


def write_snapshot(path: str | os.PathLike[str], data: Mapping[str, Any]) -> None:
    """Write snapshot data (from :func:`snapshot_data`) in the stable text form."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def snapshot(session: Any, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the session's tools/resources/prompts (with schemas) to ``path``; return the data."""
    data = snapshot_data(listing_of(session))
    write_snapshot(path, data)
    return data


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _diff_values(path: str, old: Any, new: Any, out: list[str]) -> None:
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in new:
                out.append(f"  {sub}: removed (was {_short(old[key])})")
            elif key not in old:
                out.append(f"  {sub}: added {_short(new[key])}")
            else:
                _diff_values(sub, old[key], new[key], out)
    elif old != new:
        out.append(f"  {path}: {_short(old)} -> {_short(new)}")


def diff_snapshots(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per change from ``old`` to ``new`` (empty when equal)."""
    lines: list[str] = []
    for key, what, ident in _SECTIONS:
        before, after = old.get(key), new.get(key)
        if before is None or after is None:
            if (before is None) != (after is None):
                lines.append(f"{key}: {'no longer offered' if after is None else 'now offered'}")
            continue
        b = {str(i.get(ident)): i for i in before}
        a = {str(i.get(ident)): i for i in after}
        for name in sorted(set(b) | set(a)):
            if name not in a:
                lines.append(f"{what} {name!r}: removed")
            elif name not in b:
                lines.append(f"{what} {name!r}: added")
            elif a[name] != b[name]:
                changes: list[str] = []
                _diff_values("", b[name], a[name], changes)
                lines.append(f"{what} {name!r}: changed")
                lines.extend(changes)
    return lines


def assert_matches_snapshot(
    session_or_listing: Any, path: str | os.PathLike[str], *, update: bool = False
) -> None:
    """Compare what the server offers now with the snapshot at ``path``.

    A missing snapshot is written (the first run records it); ``update=True`` (or the
    environment variable ``MCPSYNC_UPDATE_SNAPSHOTS=1``) rewrites it. A difference raises
    ``AssertionError`` listing each added, removed or changed tool/resource/prompt and,
    for a changed one, each field (``inputSchema.properties.n.type: "string" -> "integer"``).
    """
    if isinstance(session_or_listing, Mapping):
        new = snapshot_data(session_or_listing)
    else:
        try:
            new = snapshot_data(listing_of(session_or_listing))
        except MCPSyncError as exc:
            raise AssertionError(f"could not list the server for the snapshot: {exc}") from None
    target = Path(path)
    update = update or os.environ.get("MCPSYNC_UPDATE_SNAPSHOTS") == "1"
    if update or not target.exists():
        write_snapshot(target, new)
        return
    old = json.loads(target.read_text(encoding="utf-8"))
    lines = diff_snapshots(old, new)
    if lines:
        raise AssertionError(
            f"the server no longer matches {target}:\n"
            + "\n".join(lines)
            + "\n(set MCPSYNC_UPDATE_SNAPSHOTS=1 to accept the new state)"
        )
