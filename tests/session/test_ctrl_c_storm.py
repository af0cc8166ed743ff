"""A Ctrl-C storm on one stdio session: SIGINTs at random moments of the main thread's blocking
calls, four worker threads calling at the same time, and a server flooding numbered log
notifications. Every KeyboardInterrupt cancels only the main thread's own call: no
notification is lost or reordered, no line is spliced, no worker loses a reply, the reader
role is never left taken, and the session answers afterwards.
"""

from __future__ import annotations

import random
import signal
import sys
import threading
import time

import pytest
from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.transports import stdio

HOSTILE = [sys.executable, str(SERVERS_DIR / "hostile_server.py")]
FLOOD = 60_000
STORM_SECONDS = 6.0  # about 300 SIGINTs


def test_ctrl_c_storm_loses_nothing_and_wedges_nothing(no_leaks):
    assert threading.current_thread() is threading.main_thread()
    # Python's default handler, or mcpsync's stand-in for it once a stdio session was used
    assert signal.getsignal(signal.SIGINT) in (signal.default_int_handler, stdio._GUARD.handler)
    numbers: list[int] = []

    def on_log(message) -> None:
        if message.logger == "flood":
            numbers.append(message.data)

    s = mcpsync.Session.connect(HOSTILE, era="legacy", timeout=30, on_log=on_log)
    try:
        # Typed results import mcp_types on first use: do it before the storm (a Ctrl-C
        # inside an import can leave Python's import locks held for other threads).
        assert s.call_tool("echo", {"message": "warm"}).content[0].text == "warm"
        stop = threading.Event()
        worker_errors: list[BaseException] = []
        worker_calls = [0]

        def worker(k: int) -> None:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    text = s.call_tool("echo", {"message": f"w{k}-{i}"}, timeout=20)
                    assert text.content[0].text == f"w{k}-{i}", text
                    worker_calls[0] += 1
                except BaseException as exc:  # noqa: BLE001 - reported below
                    worker_errors.append(exc)
                    return

        signals = [0]
        storm_over = threading.Event()
        main_ident = threading.main_thread().ident
        assert main_ident is not None

        def storm() -> None:
            # Ends by itself: the main thread never has to stop it while signals fly.
            rng = random.Random(1234)
            end = time.monotonic() + STORM_SECONDS
            try:
                while time.monotonic() < end:
                    threading.Event().wait(rng.uniform(0.0005, 0.02))
                    signals[0] += 1
                    signal.pthread_kill(main_ident, signal.SIGINT)
            finally:
                storm_over.set()

        assert s.call_tool("flood", {"count": FLOOD}).content[0].text == "flooding"
        workers = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in workers:
            t.start()
        stormer = threading.Thread(target=storm)
        main_answers = main_interrupts = 0
        main_wrong: list[str] = []

        def main_calls() -> None:
            nonlocal main_answers, main_interrupts
            i = 0
            while not storm_over.is_set():
                i += 1
                try:
                    result = s.call_tool("echo", {"message": f"m{i}"}, timeout=20)
                    if result.content[0].text != f"m{i}":
                        main_wrong.append(result.content[0].text)
                    main_answers += 1
                except KeyboardInterrupt:
                    main_interrupts += 1

        stormer.start()
        while True:  # an interrupt may also land in this test's own code: go on
            try:
                main_calls()
                # The last SIGINT may still be on its way: absorb it in a bounded wait.
                threading.Event().wait(0.1)
                break
            except KeyboardInterrupt:
                main_interrupts += 1
        stop.set()
        stormer.join(5)
        for t in workers:
            t.join(30)

        assert not stormer.is_alive() and not any(t.is_alive() for t in workers), "wedged"
        assert signals[0] >= 100, f"only {signals[0]} SIGINTs were sent"
        assert not worker_errors, f"workers lost replies: {worker_errors[:3]}"
        assert not main_wrong, f"the main thread got others' replies: {main_wrong[:3]}"
        assert main_interrupts > 0 and main_answers > 0
        # The flood ends; one more call after it: ordering puts every notification first.
        deadline = time.monotonic() + 30
        while int(s.call_tool("flood_done", {}).content[0].text) < FLOOD:
            assert time.monotonic() < deadline, "the server's flood did not finish"
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"
        garbage = [str(e) for e in s.connection.protocol_errors if "wrote to stdout" in str(e)]
        assert not garbage, f"spliced or garbage lines: {garbage[:3]}"
        lost = FLOOD - len(numbers)
        assert numbers == list(range(FLOOD)), f"{lost} of {FLOOD} notifications lost/reordered"
        assert not s.transport.reader._role.locked()  # noqa: SLF001 - the reader role is free
        print(
            f"storm: {signals[0]} SIGINTs, {main_interrupts} interrupted main calls, "
            f"{main_answers} answered, {worker_calls[0]} worker calls, 0 of {FLOOD} lost"
        )
    finally:
        s.close()


def test_ctrl_c_right_after_the_reader_role_is_taken_releases_it(no_leaks):
    # Deterministic: a profile hook raises SIGINT the moment the main thread's acquire of the
    # reader role returns; the call is cancelled, the role is free, the session answers.
    with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=10) as s:
        assert s.call_tool("echo", {"message": "warm"}).content[0].text == "warm"
        role = s.transport.reader._role  # noqa: SLF001
        fired = []

        def hook(frame, event, arg) -> None:
            if not fired and event == "c_return" and getattr(arg, "__self__", None) is role:
                fired.append(1)
                signal.raise_signal(signal.SIGINT)

        interrupted = False
        sys.setprofile(hook)
        try:
            s.call_tool("sleep", {"seconds": 0.5}, timeout=10)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            sys.setprofile(None)
        assert fired and interrupted
        assert not role.locked()
        assert not s.connection._pending  # noqa: SLF001 - the interrupted call was retired
        for i in range(5):
            assert s.call_tool("echo", {"message": str(i)}, timeout=5).content[0].text == str(i)


def test_ctrl_c_during_big_writes_never_splices_what_the_server_reads(no_leaks):
    # The main thread sends 256 KiB arguments (each write waits for the server to read); SIGINTs
    # land mid-write. The rest of an interrupted message goes out before the next one.
    with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=30) as s:
        assert s.call_tool("echo", {"message": "warm"}).content[0].text == "warm"
        big = "y" * (256 * 1024)
        main_ident = threading.main_thread().ident
        assert main_ident is not None
        storm_over = threading.Event()
        worker_errors: list[BaseException] = []

        def storm() -> None:
            rng = random.Random(99)
            end = time.monotonic() + 3.0
            try:
                while time.monotonic() < end:
                    threading.Event().wait(rng.uniform(0.0005, 0.01))
                    signal.pthread_kill(main_ident, signal.SIGINT)
            finally:
                storm_over.set()

        def worker() -> None:
            i = 0
            while not storm_over.is_set():
                i += 1
                try:
                    r = s.call_tool("echo", {"message": f"w{i}"}, timeout=20)
                    assert r.content[0].text == f"w{i}"
                except BaseException as exc:  # noqa: BLE001 - reported below
                    worker_errors.append(exc)
                    return

        helper = threading.Thread(target=worker)
        stormer = threading.Thread(target=storm)
        answered = interrupted = 0

        def big_calls() -> None:
            nonlocal answered, interrupted
            while not storm_over.is_set():
                try:
                    r = s.call_tool("echo", {"message": big}, timeout=20)
                    assert len(r.content[0].text) == len(big)
                    answered += 1
                except KeyboardInterrupt:
                    interrupted += 1

        helper.start()
        stormer.start()
        while True:  # an interrupt may also land in this test's own code: go on
            try:
                big_calls()
                threading.Event().wait(0.1)
                break
            except KeyboardInterrupt:
                interrupted += 1
        stormer.join(5)
        helper.join(30)
        assert not helper.is_alive() and not worker_errors, worker_errors[:3]
        assert interrupted > 0
        assert s.call_tool("bad_input", {}).content[0].text == "0", "the server read spliced lines"
        assert s.call_tool("echo", {"message": "after"}).content[0].text == "after"


def test_sigint_goes_back_to_pythons_handler_when_the_last_stdio_session_closes(no_leaks):
    if stdio._GUARD.open:
        pytest.skip("a stdio session an earlier test opened in this process is still open")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=10) as s:
        with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=10) as t:
            assert t.call_tool("echo", {"message": "t"}).content[0].text == "t"
        assert s.call_tool("echo", {"message": "s"}).content[0].text == "s"
        assert signal.getsignal(signal.SIGINT) == stdio._GUARD.handler  # one still open
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # An application's own handler is never replaced.
    mine = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        with mcpsync.Session.connect(HOSTILE, era="legacy", timeout=10) as s:
            assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
            assert signal.getsignal(signal.SIGINT) != stdio._GUARD.handler
    finally:
        signal.signal(signal.SIGINT, mine)
