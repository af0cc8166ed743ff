"""The era probe never costs a server: one that dies of ``server/discover`` (servers built
with old SDKs: mcp 1.6.0 under PyPI ``chroma-mcp`` writes a traceback naming the method,
goes deaf until the next line, then exits) is brought up the same way by
``Session.connect``, ``Host`` and ``mcpsync smoke``: a fresh process, then ``initialize``.
The verdict is kept across processes in the per-user cache folder (``XDG_CACHE_HOME``, a
tmp folder here), so a second process starts it once and sends no probe; ``era_reason``
says which of the two happened.

The server (``servers/startup_fault_server.py --old-sdk --count FILE``) notes each start
and each ``server/discover`` / ``initialize`` it reads in FILE: what the tests count.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from servers.launch import SERVERS_DIR

import mcpsync
from mcpsync.host import Host
from mcpsync.protocol.choose import DEFAULT_PROBE_TIMEOUT, Caches, VerdictMemory
from mcpsync.protocol.verdict_file import FILE_NAME, VerdictFile
from mcpsync.transports.stdio import StdioTransport

SERVER = str(SERVERS_DIR / "startup_fault_server.py")

FIRST = ["start", "discover", "start", "initialize"]  # died of the probe, then initialize


def old_sdk_argv(count: Path) -> list[str]:
    return [sys.executable, SERVER, "--old-sdk", "--count", str(count)]


def seen(count: Path) -> list[str]:
    """What the server processes read, in order ("start" for each process)."""
    return [line.split()[0] for line in count.read_text().splitlines()]


def fresh_caches(folder: Path) -> Caches:
    return Caches(VerdictMemory(VerdictFile(str(folder))))


SCRIPT = """
import json, sys, time, mcpsync
t0 = time.monotonic()
with mcpsync.Session.connect(json.loads(sys.argv[1]), connect_timeout=30) as s:
    echo = s.call_tool("echo", {"message": "alive"}).content[0].text
    print(json.dumps({"era": s.era, "reason": s.era_reason, "echo": echo,
                      "probe": "probe" in s.phases, "seconds": time.monotonic() - t0}))
"""


def run_script(argv: list[str], cache: Path, umask: int = -1) -> dict:
    """``Session.connect(argv)`` in a fresh interpreter whose cache folder is ``cache``
    (and whose umask is ``umask``, when given)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(argv)],
        capture_output=True, text=True, env=env, timeout=60, umask=umask,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_first_process_pays_one_restart_the_second_none(tmp_path: Path):
    count, cache = tmp_path / "count", tmp_path / "cache"
    argv = old_sdk_argv(count)
    first = run_script(argv, cache)
    assert seen(count) == FIRST
    assert first["era"] == "legacy" and first["echo"] == "alive"
    assert "stopped after the server/discover probe" in first["reason"]
    assert "fresh process" in first["reason"] and "remembered" not in first["reason"]
    # the stderr traceback ended the probe's wait: not its patience (5 s) on top
    assert first["seconds"] < DEFAULT_PROBE_TIMEOUT, first
    kept = cache / "mcpsync" / FILE_NAME
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700

    second = run_script(argv, cache)
    assert seen(count) == [*FIRST, "start", "initialize"]  # one process, no probe
    assert second["era"] == "legacy" and second["echo"] == "alive" and not second["probe"]
    assert "remembered" in second["reason"] and "earlier process" in second["reason"]

    third = run_script(argv, tmp_path / "another-cache")  # another user: probes again
    assert seen(count)[-4:] == FIRST and "fresh process" in third["reason"]


def test_an_old_sdk_that_says_nothing_until_its_next_line(tmp_path: Path):
    """mcp 1.6.0 as it is (PyPI chroma-mcp 0.2.6 on it): after the probe it writes nothing
    at all until the next line arrives, so nothing on stderr ends the probe's wait; the
    ``initialize`` sent after the probe's patience kills it, a fresh process answers, and
    the next process starts it once with no probe."""
    count, cache = tmp_path / "count", tmp_path / "cache"
    argv = [sys.executable, SERVER, "--old-sdk-quiet", "--count", str(count)]
    first = run_script(argv, cache)
    assert seen(count) == FIRST
    assert first["era"] == "legacy" and first["echo"] == "alive" and first["probe"]
    assert "fresh process" in first["reason"] and "remembered" not in first["reason"]
    second = run_script(argv, cache)
    assert seen(count) == [*FIRST, "start", "initialize"]  # one process, no probe
    assert second["era"] == "legacy" and second["echo"] == "alive" and not second["probe"]
    assert "remembered" in second["reason"] and "earlier process" in second["reason"]


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX modes")
@pytest.mark.parametrize("mask", [0o000, 0o022], ids=oct)
def test_the_verdict_folder_and_file_are_private_whatever_the_umask(tmp_path: Path, mask: int):
    count, cache = tmp_path / "count", tmp_path / "xdg"  # XDG_CACHE_HOME itself is new too
    assert run_script(old_sdk_argv(count), cache, umask=mask)["era"] == "legacy"
    kept = cache / "mcpsync" / FILE_NAME
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_the_verdict_is_data_and_names_no_secret(tmp_path: Path):
    count, cache = tmp_path / "count", tmp_path / "cache"
    argv = [*old_sdk_argv(count)]
    with mcpsync.Session.connect(
        argv, env={"API_KEY": "sk-secret-value"}, _caches=fresh_caches(cache)
    ) as s:
        assert s.era == "legacy"
    text = (cache / FILE_NAME).read_text()
    data = json.loads(text)
    assert data["version"] == 1 and len(data["verdicts"]) == 1
    (entry,) = data["verdicts"].values()
    assert entry["era"] == "legacy"
    assert "sk-secret-value" not in text and "API_KEY" not in text and SERVER not in text


def test_host_brings_it_up_like_connect(tmp_path: Path):
    count, cache = tmp_path / "count", tmp_path / "cache"
    argv = old_sdk_argv(count)
    config = {"mcpServers": {"old": {"command": argv[0], "args": argv[1:]}}}
    with Host(config, _caches=fresh_caches(cache)) as host:
        (status,) = host.status()
        assert status.state == "ready", status.error
        assert host.call_tool("echo", {"message": "via host"}).content[0].text == "via host"
        assert "fresh process" in host.session("old").era_reason
    assert seen(count) == FIRST
    with Host(config, _caches=fresh_caches(cache)) as host:  # as a new process would
        assert host.status()[0].state == "ready"
        assert "remembered" in host.session("old").era_reason
    assert seen(count) == [*FIRST, "start", "initialize"]


def test_a_transport_handed_over_is_started_afresh(tmp_path: Path):
    count = tmp_path / "count"
    transport = StdioTransport(old_sdk_argv(count))
    with mcpsync.Session.connect(transport, _caches=fresh_caches(tmp_path / "cache")) as s:
        assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
        assert s.transport is not transport and s.transport.argv == transport.argv
    assert seen(count) == FIRST


def test_mcpsync_smoke_brings_it_up(tmp_path: Path):
    count, cache = tmp_path / "count", tmp_path / "cache"
    argv = old_sdk_argv(count)
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"old": {"command": argv[0], "args": argv[1:]}}}))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    for expected in (FIRST, [*FIRST, "start", "initialize"]):
        done = subprocess.run(
            [sys.executable, "-m", "mcpsync", "smoke", str(config), "-o", "json"],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "already started or closed" not in done.stdout + done.stderr
        assert seen(count) == expected


def test_a_server_that_exits_for_another_reason_is_not_started_again(tmp_path: Path):
    count = tmp_path / "count"
    script = tmp_path / "no_key.py"
    script.write_text(
        f"import sys\nopen({str(count)!r}, 'a').write('start\\n')\n"
        "sys.stderr.write('error: OPENAI_API_KEY is not set\\n')\nsys.exit(2)\n"
    )
    with pytest.raises(mcpsync.ServerExited) as info:
        mcpsync.Session.connect([sys.executable, str(script)], _caches=fresh_caches(tmp_path))
    assert "OPENAI_API_KEY is not set" in str(info.value)
    assert seen(count) == ["start"] and not (tmp_path / FILE_NAME).exists()


def _rescue_a_reader_of(fifo: Path, after: float) -> tuple[threading.Timer, threading.Event]:
    """A timer that, ``after`` seconds, opens ``fifo`` for writing (a reader blocked in
    ``open()`` goes on) and sets the event: a blocked connect then fails, not hangs."""
    fired = threading.Event()

    def rescue() -> None:
        fired.set()
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    timer = threading.Timer(after, rescue)
    timer.name = "test-fifo-rescue"
    return timer, fired


@pytest.mark.parametrize("damage", ["garbage", "deep", "wrong-shape", "too-old", "symlink", "fifo"])
def test_a_corrupt_or_foreign_file_counts_as_absent(tmp_path: Path, damage: str):
    count, cache = tmp_path / "count", tmp_path / "cache"
    cache.mkdir(mode=0o700)
    kept = cache / FILE_NAME
    target = tmp_path / "elsewhere.json"
    with mcpsync.Session.connect(old_sdk_argv(count), _caches=fresh_caches(cache)):
        pass
    good = json.loads(kept.read_text())
    (key,) = good["verdicts"]
    if damage == "garbage":
        kept.write_bytes(b"\x00{not json")
    elif damage == "deep":
        kept.write_text("[" * 200_000)
    elif damage == "wrong-shape":
        kept.write_text(json.dumps({"version": 1, "verdicts": {key: {"era": ["legacy"]}}}))
    elif damage == "too-old":
        good["verdicts"][key]["at"] = time.time() - 365 * 24 * 3600
        kept.write_text(json.dumps(good))
    elif damage == "fifo":  # opening a FIFO to read waits for a writer: must not block
        kept.unlink()
        os.mkfifo(kept, 0o600)
    else:  # a symlink planted where the file goes: not followed, the target untouched
        target.write_text(json.dumps(good))
        kept.unlink()
        kept.symlink_to(target)
    before = target.read_bytes() if damage == "symlink" else b""
    rescue, rescued = _rescue_a_reader_of(kept, 20.0)
    if damage == "fifo":
        rescue.start()
    try:
        with mcpsync.Session.connect(old_sdk_argv(count), _caches=fresh_caches(cache)) as s:
            assert "fresh process" in s.era_reason  # probed again: nothing was trusted
    finally:
        rescue.cancel()
        if damage == "fifo":
            rescue.join()
    assert not rescued.is_set(), "connect blocked opening a FIFO planted at the verdict file"
    assert seen(count) == FIRST + FIRST
    assert json.loads(kept.read_text())["verdicts"][key]["era"] == "legacy"  # written anew
    if damage == "symlink":
        assert not kept.is_symlink() and target.read_bytes() == before


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX modes")
def test_a_folder_others_can_write_is_neither_read_nor_written(tmp_path: Path):
    count, cache = tmp_path / "count", tmp_path / "cache"
    with mcpsync.Session.connect(old_sdk_argv(count), _caches=fresh_caches(cache)):
        pass
    before = (cache / FILE_NAME).read_bytes()
    os.chmod(cache, 0o777)
    with mcpsync.Session.connect(old_sdk_argv(count), _caches=fresh_caches(cache)) as s:
        assert "fresh process" in s.era_reason
    assert (cache / FILE_NAME).read_bytes() == before and sorted(os.listdir(cache)) == [FILE_NAME]


def test_a_server_that_logs_the_probe_error_and_serves_on_is_not_restarted(tmp_path: Path):
    """The traceback on stderr ends the probe's wait; ``initialize`` is answered, so the
    same process serves (no restart, nothing kept), and ``era_reason`` says so."""
    count = tmp_path / "count"
    argv = [sys.executable, SERVER, "--old-sdk-survives", "--count", str(count)]
    t0 = time.monotonic()
    with mcpsync.Session.connect(argv, _caches=fresh_caches(tmp_path / "cache")) as s:
        elapsed = time.monotonic() - t0
        assert s.era == "legacy" and "stderr" in s.era_reason and "server/discover" in s.era_reason
        assert s.call_tool("echo", {"message": "one life"}).content[0].text == "one life"
    assert seen(count) == ["start", "discover", "initialize"]
    assert elapsed < DEFAULT_PROBE_TIMEOUT  # not the probe's patience
    assert not (tmp_path / "cache" / FILE_NAME).exists()


def test_host_close_stops_the_fresh_process_of_a_restart(tmp_path: Path):
    """Host.close() while the fresh process of a restart is being brought up (here it
    never answers) stops that process too, at once: not when its connectTimeout ends."""
    count = tmp_path / "count"
    argv = [*old_sdk_argv(count), "--silent-if-restarted"]
    config = {"mcpServers": {"old": {"command": argv[0], "args": argv[1:], "connectTimeout": 60}}}
    host = Host(config, _caches=fresh_caches(tmp_path / "cache"))
    host.start(timeout=0)  # returns at once: the bring-up goes on in its thread
    deadline = time.monotonic() + 30
    while (seen(count) if count.exists() else [])[:3] != ["start", "discover", "start"]:
        assert time.monotonic() < deadline, "the server was not started again"
        time.sleep(0.02)
    fresh_pid = int(count.read_text().splitlines()[2].split()[1])
    t0 = time.monotonic()
    host.close()
    closed_in = time.monotonic() - t0
    assert closed_in < 5.0, f"Host.close() took {closed_in:.2f} s"
    deadline = time.monotonic() + 10
    while _running(fresh_pid):
        assert time.monotonic() < deadline, f"the fresh process {fresh_pid} outlived close()"
        time.sleep(0.02)


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
