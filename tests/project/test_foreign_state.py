"""mcpsync changes no state it does not own (issue 27, point 1).

A session in a fresh interpreter writes nothing into the user's folders and leaves the
import system, the loaded modules and pydantic as a plain ``import mcp_types`` leaves them;
and no module of the package contains the means to do otherwise (``marshal``, writes to
``sys.modules``, a module's ``__class__`` swapped, an attribute of another library
rebound).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcpsync

PACKAGE = Path(mcpsync.__file__).parent

SESSION = """
import importlib, json, os, sys, types
import mcpsync

with mcpsync.Session.connect([sys.executable, "-m", "mcpsync.demo_server"]) as s:
    names = [t.name for t in s.list_tools()]
    result = s.call_tool("echo", {"message": "hello"})
    import mcp_types
    assert type(result) is mcp_types.CallToolResult, type(result)
    assert result.content[0].text == "hello"

import pydantic
metadata = sys.modules.get("importlib.metadata")
real_metadata = os.path.join(os.path.dirname(importlib.__file__), "metadata", "__init__.py")
rebuild = pydantic.BaseModel.__dict__["model_rebuild"]
watched = ("mcpsync", "mcp_types", "pydantic", "pydantic_core", "importlib")
print(json.dumps({
    "tools": names,
    # a module that is not a plain module: re-classed (lazily run statements), or a stand-in
    "odd_modules": sorted(
        name for name, module in list(sys.modules.items())
        if name.split(".")[0] in watched and module is not None
        and type(module) is not types.ModuleType
    ),
    "metadata_file": getattr(metadata, "__file__", None),
    "real_metadata_file": real_metadata,
    "rebuild": [type(rebuild).__name__, rebuild.__func__.__module__,
                rebuild.__func__.__qualname__],
}))
"""


def test_a_first_session_writes_nothing_and_leaves_foreign_state_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cache = home / ".cache"
    cache.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(cache), USERPROFILE=str(home))
    env["LOCALAPPDATA"] = str(cache)  # Windows: the cache folder's base
    done = subprocess.run(
        [sys.executable, "-c", SESSION],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "echo" in out["tools"]  # the session really worked
    created = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert created == [".cache"], f"a first session created {created} under $HOME"
    assert out["odd_modules"] == []
    assert out["metadata_file"] is not None  # pydantic imports it: loaded, and the real one
    assert os.path.samefile(out["metadata_file"], out["real_metadata_file"])
    assert out["rebuild"] == ["classmethod", "pydantic.main", "BaseModel.model_rebuild"]


# -- static: no module of the package holds the means to change foreign state ----------


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _foreign_names(tree: ast.Module) -> dict[str, str]:
    """Names bound in the module by an import of another library (or the stdlib)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("mcpsync"):
                    names[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith("mcpsync"):
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        found: list[ast.AST] = []
        for target in node.targets:
            found += target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        return found
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def foreign_state_findings(path: Path, source: str) -> list[str]:
    """What in ``source`` changes state mcpsync does not own, one line each."""
    tree = ast.parse(source, str(path))
    foreign = _foreign_names(tree)
    found: list[str] = []

    def say(node: ast.AST, what: str) -> None:
        found.append(f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module]
            if any(m == "marshal" or m.startswith("marshal.") for m in modules):
                say(node, "imports marshal")
        if isinstance(node, ast.Call):
            func = _dotted(node.func)
            if func in ("sys.modules.update", "sys.modules.setdefault", "sys.modules.__setitem__"):
                say(node, f"calls {func}")
            if (
                func in ("setattr", "object.__setattr__")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == "__class__"
            ):
                say(node, "sets __class__ with setattr")
        for target in _targets(node):
            if isinstance(target, ast.Subscript) and _dotted(target.value) == "sys.modules":
                say(target, "writes sys.modules[...]")
            elif isinstance(target, ast.Attribute):
                if target.attr == "__class__":
                    say(target, f"assigns {ast.unparse(target)}: a re-classed object")
                    continue
                root = _dotted(target)
                if root is not None and root.split(".")[0] in foreign:
                    say(target, f"rebinds {root} (an attribute of another library)")
    return found


#: (file, what it rebinds) the check lets through, each with why it is the module's to change
ALLOWED = {
    # the command-line program's entry point owns its process: when its stdout went away
    # (``mcpsync ... | head``) it points sys.stdout at os.devnull so the flush at exit is quiet
    ("mcpsync/cli/__init__.py", "rebinds sys.stdout"),
}


def _package_findings() -> list[str]:
    findings: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for found in foreign_state_findings(path, path.read_text(encoding="utf-8")):
            where, _, what = found.partition(": ")
            if not any(where.startswith(f + ":") and what.startswith(w) for f, w in ALLOWED):
                findings.append(found)
    return findings


def test_no_module_of_the_package_changes_foreign_state() -> None:
    findings = _package_findings()
    assert not findings, "\n".join(findings)


@pytest.mark.parametrize(
    "snippet, what",
    [
        ("import marshal", "imports marshal"),
        ("from marshal import loads", "imports marshal"),
        ("import sys\nsys.modules['x'] = object()", "writes sys.modules[...]"),
        ("import sys\nsys.modules.update(x=1)", "calls sys.modules.update"),
        ("import sys\nsys.modules[__name__].__class__ = type", "re-classed"),
        ("import types\nm = types\nm.__class__ = object", "re-classed"),
        ("setattr(m, '__class__', object)", "sets __class__ with setattr"),
        ("from pydantic import BaseModel\nBaseModel.model_rebuild = None", "rebinds"),
        ("import importlib.metadata as md\nmd.version = len", "rebinds md.version"),
        ("import threading\nthreading.Thread.start = len", "rebinds threading"),
    ],
)
def test_the_static_check_sees_each_kind(snippet: str, what: str) -> None:
    """The check over the package would see each of these (so its silence means something)."""
    findings = foreign_state_findings(PACKAGE / "_probe.py", snippet)
    assert len(findings) == 1 and what in findings[0], findings


def test_the_static_check_leaves_own_state_alone() -> None:
    own = (
        "import threading\n"
        "from . import jsonrpc\n"
        "_lock = threading.Lock()\n"
        "class A:\n"
        "    def __init__(self):\n"
        "        self.thread = threading.Thread(target=print)\n"
        "        self.x = 1\n"
        "jsonrpc.hook = None\n"  # our own module: ours to set
    )
    assert foreign_state_findings(PACKAGE / "_probe.py", own) == []
