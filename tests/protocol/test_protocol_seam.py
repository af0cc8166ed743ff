"""The seam between the Session and the two protocol eras (mcpsync/protocol/README.md).

What keeps it a seam: the facade has no era branches, no era module imports the Session,
both eras implement one interface, caches are injected objects, and close joins every
thread of a session within one shared deadline.
"""

from __future__ import annotations

import ast
import inspect
import logging
import pydoc
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeServer

import mcpsync
from mcpsync.host import Host
from mcpsync.protocol import DEFAULT_OPTIONS, CallOptions, Era, Interest
from mcpsync.protocol.choose import DEFAULT_CACHES, Caches, server_identity
from mcpsync.protocol.legacy import LegacyEra
from mcpsync.protocol.modern import ModernEra
from mcpsync.protocol.modern.envelope import SERVER_INFO_KEY
from mcpsync.rpc import connection as connection_module

PACKAGE = Path(mcpsync.__file__).parent
MODERN = "2026-07-28"


def modern_fake(**handlers: Any) -> FakeServer:
    discover = {
        "resultType": "complete",
        "supportedVersions": [MODERN],
        "capabilities": {"tools": {}},
        "_meta": {SERVER_INFO_KEY: {"name": "fake-modern", "version": "1"}},
    }
    return FakeServer(handlers={"server/discover": lambda m: discover, **handlers})


def connect(server: FakeServer, **kwargs: Any) -> mcpsync.Session:
    kwargs.setdefault("_caches", Caches())
    return mcpsync.Session.connect(server.transport, timeout=5, connect_timeout=5, **kwargs)


def _imports(path: Path) -> set[str]:
    """Every module a file imports (module level, in functions, under TYPE_CHECKING)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0] + "." + "__init__"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: -node.level] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if node.module:  # ``from .. import x`` imports x, not the package's root
                found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_the_facade_has_no_era_branches():
    source = (PACKAGE / "session" / "__init__.py").read_text()
    for needle in ("_modern", "era ==", "era !=", "ModernFuture", "ModernEra", "LegacyEra"):
        assert needle not in source, (
            f"session.py mentions {needle!r}: era logic belongs in protocol/"
        )


def test_no_era_module_imports_the_session():
    forbidden = {"mcpsync.session", "mcpsync.host", "mcpsync.config", "mcpsync.cli", "mcpsync"}
    for path in sorted((PACKAGE / "protocol").rglob("*.py")):
        bad = {m for m in _imports(path) if m in forbidden or m.startswith("mcpsync.session")}
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_both_eras_implement_the_one_interface():
    for era in (LegacyEra, ModernEra):
        assert issubclass(era, Era) and not inspect.isabstract(era)
    assert (LegacyEra.name, ModernEra.name) == ("legacy", "modern")
    # neither constructor takes a Session
    for era in (LegacyEra, ModernEra):
        params = inspect.signature(era.__init__).parameters
        assert "session" not in params


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_session_holds_the_era_it_chose(no_leaks, era):
    tools = {"tools/list": lambda m: {"tools": []}}
    server = modern_fake(**tools) if era == "modern" else FakeServer(handlers=tools)
    with connect(server) as s:
        assert s.era == era
        assert s._era.name == era  # noqa: SLF001 - the seam itself is under test
        assert s._era.agreement.protocol_version == s.protocol_version  # noqa: SLF001
        assert s.list_tools() == []


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_era_configures_the_connection_through_its_hooks(no_leaks, era):
    """The era chosen by the handshake changes what the connection's ``EraHooks`` do; the
    engine only asks ``WireHooks`` (a bare Connection: the no-op defaults)."""
    from mcpsync.protocol.hooks import EraHooks
    from mcpsync.rpc.hooks import WireHooks

    defaults = WireHooks()
    assert defaults.meta("tools/list") is None and defaults.cancel(1) is False
    assert defaults.reinitialize() is False
    tools = {"tools/list": lambda m: {"tools": []}}
    server = modern_fake(**tools) if era == "modern" else FakeServer(handlers=tools)
    with connect(server) as s:
        hooks = s.connection.hooks
        assert isinstance(hooks, EraHooks) and EraHooks.of(s.connection) is hooks
        meta = hooks.meta("tools/list")
        assert (meta is None) == (era == "legacy")
        if era == "modern":
            assert meta is not None and meta["io.modelcontextprotocol/protocolVersion"] == MODERN
        else:
            assert hooks.expired is not None  # Session.connect's on_expired: re-initialize
        assert hooks.cancel(10**6) is False  # not HTTP: notifications/cancelled
        bare = connection_module.Connection(s.transport)  # (not started)
        assert type(bare.hooks) is WireHooks
        with pytest.raises(TypeError, match="EraHooks"):
            EraHooks.of(bare)


def test_the_modern_listen_filter_follows_the_sessions_interest():
    interest = Interest()
    assert interest.add_uri("file:///a", lambda uri: None) is True
    assert interest.add_uri("file:///a", lambda uri: None) is False
    interest.list_changed["prompts"].append(lambda: None)
    assert interest.kinds() == ["prompts"] and interest.uris() == ["file:///a"]
    assert interest.drop_uri("file:///a") and not interest.drop_uri("file:///a")


def test_call_options_share_the_default_and_keep_the_progress_token():
    from mcpsync.rpc.calls import DEFAULT
    from mcpsync.rpc.connection import CallOptions as EngineOptions

    assert CallOptions is EngineOptions  # one value from the Session down to the engine
    assert CallOptions.of() is DEFAULT_OPTIONS and DEFAULT_OPTIONS.timeout is DEFAULT
    opts = CallOptions.of(reset_timeout_on_progress=True, max_timeout=9.0)
    assert callable(opts.on_progress)  # a token, or progress cannot reset the timer
    assert opts.reset_timeout_on_progress is True and opts.max_timeout == 9.0
    assert opts.timeout is DEFAULT and CallOptions.of(timeout=None).timeout is None


def test_injected_caches_are_the_only_ones_written(no_leaks):
    mine, other = Caches(), Caches()
    server = modern_fake()
    server.client_end.identity = f"seam-{id(server)}"
    key, credential = server_identity(server.transport)
    with connect(server, _caches=mine) as s:
        assert s.era == "modern"
    assert mine.verdicts.era(key) == "modern"
    assert mine.hints.get(key, credential, "server/discover", None) is None  # no ttlMs: not kept
    assert other.verdicts.era(key) is None
    assert DEFAULT_CACHES.verdicts.era(key) is None


def test_close_joins_every_thread_within_one_deadline(no_leaks, monkeypatch, caplog):
    """Eight stuck sampling handlers: close waits once (CLOSE_TIMEOUT), not 2 s each in
    turn, and one warning names the threads still alive."""
    monkeypatch.setattr(connection_module, "CLOSE_TIMEOUT", 0.5)
    caplog.set_level(logging.WARNING, logger="mcpsync")
    release = threading.Event()
    started = threading.Semaphore(0)

    def stuck(params: Any) -> Any:
        started.release()
        release.wait(30)
        return {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}

    server = FakeServer()
    s = connect(server, sampling_handler=stuck)
    try:
        params = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                  "maxTokens": 5}  # fmt: skip
        for rid in range(8):
            server.send({"jsonrpc": "2.0", "id": 5000 + rid, "method": "sampling/createMessage",
                         "params": params})  # fmt: skip
        for _ in range(8):
            assert started.acquire(timeout=10)
        t0 = time.monotonic()
        s.close()
        elapsed = time.monotonic() - t0
        assert elapsed < 3.0, f"close took {elapsed:.1f} s (one 0.5 s deadline expected)"
        warnings = [r.getMessage() for r in caplog.records if "still alive" in r.getMessage()]
        assert len(warnings) == 1, warnings
        assert warnings[0].count("mcpsync-handler[") == 8
    finally:
        release.set()
        s.close()


DEMO_ENTRY = {"command": sys.executable, "args": ["-m", "mcpsync.demo_server"]}


def test_each_host_holds_its_own_caches(no_leaks):
    """Two Hosts given their own Caches: each of their sessions writes and reads only its
    host's verdicts (none in the other's, none in the process-wide default)."""
    first, second = Caches(), Caches()
    # an argv no other test uses: its key is in the process-wide default only if these
    # hosts wrote it there (other tests' hosts fill the default for the plain demo argv)
    entry = {**DEMO_ENTRY, "args": [*DEMO_ENTRY["args"], "--page-size", "97"]}
    with Host({"demo": entry}, _caches=first) as host:
        s = host.session("demo")
        key = server_identity(s.transport)[0]
        assert key is not None  # the host's own stdio transport names its server
        assert s.era == "legacy" and "remembered" not in s.era_reason  # probed
    assert first.verdicts.era(key) == "legacy"
    assert second.verdicts.era(key) is None and DEFAULT_CACHES.verdicts.era(key) is None
    with Host({"demo": entry}, _caches=second) as host:
        s = host.session("demo")
        assert server_identity(s.transport)[0] == key  # the same server ...
        assert "remembered" not in s.era_reason  # ... probed again: the first host's verdict unseen
    assert second.verdicts.era(key) == "legacy"
    assert DEFAULT_CACHES.verdicts.era(key) is None
    with Host({"demo": entry}, _caches=first) as host:  # the first host's caches again
        assert "remembered verdict" in host.session("demo").era_reason


def test_a_custom_connect_gets_caches_only_when_the_host_was_given_them():
    seen: list[dict[str, Any]] = []

    def fake_connect(**kwargs: Any) -> Any:
        seen.append(kwargs)
        raise mcpsync.MCPSyncError("not really connecting")

    entry = {"url": "http://127.0.0.1:9/mcp"}
    mine = Caches()
    for given in (None, mine):
        with Host({"x": entry}, connect=fake_connect, _caches=given):
            pass
    assert "_caches" not in seen[0] and seen[1]["_caches"] is mine


def test_help_shows_no_ellipsis_and_default_reads_well():
    """The "not given" timeout reads as DEFAULT in help() and the signatures, never Ellipsis."""
    from mcpsync.rpc.connection import DEFAULT, Connection

    for obj in (mcpsync.Session, Connection, mcpsync.Host, mcpsync.protocol.CallOptions):
        text = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        assert "Ellipsis" not in text and "<object object" not in text, obj
    assert repr(DEFAULT) == "DEFAULT" and mcpsync.protocol.UNSET is DEFAULT
    call_tool = inspect.signature(mcpsync.Session.call_tool).parameters["timeout"]
    assert call_tool.default is DEFAULT and "timeout: 'float | None | Default' = DEFAULT" in str(
        inspect.signature(mcpsync.Session.call_tool)
    )


def test_timeout_default_given_explicitly_is_the_sessions(no_leaks):
    from mcpsync.rpc.connection import DEFAULT

    server = FakeServer(handlers={"slow": lambda m: None, "echo": lambda m: {"ok": 1}})
    with mcpsync.Session.connect(server.transport, timeout=0.2, _caches=Caches()) as s:
        t0 = time.monotonic()
        with pytest.raises(mcpsync.RequestTimeout, match="0.2 s"):
            s.connection.call("slow", timeout=DEFAULT)  # "slow" never answers
        assert time.monotonic() - t0 < 5.0
        assert s.connection.call("echo", timeout=DEFAULT) == {"ok": 1}
        assert s.connection.wait(s.connection.request("echo", timeout=DEFAULT)) == {"ok": 1}
        options = CallOptions(timeout=0.2)  # a raw request's options, as one value
        with pytest.raises(mcpsync.RequestTimeout, match="0.2 s"):
            s.connection.call("slow", None, options)
        with pytest.raises(TypeError, match="once"):
            s.connection.request("echo", None, options, timeout=1.0)


WARM_CHECK = """
import sys, mcpsync
assert "mcp_types" not in sys.modules and "jsonschema" not in sys.modules  # import stays cheap
with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"], era="legacy") as s:
    from mcpsync import typed as _typed
    assert "mcp_types" in sys.modules, "not warmed by connect"
    missing = [m for m in _typed.WARM_MODELS if m not in _typed._validators]
    assert not missing, missing
    assert "jsonschema" not in sys.modules  # no tool list with an outputSchema yet
    s.submit_list_tools().result(timeout=30)
    assert "jsonschema" not in sys.modules  # never imported where a reply arrives
    assert any(t.output_schema for t in s.list_tools())  # the demo has one (cached list)
    assert "jsonschema" in sys.modules, "not warmed by the tool list with an outputSchema"
    assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
print("ok")
"""


def test_connect_imports_what_typed_results_need(no_leaks):
    """After the handshake, before any typed result: mcp_types and the common validators
    are ready (jsonschema once a tool list declares an outputSchema), so a Ctrl-C in the
    first typed result cuts no import in half."""
    p = subprocess.run([sys.executable, "-c", WARM_CHECK], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
