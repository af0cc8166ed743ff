"""A server's own words reach the user.

The case: npm ``@modelcontextprotocol/server-filesystem`` started without its directory
prints a usage message on stderr and still answers; a script connected "fine" and its
user never saw why nothing worked (the lines went to ``logging`` at INFO only). Here a
plain script runs in a fresh interpreter, with no logging set up, and the test reads
what its user sees on the terminal (its stderr): the usage message, once, and nothing
for a server that prints only a banner. ``Session.stderr_tail`` has the lines; logging
set up to show INFO shows each line once (no second copy); the errors of a bring-up or
a call that fails carry the server's last lines.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from servers.launch import SERVERS_DIR, faulty_argv

import mcpsync
from mcpsync.protocol.choose import Caches

SERVER = str(SERVERS_DIR / "startup_fault_server.py")

USAGE = (
    "Usage: mcp-server-filesystem [allowed-directory] [additional-directories...]\\n"
    "Note: Allowed directories can be provided via command-line arguments or MCP roots\\n"
    "At least one directory must be provided by EITHER method for the server to operate."
)
BANNER = "Secure MCP Filesystem Server running on stdio"


def run_script(body: str, *server_flags: str) -> subprocess.CompletedProcess[str]:
    """A plain user script (no logging set-up) connecting to the fault server."""
    argv = [sys.executable, SERVER, *server_flags]
    script = (
        "import sys, mcpsync\n"
        f"argv = {argv!r}\n"
        "with mcpsync.Session.connect(argv) as s:\n"
        "    print(s.call_tool('echo', {'message': 'answered'}).content[0].text)\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )


def test_a_usage_message_at_start_reaches_a_script_user():
    done = run_script("", "--stderr", USAGE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "answered"  # the server still answers...
    # ...and what it said is on the user's terminal, once, naming the server
    assert "Usage: mcp-server-filesystem [allowed-directory]" in done.stderr
    assert "At least one directory must be provided" in done.stderr
    assert done.stderr.count("Usage: mcp-server-filesystem") == 1
    assert "startup_fault_server" in done.stderr and "stderr_tail" in done.stderr


def test_a_banner_alone_stays_quiet():
    done = run_script("", "--stderr", BANNER)
    assert done.returncode == 0 and done.stdout.strip() == "answered"
    assert done.stderr == ""


def test_connecting_twice_notices_once():
    body = "with mcpsync.Session.connect(argv) as again:\n    pass"
    done = run_script(body, "--stderr", USAGE)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Usage: mcp-server-filesystem") == 1


def test_logging_that_shows_the_lines_gets_no_second_copy():
    argv = [sys.executable, SERVER, "--stderr", USAGE]
    script = (
        "import logging, mcpsync\n"
        "logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')\n"
        f"with mcpsync.Session.connect({argv!r}) as s:\n"
        "    s.ping()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Usage: mcp-server-filesystem") == 1
    assert "mcpsync.server.startup_fault_server INFO Usage:" in done.stderr


def test_the_cli_shows_each_line_once_and_q_silences_them():
    argv = [sys.executable, SERVER, "--stderr", USAGE]
    shown = subprocess.run(
        [sys.executable, "-m", "mcpsync", "tools", "--", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.count("Usage: mcp-server-filesystem") == 1
    assert "[startup_fault_server] Usage:" in shown.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "mcpsync", "tools", "-q", "--", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert quiet.returncode == 0 and "Usage" not in quiet.stderr, quiet.stderr


def test_session_stderr_tail_has_the_lines(no_leaks):
    argv = [sys.executable, SERVER, "--stderr", USAGE]
    with mcpsync.Session.connect(argv, _caches=Caches()) as s:
        assert s.stderr_tail.splitlines() == USAGE.split("\\n")
    with mcpsync.Session.connect([sys.executable, SERVER], _caches=Caches()) as s:
        assert s.stderr_tail == ""


def test_a_server_exiting_at_start_says_why(no_leaks):
    with pytest.raises(mcpsync.ServerExited) as info:
        mcpsync.Session.connect(faulty_argv("--exit-before-init"), _caches=Caches())
    assert info.value.stderr_tail and info.value.stderr_tail in str(info.value)


def test_a_call_that_kills_the_server_carries_its_last_words(no_leaks):
    with mcpsync.Session.connect(faulty_argv("--crash-on-call", "echo"), _caches=Caches()) as s:
        with pytest.raises(mcpsync.ServerExited) as info:
            s.call_tool("echo", {"message": "boom"})
    assert info.value.stderr_tail and info.value.stderr_tail in str(info.value)


def test_a_silent_server_s_timeout_carries_what_it_printed(no_leaks):
    argv = [sys.executable, SERVER, "--silent", "--stderr", "error: cannot reach the database"]
    with pytest.raises(mcpsync.RequestTimeout) as info:
        mcpsync.Session.connect(argv, connect_timeout=1.5, _caches=Caches())
    assert "error: cannot reach the database" in str(info.value)


def test_a_call_that_times_out_carries_what_the_server_printed(no_leaks):
    """A stdio server that says why it is stuck (on stderr) and never answers: the call's
    ``RequestTimeout`` has those words, and the session still answers afterwards."""
    argv = [sys.executable, str(SERVERS_DIR / "stall_server.py")]
    with mcpsync.Session.connect(argv, _caches=Caches()) as s:
        with pytest.raises(mcpsync.RequestTimeout) as info:
            s.call_tool("hang", {}, timeout=0.5)
        assert "no response within 0.5 s" in str(info.value)
        assert "--- last stderr lines ---\n" in str(info.value)
        assert "got tools/call" in str(info.value)  # what the server wrote about this call
        assert s.call_tool("echo", {"message": "still here"}).content[0].text == "still here"


def test_a_write_the_server_does_not_read_carries_what_it_printed(no_leaks):
    """A stdio server that stops reading its stdin (and says so on stderr): the timeout of
    a call whose request it does not take has its words."""
    argv = [sys.executable, str(SERVERS_DIR / "pause_reading_server.py")]
    with mcpsync.Session.connect(argv, era="legacy", _caches=Caches()) as s:
        assert s.call_tool("pause", {"seconds": 3}, timeout=5).content[0].text == "paused"
        with pytest.raises(mcpsync.RequestTimeout) as info:
            s.call_tool("echo", {"message": "x" * 4_000_000}, timeout=0.5)
        assert "--- last stderr lines ---\npausing: not reading stdin for 3 s" in str(info.value)


def test_the_words_that_count_as_trouble():
    from mcpsync.session.serverlog import looks_like_trouble

    for text in (USAGE, "Error: ENOENT", "WARNING: no API key", "Traceback (most recent",
                 "OPENAI_API_KEY not set", "failed to load config"):  # fmt: skip
        assert looks_like_trouble(text.replace("\\n", "\n")), text
    for text in (BANNER, "Starting default (STDIO) server...", "weather v1.2 ready",
                 json.dumps({"level": "info", "msg": "listening"})):  # fmt: skip
        assert not looks_like_trouble(text), text
