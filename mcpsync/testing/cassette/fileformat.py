"""The cassette file: JSON Lines a person can review, read back with errors that name the line.

Owns: the on-disk format (``FORMAT``, ``VERSION``), ``Entry`` (one recorded message: its
episode, who sent it, the message), ``Header``, ``read`` and ``write``. Nothing here knows
ids or matching (``normalize``) or transports (``recorder``, ``replayer``).

Layout, one JSON object a line, keys sorted (a re-record shows a small diff)::

    {"features": {...}, "format": "mcpsync-cassette", "mcpsync": "...", "transport": "stdio", "version": 1}
    {"episode": 1, "from": "client", "message": {"id": 1, "jsonrpc": "2.0", "method": "initialize", ...}}
    {"episode": 1, "from": "server", "message": {"id": 1, "jsonrpc": "2.0", "result": {...}}}
    {"episode": 2, "from": "transport", "message": {"id": 2, "refused": {"status": 400, "type": "HTTPStatusError", ...}}}
    ...

A ``"transport"`` line is not a message: it records that the transport refused to carry
the request of its episode (an HTTP status with no JSON-RPC reply, e.g. a legacy server's
400 to ``server/discover``); a replay raises the same error from the same send
(``refusal_of`` writes it, ``error_of`` reads it back).
    {"end": "mcpsync-cassette"}

The last line marks a whole file: a cassette cut short (a partial copy) is refused rather
than replayed with answers missing. ``write`` replaces the file atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...errors import CassetteError, HTTPStatusError, MCPSyncError, SessionExpired, TransportError

__all__ = [
    "FORMAT",
    "VERSION",
    "Entry",
    "Header",
    "read",
    "write",
    "Side",
    "refusal_of",
    "error_of",
]

FORMAT = "mcpsync-cassette"
VERSION = 1
_END = {"end": FORMAT}

Side = Literal["client", "server", "transport"]


@dataclass(frozen=True)
class Entry:
    """One message as recorded: ``episode`` groups a client request with what followed it."""

    episode: int
    side: Side
    message: dict[str, Any]

    def to_line(self) -> dict[str, Any]:
        return {"episode": self.episode, "from": self.side, "message": self.message}


@dataclass(frozen=True)
class Header:
    """The first line: the transport the session was recorded over and what it could do."""

    transport: str = "unknown"
    #: the recorded transport's ``Features`` a replay keeps (``carries_modern``, ``bounded_probe``)
    features: dict[str, bool] = field(default_factory=dict)
    mcpsync: str = ""

    def to_line(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "transport": self.transport,
                "features": dict(self.features), "mcpsync": self.mcpsync}  # fmt: skip


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


def write(path: str | os.PathLike[str], header: Header, entries: list[Entry]) -> None:
    """Write the cassette at ``path`` (folders made as needed), replacing it atomically."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = [_dumps(header.to_line())] + [_dumps(e.to_line()) for e in entries] + [_dumps(_END)]
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


#: the errors a refusal is replayed as, by name (any other: a ``TransportError`` with its text)
_REFUSALS: dict[str, type[TransportError]] = {"TransportError": TransportError,
                                              "SessionExpired": SessionExpired}  # fmt: skip


def refusal_of(request_id: Any, exc: MCPSyncError) -> dict[str, Any]:
    """The message of a ``"transport"`` line: the request ``request_id`` was refused with ``exc``."""
    refused: dict[str, Any] = {"type": type(exc).__name__, "text": str(exc)}
    if isinstance(exc, HTTPStatusError):
        refused.update(status=exc.status, url=exc.url, body=exc.body_excerpt, payload=exc.payload)
    return {"id": request_id, "refused": refused}


def error_of(message: dict[str, Any]) -> TransportError:
    """The error a ``"transport"`` line's ``message`` (from ``refusal_of``) is replayed as."""
    refused = message["refused"]
    if "status" in refused:
        body, text = str(refused.get("body", "")), str(refused.get("text", ""))
        head = text[: -len(body) - 2] if body and text.endswith(f": {body}") else text
        return HTTPStatusError(refused["status"], str(refused.get("url", "")), body,
                               head, payload=refused.get("payload"))  # fmt: skip
    kind = _REFUSALS.get(str(refused.get("type")), TransportError)
    return kind(str(refused.get("text", "refused")))


def _bad(path: str, line: int, what: str) -> CassetteError:
    return CassetteError(
        f"cassette {path}, line {line}: {what}; fix that line, or record the cassette again "
        "(mode='all')",
        path=path,
        line=line,
    )


def read(path: str | os.PathLike[str]) -> tuple[Header, list[Entry]]:
    """The header and entries of the cassette at ``path``; ``CassetteError`` naming the file
    and line for anything that is not what ``write`` writes (or a hand edit that keeps it)."""
    name = os.fspath(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CassetteError(
            f"cassette {name} does not exist: record it first (mode='once' or 'all')", path=name
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CassetteError(f"cassette {name} cannot be read: {exc}", path=name) from exc
    rows: list[tuple[int, Any]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            rows.append((number, json.loads(raw)))
        except json.JSONDecodeError as exc:
            raise _bad(name, number, f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not rows:
        raise CassetteError(
            f"cassette {name} is empty: record it again (mode='all')", path=name, line=1
        )
    header = _header(name, *rows[0])
    last_number, last = rows[-1]
    if last != _END:
        raise CassetteError(
            f"cassette {name} ends at line {last_number} without its closing line "
            f"{_dumps(_END)}: it was cut short (a partial copy or write); record it again "
            "(mode='all')",
            path=name,
            line=last_number,
        )
    return header, [_entry(name, number, row) for number, row in rows[1:-1]]


def _header(path: str, number: int, row: Any) -> Header:
    if not isinstance(row, dict) or row.get("format") != FORMAT:
        raise _bad(path, number, f'not a cassette header (a first line with "format": "{FORMAT}")')
    version = row.get("version")
    if version != VERSION:
        wrote = f" (written by mcpsync {row['mcpsync']})" if row.get("mcpsync") else ""
        raise CassetteError(
            f"cassette {path} has format version {version!r}{wrote}; this mcpsync reads version "
            f"{VERSION}: record it again with this mcpsync (mode='all'), or replay it with the "
            "mcpsync that wrote it",
            path=path,
            line=number,
        )
    features = row.get("features", {})
    if not isinstance(features, dict) or not all(isinstance(v, bool) for v in features.values()):
        raise _bad(path, number, '"features" must map names to true/false')
    return Header(transport=str(row.get("transport", "unknown")), features=features,
                  mcpsync=str(row.get("mcpsync", "")))  # fmt: skip


def _entry(path: str, number: int, row: Any) -> Entry:
    if not isinstance(row, dict) or set(row) != {"episode", "from", "message"}:
        raise _bad(
            path,
            number,
            'expected {"episode": N, "from": "client"|"server"|"transport", "message": {...}}',
        )
    episode, side, message = row["episode"], row["from"], row["message"]
    if type(episode) is not int or episode < 0:
        raise _bad(path, number, f'"episode" must be a whole number >= 0, not {episode!r}')
    if side not in ("client", "server", "transport"):
        raise _bad(path, number, f'"from" must be "client", "server" or "transport", not {side!r}')
    if side == "transport":
        refused = message.get("refused") if isinstance(message, dict) else None
        if (
            not isinstance(refused, dict)
            or "id" not in message
            or ("status" in refused and type(refused["status"]) is not int)
        ):
            raise _bad(path, number, 'a "transport" line needs {"id": ..., "refused": {...}}')
        return Entry(episode, side, message)
    if not isinstance(message, dict) or not ("method" in message or "id" in message):
        raise _bad(
            path, number, '"message" must be a JSON-RPC message (an object with a method or an id)'
        )
    if (
        side == "client"
        and "method" not in message
        and "result" not in message
        and "error" not in message
    ):
        raise _bad(path, number, "a client message without method, result or error")
    return Entry(episode, side, message)
