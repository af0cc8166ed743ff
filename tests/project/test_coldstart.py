"""Cold start: ``mcp_types`` imported plainly, in a background thread while the server
starts; ``import mcpsync`` loads neither pydantic nor ``mcp_types``; the first typed result
works and validates as the models themselves do. (Speed is measured by
``benchmarks/coldstart.py``, never asserted here.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mcpsync import typed as _typed


def _run(code: str, timeout: float = 60.0) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


PREFETCHED = """
import sys, threading, types
import mcpsync
from mcpsync import typed as _typed
assert "mcp_types" not in sys.modules and "pydantic" not in sys.modules
with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"], era="legacy") as s:
    # connect imported mcp_types and built the commonest result's validator (the prefetch)
    assert "mcp_types" in sys.modules
    assert set(_typed.WARM_MODELS) <= set(_typed._validators), list(_typed._validators)
    # ... and the prefetch thread is gone once connect returned
    assert not [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-typed")]
    import mcp_types
    result = s.call_tool("echo", {"message": "hello"})
    assert type(result) is mcp_types.CallToolResult
    assert type(result.content[0]) is mcp_types.TextContent and result.content[0].text == "hello"
    # a plain import: the module everyone gets, a plain module, every model built by it
    assert _typed.types() is mcp_types and type(mcp_types) is types.ModuleType
    assert type(sys.modules["mcp_types._types"]) is types.ModuleType
    assert mcp_types.CreateMessageRequest.__pydantic_complete__
print("ok")
"""


def test_connect_imports_mcp_types_plainly_in_the_background():
    assert _run(PREFETCHED).strip() == "ok"


RACE = """
import sys, threading
from mcpsync import typed as _typed
_typed.prefetch()  # the import runs in the background thread ...
got, errors = [], []
start = threading.Barrier(4)

def need():  # ... while four threads need the models at once: each simply imports
    try:
        start.wait(30)
        r = _typed.validate("CallToolResult", {"content": [{"type": "text", "text": "x"}]})
        got.append((_typed.types(), r.content[0].text))
    except BaseException as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=need) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
_typed.warm()
assert not [t for t in threads if t.is_alive()] and not errors, errors
assert all(m is sys.modules["mcp_types"] and text == "x" for m, text in got) and len(got) == 4
assert not [t.name for t in threading.enumerate() if t.name.startswith("mcpsync-typed")]
print("ok")
"""


def test_threads_that_need_the_models_while_the_prefetch_imports_get_them():
    assert _run(RACE).strip() == "ok"


#: (model, data): the tagged content-block validators mcpsync uses for results with a
#: ``content`` list must give the verdicts of the model's own validation
CASES = [
    ("CallToolResult", {"content": [{"type": "text", "text": "x"}]}),
    ("CallToolResult", {"content": [{"type": "text"}]}),  # no text
    ("CallToolResult", {"content": [{"type": "image", "data": "AA==", "mimeType": 1}]}),
    ("CallToolResult", {"content": [{"type": "nope", "text": "x"}]}),
    ("CallToolResult", {"content": "nope"}),
    ("CallToolResult", {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}),
    ("ListToolsResult", {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]}),
    ("ListToolsResult", {"tools": [{"inputSchema": {}}]}),
    ("InitializeResult", {"protocolVersion": "v", "capabilities": {}, "serverInfo": {}}),
    ("ReadResourceResult", {"contents": [{"uri": "file:///x", "text": "t"}]}),
    ("ReadResourceResult", {"contents": [{"text": "t"}]}),
    ("GetPromptResult", {"messages": [{"role": "user", "content": {"type": "text"}}]}),
]


@pytest.mark.parametrize("model, data", CASES)
def test_mcpsync_validation_gives_the_models_own_verdicts(model, data):
    from mcpsync.errors import ProtocolError

    target = getattr(_typed.types(), model)
    try:
        expected = target.model_validate(data).model_dump(mode="json")
    except ValueError:
        with pytest.raises(ProtocolError, match=f"invalid {model}"):
            _typed.validate(model, data)
    else:
        got = _typed.validate(model, data)
        assert type(got) is target and got.model_dump(mode="json") == expected


def test_invalid_result_is_a_protocol_error():
    from mcpsync.errors import ProtocolError

    with pytest.raises(ProtocolError, match="invalid CallToolResult"):
        _typed.validate("CallToolResult", {"content": [{"type": "text"}]})


FORK = """
import os, sys, time
from mcpsync import typed as _typed
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
    assert ours == ["mcpsync", "mcpsync._version", "mcpsync.errors"]
    assert not [m for m in after_import if m.split(".")[0] in ("pydantic", "mcp_types")]
    assert "mcp_types" in after_call  # the first typed result imported it
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
from mcpsync.cards.fetch import server_card as real_server_card
from mcpsync.skills.entry import SkillEntry
assert Host is host_Host and load_config is real_load_config and server_card is real_server_card
assert display is sys.modules["mcpsync.display"] and callable(display.tools_table)
assert handlers is sys.modules["mcpsync.handlers"] and callable(handlers.decline)
assert smoke is sys.modules["mcpsync.smoke"] and callable(smoke.run)  # a plain module
assert skills.SkillEntry is SkillEntry and config.ServerEntry is mcpsync.ServerEntry
from mcpsync.session import Session
from mcpsync.session.restart_policy import RestartPolicy
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
# the submodules of ``__all__`` load on attribute access after a bare ``import mcpsync``
assert mcpsync.skills.frontmatter is sys.modules["mcpsync.skills.frontmatter"]
assert callable(mcpsync.display.tools_table) and callable(mcpsync.handlers.accept_defaults)
print("ok")
"""


def test_every_public_name_still_resolves():
    out = json.loads(_run(LAZY_NAMES))
    assert out == {"missing_from_dir": [], "mcpsync.config": [], "mcpsync.skills": []}
    assert _run(SUBMODULE_ATTRIBUTES).strip() == "ok"


SLOW_PREFETCH_START = """
import threading
from mcpsync import typed as _typed

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
