"""Elicitation answered by a person at a terminal: a prompt per field, and URL requests.

Owns: ``TerminalElicitation``, an elicitation handler for ``Session.connect`` (and a
``resolve`` for the -32042 error). A form asks one field at a time (its type, whether it
is required, its default in brackets), re-asks after an answer that does not fit, and
sends the answers only after an explicit "y" to the final question; a URL request shows
the message, the full URL and its domain, opens a browser only on "y" (and only an
``https:`` or loopback ``http:`` link), then waits for the person to say it is done.
``!cancel`` / ``!decline`` at any prompt, and end of input, end it. Streams and the
browser opener are injectable (tests drive it with ``io.StringIO``). Nothing is accepted
by default: every default answer is "no".
"""

from __future__ import annotations

import sys
import threading
import webbrowser
from collections.abc import Callable
from typing import IO, Any

from .schema import FormField, SchemaUnsupported, form_fields, params_dict, parse_answer
from .url import (
    URLElicitationRequired,
    URLRequest,
    clean_text,
    openable,
    url_requests,
    url_required,
)

__all__ = ["TerminalElicitation"]

_STOP = {"!cancel": "cancel", "!decline": "decline"}
_LOCK = threading.Lock()  # one conversation at a time on a terminal, whichever server asks


class _Ended(Exception):
    def __init__(self, action: str) -> None:
        self.action = action


class TerminalElicitation:
    """An elicitation handler that asks a person at a terminal.

    ``input``/``output``: the streams (default ``sys.stdin`` / ``sys.stderr``);
    ``open_url``: called with a URL the person asked to open (default
    ``webbrowser.open``); ``max_attempts``: answers tried per field before the form is
    cancelled; ``server``: a label shown in the prompts.
    """

    def __init__(
        self,
        *,
        input: IO[str] | None = None,
        output: IO[str] | None = None,
        open_url: Callable[[str], Any] | None = None,
        max_attempts: int = 5,
        server: str = "",
    ) -> None:
        self._in = input
        self._out = output
        self._open = open_url or webbrowser.open
        self.max_attempts = max_attempts
        self.server = server

    # -- streams ---------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        out = self._out or sys.stderr
        out.write(text + "\n")
        out.flush()

    def _ask(self, prompt: str) -> str:
        out = self._out or sys.stderr
        out.write(prompt)
        out.flush()
        line = (self._in or sys.stdin).readline()
        if not line:
            raise _Ended("cancel")  # end of input: nobody is there to answer
        answer = line.rstrip("\r\n")
        if answer.strip().lower() in _STOP:
            raise _Ended(_STOP[answer.strip().lower()])
        return answer

    def _yes(self, prompt: str) -> bool:
        return self._ask(prompt + " [y/N] ").strip().lower() in ("y", "yes")

    def _who(self) -> str:
        return f"[{clean_text(self.server, 80)}] " if self.server else ""

    # -- the handler -------------------------------------------------------------------------

    def __call__(self, params: Any) -> dict[str, Any]:
        data = params_dict(params)
        with _LOCK:
            try:
                if data.get("mode") == "url":
                    return {"action": self.url(URLRequest.of(data))}
                return self.form(data)
            except _Ended as ended:
                self._say("(cancelled)" if ended.action == "cancel" else "(declined)")
                return {"action": ended.action}

    def form(self, data: dict[str, Any]) -> dict[str, Any]:
        """Ask for every field of a form elicitation; the ElicitResult."""
        self._say(f"\n{self._who()}The server asks: {clean_text(data.get('message'))}")
        try:
            fields = form_fields(data.get("requestedSchema"))
        except SchemaUnsupported as exc:
            self._say(f"This form cannot be shown here ({exc}); declining.")
            return {"action": "decline"}
        self._say("  (type !cancel to cancel, !decline to decline)")
        content: dict[str, Any] = {}
        for f in fields:
            value = self._field(f)
            if value is not None:
                content[f.name] = value
        self._say("Answers:")
        for f in fields:
            if f.name in content:
                self._say(f"  {clean_text(f.label, 80)}: {content[f.name]!r}")
        if not self._yes("Send these answers to the server?"):
            return {"action": "decline"}
        return {"action": "accept", "content": content}

    def _describe(self, f: FormField) -> str:
        kind = {"multi": "choices, comma-separated", "enum": "choice"}.get(f.kind, f.kind)
        if f.format:
            kind += f", {f.format}"
        words = [kind, "required" if f.required else "optional"]
        default = ""
        if f.default is not None:
            shown = ",".join(f.default) if isinstance(f.default, list) else f.default
            shown = (
                {True: "yes", False: "no"}.get(shown, shown) if isinstance(shown, bool) else shown
            )
            default = f" [{clean_text(shown, 80)}]"
        return f"{clean_text(f.label, 80)} ({', '.join(words)}){default}: "

    def _field(self, f: FormField) -> Any:
        if f.description:
            self._say(f"  {clean_text(f.description, 400)}")
        for i, (value, label) in enumerate(f.choices, 1):
            self._say(
                f"    {i}. {clean_text(label, 80)}"
                + ("" if label == value else f" ({clean_text(value, 80)})")
            )
        for _ in range(self.max_attempts):
            answer = self._ask(self._describe(f))
            if not answer.strip():
                if f.default is not None:
                    return f.default
                if not f.required:
                    return None
                self._say("  This field is required.")
                continue
            try:
                return parse_answer(f, answer)
            except ValueError as exc:
                self._say(f"  Expected {exc}.")
        self._say(f"  No valid answer for {clean_text(f.label, 80)}.")
        raise _Ended("cancel")

    def url(self, request: URLRequest) -> str:
        """Show a URL request, open it only if asked, and wait for the person: the action."""
        self._say(
            f"\n{self._who()}The server asks you to open a link: {clean_text(request.message)}"
        )
        self._say(f"  URL:    {clean_text(request.url)}")
        self._say(f"  Domain: {clean_text(request.domain, 200)}")
        if not openable(request.url):
            self._say(
                "  This link is not https (or a local http address); it will not be opened here."
            )
        elif self._yes("Open it in your browser?"):
            self._open(request.url)
        answer = self._ask("When you are done there: finished (y), decline (n) or cancel (c)? [c] ")
        return {"y": "accept", "yes": "accept", "n": "decline", "no": "decline"}.get(
            answer.strip().lower(), "cancel"
        )

    def resolve(self, error: BaseException) -> bool:
        """For a -32042 error: show its URLs; True when the person finished every one
        (the caller may then call again; see ``url.retry_after_urls``)."""
        typed = url_required(error)
        requests = url_requests(typed) if isinstance(typed, URLElicitationRequired) else []
        if not requests:
            return False
        with _LOCK:
            try:
                return all(self.url(r) == "accept" for r in requests)
            except _Ended:
                return False
