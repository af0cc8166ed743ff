"""Transport selection: what a connect target names, as transports to try in order.

Owns: turning a target into transport factories. A command (a list of arguments) is one
stdio transport; an ``http(s)://`` URL is Streamable HTTP, then the legacy HTTP+SSE
transport as a fallback (``transport="auto"``), or just one of them when named; a
``Transport`` is used as given. ``Session.connect`` and ``Host`` both build through here.
``respawn``: a fresh stdio transport like one already used (a server that died of the
era probe is started again in a new process, also when the caller handed over the transport).

The transport modules are imported inside the factories: ``import mcpsync`` must not pay
for ``requests`` when only stdio is used (and the other way round).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from .base import Transport

__all__ = ["Factory", "is_url", "stdio_transport", "http_candidates", "candidates", "respawn"]

#: Builds one transport (not started).
Factory = Callable[[], Transport]

#: ``transport=`` values that fit a URL, and the one that fits a command.
HTTP_KINDS = ("auto", "streamable-http", "http", "sse")
STDIO_KINDS = ("auto", "stdio")


def is_url(target: Any) -> bool:
    """True for a string naming a URL (``scheme://...``)."""
    return isinstance(target, str) and "://" in target


def stdio_transport(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    inherit_env: bool = False,
    name: str | None = None,
) -> Transport:
    """A stdio transport running ``argv`` (not started)."""
    from .stdio import StdioTransport

    return StdioTransport(list(argv), env=env, cwd=cwd, inherit_env=inherit_env, name=name)


def http_candidates(
    url: str, transport: str = "auto", deadline: float | None = None, **options: Any
) -> list[Factory]:
    """Transports to try for a URL, in order (Streamable HTTP, then legacy SSE).

    ``deadline``: the bring-up's (``time.monotonic()``); the legacy SSE fallback's wait
    for its ``endpoint`` event gets what is left of it, not a whole ``connect_timeout``.
    ``options``: the transports' shared keyword arguments (headers, auth, timeouts ...).
    """

    def streamable() -> Transport:
        from .http.streamable import StreamableHTTPTransport

        return StreamableHTTPTransport(url, **options)

    def legacy() -> Transport:
        from .http.legacy_sse import LegacySSETransport

        left = dict(options)
        if deadline is not None:
            left["connect_timeout"] = max(deadline - time.monotonic(), 0.001)
        return LegacySSETransport(url, **left)

    if transport in ("streamable-http", "http"):
        return [streamable]
    if transport == "sse":
        return [legacy]
    if transport != "auto":
        raise ConfigError(
            f"transport {transport!r} does not fit a URL; use 'streamable-http' or 'sse'"
        )
    return [streamable, legacy]


def candidates(
    target: Any,
    *,
    transport: str = "auto",
    deadline: float | None = None,
    name: str | None = None,
    argv_name: Callable[[list[str]], str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    inherit_env: bool = False,
    **http_options: Any,
) -> tuple[str, list[Factory]]:
    """(name, factories to try in order) for a connect target.

    ``target``: a ``Transport``, an ``http(s)://`` URL or a command (list of arguments).
    ``name``: the caller's label; by default the transport's name, the URL's host, or
    ``argv_name(argv)`` (else the program). ``env``/``cwd``/``inherit_env`` are for
    commands, ``http_options`` (with ``name``) for URLs. ``ConfigError`` for anything else.
    """
    if isinstance(target, Transport):
        given = target
        return name or given.name or given.kind, [lambda: given]
    if is_url(target):
        name = name or target.split("://", 1)[1].split("/", 1)[0]
        return name, http_candidates(target, transport, deadline, name=name, **http_options)
    if isinstance(target, (list, tuple)) and target and transport in STDIO_KINDS:
        argv = list(target)
        label = name or (argv_name(argv) if argv_name is not None else argv[0])

        def stdio() -> Transport:
            return stdio_transport(argv, env=env, cwd=cwd, inherit_env=inherit_env, name=label)

        return label, [stdio]
    hint = ""
    if isinstance(target, str) and target.strip():
        import shlex

        try:
            hint = f" (as a list: {shlex.split(target)!r})"
        except ValueError:  # unbalanced quotes: no guess
            pass
    elif isinstance(target, (list, tuple)) and target:  # a command with an HTTP transport
        hint = f" (transport={transport!r} takes a URL)"
    raise ConfigError(
        f"cannot connect to {target!r}: give a URL, a command as a list of arguments"
        f"{hint}, or a Transport"
    )


def respawn(used: Transport) -> Factory | None:
    """A factory of fresh, unstarted transports like ``used`` (None: not a stdio transport).

    The copy runs the same command with the same environment, working directory, name,
    limits and ``identity`` (the verdict cache's key)."""
    from .stdio import StdioTransport

    if not isinstance(used, StdioTransport):
        return None

    def fresh() -> Transport:
        copy = StdioTransport(
            used.argv, cwd=used.cwd, name=used.name, max_message_bytes=used.max_message_bytes,
            stderr_tail_lines=used.stderr_tail_lines,
            shutdown_timeout=used.shutdown_timeout, write_timeout=used.write_timeout,
        )  # fmt: skip
        copy.env = dict(used.env)  # exactly what the first process got
        copy.identity = used.identity
        used.successor = copy  # whoever may close the first (a Host) finds this one
        return copy

    return fresh
