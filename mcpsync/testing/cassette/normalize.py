"""What makes a recording replayable by another run: normalized ids, episodes, match keys.

Owns: turning the raw messages a recorder saw, in wire order, into ``Entry`` lines
(``normalize``): each client request opens an episode, and what the server sent while it
was pending (or after it, before the next request) belongs to it; client request ids become
1, 2, ... in the order sent, the server's request ids likewise, progress tokens become
``"progress-N"`` (N: the request's normalized id), and the secrets given or found by the
``scrub`` hook never reach an entry. Also ``match_key``, what a replay compares a live request
by (method and params without ``_meta``, the keys the client adds, by default), and
``describe`` for error messages. Pure functions: no files, no transports.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ...errors import ConfigError
from .fileformat import Entry, Side

__all__ = [
    "SCRUBBED",
    "MIN_SECRET",
    "Scrub",
    "MatchOn",
    "normalize",
    "match_key",
    "check_match_on",
    "describe",
    "progress_placeholder",
    "scrub_secrets",
]

#: what a secret is replaced with
SCRUBBED = "<scrubbed>"
#: shorter strings are not scrubbed (an env value "1" or "on" would scrub every such text)
MIN_SECRET = 4
#: the user's hook: (who sent it, the message) -> the message to write, or None to drop it
Scrub = Callable[[Side, dict[str, Any]], "dict[str, Any] | None"]
#: what requests are matched on: names from ``MATCH_PARTS``, or a function of the request
MatchOn = Sequence[str] | Callable[[dict[str, Any]], Any]
MATCH_PARTS = ("method", "params", "meta")
#: params of the bring-up requests that describe the client, not what it asks: left out of
#: the match, so that a cassette still replays after an upgrade of mcpsync (a newer protocol
#: version asked for, another name) or a handler added (another capability); the recorded
#: answer is what the session then negotiates with
_HANDSHAKE = {
    "initialize": ("clientInfo", "protocolVersion", "capabilities"),
    "server/discover": ("clientInfo",),
}


def progress_placeholder(normalized_id: Any) -> str:
    return f"progress-{normalized_id}"


def _key(value: Any) -> tuple[str, Any]:
    """Ids compare by type and value (``True == 1`` must not match)."""
    return type(value).__name__, value


def scrub_secrets(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` with every occurrence of each secret in its strings (keys too) replaced."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, SCRUBBED)
        return value
    if isinstance(value, dict):
        return {scrub_secrets(k, secrets): scrub_secrets(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_secrets(v, secrets) for v in value]
    return value


class _Ids:
    """Raw ids -> 1, 2, ... in the order first seen (one numbering per side's requests)."""

    def __init__(self, start: int = 0) -> None:
        self.next = start
        self.seen: dict[tuple[str, Any], int] = {}

    def new(self, raw: Any) -> int:
        self.next += 1
        self.seen[_key(raw)] = self.next
        return self.next

    def get(self, raw: Any) -> Any:
        return self.seen.get(_key(raw), raw)


def normalize(
    raw: Iterable[tuple[Side, dict[str, Any]]],
    *,
    secrets: Sequence[str] = (),
    scrub: Scrub | None = None,
    client_start: int = 0,
    server_start: int = 0,
    episode_start: int = 0,
) -> list[Entry]:
    """The entries for ``raw`` (who sent it, the message as sent or received, in wire order).

    ``*_start``: the last client id, server id and episode already used (a cassette that new
    episodes are added to numbers on from its own). Messages are copied, never changed."""
    client, server = _Ids(client_start), _Ids(server_start)
    episode = episode_start
    request_episode: dict[int, int] = {}  # normalized client id -> episode
    server_episode: dict[int, int] = {}  # normalized server id -> episode
    pending: list[int] = []  # normalized ids of client requests not answered yet
    tokens: dict[tuple[str, Any], str] = {}
    secrets = [s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET]
    out: list[Entry] = []
    for side, original in raw:
        message = copy.deepcopy(original)
        method = message.get("method")
        has_id = "id" in message
        if side == "client" and method is not None and has_id:  # a request: a new episode
            episode += 1
            nid = client.new(message["id"])
            message["id"] = nid
            request_episode[nid] = episode
            pending.append(nid)
            meta = (message.get("params") or {}).get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                placeholder = progress_placeholder(nid)
                tokens[_key(meta["progressToken"])] = placeholder
                meta["progressToken"] = placeholder
            where = episode
        elif side == "transport":  # the transport refused our request (no answer came)
            nid = client.get(message["id"])
            message["id"] = nid
            if nid in pending:
                pending.remove(nid)
            where = request_episode.get(nid, episode)
        elif side == "server" and method is None and has_id:  # the answer to our request
            nid = client.get(message["id"])
            message["id"] = nid
            if nid in pending:
                pending.remove(nid)
            where = request_episode.get(nid, episode)
        elif side == "server" and has_id:  # the server asks the client
            sid = server.new(message["id"])
            message["id"] = sid
            where = request_episode[pending[-1]] if pending else episode
            server_episode[sid] = where
        elif side == "client" and has_id:  # the client's answer to the server's request
            sid = server.get(message["id"])
            message["id"] = sid
            where = server_episode.get(sid, episode)
        else:  # a notification, either way
            params = message.get("params")
            if isinstance(params, dict):
                if "progressToken" in params:
                    params["progressToken"] = tokens.get(
                        _key(params["progressToken"]), params["progressToken"]
                    )
                if method == "notifications/cancelled" and "requestId" in params:
                    ids = client if side == "client" else server
                    params["requestId"] = ids.get(params["requestId"])
            if side == "server" and pending:
                where = request_episode[pending[-1]]
            else:
                where = episode
        message = scrub_secrets(message, secrets)
        if scrub is not None:
            kept = scrub(side, message)
            if kept is None:
                continue
            message = kept
        out.append(Entry(where, side, message))
    return out


def check_match_on(match_on: MatchOn) -> MatchOn:
    """``match_on`` if it is usable; ``ConfigError`` saying what is, before anything runs."""
    if callable(match_on):
        return match_on
    parts = [match_on] if isinstance(match_on, str) else list(match_on)
    unknown = [p for p in parts if p not in MATCH_PARTS]
    if unknown or not parts:
        raise ConfigError(
            f"match_on={match_on!r}: give names from {MATCH_PARTS} (e.g. ('method', 'params')) "
            "or a function of the request message"
        )
    return tuple(parts)


def _params(message: dict[str, Any], meta: bool) -> Any:
    params = message.get("params")
    if not isinstance(params, dict):
        return params
    method = message.get("method")
    drop = _HANDSHAKE.get(method, ()) if isinstance(method, str) else ()
    if not meta and "_meta" in params:
        drop = (*drop, "_meta")
    if drop and any(k in params for k in drop):
        return {k: v for k, v in params.items() if k not in drop}
    return params


def _meta(message: dict[str, Any]) -> Any:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return None
    return {k: v for k, v in meta.items() if k != "progressToken"}


def match_key(message: dict[str, Any], match_on: MatchOn) -> Any:
    """What ``message`` (a request) is compared by, as a hashable value."""
    if callable(match_on):
        return _canonical(match_on(message))
    parts: list[Any] = []
    for part in match_on:
        if part == "method":
            parts.append(message.get("method"))
        elif part == "params":
            parts.append(_canonical(_params(message, meta=False)))
        else:
            parts.append(_canonical(_meta(message)))
    return tuple(parts)


def _not_json(value: Any) -> Any:
    raise TypeError(type(value).__name__)


_json_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_json_string: Any = getattr(json.encoder, "c_encode_basestring", None)
#: JSON with sorted keys, as ``json.dumps(value, sort_keys=True, ensure_ascii=False)`` writes
#: it: the C encoder called directly (a key is made per replayed request: 0.6 us, not 1.4)
_encode: Callable[[Any, int], Any] | None = (
    _json_encoder(None, _not_json, _json_string, None, ": ", ", ", True, False, True)
    if _json_encoder is not None and _json_string is not None
    else None
)
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


def _canonical(value: Any) -> Any:
    try:
        if _encode is not None:
            return "".join(_encode(value, 0))
        return _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def describe(message: dict[str, Any], limit: int = 300) -> str:
    """``method {params}`` of a request, for error messages (params without ``_meta``, cut)."""
    params = _canonical(_params(message, meta=False))
    text = f"{message.get('method')} {params}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
