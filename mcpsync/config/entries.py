"""The typed results of reading a config: :class:`ServerEntry` (one server, with its
``Session.connect`` keyword arguments), :class:`AuthSettings` (and the ``OAuth`` object
it describes: :meth:`AuthSettings.oauth`), :class:`InputSpec`, :class:`Config` (entries
plus per-entry errors) and :class:`ConfigEntryError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

__all__ = [
    "TRANSPORTS",
    "GRANTS",
    "InputResolver",
    "ConfigEntryError",
    "AuthSettings",
    "InputSpec",
    "ServerEntry",
    "Config",
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

#: the grants an ``auth`` object may name (``"grant"``); the first is the default
GRANTS = ("authorization_code", "client_credentials", "workload_identity", "enterprise_managed")

#: ``OAuth`` options that only a person's authorization uses (dropped for the other grants)
_INTERACTIVE_OPTIONS = frozenset(
    {
        "redirect",
        "redirect_uri",
        "client_name",
        "client_metadata_url",
        "offline_access",
        "application_type",
        "client_metadata",
        "authorization_timeout",
        "max_auth_attempts",
    }
)


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
    """OAuth client settings from an entry (Cursor ``auth``, VS Code / Gemini CLI / Claude
    Code ``oauth``, mcpsync ``auth``): the client, the grant and its inputs, DPoP.

    ``grant`` is one of :data:`GRANTS` (None: the authorization code flow, or the grant its
    keys imply); ``redirect`` an ``OAuth(redirect=)`` mode ("device": RFC 8628). The
    workload identity assertion and the enterprise ID token come from a file (re-read on
    each use) or an environment variable (read when needed, from the process environment).
    ``extra``: keys other hosts write that mcpsync does not use (Gemini CLI's
    ``authorizationUrl``, ``tokenUrl`` ...). ``repr`` never shows a secret.
    """

    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    scopes: tuple[str, ...] = ()
    redirect_uri: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    grant: str | None = None
    redirect: str | None = None
    issuer: str | None = None
    client_metadata_url: str | None = None
    assertion_file: str | None = None
    assertion_env: str | None = None
    id_token_file: str | None = None
    id_token_env: str | None = None
    idp_token_endpoint: str | None = None
    idp_issuer: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = field(default=None, repr=False)
    dpop: bool | str | None = None  # True, False or "auto" (None: OAuth's default, "auto")
    dpop_algorithm: str | None = None

    def __repr__(self) -> str:
        parts = [f"client_id={self.client_id!r}"]
        if self.client_secret:
            parts.append("client_secret=***")
        parts.append(f"scopes={self.scopes!r}")
        for name in (
            "grant", "redirect", "issuer", "assertion_file", "assertion_env", "id_token_file",
            "id_token_env", "idp_token_endpoint", "idp_issuer", "idp_client_id", "dpop",
            "dpop_algorithm",
        ):  # fmt: skip
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name}={value!r}")
        if self.idp_client_secret:
            parts.append("idp_client_secret=***")
        return "AuthSettings(" + ", ".join(parts) + ")"

    def oauth(self, **options: Any) -> Any:
        """The :class:`mcpsync.auth.OAuth` these settings describe (its grant's constructor).

        ``options`` go to it too (``store=``, ``redirect=``, ``client_name=``, ``timeout=``
        ...) and win over the settings; the options only a person's authorization uses
        (``redirect``, ``client_name`` ...) are dropped for the grants without one.
        """
        from ..auth import OAuth  # late: only entries that talk HTTP need the auth package

        common: dict[str, Any] = {}
        if self.scopes:
            common["scopes"] = list(self.scopes)
        for name in ("issuer", "dpop", "dpop_algorithm"):
            if getattr(self, name) is not None:
                common[name] = getattr(self, name)
        grant = self.grant or GRANTS[0]
        if grant == "authorization_code":
            kw = dict(common)
            for name in ("client_id", "client_secret", "redirect_uri", "redirect"):
                if getattr(self, name):
                    kw[name] = getattr(self, name)
            if self.client_metadata_url:
                kw["client_metadata_url"] = self.client_metadata_url
            return OAuth(**{**kw, **options})
        machine = {k: v for k, v in options.items() if k not in _INTERACTIVE_OPTIONS}
        if grant == "client_credentials":
            assert self.client_id is not None
            return OAuth.client_credentials(
                self.client_id, self.client_secret, **{**common, **machine}
            )
        if grant == "workload_identity":
            wif = dict(common, assertion_file=self.assertion_file, assertion_env=self.assertion_env)
            if self.client_id:
                wif["client_id"] = self.client_id
            return OAuth.workload_identity(**{**wif, **machine})
        assert grant == "enterprise_managed" and self.client_id is not None
        ent = dict(
            common,
            id_token_file=self.id_token_file,
            id_token_env=self.id_token_env,
            idp_token_endpoint=self.idp_token_endpoint,
            idp_issuer=self.idp_issuer,
            idp_client_id=self.idp_client_id,
            idp_client_secret=self.idp_client_secret,
        )
        return OAuth.enterprise_managed(self.client_id, self.client_secret, **{**ent, **machine})


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
    verify: bool | str | None = None  # HTTP: a CA bundle path, or False (None: the default)
    cert: str | tuple[str, str] | None = None  # HTTP: a client certificate (path or pair)
    #: the ``restart`` key: true/false or an object of RestartPolicy settings (None: not given)
    restart: bool | Mapping[str, Any] | None = None
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
            for key in ("verify", "cert"):
                if getattr(self, key) is not None:
                    kw[key] = getattr(self, key)
            auth = auth_factory(self) if auth_factory is not None else None
            if auth is not None:
                kw["auth"] = auth
        if self.timeout is not None:
            kw["timeout"] = self.timeout
        if self.connect_timeout is not None:
            kw["connect_timeout"] = self.connect_timeout
        if self.restart is not None:
            kw["restart"] = self.restart
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
        for key in ("verify", "cert"):
            if getattr(self, key) is not None:
                parts.append(f"{key}={getattr(self, key)!r}")
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
