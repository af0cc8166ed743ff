"""Recorded sessions (``mcpsync.testing.Cassette``): record against real servers, replay offline.

The ``test_live_*`` tests start servers (tiers: ``real_server``); the rest replay cassettes
written here by hand or by ``fileformat.write``, in this process, with no server at all.
A replay in a fresh interpreter runs ``USE`` with an audit hook that lists every process
start and socket connection it attempts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcpsync
from mcpsync.errors import CassetteError, ConfigError, MCPSyncError
from mcpsync.testing import Cassette, CassetteMismatch

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
DEMO = [sys.executable, "-m", "mcpsync.demo_server"]
MODERN = [sys.executable, str(ROOT / "tests" / "servers" / "modern_sdk_server.py"), "stdio"]
MISSING = ["/nonexistent/mcp-server", "--never-started"]

#: what a user's code does with a session; prints its results as JSON (argv: path mode target era)
USE = r"""
import json, sys
attempts = []
if sys.argv[5] == "audit":
    def hook(event, args):
        if event in ("subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "socket.connect"):
            attempts.append(event)
    sys.addaudithook(hook)
import mcpsync
from mcpsync.testing import Cassette
path, mode, target, era = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
progress = []
def sample(params):
    return {"role": "assistant", "model": "m", "content": {"type": "text", "text": "sampled"}}
out = {}
with mcpsync.connect(target, cassette=Cassette(path, mode=mode), era=era, timeout=20,
                     sampling_handler=sample) as s:
    out["era"] = s.era
    out["server"] = s.server_info.name
    out["tools"] = sorted(t.name for t in s.list_tools())
    out["echo"] = s.call_tool("echo", {"message": "hi"}).content[0].text
    if sys.argv[6] == "full":  # the demo server's tools (and the SDK peer's, named alike)
        out["add"] = s.call_tool("add", {"a": 2, "b": 3}).model_dump(mode="json", exclude_none=True)
        r = s.call_tool("long_running", {"duration": 0.05, "steps": 3}, on_progress=progress.append)
        out["long_running"] = r.content[0].text
        out["progress"] = [p.progress for p in progress]
        out["sample"] = s.call_tool("sample", {"prompt": "x"}).content[0].text
    try:
        s.call_tool("echo", {"message": "never recorded"})
        out["unrecorded"] = "answered"
    except Exception as exc:
        out["unrecorded"] = type(exc).__name__
out["attempts"] = attempts
print(json.dumps(out))
"""


def _use(
    path: Path,
    mode: str,
    target: str | list[str],
    era: str = "auto",
    audit: bool = False,
    plan: str = "full",
    env: dict[str, str] | None = None,
) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", USE, str(path), mode, json.dumps(target), era,
         "audit" if audit else "-", plan],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("target", "era"), [(DEMO, "auto"), (MODERN, "modern")],
                         ids=["demo-legacy", "sdk-modern"])  # fmt: skip
def test_live_record_then_replay_in_a_fresh_interpreter(tmp_path, target, era):
    path = tmp_path / "session.jsonl"
    recorded = _use(path, "once", target, era)
    assert path.exists()
    assert recorded["era"] == ("modern" if era == "modern" else "legacy")
    assert recorded["echo"] == "hi" and recorded["sample"] == "sampled"
    assert recorded["progress"] == [1, 2, 3]
    assert recorded["unrecorded"] == "answered"  # recording: the server answered it
    # replay: the target does not exist; nothing is started or connected
    for mode in ("none", "once"):
        text = path.read_text()
        path.write_text(text.replace('"never recorded"', '"edited out"'))  # now unrecorded
        replayed = _use(path, mode, MISSING, era, audit=True)
        assert replayed["attempts"] == []
        assert replayed["unrecorded"] == "CassetteMismatch"
        assert {k: v for k, v in replayed.items() if k not in ("attempts", "unrecorded")} == {
            k: v for k, v in recorded.items() if k not in ("attempts", "unrecorded")
        }


def _same_after_replay(
    path: Path, recorded: dict, era: str, target: str | list[str], plan: str = "full"
) -> None:
    """Replay ``path`` in a fresh interpreter aimed at ``target`` (gone): the same results,
    no process started, no connection attempted, an unrecorded call refused."""
    path.write_text(path.read_text().replace('"never recorded"', '"edited out"'))
    replayed = _use(path, "none", target, era, audit=True, plan=plan)
    assert replayed.pop("attempts") == []
    assert replayed.pop("unrecorded") == "CassetteMismatch"
    assert replayed == {k: v for k, v in recorded.items() if k not in ("attempts", "unrecorded")}


def test_live_streamable_http_demo_server_legacy_era(tmp_path):
    from mcpsync.demo_server.http import DemoHTTPServer

    path = tmp_path / "http.jsonl"
    with DemoHTTPServer() as server:
        url = server.url
        recorded = _use(path, "once", url, "auto")
    assert recorded["era"] == "legacy" and recorded["progress"] == [1, 2, 3]
    assert recorded["sample"] == "sampled"  # a server request over the SSE reply, answered
    assert json.loads(path.read_text().splitlines()[0])["transport"] == "streamable-http"
    _same_after_replay(path, recorded, "auto", url)  # the server is gone: nothing listens


def test_live_streamable_http_sdk_server_modern_era(tmp_path):
    from test_modern_http import modern_sdk_http

    path = tmp_path / "modern-http.jsonl"
    with modern_sdk_http() as server:
        url = server.url
        recorded = _use(path, "once", url, "modern")
    assert recorded["era"] == "modern" and recorded["progress"] == [1, 2, 3]
    _same_after_replay(path, recorded, "modern", url)


def test_live_legacy_sse_sdk_server(tmp_path):
    from servers.launch import sdk_server_sse

    path = tmp_path / "sse.jsonl"
    with sdk_server_sse() as server:
        url = server.url  # Streamable HTTP is tried first and refused: legacy SSE is recorded
        recorded = _use(path, "once", url, "auto")
    assert recorded["era"] == "legacy" and recorded["progress"] == [1, 2, 3]
    assert recorded["sample"] == "sampled"
    assert json.loads(path.read_text().splitlines()[0])["transport"] == "sse"
    _same_after_replay(path, recorded, "auto", url)


def test_live_server_everything_over_stdio(tmp_path):
    from servers.launch import everything_stdio_argv, have_everything, node_env

    if not have_everything():
        pytest.skip("npm peers not installed (tests/node)")
    path = tmp_path / "everything.jsonl"
    recorded = _use(path, "once", everything_stdio_argv(), "auto", plan="basic", env=node_env())
    assert recorded["server"] == "mcp-servers/everything" and "echo" in recorded["tools"]
    assert "hi" in recorded["echo"]
    _same_after_replay(path, recorded, "auto", MISSING, plan="basic")


def test_live_server_everything_over_streamable_http(tmp_path):
    from servers.launch import everything_http, have_everything

    if not have_everything():
        pytest.skip("npm peers not installed (tests/node)")
    path = tmp_path / "everything-http.jsonl"
    with everything_http() as server:
        url = server.url
        recorded = _use(path, "once", url, "auto", plan="basic")
    assert recorded["server"] == "mcp-servers/everything" and "echo" in recorded["tools"]
    assert "hi" in recorded["echo"]
    assert json.loads(path.read_text().splitlines()[0])["transport"] == "streamable-http"
    _same_after_replay(path, recorded, "auto", url, plan="basic")  # the server is gone


def test_live_modes_all_and_new_episodes(tmp_path, no_leaks):
    path = tmp_path / "c.jsonl"
    with mcpsync.connect(DEMO, cassette=Cassette(path, mode="all")) as s:
        s.call_tool("echo", {"message": "first"})
    first = path.read_text()
    assert '"first"' in first
    with mcpsync.connect(DEMO, cassette=Cassette(path, mode="all")) as s:
        s.call_tool("echo", {"message": "second"})
    assert '"first"' not in path.read_text()  # "all" replaced it
    with mcpsync.connect(DEMO, cassette=Cassette(path, mode="new_episodes")) as s:
        assert s.transport.kind == "stdio"  # the server is there for new episodes
        s.call_tool("echo", {"message": "second"})  # known: not added again
        s.call_tool("add", {"a": 1, "b": 1})  # new: added
    text = path.read_text()
    assert text.count('"second"') == 2  # the request and its answer, once
    assert '"add"' in text
    with mcpsync.connect(MISSING, cassette=Cassette(path, mode="none")) as s:
        assert s.transport.kind == "cassette"
        assert s.call_tool("echo", {"message": "second"}).content[0].text == "second"
        assert s.call_tool("add", {"a": 1, "b": 1}).structured_content == {"sum": 2}
    # "once" with the file there replays; without it records
    with mcpsync.connect(MISSING, cassette=Cassette(path, mode="once")) as s:
        assert s.transport.kind == "cassette"
    fresh = tmp_path / "sub" / "fresh.jsonl"
    with mcpsync.connect(DEMO, cassette=Cassette(fresh, mode="once")) as s:
        assert s.transport.kind == "stdio"
        s.list_tools()
    assert fresh.exists()


def test_live_secrets_are_never_written(tmp_path, no_leaks):
    path = tmp_path / "c.jsonl"
    secret, own = "sk-live-0123456789abcdef", "user-field-value-42"

    def scrub(side, message):
        return json.loads(json.dumps(message).replace(own, "<mine>"))

    cassette = Cassette(path, mode="all", scrub=scrub)
    with mcpsync.connect(DEMO, env={"DEMO_API_KEY": secret}, cassette=cassette) as s:
        assert s.call_tool("echo", {"message": f"key={secret}"}).content[0].text == f"key={secret}"
        s.call_tool("echo", {"message": own})
    text = path.read_text()
    assert secret not in text and own not in text
    assert "key=<scrubbed>" in text and "<mine>" in text
    # replayed with the same settings, the requests that carried them still match
    cassette = Cassette(path, mode="none", scrub=scrub)
    with mcpsync.connect(MISSING, env={"DEMO_API_KEY": secret}, cassette=cassette) as s:
        assert s.call_tool("echo", {"message": f"key={secret}"}).content[0].text == "key=<scrubbed>"
        assert s.call_tool("echo", {"message": own}).content[0].text == "<mine>"


def test_live_server_requests_and_notifications_replay_in_order(tmp_path, no_leaks):
    path = tmp_path / "c.jsonl"
    logs: list = []

    def run(target, mode):
        seen: list = []
        answers = iter(["one", "two"])

        def sample(params):
            return {"role": "assistant", "model": "m",
                    "content": {"type": "text", "text": next(answers)}}  # fmt: skip

        with mcpsync.connect(target, cassette=Cassette(path, mode=mode), sampling_handler=sample,
                             on_log=seen.append) as s:  # fmt: skip
            s.set_logging_level("debug")
            texts = [s.call_tool("sample", {"prompt": p}).content[0].text for p in ("a", "b")]
            s.call_tool("log", {"level": "warning", "message": "careful"})
        logs.append(seen)
        return texts

    assert run(DEMO, "all") == ["one", "two"]
    assert run(MISSING, "none") == ["one", "two"]
    assert [getattr(m, "data", m) for m in logs[0]] == [getattr(m, "data", m) for m in logs[1]]
    assert logs[1]


# -- replay without any server: cassettes written here --------------------------------------

HEADER = {"format": "mcpsync-cassette", "version": 1, "transport": "stdio",
          "features": {"carries_modern": True, "bounded_probe": True}, "mcpsync": "0"}  # fmt: skip


def _line(episode: int, side: str, message: dict) -> dict:
    return {"episode": episode, "from": side, "message": {"jsonrpc": "2.0", **message}}


def _legacy_lines() -> list[dict]:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x"}}
    result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
              "serverInfo": {"name": "recorded", "version": "1"}}  # fmt: skip
    tool = {"name": "echo", "inputSchema": {"type": "object"}}
    return [
        _line(1, "client", {"id": 1, "method": "initialize", "params": init}),
        _line(1, "server", {"id": 1, "result": result}),
        _line(1, "client", {"method": "notifications/initialized"}),
        _line(2, "client", {"id": 2, "method": "tools/list"}),
        _line(2, "server", {"id": 2, "result": {"tools": [tool]}}),
        _line(3, "client", {"id": 3, "method": "tools/call",
                            "params": {"name": "echo", "arguments": {"message": "a"}}}),
        _line(3, "server", {"id": 3, "result": {"content": [{"type": "text", "text": "A"}]}}),
        _line(4, "client", {"id": 4, "method": "tools/call",
                            "params": {"name": "echo", "arguments": {"message": "b"}}}),
        _line(4, "server", {"id": 4, "result": {"content": [{"type": "text", "text": "B"}]}}),
    ]  # fmt: skip


def _write(path: Path, lines: list, header: dict | None = None, end: bool = True) -> Path:
    rows = [header or HEADER, *lines] + ([{"end": "mcpsync-cassette"}] if end else [])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _replay(path: Path, **kwargs) -> mcpsync.Session:
    return mcpsync.connect(MISSING, cassette=Cassette(path, mode="none", **kwargs), era="legacy")


def test_replay_answers_in_any_order_and_repeats(tmp_path, no_leaks):
    path = _write(tmp_path / "c.jsonl", _legacy_lines())
    with _replay(path) as s:
        assert s.server_info.name == "recorded"
        assert s.call_tool("echo", {"message": "b"}).content[0].text == "B"
        assert s.call_tool("echo", {"message": "a"}).content[0].text == "A"
        assert s.call_tool("echo", {"message": "a"}).content[0].text == "A"  # played again


def test_a_cassette_replays_after_the_client_changed(tmp_path, no_leaks):
    """Recorded by an older client (another protocol version asked for, other capabilities):
    the handshake still matches, and the session takes the recorded answer's version."""
    lines = _legacy_lines()
    old = {"protocolVersion": "2025-03-26", "capabilities": {"roots": {"listChanged": True}},
           "clientInfo": {"name": "mcpsync", "version": "0.0.1"}}  # fmt: skip
    lines[0] = _line(1, "client", {"id": 1, "method": "initialize", "params": old})
    lines[1]["message"]["result"]["protocolVersion"] = "2025-03-26"
    path = _write(tmp_path / "c.jsonl", lines)
    with _replay(path, strict_order=True) as s:
        assert s.protocol_version == "2025-03-26"
        s.list_tools()
        assert s.call_tool("echo", {"message": "a"}).content[0].text == "A"


def test_mismatch_names_the_request_and_the_nearest(tmp_path, no_leaks):
    path = _write(tmp_path / "c.jsonl", _legacy_lines())
    with _replay(path) as s:
        with pytest.raises(CassetteMismatch) as caught:
            s.call_tool("echo", {"message": "c"})
    error = caught.value
    assert isinstance(error, MCPSyncError)
    text = str(error)
    assert str(path) in text and 'tools/call {"arguments": {"message": "c"}' in text
    assert error.nearest is not None and error.nearest["params"]["arguments"] in (
        {"message": "a"}, {"message": "b"})  # fmt: skip
    assert "nearest recorded request is tools/call" in text


def test_strict_order(tmp_path, no_leaks):
    path = _write(tmp_path / "c.jsonl", _legacy_lines())
    with _replay(path, strict_order=True) as s:
        s.list_tools()
        with pytest.raises(CassetteMismatch, match='the next request is tools/call .*"a"'):
            s.call_tool("echo", {"message": "b"})
    with _replay(path, strict_order=True) as s:
        s.list_tools()
        assert s.call_tool("echo", {"message": "a"}).content[0].text == "A"
        assert s.call_tool("echo", {"message": "b"}).content[0].text == "B"


def test_match_on_method_only(tmp_path, no_leaks):
    path = _write(tmp_path / "c.jsonl", _legacy_lines())
    with _replay(path, match_on=("method",)) as s:
        assert s.call_tool("echo", {"message": "zzz"}).content[0].text == "A"
    with pytest.raises(ConfigError, match="match_on"):
        Cassette(path, match_on=("verb",))
    with pytest.raises(ConfigError, match="mode"):
        Cassette(path, mode="sometimes")  # type: ignore[arg-type]


def test_replay_starts_no_thread_of_its_own(tmp_path, no_leaks):
    import threading

    path = _write(tmp_path / "c.jsonl", _legacy_lines())
    before = {t.name for t in threading.enumerate()}
    with _replay(path) as s:
        s.call_tool("echo", {"message": "a"})
        names = {t.name for t in threading.enumerate()} - before
    assert not [n for n in names if "cassette" in n or "reader" in n or "stdio" in n], names


def test_a_recorded_refusal_is_replayed_at_once_as_the_same_error(tmp_path, no_leaks):
    """A request the transport refused (an HTTP status, no JSON-RPC reply: a legacy server's
    400 to the era probe) is refused again from the same send, never waited for."""
    from mcpsync.errors import HTTPStatusError
    from mcpsync.testing.cassette.fileformat import refusal_of
    from mcpsync.transports.http.failures import status_error

    live = status_error(400, "POST", "http://127.0.0.1:1/mcp", b"no session")
    refused = refusal_of(5, live)["refused"]
    lines = _legacy_lines() + [
        _line(5, "client", {"id": 5, "method": "tools/call",
                            "params": {"name": "echo", "arguments": {"message": "x"}}}),
        _line(5, "transport", {"id": 5, "refused": refused}),
    ]  # fmt: skip
    path = _write(tmp_path / "c.jsonl", lines)
    with _replay(path, strict_order=False) as s:
        with pytest.raises(HTTPStatusError) as caught:
            s.call_tool("echo", {"message": "x"}, timeout=30)
        assert caught.value.status == 400 and caught.value.body_excerpt == "no session"
        assert (
            str(caught.value)
            == str(live)
            == "HTTP 400 from POST http://127.0.0.1:1/mcp: no session"
        )
        assert s.call_tool("echo", {"message": "a"}).content[0].text == "A"  # still usable
    bad = _write(tmp_path / "bad.jsonl", [*lines[:-1], _line(5, "transport", {"id": 5})])
    with pytest.raises(CassetteError, match='line 12: a "transport" line needs'):
        _replay(bad)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda t: t[: t.rindex('"B"')], "line 10: not JSON"),  # cut mid-line
        (lambda t: t.rsplit("\n", 2)[0] + "\n", "ends at line 10 without its closing line"),
        (lambda t: t.replace('"from": "server"', '"from": "sever"', 1), 'line 3: "from" must be'),
        (lambda t: t.replace('"version": 1', '"version": 7'), "format version 7"),
        (lambda t: "", "is empty"),
        (lambda t: t.replace("mcpsync-cassette", "vcr", 1), "line 1: not a cassette header"),
        (lambda t: t.replace('"episode": 2', '"episode": -2', 1), 'line 5: "episode"'),
    ],
    ids=["truncated", "cut-at-line", "bad-field", "version", "empty", "not-cassette", "episode"],
)
def test_bad_cassettes_are_refused_naming_file_and_line(tmp_path, edit, words):
    path = _write(tmp_path / "c.jsonl", _legacy_lines())
    path.write_text(edit(path.read_text()))
    with pytest.raises(CassetteError, match=words) as caught:
        _replay(path)
    assert str(path) in str(caught.value)
    if "version" in words:
        assert "record it again" in str(caught.value) and "reads version 1" in str(caught.value)


def test_missing_cassette_in_mode_none(tmp_path):
    with pytest.raises(CassetteError, match="does not exist: record it first"):
        _replay(tmp_path / "nope.jsonl")


def test_cassette_and_restart_do_not_mix(tmp_path):
    with pytest.raises(ConfigError, match="restart"):
        mcpsync.connect(MISSING, cassette=Cassette(tmp_path / "x.jsonl"), restart=True)


# -- the pytest plugin -------------------------------------------------------------------------

PLUGIN_TESTS = """
import sys, pytest, mcpsync

TARGET = {target!r}


@pytest.mark.mcp_cassette
@pytest.mark.mcp_server(TARGET)
def test_with_session(mcp_session):
    assert mcp_session.call_tool("echo", {{"message": "{message}"}}).content[0].text == "{message}"


@pytest.mark.mcp_cassette("shared.jsonl")
def test_own_connect(mcp_cassette):
    with mcpsync.connect(TARGET, cassette=mcp_cassette) as s:
        assert s.call_tool("add", {{"a": 1, "b": 2}}).structured_content == {{"sum": 3}}
    print("MODE", mcp_cassette.mode, s.transport.kind)
"""


def _inner(pytester: pytest.Pytester, target: list[str], message: str = "hi") -> None:
    pytester.makepyfile(test_inner=PLUGIN_TESTS.format(target=target, message=message))


def test_live_plugin_records_once_then_replays_and_ci_never_records(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    folder = pytester.path / "cassettes" / "test_inner"
    _inner(pytester, DEMO)
    result = pytester.runpytest_subprocess("-s")  # default: once -> records
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*MODE once stdio*"])
    assert sorted(p.name for p in folder.iterdir()) == ["shared.jsonl", "test_with_session.jsonl"]
    _inner(pytester, MISSING)  # the server is gone: replayed from the files
    result = pytester.runpytest_subprocess("-s", "--mcp-record-mode=none")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*MODE none cassette*"])
    _inner(pytester, MISSING, message="other")  # a call never recorded fails the test
    result = pytester.runpytest_subprocess("--mcp-record-mode=none")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*CassetteMismatch*nearest recorded request is tools/call*"])
    (folder / "shared.jsonl").unlink()
    monkeypatch.setenv("CI", "true")  # on CI: none, so a missing cassette is an error
    _inner(pytester, DEMO)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*CassetteError*shared.jsonl does not exist*"])
    assert not (folder / "shared.jsonl").exists()
    result = pytester.runpytest_subprocess("--mcp-record-mode=all", "-s")  # unless told
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*MODE all stdio*"])


def test_live_plugin_new_episodes_adds_what_is_missing(pytester, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    path = pytester.path / "cassettes" / "test_inner" / "test_with_session.jsonl"
    _inner(pytester, DEMO)
    pytester.runpytest_subprocess("-k", "with_session").assert_outcomes(passed=1)
    _inner(pytester, DEMO, message="more")
    result = pytester.runpytest_subprocess("-k", "with_session", "--mcp-record-mode=new_episodes")
    result.assert_outcomes(passed=1)
    text = path.read_text()
    assert '"hi"' in text and '"more"' in text


def test_plugin_options_are_listed(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--mcp-record-mode*"])
    result = pytester.runpytest("--markers")
    assert "@pytest.mark.mcp_cassette(path=None, **cassette_kwargs)" in result.stdout.str()


def test_live_host_records_one_cassette_per_server(tmp_path, no_leaks):
    config = {"mcpServers": {
        "demo": {"command": DEMO[0], "args": DEMO[1:], "env": {"DEMO_SECRET": "hunter2-secret"}},
        "other": {"command": DEMO[0], "args": DEMO[1:]},
    }}  # fmt: skip
    base = Cassette(tmp_path / "host.jsonl", mode="once")
    with mcpsync.Host(config, cassettes=base.per_server) as host:
        assert host.call_tool("demo__echo", {"message": "hunter2-secret"}).content[0].text
        assert host.call_tool("other__add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
    files = sorted(p.name for p in (tmp_path / "host").iterdir())
    assert files == ["demo.jsonl", "other.jsonl"]
    assert "hunter2-secret" not in (tmp_path / "host" / "demo.jsonl").read_text()
    gone = {"mcpServers": {n: {"command": MISSING[0]} for n in ("demo", "other")}}
    with mcpsync.Host(gone, cassettes=base.per_server) as host:
        assert host.call_tool("other__add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
        assert host.session("demo").transport.kind == "cassette"


def test_live_oauth_protected_server_tokens_never_written(tmp_path, no_leaks):
    from mcpsync.auth import OAuth
    from mcpsync.demo_server.http import DemoHTTPServer

    path = tmp_path / "oauth.jsonl"
    client_secret, api_key = "client-secret-9f8e7d", "api-key-0a1b2c3d4e"
    with DemoHTTPServer(auth=True, clients={"svc": client_secret}) as server:
        url = server.url
        auth = OAuth.client_credentials("svc", client_secret)
        with mcpsync.connect(url, auth=auth, headers={"X-Api-Key": api_key},
                             cassette=Cassette(path, mode="once")) as s:  # fmt: skip
            assert s.call_tool("echo", {"message": "m2m"}).content[0].text == "m2m"
        issued = list(server.auth_server._tokens)  # every access token the server gave out
        assert server.auth_server.stats()["tokens"] == {"client_credentials": 1}
    assert issued
    text = path.read_text()
    for secret in (client_secret, api_key, *issued):
        assert secret not in text
    # replayed with the server gone and no credentials at all
    with mcpsync.connect(url, cassette=Cassette(path, mode="none")) as s:
        assert s.call_tool("echo", {"message": "m2m"}).content[0].text == "m2m"


def test_live_a_session_never_closed_is_saved_at_exit(tmp_path):
    path = tmp_path / "unclosed.jsonl"
    code = (
        "import sys, mcpsync\n"
        "from mcpsync.testing import Cassette\n"
        f"s = mcpsync.connect({DEMO!r}, cassette=Cassette({str(path)!r}, mode='all'))\n"
        "s.call_tool('echo', {'message': 'unclosed'})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, env=env, cwd=ROOT)
    with mcpsync.connect(MISSING, cassette=Cassette(path, mode="none")) as s:
        assert s.call_tool("echo", {"message": "unclosed"}).content[0].text == "unclosed"
