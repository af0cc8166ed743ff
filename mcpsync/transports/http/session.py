"""The ``Mcp-Session-Id`` lifecycle of a Streamable HTTP transport (2025-03-26 to 2025-11-25).

Owns: the headers each kind of request goes out with (initialize, POST, GET/DELETE),
capturing the session id the server assigns, session expiry (a 404 to a request that
carried the id: exactly one request re-initializes, the others wait for it and are sent
again with the new id; bounded twice, see ``expired_again``: a request alone re-initializes
at most ``MAX_REINITIALIZATIONS`` times, and at most ``MAX_FRUITLESS`` re-initializations
in a row, whoever leads them, may each end in a session that expired before it answered
any request; ``SessionKeptExpiring`` after that), and DELETE of the session on close.

``SessionLifecycle`` is an object the transport holds (``StreamableHTTPTransport._lifecycle``),
built with exactly what it needs from it: the ``HTTPClient`` (base headers, the DELETE), its
``describe`` and its closing flag. Its state is its own, under its own lock; it sends no
POST itself: the transport posts, and tells it what came back (``initialize_answered``,
``not_found``, ``handshake_sent`` / ``handshake_failed``, ``answered``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from ...errors import (
    MCPSyncError,
    RequestTimeout,
    SessionExpired,
    SessionKeptExpiring,
    TransportError,
)
from ...versions import is_modern
from .client import ACCEPT_POST, HTTPClient, Target, discard

__all__ = [
    "SessionLifecycle",
    "Leads",
    "SessionKeptExpiring",
    "MAX_RESENDS",
    "MAX_REINITIALIZATIONS",
    "MAX_FRUITLESS",
]

log = logging.getLogger("mcpsync.http")

#: sends of one message that may each race a session expiry before it gives up
MAX_RESENDS = 8
#: re-initializations one request may lead while no other request is under way (the
#: connection's, then the transport's); the next expiry fails it
MAX_REINITIALIZATIONS = 2
#: re-initializations in a row, led by any requests, whose new session expired before it
#: answered a request; the next expiry fails every request under way (a server that
#: forgets each session at once costs this many, not that many per thread). The same as
#: one request's own bound: requests under way together share the re-initializations a
#: request alone would get, and are given no more evidence than it is
MAX_FRUITLESS = MAX_REINITIALIZATIONS
#: requests remembered as having led a re-initialization (their re-send is to come)
_LED_MAX = 64
#: longest wait for a re-initialization when the request has no timeout
_REINIT_WAIT = 60.0
_STALE, _LEADER, _HANDSHAKE = "stale", "leader", "handshake"
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,1024}")


class Leads:
    """The expiries one request met as the leader of a re-initialization; ``own``: how
    many of those it met with no other request under way (its own bound); ``entered``:
    ``given_up`` when it was first sent (its re-sends are the same request)."""

    __slots__ = ("reasons", "own", "entered")

    def __init__(self, entered: int) -> None:
        self.reasons: list[SessionExpired] = []
        self.own = 0
        self.entered = entered


class SessionLifecycle:
    """The ``Mcp-Session-Id`` lifecycle a ``StreamableHTTPTransport`` holds (see the module
    docstring). Its state is its own, under its own ``lock``; the transport reads the fields
    its hot path needs (``expiry``, ``post_headers``, ``post_session``) under that lock and
    calls the methods below for every move of the expiry state."""

    def __init__(
        self,
        http: HTTPClient,
        *,
        describe: Callable[[], str],
        closing: Callable[[], threading.Event],
    ) -> None:
        """``http``: the transport's client (its base headers, and the DELETE on close);
        ``describe``: the transport's one line for messages; ``closing``: its closing flag
        (a getter: a forked child's transport replaces the flag, ``abandon``)."""
        self._http = http
        self._describe = describe
        self._closing = closing
        #: guards everything below; ``cond`` wakes the requests waiting for a new session
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        #: the session the server assigned (None: none, or expired and not yet renewed)
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        #: the 2026-07-28 wire: no sessions, GET stream or resumption
        self.modern = False
        #: None while the session is good, else _STALE, _LEADER or _HANDSHAKE (see below)
        self.expiry: str | None = None
        self._expired_id: str | None = None
        self._expiry_generation = 0
        #: re-initializations since a request was last answered (``MAX_FRUITLESS``)
        self.fruitless = 0
        #: how many times every request under way was failed (``_give_up``)
        self.given_up = 0
        #: ids of the requests under way (the transport's ``send`` adds and discards them:
        #: a set's add and discard need no lock)
        self.under_way: set[Any] = set()
        #: request id -> the expiries it led, for requests that led a re-initialization
        #: whose re-send has not come yet
        self.led: dict[Any, Leads] = {}
        self.init_headers: dict[str, str] = {}
        self.post_headers: dict[str, str] = {}
        self.post_session: str | None = None
        self._rebuild_headers()

    def set_protocol_version(self, version: str) -> bool:
        """The agreed version (sent as a header from now on). True when it ends a
        re-initialization (the old session's GET stream is then to go)."""
        with self.lock:
            self.protocol_version = version
            self.modern = is_modern(version)
            self._rebuild_headers()
            return self._renewed()

    def wake(self) -> None:
        """close(): the requests waiting for a re-initialization look at the closing flag."""
        with self.lock:
            self.cond.notify_all()

    def answered(self, sent_session: str | None) -> None:
        """A request sent with ``sent_session`` was answered: if that is the current
        session, the streak of fruitless re-initializations ends."""
        if sent_session == self.session_id:
            self.fruitless = 0

    # -- session expiry: one re-initialization, everybody else waits for it --------------
    #
    # ``expiry`` is None while the session is good. A 404 to a request that carried the
    # current session id makes that request the leader (_LEADER): it alone gets
    # ``SessionExpired``, and its connection re-initializes. Requests sent meanwhile, and
    # requests whose own 404 raced the leader's, wait here (bounded by their timeout) and
    # are then sent with the new ``Mcp-Session-Id``: none goes out without one. The
    # initialize reply's 2xx head moves to _HANDSHAKE (the new id is known) before its
    # body is delivered (``initialize_answered``): an SSE reply is read on another thread,
    # and the caller it wakes may send ``notifications/initialized`` while the thread that
    # POSTed the initialize has not run again; the 2xx to ``notifications/initialized``
    # (or ``set_protocol_version``) moves back to None. A failed re-initialization (or a leader
    # that never re-initializes) leaves _STALE: the next request to send leads anew.
    # Notifications and responses are not held: they belong to the old session (a
    # cancellation, an answer to its server request) and raise ``SessionExpired`` unsent.

    def handshake_sent(self) -> bool:
        """``notifications/initialized`` of a re-initialization got its 2xx: the new session
        is up (the requests waiting for it go). True when that ended a re-initialization
        (the old session's GET stream is then to go)."""
        with self.lock:
            return self._renewed()

    def _renewed(self) -> bool:
        """With the lock held: _HANDSHAKE ends (True), else nothing changes (False)."""
        if self.expiry is not _HANDSHAKE:
            return False
        self.expiry = None
        self.fruitless += 1  # until a request is answered on the new session
        self.cond.notify_all()
        return True

    def handshake_failed(self) -> None:
        """The re-initialization failed: its ``initialize`` or ``notifications/initialized``
        was not answered with a 2xx, or it failed above the wire (an ``initialize`` answered
        with a JSON-RPC error, or a reply the client refused): the session is stale and the
        next request leads."""
        with self.lock:
            if self.expiry is _LEADER or self.expiry is _HANDSHAKE:
                self.expiry = _STALE
                self.cond.notify_all()

    def await_session(
        self,
        method: str | None,
        is_request: bool,
        read_timeout: float | None,
        entered: int = 0,
    ) -> tuple[dict[str, str], str | None, float | None]:
        """Called with ``lock`` held while ``expiry`` is set: the headers to send with
        once the new session is up, and what is left of ``read_timeout``; raises
        ``SessionExpired`` to the request that is to lead the re-initialization,
        ``RequestTimeout`` when it does not come in time, ``SessionKeptExpiring`` when the
        requests under way were given up since this one was sent (``entered``)."""
        if not is_request:
            raise SessionExpired(
                f"{self._describe()}: the session expired and is being re-initialized; "
                f"{method or 'the response'} was not sent"
            )
        bound = read_timeout if read_timeout is not None else _REINIT_WAIT
        deadline = time.monotonic() + bound
        generation = self._expiry_generation
        while True:
            if self._closing().is_set():
                raise TransportError(f"{self._describe()}: transport is closed")
            if self.given_up != entered:
                raise self._kept_expiring(method, [])
            if self.expiry is None:
                left = None if read_timeout is None else max(deadline - time.monotonic(), 0.01)
                return self.post_headers, self.post_session, left
            if self.expiry is _STALE:
                self.expiry = _LEADER
                self._expiry_generation += 1
                raise SessionExpired(
                    f"{self._describe()}: the server no longer knows session; initialize again"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if self._expiry_generation == generation:  # the leader did not get through
                    self.expiry = _STALE
                    self.cond.notify_all()
                raise RequestTimeout(
                    f"{self._describe()}: the expired session was not re-initialized within "
                    f"{bound:g} s; {method} not sent"
                )
            self.cond.wait(remaining)

    # -- an expiry during the re-send: bounded ----------------------------------------
    #
    # A request that leads gets ``SessionExpired``; the connection re-initializes (once per
    # call, its rule) and sends it again. If the server expires the session again before
    # that re-send is answered, the request leads once more, and here the transport
    # re-initializes itself through ``reinitialize_session`` and sends it again. Two
    # bounds end it, each with ``SessionKeptExpiring`` (every expiry the request led kept
    # as a reason): a request that leads while no other request is under way does so at
    # most ``MAX_REINITIALIZATIONS`` times (a server that forgets each session at once
    # costs one call 2 re-initializations, not 3); and once ``MAX_FRUITLESS``
    # re-initializations in a row each ended in a session that expired before it answered
    # a request, the next expiry fails the leader and every request under way (8 threads
    # cost 2 in all, not 2 each). Several requests under way share the second bound only:
    # 8 threads through 2 expiries in a row all get through, whichever request meets
    # which, as one request alone does; a third expiry in a row ends them all, as it ends
    # a request alone. The session is then left stale, the streak forgotten: the next request
    # leads a new re-initialization. A 404 means the server did not run the request: each
    # re-send is safe.

    def expired_again(
        self,
        hook: Callable[[], None] | None,
        request_id: Any,
        method: str | None,
        error: SessionExpired,
        leads: Leads | None,
        entered: int = 0,
    ) -> Leads:
        """``error``: the request ``request_id`` is to lead a re-initialization. Raises it
        (the connection re-initializes) the first time; re-initializes through ``hook``
        (the transport's ``reinitialize_session``; None: raises ``error``) and returns the
        expiries so far (send again) the next times; raises ``SessionKeptExpiring`` past
        either bound."""
        if hook is None:
            raise error
        with self.lock:
            first = leads is None and request_id not in self.led
            if leads is None:
                leads = self.led.pop(request_id, None) or Leads(entered)
            entered = leads.entered
            leads.reasons.append(error)
            if len(self.under_way) <= 1:
                leads.own += 1  # no other request is under way: this one's own bound
            if self.given_up != entered:  # given up while under way: the next one leads
                if self.expiry is _LEADER:
                    self.expiry = _STALE
                    self.cond.notify_all()
                raise self._kept_expiring(method, leads.reasons) from error
            if self.fruitless >= MAX_FRUITLESS or leads.own > MAX_REINITIALIZATIONS:
                self._give_up()
                raise self._kept_expiring(method, leads.reasons) from error
            if first:  # its first: the connection's rule
                if len(self.led) >= _LED_MAX:
                    self.led.clear()  # requests whose re-send never came (a failed one)
                self.led[request_id] = leads
                raise error
        log.warning(
            "mcpsync: %s: the session expired again while %s was re-sent; initializing again",
            self._describe(),
            method,
        )
        hook()  # its failure is the request's (a failed handshake leaves the session stale)
        return leads

    def _give_up(self) -> None:
        """With ``lock`` held: no re-initialization now. Every request under way
        fails (``given_up`` moves on), the session is left stale for the next request
        to lead, and the streak starts again."""
        if self.expiry is _LEADER:
            self.expiry = _STALE
        self.given_up += 1
        self.fruitless = 0
        self.cond.notify_all()

    def _kept_expiring(
        self, method: str | None, reasons: list[SessionExpired]
    ) -> SessionKeptExpiring:
        bounds = (
            f"at most {MAX_REINITIALIZATIONS} re-initializations for one request, "
            f"{MAX_FRUITLESS} in a row in all whose new session expired unanswered"
        )
        if not reasons:  # a request that waited: given up with the others under way
            return SessionKeptExpiring(
                f"{self._describe()}: the HTTP session kept expiring after each "
                f"re-initialization; {method} was given up unsent ({bounds})",
                [],
            )
        lines = "; ".join(str(r) for r in reasons[-2:])
        return SessionKeptExpiring(
            f"{self._describe()}: the session expired {len(reasons)} times while sending "
            f"{method} (it led {len(reasons) - 1} re-initializations; each new session "
            f"expired before the request was answered; {bounds}): {lines}",
            list(reasons),
        )

    def not_found(self, sent_session: str, is_request: bool) -> bool:
        """A 404 to a message sent with ``sent_session``. False: report ``SessionExpired``
        (this one leads, or it is not a request); True: wait for the new session and resend."""
        with self.lock:
            if self.expiry is None and self.session_id == sent_session:
                self._expired_id = sent_session
                self.expiry = _LEADER if is_request else _STALE
                self._expiry_generation += 1
                self.session_id = None  # until the re-initialization names the new one
                self._rebuild_headers()
                return False
            return is_request

    def _rebuild_headers(self) -> None:
        """Called with ``lock`` held (or from __init__)."""
        base = {**self._http.headers, "Accept": ACCEPT_POST, "Content-Type": "application/json"}
        self.init_headers = dict(base)
        if self.protocol_version:
            base["MCP-Protocol-Version"] = self.protocol_version
            if self.modern:
                self.init_headers = dict(base)
        if self.session_id:
            base["Mcp-Session-Id"] = self.session_id
        self.post_headers = base
        self.post_session = self.session_id

    def side_headers(self, accept: str, last_event_id: str | None = None) -> dict[str, str]:
        """The headers of a GET (back-channel, resumption) or the DELETE: the session's id
        (the expired one while a re-initialization is under way) and version."""
        with self.lock:
            hdrs = {**self._http.headers, "Accept": accept}
            session_id = self.session_id
            if session_id is None and self.expiry is not None:
                session_id = self._expired_id  # not without one: a 404 ends this GET quietly
            if session_id:
                hdrs["Mcp-Session-Id"] = session_id
            if self.protocol_version:
                hdrs["MCP-Protocol-Version"] = self.protocol_version
        if last_event_id is not None:
            hdrs["Last-Event-ID"] = last_event_id
        return hdrs

    def initialize_answered(self, response: Any) -> None:
        """A 2xx head to ``initialize``, before its body is read or delivered: keep the
        session id it assigns and, in a re-initialization, move to _HANDSHAKE. Here, not
        once the POST returns: the reply may reach its caller first (an SSE reply's reader
        thread), and ``notifications/initialized`` must then find _HANDSHAKE to end the
        expiry, or the requests waiting for the new session wait until their timeout."""
        session_id = response.headers.get("mcp-session-id")
        if session_id is not None and not _SESSION_ID.fullmatch(session_id):
            log.warning("mcpsync: %s sent an invalid Mcp-Session-Id; ignoring it", self._describe())
            session_id = None
        with self.lock:
            if session_id is not None:
                self.session_id = session_id
                self._rebuild_headers()
            if self.expiry is not None:
                self.expiry = _HANDSHAKE

    def delete(self, target: Target) -> None:
        """close(): DELETE the session at ``target`` (bounded; a failure is only logged)."""
        with self.lock:
            session_id = self.session_id
        if session_id is None or self.modern:
            return
        headers = self.side_headers("application/json, text/event-stream")
        try:
            response, _ = self._http.request("DELETE", target, headers, None, 5.0)
            discard(response)
            if response.status not in (200, 202, 204, 404, 405):
                log.debug(
                    "mcpsync: DELETE of session at %s answered %s",
                    self._describe(),
                    response.status,
                )
        except MCPSyncError as exc:
            log.debug("mcpsync: DELETE of session at %s failed: %s", self._describe(), exc)
