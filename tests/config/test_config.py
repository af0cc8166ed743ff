"""mcpsync.config: the config files editors write, variables, per-entry errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcpsync.config import (
    ConfigEntryError,
    InputSpec,
    ServerEntry,
    load_config,
    parse_entry,
    parse_jsonc,
)
from mcpsync.errors import ConfigError

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
HOME = str(Path.home())


def test_claude_desktop_file():
    cfg = load_config(FIX / "claude_desktop_config.json", environ={})
    assert cfg.errors == []
    assert list(cfg.entries) == ["filesystem", "github", "weather", "notes"]
    fs = cfg["filesystem"]
    assert fs.transport == "stdio"
    assert fs.argv == (
        "npx",
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/username/Desktop",
        "/Users/username/Downloads",
    )
    assert fs.url is None and fs.lazy is False
    assert cfg["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "<YOUR_TOKEN>"}
    notes = cfg["notes"]
    assert notes.argv == (f"{HOME}/bin/notes-mcp", "--db", f"{HOME}/notes.sqlite")
    assert notes.cwd == f"{HOME}/notes"


def test_vscode_mcp_json_with_comments_inputs_envfile():
    asked: list[InputSpec] = []

    def ask(spec: InputSpec) -> str | None:
        asked.append(spec)
        return {"perplexity-key": "pplx-secret", "api-token": "tok-123"}.get(spec.id)

    cfg = load_config(FIX / "vscode" / ".vscode" / "mcp.json", inputs=ask, environ={})
    assert cfg.errors == []
    ws = str((FIX / "vscode").resolve())
    assert [i.id for i in cfg.inputs] == ["perplexity-key", "api-token", "region"]
    assert cfg.inputs[0].password is True and cfg.inputs[0].description == "Perplexity API Key"
    assert cfg["Perplexity"].env == {"PERPLEXITY_API_KEY": "pplx-secret"}
    assert cfg["fetch"].argv == ("uvx", "mcp-server-fetch")
    gh = cfg["github"]
    assert gh.transport == "auto" and gh.url == "https://api.githubcopilot.com/mcp/"
    gw = cfg["gateway"]
    assert gw.transport == "sse"
    # region falls back to the input's default when the callback has no answer
    assert gw.headers == {"Authorization": "Bearer tok-123", "X-Region": "eu"}
    py = cfg["local-py"]
    assert py.argv == ("python", f"{ws}/server.py", "--home", HOME)
    # envFile loaded first, env overrides it
    assert py.env == {
        "DB_URL": "postgres://localhost/dev",
        "LOG_LEVEL": "debug",
        "SINGLE": "quoted value",
        "EMPTY": "",
    }
    assert cfg["with-oauth"].auth is not None
    assert cfg["with-oauth"].auth.client_id == "12348411142.11062036567072"
    # each input asked at most once
    assert sorted(s.id for s in asked) == ["api-token", "perplexity-key", "region"]


def test_vscode_missing_input_fails_only_that_entry():
    cfg = load_config(
        FIX / "vscode" / ".vscode" / "mcp.json", inputs={"api-token": "t"}, environ={}
    )
    assert "Perplexity" not in cfg and "gateway" in cfg
    (err,) = cfg.errors
    assert isinstance(err, ConfigEntryError)
    assert err.entry == "Perplexity" and err.field == "env.PERPLEXITY_API_KEY"
    text = str(err)
    assert "mcp.json" in text and "${input:perplexity-key}" in text
    assert "Perplexity API Key" in text and "inputs=" in text
    with pytest.raises(ConfigEntryError):
        cfg["Perplexity"]


def test_cursor_file_env_interpolation_and_auth():
    env = {
        "MY_SERVICE_TOKEN": "svc-token",
        "MCP_CLIENT_ID": "cid",
        "MCP_CLIENT_SECRET": "csecret",
        "API_KEY": "k",
    }
    cfg = load_config(FIX / "cursor" / ".cursor" / "mcp.json", environ=env)
    assert cfg.errors == []
    assert cfg["remote-server"].headers == {"Authorization": "Bearer svc-token"}
    assert cfg["remote-server"].transport == "auto"
    auth = cfg["oauth-server"].auth
    assert auth is not None
    assert (auth.client_id, auth.client_secret, auth.scopes) == (
        "cid",
        "csecret",
        ("read", "write"),
    )
    ws = str((FIX / "cursor").resolve())
    assert cfg["python-tool"].argv == ("python", f"{ws}/tools/mcp_server.py")
    assert cfg["sse-server"].transport == "sse"
    # secrets stay out of repr
    text = repr(cfg["oauth-server"]) + repr(cfg["remote-server"]) + repr(cfg["python-tool"])
    assert "csecret" not in text and "svc-token" not in text and "'k'" not in text


def test_cursor_missing_env_var_names_variable():
    cfg = load_config(FIX / "cursor" / ".cursor" / "mcp.json", environ={"API_KEY": "k"})
    failed = {e.entry: e for e in cfg.errors}
    assert set(failed) == {"remote-server", "oauth-server"}
    assert "MY_SERVICE_TOKEN is not set" in str(failed["remote-server"])
    assert failed["remote-server"].field == "headers.Authorization"
    assert set(cfg.entries) == {"server-name", "python-tool", "sse-server"}


def test_claude_code_defaults_and_plain_vars():
    cfg = load_config(FIX / "claude_code.mcp.json", environ={"API_KEY": "abc", "HOME": "/home/x"})
    assert cfg.errors == []
    assert cfg["api-server"].url == "https://api.example.com/mcp"
    assert cfg["api-server"].headers["Authorization"] == "Bearer abc"
    assert cfg["events"].transport == "sse"
    assert cfg["local"].argv == ("/usr/local/bin/local-mcp", "--config", "/home/x/.local-mcp.toml")
    cfg2 = load_config(
        FIX / "claude_code.mcp.json",
        environ={"API_KEY": "abc", "HOME": "/h", "API_BASE_URL": "http://127.0.0.1:9"},
    )
    assert cfg2["api-server"].url == "http://127.0.0.1:9/mcp"


def test_vscode_settings_json_mcp_section():
    cfg = load_config(FIX / "vscode_settings.json")
    assert list(cfg.entries) == ["time"]
    assert cfg["time"].transport == "stdio"


def test_mixed_errors_name_file_entry_field_and_expectation():
    cfg = load_config(FIX / "mixed_errors.json", environ={})
    assert list(cfg.entries) == ["good-stdio", "good-http"]
    good = cfg["good-stdio"]
    assert good.timeout == 12.5 and good.lazy is True
    assert cfg["good-http"].transport == "streamable-http" and cfg["good-http"].lazy is False
    by_name = {e.entry: e for e in cfg.errors}
    assert list(by_name) == [
        "args-not-list",
        "neither",
        "both",
        "bad-url",
        "bad-type",
        "bad-timeout",
        "missing-var",
        "env-not-strings",
    ]
    for err in cfg.errors:
        assert str(err).startswith(str(FIX / "mixed_errors.json") + ": server ")
    assert by_name["args-not-list"].field == "args"
    assert "expected a list of strings, got a string" in str(by_name["args-not-list"])
    assert 'expected "command" (a local server) or "url"' in str(by_name["neither"])
    assert 'both "command" and "url"' in str(by_name["both"])
    assert "expected an http:// or https:// URL" in str(by_name["bad-url"])
    assert by_name["bad-type"].field == "type" and "'websocket'" in str(by_name["bad-type"])
    assert "positive number of seconds" in str(by_name["bad-timeout"])
    assert by_name["env-not-strings"].field == "env.DEPTH"
    assert cfg.names()[0] == "good-stdio" and cfg.names()[-1] == "good-http"
    assert cfg.names()[1:-1] == list(by_name)
    with pytest.raises(ConfigError, match=r"and 7 more entry errors"):
        cfg.raise_for_errors()


def test_invalid_json_names_line_and_column():
    with pytest.raises(ConfigError, match=r"invalid\.json: not valid JSON at line 4, column 5"):
        load_config(FIX / "invalid.json")


def test_missing_file_and_wrong_shapes():
    with pytest.raises(ConfigError, match="no such file"):
        load_config(FIX / "nope.json")
    with pytest.raises(ConfigError, match='"mcpServers" must be an object'):
        load_config({"mcpServers": []})
    with pytest.raises(ConfigError, match="no server list found"):
        load_config({"editor.fontSize": 14})


def test_unknown_server_name_lists_known():
    cfg = load_config({"a": {"command": "x"}, "b": {"url": "http://h/mcp"}})
    with pytest.raises(ConfigError, match=r"no server named 'c' \(servers: 'a', 'b'\)"):
        cfg["c"]


def test_plain_dict_in_code_and_connect_kwargs():
    cfg = load_config(
        {
            "fs": {"command": "mcp-fs", "args": ["--root", "/tmp", 3], "env": {"N": 1, "B": True}},
            "web": {
                "url": "https://h.example/mcp",
                "headers": {"X-Key": "v"},
                "timeout": 5,
                "connect_timeout": 2,
                "auth": {"client_id": "c", "scopes": "a b"},
            },
        }
    )
    assert cfg.errors == []
    fs = cfg["fs"]
    assert fs.argv == ("mcp-fs", "--root", "/tmp", "3")
    assert fs.env == {"N": "1", "B": "true"}
    assert fs.connect_kwargs() == {
        "target": ["mcp-fs", "--root", "/tmp", "3"],
        "name": "fs",
        "transport": "stdio",
        "env": {"N": "1", "B": "true"},
    }
    web = cfg["web"]
    made: list[ServerEntry] = []

    def factory(entry: ServerEntry) -> str:
        made.append(entry)
        return "AUTH"

    assert web.connect_kwargs(auth_factory=factory, timeout=1) == {
        "target": "https://h.example/mcp",
        "name": "web",
        "transport": "auto",
        "headers": {"X-Key": "v"},
        "timeout": 1,
        "connect_timeout": 2.0,
        "auth": "AUTH",
    }
    assert made == [web]
    assert web.auth is not None and web.auth.scopes == ("a", "b")
    assert "auth" not in web.connect_kwargs()
    assert "auth" not in web.connect_kwargs(auth_factory=lambda e: None)
    assert "auth" not in fs.connect_kwargs(auth_factory=factory) and made == [web]


def test_oauth_for_entry_uses_entry_settings(monkeypatch: pytest.MonkeyPatch):
    import mcpsync.auth
    from mcpsync.config import oauth_for_entry

    made: list[dict] = []

    class FakeOAuth:
        def __init__(self, **kw):
            made.append(kw)

    monkeypatch.setattr(mcpsync.auth, "OAuth", FakeOAuth)
    cfg = load_config(
        {
            "web": {
                "url": "https://h.example/mcp",
                "auth": {"CLIENT_ID": "cid", "CLIENT_SECRET": "s", "scopes": ["r"]},
            },
            "plain": {"url": "https://h.example/mcp"},
            "local": {"command": "x"},
        }
    )
    auth = cfg["web"].connect_kwargs(auth_factory=oauth_for_entry)["auth"]
    assert isinstance(auth, FakeOAuth)
    assert made == [{"client_id": "cid", "client_secret": "s", "scopes": ["r"]}]
    oauth_for_entry(cfg["plain"], store="S")
    assert made[-1] == {"store": "S"}
    assert oauth_for_entry(cfg["local"]) is None and len(made) == 2


def test_mcp_servers_wrapper_dict_and_disabled():
    cfg = load_config(
        {"mcpServers": {"x": {"command": "a", "disabled": True}, "y": {"command": "b"}}}
    )
    assert cfg["x"].disabled is True and cfg["y"].disabled is False


def test_parse_entry_single():
    e = parse_entry("one", {"command": "python", "args": ["-m", "srv"], "eager": False}, environ={})
    assert e.lazy is True and e.describe() == "python -m srv"
    with pytest.raises(ConfigEntryError, match="contradicts"):
        parse_entry("two", {"command": "x", "lazy": True, "eager": True})
    with pytest.raises(ConfigEntryError, match=r'"stdio" needs a "command"'):
        parse_entry("three", {"type": "stdio", "url": "http://h/"})
    with pytest.raises(ConfigEntryError, match=r"field 'cwd'.*only applies to local"):
        parse_entry("four", {"url": "http://h/", "cwd": "/tmp"})
    with pytest.raises(ConfigEntryError, match=r"unsupported variable \$\{command:foo\}"):
        parse_entry("five", {"command": "${command:foo}"})


def test_undeclared_input_and_default_var_and_error_text_has_no_secret():
    with pytest.raises(ConfigEntryError, match=r'not declared in "inputs"'):
        parse_entry("x", {"command": "a", "env": {"K": "${input:k}"}})
    e = parse_entry("x", {"command": "a", "env": {"K": "${input:k}"}}, inputs={"k": "v"})
    assert e.env == {"K": "v"}
    # a bad URL with a key in the query string: the key does not reach the message
    with pytest.raises(ConfigEntryError) as info:
        parse_entry("y", {"url": "ftp://h/x?key=${env:S}"}, environ={"S": "topsecret"})
    assert "topsecret" not in str(info.value)


def test_envfile_relative_and_missing(tmp_path: Path):
    (tmp_path / "vars.env").write_text("A=1\n# c\nB = two # trailing\n")
    e = parse_entry("x", {"command": "a", "envFile": "vars.env"}, workspace=tmp_path)
    assert e.env == {"A": "1", "B": "two"}
    with pytest.raises(ConfigEntryError, match=r"field 'envFile': cannot read"):
        parse_entry("x", {"command": "a", "envFile": "missing.env"}, workspace=tmp_path)
    (tmp_path / "bad.env").write_text("not a pair\n")
    with pytest.raises(ConfigEntryError, match=r"line 1: expected KEY=VALUE"):
        parse_entry("x", {"command": "a", "envFile": str(tmp_path / "bad.env")})


def test_parse_jsonc_keeps_strings_intact():
    text = '{"a": "http://x//y", "b": "/* no */", "c": [1, 2,], // c\n "d": "\\"//\\""}'
    assert parse_jsonc(text) == {"a": "http://x//y", "b": "/* no */", "c": [1, 2], "d": '"//"'}


def test_default_workspace_is_cwd_for_dicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config({"s": {"command": "${workspaceFolder}/srv"}})
    assert cfg["s"].argv == (f"{os.getcwd()}/srv",)
