"""Reading an HTTP/1.x response head quickly, for the fast pool.

Owns: ``FastResponse``, an ``http.client.HTTPResponse`` whose header fields are parsed
here rather than by ``email.parser`` (which costs about as much as the rest of a loopback
round trip put together); everything else (the status line, body framing: length,
chunked, keep-alive; reading) is ``http.client``'s own. The fields land in a regular
``http.client.HTTPMessage``, stored as ``email``'s compat32 policy stores them (the name
as sent, the value without its leading blanks and line end), so ``get``, ``get_all``,
``items`` and cookie extraction read them as before. A head this parser does not take
as plainly well-formed (a folded continuation line, a line that is no ``name: value``
field) is parsed by ``email`` exactly as ``http.client`` would. Used by ``fastpool``.
"""

from __future__ import annotations

import email.parser
import http.client
import re

__all__ = ["FastResponse", "parse_head"]

#: a header field name as ``email``'s parser takes it: printable, no blank, no colon
_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")
_END = (b"\r\n", b"\n", b"")


def parse_head(lines: list[bytes]) -> http.client.HTTPMessage:
    """The header fields of ``lines`` (as ``http.client._read_headers`` returns them)."""
    message = http.client.HTTPMessage()
    fields = message._headers  # type: ignore[attr-defined]  # email.message.Message's list
    fullmatch = _NAME.fullmatch
    for raw in lines:
        if raw in _END:
            break
        line = raw.decode("iso-8859-1")
        name, colon, value = line.partition(":")
        if not colon or fullmatch(name) is None:
            return _email_head(lines)  # folded, or not a field: email's reading, as ever
        fields.append((name, value.lstrip(" \t").rstrip("\r\n")))
    return message


def _email_head(lines: list[bytes]) -> http.client.HTTPMessage:
    text = b"".join(lines).decode("iso-8859-1")
    parsed = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(text)
    return parsed  # type: ignore[return-value]


class FastResponse(http.client.HTTPResponse):
    """``http.client.HTTPResponse`` with the header fields read by ``parse_head``."""

    def begin(self) -> None:
        if self.headers is not None:
            return  # begun already
        while True:  # interim 1xx "100 Continue" heads are skipped
            version, status, reason = self._read_status()  # type: ignore[attr-defined]
            if status != http.client.CONTINUE:
                break
            http.client._read_headers(self.fp)  # type: ignore[attr-defined]
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = parse_head(http.client._read_headers(self.fp))  # type: ignore[attr-defined]
        # Body framing, by HTTP/1.1's rules (RFC 9112 section 6.3).
        coding = self.headers.get("transfer-encoding")
        self.chunked = bool(coding) and coding.lower() == "chunked"
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()  # type: ignore[attr-defined]
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:
                    self.length = None
        no_body = status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED)
        if no_body or 100 <= status < 200 or self._method == "HEAD":  # type: ignore[attr-defined]
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # no length, not chunked: the body ends with the connection
