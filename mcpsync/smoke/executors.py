"""Running every entry on an executor: at most ``parallel`` in flight, each bounded from its
submission, a worker that died becomes a ``worker`` failure, the entries a broken process
pool lost are retried alone; the process-pool initializer and stopper, and stopping a run
after Ctrl-C (the hosts it left open here, its entries on every dask worker). Each entry
runs in the submitter's trace context (``telemetry.carried``: threads, processes, Dask).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import BrokenExecutor, Executor, Future
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures import wait as wait_futures
from typing import TYPE_CHECKING, Any

from ..config import ServerEntry
from ..telemetry import carried
from .results import EntryResult, _error_text
from .runner import _ACTIVE, _ACTIVE_LOCK, _CANCELLED, _CLOSE_TIMEOUT, _SLACK, run_entry

if TYPE_CHECKING:
    from .runner import SmokeOptions

__all__ = ["worker_initializer", "stop_process_pool"]

log = logging.getLogger("mcpsync.smoke")


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
    """Close the hosts of ``run_id`` in this process; its entries not begun start nothing."""
    with _ACTIVE_LOCK:
        _CANCELLED.add(run_id)
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
    """Run ``todo`` on ``pool``, at most ``parallel`` entries in flight: the next is submitted
    as one finishes. Each entry has its own deadline from its submission (its bound plus
    slack), so the whole run is bounded by about ``ceil(n / parallel) + 1`` entry bounds.
    Entries a broken process pool lost are retried alone afterwards. On any exception
    (Ctrl-C) the futures are cancelled and the entries still running are stopped, here and
    on a dask cluster's workers, before it propagates."""
    limit = max(1, parallel)
    queue = deque(todo)
    running: dict[Future[EntryResult], tuple[int, ServerEntry, float]] = {}
    broken: list[tuple[int, ServerEntry]] = []
    pool_broken = False
    try:
        while queue or running:
            while queue and len(running) < limit:
                index, entry = queue.popleft()
                if not pool_broken:
                    try:
                        fut = pool.submit(carried(run_entry), entry, options)
                    except BrokenExecutor as exc:
                        log.info("the executor broke before %r: %s", entry.name, exc)
                        pool_broken = True
                    else:
                        bound = options.entry_bound(entry) + _SLACK
                        running[fut] = (index, entry, time.monotonic() + bound)
                        continue
                broken.append((index, entry))
            if not running:
                break
            soonest = min(deadline for _, _, deadline in running.values())
            done, _ = wait_futures(
                running, timeout=max(0.0, soonest - time.monotonic()), return_when="FIRST_COMPLETED"
            )
            for fut in done:
                index, entry, _ = running.pop(fut)
                try:
                    yield index, fut.result()
                except BrokenExecutor as exc:
                    pool_broken = True
                    broken.append((index, entry))
                    log.info("worker for %r died: %s", entry.name, exc)
                # a worker-side failure outside run_entry (dask: KilledWorker)
                except Exception as exc:  # noqa: BLE001
                    yield index, _worker_failure(entry, exc)
            now = time.monotonic()
            for fut, (index, entry, deadline) in list(running.items()):
                if now >= deadline:
                    del running[fut]
                    fut.cancel()
                    yield index, _timed_out(entry, options.entry_bound(entry))
    except BaseException:
        for fut in running:
            fut.cancel()
        _stop_remote(pool, options.run_id)
        raise
    if broken:
        yield from _retry_alone(pool, broken, options)


def _retry_alone(
    pool: Executor, broken: list[tuple[int, ServerEntry]], options: SmokeOptions
) -> Iterable[tuple[int, EntryResult]]:
    """A process pool broke: run each affected entry once more, alone in a one-worker pool
    (reused until an entry breaks it), so only the culprit fails."""
    make = _isolated_executor(pool)
    solo: Executor | None = None
    try:
        for index, entry in sorted(broken, key=lambda item: item[0]):
            if make is None:
                yield index, _worker_failure(entry, BrokenExecutor("the executor broke"))
                continue
            if solo is None:
                solo = make()
            fut = solo.submit(carried(run_entry), entry, options)
            try:
                yield index, fut.result(timeout=options.entry_bound(entry) + _SLACK)
            except BrokenExecutor as exc:
                yield index, _worker_failure(entry, exc)
                solo.shutdown(wait=True, cancel_futures=True)
                solo = None
            except FuturesTimeout:
                yield index, _timed_out(entry, options.entry_bound(entry))
                stop_process_pool(solo)  # its worker still runs the entry: stop it
                solo = None
            except Exception as exc:  # noqa: BLE001 - the entry fails, the run goes on
                yield index, _worker_failure(entry, exc)
    except BaseException:
        if solo is not None:
            stop_process_pool(solo)
            solo = None
        raise
    finally:
        if solo is not None:
            solo.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- stopping a run


def _stop_run(run_id: str) -> None:
    """In a worker process: entries of ``run_id`` not begun start nothing; those running
    have their hosts (and servers) closed. Sent to every dask worker after Ctrl-C."""
    _close_active(run_id)


def _stop_remote(pool: Executor, run_id: str) -> None:
    """After Ctrl-C on a ``dask.distributed`` executor: stop the run's entries on every
    worker (a cancelled dask task keeps running in its worker thread otherwise). Bounded."""
    cfexecutor = sys.modules.get("distributed.cfexecutor")
    if cfexecutor is None or not isinstance(pool, cfexecutor.ClientExecutor):
        return
    client = pool._client

    def stop() -> None:
        try:
            client.run(_stop_run, run_id, on_error="ignore")
        except Exception as exc:  # noqa: BLE001 - best effort: the entries' bounds remain
            log.warning("stopping the run on the dask workers: %s", exc)

    t = threading.Thread(target=stop, name="mcpsync-smoke-stop-remote", daemon=True)
    t.start()
    t.join(_CLOSE_TIMEOUT + _SLACK)
