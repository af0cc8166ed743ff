"""A worker process for the shared token store test: ``threads`` threads, each with its own
``OAuth`` and its own ``FileTokenStore`` object over the one token file, each with its own
``Session`` to the protected demo server, calling ``echo`` in lock-step rounds with the
test (a barrier shared by every thread of every process and the test itself).

Owns: :func:`run` (the process's target; importable, so a ``spawn`` child finds it;
``store_path`` a token file, or in-process a callable making each thread's store) and
:func:`one_call` (a Dask task).
Each thread puts one result on ``results``: ``(name, ok_calls, errors)``.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

BARRIER_SECONDS = 120.0  # one round of every thread of every process, under load


class _PerThreadLog(logging.Handler):
    """The last auth log lines of each thread: a failed call reports what led to it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: defaultdict[str, deque[str]] = defaultdict(lambda: deque(maxlen=12))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines[record.threadName or "?"].append(f"{record.name}: {record.getMessage()}")


@contextmanager
def _auth_log() -> Iterator[_PerThreadLog]:
    logger = logging.getLogger("mcpsync.auth")
    handler, level = _PerThreadLog(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _never_authorize(url: str) -> str:
    raise AssertionError("a worker was asked to authorize (the stored token was not used)")


def _thread(
    name: str,
    url: str,
    store_path: str | Callable[[], Any],
    rounds: int,
    calls: int,
    barrier: Any,
    results: Any,
    log: _PerThreadLog,
) -> None:
    import mcpsync
    from mcpsync.auth import FileTokenStore, OAuth

    ok, errors = 0, []
    session = None
    try:
        store = FileTokenStore(store_path) if isinstance(store_path, str) else store_path()
        auth = OAuth(client_name="shared", redirect=_never_authorize, store=store)
        session = mcpsync.Session.connect(url, auth=auth, connect_timeout=60)
    except Exception as exc:  # noqa: BLE001 - reported to the test
        errors.append(f"connect: {type(exc).__name__}: {exc}")
    try:
        barrier.wait(BARRIER_SECONDS)  # everyone connected (epoch 0)
        for _ in range(rounds):
            barrier.wait(BARRIER_SECONDS)  # the test started the next epoch
            for i in range(calls):
                if session is None:
                    break
                try:
                    text = session.call_tool("echo", {"message": f"{name}-{i}"}, timeout=60)
                    if text.content[0].text == f"{name}-{i}":
                        ok += 1
                    else:
                        errors.append(f"wrong echo {text.content[0].text!r}")
                except Exception as exc:  # noqa: BLE001 - reported to the test
                    seen = " | ".join(log.lines[threading.current_thread().name])
                    errors.append(f"call: {type(exc).__name__}: {exc} [auth log: {seen}]")
            barrier.wait(BARRIER_SECONDS)  # round done
    except Exception:  # noqa: BLE001 - a broken barrier: reported
        errors.append("barrier: " + traceback.format_exc(limit=2))
    finally:
        if session is not None:
            session.close()
        results.put((name, ok, errors))


def run(
    index: int,
    url: str,
    store_path: str | Callable[[], Any],
    threads: int,
    rounds: int,
    calls: int,
    barrier: Any,
    results: Any,
) -> None:
    with _auth_log() as log:
        workers = [
            threading.Thread(
                target=_thread,
                args=(f"p{index}t{t}", url, store_path, rounds, calls, barrier, results, log),
                name=f"worker-{index}-{t}",
            )
            for t in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


def one_call(url: str, store_path: str, message: str) -> str:
    """A Dask task: a fresh ``OAuth`` over the shared file, one session, one ``echo``."""
    import mcpsync
    from mcpsync.auth import FileTokenStore, OAuth

    auth = OAuth(client_name="shared", redirect=_never_authorize, store=FileTokenStore(store_path))
    with mcpsync.Session.connect(url, auth=auth, connect_timeout=60) as session:
        return str(session.call_tool("echo", {"message": message}, timeout=60).content[0].text)
