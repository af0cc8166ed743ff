"""What the client offers a server: the capabilities the given handlers imply, and the
handlers installed on the Connection for the server-to-client requests they answer
(``roots/list``, ``sampling/createMessage``, ``elicitation/create``; the last two typed
with ``mcp_types`` models on first use)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._typed import typed_handler

__all__ = ["install"]


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
