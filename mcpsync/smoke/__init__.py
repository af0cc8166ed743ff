"""Smoke-test every entry of a config: bring it up, list, call, close; report each entry.

Owns: :func:`smoke` (the library behind ``mcpsync smoke``), the per-entry runner
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
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import BrokenExecutor, Executor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures import wait as wait_futures
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ..config import Config, ConfigEntryError, ServerEntry, load_config
from ..errors import (
    AuthError,
    CapabilityError,
    ConfigError,
    HandshakeError,
    HTTPStatusError,
    MCPSyncError,
    ProtocolError,
    RequestTimeout,
    ServerError,
    ServerExited,
    TransportError,
)

__all__ = [
    "smoke",
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

FAILURE_CLASSES = (
    "config",
    "spawn",
    "connect",
    "auth",
    "protocol",
    "tool",
    "timeout",
    "worker",
    "drift",
)
EXIT_CODES = {
    "tool": 1,
    "connect": 3,
    "config": 4,
    "spawn": 5,
    "auth": 6,
    "protocol": 7,
    "timeout": 8,
    "worker": 9,
    "drift": 10,
}
EXIT_MIXED = 3  # failed entries of more than one class (as before: "an entry failed")

_CLOSE_TIMEOUT = 10.0
_SLACK = 5.0  # added to each bound: thread start-up, a loaded machine


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class CallResult:
    """One ``--call`` on one entry."""

    tool: str
    ok: bool
    seconds: float
    error: str | None = None
    failure: str | None = None  # a FAILURE_CLASSES member when not ok
    skipped: bool = False  # the server offers no such tool


@dataclass(frozen=True)
class EntryResult:
    """What happened to one entry; plain data (picklable, JSON-ready via :meth:`to_json`)."""

    name: str
    state: str  # ready | failed | refused | disabled
    transport: str
    target: str
    protocol_version: str | None = None
    server_info: dict[str, Any] | None = None
    tools: list[str] | None = None
    seconds: float | None = None
    error: str | None = None
    failure: str | None = None  # a FAILURE_CLASSES member when the bring-up failed
    exit_code: int | None = None  # of a stdio server that exited
    stderr_tail: str = ""
    calls: list[CallResult] = field(default_factory=list)
    listing: dict[str, Any] | None = None  # tools/resources/prompts for snapshots
    schema_problems: list[str] = field(default_factory=list)  # --strict findings
    snapshot_changes: list[str] = field(default_factory=list)  # --snapshot differences

    @property
    def ok(self) -> bool:
        """Came up without a failure, or was skipped (disabled, or consent refused)."""
        return self.state in ("ready", "disabled", "refused") and self.failure is None

    @property
    def failures(self) -> list[str]:
        """Every failure class of this entry (bring-up, then calls)."""
        out = [self.failure] if self.failure else []
        out += [c.failure for c in self.calls if c.failure and c.failure not in out]
        return out

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok and not any(not c.ok and not c.skipped for c in self.calls)
        data["call"] = data["calls"][0] if data["calls"] else None  # the first --call
        data.pop("listing")
        failed_call = next((c for c in self.calls if c.failure), None)
        if self.failure is None and failed_call is not None:  # up, but a call failed: say so
            data["failure"] = failed_call.failure
            data["error"] = f"call {failed_call.tool}: {failed_call.error}"
        if not timings:
            data.pop("seconds")
            for c in data["calls"]:
                c.pop("seconds")
            if data["call"] is not None:
                data["call"].pop("seconds", None)
        return data


@dataclass
class SmokeReport:
    """Every entry's :class:`EntryResult` (config order) and the run as a whole."""

    config: str
    entries: list[EntryResult]
    seconds: float
    calls: tuple[str, ...] = ()

    def __getitem__(self, name: str) -> EntryResult:
        for e in self.entries:
            if e.name == name:
                return e
        raise KeyError(name)

    @property
    def failed(self) -> list[EntryResult]:
        """Entries that did not come up, or whose calls failed."""
        return [e for e in self.entries if e.failures]

    @property
    def no_tool(self) -> list[str]:
        """``--call`` tools no server that came up offers."""
        return [
            tool
            for tool in self.calls
            if not any(c.tool == tool and not c.skipped for e in self.entries for c in e.calls)
        ]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.no_tool

    @property
    def exit_code(self) -> int:
        """0 when ok, else the code of the one failure class seen (several classes: 3)."""
        classes = {f for e in self.entries for f in e.failures}
        if self.no_tool:
            classes.add("tool")
        if not classes:
            return 0
        if len(classes) == 1:
            return EXIT_CODES[classes.pop()]
        return EXIT_MIXED

    def to_json(self, *, timings: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "config": self.config,
            "ok": self.ok,
            "exit_code": self.exit_code,
            "servers": [e.to_json(timings=timings) for e in self.entries],
        }
        if timings:
            data["seconds"] = self.seconds
        if self.no_tool:
            data["no_tool"] = self.no_tool
        return data


# --------------------------------------------------------------------------- classes


def classify(error: BaseException, *, during_call: bool = False) -> str:
    """The failure class of ``error`` (see the module docstring)."""
    if isinstance(error, ConfigError):
        return "config"
    if isinstance(error, AuthError):
        return "auth"
    if isinstance(error, HTTPStatusError) and error.status in (401, 403):
        return "auth"
    if isinstance(error, RequestTimeout | TimeoutError | FuturesTimeout):
        return "timeout"
    if isinstance(error, ServerExited):
        return "connect" if during_call else "spawn"
    if isinstance(error, TransportError):
        if not during_call and str(error).startswith("cannot start server"):
            return "spawn"
        return "connect"
    if isinstance(error, ProtocolError | HandshakeError):
        return "protocol"
    if isinstance(error, ServerError):
        return "tool" if during_call else "protocol"
    if isinstance(error, BrokenExecutor):
        return "worker"
    return "tool" if during_call else "connect"


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class SmokeOptions:
    """What :func:`run_entry` does with each entry; plain data, sent to the workers."""

    calls: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    timeout: float | None = None  # per request (None: the entry's or the default)
    connect_timeout: float | None = None
    oauth: bool = False
    stored_auth_only: bool = False
    token_store: str | None = None
    strict: bool = False
    listing: bool = False  # collect tools/resources/prompts (snapshots)
    log_server_messages: bool = False  # server log notifications to stderr
    close_timeout: float = _CLOSE_TIMEOUT
    run_id: str = ""

    def entry_bound(self, entry: ServerEntry | None) -> float:
        """How long one entry may take in its worker, all included."""
        connect = self.connect_timeout
        if connect is None:
            connect = entry.connect_timeout if entry and entry.connect_timeout else 30.0
        per_call = self.timeout if self.timeout is not None else 60.0
        if entry is not None and self.timeout is None and entry.timeout is not None:
            per_call = entry.timeout
        n_requests = len(self.calls) + (4 if self.listing else 1)
        return connect * 2 + _SLACK + per_call * n_requests + self.close_timeout


def _no_prompt(url: str) -> str:
    raise AuthError(
        "the server needs an interactive authorization and --stored-auth-only forbids it "
        "(authorize once with `mcpsync inspect --oauth URL`)"
    )


def _auth_factory(options: SmokeOptions) -> Callable[[ServerEntry], Any]:
    def factory(entry: ServerEntry) -> Any:
        if entry.is_stdio:
            return None
        if entry.auth is None and not options.oauth and not options.stored_auth_only:
            return None
        from ..config import oauth_for_entry

        extra: dict[str, Any] = {}
        if options.token_store:
            from ..auth.storage import FileTokenStore

            extra["store"] = FileTokenStore(options.token_store)
        if options.stored_auth_only:
            extra["redirect"] = _no_prompt
        return oauth_for_entry(entry, **extra)

    return factory


class _LogPrinter:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, params: Any) -> None:
        import json

        data = params.data
        text = data if isinstance(data, str) else json.dumps(data, default=str)
        logger = f"/{params.logger}" if params.logger else ""
        sys.stderr.write(f"[{self.name}{logger}] {params.level}: {text}\n")
        sys.stderr.flush()


# --------------------------------------------------------------------------- one entry

# run id -> hosts bringing up entries in this process (closed on Ctrl-C)
_ACTIVE: dict[str, set[Any]] = {}
_ACTIVE_LOCK = threading.Lock()


def _dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return model


def run_entry(entry: ServerEntry, options: SmokeOptions) -> EntryResult:
    """Bring ``entry`` up, list its tools, run the calls, close it; never raises for the entry.

    This is what each executor worker runs; everything it starts is closed before it
    returns (or before a ``KeyboardInterrupt`` propagates).
    """
    from ..host import Host

    overrides: dict[str, Any] = {}
    if options.timeout is not None:
        overrides["timeout"] = None if options.timeout <= 0 else options.timeout
    if options.connect_timeout is not None:
        overrides["connect_timeout"] = options.connect_timeout
    if options.log_server_messages:
        overrides["on_log"] = _LogPrinter(entry.name)
    host = Host(
        [entry],
        session_kwargs=overrides,
        auth_factory=_auth_factory(options),
        spawn_stdio=True,
        close_timeout=options.close_timeout,
    )
    with _ACTIVE_LOCK:
        _ACTIVE.setdefault(options.run_id, set()).add(host)
    base = EntryResult(
        name=entry.name, state="failed", transport=entry.transport, target=entry.describe()
    )
    try:
        connect_bound = (
            options.connect_timeout
            if options.connect_timeout is not None
            else (entry.connect_timeout or 30.0)
        )
        t0 = time.monotonic()
        host.connect_all(timeout=connect_bound * 2 + _SLACK)
        (status,) = host.status()
        if status.state == "connecting":  # the bring-up outlived every bound: give up on it
            return replace(
                base,
                seconds=time.monotonic() - t0,
                failure="timeout",
                error=f"RequestTimeout: still connecting after {time.monotonic() - t0:.1f} s "
                f"(connect timeout {connect_bound:g} s); the server was stopped",
            )
        if status.error is not None and status.state != "ready":
            err = status.error
            return replace(
                base,
                seconds=status.seconds,
                failure=classify(err),
                error=_error_text(err),
                exit_code=getattr(err, "exit_code", None),
                stderr_tail=getattr(err, "stderr_tail", "") or "",
                state="refused" if status.state == "refused" else "failed",
            )
        if status.state == "disabled":
            return replace(base, state="disabled")
        session = host.session(entry.name)
        result = replace(
            base,
            state="ready",
            transport=status.transport,
            protocol_version=status.protocol_version,
            server_info=_dump(status.server_info),
            seconds=status.seconds,
        )
        return _exercise(session, result, options)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the entry's failure, never the run's
        return replace(base, failure=classify(exc), error=_error_text(exc))
    finally:
        host.close()
        with _ACTIVE_LOCK:
            hosts = _ACTIVE.get(options.run_id)
            if hosts is not None:
                hosts.discard(host)
                if not hosts:
                    _ACTIVE.pop(options.run_id, None)


def _exercise(session: Any, result: EntryResult, options: SmokeOptions) -> EntryResult:
    """The ready part: tools, strict checks, calls, listing."""
    try:
        tools = session.list_tools()
    except CapabilityError:
        tools = []
    except MCPSyncError as exc:
        return replace(result, state="failed", failure=classify(exc), error=_error_text(exc))
    problems = _schema_problems(tools) if options.strict else []
    calls: list[CallResult] = []
    by_name = {t.name: t for t in tools}
    for tool, arguments in options.calls:
        if tool not in by_name:
            calls.append(CallResult(tool=tool, ok=True, seconds=0.0, skipped=True))
            continue
        calls.append(_call(session, tool, arguments, options))
    listing = _listing(session, tools) if options.listing else None
    failure = "protocol" if problems else None
    error = ("invalid tool schemas: " + "; ".join(problems)) if problems else None
    return replace(
        result,
        tools=[t.name for t in tools],
        calls=calls,
        listing=listing,
        schema_problems=problems,
        failure=failure,
        error=error,
    )


def _call(
    session: Any, tool: str, arguments: Mapping[str, Any], options: SmokeOptions
) -> CallResult:
    from .. import display

    kwargs: dict[str, Any] = {}
    if options.timeout is not None:
        kwargs["timeout"] = None if options.timeout <= 0 else options.timeout
    c0 = time.perf_counter()
    try:
        res = session.call_tool(tool, dict(arguments) or None, **kwargs)
    except MCPSyncError as exc:
        return CallResult(
            tool=tool,
            ok=False,
            seconds=time.perf_counter() - c0,
            error=_error_text(exc),
            failure=classify(exc, during_call=True),
        )
    seconds = time.perf_counter() - c0
    if res.is_error:
        text = display.result_text(res) or "the tool reported an error (isError) with no text"
        return CallResult(tool=tool, ok=False, seconds=seconds, error=text, failure="tool")
    return CallResult(tool=tool, ok=True, seconds=seconds)


def _schema_problems(tools: Sequence[Any]) -> list[str]:
    """``--strict``: each tool's inputSchema/outputSchema must be a valid JSON Schema."""
    import jsonschema
    from jsonschema.validators import validator_for

    problems = []
    for t in tools:
        for label, schema in (("inputSchema", t.input_schema), ("outputSchema", t.output_schema)):
            if schema is None:
                continue
            if label == "inputSchema" and schema.get("type") != "object":
                problems.append(f"{t.name}: {label} must have type 'object'")
                continue
            try:
                validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                where = "/".join(str(p) for p in exc.path)
                problems.append(f"{t.name}: {label}{'/' + where if where else ''}: {exc.message}")
    return problems


def _listing(session: Any, tools: Sequence[Any]) -> dict[str, Any]:
    def safe(method: str) -> list[Any] | None:
        try:
            return [_dump(x) for x in getattr(session, method)()]
        except CapabilityError:
            return None
        except MCPSyncError as exc:
            return [{"error": _error_text(exc)}]

    return {
        "server": {
            "name": (_dump(session.server_info) or {}).get("name"),
            "protocol_version": session.protocol_version,
            "capabilities": _dump(session.server_capabilities),
        },
        "tools": [_dump(t) for t in tools],
        "resources": safe("list_resources"),
        "resource_templates": safe("list_resource_templates"),
        "prompts": safe("list_prompts"),
    }


# --------------------------------------------------------------------------- the run


def worker_initializer() -> None:
    """``initializer=`` for a process pool running smoke entries (``--executor process``).

    Ctrl-C is left to the parent (SIGINT ignored); SIGTERM from :func:`stop_process_pool`
    interrupts the entry in progress, which closes its server, or ends an idle worker.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: Any) -> None:
    if _ACTIVE:
        raise KeyboardInterrupt  # run_entry's finally closes the host (and its server)
    os._exit(0)  # idle: nothing to clean up


def stop_process_pool(pool: Executor) -> None:
    """After Ctrl-C: stop the entries a process pool (with :func:`worker_initializer`) runs."""
    import signal

    processes = getattr(pool, "_processes", None) or {}
    for proc in list(processes.values()):
        try:
            os.kill(proc.pid, signal.SIGTERM)
        except (OSError, AttributeError):
            pass
    pool.shutdown(wait=True, cancel_futures=True)


def _close_active(run_id: str) -> None:
    with _ACTIVE_LOCK:
        hosts = list(_ACTIVE.pop(run_id, ()))
    threads = [
        threading.Thread(target=h.close, name=f"mcpsync-smoke-stop[{i}]", daemon=True)
        for i, h in enumerate(hosts)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(_CLOSE_TIMEOUT)


def _isolated_executor(executor: Executor) -> Callable[[], Executor] | None:
    """For a broken process pool: how to make a one-worker pool like it (to retry alone)."""
    from concurrent.futures import ProcessPoolExecutor

    if not isinstance(executor, ProcessPoolExecutor):
        return None

    def make() -> Executor:
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=getattr(executor, "_mp_context", None),
            initializer=getattr(executor, "_initializer", None),
            initargs=getattr(executor, "_initargs", ()),
        )

    return make


def _config_of(config: Any, inputs: Any) -> Config | list[ServerEntry]:
    if isinstance(config, str | Path | Mapping):
        return load_config(config, inputs=inputs)
    if isinstance(config, Config):
        return config
    return list(config)


def smoke(
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
    token_store: str | os.PathLike[str] | None = None,
    listing: bool = False,
    snapshot_dir: str | os.PathLike[str] | None = None,
    inputs: Any = None,
    log_server_messages: bool = False,
) -> SmokeReport:
    """Smoke-test every entry of ``config``; returns a :class:`SmokeReport` (never raises for an entry).

    ``config``: a path, a dict, a :class:`~mcpsync.config.Config` or ServerEntry objects.
    ``executor``: any ``concurrent.futures.Executor``; each entry's bring-up, calls and
    close run in one of its workers (default: a pool of ``parallel`` threads). A process
    pool whose worker dies is retried one entry at a time in a fresh one-worker pool, so
    only the entry that kills its worker fails (class ``worker``).
    ``calls``: tool names, or ``(tool, arguments)``, called on every server offering them.
    ``consent(entry) -> bool`` is asked here, one entry at a time, before anything starts.
    ``strict``: each tool's schemas must be valid JSON Schema (results are always checked
    against ``outputSchema``). ``stored_auth_only``: HTTP entries use the tokens in
    ``token_store`` and fail with class ``auth`` rather than ask a person.
    ``listing``: keep each server's tools/resources/prompts (``EntryResult.listing``).
    ``snapshot_dir``: compare each listing with ``DIR/<entry>.json`` (written when absent);
    a difference is an entry failure of class ``drift``.
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
        token_store=os.fspath(token_store) if token_store is not None else None,
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
    except Exception as exc:
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


def _worker_failure(entry: ServerEntry, error: BaseException) -> EntryResult:
    text = _error_text(error)
    if isinstance(error, BrokenExecutor):
        text = f"the worker running this entry died ({type(error).__name__}: {error})"
    return EntryResult(
        name=entry.name,
        state="failed",
        transport=entry.transport,
        target=entry.describe(),
        failure="worker",
        error=text,
    )


def _timed_out(entry: ServerEntry, bound: float) -> EntryResult:
    return EntryResult(
        name=entry.name,
        state="failed",
        transport=entry.transport,
        target=entry.describe(),
        failure="timeout",
        error=f"RequestTimeout: the worker gave no result within {bound:.0f} s",
    )


def _run_all(
    pool: Executor,
    todo: list[tuple[int, ServerEntry]],
    options: SmokeOptions,
    parallel: int,
) -> Iterable[tuple[int, EntryResult]]:
    if not todo:
        return
    futures: dict[Future[EntryResult], tuple[int, ServerEntry]] = {}
    for index, entry in todo:
        try:
            fut = pool.submit(run_entry, entry, options)
        except BrokenExecutor as exc:
            fut = Future()
            fut.set_exception(exc)
        futures[fut] = (index, entry)
    per = max(options.entry_bound(e) for _, e in todo)
    waves = -(-len(todo) // max(1, parallel))
    deadline = time.monotonic() + per * waves + _SLACK
    pending = set(futures)
    broken: list[tuple[int, ServerEntry]] = []
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        done, pending = wait_futures(pending, timeout=min(left, 1.0), return_when="FIRST_COMPLETED")
        for fut in done:
            index, entry = futures[fut]
            try:
                yield index, fut.result()
            except BrokenExecutor as exc:
                broken.append((index, entry))
                log.info("worker for %r died: %s", entry.name, exc)
            except Exception as exc:  # a worker-side failure outside run_entry (dask: KilledWorker)
                yield index, _worker_failure(entry, exc)
    for fut in pending:
        fut.cancel()
        index, entry = futures[fut]
        yield index, _timed_out(entry, per * waves)
    if broken:
        yield from _retry_alone(pool, broken, options)


def _retry_alone(
    pool: Executor, broken: list[tuple[int, ServerEntry]], options: SmokeOptions
) -> Iterable[tuple[int, EntryResult]]:
    """A process pool broke: run each affected entry alone, so only the culprit fails."""
    make = _isolated_executor(pool)
    for index, entry in sorted(broken, key=lambda item: item[0]):
        if make is None:
            yield index, _worker_failure(entry, BrokenExecutor("the executor broke"))
            continue
        solo = make()
        try:
            fut = solo.submit(run_entry, entry, options)
            try:
                yield index, fut.result(timeout=options.entry_bound(entry) + _SLACK)
            except BrokenExecutor as exc:
                yield index, _worker_failure(entry, exc)
            except FuturesTimeout:
                yield index, _timed_out(entry, options.entry_bound(entry))
            except Exception as exc:
                yield index, _worker_failure(entry, exc)
        finally:
            solo.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- JUnit


def write_junit_xml(report: SmokeReport, path: str | os.PathLike[str]) -> None:
    """A JUnit XML file: one ``<testcase>`` per entry, one per ``--call`` on each entry.

    Failed bring-ups and calls are ``<failure type=CLASS message=...>`` with the whole
    error as text; disabled or refused entries and calls a server does not offer are
    ``<skipped>``.
    """
    suite = ElementTree.Element("testsuite", name="mcpsync smoke")
    tests = failures = skipped = 0
    for e in report.entries:
        cases: list[tuple[str, float | None, str | None, str | None, str | None]] = []
        skip = None
        if e.state == "disabled":
            skip = "disabled in the config"
        elif e.state == "refused":
            skip = e.error or "consent refused"
        cases.append(
            (
                "bring-up",
                e.seconds,
                e.failure,
                e.error if e.failure else None,
                skip,
            )
        )
        for c in e.calls:
            cases.append(
                (
                    f"call {c.tool}",
                    c.seconds,
                    c.failure,
                    c.error,
                    "the server offers no such tool" if c.skipped else None,
                )
            )
        for name, seconds, failure, error, skip_reason in cases:
            case = ElementTree.SubElement(
                suite,
                "testcase",
                name=name,
                classname=f"mcpsync.smoke.{e.name}",
                time=f"{seconds or 0.0:.3f}",
            )
            tests += 1
            if skip_reason is not None:
                ElementTree.SubElement(case, "skipped", message=skip_reason)
                skipped += 1
            elif failure is not None:
                text = error or failure
                el = ElementTree.SubElement(
                    case, "failure", type=failure, message=text.splitlines()[0] if text else failure
                )
                el.text = text
                failures += 1
            if e.stderr_tail and name == "bring-up":
                ElementTree.SubElement(case, "system-err").text = e.stderr_tail
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    suite.set("time", f"{report.seconds:.3f}")
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    Path(path).write_bytes(ElementTree.tostring(root, encoding="utf-8", xml_declaration=True))


class _CallableModule(types.ModuleType):
    """``mcpsync.smoke`` is this module once it is imported: calling it runs :func:`smoke`."""

    def __call__(self, *args: Any, **kwargs: Any) -> SmokeReport:
        return smoke(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
