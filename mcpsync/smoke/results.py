"""What a smoke run reports: :class:`SmokeReport` of :class:`EntryResult` of :class:`CallResult`
(plain, picklable data that travels back from a worker), the failure classes with their exit
codes, and :func:`classify` (an exception -> its failure class).
"""

from __future__ import annotations

from concurrent.futures import BrokenExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import (
    AuthError,
    ConfigError,
    HandshakeError,
    HTTPStatusError,
    ProtocolError,
    RequestTimeout,
    ServerError,
    ServerExited,
    TransportError,
)

__all__ = [
    "FAILURE_CLASSES",
    "EXIT_CODES",
    "EXIT_MIXED",
    "CallResult",
    "EntryResult",
    "SmokeReport",
    "classify",
]

FAILURE_CLASSES = (
    "config",
    "spawn",
    "connect",
    "auth",
    "protocol",
    "tool",
    "timeout",
    "worker",
    "drift",
)
EXIT_CODES = {
    "tool": 1,
    "connect": 3,
    "config": 4,
    "spawn": 5,
    "auth": 6,
    "protocol": 7,
    "timeout": 8,
    "worker": 9,
    "drift": 10,
}
EXIT_MIXED = 3  # failed entries of more than one class (as before: "an entry failed")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class CallResult:
    """One ``--call`` on one entry."""

    tool: str
    ok: bool
    seconds: float
    error: str | None = None
    failure: str | None = None  # a FAILURE_CLASSES member when not ok
    skipped: bool = False  # the server offers no such tool


@dataclass(frozen=True)
class EntryResult:
    """What happened to one entry; plain data (picklable, JSON-ready via :meth:`to_json`)."""

    name: str
    state: str  # ready | failed | refused | disabled
    transport: str
    target: str
    protocol_version: str | None = None
    server_info: dict[str, Any] | None = None
    tools: list[str] | None = None
    seconds: float | None = None
    error: str | None = None
    failure: str | None = None  # a FAILURE_CLASSES member when the bring-up failed
    exit_code: int | None = None  # of a stdio server that exited
    stderr_tail: str = ""
    calls: list[CallResult] = field(default_factory=list)
    listing: dict[str, Any] | None = None  # tools/resources/prompts for snapshots
    schema_problems: list[str] = field(default_factory=list)  # --strict findings
    snapshot_changes: list[str] = field(default_factory=list)  # --snapshot differences

    @property
    def ok(self) -> bool:
        """Came up without a failure, or was skipped (disabled, or consent refused)."""
        return self.state in ("ready", "disabled", "refused") and self.failure is None

    @property
    def failures(self) -> list[str]:
        """Every failure class of this entry (bring-up, then calls)."""
        out = [self.failure] if self.failure else []
        out += [c.failure for c in self.calls if c.failure and c.failure not in out]
        return out

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok and not any(not c.ok and not c.skipped for c in self.calls)
        data["call"] = data["calls"][0] if data["calls"] else None  # the first --call
        data.pop("listing")
        failed_call = next((c for c in self.calls if c.failure), None)
        if self.failure is None and failed_call is not None:  # up, but a call failed: say so
            data["failure"] = failed_call.failure
            data["error"] = f"call {failed_call.tool}: {failed_call.error}"
        if not timings:
            data.pop("seconds")
            for c in data["calls"]:
                c.pop("seconds")
            if data["call"] is not None:
                data["call"].pop("seconds", None)
        return data


@dataclass
class SmokeReport:
    """Every entry's :class:`EntryResult` (config order) and the run as a whole."""

    config: str
    entries: list[EntryResult]
    seconds: float
    calls: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> EntryResult:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)

    @property
    def failed(self) -> list[EntryResult]:
        """Entries that did not come up, or whose calls failed."""
        return [e for e in self.entries if e.failures]

    @property
    def no_tool(self) -> list[str]:
        """``--call`` tools no server that came up offers."""
        return [
            tool
            for tool in self.calls
            if not any(c.tool == tool and not c.skipped for e in self.entries for c in e.calls)
        ]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.no_tool

    @property
    def exit_code(self) -> int:
        """0 when ok, else the code of the one failure class seen (several classes: 3)."""
        classes = {f for e in self.entries for f in e.failures}
        if self.no_tool:
            classes.add("tool")
        if not classes:
            return 0
        if len(classes) == 1:
            return EXIT_CODES[classes.pop()]
        return EXIT_MIXED

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "config": self.config,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "servers": [e.to_json(timings=timings) for e in self.entries],
        }
        if timings:
            data["seconds"] = self.seconds
        if self.no_tool:
            data["no_tool"] = self.no_tool
        return data


# --------------------------------------------------------------------------- classes


def classify(error: BaseException, *, during_call: bool = False) -> str:
    """The failure class of ``error`` (see the module docstring)."""
    if isinstance(error, ConfigError):
        return "config"
    if isinstance(error, AuthError):
        return "auth"
    if isinstance(error, HTTPStatusError) and error.status in (401, 403):
        return "auth"
    if isinstance(error, RequestTimeout | TimeoutError | FuturesTimeout):
        return "timeout"
    if isinstance(error, ServerExited):
        return "connect" if during_call else "spawn"
    if isinstance(error, TransportError):
        if not during_call and str(error).startswith("cannot start server"):
            return "spawn"
        return "connect"
    if isinstance(error, ProtocolError | HandshakeError):
        return "protocol"
    if isinstance(error, ServerError):
        return "tool" if during_call else "protocol"
    if isinstance(error, BrokenExecutor):
        return "worker"
    return "tool" if during_call else "connect"


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
