"""``connect_timeout`` bounds the whole bring-up, the unwinding of what it started included.

Each test stalls a server at one step of the bring-up (no answer at all, no answer to
``initialize`` after answering the probe, an HTTP server that accepts and never replies)
and measures, through the public API, how long the caller waits for its error: at most
the bound + 0.5 s (``BOUND_SLACK``), also for a server that ignores stdin EOF and SIGTERM,
whose shutdown ladder (2 s grace, SIGTERM, 2 s, SIGKILL) then goes on in the background.
Then it waits (bounded, on the process table and the thread list) until nothing is left.
"""

from __future__ import annotations

import io
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.cli import main as cli_main
from mcpsync.errors import RequestTimeout
from mcpsync.host import Host
from mcpsync.protocol.choose import Caches

#: how much later than its bound a caller may get its error (the issue's promise)
BOUND_SLACK = 0.5
#: how long the background end of a shutdown ladder may take to leave nothing behind:
#: stdin EOF grace 2 s + SIGTERM grace 2 s + SIGKILL, with room for a loaded machine
LADDER = 10.0

SERVER = str(SERVERS_DIR / "startup_fault_server.py")


def fault_argv(*flags: str) -> list[str]:
    return [sys.executable, SERVER, *flags]


def _our_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("mcpsync-")}


def _live_children() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out.append(child)
        except psutil.Error:
            pass
    return out


def _open_fds() -> set[str]:
    try:
        return set(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: the descriptors are not counted
        return set()


@pytest.fixture
def left_nothing() -> Iterator[None]:
    """After the test: within ``LADDER`` s no new mcpsync thread, no child process and no
    new file descriptor is left (the background ladder had time to end them); polled."""
    threads_before = _our_threads()
    children_before = {p.pid for p in _live_children()}
    fds_before = _open_fds()
    yield
    deadline = time.monotonic() + LADDER
    while True:
        threads = [t.name for t in _our_threads() - threads_before if t.is_alive()]
        children = [p.pid for p in _live_children() if p.pid not in children_before]
        fds = sorted(_open_fds() - fds_before)
        if not threads and not children and not fds:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"left behind after {LADDER} s: {threads}, {children}, fds {fds}")
        time.sleep(0.05)


def _connect_fails(target, bound: float, **kwargs) -> tuple[BaseException, float]:
    # ``mcpsync.Session`` is a lazy attribute: its first use imports mcpsync.session and what
    # it needs, before connect() is entered and its bound begins. That import is measured
    # out: in a test process every mcpsync module goes through pytest's assertion rewriting
    # (mcpsync is a pytest plugin), and with both CPUs busy the first test of a process took
    # 2.55-3.54 s for connect_timeout=2 ([auto-accepts], 8 runs in 8), 2.0-2.1 s with it
    # resolved first (5 runs in 5, 4 tests each; connect() itself ends at 2.00 s).
    connect = mcpsync.Session.connect
    t0 = time.monotonic()
    with pytest.raises(mcpsync.MCPSyncError) as info:
        connect(target, connect_timeout=bound, _caches=Caches(), **kwargs)
    return info.value, time.monotonic() - t0


@pytest.mark.parametrize(
    "flags",
    [["--silent"], ["--silent", "--keep-running"], ["--silent", "--keep-running", "--ignore-term"]],
    ids=["exits-at-eof", "ignores-eof", "ignores-eof-and-sigterm"],
)
def test_a_silent_stdio_server_fails_within_the_bound(left_nothing, flags):
    error, elapsed = _connect_fails(fault_argv(*flags), 2.0)
    assert isinstance(error, RequestTimeout)
    assert "connect_timeout=2 s" in str(error)
    assert elapsed <= 2.0 + BOUND_SLACK, f"{elapsed:.2f} s for connect_timeout=2"


def test_a_server_answering_the_probe_but_never_initialize(left_nothing):
    error, elapsed = _connect_fails(fault_argv("--no-initialize", "--keep-running"), 2.5)
    assert isinstance(error, RequestTimeout)
    assert "initialize" in str(error) and "connect_timeout=2.5 s" in str(error)
    assert elapsed <= 2.5 + BOUND_SLACK, f"{elapsed:.2f} s for connect_timeout=2.5"


def test_the_legacy_era_forced_and_a_server_that_never_answers_initialize(left_nothing):
    error, elapsed = _connect_fails(
        fault_argv("--no-initialize", "--keep-running", "--ignore-term"), 2.0, era="legacy"
    )
    assert isinstance(error, RequestTimeout)
    assert elapsed <= 2.0 + BOUND_SLACK, f"{elapsed:.2f} s for connect_timeout=2"


@contextmanager
def _mute_http(read_request: bool) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 that accepts every connection and never answers (with
    ``read_request``, after reading what the client sent)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    server.settimeout(0.1)  # accept() looks at ``stop`` this often (close() does not wake it)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)
            conn.settimeout(0.5)
            if read_request:
                try:
                    conn.recv(65536)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/mcp"
    finally:
        stop.set()
        thread.join(5)
        server.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize("read_request", [False, True], ids=["accepts", "reads"])
@pytest.mark.parametrize("era", ["auto", "legacy"])
def test_an_http_server_that_accepts_and_never_replies(left_nothing, read_request, era):
    with _mute_http(read_request) as url:
        error, elapsed = _connect_fails(url, 2.0, era=era)
    assert isinstance(error, RequestTimeout), repr(error)
    assert elapsed <= 2.0 + BOUND_SLACK, f"{elapsed:.2f} s for connect_timeout=2"


def test_a_host_entry_connect_timeout_bounds_its_bring_up(left_nothing):
    argv = fault_argv("--silent", "--keep-running", "--ignore-term")
    config = {"mcpServers": {"mute": {"command": argv[0], "args": argv[1:], "connectTimeout": 2}}}
    host = Host(config, _caches=Caches())
    try:
        t0 = time.monotonic()
        host.start()
        elapsed = time.monotonic() - t0
        (status,) = host.status()
    finally:
        host.close()
    assert status.state == "failed" and isinstance(status.error, RequestTimeout), status
    assert elapsed <= 2.0 + BOUND_SLACK, f"Host.start took {elapsed:.2f} s for connectTimeout 2"
    assert status.seconds is not None and status.seconds <= 2.0 + BOUND_SLACK


def test_the_cli_connect_timeout_bounds_the_bring_up(left_nothing):
    out, err = io.StringIO(), io.StringIO()
    argv = fault_argv("--silent", "--keep-running", "--ignore-term")
    t0 = time.monotonic()
    code = cli_main(["tools", "--connect-timeout", "2", "--", *argv], stdout=out, stderr=err)
    elapsed = time.monotonic() - t0
    assert code != 0 and "connect_timeout=2 s" in err.getvalue(), err.getvalue()
    assert elapsed <= 2.0 + BOUND_SLACK, f"mcpsync tools took {elapsed:.2f} s for 2"


def test_a_script_exiting_right_after_the_error_leaves_no_server(tmp_path: Path):
    """The background end of the ladder does not outlive the interpreter: a script that
    exits at once after the error leaves no server behind (its exit hook ends it), even
    with the parent-death signal and the reaper off (only mcpsync's own exit path)."""
    pid_file = tmp_path / "count"
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, time, mcpsync\n"
        f"argv = {fault_argv('--silent', '--keep-running', '--ignore-term', '--count', str(pid_file))!r}\n"
        "Session = mcpsync.Session  # its first use imports it: not part of the bring-up\n"
        "t0 = time.monotonic()\n"
        "try:\n"
        "    Session.connect(argv, connect_timeout=1.5)\n"
        "except mcpsync.MCPSyncError as exc:\n"
        "    print(type(exc).__name__, round(time.monotonic() - t0, 3), flush=True)\n"
    )
    env = {**os.environ, "MCPSYNC_PDEATHSIG": "off", "MCPSYNC_REAPER": "off"}
    proc = psutil.Popen([sys.executable, str(script)], stdout=-1, stderr=-1, env=env)
    out, err = proc.communicate(timeout=60)
    name, seconds = out.decode().split()
    assert name == "RequestTimeout" and float(seconds) <= 1.5 + BOUND_SLACK, (out, err)
    _server_goes(pid_file, "the script")


def _server_goes(pid_file: Path, outlived: str) -> None:
    """The server whose pid ``pid_file`` holds ends within the shutdown ladder (``LADDER``)."""
    server_pid = int(pid_file.read_text().split()[1])
    deadline = time.monotonic() + LADDER
    while psutil.pid_exists(server_pid):
        try:
            if psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        assert time.monotonic() < deadline, f"server {server_pid} outlived {outlived}"
        time.sleep(0.05)


def test_the_error_still_names_what_the_server_said(left_nothing):
    error, _ = _connect_fails(
        fault_argv("--silent", "--keep-running", "--stderr", "loading model weights..."), 2.0
    )
    assert "loading model weights..." in str(error)


def _exits_soon_after_its_error(argv: list[str], pid_file: Path, env: dict[str, str]) -> None:
    """Run ``argv`` (a process whose bring-up fails against a server deaf to EOF and
    SIGTERM, and which then exits): it must exit within ``BOUND_SLACK`` of writing its error
    line (the interpreter-exit hook does not wait the shutdown ladder's graces: the
    caller had its error, and a shell waits for the exit), and leave no server behind."""
    proc = psutil.Popen(argv, stdout=-1, stderr=-1, env=env)
    stream = proc.stderr if "-m" in argv[:2] else proc.stdout
    assert stream is not None
    line = stream.readline()  # the error: the bring-up is over
    erred = time.monotonic()
    try:
        proc.wait(30)
    finally:
        if proc.is_running():
            proc.kill()
    exited = time.monotonic() - erred
    rest = proc.communicate(timeout=10)
    assert line, rest
    assert exited <= BOUND_SLACK, f"exited {exited:.2f} s after its error {line!r}"
    _server_goes(pid_file, "the process")


@pytest.mark.parametrize("reaper", ["on", "off"])
def test_a_script_exits_at_once_after_the_error(tmp_path: Path, reaper: str):
    """A script whose ``connect`` failed against a server deaf to EOF and SIGTERM exits
    right after (before: 2.7 s later, the exit hook's SIGTERM at 1/3 and SIGKILL at 2/3
    of its 4 s ladder; 6.0 s of wall clock for connect_timeout=3)."""
    pid_file = tmp_path / "count"
    deaf = fault_argv("--silent", "--keep-running", "--ignore-term", "--count", str(pid_file))
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, mcpsync\n"
        "try:\n"
        f"    mcpsync.Session.connect({deaf!r}, connect_timeout=1.5)\n"
        "except mcpsync.MCPSyncError as exc:\n"
        "    print(type(exc).__name__, flush=True)\n"
    )
    env = {**os.environ, "MCPSYNC_REAPER": reaper}
    if reaper == "off":
        env["MCPSYNC_PDEATHSIG"] = "off"
    _exits_soon_after_its_error([sys.executable, str(script)], pid_file, env)


def test_the_cli_exits_at_once_after_its_connect_error(tmp_path: Path):
    """``mcpsync tools --connect-timeout 1.5 -- <deaf server>`` as a process: the shell
    gets its prompt back right after the error line (before: 2.7 s later)."""
    pid_file = tmp_path / "count"
    deaf = fault_argv("--silent", "--keep-running", "--ignore-term", "--count", str(pid_file))
    argv = [sys.executable, "-m", "mcpsync", "tools", "--connect-timeout", "1.5", "--", *deaf]
    _exits_soon_after_its_error(argv, pid_file, dict(os.environ))


@pytest.mark.parametrize("kind", ["url", "stdio"])
def test_the_cli_connect_timeout_counts_its_own_imports(kind: str):
    """``main(["tools", "--connect-timeout", "2", ...])`` in a fresh interpreter (what a
    shell runs): the wire models the CLI imports before connecting (0.3-0.8 s) count against
    the bound (before: 2.4-2.9 s for 2; the in-process test above never saw it, the models
    being imported already)."""
    with _mute_http(read_request=True) as url:
        target = [url] if kind == "url" else ["--", *fault_argv("--silent")]
        code = (
            "import io, sys, time\n"
            "from mcpsync.cli import main\n"
            "t0 = time.monotonic()\n"
            f"code = main(['tools', '--connect-timeout', '2', *{target!r}], stdout=io.StringIO(),"
            " stderr=io.StringIO())\n"
            "print(code, round(time.monotonic() - t0, 3))\n"
        )
        proc = psutil.Popen([sys.executable, "-c", code], stdout=-1, stderr=-1)
        out, err = proc.communicate(timeout=60)
    exit_code, seconds = out.decode().split()
    assert exit_code == "3", (out, err)
    assert float(seconds) <= 2.0 + BOUND_SLACK, f"main() took {seconds} s for --connect-timeout 2"
