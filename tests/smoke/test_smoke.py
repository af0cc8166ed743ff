"""mcpsync smoke / mcpsync.smoke.run(): failure classes, reasons, exit codes, JUnit, --strict,
--snapshot, executors, bad input. Most entries use TINY, a stdlib-only stdio server that
starts in a few milliseconds (modes: ok, exit, hang, badschema, drift)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest

import mcpsync
from mcpsync.smoke import EXIT_CODES, SmokeReport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TIMEOUT = 90

TINY_SERVER = 'import json, os, sys, time\n\nmode = sys.argv[1] if len(sys.argv) > 1 else "ok"\nif mode == "exit":\n    sys.stderr.write("fatal: missing API_KEY\\n")\n    sys.exit(2)\nif mode == "hang":\n    time.sleep(120)\n    sys.exit(0)\nTOOLS = [\n    {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},\n    {"name": "crash", "inputSchema": {"type": "object"}},\n    {"name": "fail", "inputSchema": {"type": "object"}},\n    {"name": "typed", "inputSchema": {"type": "object"},\n     "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},\n]\nif mode == "badschema":\n    TOOLS.append({"name": "broken", "inputSchema": {"type": "object", "properties": {"x": {"type": 12}}}})\nif mode == "drift":\n    TOOLS[0]["inputSchema"]["properties"]["message"]["type"] = "integer"\n    TOOLS.append({"name": "extra", "inputSchema": {"type": "object"}})\nout = sys.stdout\nfor line in sys.stdin:\n    msg = json.loads(line)\n    mid, method = msg.get("id"), msg.get("method")\n    if mid is None:\n        continue\n    if method == "initialize":\n        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},\n                  "serverInfo": {"name": "tiny", "version": "1"}}\n    elif method == "tools/list":\n        result = {"tools": TOOLS}\n    elif method == "tools/call":\n        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}\n        if name == "crash":\n            sys.stderr.write("about to crash\\n")\n            sys.stderr.flush()\n            os._exit(3)\n        if name == "fail":\n            result = {"content": [{"type": "text", "text": "the tool failed on purpose"}], "isError": True}\n        elif name == "typed":\n            result = {"content": [], "structuredContent": {"n": "not a number"}}\n        else:\n            result = {"content": [{"type": "text", "text": str(args.get("message", ""))}]}\n    elif method == "ping":\n        result = {}\n    else:\n        out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no " + method}}) + "\\n")\n        out.flush()\n        continue\n    out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}) + "\\n")\n    out.flush()\n'


def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny_server.py"
    if not path.exists():
        path.write_text(TINY_SERVER)
    return path


def entry(server: Path, mode: str = "ok", **extra: object) -> dict:
    return {"command": sys.executable, "args": ["-I", "-S", str(server), mode], **extra}


def write_config(path: Path, servers: dict) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", "smoke", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ----------------------------------------------------------------- classes and reasons


def bad_input_config(tmp_path: Path) -> Path:
    server = tiny(tmp_path)
    return write_config(
        tmp_path / "mcp.json",
        {
            "ok": entry(server),
            "exits": entry(server, "exit"),
            "hangs": entry(server, "hang", connectTimeout=2),
            "typo": {"command": "node", "args": "server.js"},
            "missing": {"command": str(tmp_path / "no-such-server")},
            "crashes": entry(server),
            "off": {"command": "x", "disabled": True},
        },
    )


def test_bad_input_each_entry_fails_with_class_and_reason(tmp_path: Path, no_leaks):
    cfg = bad_input_config(tmp_path)
    t0 = time.monotonic()
    report = mcpsync.smoke.run(cfg, calls=[("echo", {"message": "hi"}), "crash"])
    elapsed = time.monotonic() - t0
    assert isinstance(report, SmokeReport)
    assert [e.name for e in report.entries] == [
        "ok", "exits", "hangs", "typo", "missing", "crashes", "off"
    ]  # fmt: skip
    assert all(
        e.state in ("ready", "failed", "disabled") for e in report.entries
    )  # never "connecting"
    ok, exits, hangs, typo, missing, crashes, off = report.entries
    assert ok.state == "ready" and ok.tools == ["echo", "crash", "fail", "typed"]
    assert ok.calls[0].ok and ok.calls[0].tool == "echo"
    assert (exits.failure, exits.exit_code) == ("spawn", 2)
    assert "fatal: missing API_KEY" in exits.error and "fatal: missing API_KEY" in exits.stderr_tail
    assert hangs.failure == "timeout" and "initialize" in hangs.error
    assert typo.failure == "config" and "field 'args'" in typo.error
    assert missing.failure == "spawn" and "no-such-server" in missing.error
    # crashing mid-call: the entry came up, its call failed with the exit code and stderr
    crash = next(c for c in crashes.calls if c.tool == "crash")
    assert not crash.ok and crash.failure == "connect"
    assert "exit code 3" in crash.error and "about to crash" in crash.error
    assert off.state == "disabled" and off.ok
    for e in report.entries:
        if e.state == "failed":
            assert e.error and e.failure in mcpsync.smoke.FAILURE_CLASSES
    assert not report.ok and report.exit_code == 3  # several classes
    assert elapsed < 45, elapsed  # bounded: the hanging server costs its connect timeout


@pytest.mark.parametrize(
    ("mode", "klass"), [("exit", "spawn"), ("hang", "timeout"), ("typo", "config")]
)
def test_exit_code_per_class(tmp_path: Path, mode: str, klass: str):
    server = tiny(tmp_path)
    # the short connect timeout is the bad entry's only: a good server's bring-up may take
    # longer than 2 s on a loaded machine (it failed so under four busy loops)
    bad_spec = entry(server, mode, connectTimeout=2)
    spec = {"command": "node", "args": "x.js"} if mode == "typo" else bad_spec
    cfg = write_config(tmp_path / "mcp.json", {"good": entry(server), "bad": spec})
    p = run_cli(str(cfg), "--json", "-q")
    data = json.loads(p.stdout)
    assert p.returncode == EXIT_CODES[klass] == data["exit_code"], p.stderr
    bad = data["servers"][1]
    assert bad["failure"] == klass and bad["error"] and bad["ok"] is False
    assert data["servers"][0]["ok"] is True


def test_tool_class_exit_1_and_ok_exit_0(tmp_path: Path):
    cfg = write_config(tmp_path / "mcp.json", {"a": entry(tiny(tmp_path))})
    p = run_cli(str(cfg), "--call", "fail", "--json")
    data = json.loads(p.stdout)
    assert p.returncode == 1 and data["servers"][0]["call"]["failure"] == "tool"
    assert data["servers"][0]["ok"] is False and data["servers"][0]["failure"] == "tool"
    assert data["servers"][0]["error"] == "call fail: the tool failed on purpose"
    assert "the tool failed on purpose" in data["servers"][0]["call"]["error"]
    p = run_cli(str(cfg), "--call", "echo", "--args", '{"message": "x"}')
    assert p.returncode == 0, p.stdout + p.stderr


def test_include_and_exclude_tools_on_the_command_line_replace_the_entries(tmp_path: Path):
    cfg = write_config(
        tmp_path / "mcp.json",
        {"a": entry(tiny(tmp_path)), "b": entry(tiny(tmp_path), includeTools=["crash"])},
    )
    data = json.loads(run_cli(str(cfg), "--include-tools", "e*", "--json").stdout)
    assert {s["name"]: s["tools"] for s in data["servers"]} == {"a": ["echo"], "b": ["echo"]}
    data = json.loads(run_cli(str(cfg), "--exclude-tools", "crash", "--json").stdout)
    tools = {s["name"]: s["tools"] for s in data["servers"]}
    assert tools["a"] == ["echo", "fail", "typed"] and tools["b"] == []
    report = mcpsync.smoke.run(cfg, include_tools=["typed"], exclude_tools=["x"])
    assert [e.tools for e in report.entries] == [["typed"], ["typed"]]


def test_text_report_shows_the_whole_error_below_the_table(tmp_path: Path):
    server = tiny(tmp_path)
    long_dir = tmp_path / ("a-rather-long-directory-name-" * 3)
    cfg = write_config(
        tmp_path / "mcp.json",
        {
            "ok": entry(server),
            "exits": entry(server, "exit"),
            "missing": {"command": str(long_dir / "srv")},
        },
    )
    p = run_cli(str(cfg), "-q")
    assert p.returncode == 5, p.stdout + p.stderr
    table, _, below = p.stdout.partition("\n\n")
    assert "see below [1]" in table and "see below [2]" in table
    assert "[1] exits:" in below and "fatal: missing API_KEY" in below and "exit code 2" in below
    assert str(long_dir / "srv") in below  # whole, never cut
    assert "1/3 servers up" in p.stdout


# ----------------------------------------------------------------- JUnit


def test_junit_xml_validates_against_the_jenkins_schema(tmp_path: Path):
    from xml.etree import ElementTree

    import xmlschema

    server = tiny(tmp_path)
    cfg = write_config(
        tmp_path / "mcp.json",
        {"a": entry(server), "b": entry(server, "exit"), "off": {"command": "x", "disabled": True}},
    )
    out = tmp_path / "smoke.xml"
    p = run_cli(str(cfg), "--junit-xml", str(out), "--call", "echo", "--call", "fail", "-q")
    assert p.returncode == 3, p.stdout + p.stderr  # spawn + tool
    schema = xmlschema.XMLSchema(str(FIXTURES / "junit-jenkins.xsd"))
    schema.validate(str(out))
    suite = ElementTree.parse(out).getroot().find("testsuite")
    assert suite is not None
    cases = {(c.get("classname"), c.get("name")): c for c in suite.findall("testcase")}
    assert set(cases) == {
        ("mcpsync.smoke.a", "bring-up"), ("mcpsync.smoke.a", "call echo"),
        ("mcpsync.smoke.a", "call fail"), ("mcpsync.smoke.b", "bring-up"),
        ("mcpsync.smoke.off", "bring-up"),
    }  # fmt: skip
    assert (
        suite.get("tests") == "5" and suite.get("failures") == "2" and suite.get("skipped") == "1"
    )
    failure = cases[("mcpsync.smoke.b", "bring-up")].find("failure")
    assert failure is not None and failure.get("type") == "spawn"
    assert "fatal: missing API_KEY" in (failure.text or "")
    assert cases[("mcpsync.smoke.a", "call fail")].find("failure").get("type") == "tool"
    assert cases[("mcpsync.smoke.a", "call echo")].find("failure") is None
    assert cases[("mcpsync.smoke.off", "bring-up")].find("skipped") is not None
    # and the schema does reject what CI would reject
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="x"><testcase name="n"/></testsuite></testsuites>')
    assert not schema.is_valid(str(bad))


# ----------------------------------------------------------------- --strict


def test_strict_validates_tool_schemas_and_results(tmp_path: Path):
    server = tiny(tmp_path)
    cfg = write_config(
        tmp_path / "mcp.json", {"bad": entry(server, "badschema"), "good": entry(server)}
    )
    p = run_cli(str(cfg), "--json", "-q")
    assert p.returncode == 0, p.stdout  # without --strict an invalid schema goes unnoticed
    p = run_cli(str(cfg), "--json", "--strict", "-q")
    data = json.loads(p.stdout)
    assert p.returncode == EXIT_CODES["protocol"], p.stdout
    bad, good = data["servers"]
    assert bad["failure"] == "protocol" and bad["schema_problems"]
    assert "broken: inputSchema/properties/x" in bad["error"]
    assert good["ok"] and good["schema_problems"] == []
    # a result that does not match the tool's outputSchema
    p = run_cli(str(cfg), "--json", "--strict", "--call", "typed", "-q")
    call = json.loads(p.stdout)["servers"][1]["call"]
    assert call["failure"] == "protocol" and "does not match its outputSchema" in call["error"]


# ----------------------------------------------------------------- --snapshot


def test_snapshot_dir_records_then_reports_drift(tmp_path: Path):
    server = tiny(tmp_path)
    snaps = tmp_path / "snaps"
    cfg = write_config(tmp_path / "mcp.json", {"tiny": entry(server)})
    p = run_cli(str(cfg), "--snapshot", str(snaps), "-q")
    assert p.returncode == 0, p.stdout + p.stderr
    recorded = (snaps / "tiny.json").read_text()
    assert [t["name"] for t in json.loads(recorded)["tools"]] == ["crash", "echo", "fail", "typed"]
    p = run_cli(str(cfg), "--snapshot", str(snaps), "-q")
    assert p.returncode == 0 and (snaps / "tiny.json").read_text() == recorded
    cfg = write_config(tmp_path / "mcp.json", {"tiny": entry(server, "drift")})
    p = run_cli(str(cfg), "--snapshot", str(snaps), "-q")
    assert p.returncode == EXIT_CODES["drift"], p.stdout
    assert "tool 'extra': added" in p.stdout
    assert 'inputSchema.properties.message.type: "string" -> "integer"' in p.stdout


# ----------------------------------------------------------------- executors


def _die_in_worker() -> None:
    """Process-pool initializer: the worker that brings up entry 'dies' exits on the spot."""
    from mcpsync.session import Session

    original = Session.connect.__func__

    def connect(cls, *args, **kwargs):
        if kwargs.get("name") == "dies":
            os._exit(17)
        return original(cls, *args, **kwargs)

    Session.connect = classmethod(connect)


def _comparable(report: SmokeReport) -> list[dict]:
    return report.to_json(timings=False)["servers"]


@pytest.fixture
def resource_tracker():
    """multiprocessing's resource tracker lives as long as this process: start it first."""
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def test_process_executor_same_results_and_a_dying_worker(
    tmp_path: Path, resource_tracker, no_leaks
):
    server = tiny(tmp_path)
    servers = {f"s{i}": entry(server) for i in range(6)}
    servers["exits"] = entry(server, "exit")
    cfg = write_config(tmp_path / "mcp.json", servers)
    local = mcpsync.smoke.run(cfg, calls=["echo"])
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        remote = mcpsync.smoke.run(cfg, calls=["echo"], executor=pool)
    assert _comparable(remote) == _comparable(local)
    assert remote.exit_code == local.exit_code == EXIT_CODES["spawn"]

    servers = {"a": entry(server), "dies": entry(server), "b": entry(server), "c": entry(server)}
    cfg = write_config(tmp_path / "mcp2.json", servers)
    t0 = time.monotonic()
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx, initializer=_die_in_worker) as pool:
        report = mcpsync.smoke.run(cfg, calls=["echo"], executor=pool)
    assert time.monotonic() - t0 < 60
    by = {e.name: e for e in report.entries}
    assert by["dies"].failure == "worker" and "died" in by["dies"].error
    assert all(by[n].ok and by[n].calls[0].ok for n in ("a", "b", "c")), report.to_json()
    assert report.exit_code == EXIT_CODES["worker"]


def test_cli_process_executor(tmp_path: Path):
    server = tiny(tmp_path)
    cfg = write_config(tmp_path / "mcp.json", {f"s{i}": entry(server) for i in range(3)})
    p = run_cli(
        str(cfg), "--executor", "process", "--parallel", "2", "--json", "--call", "echo", "-q"
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert [s["call"]["ok"] for s in json.loads(p.stdout)["servers"]] == [True] * 3


def test_any_executor_and_consent(tmp_path: Path, no_leaks):
    server = tiny(tmp_path)
    cfg = write_config(tmp_path / "mcp.json", {"yes": entry(server), "no": entry(server)})
    asked: list[str] = []

    def consent(e):
        asked.append(f"{e.name}@{threading.current_thread().name}")
        return e.name == "yes"

    with ThreadPoolExecutor(1, thread_name_prefix="mcpsync-test") as pool:
        report = mcpsync.smoke.run(cfg, executor=pool, consent=consent)
    assert asked == ["yes@MainThread", "no@MainThread"]
    assert report["yes"].ok and report["no"].state == "refused"
    assert report.exit_code == 0  # a refused entry is skipped, as in the JUnit file


def test_import_mcpsync_stays_cheap():
    code = "import sys, mcpsync; print('mcpsync.smoke' in sys.modules, 'jsonschema' in sys.modules); mcpsync.smoke; print('mcpsync.smoke' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["False", "False", "True"], p.stderr


def test_a_bring_up_that_ignores_its_bound_ends_as_timeout_not_connecting(
    tmp_path: Path, monkeypatch, no_leaks
):
    from mcpsync.session import Session

    release = threading.Event()
    original = Session.connect.__func__

    def stuck(cls, *args, **kwargs):
        if kwargs.get("name") == "stuck":
            release.wait(60)  # a bring-up that never honours connect_timeout
            raise mcpsync.SessionClosed("released")
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(Session, "connect", classmethod(stuck))
    server = tiny(tmp_path)
    cfg = write_config(tmp_path / "mcp.json", {"ok": entry(server), "stuck": entry(server)})
    t0 = time.monotonic()
    try:
        report = mcpsync.smoke.run(cfg, connect_timeout=1)
    finally:
        release.set()
    assert time.monotonic() - t0 < 30
    assert report["ok"].ok
    stuck_entry = report["stuck"]
    assert stuck_entry.state == "failed" and stuck_entry.failure == "timeout"
    assert "still connecting" in stuck_entry.error


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_ctrl_c_stops_every_server(tmp_path: Path, executor: str):
    import signal

    import psutil

    server = tiny(tmp_path)
    cfg = write_config(
        tmp_path / "mcp.json",
        {"hang1": entry(server, "hang"), "hang2": entry(server, "hang"), "ok": entry(server)},
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "smoke", str(cfg), "--executor", executor, "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 30
        servers: list[psutil.Process] = []
        while len(servers) < 2 and time.monotonic() < deadline:
            servers = []
            for p in parent.children(recursive=True):
                try:  # a short-lived child (the stdio reaper's starter) may be gone already
                    cmdline = p.cmdline()
                except psutil.Error:
                    continue
                if "hang" in cmdline and str(server) in cmdline:
                    servers.append(p)
            time.sleep(0.05)
        assert len(servers) == 2, parent.children(recursive=True)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    gone, alive = psutil.wait_procs(servers, timeout=10)
    assert alive == []
