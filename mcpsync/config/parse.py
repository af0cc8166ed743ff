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
    GRANTS,
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


#: the keys of an entry's ``auth`` / ``oauth`` object: name -> the spellings accepted
_AUTH_KEYS: dict[str, tuple[str, ...]] = {
    "client_id": ("client_id", "clientId", "CLIENT_ID"),
    "client_secret": ("client_secret", "clientSecret", "CLIENT_SECRET"),
    "redirect_uri": ("redirect_uri", "redirectUri", "REDIRECT_URI"),
    "scopes": ("scopes", "scope", "SCOPES"),
    "grant": ("grant", "grant_type", "grantType"),
    "redirect": ("redirect",),
    "issuer": ("issuer",),
    "client_metadata_url": ("client_metadata_url", "clientMetadataUrl"),
    "assertion_file": ("assertion_file", "assertionFile"),
    "assertion_env": ("assertion_env", "assertionEnv"),
    "id_token_file": ("id_token_file", "idTokenFile"),
    "id_token_env": ("id_token_env", "idTokenEnv"),
    "idp_token_endpoint": ("idp_token_endpoint", "idpTokenEndpoint"),
    "idp_issuer": ("idp_issuer", "idpIssuer"),
    "idp_client_id": ("idp_client_id", "idpClientId"),
    "idp_client_secret": ("idp_client_secret", "idpClientSecret"),
    "dpop": ("dpop",),
    "dpop_algorithm": ("dpop_algorithm", "dpopAlgorithm"),
    "callback_port": ("callback_port", "callbackPort"),  # Claude Code: the loopback port
    "enabled": ("enabled",),  # Gemini CLI: false turns OAuth off for the entry
}
#: keys other hosts write that mcpsync does not use (Gemini CLI): kept in ``extra``
_FOREIGN_AUTH_KEYS = (
    "authorizationUrl",
    "tokenUrl",
    "audiences",
    "tokenParamName",
    "registrationUrl",
)
#: the keys that belong to one grant only
_GRANT_KEYS = {
    "authorization_code": ("redirect", "redirect_uri", "callback_port", "client_metadata_url"),
    "workload_identity": ("assertion_file", "assertion_env"),
    "enterprise_managed": (
        "id_token_file", "id_token_env", "idp_token_endpoint", "idp_issuer", "idp_client_id",
        "idp_client_secret",
    ),
}  # fmt: skip
_FILE_KEYS = ("assertion_file", "id_token_file")
_REDIRECTS = ("auto", "device", "terminal", "loopback", "browser", "paste", "notebook", "headless")
_DPOP_ALGS = ("ES256", "ES384", "ES512", "EdDSA")  # what mcpsync.auth.dpop signs


def _parse_auth(spec: Mapping[str, Any], ex: _Expander, name: str) -> AuthSettings | None:
    key = "auth" if spec.get("auth") is not None else "oauth"
    value = spec.get(key)
    if value is None:
        return None

    def fail(field_name: str | None, problem: str) -> ConfigEntryError:
        where = f"{key}.{field_name}" if field_name else key
        return ConfigEntryError(ex.source, name, where, problem)

    if not isinstance(value, Mapping):
        raise fail(
            None,
            f"expected an object (client_id, client_secret, scopes ...), got {_type_name(value)}",
        )
    spelling = {k: norm for norm, keys in _AUTH_KEYS.items() for k in keys}
    found: dict[str, tuple[str, Any]] = {}  # name -> (the key as written, its value)
    extra: dict[str, Any] = {}
    for k, v in value.items():
        if k in _FOREIGN_AUTH_KEYS:
            extra[k] = v
            continue
        norm = spelling.get(k)
        if norm is None:
            known = ", ".join(_AUTH_KEYS)
            raise fail(str(k), f"unknown key (expected one of: {known})")
        if v is None:
            continue
        if norm in found:
            raise fail(k, f"given twice (also as {found[norm][0]!r}); give one")
        found[norm] = (k, v)

    def text(norm: str) -> str | None:
        if norm not in found:
            return None
        k, v = found[norm]
        if not isinstance(v, str):
            raise fail(k, f"expected a string, got {_type_name(v)}")
        v = ex.expand(v, name, f"{key}.{k}").strip()
        if not v:
            return None  # an empty placeholder: not given
        return _expand_user(v) if norm in _FILE_KEYS else v

    def one_of(norm: str, allowed: tuple[str, ...]) -> str | None:
        v = text(norm)
        if v is not None and v.replace("-", "_") not in allowed:
            shown = ", ".join(f'"{a}"' for a in allowed)
            raise fail(found[norm][0], f"expected one of {shown}, got {v!r}")
        return v.replace("-", "_") if v is not None else None

    enabled = found.get("enabled")
    if enabled is not None and not isinstance(enabled[1], bool):
        raise fail(enabled[0], f"expected true or false, got {_type_name(enabled[1])}")
    if enabled is not None and enabled[1] is False:
        return None

    # -- the grant: named, or implied by its keys
    grant = one_of("grant", GRANTS)
    implied = [
        g for g in ("workload_identity", "enterprise_managed") if set(_GRANT_KEYS[g]) & set(found)
    ]
    if grant is None and len(implied) == 1:
        grant = implied[0]
    effective = grant or GRANTS[0]
    for g, keys in _GRANT_KEYS.items():
        for norm in keys:
            if norm in found and g != effective:
                raise fail(
                    found[norm][0],
                    f'applies to "grant": "{g}" only; this entry\'s grant is "{effective}"',
                )

    out: dict[str, Any] = {n: text(n) for n in (
        "client_id", "client_secret", "redirect_uri", "issuer", "client_metadata_url",
        "assertion_file", "assertion_env", "id_token_file", "id_token_env",
        "idp_token_endpoint", "idp_issuer", "idp_client_id", "idp_client_secret",
    )}  # fmt: skip
    out["grant"] = grant
    out["redirect"] = one_of("redirect", _REDIRECTS)
    out["dpop_algorithm"] = one_of("dpop_algorithm", _DPOP_ALGS)
    if "dpop" in found:
        k, v = found["dpop"]
        if v not in (True, False, "auto"):
            raise fail(
                k,
                f'expected true, false or "auto", got {v!r}'
                if isinstance(v, str)
                else f'expected true, false or "auto", got {_type_name(v)}',
            )
        out["dpop"] = v
    if "callback_port" in found:
        k, port = found["callback_port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise fail(k, f"expected a port number (1-65535), got {_type_name(port)}")
        if out["redirect_uri"] is None:
            out["redirect_uri"] = f"http://localhost:{port}/callback"

    # -- what each grant needs
    def need(norm: str, why: str) -> None:
        if out.get(norm) is None:
            raise fail(_AUTH_KEYS[norm][0], f"missing; {why}")

    def exactly_one(a: str, b: str, what: str) -> None:
        given = [n for n in (a, b) if out.get(n) is not None]
        if len(given) != 1:
            problem = "both given; give one" if given else "missing"
            raise fail(
                a if not given else b,
                f"{problem}: {what} comes from {a!r} (a file) or {b!r} (an environment variable)",
            )

    if effective == "client_credentials":
        need("client_id", '"grant": "client_credentials" needs the client\'s id and secret')
        need("client_secret", '"grant": "client_credentials" needs the client\'s id and secret')
    elif effective == "workload_identity":
        exactly_one("assertion_file", "assertion_env", "the workload's identity token")
        if out["client_secret"] is not None:
            raise fail(
                found["client_secret"][0],
                "workload identity authenticates with the assertion, not a client secret",
            )
    elif effective == "enterprise_managed":
        need(
            "client_id",
            "enterprise-managed authorization needs the client registered at the authorization server",
        )
        exactly_one("id_token_file", "id_token_env", "the user's ID token")
        given = [n for n in ("idp_token_endpoint", "idp_issuer") if out[n] is not None]
        if len(given) != 1:
            problem = "both given; give one" if given else "missing"
            raise fail(
                "idp_token_endpoint" if not given else "idp_issuer",
                f"{problem}: the enterprise IdP is 'idp_token_endpoint' or 'idp_issuer'",
            )
    elif out["client_secret"] is not None and out["client_id"] is None:
        raise fail(found["client_secret"][0], "a client secret without a client_id")

    scopes: tuple[str, ...] = ()
    if "scopes" in found:
        k, v = found["scopes"]
        if isinstance(v, str):
            scopes = tuple(ex.expand(v, name, f"{key}.{k}").split())
        elif isinstance(v, list) and all(isinstance(s, str) for s in v):
            scopes = tuple(ex.expand(s, name, f"{key}.{k}") for s in v)
        else:
            raise fail(
                k, f"expected a list of strings or a space-separated string, got {_type_name(v)}"
            )
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
