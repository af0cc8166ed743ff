"""The response head of a bounded fetch, cut at its deadline.

Owns: ``send_bounded`` (one request of ``fetch``, sent through the caller's
``requests.Session`` settings, whose status line and headers are read within a deadline)
and the adapter that makes it hold. ``requests`` reads the head under a per-read timeout
and hands out no socket before the head is in, so a server that trickles its head (one
byte every 0.2 s: each read returns, none times out) held a fetch for as long as it liked
(``headless_redirect(timeout=1)``: 60 s against a 302 whose head came 1 byte / 0.2 s).
Here each connection arms a timer (``mcpsync-fetch[head]``) when it starts reading the
head; at the deadline the timer shuts the socket down, the read ends, and ``fetch``
raises its timeout error. The timer is cancelled and joined once the head is in.

A session whose adapter for the URL is requests' plain ``HTTPAdapter`` (what
``requests.Session()`` mounts) is sent through a bounded adapter made for that one request
and closed with its reply (``BoundedReply.close``): no connection outlives the fetch. An
adapter mcpsync mounted itself derives from ``HeadBoundAdapter`` (the TLS settings of
``Session.connect(verify=, cert=)`` on an ``OAuth``'s session: ``auth.tls``) and bounds
the head as it is. A caller's own adapter (mounted for a reason: client certificates,
retries, a test mock) is used as it is, its head bounded per read as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import socket
import threading
import time
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.cookies import extract_cookies_to_jar
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["send_bounded", "HeadBoundAdapter"]

#: when the head being read must be in (monotonic seconds), for the connections of this thread
_HEAD_BY: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "mcpsync_head_by", default=None
)


def _cut(sock: Any) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _HeadWithin:
    """Mixed into urllib3's connections: the head is read within ``_HEAD_BY``."""

    sock: Any

    def getresponse(self) -> Any:
        by = _HEAD_BY.get()
        sock = self.sock
        if by is None or sock is None:
            return super().getresponse()  # type: ignore[misc]
        left = by - time.monotonic()
        if left <= 0:
            _cut(sock)
            return super().getresponse()  # type: ignore[misc]
        timer = threading.Timer(left, _cut, args=(sock,))
        timer.name = "mcpsync-fetch[head]"
        timer.daemon = True
        timer.start()
        try:
            return super().getresponse()  # type: ignore[misc]
        finally:
            timer.cancel()
            timer.join()


class _Conn(_HeadWithin, HTTPConnection):
    pass


class _SConn(_HeadWithin, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Conn


class _SPool(HTTPSConnectionPool):
    ConnectionCls = _SConn


_POOLS = {"http": _Pool, "https": _SPool}


class HeadBoundAdapter(HTTPAdapter):
    """requests' adapter whose connections read the head within ``_HEAD_BY`` when
    ``send_bounded`` set it (otherwise they are plain ones). An adapter mcpsync mounts for
    its own reasons (pinned TLS settings: ``auth.tls``) derives from it, so that fetches
    through it stay bounded."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, urllib3.ProxyManager):  # (a SOCKS proxy keeps its own pools)
            manager.pool_classes_by_scheme = _POOLS
        return manager


class BoundedReply:
    """The reply and the one-request adapter it came through (closed with it)."""

    def __init__(self, response: requests.Response, adapter: HTTPAdapter | None) -> None:
        self.response = response
        self._adapter = adapter

    def close(self) -> None:
        try:
            self.response.close()
        finally:
            if self._adapter is not None:
                self._adapter.close()

    def __enter__(self) -> requests.Response:
        return self.response

    def __exit__(self, *exc: object) -> None:
        self.close()


def send_bounded(
    http: requests.Session,
    method: str,
    url: str,
    *,
    by: float,
    headers: Any,
    json_body: Any,
    data: Any,
    timeout: tuple[float, float],
) -> BoundedReply:
    """``http.request(method, url, ..., stream=True, allow_redirects=False)`` whose head is
    read by ``by`` (monotonic) when ``http`` uses requests' plain adapter for ``url``: the
    session's headers, cookies, auth, proxies and TLS settings apply, and the cookies the
    reply sets are kept in the session. Raises what ``requests`` raises."""
    adapter = http.get_adapter(url)
    if isinstance(adapter, HeadBoundAdapter):  # mounted by mcpsync (pinned TLS): it bounds
        token = _HEAD_BY.set(by)
        try:
            response = http.request(
                method, url, headers=headers, json=json_body, data=data,
                timeout=timeout, stream=True, allow_redirects=False,
            )  # fmt: skip
        finally:
            _HEAD_BY.reset(token)
        return BoundedReply(response, None)
    if type(adapter) is not HTTPAdapter:
        response = http.request(
            method, url, headers=headers, json=json_body, data=data,
            timeout=timeout, stream=True, allow_redirects=False,
        )  # fmt: skip
        return BoundedReply(response, None)
    prepared = http.prepare_request(
        requests.Request(method, url, headers=headers, json=json_body, data=data)
    )
    settings = http.merge_environment_settings(prepared.url or url, {}, True, None, None)
    bounded = HeadBoundAdapter()
    token = _HEAD_BY.set(by)
    try:
        response = bounded.send(prepared, timeout=timeout, **settings)
    except BaseException:
        bounded.close()
        raise
    finally:
        _HEAD_BY.reset(token)
    extract_cookies_to_jar(http.cookies, prepared, response.raw)
    return BoundedReply(response, bounded)
