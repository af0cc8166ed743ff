"""The ``mcpsync`` command line: inspect, call and smoke-test MCP servers.

Owns: argument parsing, target resolution (URL, command after ``--``, ``CONFIG:ENTRY`` or
``--config FILE ENTRY``), terminal output (text or ``-o json``), progress and server
log lines on stderr, Ctrl-C handling and exit codes. Everything else is the library.

Exit codes:
    0    success
    1    the server or the tool failed (JSON-RPC error, ``isError`` result, timeout)
    2    usage error (bad arguments, bad config entry)
    3    could not connect (spawn, network, auth or handshake failed; ``smoke``: an entry failed)
    130  interrupted (Ctrl-C): the call in flight was cancelled and the server closed

The package, one concern per module (each imports only the ones above it):
``arguments`` (exit codes, the parsers), ``output`` (stdout/stderr, logging),
``tool_args`` (``KEY=VALUE`` words typed by a tool's inputSchema), ``targets`` (what to
connect to, and connecting), ``commands`` (inspect, tools, call, read, prompt, demo),
``smoke_command`` (``mcpsync smoke`` over :func:`mcpsync.smoke.run`); here: :func:`main`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import IO

from ..errors import STDERR_TAIL, ConfigError, MCPSyncError, RequestTimeout
from .arguments import (
    _COMMANDS,
    EXIT_CONNECT,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    ConnectFailed,
    UsageError,
    _sub_parser,
    build_parser,
)
from .arguments import DEMO_ARGV as DEMO_ARGV
from .arguments import EPILOG as EPILOG
from .arguments import SMOKE_EPILOG as SMOKE_EPILOG
from .card_command import run_card
from .commands import _SESSION_COMMANDS, check_words, run_demo
from .commands import cmd_call as cmd_call
from .commands import cmd_inspect as cmd_inspect
from .commands import cmd_prompt as cmd_prompt
from .commands import cmd_read as cmd_read
from .commands import cmd_resources as cmd_resources
from .commands import inspect_report as inspect_report
from .commands import print_inspect as print_inspect
from .output import SERVER_LOGGER as SERVER_LOGGER
from .output import _Out, _setup_logging
from .smoke_command import run_smoke
from .targets import Target as Target
from .targets import _connect, resolve_target
from .tool_args import tool_arguments as tool_arguments

__all__ = [
    "main",
    "build_parser",
    "tool_arguments",
    "EXIT_OK",
    "EXIT_ERROR",
    "EXIT_USAGE",
    "EXIT_CONNECT",
    "EXIT_INTERRUPTED",
]


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run the command line; returns the exit code (see the module docstring)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    args = list(sys.argv[1:] if argv is None else argv)
    command_argv: list[str] | None = None
    if "--" in args:
        i = args.index("--")
        args, command_argv = args[:i], args[i + 1 :]

    top = build_parser()
    command = next((a for a in args if not a.startswith("-")), None)
    if command is None or command not in _COMMANDS:
        if command is None and not args:
            top.print_help(stdout)
            return EXIT_USAGE
        if command is None:
            try:
                top.parse_args(args)  # --help / --version exit here
            except SystemExit as exc:
                return int(exc.code or 0)
        stderr.write(
            f"{PROG}: error: unknown command {command!r}; expected one of: {', '.join(_COMMANDS)}\n"
        )
        return EXIT_USAGE
    index = args.index(command)
    if any(a not in ("-v", "--verbose", "-q", "--quiet") for a in args[:index]):
        stderr.write(f"{PROG}: error: put options after the command: {PROG} {command} ...\n")
        return EXIT_USAGE
    rest = args[:index] + args[index + 1 :]
    parser = _sub_parser(command)
    try:
        ns = parser.parse_intermixed_args(rest)
    except SystemExit as exc:
        return int(exc.code or 0)

    _setup_logging(ns.verbose, ns.quiet, stderr)
    out = _Out(ns, stdout, stderr)
    try:
        if command == "demo":
            if ns.words or command_argv is not None:
                raise UsageError("demo takes no target")
            return run_demo(ns, out)
        if command == "smoke":
            if command_argv is not None:
                raise UsageError("smoke takes a CONFIG file, not a command")
            return run_smoke(ns, out)
        if command == "inspect" and ns.card:  # the Server Card, before any session
            return run_card(ns, out)
        needed, handler = _SESSION_COMMANDS[command]
        target, words = resolve_target(ns, command_argv, needed)
        check_words(command, words, ns)  # before a server is started for nothing
        session = _connect(target, out, ns)
        with session:
            return handler(session, target, words, out, ns)
    except KeyboardInterrupt:
        stderr.write(f"\n{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except (UsageError, ConfigError) as exc:
        stderr.write(f"{PROG} {command}: error: {exc}\n")
        return EXIT_USAGE
    except ConnectFailed as exc:
        stderr.write(f"{PROG} {command}: error: {_shown(str(exc), ns)}\n")
        return EXIT_CONNECT
    except RequestTimeout as exc:
        stderr.write(f"{PROG} {command}: error: timed out: {exc}\n")
        return EXIT_ERROR
    except MCPSyncError as exc:
        stderr.write(f"{PROG} {command}: error: {type(exc).__name__}: {_shown(str(exc), ns)}\n")
        return EXIT_ERROR
    except BrokenPipeError:
        # stdout went away (| head): not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK


def _shown(message: str, ns: argparse.Namespace) -> str:
    """An error's text for the terminal: without its server-stderr section when that stderr
    was already shown live above it (every run but ``-q``): once is enough."""
    if ns.quiet:
        return message
    head, found, rest = message.partition(f"\n{STDERR_TAIL}\n")
    if not found:
        return message
    _, more, after = rest.partition("\n--- ")  # a later section (stdout noise) stays
    return head + " (its stderr is shown above)" + (f"\n--- {after}" if more else "")
