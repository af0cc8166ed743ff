"""Logging across os.fork(): a child forked while another thread is inside a logging
handler's emit can still log through that handler (mcpsync.runtime.logfork's at-fork hook holds
the handlers' locks across the fork); the hook is bounded and re-entrant."""

from __future__ import annotations

import io
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import mcpsync
from mcpsync.runtime import logfork as _logfork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

#: how long a forked child may take to log its record and report (a hung one is killed)
CHILD_WAIT = 10.0
FORKS = 200

# A demo server with a thread that writes stderr lines as fast as it can: the session's
# reader thread logs every one of them.
NOISY = [
    sys.executable,
    "-c",
    "import sys, threading\n"
    "from mcpsync.demo_server import main\n"
    "def spam():\n"
    "    n = 0\n"
    "    while True:\n"
    "        n += 1\n"
    "        sys.stderr.write(f'noise {n} ' + 'x' * 100 + '\\n')\n"
    "        sys.stderr.flush()\n"
    "threading.Thread(target=spam, daemon=True).start()\n"
    "sys.exit(main([]))\n",
]


def _reap(pid: int) -> int:
    """The child's exit code (bounded: it reported, so it is at its os._exit)."""
    deadline = time.monotonic() + CHILD_WAIT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.002)  # a bounded poll of an exiting child, not synchronisation
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"child {pid} did not exit after reporting")


def _fork_and_log(child: Callable[[int], None], forks: int) -> list[int | None]:
    """Fork ``forks`` times; each child runs ``child(i)`` (logging), writes 'ok' and exits
    0. A child that does not report within CHILD_WAIT is killed and the test fails.
    Returns what the hook skipped at each fork (``_logfork.skipped()``)."""
    skips: list[int | None] = []
    for i in range(forks):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never back into pytest
            code = 1
            try:
                os.close(r)
                child(i)
                os.write(w, b"ok")
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        skips.append(_logfork.skipped())
        try:
            ready, _, _ = select.select([r], [], [], CHILD_WAIT)
            got = os.read(r, 2) if ready else b""
        finally:
            os.close(r)
        if not got:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(
                f"fork {i + 1} of {forks}: the child hung logging its record"
                f" (the hook skipped {skips[-1]} handler(s))"
            )
        assert got == b"ok", got
        assert _reap(pid) == 0
    return skips


@pytest.fixture
def spam_logger() -> Iterator[logging.Logger]:
    """A logger below ``mcpsync`` that keeps its records (propagate off, restored)."""
    logger = logging.getLogger("mcpsync.tests.forklog")
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger
    finally:
        logger.setLevel(level)
        logger.propagate = propagate


class _Spammer:
    """A thread logging records through ``logger`` as fast as it can."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.stop = threading.Event()
        self.count = 0
        self.thread = threading.Thread(target=self._run, name="test-log-spammer", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.count += 1
            self.logger.info("spam %d %s", self.count, "y" * 200)

    def __enter__(self) -> _Spammer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def _pipe_handler() -> tuple[logging.StreamHandler[io.TextIOWrapper], threading.Thread]:
    """A StreamHandler on a buffered pipe, drained by a thread of this (parent) process."""
    r, w = os.pipe()
    stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(w, "w"), 65536), encoding="utf-8")
    handler = logging.StreamHandler(stream)

    def drain() -> None:
        while os.read(r, 65536):
            pass
        os.close(r)

    drainer = threading.Thread(target=drain, name="test-pipe-drain", daemon=True)
    drainer.start()
    return handler, drainer


@pytest.mark.parametrize("where", ["file on mcpsync", "pipe below mcpsync"])
def test_children_forked_during_emits_can_log(
    spam_logger: logging.Logger, tmp_path: Path, where: str
) -> None:
    """A thread emitting records non-stop through a buffered stream; 200 forks; every
    child logs through the same handler and exits. Without the hook some child inherits
    the stream's buffer lock held by the emitting thread and blocks for ever."""
    drainer = None
    if where.startswith("file"):
        handler: logging.Handler = logging.FileHandler(tmp_path / "log.txt", encoding="utf-8")
        owner = logging.getLogger("mcpsync")  # the handler sits on mcpsync, the chain's top
        saved = owner.propagate
        owner.propagate = False  # (the records stay out of pytest's capture)
        spam_logger.propagate = True
    else:
        handler, drainer = _pipe_handler()
        owner, saved = spam_logger, spam_logger.propagate
    owner.addHandler(handler)
    try:
        assert handler in _logfork.handlers()
        with _Spammer(spam_logger) as spammer:
            skips = _fork_and_log(lambda i: spam_logger.warning("child %d of the fork", i), FORKS)
            assert skips == [0] * FORKS  # every lock was had at every fork
            assert spammer.count > FORKS  # the thread was emitting throughout
    finally:
        owner.removeHandler(handler)
        owner.propagate = saved
        handler.close()
        if isinstance(handler, logging.StreamHandler) and drainer is not None:
            handler.stream.close()  # (a StreamHandler leaves its stream open)
    if drainer is not None:
        drainer.join(timeout=10)
        assert not drainer.is_alive()
    else:
        text = (tmp_path / "log.txt").read_text(encoding="utf-8")
        assert text.count("of the fork") == FORKS  # every child's record is there, whole


def test_a_session_forked_while_its_reader_logs_stderr(tmp_path: Path) -> None:
    """A real stdio session whose server writes stderr non-stop (the reader thread logs
    every line); forked 100 times; each child logs a record and closes its copy (which
    logs too); the parent's session goes on answering."""
    name = "noisy-fork"
    logger = logging.getLogger(f"mcpsync.server.{name}")
    handler = logging.FileHandler(tmp_path / "server.log", encoding="utf-8")
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        with mcpsync.Session.connect(NOISY, name=name, timeout=30) as session:
            assert session.call_tool("echo", {"message": "up"}).content[0].text == "up"

            def child(i: int) -> None:
                logger.warning("child %d of the fork", i)
                session.close()  # the child's copies only

            assert _fork_and_log(child, 100) == [0] * 100
            assert session.call_tool("echo", {"message": "after"}).content[0].text == "after"
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        handler.close()
    text = (tmp_path / "server.log").read_text(encoding="utf-8")
    assert text.count("of the fork") == 100
    assert text.count("noise ") > 100  # the reader was logging the server's stderr


def test_a_handler_stuck_in_emit_is_skipped_and_the_fork_goes_on(
    spam_logger: logging.Logger, tmp_path: Path
) -> None:
    """One handler's lock held by another thread for good (as an emit on a full pipe):
    the fork still happens (bounded), that handler is skipped, the others are released in
    the parent and usable in the child."""
    stuck = logging.StreamHandler(io.StringIO())
    good = logging.FileHandler(tmp_path / "good.log", encoding="utf-8")
    spam_logger.addHandler(stuck)
    spam_logger.addHandler(good)
    taken, let_go = threading.Event(), threading.Event()

    def hold() -> None:
        with stuck.lock:  # type: ignore[union-attr]
            taken.set()
            let_go.wait(60)

    holder = threading.Thread(target=hold, name="test-stuck-handler", daemon=True)
    holder.start()
    outcome: list[object] = []

    def fork() -> None:
        try:
            outcome.extend(_fork_and_log(lambda i: spam_logger.warning("from the child"), 1))
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome.append(exc)

    try:
        assert taken.wait(10)
        forker = threading.Thread(target=fork, name="test-forker", daemon=True)
        forker.start()
        forker.join(timeout=CHILD_WAIT + 10)
        hung = forker.is_alive()
        let_go.set()  # frees an unbounded hook, so the test ends either way
        forker.join(timeout=10)
        assert not hung, "the fork waited for the stuck handler"
        assert outcome == [1]  # the stuck one skipped, the others taken
        # the parent released what it took: another thread gets `good`'s lock at once
        assert good.lock is not None
        got = threading.Event()

        def take() -> None:
            assert good.lock is not None
            if good.lock.acquire(timeout=10):
                good.lock.release()
                got.set()

        taker = threading.Thread(target=take, name="test-taker", daemon=True)
        taker.start()
        taker.join(timeout=15)
        assert got.is_set()
    finally:
        let_go.set()
        holder.join(timeout=10)
        spam_logger.removeHandler(stuck)
        spam_logger.removeHandler(good)
        good.close()
    assert "from the child" in (tmp_path / "good.log").read_text(encoding="utf-8")


def test_a_fork_from_inside_an_emit_takes_that_handler_again(
    spam_logger: logging.Logger,
) -> None:
    """A handler whose emit forks (the forking thread holds its lock): the hook takes the
    lock again (an RLock), skips nothing, and the child can log through it."""
    seen: list[int] = []

    class Forking(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage() != "fork now":
                return
            seen.extend(_fork_and_log(lambda i: spam_logger.warning("child"), 1))

    handler = Forking()
    spam_logger.addHandler(handler)
    try:
        spam_logger.warning("fork now")
    finally:
        spam_logger.removeHandler(handler)
    assert seen == [0]
