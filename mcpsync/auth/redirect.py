"""How a person (or a test) completes the authorization step in the browser.

Owns the redirect handlers. Each one says which ``redirect_uri`` to register and use
(:meth:`RedirectHandler.prepare`) and returns what came back to it
(:meth:`RedirectHandler.complete` -> the redirected URL, or a bare code for paste mode):

- :class:`LoopbackRedirect` ("terminal"): opens the browser and listens on 127.0.0.1 on an
  ephemeral port (RFC 8252 section 7.3); it accepts exactly one redirect to its path that
  carries the expected ``state`` and ignores anything else.
- :class:`PasteRedirect` ("paste"; notebooks, SSH sessions, no display): prints the URL
  and reads the redirected URL (or the code) that the person pastes back.
- :class:`CallableRedirect`: your function ``f(authorization_url) -> redirected URL``.
- :class:`HeadlessRedirect` ("headless") and :func:`headless_redirect`: for tests and
  auto-approving servers: GET the authorization URL without following redirects off the
  authorization server and return the ``Location`` that points elsewhere.

``resolve_redirect("auto")`` picks loopback when a browser is available, paste in a
notebook (a running kernel) or when no browser can be opened here (:func:`no_browser_reason`:
no ``DISPLAY``/``WAYLAND_DISPLAY`` on Linux, an SSH session without X forwarding,
``webbrowser.get()`` failing). ``"device"`` is not a redirect at all: ``OAuth`` runs the
RFC 8628 device grant instead (:mod:`.device`), and ``"auto"`` does too, rather than paste,
when the authorization server offers it (:func:`~.device.device_flow_for`).

>>> OAuth(redirect=lambda url: my_browser_robot(url))          # doctest: +SKIP
>>> OAuth(redirect="paste", redirect_uri="http://127.0.0.1:8976/callback")  # doctest: +SKIP
"""

from __future__ import annotations

import hmac
import os
import sys
import threading
import webbrowser
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urljoin, urlsplit

import requests

from ..errors import AuthError, ConfigError
from ..transports.http.fetch import Deadline, fetch
from ._util import log, same_origin, short

__all__ = [
    "DEFAULT_REDIRECT_URI",
    "RedirectHandler",
    "LoopbackRedirect",
    "PasteRedirect",
    "CallableRedirect",
    "HeadlessRedirect",
    "headless_redirect",
    "resolve_redirect",
    "no_browser_reason",
]

#: redirect URI used by the paste / callable / headless handlers unless told otherwise
DEFAULT_REDIRECT_URI = "http://127.0.0.1:8976/callback"

_DONE_PAGE = (
    b"<!doctype html><html><head><meta charset='utf-8'><title>mcpsync</title></head>"
    b"<body><p>Authorization received. You can close this window.</p></body></html>"
)


class _LoopbackServer(ThreadingHTTPServer):
    """One named daemon thread per connection (the project names every thread)."""

    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="mcpsync-auth[loopback-conn]",
            daemon=True,
        )
        t.start()


class RedirectHandler:
    """Base class: override :meth:`prepare` and :meth:`complete`."""

    #: accept a bare authorization code instead of a redirected URL
    allow_bare_code: bool = False

    def prepare(self) -> str:
        """Get ready (e.g. start listening); return the redirect URI to use."""
        raise NotImplementedError

    def complete(self, authorization_url: str, state: str, timeout: float) -> str:
        """Have the user agent visit ``authorization_url``; return the redirected URL."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what :meth:`prepare` took (idempotent)."""


class LoopbackRedirect(RedirectHandler):
    """Open the browser; receive the redirect on http://127.0.0.1:<port><path>.

    ``port=0`` picks a free ephemeral port each time. ``open_browser=False`` only prints
    the URL (useful when the browser is on the same host but not launchable).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        path: str = "/callback",
        open_browser: bool = True,
        print_fn: Callable[[str], Any] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.path = path if path.startswith("/") else "/" + path
        self.open_browser = open_browser
        self.print_fn = print_fn or (lambda s: print(s, file=sys.stderr, flush=True))
        self._server: _LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self._expected_state: str | None = None
        self._result: str | None = None
        self._got = threading.Event()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LoopbackRedirect(host={self.host!r}, port={self.port!r}, path={self.path!r})"

    def prepare(self) -> str:
        self.close()
        self._got.clear()
        self._result = None
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            timeout = 5  # an idle (pre-)connection cannot hold a thread for long

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                outer._on_get(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return  # the query holds the code: never log it

        try:
            server = _LoopbackServer((self.host, self.port), _Handler)
        except OSError as exc:
            raise AuthError(
                f"cannot listen on {self.host}:{self.port} for the redirect: {exc.strerror}"
            ) from None
        self._server = server
        port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="mcpsync-auth[loopback]",
            daemon=True,
        )
        self._thread.start()
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{port}{self.path}"

    def _on_get(self, h: BaseHTTPRequestHandler) -> None:
        p = urlsplit(h.path)
        params = dict(parse_qsl(p.query, keep_blank_values=True))
        with self._lock:
            expected = self._expected_state
            ok = (
                p.path == self.path
                and not self._got.is_set()
                and expected is not None
                and hmac.compare_digest(params.get("state", "").encode(), expected.encode())
            )
            if ok:
                host, port = self._server.server_address[:2] if self._server else (self.host, 0)
                if isinstance(host, (bytes, bytearray)):  # typeshed allows it; TCP gives str
                    host = host.decode()
                host = f"[{host}]" if ":" in host else host
                self._result = f"http://{host}:{port}{h.path}"
        if ok:
            h.send_response(200)
            h.send_header("Content-Type", "text/html; charset=utf-8")
            h.send_header("Content-Length", str(len(_DONE_PAGE)))
            h.send_header("Cache-Control", "no-store")
            h.end_headers()
            h.wfile.write(_DONE_PAGE)
            self._got.set()
        else:
            body = b"not the authorization redirect this client is waiting for\n"
            h.send_response(400 if not self._got.is_set() else 410)
            h.send_header("Content-Type", "text/plain")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)

    def complete(self, authorization_url: str, state: str, timeout: float) -> str:
        if self._server is None:
            raise AuthError("LoopbackRedirect.complete() called before prepare()")
        with self._lock:
            self._expected_state = state
        opened = False
        if self.open_browser:
            try:
                opened = webbrowser.open(authorization_url)
            except Exception:  # noqa: BLE001 - a broken browser setup must not kill the flow
                opened = False
        if opened:
            self.print_fn("Opened your browser to authorize mcpsync. If nothing appeared, open:")
        else:
            self.print_fn("Open this URL in a browser to authorize mcpsync:")
        self.print_fn(authorization_url)
        try:
            if not self._got.wait(timeout):
                raise AuthError(f"no authorization redirect arrived within {timeout:.0f} s")
            assert self._result is not None
            return self._result
        finally:
            self.close()

    def close(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)


class PasteRedirect(RedirectHandler):
    """Print the URL; read back the redirected URL the person copies from the address bar."""

    allow_bare_code = True

    def __init__(
        self,
        redirect_uri: str = DEFAULT_REDIRECT_URI,
        *,
        input_fn: Callable[[str], str] = input,
        print_fn: Callable[[str], Any] = print,
    ) -> None:
        self.redirect_uri = redirect_uri
        self.input_fn = input_fn
        self.print_fn = print_fn

    def __repr__(self) -> str:
        return f"PasteRedirect(redirect_uri={self.redirect_uri!r})"

    def prepare(self) -> str:
        return self.redirect_uri

    def complete(self, authorization_url: str, state: str, timeout: float) -> str:
        self.print_fn("Open this URL in a browser and authorize mcpsync:")
        self.print_fn(authorization_url)
        self.print_fn(
            f"Your browser will then go to {short(self.redirect_uri)} (the page may fail to load: "
            "that is expected). Copy the full URL from the address bar."
        )
        try:
            return self.input_fn("Paste the URL here: ").strip()
        except EOFError:
            raise AuthError("no authorization response was pasted (end of input)") from None


class CallableRedirect(RedirectHandler):
    """Call ``fn(authorization_url)``; it returns the URL the browser was redirected to."""

    def __init__(self, fn: Callable[[str], str], redirect_uri: str = DEFAULT_REDIRECT_URI) -> None:
        self.fn = fn
        self.redirect_uri = redirect_uri

    def __repr__(self) -> str:
        return f"CallableRedirect({getattr(self.fn, '__name__', 'fn')}, redirect_uri={self.redirect_uri!r})"

    def prepare(self) -> str:
        return self.redirect_uri

    def complete(self, authorization_url: str, state: str, timeout: float) -> str:
        out = self.fn(authorization_url)
        if not isinstance(out, str):
            raise AuthError("the redirect callable must return the redirected URL as a string")
        return out


def headless_redirect(
    authorization_url: str,
    *,
    redirect_uri: str | None = None,
    session: requests.Session | None = None,
    timeout: float = 30.0,
    max_hops: int = 10,
) -> str:
    """GET the authorization URL with redirects disabled and return the ``Location`` that
    leaves the authorization server (or starts with ``redirect_uri``).

    Redirects that stay on the authorization server's origin (e.g. to an auto-consent page)
    are followed, with cookies, up to ``max_hops``, all within ``timeout`` (one deadline;
    no page body is read). Works with servers that approve without
    a person (the MCP conformance server, test servers); raises AuthError otherwise.
    """
    http = session or requests.Session()
    url = authorization_url
    deadline = Deadline.checked(timeout)  # one bound for every hop
    try:
        for _ in range(max_hops):
            r = fetch(
                http, url, deadline=deadline, what="headless authorization", error=AuthError,
                headers={"Accept": "text/html, */*"}, max_redirects=0, body_for=(),
            )  # fmt: skip
            if r.status == 0:
                raise AuthError(f"headless authorization: GET {short(url)} failed: {r.problem}")
            location = r.headers.get("Location")
            if r.status not in (301, 302, 303, 307, 308) or not location:
                raise AuthError(
                    f"headless authorization: {short(url)} answered HTTP {r.status} without a "
                    "redirect (it probably wants a person to log in)"
                )
            nxt = urljoin(url, location)
            if (redirect_uri and nxt.startswith(redirect_uri)) or not same_origin(
                nxt, authorization_url
            ):
                return nxt
            url = nxt
        raise AuthError(f"headless authorization: more than {max_hops} redirects")
    finally:
        if session is None:
            http.close()


class HeadlessRedirect(RedirectHandler):
    """:func:`headless_redirect` as a handler (``redirect="headless"``)."""

    def __init__(
        self, redirect_uri: str = DEFAULT_REDIRECT_URI, *, session: requests.Session | None = None
    ) -> None:
        self.redirect_uri = redirect_uri
        self.session = session

    def __repr__(self) -> str:
        return f"HeadlessRedirect(redirect_uri={self.redirect_uri!r})"

    def prepare(self) -> str:
        return self.redirect_uri

    def complete(self, authorization_url: str, state: str, timeout: float) -> str:
        return headless_redirect(
            authorization_url,
            redirect_uri=self.redirect_uri,
            session=self.session,
            timeout=min(timeout, 60.0),
        )


def _in_notebook() -> bool:
    """True inside a running Jupyter kernel: an IPython shell with a kernel, not merely
    ``ipykernel`` imported (a script or test process that imports ipywidgets has it too)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def no_browser_reason() -> str | None:
    """Why no browser can be opened for the person here, or None when one can: a notebook
    kernel (the browser is not on this machine, as far as we know), no display on Linux, an
    SSH session without a forwarded display, or no browser ``webbrowser`` knows of."""
    if _in_notebook():
        return "a notebook kernel"
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if sys.platform.startswith("linux") and not display:
        return "no DISPLAY or WAYLAND_DISPLAY"
    if (os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY")) and not display:
        return "an SSH session"  # a browser would open on the remote machine's screen
    try:
        webbrowser.get()
    except webbrowser.Error:
        return "no browser found"
    return None


def resolve_redirect(spec: Any, redirect_uri: str | None = None) -> RedirectHandler:
    """Turn ``OAuth(redirect=...)`` into a handler: a handler, a callable, or one of
    "auto", "terminal"/"loopback", "paste"/"notebook", "headless"."""
    if isinstance(spec, RedirectHandler):
        return spec
    if callable(spec):
        return CallableRedirect(spec, redirect_uri or DEFAULT_REDIRECT_URI)
    if not isinstance(spec, str):
        raise ConfigError(
            f"redirect must be a string mode, a callable or a RedirectHandler, not {type(spec).__name__}"
        )
    mode = spec.lower()
    if mode == "auto":
        why = no_browser_reason()
        mode = "paste" if why else "terminal"
        log.debug("redirect mode auto -> %s%s", mode, f" ({why})" if why else "")
    if mode in ("terminal", "loopback", "browser"):
        if redirect_uri:
            p = urlsplit(redirect_uri)
            if p.scheme != "http" or not p.hostname:
                raise ConfigError(
                    f"loopback redirect_uri must be http://127.0.0.1:<port>/<path>, not {redirect_uri!r}"
                )
            return LoopbackRedirect(host=p.hostname, port=p.port or 0, path=p.path or "/callback")
        return LoopbackRedirect()
    if mode in ("paste", "notebook", "manual"):
        return PasteRedirect(redirect_uri or DEFAULT_REDIRECT_URI)
    if mode == "headless":
        return HeadlessRedirect(redirect_uri or DEFAULT_REDIRECT_URI)
    raise ConfigError(
        f"unknown redirect mode {spec!r} (auto, terminal, paste, headless, device, or a callable)"
    )
