"""One raw entry (a dict from any supported file shape) -> a :class:`ServerEntry`: transport
and type, command or URL, env, headers, timeouts, tool filters, auth settings, and VS Code
``inputs``; each mistake a :class:`ConfigEntryError` naming the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .entries import (
    _TYPE_ALIASES,
    TRANSPORTS,
    AuthSettings,
    ConfigEntryError,
    InputSpec,
    ServerEntry,
)
from .expand import _expand_user, _Expander, _load_env_file

if TYPE_CHECKING:
    from .entries import InputResolver

__all__ = ["parse_entry"]


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
    verify: bool | str | None = None
    cert: str | tuple[str, str] | None = None

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
        for key in ("headers", "verify", "cert"):
            if spec.get(key) not in (None, {}):
                raise fail(key, "only applies to HTTP servers; this entry runs a command")
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
        verify, cert = _parse_tls(spec, ex, name)

    timeout = get_seconds("timeout")
    connect_timeout = get_seconds("connect_timeout", "connectTimeout")
    lazy = get_bool("lazy")
    eager = get_bool("eager")
    if lazy is not None and eager is not None and lazy == eager:
        raise fail("lazy", f'"lazy": {str(lazy).lower()} contradicts "eager": {str(eager).lower()}')
    is_lazy = lazy if lazy is not None else (not eager if eager is not None else False)
    disabled = bool(get_bool("disabled")) or get_bool("enabled") is False
    restart = spec.get("restart")  # checked in full by mcpsync.RestartPolicy.of at connect
    if restart is not None and not isinstance(restart, bool | Mapping):
        what = "true, false or an object (maxAttempts, backoff, ...)"
        raise fail("restart", f"expected {what}, got {_type_name(restart)}")

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
        restart=dict(restart) if isinstance(restart, Mapping) else restart,
        auth=auth,
        verify=verify,
        cert=cert,
        include_tools=get_globs("includeTools"),
        exclude_tools=get_globs("excludeTools"),
        source=src,
        raw=dict(spec),
    )


def _parse_tls(
    spec: Mapping[str, Any], ex: _Expander, name: str
) -> tuple[bool | str | None, str | tuple[str, str] | None]:
    """``"verify"``: true, false or a CA bundle path; ``"cert"``: a client certificate
    path, or ``[cert, key]`` paths (``~`` and variables expanded)."""

    def path(key: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigEntryError(
                ex.source, name, key, f"expected a file path, got {_type_name(value)}"
            )
        return _expand_user(ex.expand(value, name, key))

    verify = spec.get("verify")
    if verify is not None and not isinstance(verify, bool):
        if not isinstance(verify, str):
            raise ConfigEntryError(
                ex.source,
                name,
                "verify",
                f"expected true, false or a CA bundle path, got {_type_name(verify)}",
            )
        verify = path("verify", verify)
    value = spec.get("cert")
    cert: str | tuple[str, str] | None = None
    if isinstance(value, list):
        if len(value) != 2:
            raise ConfigEntryError(
                ex.source, name, "cert", "expected a path or [certificate, key] paths"
            )
        cert = (path("cert[0]", value[0]), path("cert[1]", value[1]))
    elif value is not None:
        cert = path("cert", value)
    return verify, cert


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
