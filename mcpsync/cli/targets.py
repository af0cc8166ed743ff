"""What ``mcpsync`` connects to: a URL, a command after ``--``, ``CONFIG:ENTRY`` or
``--config FILE ENTRY`` (:func:`resolve_target` -> :class:`Target`), and the bring-up with
the command line's timeouts, headers and auth (:func:`_connect`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import ServerEntry, command_name, load_config, oauth_for_entry, parse_entry
from ..errors import CapabilityError, ConfigError
from .arguments import ConnectFailed, UsageError, _parse_headers, _parse_pairs

if TYPE_CHECKING:
    from .output import _Out

__all__ = ["Target", "resolve_target"]


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _split_config_target(text: str) -> tuple[str, str] | None:
    """``path/to/mcp.json:entry`` -> (path, entry) when the path part is a file."""
    path, sep, entry = text.rpartition(":")
    if sep and path and entry and os.path.isfile(os.path.expanduser(path)):
        return path, entry
    return None


def _not_a_target(word: str) -> str:
    """What to tell someone whose ``word`` is no URL, config file or ``CONFIG:ENTRY``."""
    path = word.rpartition(":")[0] if ":" in word and not word.endswith(":") else word
    if path.endswith((".json", ".jsonc", ".toml", ".yaml", ".yml")) or os.sep in path:
        where = os.path.abspath(os.path.expanduser(path))
        return f"no config file {path!r}: {where} does not exist"
    if shutil.which(word):
        return (
            f"{word!r} is a program: a server command goes after --, "
            f"e.g. mcpsync ... -- {word} ARGS"
        )
    return (
        f"cannot tell what {word!r} is: expected a URL (http://...), CONFIG:ENTRY, "
        "--config FILE ENTRY, or a server command after -- (e.g. -- python -m server)"
    )


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


def _token_store(ns: argparse.Namespace) -> Any:
    """Where the command line keeps OAuth tokens: the per-user file (default), the system
    keyring (--keyring), or memory only (--no-store: None)."""
    no_store, use_keyring = getattr(ns, "no_store", False), getattr(ns, "keyring", False)
    if no_store and use_keyring:
        raise UsageError("--no-store and --keyring contradict each other; give one")
    if no_store:
        return None
    if use_keyring:
        from ..auth.keyring_store import KeyringTokenStore

        try:
            store = KeyringTokenStore()
        except ConfigError:
            raise UsageError(
                "--keyring needs the keyring package: pip install 'mcpsync[keyring]'"
            ) from None
        store.check_available()
        return store
    from ..auth.storage import FileTokenStore, default_store_path

    return FileTokenStore(default_store_path())


def _auth_factory(ns: argparse.Namespace) -> Callable[[ServerEntry], Any]:
    """OAuth for HTTP entries that carry auth settings, or for all of them with --oauth;
    its tokens kept in the per-user file store unless --no-store (or --keyring: the system
    keyring). The store is made when the first entry needs OAuth."""

    device = getattr(ns, "device", False)  # --device: the RFC 8628 device grant, no browser
    options: dict[str, Any] = {"redirect": "device"} if device else {}
    made: list[Any] = []  # the one store, once made

    def factory(entry: ServerEntry) -> Any:
        if entry.auth is not None or getattr(ns, "oauth", False) or device:
            if not made:
                made.append(_token_store(ns))
            store = made[0]
            return oauth_for_entry(
                entry, **({"store": store} if store is not None else {}), **options
            )
        return None

    return factory


def _apply_tls(kwargs: dict[str, Any], ns: argparse.Namespace) -> None:
    """--cacert / --insecure -> ``verify``; --cert [--key] -> ``cert`` (over the entry's)."""
    if getattr(ns, "cacert", None) and getattr(ns, "insecure", False):
        raise UsageError("--cacert and --insecure contradict each other; give one")
    if getattr(ns, "cacert", None):
        kwargs["verify"] = os.path.expanduser(ns.cacert)
    elif getattr(ns, "insecure", False):
        kwargs["verify"] = False
    cert, key = getattr(ns, "cert", None), getattr(ns, "key", None)
    if key and not cert:
        raise UsageError("--key needs --cert")
    if cert:
        cert = os.path.expanduser(cert)
        kwargs["cert"] = (cert, os.path.expanduser(key)) if key else cert


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
            raise UsageError(_not_a_target(first))
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
    _apply_tls(kwargs, ns)
    for key in ("include_tools", "exclude_tools"):  # replace the entry's includeTools/excludeTools
        if getattr(ns, key, None):
            kwargs[key] = list(getattr(ns, key))
    return Target(kwargs, label), words


def _apply_timeouts(kwargs: dict[str, Any], ns: argparse.Namespace) -> None:
    if ns.timeout is not None:
        kwargs["timeout"] = None if ns.timeout <= 0 else ns.timeout
    if ns.connect_timeout is not None:
        kwargs["connect_timeout"] = ns.connect_timeout


def _import_client(kwargs: dict[str, Any]) -> None:
    """Import what the bring-up and the first results need, so that the timings ``inspect``
    shows are the server's (and the network's), not this process's imports."""
    import importlib

    from .. import typed as _typed

    _typed.types()  # the wire models (pydantic; each model built on its first use)
    if isinstance(kwargs.get("target"), list):
        importlib.import_module("..transports.stdio", __package__)
    elif isinstance(kwargs.get("target"), str):
        importlib.import_module("..transports.http.streamable", __package__)
        importlib.import_module("..transports.http.legacy_sse", __package__)


def _connect(target: Target, out: _Out, ns: argparse.Namespace) -> Any:
    from ..session import Session

    kwargs = dict(target.kwargs)
    # --connect-timeout bounds what the user waits for: these imports (0.3 s idle, seconds
    # under load) count against it, though the bring-up's phases do not show them
    kwargs["_since"] = time.monotonic()
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
    except Exception as exc:  # noqa: BLE001 - anything else in bring-up: connect failure
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
