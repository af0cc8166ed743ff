"""The package root as a user meets it: ``mcpsync.connect``, ``dir(mcpsync)`` is ``__all__``,
every public name resolves, ``mcpsync.smoke.run``, a cheap ``import mcpsync``, and no module
of the package that re-classes a module or writes ``sys.modules``.

The import-state checks run in a fresh interpreter: in this process pytest, the plugin and
the other tests have long since imported most of the package.
"""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from servers.launch import demo_argv

import mcpsync

PACKAGE = Path(mcpsync.__file__).resolve().parent

#: names the root offered before ``__all__`` alone was its surface (private submodules,
#: ``TYPE_CHECKING``, submodules ``__all__`` does not name): none may resolve on a bare import
NOT_OFFERED = (
    "TYPE_CHECKING",
    "_lazy",
    "_bringup",
    "_calls",
    "_dispatch",
    "_forksafe",
    "_guard",
    "_lifecycle",
    "_offer",
    "_restart",
    "_restart_policy",
    "_served",
    "_serverlog",
    "_shared",
    "_tls",
    "_typed",
    "adapters",
    "config",
    "connection",
    "filters",
    "host",
    "jsonrpc",
    "protocol",
    "session",
    "transports",
    "versions",
    "modern",
    "handshake",
)


def _fresh(code: str, timeout: float = 60.0) -> object:
    """Run ``code`` in a new interpreter; it prints one JSON value, returned here."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


# -- mcpsync.connect ---------------------------------------------------------------------


def test_connect_is_session_connect():
    assert "connect" in mcpsync.__all__
    # the classmethod itself, bound to Session: same function, same signature and docstring
    assert mcpsync.connect == mcpsync.Session.connect
    assert mcpsync.connect.__func__ is mcpsync.Session.connect.__func__  # type: ignore[attr-defined]
    assert inspect.signature(mcpsync.connect) == inspect.signature(mcpsync.Session.connect)
    assert mcpsync.connect.__doc__ and mcpsync.connect.__doc__ == mcpsync.Session.connect.__doc__


def test_connect_opens_a_session_on_the_demo_server(no_leaks):
    with mcpsync.connect(demo_argv(), connect_timeout=30, timeout=30) as s:
        assert type(s) is mcpsync.Session
        assert s.call_tool("echo", {"message": "hi"}).content[0].text == "hi"
        tools = sorted(t.name for t in s.list_tools())
    with mcpsync.Session.connect(demo_argv(), connect_timeout=30, timeout=30) as s:
        assert sorted(t.name for t in s.list_tools()) == tools
    assert s.closed


def test_connect_loads_lazily_in_a_fresh_interpreter():
    out = _fresh(
        "import json, sys, mcpsync\n"
        "before = 'mcpsync.session' in sys.modules\n"
        "connect = mcpsync.connect\n"
        "print(json.dumps([before, 'mcpsync.session' in sys.modules,"
        " connect == mcpsync.Session.connect]))\n"
    )
    assert out == [False, True, True]


# -- dir(mcpsync) and __all__ ------------------------------------------------------------


def test_dir_is_all_and_the_dunders_here():
    # this process has loaded most of the package: dir() still offers __all__, nothing else
    assert {n for n in dir(mcpsync) if not _dunder(n)} == set(mcpsync.__all__)
    assert len(mcpsync.__all__) == len(set(mcpsync.__all__))


def test_dir_is_all_in_a_fresh_interpreter():
    out = _fresh(
        "import json, mcpsync\n"
        "bare = [n for n in dir(mcpsync) if not (n.startswith('__') and n.endswith('__'))]\n"
        "for name in mcpsync.__all__:\n"
        "    getattr(mcpsync, name)\n"
        "loaded = [n for n in dir(mcpsync) if not (n.startswith('__') and n.endswith('__'))]\n"
        "print(json.dumps([sorted(bare), sorted(loaded), sorted(mcpsync.__all__)]))\n"
    )
    bare, loaded, names = out  # type: ignore[misc]
    assert bare == names and loaded == names


def test_every_name_of_all_resolves_from_a_fresh_interpreter():
    out = _fresh(
        "import json, types, mcpsync\n"
        "ns = {}\n"
        "exec('from mcpsync import *', ns)\n"
        "star = sorted(n for n in ns if n != '__builtins__')\n"
        "kinds = {n: type(getattr(mcpsync, n)).__name__ for n in mcpsync.__all__}\n"
        "modules = sorted(n for n in mcpsync.__all__"
        " if isinstance(getattr(mcpsync, n), types.ModuleType))\n"
        "print(json.dumps([star, sorted(mcpsync.__all__), kinds, modules]))\n"
    )
    star, names, kinds, modules = out  # type: ignore[misc]
    assert star == names
    assert "NoneType" not in kinds.values()
    # the submodules __all__ names: docs/features.md's mcpsync.skills.EXTENSION_ID and
    # mcpsync.smoke.run(...) after a bare ``import mcpsync``
    assert modules == ["display", "handlers", "skills", "smoke"]
    assert mcpsync.skills.EXTENSION_ID and callable(mcpsync.display.tools_table)


def test_private_names_and_unlisted_submodules_do_not_resolve_on_a_bare_import():
    out = _fresh(
        "import json, mcpsync\n"
        f"names = {list(NOT_OFFERED)!r}\n"
        "found = {}\n"
        "for name in names:\n"
        "    try:\n"
        "        getattr(mcpsync, name)\n"
        "        found[name] = 'resolved'\n"
        "    except AttributeError as exc:\n"
        "        found[name] = 'named' if repr(name) in str(exc) else str(exc)\n"
        "print(json.dumps(found))\n"
    )
    assert out == dict.fromkeys(NOT_OFFERED, "named")


# -- mcpsync.smoke is a plain module with run() ------------------------------------------


def test_smoke_is_a_plain_module_with_run():
    assert type(mcpsync.smoke) is types.ModuleType
    assert not callable(mcpsync.smoke)
    assert mcpsync.smoke is sys.modules["mcpsync.smoke"]
    assert "run" in mcpsync.smoke.__all__ and "smoke" not in mcpsync.smoke.__all__
    assert not hasattr(mcpsync.smoke, "smoke")


def test_smoke_run_on_the_demo_server(no_leaks):
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": demo_argv()[1:]}}}
    report = mcpsync.smoke.run(
        config, calls=[("echo", {"message": "hi"}), "no_such_tool"], connect_timeout=30
    )
    demo = report["demo"]
    assert demo.state == "ready" and demo.failure is None, demo.error
    assert "echo" in (demo.tools or [])
    echo, missing = demo.calls
    assert (echo.tool, echo.ok) == ("echo", True)
    assert (missing.tool, missing.skipped) == ("no_such_tool", True)
    assert report.no_tool == ["no_such_tool"] and not report.ok


# -- import mcpsync stays cheap --------------------------------------------------------


def test_import_mcpsync_loads_no_pydantic_requests_or_mcp_types():
    out = _fresh(
        "import json, sys, mcpsync\n"
        "dir(mcpsync); mcpsync.__all__; mcpsync.MCPSyncError\n"
        "heavy = ('pydantic', 'pydantic_core', 'requests', 'urllib3', 'mcp_types', 'mcp')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    assert out == []


# -- no module of the package re-classes a module or writes sys.modules -------------------


def _is_sys_modules(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "modules"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def foreign_state_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` for each write to ``sys.modules`` or to an object's ``__class__``."""
    found: list[tuple[int, str]] = []
    mutators = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, ast.Subscript) and _is_sys_modules(part.value):
                    found.append((part.lineno, "sys.modules[...] in an assignment target"))
                if isinstance(part, ast.Attribute) and part.attr == "__class__":
                    found.append((part.lineno, "__class__ assigned"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in mutators and _is_sys_modules(node.func.value):
                found.append((node.lineno, f"sys.modules.{node.func.attr}()"))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "__class__"
        ):
            found.append((node.lineno, "setattr(..., '__class__', ...)"))
    return found


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import sys\nsys.modules[__name__].__class__ = X", 2),  # the smoke/modern.py shape
        ("import sys\nsys.modules['x'] = m", 1),
        ("import sys\ndel sys.modules['x']", 1),
        ("import sys\nsys.modules.setdefault('x', m)", 1),
        ("setattr(module, '__class__', X)", 1),
        ("import sys\nm = sys.modules['x']\nx = m.__class__", 0),  # reading is fine
    ],
)
def test_the_static_check_sees_each_shape(source, expected):
    assert len(foreign_state_writes(ast.parse(source))) == expected


def test_no_module_reclasses_a_module_or_writes_sys_modules():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [
            f"{path.relative_to(PACKAGE)}:{line}: {what}"
            for line, what in foreign_state_writes(tree)
        ]
    assert found == []
