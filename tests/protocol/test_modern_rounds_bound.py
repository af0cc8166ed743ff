"""The 2026-07-28 era's own retry loops are bounded in count and, all together, by the
call's one timeout (issue 31, point 6: the stateless era has no session to expire, but a
call may go round: ``input_required`` rounds, a -32022 version retry, a -32020 re-list).

A scripted modern server in memory (``fakes.FakeServer``) answers ``tools/call`` with
``input_required`` and only a ``requestState`` for ever, each answer after a short pause.
Before: every round had a fresh timeout and the rounds backed off up to 1 s each, so a
``call_tool(timeout=1)`` ran ~6 s and ended with ``InputRequiredRoundsExceeded``; now
``RequestTimeout`` within the timeout + 0.5 s, on the blocking and the future path, and
the session goes on.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from test_modern_memory import connect, modern_fake, text_result

from mcpsync.errors import RequestTimeout

TIMEOUT = 1.0


def stalling_server(pause: float) -> Any:
    calls: list[dict[str, Any]] = []

    def call(message: dict[str, Any]) -> None:
        calls.append(message)
        if message["params"]["name"] == "quick":
            result = text_result("ok")
        else:
            time.sleep(pause)  # (the fake server's handler thread: the server being slow)
            result = {"resultType": "input_required", "requestState": f"s{len(calls)}"}
        try:
            server.reply(message["id"], result)
        except Exception:  # noqa: BLE001 - a late answer after the client closed: dropped
            pass

    server = modern_fake(handlers={"tools/call": call})
    server.calls = calls  # type: ignore[attr-defined]
    return server


@pytest.mark.parametrize("path", ["blocking", "future"])
def test_state_only_rounds_end_at_the_calls_timeout(path: str, no_leaks: None) -> None:
    server = stalling_server(0.05)
    with connect(server) as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout, match="input rounds and retries included"):
            if path == "blocking":
                s.call_tool("loop", timeout=TIMEOUT)
            else:
                s.submit_call_tool("loop", timeout=TIMEOUT).result(10)
        took = time.monotonic() - started
        rounds = len(server.calls)
        print(f"{path}: RequestTimeout after {took:.2f} s, {rounds} rounds")
        assert took <= TIMEOUT + 0.5
        assert 2 <= rounds <= 10
        assert s.call_tool("quick", timeout=TIMEOUT).content[0].text == "ok"


def test_a_slow_round_gets_only_what_is_left(no_leaks: None) -> None:
    """Rounds of 0.4 s: the third would end past the 1 s bound; it is cut at the bound."""
    server = stalling_server(0.4)
    with connect(server) as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            s.call_tool("loop", timeout=TIMEOUT)
        took = time.monotonic() - started
        print(f"slow rounds: RequestTimeout after {took:.2f} s, {len(server.calls)} rounds")
        assert took <= TIMEOUT + 0.5
