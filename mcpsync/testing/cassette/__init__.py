"""Recorded sessions: record a session with a real server once, replay it offline in tests.

Owns: ``Cassette`` (the file, the record mode, how requests are matched, what is scrubbed)
and its part of ``Session.connect(target, cassette=...)``: ``wrap_transports`` turns the
transports the target selected into recording ones, or replaces them with one replaying
transport, so that no server is started or contacted. The format is ``fileformat``'s,
the normalization ``normalize``'s; ``recorder`` and ``replayer`` are the two transports.

Modes, as vcrpy names them:

- ``"once"``: record when the file does not exist; else replay only;
- ``"none"``: replay only (a missing file is a ``CassetteError``);
- ``"new_episodes"``: run against the server, keep the file's episodes as they are and add
  those whose request matched none of them (an MCP session is stateful: a new call needs a
  live handshake, so the server is contacted for every call in this mode);
- ``"all"``: always record, replacing the file.

Example::

    from mcpsync.testing import Cassette
    with mcpsync.connect(["my-server"], cassette=Cassette("tests/cassettes/calc.jsonl")) as s:
        s.call_tool("add", {"a": 1, "b": 2})   # first run: recorded; later runs: replayed
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from ...errors import CassetteError, CassetteMismatch, ConfigError
from ...transports.base import Transport
from . import fileformat
from .normalize import MatchOn, Scrub, check_match_on
from .recorder import Recorder, wrap
from .replayer import Replay, ReplayTransport

__all__ = ["Cassette", "CassetteError", "CassetteMismatch", "Mode", "MODES"]

Mode = Literal["once", "none", "new_episodes", "all"]
MODES: tuple[str, ...] = ("once", "none", "new_episodes", "all")


class Cassette:
    """One recorded session in a JSON Lines file at ``path`` (one cassette per session).

    ``mode``: see the module docstring. ``match_on``: what a replayed request is compared
    by: names from ``("method", "params", "meta")`` (``params`` leaves out ``_meta``, the keys
    the client adds, and what ``initialize`` says of the client: ``clientInfo``, the
    ``protocolVersion`` it asks for, its ``capabilities``), or a function of the request message
    returning what to compare. ``strict_order``: requests must come in the recorded order.
    ``scrub(side, message)``: the message to write (changed as you like) or None to leave it
    out, called on every recorded message; ``secrets``: strings never written (replaced by
    ``"<scrubbed>"``), beside the values of the ``env`` and ``headers`` given to connect().
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: Mode = "once",
        *,
        match_on: MatchOn = ("method", "params"),
        strict_order: bool = False,
        scrub: Scrub | None = None,
        secrets: Sequence[str] = (),
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"Cassette mode {mode!r}: use one of {', '.join(MODES)}")
        self.path = Path(path)
        self.mode: Mode = mode
        self.match_on = check_match_on(match_on)
        self.strict_order = strict_order
        self.scrub = scrub
        self.secrets = list(secrets)

    def __repr__(self) -> str:
        return f"Cassette({os.fspath(self.path)!r}, mode={self.mode!r})"

    def per_server(self, name: str) -> Cassette:
        """The cassette of server ``name`` of a ``Host``: ``<path without suffix>/<name>.jsonl``,
        with these settings (``Host(config, cassettes=cassette.per_server)``)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "_"
        return Cassette(self.path.with_suffix("") / f"{safe}.jsonl", self.mode,
                        match_on=self.match_on, strict_order=self.strict_order,
                        scrub=self.scrub, secrets=self.secrets)  # fmt: skip

    @property
    def replays(self) -> bool:
        """True when a session connected now is answered from the file (no server)."""
        return self.mode == "none" or (self.mode == "once" and self.path.exists())

    def wrap_transports(
        self,
        factories: list[Callable[[], Transport]],
        *,
        name: str,
        secrets: Sequence[str] = (),
    ) -> list[Callable[[], Transport]]:
        """For ``Session.connect``: the transports to bring the session up over, in order.

        Replaying: one ``ReplayTransport`` (``factories`` are never called). Recording: each
        of ``factories`` recorded. ``secrets``: the connect() call's env and header values."""
        if self.replays:
            header, entries = fileformat.read(self.path)  # CassetteError before anything starts
            replay = Replay(self.path, header, entries, match_on=self.match_on,
                            strict_order=self.strict_order, secrets=[*self.secrets, *secrets],
                            scrub=self.scrub)  # fmt: skip

            def replaying() -> Transport:
                return ReplayTransport(replay, name=name)

            return [replaying]
        keep = None
        if self.mode == "new_episodes" and self.path.exists():
            _, keep = fileformat.read(self.path)
        every_secret = [*self.secrets, *secrets]

        def recorder() -> Recorder:
            return Recorder(self.path, secrets=every_secret, scrub=self.scrub, keep=keep,
                            match_on=self.match_on)  # fmt: skip

        return [wrap(factory, recorder) for factory in factories]
