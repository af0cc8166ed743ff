"""Server entries from the config files people already have.

Owns: reading MCP server lists (Claude Desktop ``claude_desktop_config.json``, Claude
Code ``.mcp.json``, Cursor ``mcp.json``, VS Code ``.vscode/mcp.json`` or the ``"mcp"``
section of its ``settings.json``, or a plain dict in code) into typed
:class:`ServerEntry` objects, and turning an entry into ``Session.connect`` keyword
arguments. No I/O beyond reading the file (and a VS Code ``envFile``).

Accepted shapes (top level)::

    {"mcpServers": {name: entry}}        Claude Desktop, Claude Code, Cursor, Windsurf ...
    {"servers": {name: entry}, "inputs": [...]}           VS Code mcp.json
    {"mcp": {"servers": {...}, "inputs": [...]}}          VS Code settings.json
    {name: entry, ...}                                    a plain dict in code

An entry is either a local process (``command``, ``args``, ``env``, ``envFile``,
``cwd``) or a remote server (``url``, ``headers``, ``auth``/``oauth``), optionally with
``type`` (``"stdio"``, ``"http"``, ``"sse"``, ``"streamable-http"``). Keys other tools
write (``disabled``, ``autoApprove``, ``icon`` ...) are ignored but kept in ``raw``;
``disabled: true`` marks the entry disabled. mcpsync's own keys:

* ``transport``: ``"auto"`` | ``"stdio"`` | ``"streamable-http"`` | ``"sse"`` (overrides ``type``)
* ``timeout``: default per-request timeout in seconds; ``connect_timeout``: bring-up bound
* ``lazy: true`` (connect on first use) or ``eager: true`` (connect at host start, the default)
* ``includeTools`` / ``excludeTools``: tool name globs (a string or a list); a tool hidden by
  them is neither listed nor callable (``Session.connect(include_tools=, exclude_tools=)``)

String values may use ``${VAR}``, ``${VAR:-default}``, ``${env:VAR}`` (process
environment), ``${input:id}`` (VS Code inputs: resolved from the ``inputs=`` dict or
callback given by the caller, else the input's ``default``), and the VS Code variables
``${workspaceFolder}``, ``${workspaceFolderBasename}``, ``${userHome}``,
``${pathSeparator}``/``${/}``. A missing variable is an error for that entry (never an
empty string silently). A leading ``~`` is expanded in ``command``, ``cwd``, ``envFile``
and in arguments that start with ``~/``.

A wrong entry yields a :class:`ConfigEntryError` naming the file, the entry and the field
and saying what was expected; the other entries still load (:attr:`Config.errors`).
Secrets never appear in error text or in ``repr`` (env and header values are masked).

The package: ``entries`` (:class:`ServerEntry`, :class:`Config` and the other types),
``jsonc`` (JSON with comments and trailing commas), ``expand`` (``${...}`` variables, ``~``,
``envFile``), ``parse`` (one entry -> a :class:`ServerEntry`), ``load`` (files, their
shapes, default locations, :func:`oauth_for_entry`), ``names`` (a server's name from its
command line). Every public name is importable from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..runtime import lazy as _lazy

if TYPE_CHECKING:
    from .entries import TRANSPORTS as TRANSPORTS
    from .entries import AuthSettings, Config, ConfigEntryError, InputSpec, ServerEntry
    from .entries import InputResolver as InputResolver
    from .jsonc import parse_jsonc
    from .load import default_config_paths, load_config, oauth_for_entry
    from .names import command_name
    from .parse import parse_entry

__all__ = [
    "ServerEntry",
    "AuthSettings",
    "InputSpec",
    "Config",
    "ConfigEntryError",
    "load_config",
    "parse_entry",
    "parse_jsonc",
    "default_config_paths",
    "oauth_for_entry",
    "command_name",
]

#: every public name -> its submodule, loaded on first use (PEP 562): ``Session.connect``
#: needs only ``command_name``; the entry types and the file reader load with a config
_WHERE = {
    **dict.fromkeys(
        ("TRANSPORTS", "AuthSettings", "Config", "ConfigEntryError", "InputSpec", "ServerEntry",
         "InputResolver"),
        ".entries",
    ),
    "parse_jsonc": ".jsonc",
    "default_config_paths": ".load",
    "load_config": ".load",
    "oauth_for_entry": ".load",
    "command_name": ".names",
    "parse_entry": ".parse",
}  # fmt: skip


#: the submodules this package loaded at import before its names were lazy: attributes still
__getattr__, __dir__ = _lazy.attributes(
    globals(), {**_WHERE, **dict.fromkeys(("entries", "expand", "jsonc", "load", "names", "parse"))}
)
