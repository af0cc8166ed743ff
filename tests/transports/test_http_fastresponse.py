"""The fast pool's response head parser reads every head as http.client (email.parser)
does: the same status, header fields (names, values, order, duplicates), body framing
(length, chunked, keep-alive) and body; odd heads (folded lines, junk) go to email."""

from __future__ import annotations

import http.client
import io

import pytest

from mcpsync.transports.http.fastresponse import FastResponse


class _Sock:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(io.BytesIO(self._data))  # type: ignore[arg-type]


def _read(cls: type[http.client.HTTPResponse], raw: bytes, method: str = "POST") -> dict:
    response = cls(_Sock(raw), method=method)  # type: ignore[arg-type]
    response.begin()
    out = {
        "status": response.status,
        "reason": response.reason,
        "version": response.version,
        "items": list(response.msg.items()),
        "type": response.getheader("content-type"),
        "cookies": response.msg.get_all("set-cookie"),
        "chunked": response.chunked,
        "length": response.length,
        "will_close": response.will_close,
    }
    out["body"] = response.read()
    return out


HEADS = {
    "json": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n"
    b'Date: Tue, 01 Dec 2026 12:00:00 GMT\r\nServer: x\r\n\r\n{"a":1}',
    "chunked": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nMcp-Session-Id: abc\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "duplicates and blanks": b"HTTP/1.1 202 Accepted\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n"
    b"X-Empty:\r\nX-Spaced: \t  value with  spaces  \r\nContent-Length: 0\r\n\r\n",
    "bare LF": b"HTTP/1.1 200 OK\nContent-Length: 2\nConnection: close\n\nok",
    "HTTP/1.0, no length": b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close",
    "latin-1 value": b"HTTP/1.1 404 Not Found\r\nX-Name: caf\xe9\r\nContent-Length: 1\r\n\r\nx",
    "folded": b"HTTP/1.1 200 OK\r\nX-Long: part one\r\n  part two\r\nContent-Length: 0\r\n\r\n",
    "not a field": b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nthis is no header\r\nX-After: 1\r\n\r\n",
    "space before colon": b"HTTP/1.1 200 OK\r\nX-Bad : 1\r\nContent-Length: 0\r\n\r\n",
    "100 continue first": b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n"
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nyes",
    "no content": b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
    "bad length": b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\nConnection: keep-alive\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(HEADS))
def test_every_head_reads_as_http_client_reads_it(name):
    raw = HEADS[name]
    assert _read(FastResponse, raw) == _read(http.client.HTTPResponse, raw)


def test_a_head_response_has_no_body():
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
    fast = _read(FastResponse, raw, method="HEAD")
    assert fast == _read(http.client.HTTPResponse, raw, method="HEAD")
    assert fast["length"] == 0 and fast["body"] == b""


def test_an_unknown_protocol_is_refused_alike():
    raw = b"SPDY/9 200 OK\r\n\r\n"
    with pytest.raises(http.client.HTTPException) as ours:
        _read(FastResponse, raw)
    with pytest.raises(http.client.HTTPException) as theirs:
        _read(http.client.HTTPResponse, raw)
    assert type(ours.value) is type(theirs.value)
