"""Shared fixtures: leak checks (threads, child processes) around every test that asks."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

import psutil
import pytest
import tiers

# The test files sit in folders named after the package part they test (tests/README.md) and
# have unique names: pytest's default "prepend" import mode imports each as a top-level module
# and puts its folder on sys.path as it collects it. Test modules import helpers from one
# another by that name, across folders too (tests/config/test_config_auth.py uses
# tests/auth/test_auth_device.py's DeviceAS): put every test folder on sys.path now, so that a
# folder or a file run alone imports as in a full run. (tests/ itself is there already: this
# conftest's folder, for the support modules: fakes, tiers, servers, auth_peers...)
_TESTS = os.path.dirname(os.path.abspath(__file__))
for _folder in sorted(os.scandir(_TESTS), key=lambda entry: entry.name, reverse=True):
    if (
        _folder.is_dir()
        and _folder.path not in sys.path
        and any(name.startswith("test_") and name.endswith(".py") for name in os.listdir(_folder))
    ):
        sys.path.insert(0, _folder.path)

# A shell that starts the test command in the background (`cmd &` without job control)
# leaves SIGINT ignored, and an ignored signal stays ignored across exec: neither this
# process nor the servers and CLIs it spawns would see Ctrl-C, and the Ctrl-C tests would
# test nothing. Put Python's handler back; children then start with the default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process(os.getpid()).children(recursive=True)}


def _mcpsync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("mcpsync-")]


def _running(pid: int) -> bool:
    """True for a process that exists and is not a zombie (one may vanish while we look)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # NoSuchProcess, or gone between the listing and the look
        return False


@pytest.fixture
def no_leaks():
    """Assert that the test leaves no mcpsync thread and no child process behind."""
    threads_before = set(_mcpsync_threads())
    children_before = _children()
    yield
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        threads = [t for t in _mcpsync_threads() if t not in threads_before and t.is_alive()]
        children = [pid for pid in _children() - children_before if _running(pid)]
        if not threads and not children:
            return
        time.sleep(0.05)
    frames = sys._current_frames()
    stacks = "".join(
        f"\n--- {t.name}:\n" + "".join(traceback.format_stack(frames[t.ident]))
        for t in threads
        if t.ident in frames
    )
    raise AssertionError(
        f"left behind: threads {[t.name for t in threads]}, child processes {children}{stacks}"
    )


@pytest.fixture(autouse=True)
def _restore_mcpsync_logger():
    """The CLI, run in-process by some tests, configures the `mcpsync` logger; undo it."""
    import logging

    logger = logging.getLogger("mcpsync")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


@pytest.fixture
def rsps():
    """A ``responses`` mock for requests (the auth tests' World runs on it)."""
    import responses

    with responses.RequestsMock(assert_all_requests_are_fired=False) as r:
        yield r


@pytest.fixture
def http():
    """A plain ``requests.Session``, closed after the test."""
    import requests

    with requests.Session() as s:
        yield s


# ------------------------------------------------------------------ tiers and isolation
# Markers come from one table (tests/tiers.py); the spawn audit checks its process rules;
# each pytest process (one per xdist worker) gets its own cache folder.

_running_item: pytest.Item | None = None
_spawns: dict[str, list[str]] = {}  # nodeid -> what it started ("subprocess.Popen: cmd", ...)
_SPAWN_EVENTS = {"subprocess.Popen", "os.fork", "os.posix_spawn", "os.spawn", "os.exec"}


_LOOKUPS = ("ctypes/util.py", "/platform.py")


def _from_library_lookup() -> bool:
    """Whether the process is started by a standard-library lookup a dependency makes the
    first time in a process, in whichever test gets there first, not a server the test
    starts: ``ctypes.util.find_library`` (ldconfig, gcc, ld; keyring probes for macOS's
    Security framework as it is imported) and ``platform`` (``uname -p``: Dask asks for
    the processor name as its workers start)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.replace("\\", "/").endswith(_LOOKUPS):
            return True
        frame = frame.f_back
    return False


def _audit(event: str, args: tuple) -> None:
    """Record which test started a process (an audit hook only observes; it changes nothing)."""
    if event in _SPAWN_EVENTS and _running_item is not None and not _from_library_lookup():
        what = event
        if event == "subprocess.Popen" and len(args) > 1:
            what = f"{event}: {str(args[1])[:120]}"
        _spawns.setdefault(_running_item.nodeid, []).append(
            f"{what} (thread {threading.current_thread().name})"
        )


sys.addaudithook(_audit)


def pytest_configure(config: pytest.Config) -> None:
    # The per-user cache folder (era verdicts, token files) is process-wide state: a private
    # one per pytest process keeps xdist workers apart and the user's own folder untouched.
    folder = tempfile.mkdtemp(prefix="mcpsync-tests-cache-")
    config.stash[_CACHE_KEY] = (folder, os.environ.get("XDG_CACHE_HOME"))
    os.environ["XDG_CACHE_HOME"] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder, before = config.stash.get(_CACHE_KEY, (None, None))
    if folder is None:
        return
    if before is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = before
    shutil.rmtree(folder, ignore_errors=True)


_CACHE_KEY = pytest.StashKey[tuple]()


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.name
        for name in sorted(tiers.markers_for(path, item.name)):
            item.add_marker(getattr(pytest.mark, name))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    global _running_item
    _running_item = item
    try:
        return (yield)
    finally:
        _running_item = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when != "teardown" or report.failed:
        return report
    started = _spawns.get(item.nodeid)
    report_path = os.environ.get("MCPSYNC_TIERS_REPORT")
    if report_path:  # one line per test: nodeid, whether it started a process (table upkeep)
        with open(f"{report_path}.{os.getpid()}", "a") as out:
            out.write(f"{item.nodeid}\t{int(bool(started))}\n")
        return report
    if started and not any(item.get_closest_marker(name) for name in tiers.SPAWNING):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} started a process but has none of the markers "
            f"{sorted(tiers.SPAWNING)} (add a rule to tests/tiers.py): {started[:3]}"
        )
    return report
