"""The mcpsync command line, run as a subprocess against real servers."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from mcpsync.cli import main

NODE_BIN = Path(__file__).resolve().parents[1] / "node" / "node_modules" / ".bin"
DEMO = [sys.executable, "-m", "mcpsync.demo_server"]
TIMEOUT = 30


def run(*args: str, timeout: float = TIMEOUT, **popen: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpsync", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return run(*args, "--", *DEMO)


def everything() -> str:
    path = shutil.which("mcp-server-everything", path=str(NODE_BIN))
    assert path, "npm peers not installed (tests/node)"
    return path


# ----------------------------------------------------------------- demo / inspect


def test_demo_text():
    p = run("demo")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "server        mcpsync-demo 0.1.0" in out
    assert "transport     stdio:" in out and "protocol      2025-11-25" in out
    assert "auth          none (stdio)" in out
    assert "tools (11)" in out and "prompts (1)" in out and "resource templates (1)" in out
    assert "initialize" in out and "tools/list" in out
    assert out.rstrip().endswith("hello from mcpsync")


def test_demo_json():
    p = run("demo", "-o", "json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    report = data["inspect"]
    assert report["protocol_version"] == "2025-11-25"
    assert report["server_info"]["name"] == "mcpsync-demo"
    assert report["capabilities"]["tools"] == {"listChanged": True}
    assert set(report["phases"]) >= {"transport", "initialize", "total"}
    assert "echo" in [t["name"] for t in report["tools"]]
    assert data["call"]["result"]["content"][0]["text"] == "hello from mcpsync"


@pytest.mark.real
def test_inspect_server_everything_json():
    p = run("inspect", "--json", "--", everything(), "stdio")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["transport"] == "stdio"
    assert report["server_info"]["name"]
    assert len(report["tools"]) > 5 and report["resources"] and report["prompts"]


# ----------------------------------------------------------------- listings


def test_tools_resources_prompts_json():
    tools = json.loads(run_demo("tools", "--json").stdout)
    assert {"echo", "add", "long_running"} <= {t["name"] for t in tools}
    res = json.loads(run_demo("resources", "--json").stdout)
    assert "demo://readme" in [r["uri"] for r in res["resources"]]
    assert res["resource_templates"][0]["uriTemplate"] == "demo://item/{id}"
    prompts = json.loads(run_demo("prompts", "--json").stdout)
    assert prompts[0]["name"] == "greet"


def test_tools_text_table():
    p = run_demo("tools")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["NAME", "TITLE", "ARGUMENTS", "DESCRIPTION"]
    assert any(line.startswith("add ") and "a*, b*" in line for line in lines)


# ----------------------------------------------------------------- call / read / prompt


TYPED_SERVER = """
import json, sys
from mcpsync.demo_server import DemoServer

SCHEMA = {
    "type": "object",
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    "properties": {
        "s": {"type": "string"},
        "i": {"type": "integer"},
        "n": {"type": "number"},
        "b": {"type": "boolean"},
        "z": {"type": "null"},
        "arr": {"type": "array", "items": {"type": "integer"}},
        "obj": {"type": "object"},
        "opt": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "num_or_text": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
        "flag_list": {"type": ["boolean", "null"]},
        "ref": {"$ref": "#/$defs/point"},
        "color": {"enum": ["red", "green"]},
        "anything": {},
    },
}

class Typed(DemoServer):
    def __init__(self):
        super().__init__()
        self.register_tool("typed", "Echo the arguments as JSON.", SCHEMA, self._typed)
        self.register_tool(
            "open", "Any arguments.", {"type": "object", "additionalProperties": True}, self._typed
        )

    def _typed(self, call, args):
        return {"content": [{"type": "text", "text": json.dumps(args)}]}

sys.exit(Typed().serve())
"""


@pytest.fixture(scope="module")
def typed_server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("typed") / "typed_server.py"
    path.write_text(TYPED_SERVER)
    return [sys.executable, str(path)]


def _typed_call(server: list[str], *pairs: str, tool: str = "typed") -> dict:
    p = run("call", tool, *pairs, "--", *server)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _typed(args: dict) -> dict:
    """Each value with its JSON type, so that 1 and 1.0 and True differ."""
    return {k: (type(v).__name__, v) for k, v in args.items()}


def test_call_kv_values_typed_by_the_input_schema(typed_server: list[str]):
    got = _typed_call(
        typed_server,
        "s=123", "i=7", "n=2.5", "b=true", "z=null", "arr=[1, 2]", 'obj={"a": {"b": [1]}}',
        "opt=null", "num_or_text=12", "flag_list=false", 'ref={"x": 3}', "color=red",
        "anything=[1]",
    )  # fmt: skip
    assert _typed(got) == {
        "s": ("str", "123"),  # a string property keeps the text, digits or not
        "i": ("int", 7),
        "n": ("float", 2.5),
        "b": ("bool", True),
        "z": ("NoneType", None),
        "arr": ("list", [1, 2]),
        "obj": ("dict", {"a": {"b": [1]}}),
        "opt": ("NoneType", None),
        "num_or_text": ("int", 12),
        "flag_list": ("bool", False),
        "ref": ("dict", {"x": 3}),
        "color": ("str", "red"),
        "anything": ("list", [1]),  # no type said: JSON when it parses
    }
    got = _typed_call(
        typed_server, "s=true", "n=3", "i=4.0", "opt=hello", "num_or_text=twelve", "s=[1]"
    )
    assert _typed(got) == {
        "s": ("str", "[1]"),
        "n": ("int", 3),
        "i": ("int", 4),
        "opt": ("str", "hello"),
        "num_or_text": ("str", "twelve"),
    }
    got = _typed_call(typed_server, "free=1", "text=a b", tool="open")
    assert _typed(got) == {"free": ("int", 1), "text": ("str", "a b")}


def test_call_kv_wrong_values_are_usage_errors(typed_server: list[str]):
    for pair, needle in [
        ("i=seven", "i='seven': the tool wants integer here"),
        ("i=2.5", "i='2.5': the tool wants integer here"),
        ("n=NaN", "n='NaN': the tool wants number here"),
        ("b=yes", "b='yes': the tool wants boolean here"),
        ("arr=1,2", "give JSON"),
        ("obj=[1]", "the tool wants object here"),
        ("color=gren", "is not one of red, green; did you mean 'green'?"),
    ]:
        p = run("call", "typed", pair, "--", *typed_server)
        assert p.returncode == 2, (pair, p.stdout, p.stderr)
        assert needle in p.stderr, (pair, p.stderr)


def test_call_kv_on_the_demo_server():
    p = run_demo("call", "add", "a=1", "b=2.5", "-o", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["structuredContent"] == {"sum": 3.5}
    p = run_demo("call", "echo", "message=hi there")
    assert p.returncode == 0 and p.stdout == "hi there\n"
    p = run_demo("call", "echo", "message=123")  # was sent as the number 123 before
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "123\n"
    p = run_demo("call", "echo", 'message={"x": 1}')
    assert p.returncode == 0 and p.stdout == '{"x": 1}\n'


def test_call_unknown_tool_or_argument_did_you_mean_exit_2():
    p = run_demo("call", "ech", "message=hi")
    assert p.returncode == 2, p.stderr
    assert "the server has no tool 'ech'; did you mean 'echo'?" in p.stderr
    p = run_demo("call", "nosuch")
    assert p.returncode == 2 and "no tool 'nosuch'" in p.stderr and "did you mean" not in p.stderr
    p = run_demo("call", "echo", "mesage=hi")
    assert p.returncode == 2
    assert "tool 'echo' has no argument 'mesage'; did you mean 'message'?" in p.stderr
    p = run_demo("call", "fail", "x=1")
    assert p.returncode == 2 and "takes no arguments" in p.stderr


def test_prompt_unknown_name_or_argument_did_you_mean_exit_2():
    p = run_demo("prompt", "gret", "name=Ada")
    assert p.returncode == 2 and "no prompt 'gret'; did you mean 'greet'?" in p.stderr
    p = run_demo("prompt", "greet", "nme=Ada")
    assert p.returncode == 2
    assert "prompt 'greet' has no argument 'nme'; did you mean 'name'?" in p.stderr


def test_call_json_arguments_merged_with_pairs():
    p = run_demo("call", "add", "--json", '{"a": 10, "b": 1}', "b=5")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "15"


def test_call_tool_error_exit_1():
    p = run_demo("call", "fail")
    assert p.returncode == 1
    assert "this tool always fails" in p.stdout and "reported an error" in p.stderr


def test_call_timeout_exit_1():
    p = run_demo("call", "long_running", "duration=20", "--timeout", "0.3", "-q")
    assert p.returncode == 1 and "timed out" in p.stderr


def test_progress_lines_on_stderr_when_not_a_tty():
    p = run_demo("call", "long_running", "duration=0.4", "steps=4")
    assert p.returncode == 0, p.stderr
    assert "long_running done" in p.stdout
    bars = [line for line in p.stderr.splitlines() if line.startswith("long_running [")]
    assert bars and "1/4" in bars[0] and "\r" not in p.stderr


def test_server_log_messages_on_stderr():
    p = run_demo("call", "log", "level=warning", "message=disk almost full")
    assert p.returncode == 0, p.stderr
    assert "warning: disk almost full" in p.stderr
    q = run_demo("call", "log", "level=warning", "message=quiet please", "-q")
    assert "quiet please" not in q.stderr


def test_read_and_prompt():
    p = run_demo("read", "demo://readme")
    assert p.returncode == 0 and "# mcpsync demo" in p.stdout
    p = run_demo("read", "demo://bytes.bin", "-o", "json")
    assert json.loads(p.stdout)["contents"][0]["mimeType"] == "application/octet-stream"
    p = run_demo("prompt", "greet", "name=Ada", "style=formal")
    assert p.returncode == 0 and "formal greeting for Ada" in p.stdout


def test_read_out_file(tmp_path: Path):
    dest = tmp_path / "bytes.bin"
    p = run_demo("read", "demo://bytes.bin", "--out", str(dest))
    assert p.returncode == 0, p.stderr
    assert dest.read_bytes() == bytes(range(256))


# ----------------------------------------------------------------- targets from configs


def _write_config(path: Path, servers: dict) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def test_config_entry_targets(tmp_path: Path):
    cfg = _write_config(
        tmp_path / "mcp.json",
        {"demo": {"command": DEMO[0], "args": DEMO[1:]}, "other": {"command": "/nonexistent"}},
    )
    p = run("call", f"{cfg}:demo", "echo", "message=via config")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "via config\n"
    p = run("tools", "--config", str(cfg), "demo", "--json")
    assert p.returncode == 0 and "echo" in p.stdout
    p = run("tools", str(cfg))
    assert p.returncode == 2 and "say which" in p.stderr
    p = run("tools", f"{cfg}:nope")
    assert p.returncode == 2 and "no server named 'nope'" in p.stderr
    p = run("tools", f"{cfg}:other")
    assert p.returncode == 3


def test_single_entry_config_and_vscode_inputs(tmp_path: Path):
    vs = tmp_path / ".vscode"
    vs.mkdir()
    (vs / "mcp.json").write_text(
        json.dumps(
            {
                "inputs": [
                    {
                        "type": "promptString",
                        "id": "greeting",
                        "description": "Word",
                        "password": True,
                    }
                ],
                "servers": {
                    "demo": {
                        "type": "stdio",
                        "command": DEMO[0],
                        "args": DEMO[1:],
                        "env": {"GREETING": "${input:greeting}"},
                    }
                },
            }
        )
    )
    p = run("tools", str(vs / "mcp.json"))
    assert p.returncode == 2 and "${input:greeting}" in p.stderr and "--input greeting=" in p.stderr
    p = run("tools", str(vs / "mcp.json"), "--input", "greeting=hello", "-o", "json")
    assert p.returncode == 0, p.stderr


# ----------------------------------------------------------------- exit codes


def test_usage_errors_exit_2():
    assert run("tools").returncode == 2
    assert run("frobnicate").returncode == 2
    p = run("tools", "not-a-target")
    assert p.returncode == 2 and "cannot tell what 'not-a-target' is" in p.stderr
    p = run_demo("call", "echo", "oops")
    assert p.returncode == 2 and "KEY=VALUE" in p.stderr
    p = run_demo("call", "echo", "--json", "[1]")
    assert p.returncode == 2 and "must be a JSON object" in p.stderr


def test_a_missing_config_file_or_a_program_given_as_target_is_named(tmp_path):
    p = run("tools", "notthere.json", cwd=tmp_path)
    assert p.returncode == 2
    assert (
        f"no config file 'notthere.json': {tmp_path / 'notthere.json'} does not exist" in p.stderr
    )
    p = run("tools", "sub/mcp.json:github", cwd=tmp_path)
    assert p.returncode == 2 and "no config file 'sub/mcp.json'" in p.stderr
    p = run("tools", "python3", cwd=tmp_path)
    assert p.returncode == 2 and "a server command goes after --" in p.stderr, p.stderr


@pytest.mark.parametrize(
    "words",
    [
        ["call", "echo", "--json", "{bad"],
        ["call", "echo", "--json", "[1]"],
        ["call", "echo", "oops"],
        ["prompt", "greet", "oops"],
    ],
)
def test_argument_mistakes_are_refused_before_a_server_is_started(tmp_path, words):
    marker = tmp_path / "started"
    server = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    p = run(*words, "--", *server)
    assert p.returncode == 2, p.stderr
    assert not marker.exists(), "a server was started for arguments known to be wrong"
    p = run("call", "--bogus-option", "--", *DEMO)
    assert p.returncode == 2


def test_connect_failures_exit_3():
    p = run("tools", "--", "/nonexistent/server")
    assert p.returncode == 3 and "cannot connect" in p.stderr
    p = run(
        "tools",
        "--",
        sys.executable,
        "-c",
        "import sys; print('bad start', file=sys.stderr); sys.exit(5)",
    )
    assert p.returncode == 3
    assert "exit code 5" in p.stderr and "bad start" in p.stderr


def test_help_and_version_exit_0():
    p = run("--help")
    assert p.returncode == 0 and "exit codes: 0 ok" in p.stdout
    p = run("call", "--help")
    assert p.returncode == 0 and "usage: mcpsync call TARGET TOOL" in p.stdout
    p = run("--version")
    assert p.returncode == 0 and p.stdout.startswith("mcpsync ")


def test_main_in_process_usage():
    out, err = io.StringIO(), io.StringIO()
    assert main(["call", "--", *DEMO], stdout=out, stderr=err) == 2
    assert "missing argument" in err.getvalue()


def test_console_script_installed():
    script = Path(sys.executable).with_name("mcpsync")
    assert script.exists()
    p = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0


# ----------------------------------------------------------------- smoke


@pytest.mark.real
def test_smoke_mixed_config_json(tmp_path: Path):
    cfg = _write_config(
        tmp_path / "claude_desktop_config.json",
        {
            "demo": {"command": DEMO[0], "args": DEMO[1:]},
            "everything": {"command": everything(), "args": ["stdio"], "lazy": True},
            "crashes": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(4)"]},
            "typo": {"command": "node", "args": "server.js"},
            "off": {"command": "x", "disabled": True},
        },
    )
    p = run("smoke", str(cfg), "--json", "--call", "echo", "--args", '{"message": "hi"}')
    assert p.returncode == 3, p.stderr
    data = json.loads(p.stdout)
    assert data["ok"] is False
    by = {s["name"]: s for s in data["servers"]}
    assert list(by) == ["demo", "everything", "crashes", "typo", "off"]
    assert by["demo"]["ok"] and by["demo"]["call"]["ok"] and "echo" in by["demo"]["tools"]
    assert by["everything"]["ok"] and by["everything"]["call"]["ok"]  # lazy ones too
    assert not by["crashes"]["ok"] and "exit code 4" in by["crashes"]["error"]
    assert not by["typo"]["ok"] and "field 'args'" in by["typo"]["error"]
    assert by["off"]["state"] == "disabled" and by["off"]["ok"]


def test_smoke_all_ok_text_and_call_failure(tmp_path: Path):
    cfg = _write_config(
        tmp_path / "mcp.json",
        {"a": {"command": DEMO[0], "args": DEMO[1:]}, "b": {"command": DEMO[0], "args": DEMO[1:]}},
    )
    p = run("smoke", str(cfg), "--call", "add", "--args", '{"a": 1, "b": 2}')
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == [
        "SERVER",
        "STATE",
        "TRANSPORT",
        "VERSION",
        "TOOLS",
        "TIME",
        "CALL",
        "ERROR",
    ]
    assert lines[2].split()[:5] == ["a", "ready", "stdio", "2025-11-25", "11"]
    assert "2/2 servers up" in p.stdout and "add: 2/2 calls ok" in p.stdout
    p = run("smoke", str(cfg), "--call", "fail")
    assert p.returncode == 1
    p = run("smoke", str(cfg), "--call", "no_such_tool")
    assert p.returncode == 1 and "no server offers a tool named 'no_such_tool'" in p.stdout


def test_smoke_finds_the_workspace_config(tmp_path: Path):
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    p = run("smoke", cwd=tmp_path, env=env)
    assert p.returncode == 2 and "none found" in p.stderr
    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode" / "mcp.json").write_text(
        json.dumps({"servers": {"demo": {"type": "stdio", "command": DEMO[0], "args": DEMO[1:]}}})
    )
    p = run("smoke", "--json", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "using" in p.stderr and json.loads(p.stdout)["servers"][0]["name"] == "demo"


# ----------------------------------------------------------------- Ctrl-C

RECORDING_SERVER = """
import json, sys
from mcpsync.demo_server import DemoServer

class Recording(DemoServer):
    def _on_notification(self, method, params):
        if method == "notifications/cancelled":
            with open(sys.argv[1], "a") as f:
                f.write(json.dumps(params) + "\\n")
        super()._on_notification(method, params)

sys.exit(Recording().serve())
"""


def test_ctrl_c_cancels_call_and_exits_130(tmp_path: Path):
    server = tmp_path / "recording_server.py"
    server.write_text(RECORDING_SERVER)
    record = tmp_path / "cancelled.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "call", "long_running", "duration=60", "steps=600",
         "--", sys.executable, str(server), str(record)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        lines = []  # the server's own stderr lines come first (shown as "[name] ...")
        while not (lines and lines[-1].startswith("long_running [")) and len(lines) < 20:
            lines.append(proc.stderr.readline())  # until the first progress line: in flight
        assert lines[-1].startswith("long_running ["), lines
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children, "the server process should be running"
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert elapsed < 5
    for child in children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    cancelled = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(cancelled) == 1 and cancelled[0]["requestId"] is not None


def test_ctrl_c_during_smoke_leaves_no_server_behind(tmp_path: Path):
    cfg = _write_config(
        tmp_path / "mcp.json",
        {
            "demo": {"command": DEMO[0], "args": DEMO[1:]},
            "hang": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]},
        },
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpsync", "smoke", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 10
        children: list[psutil.Process] = []
        while len(children) < 2 and time.monotonic() < deadline:  # both servers spawned
            children = parent.children(recursive=True)
            time.sleep(0.05)
        assert len(children) >= 2, children
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 130, err
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []


# ----------------------------------------------------------------- HTTP servers


def _need_http(*, legacy: bool = False) -> None:
    pytest.importorskip(
        "mcpsync.transports.http.streamable", reason="HTTP transport not merged yet"
    )
    if legacy:
        pytest.importorskip(
            "mcpsync.transports.http.legacy_sse", reason="legacy SSE transport not merged yet"
        )


@pytest.mark.real
def test_http_inspect_call_and_smoke(tmp_path: Path):
    _need_http()
    from servers.launch import everything_http

    with everything_http() as http:
        cfg = _write_config(
            tmp_path / "mcp.json",
            {
                "web": {"type": "http", "url": http.url},
                "demo": {"command": DEMO[0], "args": DEMO[1:]},
            },
        )
        p = run("smoke", str(cfg), "--call", "echo", "--args", '{"message": "m"}')
        assert p.returncode == 0, p.stdout + p.stderr
        assert "2/2 servers up" in p.stdout and "echo: 2/2 calls ok" in p.stdout
        assert any(
            line.split()[:3] == ["web", "ready", "streamable-http"]
            for line in p.stdout.splitlines()
        )
        p = run("inspect", http.url, "--json")
        assert p.returncode == 0, p.stderr
        report = json.loads(p.stdout)
        assert report["transport"] == "streamable-http" and report["auth"] == "none"
        assert len(report["tools"]) > 5 and report["instructions"]
        p = run("inspect", http.url)
        assert p.returncode == 0, p.stderr
        assert "more lines; -o json shows all" in p.stdout  # long instructions are cut
        p = run("call", http.url, "echo", "message=over http", "-H", "X-Test: 1")
        assert p.returncode == 0, p.stderr
        assert "over http" in p.stdout


@pytest.mark.real
def test_http_sse_fallback_and_smoke(tmp_path: Path):
    _need_http(legacy=True)
    from servers.launch import everything_http, everything_sse, sdk_server_http

    with everything_http() as http, everything_sse() as sse, sdk_server_http() as sdk:
        # auto: a legacy SSE server is found through the fallback
        p = run("tools", sse.url, "--json")
        assert p.returncode == 0, p.stderr
        cfg = tmp_path / "mcp.json"
        cfg.write_text(
            json.dumps(
                {
                    "servers": {
                        "http": {"type": "http", "url": http.url},
                        "sse": {"type": "sse", "url": sse.url},
                        "sdk": {"url": sdk.url, "transport": "streamable-http"},
                        "demo": {"type": "stdio", "command": DEMO[0], "args": DEMO[1:]},
                    }
                }
            )
        )
        p = run("smoke", str(cfg), "--json")
        assert p.returncode == 0, p.stdout + p.stderr
        by = {s["name"]: s for s in json.loads(p.stdout)["servers"]}
        assert by["http"]["transport"] == "streamable-http" and by["sse"]["transport"] == "sse"
        assert all(s["ok"] and s["tools"] for s in by.values())


def test_http_connection_refused_exit_3():
    _need_http()
    from servers.launch import free_port

    p = run("tools", f"http://127.0.0.1:{free_port()}/mcp", "--connect-timeout", "5")
    assert p.returncode == 3 and "cannot connect" in p.stderr


# ----------------------------------------------------------------- help, examples, stderr, timing

VENV_BIN = str(Path(sys.executable).parent)


# a failing line must not leave the example's detached server behind (it is killed by pid)
STOP_DETACHED = 'trap \'[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true\' EXIT\n'


def _bash(script: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", STOP_DETACHED + script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _help_examples() -> list[str]:
    text = run("--help").stdout
    block = text.split("\nexamples", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines()[1:] if line.strip()]


def test_help_examples_run_as_written():
    examples = _help_examples()
    assert "--call ping" not in " ".join(examples)  # ping is a method, not a tool
    runnable = examples[:5]  # the help says: the first five run as written
    assert not any("npx" in e or "mcp.json" in e for e in runnable), runnable
    p = _bash("\n".join(runnable))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert "hello from mcpsync" in lines[lines.index("call echo message='hello from mcpsync'") + 1]
    assert "hi" in lines and "3" in lines  # echo over stdio; add a=1 b=2 over HTTP


@pytest.mark.real
def test_help_example_npx_everything():
    (npx_line,) = [e for e in _help_examples() if "npx" in e]
    # the same server from the pinned npm peers (npx would download it)
    command = npx_line.replace("npx -y @modelcontextprotocol/server-everything", everything())
    p = _bash(command)
    assert p.returncode == 0, p.stderr
    assert "tools (" in p.stdout


def test_no_sentinel_reprs_in_any_help():
    commands = ["", "demo", "inspect", "tools", "resources", "prompts", "call", "read", "prompt"]
    commands.append("smoke")
    for command in commands:
        p = run(*([command] if command else []), "--help")
        assert p.returncode == 0, (command, p.stderr)
        for bad in ("Ellipsis", "<object object", " at 0x", "_UNSET", "None)"):
            assert bad not in p.stdout, (command, bad)


NOISY_SERVER = (
    "import sys, runpy\n"
    "print('Starting weather server on port 8000...', file=sys.stderr, flush=True)\n"
    "sys.argv = ['demo']\n"
    "runpy.run_module('mcpsync.demo_server', run_name='__main__')\n"
)


def test_server_stderr_shown_as_the_servers_lines():
    p = run("tools", "--", sys.executable, "-c", NOISY_SERVER)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    shown = [line for line in lines if line.endswith("Starting weather server on port 8000...")]
    assert len(shown) == 1, lines
    assert shown[0].startswith("[") and "] Starting weather" in shown[0], shown
    assert "mcpsync: INFO" not in p.stderr
    q = run("tools", "-q", "--", sys.executable, "-c", NOISY_SERVER)
    assert q.returncode == 0 and "Starting weather" not in q.stderr


def test_server_stderr_in_process_goes_to_the_given_stderr():
    out, err = io.StringIO(), io.StringIO()
    assert main(["tools", "--", sys.executable, "-c", NOISY_SERVER], stdout=out, stderr=err) == 0
    assert "] Starting weather server on port 8000..." in err.getvalue()
    out2, err2 = io.StringIO(), io.StringIO()  # a second run writes to its own stderr
    assert main(["tools", "--", sys.executable, "-c", NOISY_SERVER], stdout=out2, stderr=err2) == 0
    assert "] Starting weather server" in err2.getvalue()
    assert err.getvalue().count("Starting weather") == 1


IMPORT_PROBE = """
import json, sys
import mcpsync.session as session_module

seen = {}
connect = session_module.Session.connect.__func__

def recording_connect(cls, *args, **kwargs):
    seen["before"] = sorted(m for m in ("mcp_types", "mcpsync.transports.stdio") if m in sys.modules)
    return connect(cls, *args, **kwargs)

session_module.Session.connect = classmethod(recording_connect)
from mcpsync.cli import main
code = main(sys.argv[1:])
print(json.dumps(seen), file=sys.stderr)
sys.exit(code)
"""


def test_inspect_timings_start_after_the_client_imports():
    p = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, "inspect", "-q", "-o", "json", "--", *DEMO],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert p.returncode == 0, p.stderr
    seen = json.loads(p.stderr.strip().splitlines()[-1])
    # the wire models and the transport were imported before the bring-up clock started
    assert seen["before"] == ["mcp_types", "mcpsync.transports.stdio"]
    report = json.loads(p.stdout)
    assert set(report["listing"]) == {
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    }


def test_server_lines_carry_the_sessions_name():
    from mcpsync.config import command_name

    p = run_demo("call", "log", "level=warning", "message=disk almost full")
    assert p.returncode == 0, p.stderr
    name = command_name(DEMO)  # what Session.connect names this server
    assert name not in ("python", sys.executable)
    assert f"[{name}/demo] warning: disk almost full" in p.stderr  # a log notification
    assert f"[{name}] [mcpsync-demo] ready on stdio" in p.stderr  # the server's stderr


def test_tool_arguments_schema_shapes():
    from mcpsync.cli import UsageError, tool_arguments

    schema = {
        "type": "object",
        "definitions": {"n": {"$ref": "#/definitions/m"}, "m": {"type": "number"}},
        "properties": {
            "deep": {"$ref": "#/definitions/n"},
            "both": {"allOf": [{"type": "integer"}, {"minimum": 0}]},
            "fixed": {"const": 3},
            "loose": {"anyOf": [{"type": "integer"}, {}]},
        },
        "additionalProperties": {"type": "boolean"},
    }
    got = tool_arguments("t", ["deep=1.5", "both=2", "fixed=3", "loose=x", "extra=true"], schema)
    assert got == {"deep": 1.5, "both": 2, "fixed": 3, "loose": "x", "extra": True}
    assert type(got["both"]) is int and got["extra"] is True
    with pytest.raises(UsageError, match="extra2='maybe': the tool wants boolean"):
        tool_arguments("t", ["extra2=maybe"], schema)
    with pytest.raises(UsageError, match="expected tool arguments as KEY=VALUE"):
        tool_arguments("t", ["=1"], schema)
    # a value keeps everything after the first "=", and no schema at all means JSON-or-text
    assert tool_arguments("t", ["q=a=b", "n=1"], None) == {"q": "a=b", "n": 1}


def test_a_failing_servers_stderr_is_shown_once():
    """Live (``[name] line``) and not again in the error; with -q only in the error."""
    crash = [
        sys.executable,
        "-c",
        "import sys; print('-'.join(['boom', 'no', 'key']), file=sys.stderr); sys.exit(3)",
    ]
    p = run("call", "echo", "message=hi", "--", *crash)
    assert p.returncode == 3, p.stderr
    assert p.stderr.count("boom-no-key") == 1, p.stderr
    assert "] boom-no-key" in p.stderr  # the live line, prefixed with the server's name
    assert "exit code 3" in p.stderr and "its stderr is shown above" in p.stderr
    assert "--- last stderr lines ---" not in p.stderr
    q = run("call", "-q", "echo", "message=hi", "--", *crash)
    assert q.returncode == 3, q.stderr
    assert q.stderr.count("boom-no-key") == 1, q.stderr
    assert "--- last stderr lines ---\nboom-no-key" in q.stderr  # in the error only
