"""Smoke-test every entry of a config: bring it up, list, call, close; report each entry.

Owns: :func:`run` (the library behind ``mcpsync smoke``), the per-entry runner
:func:`run_entry` (what an executor's worker runs), the picklable results
(:class:`SmokeReport`, :class:`EntryResult`, :class:`CallResult`), the failure classes with
their exit codes, and the JUnit XML writer.

Each entry runs on its own: by default in a thread pool of ``parallel`` threads, or on
any ``concurrent.futures.Executor`` (a process pool, ``dask.distributed.Client
.get_executor()``). Bring-up, calls and close all happen in the worker; only the
:class:`EntryResult` (plain data) travels back. One entry failing never stops the
others, and the whole run is bounded: an entry whose worker gives no result within its
bound becomes a ``timeout`` failure.

Failure classes (``EntryResult.failure``) and the exit code ``mcpsync smoke`` returns
when every failed entry is of that class (entries failing in several classes: 3):

=========  ====  ==========================================================
class      exit  meaning
=========  ====  ==========================================================
tool       1     a ``--call`` failed (``isError``, JSON-RPC error, no such tool)
connect    3     the server could not be reached or the connection was lost
config     4     the config entry did not parse
spawn      5     the server process could not start or exited at start-up
auth       6     authorization failed or would need a person (``--stored-auth-only``)
protocol   7     the server broke the protocol (handshake, garbage, invalid schema)
timeout    8     no answer in time (bring-up or a call)
worker     9     the worker running the entry died (process killed, ``os._exit``)
drift      10    ``--snapshot DIR``: tools/resources/prompts differ from the snapshot
=========  ====  ==========================================================

Exit code 0: every enabled entry came up and every call passed; 2: usage error (bad
command line, unreadable config file); 130: interrupted.

The package: ``results`` (the picklable results, failure classes, exit codes),
``runner`` (:class:`SmokeOptions` and :func:`run_entry`, what a worker runs), ``executors``
(running every entry on an executor with bounds, retries and clean-up), ``junit`` (the
JUnit XML writer); here: :func:`run` itself, snapshots and consent. The call is
``mcpsync.smoke.run(config, calls=...)``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, ConfigEntryError, ServerEntry, load_config
from ..errors import ConfigError
from .executors import _close_active, _run_all, stop_process_pool, worker_initializer
from .junit import write_junit_xml
from .results import (
    EXIT_CODES,
    EXIT_MIXED,
    FAILURE_CLASSES,
    CallResult,
    EntryResult,
    SmokeReport,
    _error_text,
    classify,
)
from .runner import SmokeOptions, run_entry

if TYPE_CHECKING:
    from ..auth.storage import TokenStoreSpec

__all__ = [
    "run",
    "run_entry",
    "SmokeOptions",
    "SmokeReport",
    "EntryResult",
    "CallResult",
    "FAILURE_CLASSES",
    "EXIT_CODES",
    "EXIT_MIXED",
    "classify",
    "write_junit_xml",
    "worker_initializer",
    "stop_process_pool",
]

log = logging.getLogger("mcpsync.smoke")


def _store_spec(store: str | os.PathLike[str] | TokenStoreSpec | None) -> TokenStoreSpec | None:
    """A path is a file store; a spec (or None) goes to the workers as it is."""
    if store is None or not isinstance(store, str | os.PathLike):
        return store
    from ..auth.storage import TokenStoreSpec

    return TokenStoreSpec.file(store)


def _config_of(config: Any, inputs: Any) -> Config | list[ServerEntry]:
    if isinstance(config, str | Path | Mapping):
        return load_config(config, inputs=inputs)
    if isinstance(config, Config):
        return config
    return list(config)


def run(
    config: str | Path | Mapping[str, Any] | Config | Iterable[ServerEntry],
    *,
    executor: Executor | None = None,
    calls: Sequence[str | tuple[str, Mapping[str, Any] | None]] = (),
    parallel: int = 8,
    consent: Callable[[ServerEntry], bool] | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    strict: bool = False,
    oauth: bool = False,
    stored_auth_only: bool = False,
    token_store: str | os.PathLike[str] | TokenStoreSpec | None = None,
    listing: bool = False,
    snapshot_dir: str | os.PathLike[str] | None = None,
    inputs: Any = None,
    log_server_messages: bool = False,
    include_tools: Sequence[str] = (),
    exclude_tools: Sequence[str] = (),
) -> SmokeReport:
    """Smoke-test every entry of ``config``; returns a :class:`SmokeReport` (never raises for an entry).

    ``config``: a path, a dict, a :class:`~mcpsync.config.Config` or ServerEntry objects.
    ``executor``: any ``concurrent.futures.Executor``; each entry's bring-up, calls and
    close run in one of its workers (default: a pool of ``parallel`` threads). On any
    executor at most ``parallel`` entries are in flight at once (the next is submitted as
    one finishes), each bounded from its submission. A process
    pool whose worker dies has the entries it lost run once more, one at a time, in a fresh
    one-worker pool (a new one only after an entry breaks it), so only the entry that kills
    its worker fails (class ``worker``).
    ``calls``: tool names, or ``(tool, arguments)``, called on every server offering them.
    ``consent(entry) -> bool`` is asked here, one entry at a time, before anything starts.
    ``strict``: each tool's schemas must be valid JSON Schema (results are always checked
    against ``outputSchema``). ``token_store``: where OAuth tokens live, a file path or a
    :class:`~mcpsync.auth.TokenStoreSpec` (``TokenStoreSpec.keyring()``: the system
    keyring), opened by each worker in its own process (None: memory, per entry).
    ``stored_auth_only``: HTTP entries use the tokens in
    ``token_store`` and fail with class ``auth`` rather than ask a person.
    ``listing``: keep each server's tools/resources/prompts (``EntryResult.listing``).
    ``snapshot_dir``: compare each listing with ``DIR/<entry>.json`` (written when absent);
    a difference is an entry failure of class ``drift``.
    ``include_tools`` / ``exclude_tools``: tool name globs that replace every entry's
    ``includeTools`` / ``excludeTools`` (as on the command line).
    """
    t0 = time.perf_counter()
    loaded = _config_of(config, inputs)
    source = loaded.source if isinstance(loaded, Config) else "<entries>"
    options = SmokeOptions(
        calls=tuple(_call_spec(c) for c in calls),
        timeout=timeout,
        connect_timeout=connect_timeout,
        oauth=oauth,
        stored_auth_only=stored_auth_only,
        token_store=_store_spec(token_store),
        strict=strict,
        listing=listing or snapshot_dir is not None,
        log_server_messages=log_server_messages,
        run_id=uuid.uuid4().hex,
    )
    slots: list[EntryResult | None] = []
    todo: list[tuple[int, ServerEntry]] = []
    for name, entry, error in _entries(loaded):
        if entry is None:
            assert error is not None
            slots.append(
                EntryResult(
                    name=name,
                    state="failed",
                    transport="-",
                    target="",
                    failure="config",
                    error=_error_text(error),
                )
            )
            continue
        if include_tools or exclude_tools:
            entry = dataclasses.replace(
                entry,
                include_tools=tuple(include_tools) or entry.include_tools,
                exclude_tools=tuple(exclude_tools) or entry.exclude_tools,
            )
        if entry.disabled:
            slots.append(
                EntryResult(
                    name=name, state="disabled", transport=entry.transport, target=entry.describe()
                )
            )
            continue
        if consent is not None and not _consents(consent, entry):
            slots.append(
                EntryResult(
                    name=name,
                    state="refused",
                    transport=entry.transport,
                    target=entry.describe(),
                    error=f"ConsentDenied: server {name!r}: consent refused",
                )
            )
            continue
        slots.append(None)
        todo.append((len(slots) - 1, entry))

    owned = executor is None
    pool: Executor = executor or ThreadPoolExecutor(
        max_workers=max(1, parallel), thread_name_prefix="mcpsync-smoke"
    )
    try:
        for index, result in _run_all(pool, todo, options, parallel):
            slots[index] = result
    except BaseException:
        _close_active(options.run_id)
        if owned:
            pool.shutdown(wait=False, cancel_futures=True)
        raise
    if owned:
        pool.shutdown(wait=True)
    entries = [r for r in slots if r is not None]
    if snapshot_dir is not None:
        entries = [_check_snapshot(e, Path(snapshot_dir)) for e in entries]
    return SmokeReport(
        config=source,
        entries=entries,
        seconds=time.perf_counter() - t0,
        calls=tuple(tool for tool, _ in options.calls),
    )


def _snapshot_file(directory: Path, name: str) -> Path:
    import re

    return directory / (re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".json")


def _check_snapshot(e: EntryResult, directory: Path) -> EntryResult:
    import json

    from ..testing._snapshot import diff_snapshots, snapshot_data, write_snapshot

    if e.listing is None or e.failure is not None:
        return e
    path = _snapshot_file(directory, e.name)
    new = snapshot_data(e.listing)
    if not path.exists():
        write_snapshot(path, new)
        return e
    changes = diff_snapshots(json.loads(path.read_text(encoding="utf-8")), new)
    if not changes:
        return e
    return replace(
        e,
        failure="drift",
        error=f"differs from {path}:\n" + "\n".join(changes),
        snapshot_changes=changes,
    )


def _call_spec(c: str | tuple[str, Mapping[str, Any] | None]) -> tuple[str, Mapping[str, Any]]:
    if isinstance(c, str):
        return c, {}
    tool, arguments = c
    return tool, dict(arguments or {})


def _consents(consent: Callable[[ServerEntry], bool], entry: ServerEntry) -> bool:
    try:
        return bool(consent(entry))
    except Exception as exc:  # noqa: BLE001 - a failing consent hook refuses the entry
        log.warning("consent hook failed for %r: %s", entry.name, exc)
        return False


def _entries(
    loaded: Config | list[ServerEntry],
) -> Iterable[tuple[str, ServerEntry | None, ConfigEntryError | None]]:
    if isinstance(loaded, Config):
        errors = {e.entry: e for e in loaded.errors}
        for name in loaded.names():
            yield name, loaded.entries.get(name), errors.get(name)
    else:
        seen = set()
        for entry in loaded:
            if entry.name in seen:
                raise ConfigError(f"two entries are named {entry.name!r}")
            seen.add(entry.name)
            yield entry.name, entry, None
