"""The session commands of ``mcpsync``: inspect (the report and its text form), tools,
resources, prompts, call, read, prompt, and ``mcpsync demo``. Each takes a connected
session, the parsed arguments and the output, and returns an exit code.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import display
from ..errors import CapabilityError, MCPSyncError
from .arguments import DEMO_ARGV, EXIT_ERROR, EXIT_OK, PROG, UsageError, _json_object, _parse_pairs
from .output import _dump
from .targets import Target, _apply_timeouts, _connect
from .tool_args import _did_you_mean, tool_arguments

if TYPE_CHECKING:
    from .output import _Out

__all__ = [
    "inspect_report",
    "print_inspect",
    "cmd_inspect",
    "cmd_resources",
    "cmd_call",
    "cmd_read",
    "cmd_prompt",
    "run_demo",
]


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
    if display.icon_text(info):  # the server's own icon (checked; https ones as a link)
        lines.insert(1, f"icons         {display.icon_text(info)}")
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


def check_words(command: str, words: list[str], ns: argparse.Namespace) -> None:
    """The argument mistakes a command can tell before any server is started: ``--json``
    that is not a JSON object, a ``call`` or ``prompt`` word that is not ``KEY=VALUE``
    (``UsageError``). What depends on the server (a tool's name, its schema) is checked
    once connected."""
    if command == "call":
        _json_object(ns.json_args, "--json")
        for item in words[1:]:
            key, sep, _ = item.partition("=")
            if not sep or not key:
                raise UsageError(f"expected tool arguments as KEY=VALUE, got {item!r}")
    elif command == "prompt":
        _parse_pairs(words[1:], what="prompt arguments", parse_json=False)


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
