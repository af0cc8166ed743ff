"""Where a stdio caller waits while another thread reads its reply: the wake-up slots.

Owns: ``Slots``, one transport's supply of wake-up slots. A caller of ``wait_for`` that
cannot take the reader role parks on a slot; the thread that reads its reply (or hands the
role over) wakes it by writing to the slot. A slot is an eventfd (Linux) or a pipe
(elsewhere) and a ``poll`` object watching it.

Why not a lock: a lock is released with the GIL held. On a busy CPU the woken thread is
scheduled at once (the kernel's wake-up preemption), finds the GIL taken and sleeps again:
two context switches for nothing per wake-up. ``os.write`` releases the GIL around the
system call, so the thread it wakes runs on it. Measured (``benchmarks/shared_session.py``,
8 threads on one stdio session, client and server pinned to separate CPUs): 1.0 instead of
1.9 voluntary and 0.23 instead of 0.68 involuntary context switches a call, ~30% more calls/s.

The rules that make reuse and closing safe (a write to a closed descriptor could land on a
reused number):
- exactly one waker writes to a parked slot, once: the one that popped the caller's entry
  from the parked table (``dict.pop`` is atomic);
- a slot goes back to the free list only when clean: its parker took its own entry back
  (nobody will write), or read the one write (``done``); else ``done`` waits for that write,
  bounded, and a slot whose write never came is left open and out of use (counted);
- ``close`` closes the free slots; a parker that returns one after that closes it itself
  (it looks at ``closed`` after the append, so no slot is missed).
"""

from __future__ import annotations

import logging
import os
import select
import sys
from typing import Any

__all__ = ["Slots", "Slot", "WAKE", "KIND"]

log = logging.getLogger("mcpsync")

#: what a waker writes: 8 bytes, as an eventfd requires (a pipe takes them too)
WAKE = (1).to_bytes(8, sys.byteorder)
#: free slots kept per transport (more parked at once: the extra ones are closed on return)
KEEP = 32
#: how long a parker waits for the write a waker owes it before giving the slot up (s)
OWED_WRITE_WAIT = 1.0

#: (write fd, read fd, poll object on the read fd); for an eventfd both fds are the same
Slot = tuple[int, int, Any]

#: what a new slot is made of: an eventfd on Linux (Python 3.10+: one descriptor), a pipe
#: elsewhere (macOS, BSD); the tests run both kinds on Linux
KIND = "eventfd" if sys.platform == "linux" else "pipe"


def _new_slot() -> Slot:
    if KIND == "eventfd":
        fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        write_fd = read_fd = fd
    else:  # a pipe: one write of 8 bytes, one read of 8 (both ends close-on-exec already)
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
    poller = select.poll()
    poller.register(read_fd, select.POLLIN)
    return (write_fd, read_fd, poller)


def _close_slot(slot: Slot) -> None:
    write_fd, read_fd, _ = slot
    for fd in {write_fd, read_fd}:
        try:
            os.close(fd)
        except OSError:
            pass


def consume(read_fd: int) -> bool:
    """Read a slot's pending wake-up; True if there was one."""
    try:
        return bool(os.read(read_fd, 8))
    except (BlockingIOError, OSError):
        return False


class Slots:
    """One transport's wake-up slots (see the module docstring)."""

    def __init__(self) -> None:
        #: clean slots ready for a parker (``list.pop``/``append`` are atomic)
        self.free: list[Slot] = []
        self.closed = False
        #: slots given up because the write owed to them never came (left open, unused)
        self.lost = 0

    def take(self) -> Slot:
        """A clean slot: a free one, or a new one."""
        free = self.free
        if free:
            try:
                return free.pop()
            except IndexError:  # taken by another parker just now
                pass
        return _new_slot()

    def done(self, slot: Slot, mine: bool, woken: bool) -> None:
        """A parker is done with ``slot``. ``mine``: it took its own entry back from the
        parked table (no waker has it); ``woken``: it read the one write of its waker."""
        if not mine and not woken:  # a waker has our entry: its write is owed, wait for it
            try:
                came = bool(slot[2].poll(OWED_WRITE_WAIT * 1000)) and consume(slot[1])
            except BaseException:  # (a second Ctrl-C): the slot cannot be known clean
                self.lost += 1
                raise
            if not came:
                self.lost += 1
                log.warning("mcpsync: a wake-up slot's write never came; the slot is retired")
                return
        free = self.free
        if len(free) >= KEEP:
            _close_slot(slot)
            return
        free.append(slot)
        if self.closed:  # close() may have emptied the list before this append
            self.close()

    def close(self) -> None:
        """Close every free slot; the ones in use are closed by their parkers."""
        self.closed = True
        free = self.free
        while free:
            try:
                slot = free.pop()
            except IndexError:
                return
            _close_slot(slot)

    def abandon(self) -> None:
        """In a forked child: close this process's copies of the free slots."""
        self.close()
