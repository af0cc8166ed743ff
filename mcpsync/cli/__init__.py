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
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from .. import display
from .._version import __version__
from ..config import (
    ServerEntry,
    command_name,
    default_config_paths,
    load_config,
    oauth_for_entry,
    parse_entry,
)
from ..errors import (
    CapabilityError,
    ConfigError,
    MCPSyncError,
    RequestTimeout,
)

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
  pid=$(python -m mcpsync.demo_http --port 8000 --detach)   # the demo server over HTTP
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


# --------------------------------------------------------------------------- k=v tool arguments


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _schema_types(schema: Any, root: Any, depth: int = 0) -> set[str] | None:
    """The JSON types a (sub)schema allows, or None when it does not constrain them."""
    if not isinstance(schema, dict) or depth > 32:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):  # a local reference ($defs, definitions)
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        return _schema_types(target, root, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)} or None
    for key in ("anyOf", "oneOf"):
        subs = schema.get(key)
        if isinstance(subs, list) and subs:
            found: set[str] = set()
            for sub in subs:
                types = _schema_types(sub, root, depth + 1)
                if types is None:
                    return None  # one branch takes anything: so does the union
                found |= types
            return found
    if "const" in schema:
        return {_json_type(schema["const"])}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return {_json_type(v) for v in schema["enum"]}
    for sub in schema.get("allOf") or []:
        types = _schema_types(sub, root, depth + 1)
        if types is not None:
            return types
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    """JSON without NaN/Infinity (a server could not read them back)."""
    return json.loads(text, parse_constant=_no_constants)


def _coerce(key: str, raw: str, schema: Any, root: Any) -> Any:
    """One ``key=raw`` value, typed as the property's schema says (strings stay strings)."""
    types = _schema_types(schema, root)
    if types is None:  # the schema does not say: JSON when it parses, else the text
        try:
            return _loads(raw)
        except ValueError:
            return raw
    if "null" in types and raw == "null":
        return None
    if "boolean" in types and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    if types & {"integer", "number", "array", "object"}:
        try:
            value = _loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, int) and not isinstance(value, bool) and types & {"integer", "number"}:
            return value
        if isinstance(value, float):
            if "number" in types:
                return value
            if "integer" in types and value.is_integer():
                return int(value)
        if isinstance(value, list) and "array" in types:
            return value
        if isinstance(value, dict) and "object" in types:
            return value
    if "string" in types:
        enum = schema.get("enum") if isinstance(schema, dict) else None
        if isinstance(enum, list) and raw not in enum and all(isinstance(e, str) for e in enum):
            raise UsageError(
                f"{key}={raw!r} is not one of {', '.join(enum)}{_did_you_mean(raw, enum)}"
            )
        return raw
    wanted = " or ".join(sorted(types))
    hint = ""
    if types & {"array", "object"}:
        hint = f" (give JSON, e.g. {key}='[1, 2]' or {key}='{{\"k\": 1}}')"
    raise UsageError(f"{key}={raw!r}: the tool wants {wanted} here{hint}")


def tool_arguments(tool: str, items: Sequence[str], input_schema: Any) -> dict[str, Any]:
    """``KEY=VALUE`` words as tool arguments, typed by the tool's ``inputSchema``.

    A string property keeps the text as given (``message=123`` is ``"123"``); integer,
    number, boolean, null, array and object properties (also in ``type`` lists,
    ``anyOf``/``oneOf``, ``enum``/``const`` and local ``$ref``) are parsed, arrays and
    objects as JSON. A name the schema does not list, or a value of the wrong type, is a
    :class:`UsageError` with a did-you-mean.
    """
    schema = input_schema if isinstance(input_schema, dict) else {}
    props = schema.get("properties")
    props = props if isinstance(props, dict) else None
    extra = schema.get("additionalProperties")
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"expected tool arguments as KEY=VALUE, got {item!r}")
        if props is not None and key in props:
            out[key] = _coerce(key, raw, props[key], schema)
        elif props is None or extra is True:
            out[key] = _coerce(key, raw, None, schema)
        elif isinstance(extra, dict):
            out[key] = _coerce(key, raw, extra, schema)
        elif not props:
            raise UsageError(f"tool {tool!r} takes no arguments (got {key}=...)")
        else:
            raise UsageError(
                f"tool {tool!r} has no argument {key!r}{_did_you_mean(key, list(props))}"
                f" (its arguments: {', '.join(props)})"
            )
    return out


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _split_config_target(text: str) -> tuple[str, str] | None:
    """``path/to/mcp.json:entry`` -> (path, entry) when the path part is a file."""
    path, sep, entry = text.rpartition(":")
    if sep and path and entry and os.path.isfile(os.path.expanduser(path)):
        return path, entry
    return None


def _entry_from_config(path: str, name: str | None, ns: argparse.Namespace) -> ServerEntry:
    inputs = _parse_pairs(ns.input, what="--input", parse_json=False)
    config = load_config(path, inputs=inputs)
    if name is None:
        names = config.names()
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise UsageError(f"{path} has {len(names)} servers ({listed}); say which: {path}:NAME")
        name = names[0]
    return config[name]  # raises the entry's ConfigError when it did not load


def _host_of(url: str) -> str:
    return url.split("://", 1)[1].split("/", 1)[0] or "server"


def _auth_factory(ns: argparse.Namespace) -> Callable[[ServerEntry], Any]:
    """OAuth for HTTP entries that carry auth settings, or for all of them with --oauth."""

    def factory(entry: ServerEntry) -> Any:
        if entry.auth is not None or getattr(ns, "oauth", False):
            return oauth_for_entry(entry)
        return None

    return factory


def _entry_kwargs(entry: ServerEntry, ns: argparse.Namespace) -> dict[str, Any]:
    return entry.connect_kwargs(auth_factory=_auth_factory(ns))


class Target:
    """What to connect to, and how to name it in messages."""

    def __init__(self, kwargs: dict[str, Any], label: str) -> None:
        self.kwargs = kwargs
        self.label = label


def resolve_target(
    ns: argparse.Namespace, command_argv: list[str] | None, needed: int
) -> tuple[Target, list[str]]:
    """Pick the target out of the positional words; return it and the remaining words."""
    words = list(ns.words)
    if command_argv is not None:
        if not command_argv:
            raise UsageError("nothing after --; give the server command")
        kwargs: dict[str, Any] = {"target": list(command_argv), "transport": "stdio"}
        label = " ".join(command_argv)
    elif ns.config:
        if not words:
            raise UsageError(f"--config {ns.config} needs the ENTRY name")
        entry = _entry_from_config(ns.config, words.pop(0), ns)
        kwargs, label = _entry_kwargs(entry, ns), f"{entry.name} ({entry.describe()})"
    else:
        if not words:
            raise UsageError(
                "missing TARGET: a URL, CONFIG:ENTRY, --config FILE ENTRY, or -- COMMAND ..."
            )
        first = words.pop(0)
        if _is_url(first):
            entry = parse_entry(_host_of(first), {"url": first})
            kwargs, label = _entry_kwargs(entry, ns), first
        elif (split := _split_config_target(first)) is not None:
            entry = _entry_from_config(split[0], split[1], ns)
            kwargs, label = _entry_kwargs(entry, ns), f"{entry.name} ({entry.describe()})"
        elif os.path.isfile(os.path.expanduser(first)):
            entry = _entry_from_config(first, None, ns)
            kwargs, label = _entry_kwargs(entry, ns), f"{entry.name} ({entry.describe()})"
        else:
            raise UsageError(
                f"cannot tell what {first!r} is: expected a URL (http://...), CONFIG:ENTRY, "
                "--config FILE ENTRY, or a server command after -- (e.g. -- python -m server)"
            )
    if len(words) < needed:
        raise UsageError("missing argument(s); see --help")
    # command-line options win over the config entry
    if ns.transport:
        kwargs["transport"] = ns.transport
    if ns.env:
        kwargs["env"] = {
            **kwargs.get("env", {}),
            **_parse_pairs(ns.env, what="--env", parse_json=False),
        }
    if ns.cwd:
        kwargs["cwd"] = ns.cwd
    if ns.header:
        kwargs["headers"] = {**kwargs.get("headers", {}), **_parse_headers(ns.header)}
    _apply_timeouts(kwargs, ns)
    for key in ("include_tools", "exclude_tools"):  # replace the entry's includeTools/excludeTools
        if getattr(ns, key, None):
            kwargs[key] = list(getattr(ns, key))
    return Target(kwargs, label), words


def _apply_timeouts(kwargs: dict[str, Any], ns: argparse.Namespace) -> None:
    if ns.timeout is not None:
        kwargs["timeout"] = None if ns.timeout <= 0 else ns.timeout
    if ns.connect_timeout is not None:
        kwargs["connect_timeout"] = ns.connect_timeout


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


def _import_client(kwargs: dict[str, Any]) -> None:
    """Import what the bring-up and the first results need, so that the timings ``inspect``
    shows are the server's (and the network's), not this process's imports."""
    import importlib

    importlib.import_module("mcp_types")  # the wire models (~0.2 s of pydantic building)
    if isinstance(kwargs.get("target"), list):
        importlib.import_module("..transports.stdio", __package__)
    elif isinstance(kwargs.get("target"), str):
        importlib.import_module("..transports.streamable_http", __package__)
        importlib.import_module("..transports.legacy_sse", __package__)


def _connect(target: Target, out: _Out, ns: argparse.Namespace) -> Any:
    from ..session import Session

    kwargs = dict(target.kwargs)
    _import_client(kwargs)
    target_ = kwargs["target"]
    if not kwargs.get("name"):  # the name Session.connect would choose, said once for both
        if isinstance(target_, list):
            kwargs["name"] = command_name(target_)
        elif isinstance(target_, str):
            kwargs["name"] = _host_of(target_)
    kwargs["on_log"] = out.on_log(kwargs.get("name") or "server")
    try:
        session = Session.connect(**kwargs)
    except KeyboardInterrupt:
        raise
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # everything else during bring-up is a connect failure
        raise ConnectFailed(target.label, exc) from None
    if ns.log_level:
        try:
            session.set_logging_level(ns.log_level)
        except CapabilityError:
            out.note(
                f"mcpsync: note: the server does not offer logging; --log-level {ns.log_level} ignored"
            )
        except BaseException:
            session.close()
            raise
    return session


# --------------------------------------------------------------------------- reports


def _capabilities_summary(caps: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in caps.items():
        if value is None:
            continue
        flags = [k for k, v in value.items() if v is True] if isinstance(value, dict) else []
        lines.append(key + (f" ({', '.join(flags)})" if flags else ""))
    return lines


_LIST_METHODS = {
    "list_tools": "tools/list",
    "list_resources": "resources/list",
    "list_resource_templates": "resources/templates/list",
    "list_prompts": "prompts/list",
}


def _timed_list(
    session: Any, method: str, timings: dict[str, float]
) -> tuple[list[Any] | None, str | None]:
    t0 = time.perf_counter()
    try:
        items = getattr(session, method)()
    except CapabilityError:
        return None, None
    except MCPSyncError as exc:
        return None, str(exc)
    finally:
        timings[_LIST_METHODS[method]] = time.perf_counter() - t0
    return items, None


def _auth_label(session: Any, kwargs: dict[str, Any]) -> str:
    if isinstance(kwargs.get("target"), list):
        return "none (stdio)"
    if kwargs.get("auth") is not None or "auth" in session.phases:
        return "oauth"
    if any(k.lower() == "authorization" for k in kwargs.get("headers", {})):
        return "Authorization header"
    return "none"


def inspect_report(session: Any, target: Target) -> dict[str, Any]:
    """Everything ``inspect`` shows, as JSON-ready data."""
    timings: dict[str, float] = {}
    tools, tools_err = _timed_list(session, "list_tools", timings)
    resources, res_err = _timed_list(session, "list_resources", timings)
    templates, tpl_err = _timed_list(session, "list_resource_templates", timings)
    prompts, prompts_err = _timed_list(session, "list_prompts", timings)
    errors = {
        k: v
        for k, v in (
            ("tools", tools_err),
            ("resources", res_err),
            ("resource_templates", tpl_err),
            ("prompts", prompts_err),
        )
        if v
    }
    return {
        "target": target.label,
        "transport": session.transport.kind,
        "transport_detail": session.transport.describe(),
        "auth": _auth_label(session, target.kwargs),
        "protocol_version": session.protocol_version,
        "era": session.era,
        "era_reason": session.era_reason,
        "server_info": _dump(session.server_info),
        "capabilities": _dump(session.server_capabilities),
        "instructions": session.instructions,
        "phases": dict(session.phases),
        "listing": timings,
        "tools": None if tools is None else [_dump(t) for t in tools],
        "resources": None if resources is None else [_dump(r) for r in resources],
        "resource_templates": None if templates is None else [_dump(t) for t in templates],
        "prompts": None if prompts is None else [_dump(p) for p in prompts],
        "errors": errors,
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


_INSTRUCTION_LINES = 8


def print_inspect(report: dict[str, Any], out: _Out) -> None:
    info = report["server_info"]
    name = info.get("name", "?") + (f" {info['version']}" if info.get("version") else "")
    if info.get("title"):
        name += f" ({info['title']})"
    lines = [
        f"server        {name}",
        f"transport     {report['transport_detail']}",
        f"auth          {report['auth']}",
        f"protocol      {report['protocol_version']} ({report['era']}: {report['era_reason']})",
        "capabilities  " + (", ".join(_capabilities_summary(report["capabilities"])) or "none"),
    ]
    if report["instructions"]:
        instructions = [line.rstrip() for line in report["instructions"].strip().splitlines()]
        shown = instructions[:_INSTRUCTION_LINES]
        if len(instructions) > len(shown):
            shown.append(f"... ({len(instructions) - len(shown)} more lines; -o json shows all)")
        lines.append("instructions  " + shown[0])
        lines += [("              " + line).rstrip() for line in shown[1:]]
    phases = ", ".join(f"{k} {_ms(v)}" for k, v in report["phases"].items())
    listing = ", ".join(f"{k} {_ms(v)}" for k, v in report["listing"].items())
    lines.append(f"time          {phases}")
    lines.append(f"              {listing}")
    out.print("\n".join(lines))
    sections = [
        ("tools", display.tool_rows, "tools"),
        ("resources", display.resource_rows, "resources"),
        ("resource templates", display.template_rows, "resource_templates"),
        ("prompts", display.prompt_rows, "prompts"),
    ]
    for title, rows_of, key in sections:
        items = report[key]
        out.print()
        if key in report["errors"]:
            out.print(f"{title}: error: {report['errors'][key]}")
        elif items is None:
            out.print(f"{title}: not offered")
        else:
            out.print(f"{title} ({len(items)})")
            if items:
                out.print(_indent(display.format_table(rows_of(items))))


def _indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line for line in text.splitlines())


# --------------------------------------------------------------------------- commands


def _call_tool(
    session: Any, tool: str, arguments: dict[str, Any], out: _Out, ns: argparse.Namespace
) -> int:
    bar = (
        None
        if (out.quiet or getattr(ns, "no_progress", False))
        else display.TextProgress(tool, out.stderr)
    )
    kwargs: dict[str, Any] = {}
    if ns.timeout is not None:
        kwargs["timeout"] = None if ns.timeout <= 0 else ns.timeout
    try:
        result = session.call_tool(tool, arguments or None, on_progress=bar, **kwargs)
    finally:
        if bar is not None:
            bar.finish()
    if out.json:
        out.emit_json(_dump(result))
    else:
        text = display.result_text(result)
        if text:
            out.print(text)
    if result.is_error:
        out.stderr.write(f"mcpsync: tool {tool!r} reported an error\n")
        return EXIT_ERROR
    return EXIT_OK


def cmd_inspect(
    session: Any, target: Target, words: list[str], out: _Out, ns: argparse.Namespace
) -> int:
    report = inspect_report(session, target)
    if out.json:
        out.emit_json(report)
    else:
        print_inspect(report, out)
    return EXIT_ERROR if report["errors"] else EXIT_OK


def _listing(method: str, rows_of: Callable[[Any], list[dict[str, str]]]) -> Callable[..., int]:
    def run(
        session: Any, target: Target, words: list[str], out: _Out, ns: argparse.Namespace
    ) -> int:
        items = getattr(session, method)()
        if out.json:
            out.emit_json([_dump(i) for i in items])
        else:
            out.print(display.format_table(rows_of(items)))
        return EXIT_OK

    return run


def cmd_resources(
    session: Any, target: Target, words: list[str], out: _Out, ns: argparse.Namespace
) -> int:
    resources = session.list_resources()
    try:
        templates = session.list_resource_templates()
    except MCPSyncError:
        templates = []
    if out.json:
        out.emit_json(
            {
                "resources": [_dump(r) for r in resources],
                "resource_templates": [_dump(t) for t in templates],
            }
        )
    else:
        out.print(display.format_table(display.resource_rows(resources)))
        if templates:
            out.print()
            out.print(display.format_table(display.template_rows(templates)))
    return EXIT_OK


def cmd_call(
    session: Any, target: Target, words: list[str], out: _Out, ns: argparse.Namespace
) -> int:
    tool, pairs = words[0], words[1:]
    arguments = _json_object(ns.json_args, "--json")
    schema: Any = None
    try:
        tools = {t.name: t for t in session.list_tools()}
    except MCPSyncError as exc:  # no tools/list (or it failed): the server decides
        out.note(f"mcpsync: note: cannot list tools ({exc}); k=v values parsed as JSON")
    else:
        if tool not in tools:
            raise UsageError(
                f"the server has no tool {tool!r}{_did_you_mean(tool, list(tools))}"
                f" ({len(tools)} tools: `{PROG} tools TARGET` lists them)"
            )
        schema = tools[tool].input_schema
    arguments.update(tool_arguments(tool, pairs, schema))
    return _call_tool(session, tool, arguments, out, ns)


def cmd_read(
    session: Any, target: Target, words: list[str], out: _Out, ns: argparse.Namespace
) -> int:
    if len(words) != 1:
        raise UsageError("read takes exactly one URI")
    result = session.read_resource(words[0])
    if ns.out:
        import base64

        contents = result.contents[0] if result.contents else None
        text = getattr(contents, "text", None)
        data = (
            text.encode()
            if text is not None
            else base64.b64decode(getattr(contents, "blob", "") or "")
        )
        Path(ns.out).write_bytes(data)
        out.note(f"mcpsync: wrote {len(data)} bytes to {ns.out}")
    elif out.json:
        out.emit_json(_dump(result))
    else:
        out.print(display.result_text(result))
    return EXIT_OK


def cmd_prompt(
    session: Any, target: Target, words: list[str], out: _Out, ns: argparse.Namespace
) -> int:
    name, pairs = words[0], words[1:]
    arguments = _parse_pairs(pairs, what="prompt arguments", parse_json=False)
    try:
        prompts = {p.name: p for p in session.list_prompts()}
    except MCPSyncError:  # no prompts/list (or it failed): the server decides
        prompts = None
    if prompts is not None:
        if name not in prompts:
            raise UsageError(
                f"the server has no prompt {name!r}{_did_you_mean(name, list(prompts))}"
                f" ({len(prompts)} prompts: `{PROG} prompts TARGET` lists them)"
            )
        known = [a.name for a in prompts[name].arguments or []]
        for key in arguments:
            if key not in known:
                raise UsageError(
                    f"prompt {name!r} has no argument {key!r}{_did_you_mean(key, known)}"
                    f" (its arguments: {', '.join(known) or 'none'})"
                )
    result = session.get_prompt(name, arguments or None)
    if out.json:
        out.emit_json(_dump(result))
    else:
        out.print(display.result_text(result))
    return EXIT_OK


_SESSION_COMMANDS: dict[str, tuple[int, Callable[..., int]]] = {
    "inspect": (0, cmd_inspect),
    "tools": (0, _listing("list_tools", display.tool_rows)),
    "resources": (0, cmd_resources),
    "prompts": (0, _listing("list_prompts", display.prompt_rows)),
    "call": (1, cmd_call),
    "read": (1, cmd_read),
    "prompt": (1, cmd_prompt),
}


def run_demo(ns: argparse.Namespace, out: _Out) -> int:
    target = Target({"target": list(DEMO_ARGV), "name": "demo"}, "python -m mcpsync.demo_server")
    _apply_timeouts(target.kwargs, ns)
    session = _connect(target, out, ns)
    with session:
        report = inspect_report(session, target)
        result = session.call_tool("echo", {"message": "hello from mcpsync"})
        if out.json:
            out.emit_json({"inspect": report, "call": {"tool": "echo", "result": _dump(result)}})
        else:
            print_inspect(report, out)
            out.print()
            out.print("call echo message='hello from mcpsync'")
            out.print(_indent(display.result_text(result)))
    return EXIT_ERROR if result.is_error or report["errors"] else EXIT_OK


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
        help="OAuth token file (default with --stored-auth-only: ~/.cache/mcpsync/tokens.json)",
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


def run_smoke(ns: argparse.Namespace, out: _Out) -> int:
    from ..host import ask_on_terminal
    from ..smoke import smoke, write_junit_xml

    if len(ns.words) > 1:
        raise UsageError("smoke takes one CONFIG file")
    if ns.words:
        path = ns.words[0]
    else:
        found = default_config_paths()
        if not found:
            raise UsageError(
                "no CONFIG given and none found in .vscode/mcp.json, .cursor/mcp.json, .mcp.json, "
                "~/.cursor/mcp.json or Claude Desktop's claude_desktop_config.json"
            )
        path = str(found[0])
        out.note(f"mcpsync: using {path}")
    if len(ns.call_args) > max(1, len(ns.call)):
        raise UsageError("more --args than --call")
    calls = [
        (tool, _json_object(ns.call_args[i] if i < len(ns.call_args) else None, "--args"))
        for i, tool in enumerate(ns.call)
    ]
    inputs = _parse_pairs(ns.input, what="--input", parse_json=False)
    config = load_config(path, inputs=inputs)
    token_store = ns.token_store
    if token_store is None and ns.stored_auth_only:
        token_store = os.path.expanduser("~/.cache/mcpsync/tokens.json")
    with _smoke_executor(ns) as executor:
        report = smoke(
            config,
            executor=executor,
            calls=calls,
            parallel=max(1, ns.parallel),
            consent=ask_on_terminal if ns.ask else None,
            timeout=ns.timeout,
            connect_timeout=ns.connect_timeout,
            strict=ns.strict,
            oauth=ns.oauth,
            stored_auth_only=ns.stored_auth_only,
            token_store=token_store,
            snapshot_dir=ns.snapshot,
            log_server_messages=not ns.quiet,
        )
    if ns.junit_xml:
        write_junit_xml(report, ns.junit_xml)
    if out.json:
        data = report.to_json()
        data["config"] = path
        out.emit_json(data)
    else:
        _print_smoke(report, out, [tool for tool, _ in calls])
    return report.exit_code


class _NoExecutor:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _smoke_executor(ns: argparse.Namespace) -> Any:
    if ns.dask:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--dask needs the dask extra: pip install 'mcpsync[dask]'") from None
        import contextlib

        @contextlib.contextmanager
        def on_dask() -> Any:
            with Client(ns.dask, timeout=30) as client:
                yield client.get_executor(pure=False)

        return on_dask()
    if ns.executor == "process":
        return _process_pool(max(1, ns.parallel))
    return _NoExecutor()


def _process_pool(workers: int) -> Any:
    import contextlib
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ..smoke import stop_process_pool, worker_initializer

    @contextlib.contextmanager
    def pool() -> Any:
        executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=worker_initializer,
        )
        try:
            yield executor
        except BaseException:  # Ctrl-C: stop the entries in the workers, their servers too
            stop_process_pool(executor)
            raise
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

    return pool()


def _print_smoke(report: Any, out: _Out, calls: list[str]) -> None:
    width = 60
    call_columns = ["call"] if len(calls) == 1 else [f"call:{tool}" for tool in calls]
    rows = []
    notes: list[str] = []
    for e in report.entries:
        row = {
            "server": e.name,
            "state": e.state,
            "transport": e.transport,
            "version": e.protocol_version or "-",
            "tools": "-" if e.tools is None else str(len(e.tools)),
            "time": "-" if e.seconds is None else _ms(e.seconds),
        }
        errors = [e.error] if e.error else []
        for tool, column in zip(calls, call_columns, strict=True):
            c = next((c for c in e.calls if c.tool == tool), None)
            if c is None or c.skipped:
                row[column] = "-"
            else:
                row[column] = ("ok " if c.ok else "FAIL ") + _ms(c.seconds)
                if c.error:
                    errors.append(f"{c.failure}: {tool}: {c.error}")
        if e.error:
            errors[0] = f"{e.failure}: {e.error}" if e.failure else e.error
        whole = " | ".join(" ".join(text.split()) for text in errors)
        if len(whole) <= width and "\n" not in "".join(errors):
            row["error"] = whole
        elif errors:
            row["error"] = f"see below [{len(notes) + 1}]"
            notes.append(f"[{len(notes) + 1}] {e.name}:\n" + _indent("\n".join(errors), "    "))
        else:
            row["error"] = ""
        rows.append(row)
    columns = ["server", "state", "transport", "version", "tools", "time", *call_columns, "error"]
    out.print(display.format_table(rows, columns, max_width=width))
    if notes:
        out.print()
        out.print("\n".join(notes))
    disabled = sum(1 for e in report.entries if e.state == "disabled")
    enabled = len(report.entries) - disabled
    up = sum(1 for e in report.entries if e.state == "ready" and e.failure is None)
    summary = f"\n{up}/{enabled} servers up in {_ms(report.seconds)}"
    if disabled:
        summary += f" ({disabled} disabled)"
    for tool in calls:
        ran = [c for e in report.entries for c in e.calls if c.tool == tool and not c.skipped]
        summary += f"; {tool}: {sum(c.ok for c in ran)}/{len(ran)} calls ok"
    out.print(summary)
    for tool in report.no_tool:
        out.print(f"no server offers a tool named {tool!r}")


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
        needed, handler = _SESSION_COMMANDS[command]
        target, words = resolve_target(ns, command_argv, needed)
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
        stderr.write(f"{PROG} {command}: error: {exc}\n")
        return EXIT_CONNECT
    except RequestTimeout as exc:
        stderr.write(f"{PROG} {command}: error: timed out: {exc}\n")
        return EXIT_ERROR
    except MCPSyncError as exc:
        stderr.write(f"{PROG} {command}: error: {type(exc).__name__}: {exc}\n")
        return EXIT_ERROR
    except BrokenPipeError:
        # stdout went away (| head): not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
