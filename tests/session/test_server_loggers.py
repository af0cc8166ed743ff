"""Server-chosen logger names (``notifications/message`` ``logger``) make a bounded number of
``logging.Logger`` objects; every message is still logged, with its name."""

from __future__ import annotations

import logging
import sys

from servers.launch import SERVERS_DIR

import mcpsync

HOSTILE = [sys.executable, str(SERVERS_DIR / "hostile_server.py")]


def test_server_chosen_logger_names_make_a_bounded_number_of_loggers(no_leaks):
    prefix = "mcpsync.server.loggers-test"
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(logging.WARNING)
    parent = logging.getLogger(prefix)
    parent.addHandler(handler)
    try:
        with mcpsync.Session.connect(HOSTILE, era="legacy", name="loggers-test") as s:
            assert s.call_tool("loggers", {"count": 20_000}, timeout=60).content[0].text == "logged"
    finally:
        parent.removeHandler(handler)
    made = [n for n in logging.Logger.manager.loggerDict if n.startswith(prefix + ".")]
    assert len(made) <= 16, f"{len(made)} Logger objects for server-chosen names"
    assert len(records) == 20_000  # every message still logged, its name kept
    assert {r.mcp_logger for r in records} == {f"name-{i}" for i in range(20_000)}
    assert records[-1].name == prefix and records[-1].getMessage() == "[name-19999] 19999"
