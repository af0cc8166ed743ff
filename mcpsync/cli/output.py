"""Where the ``mcpsync`` command writes: stdout (text or ``-o json``), stderr (progress,
errors), and the logging set-up that shows server stderr lines as ``[name] line``.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from typing import IO, Any

from .arguments import PROG

__all__ = ["SERVER_LOGGER"]


class _Out:
    """Where output goes; knows the format and whether stderr chatter is wanted."""

    def __init__(self, ns: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> None:
        self.json = ns.output == "json" or bool(getattr(ns, "json_output", False))
        self.quiet = ns.quiet
        self.stdout = stdout
        self.stderr = stderr

    def print(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def emit_json(self, value: Any) -> None:
        self.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")

    def note(self, text: str) -> None:
        if not self.quiet:
            self.stderr.write(text + "\n")
            self.stderr.flush()

    def on_log(self, name: str) -> Callable[[Any], None]:
        def log_line(params: Any) -> None:
            data = params.data
            text = (
                data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
            )
            logger = f"/{params.logger}" if params.logger else ""
            self.note(f"[{name}{logger}] {params.level}: {text}")

        return log_line


def _dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


# --------------------------------------------------------------------------- main


SERVER_LOGGER = "mcpsync.server"


class _CLIFormatter(logging.Formatter):
    """A server's stderr (logger ``mcpsync.server.<name>``) as ``[<name>] line``; mcpsync's own
    records as ``mcpsync: LEVEL: message``."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name.startswith(SERVER_LOGGER + "."):
            return f"[{record.name[len(SERVER_LOGGER) + 1 :]}] {record.getMessage()}"
        return f"{PROG}: {record.levelname}: {record.getMessage()}"


def _setup_logging(verbose: bool, quiet: bool, stderr: IO[str]) -> None:
    """mcpsync's log to ``stderr``: warnings (everything with -v), and what servers print on
    their stderr (unless -q)."""
    logger = logging.getLogger("mcpsync")
    for old in [h for h in logger.handlers if getattr(h, "_mcpsync_cli", False)]:
        logger.removeHandler(old)  # main() run again in this process (tests): the new stderr
    handler = logging.StreamHandler(stderr)
    handler._mcpsync_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(_CLIFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False
    # a server's stderr is logged at INFO: shown by default, silenced by -q
    logging.getLogger(SERVER_LOGGER).setLevel(
        logging.CRITICAL + 1 if quiet else (logging.DEBUG if verbose else logging.INFO)
    )
