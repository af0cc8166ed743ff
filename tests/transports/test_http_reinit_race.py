"""A re-initialization whose ``initialize`` reply outruns the thread that sent it.

The session expires (404); the call that met it leads the re-initialization: ``initialize``
goes out on a shared sender thread (``Connection.request``), its reply comes as an SSE
stream read on a reader thread, and the calling thread, woken by that reply, sends
``notifications/initialized`` and tells the transport the protocol version. The sender
thread may not have run again by then (two busy CPUs are enough): the transport must
already know that the initialize was answered, or the session stays "being
re-initialized" for good and the call's re-send waits for it until its timeout (the
``test_demo_http_server_sse_replies`` flake: ``RequestTimeout ... no response within 30 s``
after "expired; initializing again").

The test makes that order certain: a transport whose POST of the re-initialization's
``initialize`` returns only once the bring-up has finished on the calling thread.
"""

from __future__ import annotations

import threading
from typing import Any

import mcpsync
from mcpsync.demo_server.http import DemoHTTPServer
from mcpsync.protocol.choose import Caches
from mcpsync.transports.http.streamable import StreamableHTTPTransport

WAIT = 10.0


class LateSender(StreamableHTTPTransport):
    """The sender of the second ``initialize`` resumes only after ``set_protocol_version``
    ran on the calling thread (or ``WAIT`` passed): the scheduling a loaded machine may
    pick, made certain."""

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.initializes = 0
        self.versions_set = threading.Event()
        self.sender_waited: list[bool] = []

    def set_protocol_version(self, version: str) -> None:
        super().set_protocol_version(version)
        if self.initializes >= 2:
            self.versions_set.set()

    def _post(self, message: Any, method: str | None, *args: Any, **kwargs: Any) -> bool:
        if method == "initialize":
            self.initializes += 1  # (before the POST: its reply may be read at once)
        done = super()._post(message, method, *args, **kwargs)
        if method == "initialize" and self.initializes == 2:
            # the re-initialization's: its reply is being read on the SSE reader thread
            self.sender_waited.append(self.versions_set.wait(WAIT))
        return done


def test_a_reinitialization_answered_before_its_sender_runs_again_lets_the_call_through(
    no_leaks,
):
    with DemoHTTPServer() as server:
        transport = LateSender(server.url, name="late-sender")
        s = mcpsync.Session.connect(transport, timeout=WAIT, era="legacy", _caches=Caches())
        try:
            assert s.call_tool("echo", {"message": "one"}).content[0].text == "one"
            with server._lock:
                gone = list(server.sessions.values())
                server.sessions.clear()  # the server forgot the session: the next call gets 404
            for old in gone:
                old.shutdown()
            assert s.call_tool("echo", {"message": "two"}).content[0].text == "two"
            assert s.reinitializations == 1
            # the order the test is about did happen: the sender ran again only after the
            # calling thread had finished the handshake
            assert transport.sender_waited == [True]
            assert s.call_tool("echo", {"message": "three"}).content[0].text == "three"
        finally:
            s.close()
