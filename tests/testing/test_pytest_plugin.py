"""The mcpsync pytest plugin used as a user would: inner pytest runs (pytester, subprocess)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest_plugins = ["pytester"]

DEMO = [sys.executable, "-m", "mcpsync.demo_server"]


def _config(path: Path, servers: dict[str, dict]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _demo_entry() -> dict:
    return {"command": DEMO[0], "args": DEMO[1:]}


def test_plugin_is_registered_by_entry_point(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*--mcp-config=FILE*"])
    result = pytester.runpytest_subprocess("--markers")
    assert "@pytest.mark.mcp_server(target, **connect_kwargs)" in result.stdout.str()


def test_marker_with_a_command_and_with_config_entry(pytester: pytest.Pytester):
    _config(pytester.path / "mcp.json", {"demo": _demo_entry()})
    pytester.makepyfile(
        test_inner=f"""
        import pytest

        @pytest.mark.mcp_server({DEMO!r}, timeout=20)
        def test_echo(mcp_session):
            assert mcp_session.call_tool("echo", {{"message": "hi"}}).content[0].text == "hi"

        @pytest.mark.mcp_server("mcp.json:demo")
        def test_from_config(mcp_session):
            assert mcp_session.server_info.name == "mcpsync-demo"
            pytest.session = mcp_session

        def test_closed_after_the_test():
            assert pytest.session.closed
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_one_test_per_config_entry_and_host(pytester: pytest.Pytester):
    cfg = _config(pytester.path / "servers.json", {"one": _demo_entry(), "two": _demo_entry()})
    pytester.makepyfile(
        test_inner="""
        def test_lists(mcp_session, mcp_entry):
            assert mcp_session.name == mcp_entry
            assert "echo" in [t.name for t in mcp_session.list_tools()]

        def test_host(mcp_host):
            assert sorted(mcp_host.names()) == ["one", "two"]
            assert mcp_host.call_tool("one__echo", {"message": "x"}).content[0].text == "x"
        """
    )
    result = pytester.runpytest_subprocess("--mcp-config", str(cfg), "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_lists?one? PASSED*", "*test_lists?two? PASSED*"])


def test_failed_bring_up_is_an_error_with_exit_code_and_stderr(pytester: pytest.Pytester):
    crash = [
        sys.executable,
        "-c",
        "import sys; print('fatal: missing API_KEY', file=sys.stderr); sys.exit(2)",
    ]
    pytester.makepyfile(
        test_inner=f"""
        import pytest

        @pytest.mark.mcp_server({crash!r}, connect_timeout=10)
        def test_needs_server(mcp_session):
            pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "did not come up" in out and "exit code 2" in out and "fatal: missing API_KEY" in out


def test_works_under_xdist(pytester: pytest.Pytester):
    cfg = _config(pytester.path / "servers.json", {f"s{i}": _demo_entry() for i in range(4)})
    pytester.makepyfile(
        test_inner="""
        def test_add(mcp_session):
            assert mcp_session.call_tool("add", {"a": 2, "b": 3}).structured_content == {"sum": 5}
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "--mcp-config", str(cfg))
    result.assert_outcomes(passed=4)
    assert "2 workers" in result.stdout.str()


def test_interrupted_test_leaves_no_server(tmp_path: Path):
    pid_file = tmp_path / "server.pid"
    (tmp_path / "test_inner.py").write_text(
        f"""
import time, pytest

@pytest.mark.mcp_server({DEMO!r})
def test_blocks(mcp_session):
    open({str(pid_file)!r}, "w").write(str(mcp_session.transport.process.pid))
    time.sleep(60)  # interrupted by the outer test
"""
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "test_inner.py"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            time.sleep(0.05)
        server = psutil.Process(int(pid_file.read_text()))
        assert server.is_running()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert "KeyboardInterrupt" in out
    gone, alive = psutil.wait_procs([server], timeout=10)
    assert alive == [], out


def test_marker_with_a_url(pytester: pytest.Pytester):
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync.demo_server.http", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("serving http://"), line
        url = line.split()[1]
        pytester.makepyfile(
            test_inner=f"""
            import pytest

            @pytest.mark.mcp_server({url!r})
            def test_over_http(mcp_session):
                assert mcp_session.transport.kind == "streamable-http"
                assert mcp_session.call_tool("echo", {{"message": "web"}}).content[0].text == "web"
            """
        )
        result = pytester.runpytest_subprocess()
        result.assert_outcomes(passed=1)
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_server_that_hangs_at_start_up_is_an_error_and_is_stopped(pytester: pytest.Pytester):
    hang = [
        sys.executable,
        "-c",
        "import sys, time; print('warming up', file=sys.stderr, flush=True); time.sleep(60)",
    ]
    pytester.makepyfile(
        test_inner=f"""
        import pytest, psutil

        @pytest.mark.mcp_server({hang!r}, connect_timeout=1)
        def test_needs_server(mcp_session):
            pass

        def test_nothing_left():
            assert psutil.Process().children(recursive=True) == []
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(errors=1, passed=1)
    out = result.stdout.str()
    assert "did not come up: RequestTimeout" in out and "warming up" in out
