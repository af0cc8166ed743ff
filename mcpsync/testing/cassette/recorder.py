"""Recording: a transport wrapped so that every message it moves is kept for the cassette.

Owns: ``Recorder`` (the raw messages of one session in wire order, and writing them as a
cassette when the session ends: all of them, or only the episodes an existing cassette lacks)
and ``RecordingTransport``, which wraps the transport a session chose and does everything
through it: what it sends is kept before it goes out, what it delivers is kept before the
session sees it (requests, responses, notifications and the server's requests with the
client's answers). Headers are never recorded (they are not messages): an ``Authorization``,
``DPoP`` or cookie cannot reach the file from here.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._version import __version__
from ...errors import MCPSyncError
from ...runtime.lifecycle import forked
from ...transports.base import Message, OnClose, OnError, OnMessage, Transport
from . import fileformat
from .fileformat import Entry, Header, Side
from .normalize import MatchOn, Scrub, match_key, normalize

__all__ = ["Recorder", "RecordingTransport"]


class Recorder:
    """The messages of one recorded session; ``save()`` writes them to ``path``.

    ``keep``: the entries of the cassette already at ``path`` (mode ``new_episodes``): they
    stay as they are, and only the episodes whose request matches none of theirs are added."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        secrets: Sequence[str] = (),
        scrub: Scrub | None = None,
        keep: list[Entry] | None = None,
        match_on: MatchOn = ("method", "params"),
    ) -> None:
        self.path = path
        self.secrets = list(secrets)
        self.scrub = scrub
        self.keep = keep
        self.match_on = match_on
        self.header = Header()
        self._raw: list[tuple[Side, Message]] = []
        self._lock = threading.Lock()
        self.saved = False

    def add(self, side: Side, message: Any) -> None:
        """Keep one message (a batch: each of it), copied as the wire would carry it."""
        items = message if isinstance(message, list) else [message]
        copies = [json.loads(json.dumps(item)) for item in items if isinstance(item, dict)]
        with self._lock:
            self._raw.extend((side, item) for item in copies)

    def entries(self) -> list[Entry]:
        """What ``save()`` writes (the kept entries first, in mode ``new_episodes``)."""
        with self._lock:
            raw = list(self._raw)
        if self.keep is None:
            return normalize(raw, secrets=self.secrets, scrub=self.scrub)
        keep = self.keep
        last = _last_ids(keep)
        new = normalize(raw, secrets=self.secrets, scrub=self.scrub, client_start=last[0],
                        server_start=last[1], episode_start=last[2])  # fmt: skip
        known = {match_key(e.message, self.match_on) for e in keep if _is_request(e)}
        fresh = {e.episode for e in new if _is_request(e)
                 and match_key(e.message, self.match_on) not in known}  # fmt: skip
        return keep + [e for e in new if e.episode in fresh]

    def save(self) -> None:
        """Write the cassette (once; later calls do nothing). A transport the server never
        answered (a bring-up candidate that failed, e.g. Streamable HTTP before the legacy
        SSE fallback) writes nothing: the candidate that worked writes the cassette."""
        with self._lock:
            if self.saved or not any(side == "server" for side, _ in self._raw):
                return
            self.saved = True
        fileformat.write(self.path, self.header, self.entries())


def _is_request(entry: Entry) -> bool:
    return entry.side == "client" and "method" in entry.message and "id" in entry.message


def _last_ids(entries: list[Entry]) -> tuple[int, int, int]:
    """The highest (client request id, server request id, episode) in ``entries``."""
    client = server = episode = 0
    for e in entries:
        episode = max(episode, e.episode)
        mid = e.message.get("id")
        if type(mid) is not int:
            continue
        requested_by_client = (e.side == "client") == ("method" in e.message)
        if requested_by_client:
            client = max(client, mid)
        else:
            server = max(server, mid)
    return client, server, episode


class RecordingTransport(Transport):
    """``inner`` with every message kept by ``recorder``; saved when it closes."""

    def __init__(self, inner: Transport, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder
        self.kind = inner.kind
        self.features = inner.features
        self.name = inner.name
        recorder.header = Header(
            transport=inner.kind,
            features={"carries_modern": inner.features.carries_modern,
                      "bounded_probe": inner.features.bounded_probe},
            mcpsync=__version__,
        )  # fmt: skip
        self._closed = False

    # the attributes the session's layers set or read on their transport reach ``inner``
    @property  # type: ignore[override]
    def identity(self) -> str | None:  # noqa: D102
        return self.inner.identity

    @identity.setter
    def identity(self, value: str | None) -> None:
        self.inner.identity = value

    @property  # type: ignore[override]
    def bringup_deadline(self) -> float | None:  # noqa: D102
        return self.inner.bringup_deadline

    @bringup_deadline.setter
    def bringup_deadline(self, value: float | None) -> None:
        self.inner.bringup_deadline = value

    def __getattr__(self, name: str) -> Any:  # a transport's own extras (``process``, ...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        # registered with the process's lifecycle too: a session never closed is saved at exit
        self._bind(on_message, on_close, on_error)
        recorder = self.recorder

        def received(message: Message) -> None:
            recorder.add("server", message)
            on_message(message)

        def closed(error: BaseException | None) -> None:
            try:
                self._save()
            finally:
                on_close(error)

        self.inner.start(received, closed, on_error)

    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.recorder.add("client", message)
        try:
            self.inner.send(message, timeout=timeout, headers=headers)
        except MCPSyncError as exc:  # refused (an HTTP status, no reply): replayed as refused
            if "method" in message and "id" in message:
                self.recorder.add("transport", fileformat.refusal_of(message["id"], exc))
            raise

    def close(self) -> None:
        self.inner.close()
        self._save()

    def _save(self) -> None:
        if not forked(self.inner):  # a child of os.fork() writes nothing of its parent's
            self.recorder.save()

    def abandon(self) -> None:
        self.inner.abandon()

    def exit_soon(self, deadline: float) -> bool:
        return self.inner.exit_soon(deadline)

    def set_protocol_version(self, version: str) -> None:
        self.inner.set_protocol_version(version)

    def describe(self) -> str:
        return f"{self.inner.describe()} (recording to {os.fspath(self.recorder.path)})"

    def wait_for(self, future: Any, deadline: float) -> None:
        self.inner.wait_for(future, deadline)

    def wakeup(self) -> None:
        self.inner.wakeup()

    def abort_request(self, request_id: Any) -> bool:
        return self.inner.abort_request(request_id)

    def stderr_tail(self) -> str:
        return self.inner.stderr_tail()

    def stdout_noise(self) -> list[str]:
        return self.inner.stdout_noise()


def wrap(
    factory: Callable[[], Transport], recorder: Callable[[], Recorder]
) -> Callable[[], Transport]:
    """A factory of ``factory``'s transports, each recorded by a new ``recorder()``."""

    def recorded() -> Transport:
        return RecordingTransport(factory(), recorder())

    return recorded
