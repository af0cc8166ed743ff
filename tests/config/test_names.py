"""Session names from command lines: the package or script behind the runner, not "node".

``mcpsync.config.command_name`` on many argv shapes, and through ``Session.connect``: the
session, its transport and the ``mcpsync.server.<name>`` stderr logger share the name.
"""

from __future__ import annotations

import logging
import sys
import threading

import pytest
from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.config import command_name
from mcpsync.protocol import choose


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        # node and friends: the package folder above dist/ build/ src/, or the script
        (["node", "/home/u/servers/weather/dist/index.js"], "weather"),
        (["node", "/x/node_modules/@acme/mcp-tickets/build/index.js"], "mcp-tickets"),
        (["/usr/local/bin/node", "--enable-source-maps", "./build/server.js"], "server"),
        (["node", "-r", "dotenv/config", "weather.js"], "weather"),
        (["node", "--import=tsx", "src/github-server.ts"], "github-server"),
        (["C:\\Program Files\\nodejs\\node.exe", "C:\\mcp\\notes\\dist\\index.js"], "notes"),
        (["tsx", "src/index.ts"], "index"),
        (["deno", "run", "-A", "jsr:@x/y/main.ts"], "y"),
        (["bun", "run", "/srv/slack-mcp/index.ts"], "slack-mcp"),
        # npx and other package runners: the package, scope and version dropped
        (["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"], "server-filesystem"),
        (["npx", "--yes", "@upstash/context7-mcp@latest"], "context7-mcp"),
        (["npx", "mcp-remote", "https://example.com/mcp"], "mcp-remote"),
        (["npx", "-p", "@acme/tools", "acme-mcp"], "acme-mcp"),
        (["npx.cmd", "-y", "tavily-mcp@0.1.4"], "tavily-mcp"),
        (["cmd", "/c", "npx", "-y", "@scope/pkg"], "pkg"),
        (["pnpm", "dlx", "@scope/pkg"], "pkg"),
        (["npm", "exec", "--", "some-server", "--flag"], "some-server"),
        (["yarn", "dlx", "pkg@2"], "pkg"),
        (["bunx", "pkg"], "pkg"),
        # uvx / uv / pipx
        (["uvx", "mcp-server-git", "--repository", "."], "mcp-server-git"),
        (["uvx", "mcp-server-fetch==2025.1.1"], "mcp-server-fetch"),
        (["uvx", "--from", "git+https://github.com/org/awesome-mcp.git", "awesome"], "awesome"),
        (["uvx", "--python", "3.12", "pkg[extra]"], "pkg"),
        (["uv", "tool", "run", "mcp-obsidian"], "mcp-obsidian"),
        (["uv", "--directory", "/home/u/weather", "run", "weather.py"], "weather"),
        (["uv", "--directory", "/home/u/weather", "run", "server.py"], "weather"),
        (["uv", "run", "--with", "mcp", "python", "-m", "notes_mcp"], "notes_mcp"),
        (["uv", "run", "mcp-server-time"], "mcp-server-time"),
        (["pipx", "run", "mcp-server-sqlite"], "mcp-server-sqlite"),
        # python
        (["python", "-m", "weather_mcp"], "weather_mcp"),
        (["python3", "-u", "-m", "acme.mcp.server"], "acme"),
        (["/usr/bin/python3.12", "-m", "mcpsync.demo_server"], "demo_server"),
        (["python", "server.py"], "server"),
        (["python", "/home/u/projects/weather/server.py"], "weather"),
        (["python", "-X", "dev", "tools/calendar_server.py", "--port", "1"], "calendar_server"),
        (["py", "-3", "notes.py"], "notes"),
        ([sys.executable, "-c", "print(1)"], "python"),
        # containers: the image (or --name)
        (["docker", "run", "-i", "--rm", "-e", "TOKEN", "mcp/github"], "github"),
        (["docker", "run", "-i", "--rm", "ghcr.io/acme/mcp-jira:1.2"], "mcp-jira"),
        (["podman", "run", "--name", "files", "-i", "img"], "files"),
        # plain programs
        (["mcp-server-fetch"], "mcp-server-fetch"),
        (["/opt/bin/github-mcp-server", "stdio"], "github-mcp-server"),
        (["node"], "node"),
        (["npx"], "npx"),
    ],
)
def test_command_name(argv, name):
    assert command_name(argv) == name


# -- through Session.connect --------------------------------------------------------------------


class _Seen(logging.Handler):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.names: list[str] = []
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.names.append(record.name)
            self.event.set()


@pytest.fixture(autouse=True)
def _fresh_verdicts():
    choose.VERDICTS.forget()
    yield
    choose.VERDICTS.forget()


def test_a_stdio_session_is_named_after_its_script(no_leaks):
    seen = _Seen("hello from stderr")
    logger = logging.getLogger("mcpsync.server")
    logger.addHandler(seen)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        script = str(SERVERS_DIR / "bringup_server.py")
        with mcpsync.Session.connect(
            [sys.executable, script, "--stderr", "hello from stderr"]
        ) as s:
            assert s.name == "bringup_server"
            assert s.transport.name == "bringup_server"
            assert "bringup_server" in repr(s)
            assert seen.event.wait(10), "the server's stderr line was not logged"
    finally:
        logger.removeHandler(seen)
        logger.setLevel(old_level)
    assert seen.names == ["mcpsync.server.bringup_server"]


def test_the_given_name_wins(no_leaks):
    script = str(SERVERS_DIR / "bringup_server.py")
    with mcpsync.Session.connect([sys.executable, script], name="weather") as s:
        assert s.name == "weather" and s.transport.name == "weather"
