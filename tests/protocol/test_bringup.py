"""Bring-up as a new user meets it, over stdio against tests/servers/bringup_server.py.

``connect_timeout`` bounds the whole bring-up (probe, initialize, restarts); a slow
starter pays no fixed probe cost and leaves no "unknown request id" behind; a server
that exits on its own is started once and the error says why; what it printed on
stdout is quoted; ``reset_timeout_on_progress`` works without ``on_progress``.
"""

from __future__ import annotations

import http.server
import logging
import sys
import threading
import time

import pytest
from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.errors import RequestTimeout, ServerExited
from mcpsync.protocol import choose

pytestmark = pytest.mark.real


def argv(*flags: str) -> list[str]:
    return [sys.executable, str(SERVERS_DIR / "bringup_server.py"), *flags]


@pytest.fixture(autouse=True)
def _fresh_verdicts():
    choose.VERDICTS.forget()
    yield
    choose.VERDICTS.forget()


def unknown_ids(caplog: pytest.LogCaptureFixture, session: mcpsync.Session | None = None) -> list:
    found = [r.getMessage() for r in caplog.records if "unknown request id" in r.getMessage()]
    if session is not None:
        found += [str(e) for e in session.connection.protocol_errors if "unknown" in str(e)]
    return found


def test_connect_timeout_bounds_the_whole_bring_up(no_leaks):
    started = time.monotonic()
    with pytest.raises(RequestTimeout) as info:
        mcpsync.Session.connect(argv("--silent"), connect_timeout=3)
    elapsed = time.monotonic() - started
    assert elapsed <= 3 + 1, f"connect_timeout=3 took {elapsed:.1f} s"
    assert "connect_timeout=3 s" in str(info.value)
    assert "server/discover or initialize" in str(info.value)


def test_a_slow_starter_pays_no_fixed_probe_cost(no_leaks, caplog):
    caplog.set_level(logging.WARNING, logger="mcpsync")
    started = time.monotonic()
    with mcpsync.Session.connect(argv("--start-delay", "4"), connect_timeout=30) as s:
        elapsed = time.monotonic() - started
        assert s.era == "legacy" and "-32601" in s.era_reason
        assert s.call_tool("echo", {"message": "up"}).content[0].text == "up"
    assert elapsed < 4 + 2, f"a 4 s starter took {elapsed:.1f} s"
    assert not unknown_ids(caplog)


def test_initialize_goes_out_beside_an_unanswered_probe(no_leaks, caplog, monkeypatch):
    # The starter outlasts the probe's patience: initialize is sent while the probe is
    # still unanswered; the server then answers both, in order, without a warning.
    caplog.set_level(logging.WARNING, logger="mcpsync")
    monkeypatch.setattr(choose, "DEFAULT_PROBE_TIMEOUT", 1.0)
    started = time.monotonic()
    with mcpsync.Session.connect(argv("--start-delay", "4"), connect_timeout=30) as s:
        elapsed = time.monotonic() - started
        assert s.era == "legacy"
        assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
        assert not unknown_ids(caplog, s)
    assert elapsed < 4 + 2, f"a 4 s starter took {elapsed:.1f} s"


def test_the_late_answer_to_an_abandoned_probe_is_dropped_quietly(no_leaks, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="mcpsync")
    monkeypatch.setattr(choose, "DEFAULT_PROBE_TIMEOUT", 0.5)
    with mcpsync.Session.connect(argv("--late-probe", "1.5"), connect_timeout=30) as s:
        # answered only after the late probe answer was written: it has been read by now
        assert s.call_tool("after_late_probe", timeout=30).content[0].text == "after"
        assert not unknown_ids(caplog, s)
        assert s.era == "legacy"
        assert "no answer to server/discover within 0.5 s, but to initialize" in s.era_reason


def test_a_server_that_exits_on_its_own_is_started_once(no_leaks, tmp_path):
    count = tmp_path / "starts"
    flags = ("--count", str(count), "--exit-at-start", "2", "--stderr", "fatal: missing API_KEY")
    with pytest.raises(ServerExited) as info:
        mcpsync.Session.connect(argv(*flags), connect_timeout=30)
    assert count.read_text().splitlines() == ["started"]
    assert info.value.exit_code == 2
    assert "exit code 2" in str(info.value)
    assert "fatal: missing API_KEY" in str(info.value)


def test_an_exit_at_start_up_reads_the_same_whichever_pipe_notices_it(no_leaks, tmp_path):
    # The first write can find stdin broken before the reader sees stdout end (or not):
    # the error must not depend on that race (smoke reports compare it across executors).
    flags = ("--exit-at-start", "2", "--stderr", "fatal: missing API_KEY")
    messages = set()
    for _ in range(6):
        with pytest.raises(ServerExited) as info:
            mcpsync.Session.connect(argv(*flags), connect_timeout=30)
        messages.add(str(info.value).splitlines()[0])
    assert len(messages) == 1, messages
    assert "(exit code 2)" in messages.pop()


BANNER = "Starting weather server on port 8000..."


def test_what_the_server_printed_on_stdout_is_quoted_in_the_error(no_leaks):
    with pytest.raises(RequestTimeout) as info:
        mcpsync.Session.connect(argv("--banner", BANNER, "--silent"), connect_timeout=2)
    assert BANNER in str(info.value)
    assert "not JSON-RPC" in str(info.value)


def test_a_banner_before_an_exit_is_quoted_with_the_exit_code(no_leaks):
    flags = ("--banner", BANNER, "--exit-at-start", "3", "--stderr", "port 8000 in use")
    with pytest.raises(ServerExited) as info:
        mcpsync.Session.connect(argv(*flags), connect_timeout=30)
    text = str(info.value)
    assert BANNER in text and "port 8000 in use" in text and "exit code 3" in text


# -- timeouts of a call ---------------------------------------------------------------------


def test_reset_timeout_on_progress_without_an_on_progress_callback(no_leaks):
    slow = {"seconds": 3, "every": 0.25}
    with mcpsync.Session.connect(argv(), timeout=30) as s:
        # 3 s of work, a 1.5 s timeout that each progress report restarts
        result = s.call_tool("slow", slow, timeout=1.5, reset_timeout_on_progress=True)
        assert result.content[0].text == "done"
        future = s.submit_call_tool("slow", slow, timeout=1.5, reset_timeout_on_progress=True)
        assert future.result(timeout=30).content[0].text == "done"
        # the same call without the reset times out: the progress reports are what kept it alive
        with pytest.raises(RequestTimeout):
            s.call_tool("slow", slow, timeout=1.5)
        # max_timeout still caps the whole call
        with pytest.raises(RequestTimeout):
            s.call_tool("slow", slow, timeout=1.5, reset_timeout_on_progress=True, max_timeout=2)


def test_every_timeout_knob_is_documented():
    import inspect
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    api = (root / "docs" / "session-api.md").read_text()
    timeouts = (root / "docs" / "timeouts.md").read_text()  # the README's Timeouts section, moved
    knobs = set()
    for method in (
        "connect",
        "call_tool",
        "submit_call_tool",
        "read_resource",
        "get_prompt",
        "ping",
    ):
        params = inspect.signature(getattr(mcpsync.Session, method)).parameters
        knobs |= {p for p in params if "timeout" in p}
    knobs |= {p for p in inspect.signature(mcpsync.Host).parameters if "timeout" in p}
    assert {"connect_timeout", "timeout", "reset_timeout_on_progress", "max_timeout"} <= knobs
    for knob in sorted(knobs):
        assert f"`{knob}" in api, f"docs/session-api.md does not document {knob}"
        assert knob in timeouts, f"docs/timeouts.md does not mention {knob}"
    assert "shutdown_timeout" in api and "shutdown_timeout" in timeouts


# -- over HTTP: the legacy SSE fallback shares the deadline -----------------------------------


class _SlowNotFound(http.server.BaseHTTPRequestHandler):
    """POST: 404 after 1.2 s of work (so Streamable HTTP falls back); GET: an event stream
    that never names its endpoint."""

    stop: threading.Event

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.stop.wait(1.2)  # the server's own slowness, not synchronisation
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b": hello\n\n")
        self.wfile.flush()
        self.stop.wait(30)


def test_the_sse_fallback_shares_the_connect_deadline(no_leaks):
    stop = threading.Event()
    handler = type("Handler", (_SlowNotFound,), {"stop": stop})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    try:
        started = time.monotonic()
        with pytest.raises(mcpsync.MCPSyncError) as info:
            mcpsync.Session.connect(url, connect_timeout=3)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert elapsed <= 3 + 1, f"connect_timeout=3 took {elapsed:.1f} s ({info.value})"
