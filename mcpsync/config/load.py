"""Config files: which section holds the servers (``mcpServers``, ``servers``, ``mcp.servers``
or a plain dict), :func:`load_config`, the default file locations, and
:func:`oauth_for_entry` (an entry's auth settings -> an ``OAuth`` object).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .entries import AuthSettings, Config, ConfigEntryError
from .expand import _Expander
from .jsonc import parse_jsonc
from .parse import _parse_entry, _parse_inputs, _type_name

if TYPE_CHECKING:
    from .entries import InputResolver, ServerEntry

__all__ = ["load_config", "oauth_for_entry", "default_config_paths"]


def _servers_section(data: Any, source: str) -> tuple[Mapping[str, Any], Any]:
    """Find the name->entry map (and VS Code inputs) in a parsed file or dict."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{source}: expected a JSON object at the top level, got {_type_name(data)}"
        )
    for key in ("mcpServers", "servers"):
        if key in data:
            servers = data[key]
            if not isinstance(servers, Mapping):
                raise ConfigError(
                    f'{source}: "{key}" must be an object mapping names to servers, got {_type_name(servers)}'
                )
            return servers, data.get("inputs")
    mcp = data.get("mcp")
    if isinstance(mcp, Mapping) and isinstance(mcp.get("servers"), Mapping):
        return mcp["servers"], mcp.get("inputs")
    if data and all(
        isinstance(v, Mapping)
        and any(k in v for k in ("command", "url", "serverUrl", "httpUrl", "type"))
        for v in data.values()
    ):
        return data, None
    if not data:
        return {}, None
    raise ConfigError(
        f'{source}: no server list found; expected a "mcpServers" object (Claude Desktop, Cursor), '
        'a "servers" object (VS Code mcp.json), or a map of names to entries with "command" or "url"'
    )


def _default_workspace(path: Path) -> str:
    parent = path.resolve().parent
    if parent.name in (".vscode", ".cursor"):
        return str(parent.parent)
    return str(parent)


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    inputs: InputResolver | None = None,
    workspace: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load every server entry from a config file (path) or a dict.

    ``inputs`` answers VS Code ``${input:id}`` placeholders: a dict id -> value, or a
    callable(InputSpec) -> str | None (asked once per id). ``workspace`` is
    ``${workspaceFolder}`` (default: the folder holding ``.vscode``/``.cursor``, else the
    file's folder, else the current directory). ``environ`` replaces ``os.environ`` for
    ``${VAR}``/``${env:VAR}``.

    A file that cannot be read or parsed raises :class:`~mcpsync.errors.ConfigError`;
    a wrong entry does not: it lands in :attr:`Config.errors` and the rest load.
    """
    if isinstance(source, Mapping):
        data: Any = source
        src = "<dict>"
        ws = str(workspace) if workspace is not None else os.getcwd()
    else:
        path = Path(os.path.expanduser(os.fspath(source)))
        src = str(source)
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise ConfigError(f"{src}: no such file") from None
        except OSError as exc:
            raise ConfigError(f"{src}: cannot read: {exc.strerror or exc}") from None
        data = parse_jsonc(text, src)
        ws = str(workspace) if workspace is not None else _default_workspace(path)

    servers, raw_inputs = _servers_section(data, src)
    specs = _parse_inputs(raw_inputs, src)
    expander = _Expander(src, os.environ if environ is None else environ, ws, specs, inputs)
    entries: dict[str, ServerEntry] = {}
    errors: list[ConfigEntryError] = []
    for name, spec in servers.items():
        try:
            entries[str(name)] = _parse_entry(str(name), spec, expander)
        except ConfigEntryError as exc:
            errors.append(exc)
    return Config(
        entries=entries,
        errors=errors,
        source=src,
        inputs=tuple(specs.values()),
        order=[str(n) for n in servers],
    )


def oauth_for_entry(entry: ServerEntry, **options: Any) -> Any:
    """An :class:`mcpsync.auth.OAuth` for an HTTP entry, from its ``auth``/``oauth`` settings.

    Use as ``auth_factory=`` (``Host(..., auth_factory=oauth_for_entry)``). Entries without
    settings get an OAuth object that registers itself (dynamic registration / client
    metadata) when the server answers 401; stdio entries get None. The entry's ``grant``
    picks the constructor (``OAuth``, ``OAuth.client_credentials``, ``.workload_identity``,
    ``.enterprise_managed``: :meth:`AuthSettings.oauth`). ``options`` go to it (``store=``,
    ``redirect=``, ``client_name=`` ...; the interactive ones only to the code flow).
    """
    if entry.is_stdio:
        return None
    return (entry.auth or AuthSettings()).oauth(**options)  # the entry's grant (entries.py)


def default_config_paths(workspace: str | os.PathLike[str] | None = None) -> list[Path]:
    """Where the common hosts keep their server lists (existing files only, most local first)."""
    home = Path.home()
    ws = Path(workspace) if workspace is not None else Path.cwd()
    candidates = [
        ws / ".vscode" / "mcp.json",
        ws / ".cursor" / "mcp.json",
        ws / ".mcp.json",
        home / ".cursor" / "mcp.json",
        Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
        / "Claude"
        / "claude_desktop_config.json",
        home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json",
    ]
    appdata = os.environ.get("APPDATA")
    if appdata:
        candidates.append(Path(appdata) / "Claude" / "claude_desktop_config.json")
    return [p for p in candidates if p.is_file()]
