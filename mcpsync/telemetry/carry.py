"""The caller's trace context carried to another thread or another process.

Owns: ``carry`` (a callable that runs in a copy of the calling thread's context: the
OpenTelemetry context lives in a ``contextvars`` variable, so a thread pool's worker, a
``Host`` fan-out thread or an adapter's dispatch makes its spans children of the caller's;
nothing of OpenTelemetry is imported), and ``Carried``/``carried`` (a picklable callable that
takes the context to a process or a Dask worker as W3C ``traceparent``/``tracestate``/``baggage``
strings, injected here and extracted there; without OpenTelemetry, or with no context, it is
the plain call).
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["Carried", "carried", "carry"]

T = TypeVar("T")


def carry(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` to be called in another thread, in the context of this one (a copy per call:
    one context cannot be entered by two threads at once).

    >>> import contextvars, threading
    >>> var = contextvars.ContextVar("var", default="unset")
    >>> _ = var.set("caller's")
    >>> seen = []
    >>> t = threading.Thread(target=carry(lambda: seen.append(var.get())), name="doc-carry")
    >>> t.start(); t.join()
    >>> seen
    ["caller's"]
    """
    context = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        return context.copy().run(fn, *args, **kwargs)

    return run


class Carried(Generic[T]):
    """A picklable call of ``fn`` that runs in the trace context ``carrier`` names (W3C
    strings; empty: no context). Made by ``carried``; called in another process."""

    __slots__ = ("fn", "carrier")

    def __init__(self, fn: Callable[..., T], carrier: dict[str, str]) -> None:
        self.fn = fn
        self.carrier = carrier

    def __call__(self, *args: Any, **kwargs: Any) -> T:
        if not self.carrier:
            return self.fn(*args, **kwargs)
        from opentelemetry import context, propagate

        token = context.attach(propagate.extract(self.carrier))
        try:
            return self.fn(*args, **kwargs)
        finally:
            context.detach(token)

    def __getstate__(self) -> tuple[Callable[..., T], dict[str, str]]:
        return self.fn, self.carrier

    def __setstate__(self, state: tuple[Callable[..., T], dict[str, str]]) -> None:
        self.fn, self.carrier = state


def carried(fn: Callable[..., T]) -> Carried[T]:
    """``fn`` with the caller's trace context as W3C strings, for another process (a process
    pool, a Dask worker). OpenTelemetry is used only if the program imported it already."""
    carrier: dict[str, str] = {}
    if "opentelemetry.context" in sys.modules:  # a context exists only if it was imported
        from opentelemetry import propagate

        propagate.inject(carrier)
    return Carried(fn, carrier)
