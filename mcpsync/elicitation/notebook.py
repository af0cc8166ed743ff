"""Elicitation answered in a Jupyter notebook: an ipywidgets form built from the schema.

Owns: ``ElicitationForm`` (the widgets of one form or URL request: a field widget per
property — text, number, whole number, yes/no, a choice, several choices —, required
marks and defaults, an error line per field, Submit / Decline / Cancel; ``result`` and
``wait``) and ``NotebookElicitation`` (the handler: shows a form in the output, blocks the
server's request until the person submits, declines or cancels, or ``timeout`` passes,
which cancels). A URL request shows its message, link and domain and opens nothing: the
person clicks the link (``https:`` / loopback only) and then "Done". Nothing is accepted
until Submit passes every check. ``ipywidgets`` (the ``notebook`` extra, also in
``notebooks``) is checked when the handler is made, so a missing one is a ``ConfigError`` in
the caller's cell, not an error on the handler thread that leaves the person no form.

The handler runs on a Session handler thread and waits there; the notebook must be free
to deliver the clicks, so call a tool that elicits with ``submit_call_tool`` (the cell
ends, the form answers, the future resolves), not a blocking ``call_tool`` in the cell.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import Any

from .schema import (
    FormField,
    SchemaUnsupported,
    check_content,
    form_fields,
    params_dict,
    parse_answer,
)
from .url import URLRequest, clean_text, openable

__all__ = ["ElicitationForm", "NotebookElicitation"]


def _widgets() -> Any:
    try:
        import ipywidgets
    except ImportError as exc:
        from ..errors import ConfigError

        raise ConfigError(
            "the notebook elicitation form needs ipywidgets: pip install 'mcpsync[notebook]'"
            f" (or 'mcpsync[notebooks]'); importing it failed: {exc}"
        ) from exc
    return ipywidgets


class ElicitationForm:
    """The widgets for one elicitation; ``widget`` is what to display."""

    def __init__(self, params: Any, *, server: str = "") -> None:
        w = _widgets()
        data = params_dict(params)
        self.mode = "url" if data.get("mode") == "url" else "form"
        self.result: dict[str, Any] | None = None
        self._done = threading.Event()
        self.fields: list[FormField] = []
        self.inputs: dict[str, Any] = {}
        self.errors: dict[str, Any] = {}
        who = (
            f"<b>{html.escape(clean_text(server, 80))}</b> asks: "
            if server
            else "The server asks: "
        )
        header = w.HTML(f"<p>{who}{html.escape(clean_text(data.get('message')))}</p>")
        rows: list[Any] = [header]
        if self.mode == "url":
            request = URLRequest.of(data)
            self.url = request
            rows.append(w.HTML(self._link_html(request)))
            self.submit_button = w.Button(description="Done", button_style="success")
        else:
            try:
                self.fields = form_fields(data.get("requestedSchema"))
            except SchemaUnsupported as exc:
                rows.append(w.HTML(f"<p>This form cannot be shown: {html.escape(str(exc))}</p>"))
            for f in self.fields:
                rows.extend(self._field_rows(w, f))
            self.submit_button = w.Button(description="Submit", button_style="primary",
                                          disabled=not self.fields and bool(data.get("requestedSchema")))  # fmt: skip
        self.decline_button = w.Button(description="Decline")
        self.cancel_button = w.Button(description="Cancel")
        self.status = w.HTML("")
        self.submit_button.on_click(lambda _b: self.submit())
        self.decline_button.on_click(lambda _b: self._finish({"action": "decline"}, "Declined."))
        self.cancel_button.on_click(lambda _b: self._finish({"action": "cancel"}, "Cancelled."))
        buttons = w.HBox([self.submit_button, self.decline_button, self.cancel_button])
        self.widget = w.VBox([*rows, buttons, self.status])

    @staticmethod
    def _link_html(request: URLRequest) -> str:
        url = html.escape(clean_text(request.url), quote=True)
        domain = html.escape(clean_text(request.domain, 200))
        if openable(request.url):
            link = f'<a href="{url}" target="_blank" rel="noopener noreferrer">{url}</a>'
        else:
            link = f"<code>{url}</code> (not https: not linked)"
        return f"<p>Link: {link}<br>Domain: <b>{domain}</b></p><p>Open it, finish there, then press Done.</p>"

    def _field_rows(self, w: Any, f: FormField) -> list[Any]:
        label = html.escape(clean_text(f.label, 80)) + (" <b>*</b>" if f.required else "")
        default = f.default
        if f.kind == "boolean" and (default is not None or f.required):
            box = w.Checkbox(value=bool(default), indent=False)
        elif f.kind == "boolean":
            box = w.Dropdown(options=[("—", None), ("Yes", True), ("No", False)], value=None)
        elif f.kind == "enum":
            options: list[tuple[str, str | None]] = [
                (clean_text(lbl, 80), v) for v, lbl in f.choices
            ]
            if default is None:
                options.insert(0, ("— choose —", None))
            box = w.Dropdown(options=options, value=default if default is not None else None)
        elif f.kind == "multi":
            options = [(clean_text(lbl, 80), v) for v, lbl in f.choices]
            box = w.SelectMultiple(options=options, value=tuple(default or ()))
        else:
            placeholder = clean_text(f.description, 120) or f.kind
            box = w.Text(value="" if default is None else str(default), placeholder=placeholder)
        self.inputs[f.name] = box
        self.errors[f.name] = w.HTML("")
        rows = [w.HTML(f"<div>{label}</div>"), box]
        if f.description:
            rows.append(w.HTML(f"<small>{html.escape(clean_text(f.description, 400))}</small>"))
        rows.append(self.errors[f.name])
        return rows

    # -- answering ---------------------------------------------------------------------------

    def values(self) -> tuple[dict[str, Any], dict[str, str]]:
        """(content, problems) from the widgets as they are now."""
        content: dict[str, Any] = {}
        problems: dict[str, str] = {}
        for f in self.fields:
            raw = self.inputs[f.name].value
            if f.kind == "multi":
                raw = list(raw)
                if raw:
                    content[f.name] = raw
                continue
            if raw is None or raw == "":
                continue
            if isinstance(raw, str):
                try:
                    content[f.name] = parse_answer(f, raw)
                except ValueError as exc:
                    problems[f.name] = f"expected {exc}"
            else:
                content[f.name] = raw
        for name, problem in check_content(self.fields, content).items():
            problems.setdefault(name, problem)
        return content, problems

    def submit(self) -> bool:
        """Submit as filled in; False (and the problems shown) when a field does not fit."""
        if self.mode == "url":
            return self._finish({"action": "accept"}, "Done.")
        content, problems = self.values()
        for f in self.fields:
            self.errors[f.name].value = (
                f"<span style='color:#b00'>{html.escape(problems[f.name])}</span>"
                if f.name in problems else ""
            )  # fmt: skip
        if problems:
            self.status.value = "<span style='color:#b00'>Please correct the fields marked.</span>"
            return False
        return self._finish({"action": "accept", "content": content}, "Sent.")

    def _finish(self, result: dict[str, Any], words: str) -> bool:
        if self._done.is_set():
            return False
        self.result = result
        self._done.set()
        for box in [
            *self.inputs.values(),
            self.submit_button,
            self.decline_button,
            self.cancel_button,
        ]:
            box.disabled = True
        self.status.value = html.escape(words)
        return True

    def wait(self, timeout: float | None) -> dict[str, Any]:
        """Block until answered; ``{"action": "cancel"}`` if ``timeout`` passes first."""
        if not self._done.wait(timeout):
            self._finish({"action": "cancel"}, "No answer in time: cancelled.")
        assert self.result is not None
        return self.result


class NotebookElicitation:
    """An elicitation handler that shows an ipywidgets form in the notebook and waits.

    ``timeout``: seconds to wait for the person (then the request is cancelled);
    ``display``: how to show the widget (default ``IPython.display.display``);
    ``on_form``: called with each ``ElicitationForm`` as it is shown (tests, logging).
    Raises ``ConfigError`` (naming the extra) when ipywidgets cannot be imported.
    """

    def __init__(
        self,
        *,
        timeout: float | None = 600.0,
        display: Callable[[Any], Any] | None = None,
        on_form: Callable[[ElicitationForm], Any] | None = None,
        server: str = "",
    ) -> None:
        _widgets()  # here, in the caller's thread: later it would fail on a handler thread
        self.timeout = timeout
        self._display = display
        self._on_form = on_form
        self.server = server

    def __call__(self, params: Any) -> dict[str, Any]:
        form = ElicitationForm(params, server=self.server)
        if self._display is not None:
            self._display(form.widget)
        else:
            from IPython.display import display

            display(form.widget)
        if self._on_form is not None:
            self._on_form(form)
        return form.wait(self.timeout)
