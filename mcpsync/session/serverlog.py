"""A server's own words routed to Python ``logging``: its log messages and its stderr at start.

Owns: the MCP (syslog) level -> Python level table, and ``ServerLog``: one session's
``mcpsync.server.<name>`` logger with at most ``MAX_SERVER_LOGGERS`` child loggers for
the server-chosen ``logger`` names (a ``logging.Logger`` lives as long as the process);
past the bound a message logs under the session's logger with the name in the text and
in ``extra['mcp_logger']``.

And ``notice_startup_stderr``: what a stdio server wrote to its stderr while it was
brought up. Each line is logged at INFO as it comes (``mcpsync.server.<name>``: the CLI
shows those); a script that configured no logging sees none of them, so a server that
says something is wrong and still answers (a usage message, "must be provided", a
traceback) would connect silently. When such words are there (``looks_like_trouble``)
and logging would not show the lines, they are logged once more, together, at WARNING on
the same logger: Python's last-resort handler prints them on stderr with no set-up,
a configured logging routes them like any warning, and ``-q`` / a level above WARNING
silences them. Once per process per server name and text. A server that writes only a
banner ("... running on stdio") stays quiet.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = [
    "LOG_LEVELS",
    "MAX_SERVER_LOGGERS",
    "ServerLog",
    "notice_startup_stderr",
    "looks_like_trouble",
]

#: Python logging levels for MCP (syslog) levels.
LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

#: child loggers per session for server-chosen `logger` names (logging never frees a Logger)
MAX_SERVER_LOGGERS = 16


class ServerLog:
    """Where one session's server log messages go."""

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(f"mcpsync.server.{name}")
        self._children: dict[str, logging.Logger] = {}

    def route(self, params: dict[str, Any]) -> None:
        level = LOG_LEVELS.get(params.get("level", "info"), logging.INFO)
        logger, data, name = self.logger, params.get("data"), params.get("logger")
        if name:
            name = str(name)[:100]
            child = self._children.get(name)
            if child is None and len(self._children) < MAX_SERVER_LOGGERS:
                child = self._children[name] = self.logger.getChild(name)
            if child is not None:
                logger = child
            else:  # over the bound: the session's logger, the name in the text and `extra`
                data = f"[{name}] {data}"
        logger.log(level, "%s", data, extra={"mcp_logger": name})


#: words that make a server's stderr at start worth a warning (a usage message, an error)
_TROUBLE = re.compile(
    r"\b(usage|errors?|warn(ing)?s?|fatal|exception|traceback|fail(s|ed|ure)?|missing|"
    r"invalid|denied|refused|not (set|found|allowed|provided|configured)|no such|must|"
    r"cannot|can't|unable|deprecated|required)\b",
    re.IGNORECASE,
)
#: (server name, text) already noticed in this process (bounded)
_NOTICED: set[tuple[str, str]] = set()
_MAX_NOTICED = 1024
#: lines of the stderr tail a notice shows at most (the last ones)
NOTICE_LINES = 20


def looks_like_trouble(text: str) -> bool:
    """True when a server's stderr text has words that say something is wrong."""
    return _TROUBLE.search(text) is not None


def notice_startup_stderr(name: str, tail: str) -> bool:
    """Log ``tail`` (what the server wrote to stderr while it was brought up) at WARNING
    when it looks like trouble and logging would not show its lines (see the module
    docstring); True if it was logged."""
    logger = logging.getLogger(f"mcpsync.server.{name}")
    if not tail or not looks_like_trouble(tail):
        return False
    if logger.isEnabledFor(logging.INFO) and logger.hasHandlers():
        return False  # every line was shown as it came
    key = (name, tail)
    if key in _NOTICED or not logger.isEnabledFor(logging.WARNING):
        return False
    if len(_NOTICED) >= _MAX_NOTICED:
        _NOTICED.clear()
    _NOTICED.add(key)
    lines = tail.splitlines()[-NOTICE_LINES:]
    logger.warning(
        "mcpsync: server %r wrote to stderr while starting (session.stderr_tail has it):\n%s",
        name,
        "\n".join(f"  {line}" for line in lines),
    )
    return True
