"""Cold start: mcp_types imported in the background while the server starts, its models
built on first use (only the graphs the results need), validation unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from mcpsync import _typed, _typesimport


def _run(code: str, timeout: float = 60.0) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


LAZY = """
import sys, mcpsync
from mcpsync import _typed, _typesimport
assert "mcp_types" not in sys.modules and "pydantic" not in sys.modules
with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"], era="legacy") as s:
    names = [t for t in _typed._validators]
    assert set(_typed.WARM_MODELS) <= set(names), names
    import mcp_types
    result = s.call_tool("echo", {"message": "hello"})
    assert type(result) is mcp_types.CallToolResult
    assert type(result.content[0]) is mcp_types.TextContent and result.content[0].text == "hello"
    # a model no result of this session needed is still unbuilt: only the graphs used were built
    assert not mcp_types.CreateMessageRequest.__pydantic_complete__
    assert mcp_types.CallToolResult.__pydantic_complete__
    # the prefetch thread is gone once connect returned
    import threading
    assert not [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-typed")]
print("ok")
"""


def test_connect_builds_only_what_results_need():
    assert _run(LAZY).strip() == "ok"


def test_deferred_models_validate_as_strictly_as_eager_ones():
    """The same inputs give the same verdicts through mcpsync's lazily built models as
    through the models of a plain ``import mcp_types`` (another interpreter)."""
    cases = [
        ("CallToolResult", {"content": [{"type": "text", "text": "x"}]}),
        ("CallToolResult", {"content": [{"type": "text"}]}),  # no text
        ("CallToolResult", {"content": [{"type": "image", "data": "AA==", "mimeType": 1}]}),
        ("CallToolResult", {"content": "nope"}),
        ("ListToolsResult", {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]}),
        ("ListToolsResult", {"tools": [{"inputSchema": {}}]}),
        ("InitializeResult", {"protocolVersion": "v", "capabilities": {}, "serverInfo": {}}),
        ("ReadResourceResult", {"contents": [{"uri": "file:///x", "text": "t"}]}),
        ("ReadResourceResult", {"contents": [{"text": "t"}]}),
        # rebuilt by mcp_types at import (forward references), deferred here: still strict
        ("CallToolRequestParams", {"name": "t", "arguments": {"a": 1}}),
        ("CallToolRequestParams", {"arguments": {"a": 1}}),
        ("GetPromptRequestParams", {"name": "p", "arguments": {"a": "b"}}),
        ("PaginatedRequestParams", {"cursor": 3}),
    ]
    program = f"""
import json, sys
lazy = sys.argv[1] == "lazy"
if lazy:
    from mcpsync import _typed
    types = _typed.types()
else:
    import mcp_types as types
out = []
for name, data in {cases!r}:
    try:
        out.append(["ok", getattr(types, name).model_validate(data).model_dump(mode="json")])
    except ValueError as exc:
        out.append(["invalid", sorted(".".join(map(str, e["loc"])) for e in exc.errors())])
print(json.dumps(out))
"""

    def verdicts(mode: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", program, mode], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    lazy, eager = verdicts("lazy"), verdicts("eager")
    assert lazy == eager
    assert lazy.count('"invalid"') == 8  # the eight cases that must fail do fail


def test_invalid_result_is_a_protocol_error():
    from mcpsync.errors import ProtocolError

    with pytest.raises(ProtocolError, match="invalid CallToolResult"):
        _typed.validate("CallToolResult", {"content": [{"type": "text"}]})


def test_deferral_is_for_the_importing_thread_only():
    from pydantic import BaseModel, TypeAdapter, type_adapter
    from pydantic._internal import _config

    original = type_adapter.TypeAdapter.__dict__["_defer_build"]
    original_rebuild = BaseModel.__dict__["model_rebuild"]
    other: dict[str, bool] = {}
    inside = threading.Event()
    release = threading.Event()

    def importer() -> None:
        with _typesimport.deferred_builds():

            class Here(BaseModel):
                x: int

            other["here"] = Here.__pydantic_complete__
            other["here_rebuilt"] = Here.model_rebuild() is not None  # skipped: first use builds
            other["here_adapter"] = TypeAdapter(int | str).pydantic_complete
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=importer, name="mcpsync-test[importer]")
    thread.start()
    try:
        assert inside.wait(30)

        class There(BaseModel):  # another thread, while the deferral is in force
            y: int

        assert There.__pydantic_complete__

        class Later(BaseModel):
            ref: "Missing | None" = None  # noqa: F821, UP037 - defined below: a forward reference

        class Missing(BaseModel):
            v: int

        assert not Later.__pydantic_complete__
        assert Later.model_rebuild() is True  # another thread: rebuilt as usual
        assert Later.model_validate({"ref": {"v": 1}}).ref == Missing(v=1)
        assert TypeAdapter(int | str).pydantic_complete
    finally:
        release.set()
        thread.join(30)
    assert other == {"here": False, "here_rebuilt": False, "here_adapter": False}
    assert BaseModel.__dict__["model_rebuild"] is original_rebuild
    assert "defer_build" not in _config.ConfigWrapper.__dict__  # hooks taken away again
    assert type_adapter.TypeAdapter.__dict__["_defer_build"] is original

    class After(BaseModel):
        z: int

    assert After.__pydantic_complete__


FORK = """
import os, sys, time
from mcpsync import _typed, _typesimport
_typed.prefetch()           # the import runs in a background thread ...
pid = os.fork()             # ... and a fork right now waits for it (register_at_fork)
if pid == 0:
    try:
        r = _typed.validate("CallToolResult", {"content": [{"type": "text", "text": "c"}]})
        os._exit(0 if r.content[0].text == "c" else 3)
    except BaseException:
        os._exit(4)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child", os.waitstatus_to_exitcode(status))
        break
    time.sleep(0.02)
else:
    os.kill(pid, 9)
    print("child hung")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_fork_during_prefetch_leaves_the_child_able_to_import():
    assert _run(FORK).strip() == "child 0"


# -- import mcpsync loads only what Session.connect and the calls need -------------------

#: modules a script that connects to a stdio server and calls a tool never needs: each is
#: loaded on first use of a public name (PEP 562 ``__getattr__``) or inside the function
#: that uses it
NOT_ON_THE_COLD_PATH = [
    "mcpsync.host",
    "mcpsync.host.servers",
    "mcpsync.host.routing",
    "mcpsync.display",
    "mcpsync.display.icons",
    "mcpsync.display.render",
    "mcpsync.handlers",
    "mcpsync.config.entries",
    "mcpsync.config.load",
    "mcpsync.config.parse",
    "mcpsync.skills.entry",
    "mcpsync.skills.frontmatter",
    "mcpsync.skills.loaded",
    "mcpsync.skills.cache",
    "mcpsync.cards",
    "mcpsync.smoke",
    "mcpsync.adapters",
    "mcpsync.elicitation",
    "mcpsync.apps",
    "mcpsync.cli",
    "requests",
]

COLD_MODULES = """
import json, sys
import mcpsync
after_import = sorted(sys.modules)
with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
    assert s.call_tool("echo", {"message": "hello"}).content[0].text == "hello"
    assert s.list_tools()
    after_call = sorted(sys.modules)
print(json.dumps([after_import, after_call]))
"""


def test_import_and_first_call_leave_the_rest_unloaded():
    after_import, after_call = json.loads(_run(COLD_MODULES))
    # the package alone: its version and errors (mcpsync.Session loads the session layer)
    ours = [m for m in after_import if m == "mcpsync" or m.startswith("mcpsync.")]
    assert ours == ["mcpsync", "mcpsync._lazy", "mcpsync._version", "mcpsync.errors"]
    assert "mcpsync.session" in after_call and "mcpsync.transports.stdio" in after_call
    assert not [m for m in NOT_ON_THE_COLD_PATH if m in after_call]


LAZY_NAMES = """
import json, sys, importlib
import mcpsync
from mcpsync import *  # every name of __all__, the lazy ones loaded here
out = {"missing_from_dir": sorted(set(mcpsync.__all__) - set(dir(mcpsync)))}
import mcpsync.config as config, mcpsync.skills as skills
for package in (config, skills):
    out[package.__name__] = sorted(set(package.__all__) - set(dir(package)))
    for name in package.__all__:
        getattr(package, name)
assert set(mcpsync.__all__) <= set(globals())
# each public name is the object its own module defines (no copies, no stand-ins)
from mcpsync import Host, display, handlers, load_config, smoke, server_card
from mcpsync.host import Host as host_Host
from mcpsync.config.load import load_config as real_load_config
from mcpsync.smoke import smoke as real_smoke
from mcpsync.cards.fetch import server_card as real_server_card
from mcpsync.skills.entry import SkillEntry
assert Host is host_Host and load_config is real_load_config and server_card is real_server_card
assert display is sys.modules["mcpsync.display"] and callable(display.tools_table)
assert handlers is sys.modules["mcpsync.handlers"] and callable(handlers.decline)
assert smoke is real_smoke or smoke is sys.modules["mcpsync.smoke"]
assert callable(mcpsync.smoke)
assert skills.SkillEntry is SkillEntry and config.ServerEntry is mcpsync.ServerEntry
assert mcpsync.adapters is sys.modules["mcpsync.adapters"]
from mcpsync.session import Session
from mcpsync._restart_policy import RestartPolicy
assert mcpsync.Session is Session and mcpsync.RestartPolicy is RestartPolicy
# the submodules a bare ``import mcpsync`` used to load stay reachable as attributes
assert mcpsync.config.entries.ServerEntry is mcpsync.ServerEntry
assert mcpsync.skills.frontmatter.FrontmatterError is skills.FrontmatterError
assert mcpsync.transports.base.Transport is mcpsync.session.Transport
for package, name in ((mcpsync, "Nope"), (config, "nope"), (skills, "nope")):
    try:
        getattr(package, name)
    except AttributeError as exc:
        assert name in str(exc)
    else:
        raise AssertionError(name)
host = mcpsync.Host({"demo": {"command": sys.executable, "args": ["-m", "mcpsync.demo_server"]}})
with host:
    assert "echo" in [t.name for t in host.list_tools()] and host.status()[0].state == "ready"
print(json.dumps(out))
"""


SUBMODULE_ATTRIBUTES = """
import sys, mcpsync
assert "mcpsync.config" not in sys.modules
# a bare ``import mcpsync`` used to load these as a side effect: attribute access still works
assert mcpsync.config.entries is sys.modules["mcpsync.config.entries"]
assert mcpsync.skills.frontmatter is sys.modules["mcpsync.skills.frontmatter"]
assert mcpsync.host.Host is mcpsync.Host and mcpsync.session.Session is mcpsync.Session
assert callable(mcpsync.display.tools_table) and callable(mcpsync.handlers.accept_defaults)
print("ok")
"""


def test_every_public_name_still_resolves():
    out = json.loads(_run(LAZY_NAMES))
    assert out == {"missing_from_dir": [], "mcpsync.config": [], "mcpsync.skills": []}
    assert _run(SUBMODULE_ATTRIBUTES).strip() == "ok"


SLOW_PREFETCH_START = """
import threading
from mcpsync import _typed, _typesimport

# Another thread wants the models while the prefetch thread is being started (on a loaded
# machine start() can take milliseconds): it must not find a thread it cannot join yet.
real_start = threading.Thread.start
seen = []

def start(self):
    if self.name == "mcpsync-typed[import]":
        other = threading.Thread(target=lambda: seen.append(_warm_or_error()))
        real_start(other)
        other.join(60)
        assert not other.is_alive()
    real_start(self)

def _warm_or_error():
    try:
        _typed.warm()
        return "ok"
    except Exception as exc:
        return repr(exc)

threading.Thread.start = start
_typed.prefetch()
_typed.warm()
print(seen)
"""


def test_a_thread_that_needs_the_models_while_the_prefetch_starts_gets_them():
    # (Two sessions brought up at once by a Host in a fresh process: one failed with
    # "cannot join thread before it is started".)
    assert _run(SLOW_PREFETCH_START).strip() == "['ok']"
