"""The OAuth device authorization grant (RFC 8628) as a redirect mode: no browser on this
machine, nothing to paste back.

Owns :class:`DeviceFlow` (``OAuth(redirect="device")`` or ``OAuth(redirect=DeviceFlow(...))``)
and :class:`DeviceCode`:

1. the client (pre-registered, a Client ID Metadata Document, a stored registration that
   allows the device grant, else a new RFC 7591 registration for it) asks the
   ``device_authorization_endpoint`` for a device code (``scope``, RFC 8707 ``resource``);
2. the person is shown the verification URI (and the complete URI) and the user code: text
   on stderr, or an HTML block with the link in a notebook (IPython.display);
3. the token endpoint is polled every ``interval`` seconds with the device_code grant
   (through the shared token request of :mod:`.flow`): ``authorization_pending`` waits,
   ``slow_down`` adds 5 s to the interval, ``access_denied`` raises
   :class:`~mcpsync.errors.AccessDenied`, ``expired_token`` (or the code's ``expires_in``
   running out, or ``OAuth.authorization_timeout``) raises
   :class:`~mcpsync.errors.ExpiredToken`. A hiccup while polling (the token endpoint
   unreachable, timing out, answering 5xx or 429, ``temporarily_unavailable``) is retried
   with exponential back-off (the interval doubled per failure in a row, at most
   ``MAX_BACKOFF`` s), still bounded by the code's lifetime; any other answer (an HTML page,
   ``invalid_grant`` ...) ends the flow with its typed error.

``OAuth(redirect="auto")`` (the default) runs this flow instead of a redirect when no
browser can be opened here (:func:`~.redirect.no_browser_reason`), no ``redirect_uri`` was
given, and the authorization server advertises a ``device_authorization_endpoint`` (and,
if it lists ``grant_types_supported``, the device grant); if the device code request
itself is refused (or the registration for it), ``OAuth`` falls back to the paste redirect.

The wait between polls is an Event waited on in short slices, so Ctrl-C interrupts it at
once and :meth:`DeviceFlow.cancel` (from another thread) ends it. ``clock`` and ``wait`` are
injectable so tests never sleep. The device code never appears in a message or log; the
user code is meant to be shown and is.
"""

from __future__ import annotations

import html
import sys
import threading
import time
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from ..errors import AuthError, ConfigError, ExpiredToken, TokenError
from ..transports.http.fetch import NOT_JSON, Deadline, fetch, load_json
from ._util import log, redact, require_secure, short
from .discovery import AuthServerMetadata
from .dpop import DPoPProver
from .flow import TokenSet, _basic_header, _token_request, client_assertion
from .grants import Grant, GrantHost
from .redirect import _in_notebook, no_browser_reason
from .registration import ClientInfo, choose_auth_method, register_client

__all__ = [
    "DEVICE_CODE_GRANT",
    "DeviceCode",
    "DeviceFlow",
    "DeviceUnavailable",
    "show_device_code",
    "device_flow_for",
    "offers_device_grant",
]

DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
_CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SLOW_DOWN_STEP = 5.0  # RFC 8628 3.5: add 5 seconds to the interval on slow_down
_SLICE = 0.25  # longest uninterrupted wait
MAX_BACKOFF = 60.0  # longest wait after failed polls in a row
_MIN_POLL = 0.1  # the shortest time a poll made just before the deadline is given
#: OAuth errors of a token endpoint that is briefly unable to answer (RFC 6749 5.2 / 4.1.2.1)
_TRANSIENT_ERRORS = ("temporarily_unavailable", "server_error")


class DeviceUnavailable(AuthError):
    """``redirect="auto"`` chose the device grant, but the authorization server refused the
    device code request (or the client registration for it); ``OAuth`` uses a redirect."""


class _Observed:
    """What the last token POST met (unreachable, or its status), told by
    ``post_token_request`` (``record``), so a hiccup can be told from an answer."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.unreachable: str | None = None

    def record(self, status: int | None, unreachable: str | None) -> None:
        self.status, self.unreachable = status, unreachable

    def hiccup(self, exc: AuthError) -> str | None:
        """What went wrong when ``exc`` is worth another poll (None: it is final)."""
        if self.unreachable is not None:
            return self.unreachable
        if isinstance(exc, TokenError) and exc.error in _TRANSIENT_ERRORS:
            return exc.error
        if self.status is not None and (self.status >= 500 or self.status == 429):
            return f"HTTP {self.status}"
        return None


@dataclass
class DeviceCode:
    """A device authorization response. ``repr`` hides the device code."""

    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float
    device_code: str = field(repr=False)


def _terminal_text(code: DeviceCode) -> str:
    minutes = max(1, round(code.expires_in / 60))
    lines = [
        f"To authorize mcpsync, open {code.verification_uri}",
        f"and enter the code: {code.user_code}",
    ]
    if code.verification_uri_complete:
        lines.append(f"(or open {code.verification_uri_complete})")
    lines.append(f"Waiting for approval (the code expires in {minutes} min; Ctrl-C to cancel)...")
    return "\n".join(lines)


def _html(code: DeviceCode) -> str:
    link = code.verification_uri_complete or code.verification_uri
    href = html.escape(link, quote=True)
    return (
        "<div style='font-family:sans-serif'><p>To authorize mcpsync, open "
        f"<a href='{href}' target='_blank' rel='noopener'>{html.escape(code.verification_uri)}</a>"
        " and enter the code:</p>"
        f"<p style='font-size:1.6em;font-family:monospace'><b>{html.escape(code.user_code)}</b></p>"
        "<p>Waiting for approval (interrupt the kernel to cancel)...</p></div>"
    )


def show_device_code(code: DeviceCode) -> None:
    """The default display: an HTML block in a notebook (IPython), else text on stderr."""
    if _in_notebook():
        try:
            from IPython.display import HTML, display
        except ImportError:  # pragma: no cover - ipykernel without IPython does not happen
            pass
        else:
            display(HTML(_html(code)))
            return
    print(_terminal_text(code), file=sys.stderr, flush=True)


class DeviceFlow(Grant):
    """RFC 8628 device authorization as ``OAuth``'s redirect mode.

    ``display(code)`` shows the :class:`DeviceCode` (default :func:`show_device_code`);
    ``open_browser`` also opens the (complete) verification URI here; ``clock`` (monotonic
    seconds) and ``wait(seconds) -> cancelled`` replace the real ones in tests.
    """

    name = "device"
    interactive = True

    def __init__(
        self,
        *,
        display: Callable[[DeviceCode], Any] | None = None,
        open_browser: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], bool] | None = None,
        fallback: bool = False,
    ) -> None:
        """``fallback``: a refused device code request raises :class:`DeviceUnavailable`
        (``OAuth`` then uses a redirect) instead of its own error (``redirect="auto"``)."""
        self.display = display or show_device_code
        self.open_browser = open_browser
        self.clock = clock
        self.fallback = fallback
        self._cancelled = threading.Event()
        self._wait = wait or self._wait_event

    def __repr__(self) -> str:
        return f"DeviceFlow(open_browser={self.open_browser!r}, fallback={self.fallback!r})"

    def cancel(self) -> None:
        """End a running (or the next) poll with AuthError."""
        self._cancelled.set()

    def _wait_event(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:  # short slices: a KeyboardInterrupt is raised between them at the latest
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._cancelled.wait(min(left, _SLICE)):
                return True

    # -- Grant ------------------------------------------------------------------------
    def obtain(
        self, host: GrantHost, asm: AuthServerMetadata, resource: str, scopes: list[str] | None
    ) -> TokenSet:
        self._cancelled.clear()
        try:
            client = device_client(host, asm)
            code = request_device_code(
                host.http, asm, client, scopes=scopes, resource=resource,
                timeout=host.timeout, allow_insecure=host.allow_insecure_http,
            )  # fmt: skip
        except AuthError as exc:
            if not self.fallback:
                raise
            failure = DeviceUnavailable(f"device grant at {asm.issuer} unavailable: {exc}")
            raise failure from None
        log.info("device authorization at %s: waiting for the person", asm.issuer)
        self.display(code)
        if self.open_browser:
            try:
                webbrowser.open(code.verification_uri_complete or code.verification_uri)
            except Exception:  # noqa: BLE001 - a broken browser setup must not end the flow
                log.debug("could not open a browser for the device flow")
        tok = self.poll(
            host.http, asm, client, code, resource=resource, scopes=scopes,
            timeout=host.timeout, allow_insecure=host.allow_insecure_http,
            limit=host.authorization_timeout, dpop=host.prover,
        )  # fmt: skip
        log.info("device authorization at %s approved", asm.issuer)
        return tok

    def poll(
        self,
        http: requests.Session,
        asm: AuthServerMetadata,
        client: ClientInfo,
        code: DeviceCode,
        *,
        resource: str,
        scopes: list[str] | None,
        timeout: float,
        allow_insecure: bool,
        limit: float | None = None,
        dpop: DPoPProver | None = None,
    ) -> TokenSet:
        """Poll the token endpoint until approval, denial, expiry or cancellation (each
        poll with a fresh DPoP proof when ``dpop`` is given)."""
        lifetime = code.expires_in if limit is None else min(code.expires_in, limit)
        deadline = self.clock() + lifetime
        interval = code.interval
        pause, failures, last_hiccup = interval, 0, ""
        while True:
            # a pause never outlasts the deadline: a poll due past it is not made, the
            # flow ends at the deadline instead (RFC 8628 3.5: never poll sooner)
            if self._wait(max(0.0, min(pause, deadline - self.clock()))):
                raise AuthError("device authorization was cancelled")
            if self.clock() >= deadline:
                why = f"; the token endpoint was failing ({last_hiccup})" if failures else ""
                raise ExpiredToken(
                    f"device authorization at {asm.issuer}: nobody approved within "
                    f"{lifetime:.0f} s{why}",
                    error="expired_token",
                    step="device_code",
                )
            observed = _Observed()
            try:
                tok = _token_request(
                    http, asm, client, DEVICE_CODE_GRANT,
                    {"device_code": code.device_code, "resource": resource},
                    timeout=min(timeout, max(deadline - self.clock(), _MIN_POLL)),
                    allow_insecure=allow_insecure, secrets=[code.device_code], dpop=dpop,
                    observe=observed.record,
                )  # fmt: skip
            except AuthError as exc:
                hiccup = observed.hiccup(exc)
                if hiccup is not None:  # RFC 8628 3.5: back off, keep polling
                    failures, last_hiccup = failures + 1, hiccup
                    pause = min(interval * 2**failures, MAX_BACKOFF, deadline - self.clock())
                    pause = max(pause, 0.0)
                    log.info("device flow: token endpoint %s; polling again in %.0f s",
                             hiccup, pause)  # fmt: skip
                    continue
                if not isinstance(exc, TokenError):
                    raise  # an HTML page, a DPoP failure ...: typed, final
                failures, pause = 0, interval
                if exc.error == "authorization_pending":
                    continue
                if exc.error == "slow_down":
                    interval += SLOW_DOWN_STEP
                    pause = interval
                    log.debug("device flow: slow_down, polling every %.0f s", interval)
                    continue
                raise  # access_denied, expired_token, invalid_grant ...: typed, final
            tok.resource = resource
            tok.requested_scopes = scopes
            return tok


def offers_device_grant(asm: AuthServerMetadata) -> bool:
    """The authorization server advertises a device authorization endpoint (and the device
    grant, when it lists its grant types)."""
    endpoint = asm.raw.get("device_authorization_endpoint")
    grants = asm.grant_types_supported
    return (
        isinstance(endpoint, str)
        and bool(endpoint)
        and (grants is None or DEVICE_CODE_GRANT in grants)
    )


def device_flow_for(
    spec: Any, asm: AuthServerMetadata | None = None, redirect_uri: str | None = None
) -> DeviceFlow | None:
    """The :class:`DeviceFlow` an ``OAuth(redirect=...)`` value names, or None. ``"auto"``
    names one (with ``fallback``) when no browser can be opened here, no ``redirect_uri``
    was chosen, and ``asm`` offers the device grant."""
    if isinstance(spec, DeviceFlow):
        return spec
    if not isinstance(spec, str):
        return None
    mode = spec.lower()
    if mode == "device":
        return DeviceFlow()
    if mode == "auto" and asm is not None and redirect_uri is None and offers_device_grant(asm):
        why = no_browser_reason()
        if why is not None:
            log.info("no browser here (%s): using the device grant of %s", why, asm.issuer)
            return DeviceFlow(fallback=True)
    return None


def device_client(host: GrantHost, asm: AuthServerMetadata) -> ClientInfo:
    """The client for the device grant at ``asm`` (registering one that allows it if needed)."""
    pre = host.preregistered(asm)
    if pre is not None:
        return pre
    if host.cimd_url and asm.client_id_metadata_document_supported:
        return ClientInfo(
            client_id=host.cimd_url, auth_method="none", issuer=asm.issuer, source="cimd"
        )
    key = f"client {asm.issuer}"
    stored = ClientInfo.from_store(host.store.get(key) or {})
    if (
        stored is not None
        and stored.issuer == asm.issuer
        and not stored.expired
        and DEVICE_CODE_GRANT in stored.grant_types
    ):
        return stored
    grant_types = [DEVICE_CODE_GRANT]
    if "refresh_token" in (asm.grant_types_supported or []) or asm.offers_offline_access:
        grant_types.append("refresh_token")
    md: dict[str, Any] = {
        "client_name": host.client_name,
        "grant_types": grant_types,
        "response_types": [],
        "redirect_uris": [],
        "application_type": "native",
    }
    supported = asm.token_endpoint_auth_methods_supported
    if supported is None or "none" in supported:
        md["token_endpoint_auth_method"] = "none"
    md.update(host.client_metadata_extra)
    info = register_client(
        host.http, asm, md, timeout=host.timeout, allow_insecure=host.allow_insecure_http
    )
    host.store.set(key, info.to_store())
    return info


def _client_auth(
    client: ClientInfo, asm: AuthServerMetadata, data: dict[str, str], headers: dict[str, str]
) -> list[str | None]:
    """Client authentication for the device authorization request; returns the secrets used."""
    method = choose_auth_method(client, asm)
    if method == "client_secret_basic" and client.client_secret:
        headers["Authorization"] = _basic_header(client.client_id, client.client_secret)
        return [client.client_secret]
    data["client_id"] = client.client_id
    if method == "client_secret_post" and client.client_secret:
        data["client_secret"] = client.client_secret
    elif method == "private_key_jwt":
        data["client_assertion_type"] = _CLIENT_ASSERTION_TYPE
        data["client_assertion"] = client_assertion(client, asm.issuer)
        return [data["client_assertion"]]
    return [client.client_secret]


def request_device_code(
    http: requests.Session,
    asm: AuthServerMetadata,
    client: ClientInfo,
    *,
    scopes: list[str] | None,
    resource: str,
    timeout: float,
    allow_insecure: bool,
) -> DeviceCode:
    """RFC 8628 3.1/3.2: ask for a device code and a user code."""
    endpoint = asm.raw.get("device_authorization_endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise ConfigError(
            f"authorization server {asm.issuer} offers no device authorization endpoint "
            "(RFC 8628); use another redirect mode"
        )
    require_secure(endpoint, "device authorization endpoint", allow_insecure)
    data: dict[str, str] = {"resource": resource}
    if scopes:
        data["scope"] = " ".join(scopes)
    headers = {"Accept": "application/json"}
    secrets = _client_auth(client, asm, data, headers)
    where = short(endpoint)
    r = fetch(  # one deadline for the reply, its body capped, its nesting too
        http, endpoint, deadline=Deadline.checked(timeout), what="device authorization",
        error=AuthError, method="POST", data=data, headers=headers, max_redirects=0,
        body_for=None,
    )  # fmt: skip
    if r.status == 0:
        raise AuthError(f"device authorization at {where} failed: {r.problem}")
    doc: Any = load_json(r.body, what="device authorization", url=endpoint, error=AuthError,
                         lenient=True)  # fmt: skip
    doc = None if doc is NOT_JSON else doc
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        msg = f"device authorization refused by {where}: {doc['error'][:100]}"
        if doc.get("error_description"):
            msg += f" ({str(doc['error_description'])[:200]})"
        raise TokenError.of(
            redact(msg, secrets), error=doc["error"][:100], step="device_authorization",
            status=r.status,
        )  # fmt: skip
    ok = isinstance(doc, dict) and r.status == 200
    fields = (doc.get("device_code"), doc.get("user_code")) if ok else (None, None)
    uri = (doc.get("verification_uri") or doc.get("verification_url")) if ok else None
    if not all(isinstance(x, str) and x for x in (*fields, uri)):
        raise AuthError(f"device authorization at {where} gave no usable answer (HTTP {r.status})")
    assert isinstance(uri, str)
    complete = doc.get("verification_uri_complete")
    expires_in, interval = doc.get("expires_in"), doc.get("interval", 5)
    return DeviceCode(
        user_code=doc["user_code"],
        verification_uri=uri,
        verification_uri_complete=complete if isinstance(complete, str) and complete else None,
        expires_in=float(expires_in) if isinstance(expires_in, (int, float)) else 600.0,
        interval=max(1.0, float(interval)) if isinstance(interval, (int, float)) else 5.0,
        device_code=doc["device_code"],
    )
