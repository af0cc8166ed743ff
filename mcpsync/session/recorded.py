"""The seam a recorded session plugs into: ``Session.connect(target, cassette=...)``.

Owns: ``TransportWrapper``, what ``connect`` asks of a ``cassette=`` object (one method,
``wrap_transports``; ``mcpsync.testing.Cassette`` is the one mcpsync ships, above this layer,
so the session never imports it), and ``wrap``, which hands it the transports the target
selected together with the strings it must never write (the values of ``env`` and
``headers``). The transports it returns are brought up like any others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..transports.base import Transport

__all__ = ["TransportWrapper", "wrap"]

Factory = Callable[[], Transport]


@runtime_checkable
class TransportWrapper(Protocol):
    def wrap_transports(
        self, factories: list[Factory], *, name: str, secrets: Sequence[str] = ()
    ) -> list[Factory]: ...


def wrap(
    cassette: Any,
    factories: list[Factory],
    *,
    name: str,
    env: Mapping[str, str] | None,
    headers: Mapping[str, str] | None,
    restart: Any,
) -> list[Factory]:
    """``factories`` as ``cassette`` records or replays them; ``ConfigError`` for a cassette
    that is not one, or beside a restart policy (a recording is one server's life)."""
    if not isinstance(cassette, TransportWrapper):
        raise ConfigError(
            f"cassette={cassette!r}: give a mcpsync.testing.Cassette (an object with wrap_transports)"
        )
    if restart:
        raise ConfigError(
            "cassette= and restart= cannot be combined: a cassette records one server's life"
        )
    secrets = [*(env or {}).values(), *(headers or {}).values()]
    return cassette.wrap_transports(factories, name=name, secrets=secrets)
