"""Wake-up slots of parked stdio callers (``mcpsync.transports.park``): reused only when
clean, closed with the transport, none left behind; and many threads on one real stdio
session, every reply routed to its caller, while callers park and wake all the time."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import pytest
from servers.launch import demo_argv

import mcpsync
from mcpsync.transports import park
from mcpsync.transports.park import WAKE, Slots

#: the slot kinds this machine has: the pipe (macOS, BSD) runs here too, by ``park.KIND``
KINDS = ["pipe", *(["eventfd"] if sys.platform == "linux" else [])]


@pytest.fixture(autouse=True, params=KINDS)
def kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(park, "KIND", request.param)
    return str(request.param)


def _kind_of(fd: int) -> str:
    target = os.readlink(f"/proc/self/fd/{fd}")
    return "eventfd" if "eventfd" in target else "pipe" if target.startswith("pipe:") else target


def _fds(kind: str) -> int:
    """This process's open descriptors of ``kind`` (eventfds, or pipes) (0 without /proc)."""
    if not os.path.isdir("/proc/self/fd"):
        return 0
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if _kind_of(int(name)) == kind:
                count += 1
        except OSError:
            pass
    return count


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_a_clean_slot_is_reused_and_close_closes_the_free_ones(kind):
    slots = Slots()
    first = slots.take()
    if os.path.isdir("/proc/self/fd"):
        assert {_kind_of(first[0]), _kind_of(first[1])} == {kind}
        assert (first[0] == first[1]) == (kind == "eventfd")
    slots.done(first, mine=True, woken=False)  # took its own entry back: nobody writes
    again = slots.take()
    assert again is first
    os.write(again[0], WAKE)
    assert again[2].poll(1000)  # a write wakes the poll on the slot
    assert park.consume(again[1])
    assert not park.consume(again[1])  # one write, one wake-up
    slots.done(again, mine=False, woken=True)  # its waker's one write was read: clean
    assert slots.free == [first]
    slots.close()
    assert slots.free == [] and not _is_open(first[1])


def test_a_slot_returned_after_close_is_closed_by_its_parker():
    slots = Slots()
    slot = slots.take()
    slots.close()
    slots.done(slot, mine=True, woken=False)
    assert slots.free == [] and not _is_open(slot[1])


def test_a_parker_waits_for_the_write_its_waker_owes_before_reuse():
    slots = Slots()
    slot = slots.take()
    popped = threading.Event()

    def late_waker() -> None:
        popped.wait(5)
        os.write(slot[0], WAKE)  # the entry was popped earlier; the write comes later

    thread = threading.Thread(target=late_waker)
    thread.start()
    popped.set()
    slots.done(slot, mine=False, woken=False)  # must not reuse it before that write
    thread.join(5)
    assert slots.free == [slot]
    assert not park.consume(slot[1])  # the owed write was read by done(): the slot is clean
    slots.close()


def test_a_slot_whose_owed_write_never_comes_is_retired_not_reused(monkeypatch, caplog):
    monkeypatch.setattr(park, "OWED_WRITE_WAIT", 0.05)
    slots = Slots()
    slot = slots.take()
    with caplog.at_level(logging.WARNING, logger="mcpsync"):
        slots.done(slot, mine=False, woken=False)
    assert slots.free == [] and slots.lost == 1
    assert _is_open(slot[1])  # left open: a late write must not land on a reused number
    assert "never came" in caplog.text
    for fd in {slot[0], slot[1]}:
        os.close(fd)


def test_free_slots_are_capped(monkeypatch):
    monkeypatch.setattr(park, "KEEP", 2)
    slots = Slots()
    taken = [slots.take() for _ in range(4)]
    for slot in taken:
        slots.done(slot, mine=True, woken=False)
    assert len(slots.free) == 2
    assert [_is_open(s[1]) for s in taken] == [True, True, False, False]
    slots.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_many_threads_on_one_stdio_session_route_every_reply_and_leave_no_slot(no_leaks, kind):
    before = _fds(kind)
    session = mcpsync.Session.connect(demo_argv(), name="park")
    errors: list[str] = []
    start = threading.Barrier(16)

    def run(i: int) -> None:
        start.wait(30)
        for n in range(150):
            message = f"t{i}-{n}"
            try:
                got = session.call_tool("echo", {"message": message}, timeout=30).content[0].text
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(repr(exc))
                return
            if got != message:
                errors.append(f"{message!r} got {got!r}")
                return

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors[:3]
        transport = session.connection.transport
        slots = transport.reader._slots
        assert slots.lost == 0
        assert slots.free, "no caller parked"
        assert {_kind_of(fd) for slot in slots.free for fd in slot[:2]} == {kind}
    finally:
        session.close()
    assert _fds(kind) == before  # close() closed every slot (and, for pipes, the session's)


def test_callers_parked_when_the_server_dies_all_fail_and_leave_no_slot(no_leaks, kind):
    before = _fds(kind)
    session = mcpsync.Session.connect(demo_argv(), name="park-dies")
    outcomes: list[BaseException | None] = []
    lock = threading.Lock()
    inside = threading.Barrier(9)

    def run() -> None:
        inside.wait(30)
        try:
            session.call_tool("long_running", {"duration": 30, "steps": 1}, timeout=60)
        except mcpsync.MCPSyncError as exc:
            with lock:
                outcomes.append(exc)
        else:
            with lock:
                outcomes.append(None)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    inside.wait(30)
    transport = session.connection.transport
    # wait until all eight wait for their reply (one reads, the others are parked)
    pause = threading.Event()
    end = time.monotonic() + 60
    while len(transport.reader._waiting) < 8 and time.monotonic() < end:
        pause.wait(0.01)
    assert len(transport.reader._waiting) == 8
    transport.process.kill()
    for thread in threads:
        thread.join(30)
    assert len(outcomes) == 8 and all(isinstance(o, mcpsync.ServerExited) for o in outcomes)
    session.close()
    assert _fds(kind) == before
