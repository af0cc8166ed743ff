"""A call's timeout bounds the whole call, writing included (issue 31, point 2).

Against servers that stall the wire: an HTTP server that stops reading a 16 MiB request
body, or trickles its reply (or its reply's head) a byte every 0.2 s
(``servers/call_bound_http.py``, Streamable HTTP and legacy HTTP+SSE), and a stdio server
that stops reading its stdin for a while (``servers/pause_reading_server.py``). Each call
must fail with ``RequestTimeout`` within its timeout + 0.5 s; the next small call on the
same session succeeds, and over HTTP goes out on a new connection (the stalled one was
dropped, not put back in the pool).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest
import requests
from servers.call_bound_http import STALL_BODY, CallBoundHTTP
from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.errors import RequestTimeout

BIG = "x" * (16 << 20)  # far more than the socket buffers (or a pipe) take
TIMEOUT = 2.0
SLACK = 0.5  # the "bound + 0.5 s"


def text(result) -> str:
    return result.content[0].text


@pytest.fixture
def server() -> Iterator[CallBoundHTTP]:
    with CallBoundHTTP(every=0.2) as srv:
        yield srv


def http_session(srv: CallBoundHTTP, kind: str) -> mcpsync.Session:
    if kind == "streamable":
        return mcpsync.Session.connect(srv.url, era="legacy", timeout=20)
    return mcpsync.Session.connect(srv.sse_url, transport="sse", timeout=20)


def stall(s: mcpsync.Session, how: str) -> None:
    if how == "unread body":
        s.call_tool("echo", {"blob": BIG}, timeout=TIMEOUT)
    else:
        s.call_tool(how, {}, timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("kind", "how"),
    [
        ("streamable", "unread body"),
        ("streamable", "trickle"),
        ("streamable", "trickle_head"),
        ("streamable", "trickle_sse"),  # an SSE reply whose event comes a byte at a time
        ("sse", "unread body"),
        ("sse", "trickle_head"),  # the POST's 202 reply, a byte every 0.2 s
    ],
)
def test_http_call_timeout_bounds_the_write_and_the_reply(no_leaks, server, kind, how):
    with http_session(server, kind) as s:
        assert text(s.call_tool("echo", {}, timeout=5)) == "echo"
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            stall(s, how)
        elapsed = time.monotonic() - started
        assert elapsed <= TIMEOUT + SLACK, f"{how}: {elapsed:.2f} s for a {TIMEOUT} s timeout"
        if how == "unread body":
            assert server.stalled.is_set()  # the server did stop reading it
        started = time.monotonic()
        assert text(s.call_tool("echo", {}, timeout=5)) == "echo"
        assert time.monotonic() - started < 2
        (_, stalled_on), (last, served_on) = server.calls[-2:]
        assert last == "echo" and served_on != stalled_on, "the stalled connection was reused"


@pytest.mark.parametrize("how", ["unread body", "trickle"])
def test_requests_path_call_timeout_bounds_the_write_and_the_reply(no_leaks, server, how):
    """The same through requests (a session of the caller's: no fast path): the connect and
    read timeouts are capped at what is left, and the body is read within the deadline."""
    with mcpsync.Session.connect(
        server.url, era="legacy", timeout=20, http_session=requests.Session()
    ) as s:
        assert text(s.call_tool("echo", {}, timeout=5)) == "echo"
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            stall(s, how)
        elapsed = time.monotonic() - started
        assert elapsed <= TIMEOUT + SLACK, f"{how}: {elapsed:.2f} s for a {TIMEOUT} s timeout"
        assert text(s.call_tool("echo", {}, timeout=5)) == "echo"
        (_, stalled_on), (last, served_on) = server.calls[-2:]
        assert last == "echo" and served_on != stalled_on, "the stalled connection was reused"


def test_http_body_over_one_write_still_goes_out_whole(no_leaks, server):
    """The deadline-checked write sends a body bigger than one write and the socket buffer
    takes at once, to the end (the server reads it all)."""
    size = STALL_BODY - 4096  # read whole by the server
    with http_session(server, "streamable") as s:
        for _ in range(3):
            assert text(s.call_tool("echo", {"blob": "y" * size}, timeout=10)) == "echo"


def test_stdio_call_timeout_bounds_a_write_the_server_does_not_read(no_leaks):
    argv = [sys.executable, str(SERVERS_DIR / "pause_reading_server.py")]
    with mcpsync.Session.connect(argv, era="legacy", timeout=20) as s:
        assert text(s.call_tool("pause", {"seconds": 3}, timeout=5)) == "paused"
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            s.call_tool("echo", {"message": BIG}, timeout=1.0)
        elapsed = time.monotonic() - started
        assert elapsed <= 1.0 + SLACK, f"{elapsed:.2f} s for a 1 s timeout"
        # The server reads again after its pause: the cut message is finished first, then
        # this one goes out whole.
        assert text(s.call_tool("echo", {"message": "hi"}, timeout=15)) == "len=2"


def test_stdio_call_timeout_bounds_a_trickled_reply(no_leaks):
    argv = [sys.executable, str(SERVERS_DIR / "pause_reading_server.py")]
    with mcpsync.Session.connect(argv, era="legacy", timeout=20) as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            s.call_tool("trickle", {"every": 0.05}, timeout=1.0)  # ~80 bytes: ~4 s
        elapsed = time.monotonic() - started
        assert elapsed <= 1.0 + SLACK, f"{elapsed:.2f} s for a 1 s timeout"
        # once the server is through its slow line, the session goes on
        assert text(s.call_tool("echo", {"message": "hi"}, timeout=15)) == "len=2"


#: a request slow to encode: 6 million floats, ~24 MB of JSON, 0.3-1.5 s of encoding
SLOW_TO_ENCODE = {"message": [1.5] * 6_000_000}


def test_stdio_call_timeout_counts_the_encoding_of_the_request(no_leaks):
    """The write's bound is what is left of the call's timeout once the request is encoded,
    not a whole timeout after it (before: 1.0 s + the encoding, 1.6-2.4 s for 1)."""
    argv = [sys.executable, str(SERVERS_DIR / "pause_reading_server.py")]
    with mcpsync.Session.connect(argv, era="legacy", timeout=20) as s:
        assert text(s.call_tool("pause", {"seconds": 5}, timeout=5)) == "paused"
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            s.call_tool("echo", SLOW_TO_ENCODE, timeout=1.0)
        elapsed = time.monotonic() - started
        assert elapsed <= 1.0 + SLACK, f"{elapsed:.2f} s for a 1 s timeout"
        assert text(s.call_tool("echo", {"message": "hi"}, timeout=15)) == "len=2"


def test_legacy_sse_call_timeout_counts_the_encoding_of_the_request(no_leaks, server):
    """The same over legacy HTTP+SSE: the POST's bound is what is left of the call's
    timeout once its body is encoded."""
    with http_session(server, "sse") as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            s.call_tool("echo", SLOW_TO_ENCODE, timeout=TIMEOUT)
        elapsed = time.monotonic() - started
        assert elapsed <= TIMEOUT + SLACK, f"{elapsed:.2f} s for a {TIMEOUT} s timeout"
        assert server.stalled.is_set()
        assert text(s.call_tool("echo", {}, timeout=5)) == "echo"
