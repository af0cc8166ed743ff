"""TLS settings shared with an auth object: the seam between ``Session.connect``'s
``verify=``/``cert=`` and an ``OAuth``'s own ``requests`` session.

Owns: :func:`share`. The HTTP transports take ``verify``/``cert`` themselves (the fast
pool builds its SSL context from them); an :class:`mcpsync.auth.OAuth` talks to the
server's metadata endpoint and to authorization servers through its own session, which
gets the same settings here (when it made that session itself; a caller's
``http_session=`` is left as configured). Nothing is imported unless an ``OAuth`` exists.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["share"]


def share(auth: Any, verify: bool | str | None, cert: str | tuple[str, str] | None) -> None:
    """Give ``auth`` (when it is an ``OAuth``) the connection's ``verify`` and ``cert``."""
    if auth is None or (verify is None and cert is None):
        return
    oauth = sys.modules.get("mcpsync.auth.oauth")  # not imported: auth cannot be an OAuth
    if oauth is not None and isinstance(auth, oauth.OAuth):
        auth.use_tls(verify=verify, cert=cert)
