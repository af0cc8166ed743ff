"""One entry's smoke test, run inside the worker: :class:`SmokeOptions` (bounds, calls, auth),
then :func:`run_entry`: bring the entry up, list, check schemas, make the calls, close; every
failure becomes a classified :class:`~mcpsync.smoke.results.EntryResult`.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..config import ServerEntry
from ..errors import AuthError, CapabilityError, MCPSyncError, ServerExited
from .results import CallResult, EntryResult, _error_text, classify

if TYPE_CHECKING:
    from ..auth.storage import TokenStoreSpec

__all__ = ["SmokeOptions", "run_entry"]

_CLOSE_TIMEOUT = 10.0
_SLACK = 5.0  # added to each bound: thread start-up, a loaded machine

# --------------------------------------------------------------------------- options


@dataclass(frozen=True)
class SmokeOptions:
    """What :func:`run_entry` does with each entry; plain data, sent to the workers.

    ``token_store``: where OAuth tokens live, as a :class:`~mcpsync.auth.TokenStoreSpec`
    each worker opens in its own process (a path means a file store); None: each entry's
    tokens in memory only."""

    calls: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    timeout: float | None = None  # per request (None: the entry's or the default)
    connect_timeout: float | None = None
    oauth: bool = False
    stored_auth_only: bool = False
    token_store: TokenStoreSpec | str | None = None
    strict: bool = False
    listing: bool = False  # collect tools/resources/prompts (snapshots)
    log_server_messages: bool = False  # server log notifications to stderr
    close_timeout: float = _CLOSE_TIMEOUT
    run_id: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.token_store, str):
            from ..auth.storage import TokenStoreSpec

            object.__setattr__(self, "token_store", TokenStoreSpec.file(self.token_store))

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
        spec = options.token_store
        if spec is not None:  # a description: opened here, in the worker's own process
            assert not isinstance(spec, str)  # __post_init__ made it a spec
            extra["store"] = spec.open()
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
# run ids stopped in this process (Ctrl-C): an entry of theirs starting later starts nothing
_CANCELLED: set[str] = set()
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
        cancelled = options.run_id in _CANCELLED
        if not cancelled:
            _ACTIVE.setdefault(options.run_id, set()).add(host)
    base = EntryResult(
        name=entry.name, state="failed", transport=entry.transport, target=entry.describe()
    )
    try:
        if cancelled:  # the run was stopped before this entry began: start nothing
            return replace(base, failure="worker", error="Cancelled: the run was interrupted")
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
                exit_code=err.exit_code if isinstance(err, ServerExited) else None,
                stderr_tail=err.stderr_tail if isinstance(err, ServerExited) else "",
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
