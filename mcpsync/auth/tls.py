"""TLS settings that stick to an auth object's own ``requests`` session.

Owns: :func:`pin_tls`. ``requests`` lets ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` in the
environment override a session's ``verify`` (only a per-request argument wins), and the
auth modules send their requests without one. So the settings go into an adapter mounted
for ``https://``: it applies them to every request the session sends, after the
environment's, while proxies and everything else of the session stay as they were.
"""

from __future__ import annotations

from typing import Any

import requests

from ..transports.http.headbound import HeadBoundAdapter

__all__ = ["pin_tls", "PinnedTLSAdapter"]


class PinnedTLSAdapter(HeadBoundAdapter):
    """An ``HTTPAdapter`` whose ``verify`` / ``cert`` (when given) win over the request's;
    a fetch through it reads the response head within its deadline (``HeadBoundAdapter``)."""

    def __init__(
        self, verify: bool | str | None = None, cert: str | tuple[str, str] | None = None
    ) -> None:
        super().__init__()
        self.pinned_verify = verify
        self.pinned_cert = cert

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if self.pinned_verify is not None:
            kwargs["verify"] = self.pinned_verify
        if self.pinned_cert is not None:
            kwargs["cert"] = self.pinned_cert
        return super().send(request, *args, **kwargs)


def pin_tls(
    session: requests.Session,
    verify: bool | str | None = None,
    cert: str | tuple[str, str] | None = None,
) -> None:
    """Every ``https://`` request of ``session`` uses ``verify`` and ``cert`` (None: as before)."""
    if verify is None and cert is None:
        return
    current = session.get_adapter("https://")
    if isinstance(current, PinnedTLSAdapter):
        verify = current.pinned_verify if verify is None else verify
        cert = current.pinned_cert if cert is None else cert
    session.mount("https://", PinnedTLSAdapter(verify, cert))
