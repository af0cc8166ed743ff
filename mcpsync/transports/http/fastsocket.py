"""The fast pool's sockets: how each is set up, and the request's deadline on its I/O.

Owns: the TLS context as requests would set it up (``ssl_context``), TCP keep-alive on
every connection (``KEEP_ALIVE``, ``keep_alive``), and the one deadline of a request
(``keep_within``, ``send_within``, ``DeadlinePassed``): a connection of the pool carries
the ``deadline`` of the request it is sending (``time.monotonic()`` seconds; None: none),
and before every ``send`` and ``recv`` on it the socket's own timeout, the request's read
timeout, is cut to what is left until that deadline when less is left. So writing a body
the server stopped reading, and reading a reply the server trickles a byte at a time, end
at the request's timeout, not after one socket timeout per piece. The check costs a clock
read per system call; the timeout is set again only when it is cut (the connection's
``applied`` then says so, and its next request sets its own).

Used by ``fastresponse`` (the reader) and ``fastpool`` (the connections); imports nothing
of theirs.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import time
from typing import Any

import requests

__all__ = [
    "DeadlinePassed",
    "KEEP_ALIVE",
    "keep_alive",
    "keep_within",
    "send_within",
    "set_timeouts",
    "ssl_context",
]


class DeadlinePassed(TimeoutError):
    """The request's timeout ran out while it was written or its reply read."""


#: a cut smaller than this is not worth a system call (the bound may run over by as much)
_SLACK = 0.02


def set_timeouts(sock: socket.socket, timeout: float | None, kernel: bool) -> None:
    """``timeout`` on ``sock``'s sends and receives: the kernel's (``SO_RCVTIMEO`` and
    ``SO_SNDTIMEO`` on a blocking socket, see ``fastpool``) or Python's."""
    if kernel:
        sock.settimeout(None)  # blocking: no poll before each send and recv
        seconds = 0.0 if timeout is None else max(timeout, 1e-6)  # 0: no limit
        whole = int(seconds)
        value = struct.pack("@ll", whole, int((seconds - whole) * 1e6))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
    else:
        sock.settimeout(timeout)


def keep_within(conn: Any, sock: socket.socket, doing: str) -> None:
    """Before a ``send`` or ``recv`` on ``sock``, the socket of ``conn`` (a pool connection:
    ``kernel``, ``deadline``, ``applied``; its ``sock`` may be None already, given to the
    response): cut the socket's timeout to what is left of the deadline, or raise
    ``DeadlinePassed`` (``doing`` says what the request was doing) when none is."""
    deadline = conn.deadline
    if deadline is None:
        return
    left = deadline - time.monotonic()
    applied = conn.applied  # a number, or None (no limit): set before the first send
    if applied is not None and left >= applied - _SLACK:
        return  # the socket's own timeout ends the wait in time
    if left <= 0:
        raise DeadlinePassed(f"the request's timeout ran out while {doing}")
    set_timeouts(sock, left, conn.kernel)
    conn.applied = left  # what the socket has now: the next request sets its own


def send_within(conn: Any, data: bytes) -> None:
    """``sendall`` of ``data`` on ``conn``'s socket, within its deadline (see the module)."""
    sock = conn.sock
    if conn.deadline is None:
        sock.sendall(data)
        return
    sent = sock.send(data)  # the common case: the socket buffer takes it all at once
    if sent == len(data):
        return
    view = memoryview(data)
    while sent < len(view):
        keep_within(conn, sock, "writing the request (the server does not read it)")
        sent += sock.send(view[sent:])


#: TCP keep-alive of every pooled connection: the first probe after 15 s idle (as Go's
#: net.Dialer), then every 5 s, 3 unanswered end it. A stream that waits for the server
#: (a GET back-channel, a 2026-07-28 ``subscriptions/listen`` reply, read timeout 24 h)
#: otherwise never learns that the server vanished without a FIN: the first probe meets a
#: reset (a new process on the port) or goes unanswered (a host gone), and the read fails.
KEEP_ALIVE = (
    (getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None), 15),
    (getattr(socket, "TCP_KEEPINTVL", None), 5),
    (getattr(socket, "TCP_KEEPCNT", None), 3),
)


def keep_alive(sock: socket.socket) -> None:
    """Turn TCP keep-alive on for a new connection (see ``KEEP_ALIVE``); best effort."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in KEEP_ALIVE:
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
    except OSError:
        pass


def ssl_context(verify: bool | str, cert: str | tuple[str, str] | None) -> ssl.SSLContext:
    """An SSL context with requests' semantics for ``verify`` and ``cert``."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        bundle = verify if isinstance(verify, str) else requests.utils.DEFAULT_CA_BUNDLE_PATH
        if os.path.isdir(bundle):
            context = ssl.create_default_context(capath=bundle)
        else:
            context = ssl.create_default_context(cafile=bundle)
    if cert:
        if isinstance(cert, (tuple, list)):
            context.load_cert_chain(cert[0], cert[1])
        else:
            context.load_cert_chain(cert)
    return context
