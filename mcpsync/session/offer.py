"""What the client offers a server: the capabilities the given handlers imply, and the
handlers installed on the Connection for the server-to-client requests they answer
(``roots/list``, ``sampling/createMessage``, ``elicitation/create``; the last two typed
with ``mcp_types`` models on first use); and the extensions ``connect(extensions=...)``
advertises (``extensions``: an extension's default settings come from the module that
implements it, named in ``EXTENSION_SETTINGS`` and imported only when asked for)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..typed import typed_handler

__all__ = ["install", "extensions", "EXTENSION_SETTINGS"]

#: extension id -> "module:function" returning its default settings (it raises ConfigError
#: when this client cannot honour the extension, e.g. an optional dependency is missing)
EXTENSION_SETTINGS: dict[str, str] = {
    "io.modelcontextprotocol/ui": "mcpsync.apps:settings",
}


def install(
    handlers: dict[str, Callable[[dict[str, Any]], Any]],
    sampling_handler: Callable[[Any], Any] | None,
    elicitation_handler: Callable[[Any], Any] | None,
    answer_roots: Callable[[dict[str, Any]], Any] | None,
) -> dict[str, Any]:
    """Put the handlers given in ``handlers`` (a Connection's ``request_handlers``) and
    return the client capabilities they advertise."""
    caps: dict[str, Any] = {}
    if answer_roots is not None:
        caps["roots"] = {"listChanged": True}
        handlers["roots/list"] = answer_roots
    if sampling_handler is not None:
        caps["sampling"] = {}
        handlers["sampling/createMessage"] = typed_handler(
            sampling_handler, "CreateMessageRequestParams"
        )
    if elicitation_handler is not None:
        caps["elicitation"] = {"form": {}, "url": {}}
        handlers["elicitation/create"] = typed_handler(elicitation_handler, "ElicitRequestParams")
    return caps


def extensions(
    given: Mapping[str, Mapping[str, Any] | None] | Sequence[str] | None,
) -> dict[str, Any]:
    """The client capabilities for ``connect(extensions=...)``: ``{"extensions": {id: settings}}``
    (empty when none). ``given`` is a list of extension ids (each with its default settings)
    or a mapping of id -> settings (None: the defaults); ConfigError for anything else."""
    if not given:
        return {}
    if isinstance(given, str):
        raise ConfigError("extensions= wants a list of extension ids or a mapping, not a string")
    items = given.items() if isinstance(given, Mapping) else [(ext, None) for ext in given]
    offered: dict[str, dict[str, Any]] = {}
    for ext, settings in items:
        if not isinstance(ext, str) or "/" not in ext:
            raise ConfigError(f"extension id {ext!r}: want 'vendor-prefix/name'")
        if settings is None:
            settings = _default_settings(ext)
        if not isinstance(settings, Mapping):
            raise ConfigError(f"extension {ext!r}: settings must be a mapping")
        offered[ext] = dict(settings)
    return {"extensions": offered}


def _default_settings(ext: str) -> Mapping[str, Any]:
    where = EXTENSION_SETTINGS.get(ext)
    if where is None:
        return {}
    module, _, function = where.partition(":")
    settings: Mapping[str, Any] = getattr(importlib.import_module(module), function)()
    return settings
