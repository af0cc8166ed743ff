"""``mcpsync smoke``: the command line over :func:`mcpsync.smoke.run` (the library in
``mcpsync/smoke/``): options to :class:`~mcpsync.smoke.SmokeOptions`, the executor
(threads, ``--processes``, ``--dask``), the text summary and the exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from .. import display
from ..config import default_config_paths, load_config
from .arguments import UsageError, _json_object, _parse_pairs
from .commands import _indent, _ms
from .targets import _apply_tls

if TYPE_CHECKING:
    from .output import _Out

__all__ = ["run_smoke"]


def run_smoke(ns: argparse.Namespace, out: _Out) -> int:
    from ..host import ask_on_terminal
    from ..smoke import run, write_junit_xml

    if len(ns.words) > 1:
        raise UsageError("smoke takes one CONFIG file")
    if ns.words:
        path = ns.words[0]
    else:
        found = default_config_paths()
        if not found:
            raise UsageError(
                "no CONFIG given and none found in .vscode/mcp.json, .cursor/mcp.json, .mcp.json, "
                "~/.cursor/mcp.json or Claude Desktop's claude_desktop_config.json"
            )
        path = str(found[0])
        out.note(f"mcpsync: using {path}")
    if len(ns.call_args) > max(1, len(ns.call)):
        raise UsageError("more --args than --call")
    calls = [
        (tool, _json_object(ns.call_args[i] if i < len(ns.call_args) else None, "--args"))
        for i, tool in enumerate(ns.call)
    ]
    inputs = _parse_pairs(ns.input, what="--input", parse_json=False)
    config = load_config(path, inputs=inputs)
    tls: dict[str, Any] = {}
    _apply_tls(tls, ns)  # --cacert / --insecure / --cert: over every HTTP entry's own
    if tls:
        config.entries = {
            name: entry if entry.is_stdio else dataclasses.replace(entry, **tls)
            for name, entry in config.entries.items()
        }
    token_store = _store_spec(ns, config)
    with _smoke_executor(ns) as executor:
        report = run(
            config,
            executor=executor,
            calls=calls,
            parallel=max(1, ns.parallel),
            consent=ask_on_terminal if ns.ask else None,
            timeout=ns.timeout,
            connect_timeout=ns.connect_timeout,
            strict=ns.strict,
            oauth=ns.oauth,
            stored_auth_only=ns.stored_auth_only,
            token_store=token_store,
            snapshot_dir=ns.snapshot,
            log_server_messages=not ns.quiet,
            include_tools=ns.include_tools or (),
            exclude_tools=ns.exclude_tools or (),
        )
    if ns.junit_xml:
        write_junit_xml(report, ns.junit_xml)
    if out.json:
        data = report.to_json()
        data["config"] = path
        out.emit_json(data)
    else:
        _print_smoke(report, out, [tool for tool, _ in calls])
    return report.exit_code


def _store_spec(ns: argparse.Namespace, config: Any) -> Any:
    """Where the workers keep OAuth tokens, as a ``TokenStoreSpec`` each opens in its own
    process: ``--token-store FILE``, the system keyring (``--keyring``), the per-user file
    (default), or memory only (``--no-store``: None). With ``--keyring`` the keyring is
    opened here first when an entry may need OAuth, so a missing package or backend is one
    usage error (exit 2) before anything starts."""
    from ..auth.storage import TokenStoreSpec, default_store_path

    use_keyring = getattr(ns, "keyring", False)
    if use_keyring and ns.no_store:
        raise UsageError("--no-store and --keyring contradict each other; give one")
    if use_keyring and ns.token_store:
        raise UsageError("--token-store and --keyring contradict each other; give one")
    if ns.token_store:
        return TokenStoreSpec.file(ns.token_store)
    if ns.no_store:
        return None
    if not use_keyring:
        return TokenStoreSpec.file(default_store_path())  # the file every mcpsync command uses
    spec = TokenStoreSpec.keyring()
    if any(_may_use_oauth(entry, ns) for entry in config.entries.values()):
        try:
            import keyring  # noqa: F401
        except ImportError:
            raise UsageError(
                "--keyring needs the keyring package: pip install 'mcpsync[keyring]'"
            ) from None
        spec.open()  # ConfigError "no system keyring is available ..." (exit 2)
    return spec


def _may_use_oauth(entry: Any, ns: argparse.Namespace) -> bool:
    """As the runner's auth factory decides (``mcpsync.smoke.runner``)."""
    if entry is None or entry.is_stdio or entry.disabled:
        return False
    return entry.auth is not None or ns.oauth or ns.stored_auth_only


class _NoExecutor:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _smoke_executor(ns: argparse.Namespace) -> Any:
    if ns.dask:
        try:
            from distributed import Client
        except ImportError:
            raise UsageError("--dask needs the dask extra: pip install 'mcpsync[dask]'") from None
        import contextlib

        @contextlib.contextmanager
        def on_dask() -> Any:
            with Client(ns.dask, timeout=30) as client:
                yield client.get_executor(pure=False)

        return on_dask()
    if ns.executor == "process":
        return _process_pool(max(1, ns.parallel))
    return _NoExecutor()


def _process_pool(workers: int) -> Any:
    import contextlib
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ..smoke import stop_process_pool, worker_initializer

    @contextlib.contextmanager
    def pool() -> Any:
        executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=worker_initializer,
        )
        try:
            yield executor
        except BaseException:  # Ctrl-C: stop the entries in the workers, their servers too
            stop_process_pool(executor)
            raise
        finally:
            executor.shutdown(wait=True, cancel_futures=True)

    return pool()


def _print_smoke(report: Any, out: _Out, calls: list[str]) -> None:
    width = 60
    call_columns = ["call"] if len(calls) == 1 else [f"call:{tool}" for tool in calls]
    rows = []
    notes: list[str] = []
    for e in report.entries:
        row = {
            "server": e.name,
            "state": e.state,
            "transport": e.transport,
            "version": e.protocol_version or "-",
            "tools": "-" if e.tools is None else str(len(e.tools)),
            "time": "-" if e.seconds is None else _ms(e.seconds),
        }
        errors = [e.error] if e.error else []
        for tool, column in zip(calls, call_columns, strict=True):
            c = next((c for c in e.calls if c.tool == tool), None)
            if c is None or c.skipped:
                row[column] = "-"
            else:
                row[column] = ("ok " if c.ok else "FAIL ") + _ms(c.seconds)
                if c.error:
                    errors.append(f"{c.failure}: {tool}: {c.error}")
        if e.error:
            errors[0] = f"{e.failure}: {e.error}" if e.failure else e.error
        whole = " | ".join(" ".join(text.split()) for text in errors)
        if len(whole) <= width and "\n" not in "".join(errors):
            row["error"] = whole
        elif errors:
            row["error"] = f"see below [{len(notes) + 1}]"
            notes.append(f"[{len(notes) + 1}] {e.name}:\n" + _indent("\n".join(errors), "    "))
        else:
            row["error"] = ""
        rows.append(row)
    columns = ["server", "state", "transport", "version", "tools", "time", *call_columns, "error"]
    out.print(display.format_table(rows, columns, max_width=width))
    if notes:
        out.print()
        out.print("\n".join(notes))
    disabled = sum(1 for e in report.entries if e.state == "disabled")
    enabled = len(report.entries) - disabled
    up = sum(1 for e in report.entries if e.state == "ready" and e.failure is None)
    summary = f"\n{up}/{enabled} servers up in {_ms(report.seconds)}"
    if disabled:
        summary += f" ({disabled} disabled)"
    for tool in calls:
        ran = [c for e in report.entries for c in e.calls if c.tool == tool and not c.skipped]
        summary += f"; {tool}: {sum(c.ok for c in ran)}/{len(ran)} calls ok"
    out.print(summary)
    for tool in report.no_tool:
        out.print(f"no server offers a tool named {tool!r}")
