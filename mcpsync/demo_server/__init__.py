"""A small but complete MCP server in pure Python (stdlib only): mcpsync's demo and bench peer.

Owns: the demo server run by ``python -m mcpsync.demo_server``. It speaks newline-delimited
JSON-RPC on stdin/stdout (logs go to stderr) and negotiates protocol versions 2024-11-05,
2025-03-26, 2025-06-18 and 2025-11-25. It offers tools, resources (static, a template,
subscriptions), a prompt, completions, logging, progress, cancellation and the three
server-to-client requests (sampling, elicitation, roots), so a client can be exercised end
to end without Node or the SDK.

Threads: the reader loop (the caller's thread) handles cheap requests inline, which keeps the
benchmark hot path to one ``readline``, one ``json.loads``, one ``json.dumps`` and one
``write``+``flush``. Tools that wait (``long_running``, ``sample``, ``elicit``,
``list_roots``) run on their own worker thread, so the reader keeps serving other requests
and can deliver the client's responses to requests this server sent.

Extending: tests subclass :class:`DemoServer` or call :meth:`DemoServer.register_tool` to
add fault behaviour (see ``tests/servers/faulty_server.py``); this module stays clean.

The package: ``wire`` (versions, error codes, :class:`RpcError`, :class:`Call`,
:class:`ToolSpec`), ``core`` (framing, dispatch, requests to the client, initialize),
``content`` (resources, prompts, completion, logging), ``tools`` (the tools); here:
:class:`DemoServer` (all of them) and :func:`main`.
"""

from __future__ import annotations

import argparse
import os

from .tools import ToolsServer
from .wire import LATEST_VERSION, LOG_LEVELS, SUPPORTED_VERSIONS, Call, RpcError, ToolSpec

__all__ = [
    "SUPPORTED_VERSIONS",
    "LATEST_VERSION",
    "LOG_LEVELS",
    "RpcError",
    "Call",
    "ToolSpec",
    "DemoServer",
    "main",
]


class DemoServer(ToolsServer):
    """The demo MCP server over a pair of binary streams (stdin/stdout by default)."""


def build_arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mcpsync.demo_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--page-size", type=int, default=0, help="items per list page (0 = no pagination)"
    )
    parser.add_argument(
        "--reverse-timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the client's answers",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request to stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    server = DemoServer(
        page_size=args.page_size, reverse_timeout=args.reverse_timeout, verbose=args.verbose
    )
    server.log(f"ready on stdio (pid {os.getpid()})")
    return server.serve()
