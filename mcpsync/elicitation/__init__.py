"""Elicitation people can answer: ready handlers for a terminal and a notebook, and URLs.

Owns: the public names. ``TerminalElicitation`` (a prompt per field, re-asked until it
fits; URL requests shown with their domain, opened only on "y"), ``NotebookElicitation``
(an ipywidgets form, blocking the server's request until submitted or cancelled),
``URLElicitationRequired`` / ``url_required`` / ``retry_after_urls`` (the 2025-11-25
-32042 error and the open-and-retry flow), the schema helpers in ``schema``. Nothing is
accepted by default. See README.md.

    handler = mcpsync.elicitation.TerminalElicitation()
    with mcpsync.Session.connect(argv, elicitation_handler=handler) as s:
        s.call_tool("book_table", {})
"""

from __future__ import annotations

from .notebook import ElicitationForm, NotebookElicitation
from .schema import FormField, SchemaUnsupported, check_content, form_fields, parse_answer
from .terminal import TerminalElicitation
from .url import (
    URL_ELICITATION_REQUIRED,
    URLElicitationRequired,
    URLRequest,
    clean_text,
    openable,
    retry_after_urls,
    url_requests,
    url_required,
)

__all__ = [
    "ElicitationForm",
    "FormField",
    "NotebookElicitation",
    "SchemaUnsupported",
    "TerminalElicitation",
    "URLElicitationRequired",
    "URLRequest",
    "URL_ELICITATION_REQUIRED",
    "check_content",
    "clean_text",
    "form_fields",
    "openable",
    "parse_answer",
    "retry_after_urls",
    "url_required",
    "url_requests",
]
