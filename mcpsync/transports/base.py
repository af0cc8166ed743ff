"""The transport contract: move JSON-RPC messages, nothing else.

Owns: the ``Transport`` interface every transport implements, declared in full: the four
operations, the ``Features`` a transport has (what the layers above may rely on; they
never look at ``kind`` or probe for methods), and the optional hooks with their defaults.
A transport knows bytes, framing and connection management; it knows nothing of request
ids, futures or capabilities — correlation lives in ``mcpsync.rpc.connection``.

Threading contract:
- ``start(on_message, on_close)`` opens the stream and starts the transport's own reader
  thread(s). ``on_message(msg)`` is called with each decoded message (a dict) in wire
  order per stream; ``on_close(error)`` is called exactly once when the transport can
  deliver nothing more (``error`` is None after ``close()``, else a TransportError that
  says why, e.g. ``ServerExited`` with exit code and stderr tail).
- ``on_error(exc)`` (optional third callback) reports garbage on the wire
  (a ``ProtocolError``) without ending the stream.
- ``send(msg, timeout=, headers=)`` may be called from any thread, concurrently. It may
  deliver replies to ``on_message`` before it returns (HTTP reads a JSON reply in the
  calling thread). It raises a ``TransportError`` when the message could not be sent.
  ``headers`` reach the wire only where ``features.per_request_headers``.
- ``wait_for(future, deadline)`` (only where ``features.caller_reads``): read in the
  calling thread until ``future`` is done or ``deadline`` passes; ``wakeup()`` makes such
  a reader look at its future again.
- ``close()`` is idempotent, bounded in time, and leaves no thread, process or file
  descriptor behind.
- ``abandon()``: in a child of ``os.fork()``, release this process's copies (descriptors)
  without touching the peer: nothing sent, no signal, no read; ``close()`` there does only
  this. ``exit_soon(deadline)``: interpreter exit is near, one non-blocking step towards
  ending (True while more are needed).
  A started transport is registered with ``mcpsync.runtime.lifecycle``, which calls both.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..runtime.lifecycle import UNOWNED, Owner, forked, own
from ..runtime.lifecycle import error as _forked_error

__all__ = ["Transport", "Features", "Message", "OnMessage", "OnClose", "OnError",
           "TIMEOUT_TAIL_LINES"]  # fmt: skip

Message = dict[str, Any]
OnMessage = Callable[[Message], None]
OnClose = Callable[[BaseException | None], None]
OnError = Callable[[BaseException], None]

#: the server's last stderr lines a call's ``RequestTimeout`` quotes (``rpc.connection``);
#: ``Transport.stderr_tail()`` keeps more
TIMEOUT_TAIL_LINES = 10

log = logging.getLogger("mcpsync")


@dataclass(frozen=True)
class Features:
    """What a transport can do; the defaults fit a transport that declares nothing."""

    #: it can carry the stateless 2026-07-28 wire (the legacy HTTP+SSE transport cannot)
    carries_modern: bool = True
    #: ``send(headers=)`` puts the headers on the wire (HTTP: ``Mcp-Param-*``), and
    #: closing a request's reply stream (``abort_request``) cancels it on the modern wire
    per_request_headers: bool = False
    #: a ``server/discover`` probe may go unanswered forever (an old server reading its
    #: pipe): bring-up sends ``initialize`` beside it after a bound
    bounded_probe: bool = False
    #: a server that dies on the probe can be started again (a child process)
    restart_on_probe_death: bool = False
    #: replies are read in the calling thread (``wait_for``/``wakeup``)
    caller_reads: bool = False
    #: ``send()`` of a request may wait for the server (HTTP: until the reply's head, or
    #: all of a JSON reply): a future's request is sent on a shared sender thread
    send_waits: bool = False
    #: the server may forget the transport's session (HTTP ``Mcp-Session-Id``, 404): the
    #: transport then re-initializes through ``Transport.reinitialize_session``
    session_expiry: bool = False


class Transport(ABC):
    """Moves JSON-RPC messages between this client and one server."""

    #: the process it belongs to (``_lifecycle.own`` sets it; unowned: the importing one)
    _owner: Owner = UNOWNED

    #: short name for reports only: "stdio", "streamable-http", "sse", "memory"
    kind: str = "abstract"
    #: what the layers above may rely on (never ``kind``)
    features: Features = Features()
    #: names the server this transport reaches, for the era verdict memory (None: unknown)
    identity: str | None = None
    #: the HTTP session the server assigned (``Mcp-Session-Id``), for reports (None: none)
    session_id: str | None = None
    #: with ``features.session_expiry``: runs the MCP handshake again on this transport
    #: (blocking, bounded by the session's timeouts), set by the layer that owns the session
    #: (``mcpsync.session.restart.heal_expiry``); None: an expiry the transport cannot heal
    #: itself fails with ``SessionExpired``
    reinitialize_session: Callable[[], None] | None = None
    #: while a session brings this transport up: its ``connect_timeout`` deadline
    #: (``time.monotonic()``; None: none, or not bringing it up); bring-up waits end by it
    bringup_deadline: float | None = None

    @abstractmethod
    def start(
        self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None = None
    ) -> None:
        """Open the connection and start reading."""

    @abstractmethod
    def send(
        self,
        message: Message,
        *,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send one message. ``timeout`` bounds the write (and, on HTTP, the reply);
        ``headers``: per-message headers, sent only where ``features.per_request_headers``."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection; idempotent and bounded."""

    def abandon(self) -> None:  # noqa: B027 - optional hook
        """After ``os.fork()``, in the child: release this process's copies of the
        connection (descriptors) without touching the peer or the parent's use of it."""

    def exit_soon(self, deadline: float) -> bool:
        """Interpreter exit is near: take the next step towards ending, without waiting,
        so that a later ``close()`` ends by ``deadline`` (a ``time.monotonic()`` value);
        True while more steps are needed (called again, about every 10 ms)."""
        return False

    def _check_owner(self) -> None:
        """For ``send()`` of a closed transport: in a forked child the reason is the fork
        (``ForkedError``), not a close. Implementations call it before their own error."""
        if forked(self):
            raise _forked_error(self)

    def set_protocol_version(self, version: str) -> None:  # noqa: B027 - optional hook
        """Called once the protocol version is agreed (HTTP sends it as a header)."""

    def handshake_failed(self) -> None:  # noqa: B027 - optional hook
        """Called when a re-initialization (after an expired HTTP session) failed: its
        ``initialize`` was refused or its reply unusable. A transport holding requests until
        the new session is up lets the next one lead a new attempt (no-op by default)."""

    def describe(self) -> str:
        """One line for reports and error messages (no secrets)."""
        return self.kind

    # -- optional hooks, with their defaults ---------------------------------------------

    def wait_for(self, future: Any, deadline: float) -> None:
        """Read in the calling thread until ``future`` is done or ``deadline``
        (``time.monotonic()``) passes. Only called where ``features.caller_reads``."""
        raise NotImplementedError(f"{self.kind} transport does not read in the caller")

    def wakeup(self) -> None:  # noqa: B027 - optional hook
        """Make a caller inside ``wait_for`` look at its future again (no-op by default)."""

    def abort_request(self, request_id: Any) -> bool:
        """Stop reading the reply stream of ``request_id``; True if there was one."""
        return False

    def stderr_tail(self) -> str:
        """The server's last lines on its stderr (stdio: a bounded tail, what it holds now
        read first), newline-joined; "" where there is no such stream."""
        return ""

    def stdout_noise(self) -> list[str]:
        """The last lines the server wrote that were not JSON-RPC (stdio: e.g. a banner
        printed to stdout), oldest first, each cut to a printable excerpt; [] if none."""
        return []

    # -- for implementations: the three callbacks, each used safely ------------------

    name: str = "server"
    _on_message: OnMessage | None = None
    _on_close: OnClose | None = None
    _on_error: OnError | None = None
    _close_reported = False

    def _bind(self, on_message: OnMessage, on_close: OnClose, on_error: OnError | None) -> None:
        self._on_message, self._on_close, self._on_error = on_message, on_close, on_error
        own(self, f"{self.kind} transport to {self.name!r}", kind="transport",
            on_fork=_abandon, on_exit=_close, exit_soon=_exit_soon)  # fmt: skip

    def _deliver(self, message: Any) -> None:
        """Hand one decoded message (or each of a batch) to ``on_message``."""
        on_message = self._on_message
        if on_message is None:
            return
        try:
            if isinstance(message, list):
                for item in message:
                    on_message(item)
            else:
                on_message(message)
        except Exception:  # noqa: BLE001 - a callback bug must not break the reader (logged)
            self._callback_failed()

    def _callback_failed(self) -> None:
        """Log the exception ``on_message`` raised (called in its ``except``)."""
        log.exception("mcpsync: error while handling a message from %s", self.name)

    def _report(self, error: BaseException) -> None:
        """Report garbage on the wire (or a lost reply) without ending the stream."""
        if self._on_error is None:
            log.warning("mcpsync: %s", error)
            return
        try:
            self._on_error(error)
        except Exception:
            log.exception("mcpsync: error in on_error for %s", self.name)

    def _report_close(self, error: BaseException | None) -> None:
        """Call ``on_close`` exactly once."""
        # one lock per transport, made on first use (dict.setdefault is atomic)
        with self.__dict__.setdefault("_close_lock", threading.Lock()):
            if self._close_reported:
                return
            self._close_reported = True
        if self._on_close is not None:
            self._on_close(error)


# what mcpsync.runtime.lifecycle calls on a started transport (module functions: it holds no reference)
def _abandon(transport: Transport) -> None:
    transport.abandon()


def _close(transport: Transport, deadline: float) -> None:
    transport.close()


def _exit_soon(transport: Transport, deadline: float) -> bool:
    return transport.exit_soon(deadline)
