"""Server log messages (``notifications/message``) routed to Python ``logging``.

Owns: the MCP (syslog) level -> Python level table, and ``ServerLog``: one session's
``mcpsync.server.<name>`` logger with at most ``MAX_SERVER_LOGGERS`` child loggers for
the server-chosen ``logger`` names (a ``logging.Logger`` lives as long as the process);
past the bound a message logs under the session's logger with the name in the text and
in ``extra['mcp_logger']``.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["LOG_LEVELS", "MAX_SERVER_LOGGERS", "ServerLog"]

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
