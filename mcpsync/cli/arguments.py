"""The ``mcpsync`` command line's words: exit codes, the top-level and per-command parsers,
the ``KEY=VALUE`` / header / JSON-object option parsers, and :class:`UsageError`.

Owns no I/O: parsing only. See ``mcpsync.cli`` for the package layout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .._version import __version__

__all__ = [
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_CONNECT",
    "EXIT_INTERRUPTED",
    "PROG",
    "DEMO_ARGV",
    "EPILOG",
    "UsageError",
    "ConnectFailed",
    "build_parser",
    "SMOKE_EPILOG",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONNECT = 3
EXIT_INTERRUPTED = 130

PROG = "mcpsync"
DEMO_ARGV = [sys.executable, "-m", "mcpsync.demo_server"]

EPILOG = """\
targets:
  URL                       http(s)://... (Streamable HTTP, legacy SSE fallback)
  -- COMMAND [ARG ...]      a stdio server, given last (never run through a shell)
  CONFIG:ENTRY              an entry of an mcp.json / claude_desktop_config.json file
  --config FILE ENTRY       the same, as an option
  CONFIG                    a config file with exactly one entry

examples (the first five run as written; the rest need Node or your own config):
  mcpsync demo
  mcpsync call echo message=hi -- python -m mcpsync.demo_server
  pid=$(python -m mcpsync.demo_server.http --port 8000 --detach)   # the demo server over HTTP
  mcpsync call http://127.0.0.1:8000/mcp add a=1 b=2
  kill $pid
  mcpsync inspect -- npx -y @modelcontextprotocol/server-everything stdio
  mcpsync tools ~/.cursor/mcp.json:github
  mcpsync smoke .vscode/mcp.json --input api-key=... --call echo --args '{"message": "hi"}'

exit codes: 0 ok, 1 server/tool error, 2 usage, 3 connect failure, 130 interrupted
"""


class UsageError(Exception):
    """Bad command line or config entry: exit 2."""


class ConnectFailed(Exception):
    """Bring-up failed: exit 3."""

    def __init__(self, label: str, error: BaseException) -> None:
        self.label = label
        self.error = error
        super().__init__(f"cannot connect to {label}: {error}")


# --------------------------------------------------------------------------- parser


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection")
    g.add_argument(
        "--config", metavar="FILE", help="read the target from this config file (then give ENTRY)"
    )
    g.add_argument(
        "--transport", choices=["auto", "stdio", "streamable-http", "sse"], help="force a transport"
    )
    g.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="extra HTTP header (repeatable)",
    )
    g.add_argument(
        "-e",
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for a stdio server (repeatable)",
    )
    g.add_argument("--cwd", metavar="DIR", help="working directory for a stdio server")
    g.add_argument(
        "--oauth",
        action="store_true",
        help="authorize with OAuth when an HTTP server answers 401 (entries with auth settings always do)",
    )
    g.add_argument(
        "--device",
        action="store_true",
        help="OAuth without a browser here: show a code to approve on another device (RFC 8628; implies --oauth)",
    )
    g.add_argument(
        "--no-store",
        action="store_true",
        help="keep OAuth tokens in memory only (default: a 0600 file in the user's cache directory)",
    )
    g.add_argument(
        "--keyring",
        action="store_true",
        help="keep OAuth tokens in the system keyring instead (needs: pip install 'mcpsync[keyring]')",
    )
    g.add_argument(
        "--cacert", metavar="FILE", help="CA bundle to verify HTTPS servers and their OAuth servers"
    )
    g.add_argument("--insecure", action="store_true", help="do not verify HTTPS certificates")
    g.add_argument("--cert", metavar="FILE", help="TLS client certificate (PEM; with its key)")
    g.add_argument("--key", metavar="FILE", help="the private key of --cert, when not in it")
    g.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="ID=VALUE",
        help="value for a VS Code ${input:ID} (repeatable)",
    )
    g.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="per-request timeout (default 60; 0 = none)",
    )
    g.add_argument(
        "--connect-timeout", type=float, metavar="SECONDS", help="bound on bring-up (default 30)"
    )
    g.add_argument(
        "--include-tools", action="append", metavar="GLOB", help="only these tools (repeatable)"
    )
    g.add_argument(
        "--exclude-tools", action="append", metavar="GLOB", help="hide these tools (repeatable)"
    )
    o = p.add_argument_group("output")
    o.add_argument(
        "-o",
        "--output",
        choices=["text", "json"],
        default="text",
        help="output format (default text)",
    )
    o.add_argument(
        "--log-level",
        metavar="LEVEL",
        help="ask the server for log messages at LEVEL (debug, info, ...)",
    )
    o.add_argument(
        "-q", "--quiet", action="store_true", help="no progress or server log lines on stderr"
    )
    o.add_argument("-v", "--verbose", action="store_true", help="mcpsync's own debug log on stderr")
    return p


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", dest="json_output", action="store_true", help="same as -o json")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser (help and usage); each subcommand has its own parser below."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Inspect, call and smoke-test Model Context Protocol servers (synchronous client).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcpsync {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in _COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


_COMMANDS = {
    "demo": "run the bundled demo server: inspect it and call `echo`",
    "inspect": "transport, auth, version, server info, capabilities, timings, tools/resources/prompts",
    "tools": "list tools",
    "resources": "list resources and resource templates",
    "prompts": "list prompts",
    "call": "call a tool: TARGET TOOL [k=v ...] [--json '{...}']",
    "read": "read a resource: TARGET URI",
    "prompt": "get a prompt: TARGET NAME [k=v ...]",
    "smoke": "bring up every entry of a config in parallel and report",
}

_USAGE = {
    "demo": "%(prog)s [options]",
    "inspect": "%(prog)s TARGET [options]",
    "tools": "%(prog)s TARGET [options]",
    "resources": "%(prog)s TARGET [options]",
    "prompts": "%(prog)s TARGET [options]",
    "call": "%(prog)s TARGET TOOL [KEY=VALUE ...] [--json '{...}'] [options]",
    "read": "%(prog)s TARGET URI [--out FILE] [options]",
    "prompt": "%(prog)s TARGET NAME [KEY=VALUE ...] [options]",
    "smoke": "%(prog)s [CONFIG] [--call TOOL [--args '{...}']] [--json] [options]",
}


_DETAILS = {
    "call": (
        "\n\nKEY=VALUE values are typed by the tool's inputSchema: a string property keeps the"
        '\ntext (message=123 sends "123"), integer/number/boolean/null properties are parsed,'
        '\narray and object properties take JSON (tags=\'["a", "b"]\'). An unknown tool or'
        "\nargument name is a usage error (exit 2) with a did-you-mean."
    ),
}


def _sub_parser(command: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} {command}",
        usage=_USAGE[command],
        description=_COMMANDS[command] + _DETAILS.get(command, ""),
        parents=[_common()],
        epilog=EPILOG if command != "smoke" else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("words", nargs="*", help=argparse.SUPPRESS)
    if command == "call":
        p.add_argument(
            "--json",
            dest="json_args",
            metavar="'{...}'",
            help="tool arguments as one JSON object (k=v pairs are merged over it)",
        )
        p.add_argument(
            "--no-progress", action="store_true", help="do not ask the server for progress"
        )
    elif command == "read":
        p.add_argument(
            "--out", metavar="FILE", help="write the (first) contents to FILE instead of stdout"
        )
        _json_flag(p)
    elif command == "inspect":
        p.add_argument(
            "--card", action="store_true", help="show the URL's Server Card (no session)"
        )
        _json_flag(p)
    elif command == "smoke":
        _smoke_arguments(p)
        _json_flag(p)
    else:
        _json_flag(p)
    return p


# --------------------------------------------------------------------------- helpers


def _parse_pairs(items: Sequence[str], *, what: str, parse_json: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"expected {what} as KEY=VALUE, got {item!r}")
        if parse_json:
            try:
                out[key] = json.loads(value)
            except ValueError:
                out[key] = value
        else:
            out[key] = value
    return out


def _parse_headers(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise UsageError(f"expected a header as 'Name: value', got {item.split(':')[0]!r}...")
        out[name.strip()] = value.strip()
    return out


def _json_object(text: str | None, what: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


SMOKE_EPILOG = """\
exit codes (the class of every failed entry, in the JSON as "failure"):
  0 all up, all calls ok     1 tool: a --call failed     2 usage / unreadable config
  3 connect, or failures of several classes              4 config: an entry did not parse
  5 spawn: could not start / exited at start-up          6 auth: needs authorization
  7 protocol (--strict: invalid schemas)   8 timeout   9 worker died   10 drift (--snapshot)
  130 interrupted

examples:
  mcpsync smoke .vscode/mcp.json --call echo --args '{"message": "hi"}'
  mcpsync smoke mcp.json --junit-xml smoke.xml --strict --stored-auth-only
  mcpsync smoke mcp.json --snapshot tests/snapshots
  mcpsync smoke mcp.json --executor process --parallel 4
  mcpsync smoke mcp.json --dask tcp://scheduler:8786
"""


def _smoke_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = SMOKE_EPILOG
    p.add_argument(
        "--call",
        action="append",
        default=[],
        metavar="TOOL",
        help="also call TOOL on every server that offers it (repeatable)",
    )
    p.add_argument(
        "--args",
        dest="call_args",
        action="append",
        default=[],
        metavar="'{...}'",
        help="JSON arguments for the --call at the same position (repeatable)",
    )
    p.add_argument("--ask", action="store_true", help="ask before starting each server")
    p.add_argument(
        "--parallel",
        type=int,
        default=8,
        metavar="N",
        help="bring up at most N at a time (default 8)",
    )
    p.add_argument(
        "--junit-xml",
        metavar="FILE",
        help="write a JUnit XML report (a test case per entry and call)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="each tool's inputSchema/outputSchema must be valid JSON Schema",
    )
    p.add_argument(
        "--stored-auth-only",
        action="store_true",
        help="HTTP servers use stored OAuth tokens only; never ask a person (fails as 'auth')",
    )
    p.add_argument(
        "--token-store",
        metavar="FILE",
        help="OAuth token file (default: tokens.json in the user's cache directory; --no-store: "
        "none; --keyring: the system keyring, opened by each worker)",
    )
    p.add_argument(
        "--snapshot",
        metavar="DIR",
        help="compare each server's tools/resources/prompts with DIR/<entry>.json (written if absent)",
    )
    p.add_argument(
        "--executor",
        choices=["thread", "process"],
        default="thread",
        help="run each entry in a thread (default) or a worker process",
    )
    p.add_argument(
        "--dask",
        metavar="SCHEDULER_ADDRESS",
        help="run the entries on a Dask cluster (needs the dask extra)",
    )
