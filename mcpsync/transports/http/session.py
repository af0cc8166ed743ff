"""The ``Mcp-Session-Id`` lifecycle of a Streamable HTTP transport (2025-03-26 to 2025-11-25).

Owns: the headers each kind of request goes out with (initialize, POST, GET/DELETE),
capturing the session id the server assigns, session expiry (a 404 to a request that
carried the id: exactly one request re-initializes, the others wait for it and are sent
again with the new id), and DELETE of the session on close. A mixin of
``StreamableHTTPTransport``: it works on that transport's state, under its state lock.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from ...errors import MCPSyncError, RequestTimeout, SessionExpired, TransportError
from ..base import Message
from .client import ACCEPT_POST, HTTPClient, Target, discard

__all__ = ["SessionLifecycle"]

log = logging.getLogger("mcpsync.http")

#: sends of one message that may each race a session expiry before it gives up
MAX_RESENDS = 8
#: longest wait for a re-initialization when the request has no timeout
_REINIT_WAIT = 60.0
_STALE, _LEADER, _HANDSHAKE = "stale", "leader", "handshake"
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,1024}")


class SessionLifecycle:
    """The session half of ``StreamableHTTPTransport`` (see the module docstring)."""

    # set by the transport's __init__
    _http: HTTPClient
    target: Target
    session_id: str | None
    protocol_version: str | None
    _modern: bool
    _state_lock: threading.Lock
    _session_cond: threading.Condition
    _expiry: str | None  # None, _STALE, _LEADER or _HANDSHAKE
    _expired_id: str | None
    _expiry_generation: int
    _closing: threading.Event
    _init_headers: dict[str, str]
    _post_headers: dict[str, str]
    _post_session: str | None

    def describe(self) -> str:
        raise NotImplementedError

    def _post(
        self,
        message: Message,
        method: str | None,
        is_request: bool,
        hdrs: Mapping[str, str],
        sent_session: str | None,
        read_timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> bool:
        raise NotImplementedError

    # -- session expiry: one re-initialization, everybody else waits for it --------------
    #
    # ``_expiry`` is None while the session is good. A 404 to a request that carried the
    # current session id makes that request the leader (_LEADER): it alone gets
    # ``SessionExpired``, and its connection re-initializes. Requests sent meanwhile, and
    # requests whose own 404 raced the leader's, wait here (bounded by their timeout) and
    # are then sent with the new ``Mcp-Session-Id``: none goes out without one. The
    # initialize reply moves to _HANDSHAKE (the new id is known), the 2xx to
    # ``notifications/initialized`` back to None. A failed re-initialization (or a leader
    # that never re-initializes) leaves _STALE: the next request to send leads anew.
    # Notifications and responses are not held: they belong to the old session (a
    # cancellation, an answer to its server request) and raise ``SessionExpired`` unsent.

    def _send_handshake(
        self,
        message: Message,
        method: str,
        read_timeout: float | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        """``initialize`` (never with a session id), or ``notifications/initialized`` of a
        re-initialization; both move the expiry state on."""
        try:
            if method == "initialize":
                self._post(message, method, True, self._init_headers, None, read_timeout, headers)
            else:
                with self._state_lock:
                    hdrs, sent_session = self._post_headers, self._post_session
                if not self._post(
                    message, method, False, hdrs, sent_session, read_timeout, headers
                ):
                    raise SessionExpired(f"{self.describe()}: the new session expired at once")
        except BaseException:
            with self._state_lock:
                if self._expiry is _LEADER or self._expiry is _HANDSHAKE:
                    self._expiry = _STALE
                    self._session_cond.notify_all()
            raise
        with self._state_lock:
            if method == "initialize":
                if self._expiry is not None:
                    self._expiry = _HANDSHAKE
            elif self._expiry is _HANDSHAKE:
                self._expiry = None
                self._session_cond.notify_all()

    def _await_session(
        self, method: str | None, is_request: bool, read_timeout: float | None
    ) -> tuple[dict[str, str], str | None, float | None]:
        """Called with the state lock held while ``_expiry`` is set: the headers to send with
        once the new session is up, and what is left of ``read_timeout``; raises
        ``SessionExpired`` to the request that is to lead the re-initialization,
        ``RequestTimeout`` when it does not come in time."""
        if not is_request:
            raise SessionExpired(
                f"{self.describe()}: the session expired and is being re-initialized; "
                f"{method or 'the response'} was not sent"
            )
        bound = read_timeout if read_timeout is not None else _REINIT_WAIT
        deadline = time.monotonic() + bound
        generation = self._expiry_generation
        while True:
            if self._closing.is_set():
                raise TransportError(f"{self.describe()}: transport is closed")
            if self._expiry is None:
                left = None if read_timeout is None else max(deadline - time.monotonic(), 0.01)
                return self._post_headers, self._post_session, left
            if self._expiry is _STALE:
                self._expiry = _LEADER
                self._expiry_generation += 1
                raise SessionExpired(
                    f"{self.describe()}: the server no longer knows session; initialize again"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self._expiry_generation == generation:  # the leader did not get through
                    self._expiry = _STALE
                    self._session_cond.notify_all()
                raise RequestTimeout(
                    f"{self.describe()}: the expired session was not re-initialized within "
                    f"{bound:g} s; {method} not sent"
                )
            self._session_cond.wait(remaining)

    def _not_found(self, sent_session: str, is_request: bool) -> bool:
        """A 404 to a message sent with ``sent_session``. False: report ``SessionExpired``
        (this one leads, or it is not a request); True: wait for the new session and resend."""
        with self._state_lock:
            if self._expiry is None and self.session_id == sent_session:
                self._expired_id = sent_session
                self._expiry = _LEADER if is_request else _STALE
                self._expiry_generation += 1
                self.session_id = None  # until the re-initialization names the new one
                self._rebuild_headers()
                return False
            return is_request

    def _rebuild_headers(self) -> None:
        """Called with the state lock held (or from __init__)."""
        base = {**self._http.headers, "Accept": ACCEPT_POST, "Content-Type": "application/json"}
        self._init_headers = dict(base)
        if self.protocol_version:
            base["MCP-Protocol-Version"] = self.protocol_version
            if self._modern:
                self._init_headers = dict(base)
        if self.session_id:
            base["Mcp-Session-Id"] = self.session_id
        self._post_headers = base
        self._post_session = self.session_id

    def _side_headers(self, accept: str, last_event_id: str | None = None) -> dict[str, str]:
        with self._state_lock:
            hdrs = {**self._http.headers, "Accept": accept}
            session_id = self.session_id
            if session_id is None and self._expiry is not None:
                session_id = self._expired_id  # not without one: a 404 ends this GET quietly
            if session_id:
                hdrs["Mcp-Session-Id"] = session_id
            if self.protocol_version:
                hdrs["MCP-Protocol-Version"] = self.protocol_version
        if last_event_id is not None:
            hdrs["Last-Event-ID"] = last_event_id
        return hdrs

    def _capture_session(self, response: Any) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id is None:
            return
        if not _SESSION_ID.fullmatch(session_id):
            log.warning("mcpsync: %s sent an invalid Mcp-Session-Id; ignoring it", self.describe())
            return
        with self._state_lock:
            self.session_id = session_id
            self._rebuild_headers()

    def _delete_session(self) -> None:
        with self._state_lock:
            session_id = self.session_id
        if session_id is None or self._modern:
            return
        headers = self._side_headers("application/json, text/event-stream")
        try:
            response, _ = self._http.request("DELETE", self.target, headers, None, 5.0)
            discard(response)
            if response.status not in (200, 202, 204, 404, 405):
                log.debug(
                    "mcpsync: DELETE of session at %s answered %s", self.describe(), response.status
                )
        except MCPSyncError as exc:
            log.debug("mcpsync: DELETE of session at %s failed: %s", self.describe(), exc)
