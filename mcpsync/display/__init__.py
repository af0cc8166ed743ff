"""Showing MCP things to people: plain-text tables for the terminal, HTML/Markdown for notebooks.

Owns: turning tools, resources, prompts, tool results, resource contents, prompt results,
host status rows and errors into rows, text tables and notebook renderings, plus a progress
bar that draws in a notebook (via ``IPython.display`` handles, when IPython is importable)
or as text. IPython stays optional: it is imported lazily, only by the progress bar.

Notebook use::

    from mcpsync import display
    display.tools_table(session.list_tools())      # renders as a table in Jupyter
    display.result(session.call_tool("add", {"a": 1, "b": 2}))
    session.call_tool("long_running", {}, on_progress=display.progress_bar("long_running"))

Every ``display.*`` renderer returns a :class:`Rendered` object: Jupyter calls its
``_repr_html_`` / ``_repr_markdown_``; ``str()`` gives the plain-text form; ``.html``
is the HTML string. HTML output escapes everything the server sent.

The package: ``rows`` (tools, resources, prompts, status as rows; text tables),
``content`` (result and content parts as text), ``render`` (:class:`Rendered`: HTML and
Markdown for notebooks, the ``*_table``, ``result`` and ``error`` renderers),
``progress`` (text and notebook progress bars), ``icons`` (server icons, checked: data
images inline, https ones as links unless fetched on request). Every public name is
importable from here.
"""

from __future__ import annotations

from .content import content_items, result_text
from .icons import MAX_ICON_BYTES, Icon, best_icon, fetch_icon, icon_html, icon_text, safe_icons
from .progress import ProgressBar, TextProgress, progress_bar
from .render import (
    Rendered,
    error,
    prompts_table,
    resources_table,
    result,
    status_table,
    templates_table,
    tools_table,
)
from .rows import (
    format_table,
    prompt_rows,
    resource_rows,
    schema_arguments,
    status_rows,
    template_rows,
    tool_rows,
)

__all__ = [
    "Icon",
    "MAX_ICON_BYTES",
    "best_icon",
    "fetch_icon",
    "icon_html",
    "icon_text",
    "safe_icons",
    "Rendered",
    "schema_arguments",
    "tool_rows",
    "resource_rows",
    "template_rows",
    "prompt_rows",
    "status_rows",
    "content_items",
    "format_table",
    "result_text",
    "tools_table",
    "resources_table",
    "templates_table",
    "prompts_table",
    "status_table",
    "result",
    "error",
    "progress_bar",
    "ProgressBar",
    "TextProgress",
]
