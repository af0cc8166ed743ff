"""mcpsync.smoke.run() on a process pool whose worker dies: each entry runs at most once more,
only the culprit fails (class ``worker``), the others get their real result; runs are
counted in the workers (a file each bring-up appends to)."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from test_smoke import entry, tiny, write_config

import mcpsync
from mcpsync.smoke import EXIT_CODES


def _count_and_die(runs: str) -> None:
    """Process-pool initializer: every bring-up appends its entry's name and the worker's pid
    to ``runs``; the worker bringing up entry 'dies' exits on the spot."""
    from mcpsync.session import Session

    original = Session.connect.__func__

    def connect(cls, *args, **kwargs):
        name = kwargs.get("name")
        fd = os.open(runs, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{name} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        if name == "dies":
            os._exit(17)
        return original(cls, *args, **kwargs)

    Session.connect = classmethod(connect)


@pytest.fixture
def resource_tracker():
    """multiprocessing's resource tracker lives as long as this process: start it first."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


@pytest.mark.parametrize("parallel", [2, 8])
def test_a_dying_worker_reruns_each_entry_at_most_once(
    tmp_path: Path, resource_tracker, no_leaks, parallel: int
):
    server = tiny(tmp_path)
    names = ["a", "b", "dies", "c", "d"]
    cfg = write_config(tmp_path / "mcp.json", {n: entry(server) for n in names})
    runs = tmp_path / "runs"
    ctx = multiprocessing.get_context("spawn")
    t0 = time.monotonic()
    with ProcessPoolExecutor(
        max_workers=2, mp_context=ctx, initializer=_count_and_die, initargs=(str(runs),)
    ) as pool:
        report = mcpsync.smoke.run(cfg, calls=["echo"], executor=pool, parallel=parallel)
    assert (
        time.monotonic() - t0 < 120
    )  # spawned workers on a busy machine; the run's own bound is far more
    lines = [line.split() for line in runs.read_text().splitlines()]
    counts = Counter(name for name, _ in lines)
    assert [e.name for e in report.entries] == names
    by = {e.name: e for e in report.entries}
    assert by["dies"].failure == "worker" and "died" in by["dies"].error
    assert all(by[n].ok and by[n].calls[0].ok for n in names if n != "dies"), report.to_json()
    assert report.exit_code == EXIT_CODES["worker"]
    assert set(counts) == set(names)
    assert all(1 <= counts[n] <= 2 for n in names), counts  # at most once more
    assert counts["dies"] == 2  # in the pool, then alone
    # the retries share one fresh worker until the culprit breaks it, then one more:
    # the pool's 2 workers, at most 2 for the retries (not one worker an entry retried)
    assert len({pid for _, pid in lines}) <= 4, lines
