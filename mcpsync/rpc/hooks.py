"""What the layers above plug into the engine: ``WireHooks``.

Owns: ``WireHooks``, the one collaborator a ``Connection`` is given at construction for what
the protocol era decides and the engine cannot: the ``_meta`` entries each message carries,
another way to cancel a request, and what to do when the transport reports an expired
session. Its defaults do nothing (the initialize-handshake wire before any expiry hook);
the protocol layer's subclass (``mcpsync.protocol.hooks.EraHooks``) is configured by the
era the handshake chose. Nothing here imports the rest of mcpsync.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WireHooks"]


class WireHooks:
    """The engine's view of the protocol era: three questions, asked on the calling thread.

    The defaults: no ``_meta`` entries, cancel with ``notifications/cancelled``, no
    re-initialization (a request that meets an expired session fails with it).
    """

    __slots__ = ()

    def meta(self, method: str) -> dict[str, Any] | None:
        """The ``_meta`` entries a request or notification of ``method`` carries; None: the
        message goes as given (an empty dict still gives it a ``_meta``)."""
        return None

    def cancel(self, request_id: int) -> bool:
        """Cancel request ``request_id`` another way (the 2026-07-28 HTTP wire: close its
        stream); True: done, no ``notifications/cancelled`` is sent."""
        return False

    def reinitialize(self) -> bool:
        """The transport reported an expired session: initialize again (the connection
        lets one thread at a time in; ``Connection.reinitialize_once``). False: this
        connection cannot, and the request fails with the ``SessionExpired``."""
        return False
