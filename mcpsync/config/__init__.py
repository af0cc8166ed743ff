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
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

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

#: transports an entry may name (after normalisation), as Session.connect spells them
TRANSPORTS = ("auto", "stdio", "streamable-http", "sse")

_TYPE_ALIASES = {
    "stdio": "stdio",
    "local": "stdio",
    "http": "auto",  # VS Code: streamable HTTP first, legacy SSE as fallback
    "remote": "auto",
    "auto": "auto",
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamablehttp": "streamable-http",
    "sse": "sse",
}

InputResolver = Mapping[str, str] | Callable[["InputSpec"], "str | None"]


class ConfigEntryError(ConfigError):
    """One entry (or one field of it) is wrong; the other entries are unaffected."""

    def __init__(
        self, source: str, entry: str | None, field_name: str | None, problem: str
    ) -> None:
        self.source = source
        self.entry = entry
        self.field = field_name
        self.problem = problem
        where = source
        if entry is not None:
            where += f": server {entry!r}"
        if field_name:
            where += f", field {field_name!r}"
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True)
class AuthSettings:
    """OAuth client settings from an entry (Cursor ``auth``, VS Code ``oauth``, mcpsync ``auth``)."""

    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    redirect_uri: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        secret = ", client_secret=***" if self.client_secret else ""
        return f"AuthSettings(client_id={self.client_id!r}{secret}, scopes={self.scopes!r})"


@dataclass(frozen=True)
class InputSpec:
    """A VS Code ``inputs`` item: what to ask the user for ``${input:id}``."""

    id: str
    type: str = "promptString"
    description: str = ""
    password: bool = False
    default: str | None = None
    options: tuple[str, ...] = ()


@dataclass(frozen=True, repr=False)
class ServerEntry:
    """One server, ready to connect: argv (stdio) or url (HTTP) plus its settings."""

    name: str
    transport: str  # one of TRANSPORTS
    argv: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    connect_timeout: float | None = None
    lazy: bool = False
    disabled: bool = False
    auth: AuthSettings | None = None
    include_tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()
    source: str = "<dict>"
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_stdio(self) -> bool:
        return self.argv is not None

    @property
    def target(self) -> str | list[str]:
        """What ``Session.connect`` takes first: an argv list or a URL."""
        return list(self.argv) if self.argv is not None else str(self.url)

    def describe(self) -> str:
        """One line for reports: the command line or the URL (no env, no headers)."""
        if self.argv is not None:
            return " ".join(self.argv)
        return str(self.url)

    def connect_kwargs(
        self,
        *,
        auth_factory: Callable[[ServerEntry], Any] | None = None,
        **overrides: Any,
    ) -> dict[str, Any]:
        """Keyword arguments for ``Session.connect(**kwargs)``.

        Only settings the entry states are included, so the Session's defaults apply to
        the rest. ``auth_factory(entry)`` builds the ``auth=`` object of HTTP entries (it
        may return None; see :func:`oauth_for_entry`); ``overrides`` win over the entry
        (e.g. ``timeout=5``).
        """
        kw: dict[str, Any] = {"target": self.target, "name": self.name, "transport": self.transport}
        if self.argv is not None:
            if self.env:
                kw["env"] = dict(self.env)
            if self.cwd:
                kw["cwd"] = self.cwd
        else:
            if self.headers:
                kw["headers"] = dict(self.headers)
            auth = auth_factory(self) if auth_factory is not None else None
            if auth is not None:
                kw["auth"] = auth
        if self.timeout is not None:
            kw["timeout"] = self.timeout
        if self.connect_timeout is not None:
            kw["connect_timeout"] = self.connect_timeout
        if self.include_tools:
            kw["include_tools"] = list(self.include_tools)
        if self.exclude_tools:
            kw["exclude_tools"] = list(self.exclude_tools)
        kw.update(overrides)
        return kw

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}", f"transport={self.transport!r}"]
        if self.argv is not None:
            parts.append(f"argv={list(self.argv)!r}")
        else:
            parts.append(f"url={self.url!r}")
        if self.env:
            parts.append("env={" + ", ".join(f"{k!r}: '***'" for k in self.env) + "}")
        if self.cwd:
            parts.append(f"cwd={self.cwd!r}")
        if self.headers:
            parts.append("headers={" + ", ".join(f"{k!r}: '***'" for k in self.headers) + "}")
        for name in ("timeout", "connect_timeout"):
            if getattr(self, name) is not None:
                parts.append(f"{name}={getattr(self, name)!r}")
        if self.lazy:
            parts.append("lazy=True")
        if self.disabled:
            parts.append("disabled=True")
        if self.auth is not None:
            parts.append(f"auth={self.auth!r}")
        for key in ("include_tools", "exclude_tools"):
            if getattr(self, key):
                parts.append(f"{key}={list(getattr(self, key))!r}")
        return "ServerEntry(" + ", ".join(parts) + ")"


@dataclass
class Config:
    """The entries that loaded (in file order) and the errors of those that did not."""

    entries: dict[str, ServerEntry]
    errors: list[ConfigEntryError]
    source: str
    inputs: tuple[InputSpec, ...] = ()
    order: list[str] = field(default_factory=list)  # every entry name, file order

    def __getitem__(self, name: str) -> ServerEntry:
        if name in self.entries:
            return self.entries[name]
        for err in self.errors:
            if err.entry == name:
                raise err
        known = ", ".join(repr(n) for n in self.names()) or "none"
        raise ConfigError(f"{self.source}: no server named {name!r} (servers: {known})")

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[ServerEntry]:
        return iter(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> list[str]:
        """Every entry name in the file (file order), loaded or not."""
        if self.order:
            return list(self.order)
        names = list(self.entries)
        names += [e.entry for e in self.errors if e.entry is not None and e.entry not in names]
        return names

    def raise_for_errors(self) -> None:
        """Raise the first entry error (with a count of the others), if any."""
        if self.errors:
            first = self.errors[0]
            more = len(self.errors) - 1
            if more:
                raise ConfigError(f"{first} (and {more} more entry error{'s' * (more > 1)})")
            raise first


# --------------------------------------------------------------------------- JSONC


def parse_jsonc(text: str, source: str = "<string>") -> Any:
    """Parse JSON that may carry ``//`` and ``/* */`` comments and trailing commas (VS Code)."""
    cleaned = _strip_trailing_commas(_strip_comments(text))
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


def _strip_comments(text: str) -> str:
    """Replace comments with spaces (newlines kept, so error positions stay true)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _strip_trailing_commas(text: str) -> str:
    chars = list(text)
    in_str = False
    i, n = 0, len(chars)
    while i < n:
        c = chars[i]
        if in_str:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == ",":
            j = i + 1
            while j < n and chars[j] in " \t\r\n":
                j += 1
            if j < n and chars[j] in "}]":
                chars[i] = " "
        i += 1
    return "".join(chars)


# --------------------------------------------------------------------------- variables

_VAR_RE = re.compile(r"\$\{([^}]*)\}")
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Expander:
    """Expands ``${...}`` in one file's strings; remembers input answers across entries."""

    def __init__(
        self,
        source: str,
        environ: Mapping[str, str],
        workspace: str,
        input_specs: Mapping[str, InputSpec],
        inputs: InputResolver | None,
    ) -> None:
        self.source = source
        self.environ = environ
        self.workspace = workspace
        self.input_specs = input_specs
        self.inputs = inputs
        self.answers: dict[str, str] = {}

    def expand(self, value: str, entry: str, field_name: str) -> str:
        def repl(m: re.Match[str]) -> str:
            return self._resolve(m.group(1), entry, field_name)

        return _VAR_RE.sub(repl, value)

    def _fail(self, entry: str, field_name: str, problem: str) -> ConfigEntryError:
        return ConfigEntryError(self.source, entry, field_name, problem)

    def _resolve(self, token: str, entry: str, field_name: str) -> str:
        if token.startswith("env:"):
            return self._env(token[4:], None, entry, field_name, token)
        if token.startswith("input:"):
            return self._input(token[6:], entry, field_name)
        predefined = {
            "workspaceFolder": self.workspace,
            "workspaceFolderBasename": os.path.basename(self.workspace.rstrip(os.sep)),
            "userHome": str(Path.home()),
            "pathSeparator": os.sep,
            "/": os.sep,
        }
        if token in predefined:
            return predefined[token]
        name, sep, default = token.partition(":-")
        if _PLAIN_NAME.match(name):
            return self._env(name, default if sep else None, entry, field_name, token)
        raise self._fail(
            entry,
            field_name,
            f"unsupported variable ${{{token}}} (expected ${{VAR}}, ${{VAR:-default}}, ${{env:VAR}}, "
            "${input:id}, ${workspaceFolder}, ${workspaceFolderBasename}, ${userHome}, ${pathSeparator})",
        )

    def _env(self, name: str, default: str | None, entry: str, field_name: str, token: str) -> str:
        value = self.environ.get(name)
        if value is not None:
            return value
        if default is not None:
            return default
        raise self._fail(
            entry,
            field_name,
            f"environment variable {name} is not set (used as ${{{token}}}); set it or give a default "
            f"with ${{{name}:-default}}",
        )

    def _input(self, input_id: str, entry: str, field_name: str) -> str:
        if input_id in self.answers:
            return self.answers[input_id]
        spec = self.input_specs.get(input_id, InputSpec(id=input_id))
        value: str | None = None
        if isinstance(self.inputs, Mapping):
            value = self.inputs.get(input_id)
        elif callable(self.inputs):
            value = self.inputs(spec)
        if value is None:
            value = spec.default
        if value is None:
            what = f" ({spec.description})" if spec.description else ""
            declared = "" if input_id in self.input_specs else ' (not declared in "inputs")'
            raise self._fail(
                entry,
                field_name,
                f"no value for ${{input:{input_id}}}{what}{declared}; pass it with "
                f"inputs={{{input_id!r}: ...}} (or --input {input_id}=... on the command line)",
            )
        if not isinstance(value, str):
            raise self._fail(
                entry,
                field_name,
                f"input {input_id!r} resolved to a {type(value).__name__}, expected a string",
            )
        self.answers[input_id] = value
        return value


def _expand_user(path: str) -> str:
    return os.path.expanduser(path) if path.startswith("~") else path


# --------------------------------------------------------------------------- entries


def _type_name(value: Any) -> str:
    return {
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _load_env_file(path: str, source: str, entry: str) -> dict[str, str]:
    """Read a dotenv file: KEY=VALUE lines, ``export`` prefix, quotes, ``#`` comments."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigEntryError(
            source, entry, "envFile", f"cannot read {path}: {exc.strerror or exc}"
        ) from None
    result: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not _PLAIN_NAME.match(key):
            raise ConfigEntryError(
                source, entry, "envFile", f"{path} line {lineno}: expected KEY=VALUE"
            )
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            quote = value[0]
            value = value[1:-1]
            if quote == '"':
                value = value.replace("\\n", "\n").replace('\\"', '"')
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        result[key] = value
    return result


def parse_entry(
    name: str,
    spec: Mapping[str, Any],
    *,
    source: str = "<dict>",
    environ: Mapping[str, str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    inputs: InputResolver | None = None,
    input_specs: Mapping[str, InputSpec] | None = None,
) -> ServerEntry:
    """Validate one entry and resolve its variables; raise :class:`ConfigEntryError` if wrong."""
    expander = _Expander(
        source,
        os.environ if environ is None else environ,
        str(workspace) if workspace is not None else os.getcwd(),
        input_specs or {},
        inputs,
    )
    return _parse_entry(name, spec, expander)


def _parse_entry(name: str, spec: Any, ex: _Expander) -> ServerEntry:
    src = ex.source

    def fail(field_name: str | None, problem: str) -> ConfigEntryError:
        return ConfigEntryError(src, name, field_name, problem)

    if not isinstance(spec, Mapping):
        raise fail(None, f'expected an object with "command" or "url", got {_type_name(spec)}')

    def get_str(key: str, *, expand_user: bool = False) -> str | None:
        value = spec.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise fail(key, f"expected a string, got {_type_name(value)}")
        value = ex.expand(value, name, key)
        return _expand_user(value) if expand_user else value

    def get_str_map(key: str) -> dict[str, str]:
        value = spec.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise fail(key, f"expected an object of name: string pairs, got {_type_name(value)}")
        out: dict[str, str] = {}
        for k, v in value.items():
            if v is None:
                continue  # VS Code: null unsets a variable; nothing to pass
            if isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, int | float):
                v = str(v)
            if not isinstance(v, str):
                raise fail(f"{key}.{k}", f"expected a string, got {_type_name(v)}")
            out[str(k)] = ex.expand(v, name, f"{key}.{k}")
        return out

    def get_seconds(*keys: str) -> float | None:
        for key in keys:
            value = spec.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise fail(key, f"expected a positive number of seconds, got {_type_name(value)}")
            return float(value)
        return None

    def get_globs(key: str) -> tuple[str, ...]:
        value = spec.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail(key, f"expected a tool name glob or a list of them, got {_type_name(value)}")
        return tuple(ex.expand(v, name, key) for v in value)

    def get_bool(key: str) -> bool | None:
        value = spec.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise fail(key, f"expected true or false, got {_type_name(value)}")
        return value

    # -- transport
    transport: str | None = None
    for key in ("transport", "type"):
        value = spec.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or value.lower() not in _TYPE_ALIASES:
            allowed = '"stdio", "http", "sse", "streamable-http"'
            if key == "transport":
                allowed = ", ".join(f'"{t}"' for t in TRANSPORTS)
            got = repr(value) if isinstance(value, str) else _type_name(value)
            raise fail(key, f"expected one of {allowed}, got {got}")
        transport = _TYPE_ALIASES[value.lower()]
        break

    command = get_str("command", expand_user=True)
    url_key = next((k for k in ("url", "serverUrl", "httpUrl") if spec.get(k) is not None), "url")
    url = get_str(url_key)
    if url_key == "httpUrl" and transport is None:
        transport = "streamable-http"

    if command is not None and url is not None:
        raise fail(None, 'has both "command" and "url"; expected one of them')
    if command is None and url is None:
        if transport == "stdio":
            raise fail("command", "missing; a stdio server needs the program to run")
        if transport in ("auto", "streamable-http", "sse"):
            raise fail("url", "missing; an HTTP server needs its URL")
        raise fail(
            None, 'expected "command" (a local server) or "url" (a remote server); found neither'
        )

    argv: tuple[str, ...] | None = None
    env: dict[str, str] = {}
    cwd: str | None = None
    headers: dict[str, str] = {}
    auth: AuthSettings | None = None

    if command is not None:
        if transport not in (None, "stdio"):
            raise fail(
                "type",
                f'"command" runs a local process but the transport is {transport!r}; use "stdio" or give a "url"',
            )
        transport = "stdio"
        if not command.strip():
            raise fail("command", "is empty; expected the program to run")
        args_value = spec.get("args", [])
        if args_value is None:
            args_value = []
        if not isinstance(args_value, list):
            raise fail("args", f"expected a list of strings, got {_type_name(args_value)}")
        args: list[str] = []
        for i, a in enumerate(args_value):
            if isinstance(a, int | float) and not isinstance(a, bool):
                a = str(a)
            if not isinstance(a, str):
                raise fail(f"args[{i}]", f"expected a string, got {_type_name(a)}")
            a = ex.expand(a, name, f"args[{i}]")
            if a == "~" or a.startswith("~/"):
                a = os.path.expanduser(a)
            args.append(a)
        argv = (command, *args)
        env_file = get_str("envFile", expand_user=True)
        if env_file:
            if not os.path.isabs(env_file):
                env_file = os.path.join(ex.workspace, env_file)
            env.update(_load_env_file(env_file, src, name))
        env.update(get_str_map("env"))
        cwd = get_str("cwd", expand_user=True)
        if cwd is not None and not cwd.strip():
            raise fail("cwd", "is empty; expected a directory")
        if spec.get("headers") not in (None, {}):
            raise fail("headers", "only applies to HTTP servers; this entry runs a command")
    else:
        assert url is not None
        if transport is None:
            transport = "auto"
        if transport == "stdio":
            raise fail("type", '"stdio" needs a "command"; this entry gives a "url"')
        if not re.match(r"^https?://[^/\s]+", url):
            shown = url.split("?")[0]  # a query string may carry a key
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise fail(url_key, f"expected an http:// or https:// URL, got {shown!r}")
        headers = get_str_map("headers")
        for key in ("command", "args", "env", "envFile", "cwd"):
            if spec.get(key) not in (None, [], {}):
                raise fail(key, 'only applies to local (stdio) servers; this entry has a "url"')
        auth = _parse_auth(spec, ex, name)

    timeout = get_seconds("timeout")
    connect_timeout = get_seconds("connect_timeout", "connectTimeout")
    lazy = get_bool("lazy")
    eager = get_bool("eager")
    if lazy is not None and eager is not None and lazy == eager:
        raise fail("lazy", f'"lazy": {str(lazy).lower()} contradicts "eager": {str(eager).lower()}')
    is_lazy = lazy if lazy is not None else (not eager if eager is not None else False)
    disabled = bool(get_bool("disabled")) or get_bool("enabled") is False

    return ServerEntry(
        name=name,
        transport=transport,
        argv=argv,
        url=url,
        env=env,
        cwd=cwd,
        headers=headers,
        timeout=timeout,
        connect_timeout=connect_timeout,
        lazy=is_lazy,
        disabled=disabled,
        auth=auth,
        include_tools=get_globs("includeTools"),
        exclude_tools=get_globs("excludeTools"),
        source=src,
        raw=dict(spec),
    )


def _parse_auth(spec: Mapping[str, Any], ex: _Expander, name: str) -> AuthSettings | None:
    key = "auth" if spec.get("auth") is not None else "oauth"
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigEntryError(
            ex.source,
            name,
            key,
            f"expected an object (client_id, client_secret, scopes), got {_type_name(value)}",
        )
    aliases = {
        "client_id": ("client_id", "clientId", "CLIENT_ID"),
        "client_secret": ("client_secret", "clientSecret", "CLIENT_SECRET"),
        "redirect_uri": ("redirect_uri", "redirectUri", "REDIRECT_URI"),
        "scopes": ("scopes", "scope", "SCOPES"),
    }
    found: dict[str, Any] = {}
    used: set[str] = set()
    for norm, keys in aliases.items():
        for k in keys:
            if k in value and value[k] is not None:
                found[norm] = (k, value[k])
                used.add(k)
                break
    out: dict[str, Any] = {}
    for norm in ("client_id", "client_secret", "redirect_uri"):
        if norm in found:
            k, v = found[norm]
            if not isinstance(v, str):
                raise ConfigEntryError(
                    ex.source, name, f"{key}.{k}", f"expected a string, got {_type_name(v)}"
                )
            out[norm] = ex.expand(v, name, f"{key}.{k}")
    scopes: tuple[str, ...] = ()
    if "scopes" in found:
        k, v = found["scopes"]
        if isinstance(v, str):
            scopes = tuple(ex.expand(v, name, f"{key}.{k}").split())
        elif isinstance(v, list) and all(isinstance(s, str) for s in v):
            scopes = tuple(ex.expand(s, name, f"{key}.{k}") for s in v)
        else:
            raise ConfigEntryError(
                ex.source,
                name,
                f"{key}.{k}",
                f"expected a list of strings or a space-separated string, got {_type_name(v)}",
            )
    extra = {k: v for k, v in value.items() if k not in used}
    return AuthSettings(scopes=scopes, extra=extra, **out)


# --------------------------------------------------------------------------- files


def _parse_inputs(value: Any, source: str) -> dict[str, InputSpec]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ConfigError(f'{source}: "inputs" must be a list, got {_type_name(value)}')
    specs: dict[str, InputSpec] = {}
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            raise ConfigError(f'{source}: inputs[{i}] must be an object with a string "id"')
        default = item.get("default")
        options = item.get("options") or ()
        specs[item["id"]] = InputSpec(
            id=item["id"],
            type=str(item.get("type", "promptString")),
            description=str(item.get("description", "")),
            password=bool(item.get("password", False)),
            default=default if isinstance(default, str) else None,
            options=tuple(
                o
                if isinstance(o, str)
                else str(o.get("value", ""))
                if isinstance(o, Mapping)
                else str(o)
                for o in options
            ),
        )
    return specs


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
    metadata) when the server answers 401; stdio entries get None. ``options`` go to
    ``OAuth`` (``store=``, ``redirect=``, ``client_name=`` ...).
    """
    if entry.is_stdio:
        return None
    from ..auth import OAuth  # late: only entries that talk HTTP need the auth package

    settings = entry.auth
    kwargs: dict[str, Any] = {}
    if settings is not None:
        if settings.client_id:
            kwargs["client_id"] = settings.client_id
        if settings.client_secret:
            kwargs["client_secret"] = settings.client_secret
        if settings.scopes:
            kwargs["scopes"] = list(settings.scopes)
        if settings.redirect_uri:
            kwargs["redirect_uri"] = settings.redirect_uri
    kwargs.update(options)
    return OAuth(**kwargs)


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


# -- naming a server from its command line ---------------------------------------------------

#: per kind of program: its options that take a value (``-X dev``, ``--from pkg``, ``-e K=V``)
_PYTHON_VALUES = frozenset({"-m", "-c", "-X", "-W", "-Q"})
_NODE_VALUES = frozenset({
    "-e", "--eval", "-p", "--print", "-r", "--require", "--import", "--loader",
    "--experimental-loader", "--env-file", "-C", "--conditions", "--inspect-port", "--title",
})  # fmt: skip
_RUNNER_VALUES = frozenset({
    "-p", "--package", "-c", "--call", "--registry", "--cache", "--userconfig", "--from",
    "--with", "--with-editable", "--with-requirements", "--python", "--directory", "--project",
    "--index", "--index-url", "--extra-index-url", "--env-file", "--spec", "-w", "--workspace",
    "--cwd", "--config",
})  # fmt: skip
_DOCKER_VALUES = frozenset({
    "-e", "--env", "--env-file", "-v", "--volume", "--name", "-p", "--publish", "--mount",
    "--network", "-w", "--workdir", "-u", "--user", "--entrypoint", "--platform", "-l", "--label",
    "-m", "--memory", "--cpus", "-h", "--hostname", "--add-host", "--pull",
})  # fmt: skip
_INTERPRETERS = frozenset({"node", "nodejs", "bun", "deno", "tsx", "ts-node", "python", "pythonw", "py", "pypy"})  # fmt: skip
#: file and folder names that say nothing about the server: look one folder up
_GENERIC = frozenset({
    "index", "main", "server", "cli", "app", "__main__", "__init__", "run", "start", "bin", "dist",
    "build", "lib", "out", "src", "esm", "cjs", "scripts", "node_modules", "site-packages", "mcp",
})  # fmt: skip
_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".py", ".pyz", ".pyw", ".jsx", ".tsx")  # fmt: skip


def _program(word: str) -> str:
    """``/usr/bin/python3.12`` -> ``python``; ``C:\\...\\npx.cmd`` -> ``npx``."""
    base = re.split(r"[\\/]", word)[-1].lower()
    for suffix in (".exe", ".cmd", ".bat", ".ps1"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return re.sub(r"^(python|pypy)[0-9.]*$", r"\1", base)


def _package(spec: str) -> str:
    """``@scope/pkg@1.2`` -> ``pkg``; ``pkg==1.0`` / ``pkg[extra]`` -> ``pkg``; a git URL -> its repo."""
    spec = spec.strip()
    if "://" in spec or spec.startswith("git+"):  # git+https://host/org/repo.git@v1#egg=x
        last = re.split(r"[/:]", spec.split("#", 1)[0].rstrip("/"))[-1]
        last = last.split("@", 1)[0]
        return last[:-4] if last.endswith(".git") else last
    if spec.startswith("@") and "/" in spec:  # a scoped npm package
        spec = spec.split("/", 1)[1]
    return re.split(r"[@=<>~!\[; ]", spec, maxsplit=1)[0] or spec


def _from_path(path: str) -> str:
    """The script's name, or the first folder above it that is not generic (dist, src ...)."""
    parts = [p for p in re.split(r"[\\/]", path) if p not in ("", ".", "..")]
    if not parts:
        return path
    stem = parts[-1]
    for suffix in _SCRIPT_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if stem.lower() not in _GENERIC:
        return stem
    for folder in reversed(parts[:-1]):
        if folder.lower() not in _GENERIC and not folder.startswith("@"):
            return folder
    return stem


def _operands(args: Sequence[str], takes_value: frozenset[str]) -> tuple[dict[str, str], list[str]]:
    """The leading options (with their values) and the words from the first operand on."""
    options: dict[str, str] = {}
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            return options, list(args[i + 1 :])
        if not word.startswith("-") or word == "-":
            return options, list(args[i:])
        key, eq, value = word.partition("=")
        if not eq and key in takes_value and i + 1 < len(args):
            value = args[i + 1]
            i += 1
        options[key] = value
        i += 1
    return options, []


def command_name(argv: Sequence[str]) -> str:
    """A name for the server ``argv`` starts: the package or script behind the interpreter
    or runner, not "node" or "python".

    ``node …/pkg/dist/index.js`` -> ``pkg``; ``npx -y @scope/pkg@1`` -> ``pkg``;
    ``uvx mcp-server-git`` -> ``mcp-server-git``; ``python weather/server.py`` and
    ``uv --directory …/weather run server.py`` -> ``weather``; ``python -m weather_mcp`` ->
    ``weather_mcp`` (``python -m pkg.server`` -> ``pkg``); ``docker run … mcp/github`` ->
    ``github``; anything else: the program's own name (``mcp-server-fetch``).
    ``Session.connect`` names a stdio session (and its transport, threads and the
    ``mcpsync.server.<name>`` logger) with it when no name is given.
    """
    words = [str(w) for w in argv]
    directory = ""  # uv --directory D: where a generic script name gets its name from
    for _ in range(4):  # runners nest: uv run python -m x, cmd /c npx ..., npm exec -- pkg
        if not words:
            break
        program, rest = _program(words[0]), words[1:]
        if program == "cmd" and rest[:1] and rest[0].lower() in ("/c", "/k"):
            words = rest[1:]
            continue
        if program in ("npx", "pnpx", "bunx", "uvx"):
            options, tail = _operands(rest, _RUNNER_VALUES)
            spec = tail[0] if tail else options.get("--from") or options.get("--package")
            return _package(spec) if spec else program
        if program in ("npm", "pnpm", "yarn", "uv", "pipx"):
            options, tail = _operands(rest, _RUNNER_VALUES)
            sub, tail = (tail[0], tail[1:]) if tail else ("", [])
            if program == "uv" and sub == "tool" and tail[:1] == ["run"]:
                sub, tail = "x", tail[1:]
            if program == "uv" and sub == "run":  # uv run [python] script.py | -m mod | a tool
                directory = options.get("--directory") or options.get("--project") or ""
                more, tail = _operands(tail, _RUNNER_VALUES)
                directory = more.get("--directory") or more.get("--project") or directory
                words = tail
                continue
            if sub in ("exec", "dlx", "x") or (program == "pipx" and sub == "run"):
                options, tail = _operands(tail, _RUNNER_VALUES)
                spec = tail[0] if tail else options.get("--package") or options.get("--spec")
                return _package(spec) if spec else program
            return program
        if program in _INTERPRETERS:
            if program in ("deno", "bun") and rest[:1] and rest[0] in ("run", "x"):
                rest = rest[1:]
            python = program in ("python", "pythonw", "py", "pypy")
            options, tail = _operands(rest, _PYTHON_VALUES if python else _NODE_VALUES)
            if python and options.get("-m"):
                parts = [p for p in options["-m"].split(".") if p]
                while len(parts) > 1 and parts[-1].lower() in _GENERIC:
                    parts.pop()
                return parts[-1] if parts else program
            if tail and not {"-c", "-e", "--eval", "-p", "--print"} & options.keys():
                return _from_path(f"{directory}/{tail[0]}" if directory else tail[0])
            return program
        if program in ("docker", "podman") and rest[:1] == ["run"]:
            options, tail = _operands(rest[1:], _DOCKER_VALUES)
            if options.get("--name"):
                return options["--name"]
            if tail:
                image = tail[0].split("@", 1)[0].rsplit("/", 1)[-1]
                return image.split(":", 1)[0] or program
            return program
        return _from_path(f"{directory}/{words[0]}" if directory else words[0])
    return _program(str(argv[0])) if argv else "server"
