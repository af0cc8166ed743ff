"""The restart policy's settings and records: ``RestartPolicy`` and ``RestartEvent``.

Owns: what ``Session.connect(restart=...)`` and a Host entry's ``restart`` key accept (a
policy, True/False, or a config mapping: ``RestartPolicy.of``), the backoff it waits, and
the record of one death and what followed. ``_restart.Restarter`` acts on them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..transports.base import Transport

__all__ = ["RestartPolicy", "RestartEvent", "words"]

#: config keys of a Host entry's ``restart`` object -> RestartPolicy fields
_CONFIG_KEYS = {
    "maxAttempts": "max_attempts",
    "backoff": "backoff",
    "maxBackoff": "max_backoff",
    "factor": "factor",
    "resetAfter": "reset_after",
    "retryReads": "retry_reads",
}


@dataclass(frozen=True)
class RestartPolicy:
    """When and how often a dead server is brought up again.

    ``max_attempts`` bring-ups in a row (a server that dies within ``reset_after`` seconds
    of coming back counts on) before the session gives up and stays closed with
    ``RestartLimitReached``; before attempt n it waits ``backoff * factor**(n-1)`` seconds,
    at most ``max_backoff`` (the wait ends at once when the session is closed).
    ``retry_reads``: re-send reads (lists, ``resources/read``, ``prompts/get``, ping) that
    were in flight, after the restart; a ``tools/call`` is never re-sent. ``on_restart``:
    called with the ``RestartEvent`` once each restart succeeded or was given up, on the
    restart thread. ``make_transport``: for a ``Transport`` target, how to make the next one.
    """

    max_attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 30.0
    factor: float = 2.0
    reset_after: float = 60.0
    retry_reads: bool = False
    on_restart: Callable[[RestartEvent], None] | None = field(default=None, compare=False)
    make_transport: Callable[[], Transport] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ConfigError(f"max_attempts must be an integer, not {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ConfigError("max_attempts must be at least 1")
        for key in ("backoff", "max_backoff", "reset_after"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigError(f"{key} must be a number of seconds >= 0, not {value!r}")
        if (
            isinstance(self.factor, bool)
            or not isinstance(self.factor, int | float)
            or self.factor < 1
        ):
            raise ConfigError(f"factor must be a number >= 1, not {self.factor!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before bring-up attempt ``attempt`` (1-based) of a run."""
        return float(min(self.backoff * self.factor ** max(attempt - 1, 0), self.max_backoff))

    @classmethod
    def of(cls, value: Any, *, where: str = "restart") -> RestartPolicy | None:
        """A policy from ``restart=``: None/False (off), True (defaults), a policy, or a
        config mapping (``maxAttempts``, ``backoff``, ``maxBackoff``, ``factor``,
        ``resetAfter``, ``retryReads``; the snake_case names too)."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, RestartPolicy):
            return value
        if isinstance(value, Mapping):
            fields = set(_CONFIG_KEYS.values())
            kwargs: dict[str, Any] = {}
            for key, item in value.items():
                name = _CONFIG_KEYS.get(key, key)
                if name not in fields:
                    known = ", ".join(_CONFIG_KEYS)
                    raise ConfigError(f"{where}: unknown key {key!r} (known: {known})")
                kwargs[name] = item
            return cls(**kwargs)
        raise ConfigError(f"{where} must be true, false or a RestartPolicy, not {value!r}")


class RestartEvent:
    """One death of the server and what followed.

    (A plain class, not a dataclass: ``@dataclass`` costs ~0.3 ms at import, on every cold
    start; equality by value and the repr are a dataclass's.)
    """

    #: what ended the session (``ServerExited``, ``ConnectError``, ``SessionExpired`` ...)
    reason: BaseException
    #: ``time.time()`` of the death
    at: float
    #: 1 for the session's first death, 2 for the next ...
    number: int
    #: the errors of the bring-up attempts that failed, in order
    failures: list[BaseException]
    #: True: the session is back; False: given up (or closed meanwhile); None: under way
    ok: bool | None
    #: seconds from the death until the session was back (or given up)
    seconds: float
    #: what was opened again ("subscription <uri>", "log level debug", "listen ...")
    reopened: list[str]
    #: what could not be opened again, in words
    problems: list[str]

    _FIELDS = ("reason", "at", "number", "failures", "ok", "seconds", "reopened", "problems")

    def __init__(
        self,
        reason: BaseException,
        at: float,
        number: int,
        failures: list[BaseException] | None = None,
        ok: bool | None = None,
        seconds: float = 0.0,
        reopened: list[str] | None = None,
        problems: list[str] | None = None,
    ) -> None:
        self.reason = reason
        self.at = at
        self.number = number
        self.failures = [] if failures is None else failures
        self.ok = ok
        self.seconds = seconds
        self.reopened = [] if reopened is None else reopened
        self.problems = [] if problems is None else problems

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, RestartEvent)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, as a dataclass

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"RestartEvent({fields})"


def words(error: BaseException) -> str:
    """An error in one line: its type and the first line of its text."""
    first = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
