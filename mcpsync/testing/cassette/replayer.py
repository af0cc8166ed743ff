"""Replaying: a transport that answers a session from a cassette, with no server at all.

Owns: ``Replay`` (a loaded cassette's episodes and how a live request finds one: by
``match_key``, in any order, or strictly in the recorded order) and ``ReplayTransport``.
The transport starts no process, opens no socket and starts no thread: ``send`` of a
request delivers, in the calling thread and in recorded order, what the server sent in
that request's episode (its notifications, its own requests, the response), with the live
request's id and progress token in place of the recorded ones. A recorded server request
(sampling, elicitation, roots) pauses the episode until the session answers it; the answer
(sent from the session's worker) delivers the rest. A live request is compared as the recording wrote it (secrets scrubbed, the
``scrub`` hook applied). A request that matches nothing raises
``CassetteMismatch`` from ``send``, naming it and the nearest recorded request.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import CassetteMismatch, TransportError
from ...transports.base import Features, Message, OnClose, OnError, OnMessage, Transport
from .fileformat import Entry, Header, error_of
from .normalize import (
    MIN_SECRET,
    MatchOn,
    Scrub,
    describe,
    match_key,
    progress_placeholder,
    scrub_secrets,
)

__all__ = ["Replay", "ReplayTransport"]


@dataclass
class _Episode:
    number: int
    request: Entry
    key: Any
    #: what followed the request in this episode, in recorded order
    rest: list[Entry] = field(default_factory=list)
    #: the response, when it is all that followed (played without a ``_Playing``)
    reply: Message | None = None


class Replay:
    """A cassette ready to answer requests: ``find(message)`` -> the episode to play."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: Header,
        entries: list[Entry],
        *,
        match_on: MatchOn = ("method", "params"),
        strict_order: bool = False,
        secrets: Sequence[str] = (),
        scrub: Scrub | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.secrets = [s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET]
        self.scrub = scrub
        self.header = header
        self.match_on = match_on
        self.strict_order = strict_order
        self.episodes: list[_Episode] = []
        #: server messages before any request (played before the first answer)
        self.opening: list[Entry] = []
        by_number: dict[int, _Episode] = {}
        for entry in entries:
            message = entry.message
            if entry.side == "client" and "method" in message and "id" in message:
                episode = _Episode(entry.episode, entry, match_key(message, match_on))
                by_number[entry.episode] = episode
                self.episodes.append(episode)
            elif entry.episode in by_number:
                by_number[entry.episode].rest.append(entry)
            elif entry.side == "server":
                self.opening.append(entry)
        for episode in self.episodes:
            rest, rid = episode.rest, episode.request.message.get("id")
            if len(rest) == 1 and rest[0].side == "server" and "method" not in rest[0].message:
                if rest[0].message.get("id") == rid:
                    episode.reply = rest[0].message
        #: match key -> indexes into episodes, in recorded order
        self._by_key: dict[Any, list[int]] = {}
        for i, episode in enumerate(self.episodes):
            self._by_key.setdefault(episode.key, []).append(i)
        self._played: dict[Any, int] = {}  # match key -> how many of its episodes were played
        self._next = 0  # strict order: the index of the next episode
        self._lock = threading.Lock()

    def find(self, message: Message) -> _Episode:
        """The episode that answers ``message``; ``CassetteMismatch`` if none does.

        Any order: the first unplayed episode with the same key, else the last played one
        again (a repeated ``tools/list`` is answered as recorded). Strict order: the next
        recorded episode, which must have the same key."""
        message = self._as_recorded(message)
        key = match_key(message, self.match_on)
        with self._lock:
            if self.strict_order:
                if self._next < len(self.episodes) and self.episodes[self._next].key == key:
                    self._next += 1
                    return self.episodes[self._next - 1]
                expected = self.episodes[self._next] if self._next < len(self.episodes) else None
                raise self._mismatch(message, expected, "in recorded order, the next request is")
            matches = self._by_key.get(key)
            if matches:
                played = self._played.get(key, 0)
                self._played[key] = played + 1
                return self.episodes[matches[min(played, len(matches) - 1)]]
        raise self._mismatch(message, self._nearest(message), "the nearest recorded request is")

    def _as_recorded(self, message: Message) -> Message:
        """A live request as the recording would have written it: secrets scrubbed, the
        ``scrub`` hook applied (so a request that carried a secret still matches)."""
        if not self.secrets and self.scrub is None:
            return message
        seen = scrub_secrets(message, self.secrets)
        if self.scrub is not None:
            kept = self.scrub("client", copy.deepcopy(seen))
            seen = kept if kept is not None else seen
        return seen

    def _nearest(self, message: Message) -> _Episode | None:
        if not self.episodes:
            return None
        text = describe(message, limit=2000)
        same = [
            e for e in self.episodes if e.request.message.get("method") == message.get("method")
        ]

        def likeness(e: _Episode) -> float:
            theirs = describe(e.request.message, limit=2000)
            return difflib.SequenceMatcher(None, text, theirs, autojunk=False).ratio()

        return max(same or self.episodes, key=likeness)

    def _mismatch(self, message: Message, near: _Episode | None, words: str) -> CassetteMismatch:
        sent = describe(message)
        nearest = describe(near.request.message) if near is not None else None
        where = (f"{words} {nearest} (episode {near.number})" if near is not None
                 else "the cassette has no requests")  # fmt: skip
        return CassetteMismatch(
            f"cassette {self.path}: no recorded request matches {sent}; {where}. Record it "
            "(mode='new_episodes' adds what is missing, 'all' records everything again), or "
            "change match_on=",
            request={"method": message.get("method"), "params": message.get("params")},
            nearest=near.request.message if near is not None else None,
            path=self.path,
        )


class _Playing:
    """One episode being played: where it is, and the live values it substitutes."""

    def __init__(self, episode: _Episode, live_id: Any, token: Any) -> None:
        self.episode = episode
        self.recorded_id = episode.request.message.get("id")
        self.live_id = live_id
        self.token = token
        self.at = 0


class ReplayTransport(Transport):
    """Answers the session from ``replay``; needs no server, process, socket or thread."""

    kind = "cassette"

    def __init__(self, replay: Replay, name: str = "cassette") -> None:
        self.replay = replay
        self.name = name
        recorded = replay.header.features
        self.features = Features(carries_modern=recorded.get("carries_modern", True),
                                 bounded_probe=recorded.get("bounded_probe", False))  # fmt: skip
        self._lock = threading.Lock()
        self._delivering = threading.RLock()  # wire order: one delivery at a time
        self._waiting: dict[tuple[str, Any], _Playing] = {}  # live server request id -> episode
        self._server_ids = itertools.count(1)
        self._opened = False
        self._closed = False

    def describe(self) -> str:
        return f"cassette {self.replay.path} (replaying {self.replay.header.transport})"

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        self._bind(on_message, on_close, on_error)

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if self._closed:
            self._check_owner()
            raise TransportError(f"{self.describe()} is closed")
        with self._delivering:
            if not self._opened:
                self._opened = True
                for entry in self.replay.opening:
                    self._deliver(entry.message)
            if "method" in message and "id" in message:
                episode = self.replay.find(message)
                if episode.reply is not None:  # a response and nothing else: the common case
                    self._deliver({**episode.reply, "id": message["id"]})
                    return
                params = message.get("params")
                meta = params.get("_meta") if isinstance(params, dict) else None
                token = meta.get("progressToken") if isinstance(meta, dict) else None
                self._play(_Playing(episode, message["id"], token))
            elif "method" not in message and "id" in message:  # the answer to a server request
                with self._lock:
                    playing = self._waiting.pop((type(message["id"]).__name__, message["id"]), None)
                if playing is not None:
                    self._play(playing)
            # notifications from the client (initialized, cancelled, ...) need no answer

    def _play(self, playing: _Playing) -> None:
        rest = playing.episode.rest
        while playing.at < len(rest) and not self._closed:
            entry = rest[playing.at]
            playing.at += 1
            if entry.side == "transport" and entry.message.get("id") == playing.recorded_id:
                raise error_of(entry.message)  # refused as recorded, from this send
            if entry.side != "server":
                continue  # the client's own messages: what the session sends again by itself
            message = dict(entry.message)
            if "method" not in message:  # the response
                if message.get("id") != playing.recorded_id:
                    continue
                message["id"] = playing.live_id
                self._deliver(message)
            elif "id" in message:  # the server's own request: wait for the session's answer
                live = next(self._server_ids)
                message["id"] = live
                with self._lock:
                    self._waiting[("int", live)] = playing
                self._deliver(message)
                return
            else:
                self._deliver(self._live_notification(message, playing))

    @staticmethod
    def _live_notification(message: Message, playing: _Playing) -> Message:
        params = message.get("params")
        if not isinstance(params, dict):
            return message
        params = dict(params)
        if params.get("progressToken") == progress_placeholder(playing.recorded_id):
            params["progressToken"] = playing.token
        if (
            message.get("method") == "notifications/cancelled"
            and params.get("requestId") == playing.recorded_id
        ):
            params["requestId"] = playing.live_id
        return {**message, "params": params}

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._waiting.clear()
        self._report_close(None)
