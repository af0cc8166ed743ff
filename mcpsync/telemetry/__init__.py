"""OpenTelemetry for mcpsync sessions, per the MCP semantic conventions (optional).

Owns: ``make`` (a session's ``Instrument``, or None when telemetry is off or
``opentelemetry-api`` is not installed: then nothing of OpenTelemetry is imported and the
engine does nothing more per message), ``phase`` (a bring-up phase's span, or nothing), and
re-exports ``Telemetry`` and ``Instrument`` (``instrument``) and the context carriers of
``carry``. The implementation, which imports the API, is ``mcpsync.telemetry.otel``.

Install the ``otel`` extra (``pip install mcpsync[otel]``) and configure an SDK as usual:
every session then reports a CLIENT span per request, the ``connect`` span of its bring-up,
and the ``mcp.client.operation.duration`` / ``mcp.client.session.duration`` histograms.

>>> make(False, name="demo") is None
True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

from .carry import Carried, carried, carry
from .instrument import Finish, Instrument, Served, Telemetry

__all__ = [
    "Carried",
    "Finish",
    "Instrument",
    "Served",
    "Telemetry",
    "carried",
    "carry",
    "connecting",
    "make",
    "phase",
    "step",
]

log = logging.getLogger("mcpsync.telemetry")


def make(
    telemetry: bool | Telemetry = True,
    *,
    name: str,
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> Instrument | None:
    """The ``Instrument`` of one session named ``name``, or None: ``telemetry`` False, or
    ``opentelemetry-api`` not installed. ``tracer_provider`` / ``meter_provider`` (or the
    ones in a ``Telemetry``) replace the global providers."""
    if telemetry is False:
        return None
    options = telemetry if isinstance(telemetry, Telemetry) else Telemetry()
    if tracer_provider is not None or meter_provider is not None:
        options = Telemetry(
            tracer_provider if tracer_provider is not None else options.tracer_provider,
            meter_provider if meter_provider is not None else options.meter_provider,
            options.capture_content,
        )
    try:
        from .otel import OtelInstrument
    except ImportError:
        log.debug("mcpsync: opentelemetry-api is not installed: no telemetry")
        return None
    return OtelInstrument(options, name)


#: the span maker of the bring-up under way in this context (``connecting``), for ``step``
_STEPS: ContextVar[Callable[[str], AbstractContextManager[None]] | None] = ContextVar(
    "mcpsync_bringup_steps", default=None
)


@contextmanager
def connecting(instrument: Instrument | None, name: str) -> Iterator[None]:
    """The ``connect`` span a session's bring-up runs in (nothing without an instrument);
    inside it, ``step`` makes spans of that session's tracer."""
    if instrument is None:
        yield
        return
    token = _STEPS.set(instrument.phase)
    try:
        with instrument.connecting(name):
            yield
    finally:
        _STEPS.reset(token)


def step(name: str) -> AbstractContextManager[None]:
    """A span for one step of the bring-up under way in this thread (OAuth: ``auth``,
    ``discovery``, ``registration``, ``token``), under its ``connect`` span; nothing outside
    a bring-up or without telemetry (a token refreshed later, in a call, makes none)."""
    phase = _STEPS.get()
    return nullcontext() if phase is None else phase(name)


def phase(instrument: Instrument | None, name: str) -> AbstractContextManager[None]:
    """The span of bring-up phase ``name`` under the ``connect`` span (nothing without one)."""
    return nullcontext() if instrument is None else instrument.phase(name)
