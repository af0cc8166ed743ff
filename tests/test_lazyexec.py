"""Lazily run module statements (``mcpsync._lazyexec``): a name's statement runs on its
first use with what it needs, in the file's order; ``mcp_types`` loaded so is the same
as a plain import (every model's schema), and sources it cannot split import as usual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from mcpsync import _lazyexec

SOURCE = '''
"""A module to load lazily."""

from __future__ import annotations

import json, os.path
from dataclasses import dataclass, field

__all__ = ["Leaf", "Tree", "Node", "dump"]
RUN: list = []
RUN.append("RUN")

Alias = int | str
RUN.append("Alias")


@dataclass
class Leaf:
    value: Alias = 0
    RUN.append("Leaf")


@dataclass
class Tree:
    left: Node | None = None  # a forward reference: Node is bound further down
    leaves: list["Leaf"] = field(default_factory=list)
    RUN.append("Tree")


Node = Tree
RUN.append("Node")
"""the docstring of Node"""


class Apart:
    RUN.append("Apart")


def dump(x) -> str:
    return json.dumps(x)

RUN.append("dump")
setattr(Tree, "touched", True)
print("loaded")  # mentions no name of the module: runs at load, as in an import
'''


@pytest.fixture()
def lazy_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A package ``lazysrc_<n>`` on sys.path whose ``mod`` is ``SOURCE``; the plan cache in
    ``tmp_path`` (nothing written beside mcpsync's bytecode)."""
    counter = lazy_source.count = getattr(lazy_source, "count", 0) + 1
    package = f"lazysrc_{counter}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "mod.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    cache = tmp_path / "cache"
    monkeypatch.setattr(_lazyexec, "_cache_path", lambda name, origin: str(cache / f"{name}.bin"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield f"{package}.mod", cache
    for name in [n for n in sys.modules if n.startswith(package)]:
        del sys.modules[name]


def _ran(module) -> list[str]:
    return list(module.__dict__["RUN"])


def test_a_name_runs_its_statements_and_what_they_need_in_file_order(lazy_source, capsys):
    name, _ = lazy_source
    module = _lazyexec.load(name)
    assert capsys.readouterr().out == "loaded\n"
    assert isinstance(module, _lazyexec.LazyModule) and sys.modules[name] is module
    assert module.__doc__ == "A module to load lazily."
    assert "Leaf" not in vars(module) and "RUN" not in vars(module)  # nothing run yet
    assert module.__all__ == ["Leaf", "Tree", "Node", "dump"] and "RUN" not in vars(module)
    leaf = module.Leaf
    assert _ran(module) == ["RUN", "Alias", "Leaf"]  # Leaf mentions Alias and RUN
    assert leaf(value=3).value == 3 and module.Leaf is leaf
    tree = module.Tree  # needs Node (a forward reference), which needs Tree: a cycle
    assert _ran(module) == ["RUN", "Alias", "Leaf", "Tree", "Node"]
    assert module.Node is tree and tree.touched is True  # the bare statement ran with Tree
    assert "Apart" not in vars(module) and "dump" not in vars(module)
    assert module.dump({"a": 1}) == '{"a": 1}'
    assert module.__annotations__ == {"RUN": "list"}  # as a plain import records it
    assert set(dir(module)) >= {"Apart", "Leaf", "Tree", "Node", "dump", "json", "os", "field"}
    assert "_lazy_plan" not in dir(module)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        _ = module.Nope
    assert not hasattr(module, "Nope")


def test_the_plan_is_kept_and_made_again_when_the_source_changes(lazy_source):
    name, cache = lazy_source
    module = _lazyexec.load(name)
    assert module is not None and (cache / f"{name}.bin").exists()
    made: list[str] = []
    real = _lazyexec.make_plan

    def counting(source: str, filename: str):
        made.append(filename)
        return real(source, filename)

    import unittest.mock

    with unittest.mock.patch.object(_lazyexec, "make_plan", counting):
        del sys.modules[name]
        again = _lazyexec.load(name)
        assert again is not None and again.Apart and made == []  # read from the file
        path = Path(again.__file__)
        path.write_text(SOURCE + "\nEXTRA = 1\n")
        del sys.modules[name]
        changed = _lazyexec.load(name)
        assert changed is not None and changed.EXTRA == 1 and made == [str(path)]


def test_nothing_is_written_when_bytecode_is_not(lazy_source, monkeypatch):
    name, cache = lazy_source
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    module = _lazyexec.load(name)
    assert module is not None and module.Leaf and not cache.exists()


def test_an_unwritable_cache_folder_only_costs_the_plan(lazy_source, monkeypatch, tmp_path):
    name, _ = lazy_source
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(_lazyexec, "_cache_path", lambda n, o: str(blocker / "sub" / "x.bin"))
    module = _lazyexec.load(name)
    assert module is not None and module.Tree.touched


@pytest.mark.parametrize(
    "source",
    [
        "import sys\nif sys.platform:\n    X = 1\n",  # an if at top level
        "X = 1\nX = 2\n",  # a name bound twice
        "from os import *\n",  # a star import
        "a.b = 1\n",  # a target that is not a plain name
        "try:\n    import json\nexcept ImportError:\n    json = None\n",
    ],
)
def test_sources_it_cannot_split_are_imported_as_usual(source, tmp_path, monkeypatch):
    assert _lazyexec.make_plan(source, "x.py") is None
    (tmp_path / "plainsrc.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_lazyexec, "_cache_path", lambda name, origin: None)
    try:
        assert _lazyexec.load("plainsrc") is None and "plainsrc" not in sys.modules
    finally:
        sys.modules.pop("plainsrc", None)


def test_a_module_imported_meanwhile_is_kept(lazy_source):
    name, _ = lazy_source
    import importlib

    plain = importlib.import_module(name)
    del sys.modules[name]
    real_from_spec = _lazyexec.importlib.util.module_from_spec

    def racing(spec):  # another thread imports the module while load() prepares its own
        created = real_from_spec(spec)
        sys.modules[name] = plain
        return created

    import unittest.mock

    with unittest.mock.patch.object(_lazyexec.importlib.util, "module_from_spec", racing):
        assert _lazyexec.load(name) is None
    assert sys.modules[name] is plain


def test_threads_that_need_names_at_once_get_one_object_each(lazy_source):
    name, _ = lazy_source
    module = _lazyexec.load(name)
    barrier = threading.Barrier(6)
    got: list[tuple[object, object]] = []

    def use() -> None:
        barrier.wait(30)
        got.append((module.Tree, module.Leaf))

    threads = [threading.Thread(target=use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(got) == 6 and len(set(got)) == 1
    assert sorted(_ran(module)) == sorted(["RUN", "Alias", "Leaf", "Tree", "Node"])


def test_a_statement_that_fails_raises_for_every_caller_and_runs_again_once_it_can(
    tmp_path, monkeypatch
):
    (tmp_path / "failsrc.py").write_text(
        "import os\nBad = os.environ['LAZY_TEST_VALUE']\nGood = 1\nUses = [Bad]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_lazyexec, "_cache_path", lambda name, origin: None)
    monkeypatch.delenv("LAZY_TEST_VALUE", raising=False)
    try:
        module = _lazyexec.load("failsrc")
        assert module is not None
        for _ in range(2):  # each caller sees the statement's own error, not a missing name
            with pytest.raises(KeyError, match="LAZY_TEST_VALUE"):
                _ = module.Bad
            with pytest.raises(KeyError, match="LAZY_TEST_VALUE"):
                _ = module.Uses
        assert module.Good == 1
        monkeypatch.setenv("LAZY_TEST_VALUE", "now")  # what it needed is there: it runs
        assert module.Uses == ["now"] and module.Bad == "now"
    finally:
        sys.modules.pop("failsrc", None)


def test_a_ctrl_c_inside_a_statement_leaves_it_to_run_again(lazy_source, monkeypatch):
    name, _ = lazy_source
    module = _lazyexec.load(name)
    assert module is not None
    calls = []
    real_exec = exec

    def interrupted_once(code, namespace):  # a SIGINT landing while Tree's class is made
        if "Tree" in code.co_names and not calls:
            calls.append(code)
            raise KeyboardInterrupt
        return real_exec(code, namespace)

    monkeypatch.setattr(_lazyexec, "exec", interrupted_once, raising=False)
    with pytest.raises(KeyboardInterrupt):
        _ = module.Tree
    assert "Tree" not in vars(module)
    tree = module.Tree  # made whole on the next use
    assert module.Node is tree and tree.touched is True and calls


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


SCHEMAS = """
import hashlib, json, sys
if sys.argv[1] == "lazy":
    from mcpsync import _lazyexec, _typesimport
    module = _typesimport.import_types()
    assert isinstance(module, _lazyexec.LazyModule), type(module)
    assert isinstance(sys.modules["mcp_types._types"], _lazyexec.LazyModule)
else:
    import mcp_types as module
from pydantic import BaseModel, TypeAdapter
import mcp_types._types as types_module
out = {}
for name in sorted(module.__all__):  # one order for the package's names ...
    value = getattr(module, name)
    if isinstance(value, type) and issubclass(value, BaseModel):
        out[name] = value.model_json_schema(mode="validation")
for name in sorted(dir(types_module), reverse=True):  # ... another for _types' own
    value = getattr(types_module, name)
    if isinstance(value, TypeAdapter):
        out["adapter " + name] = value.json_schema()
print(json.dumps([len(out), hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()]))
"""


def test_mcp_types_loaded_lazily_has_every_schema_of_a_plain_import():
    lazy = json.loads(_run(f"import sys; sys.argv[1:] = ['lazy']\n{SCHEMAS}"))
    plain = json.loads(_run(f"import sys; sys.argv[1:] = ['plain']\n{SCHEMAS}"))
    assert lazy == plain and lazy[0] > 150


FIRST_RESULT = """
import sys
from mcpsync import _typed, _lazyexec
_typed.warm()
types_module = sys.modules["mcp_types._types"]
assert isinstance(types_module, _lazyexec.LazyModule)
made = sorted(n for n, v in vars(types_module).items() if isinstance(v, type))
# the first result's graph (and the bases it needs), not the ~155 classes of the module
assert "CallToolResult" in made and "TextContent" in made and len(made) < 40, made
assert "CreateMessageRequest" not in made and "pydantic.networks" not in sys.modules
import mcp_types
assert mcp_types.CreateMessageRequest.__name__ == "CreateMessageRequest"  # made on use
print("ok")
"""


def test_the_first_result_makes_only_the_classes_it_needs():
    assert _run(FIRST_RESULT).strip() == "ok"


@pytest.mark.skipif(sys.platform == "win32", reason="no fork")
def test_a_fork_while_another_thread_runs_statements_leaves_the_child_working():
    code = """
    import os, sys, threading
    from mcpsync import _typesimport
    module = _typesimport.import_types()
    names = [n for n in module.__all__ if n[0].isupper()]
    go = threading.Event()

    def busy():
        go.set()
        for name in names[::2]:
            getattr(module, name)

    thread = threading.Thread(target=busy)
    thread.start()
    go.wait(30)
    pid = os.fork()  # waits for a run under way: the child's lock is a fresh one
    if pid == 0:
        try:
            made = [getattr(module, n) for n in names[1::2]]
            ok = module.CallToolResult(content=[]).content == [] and None not in made
            os._exit(0 if ok else 3)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(4)
    thread.join(30)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
    """
    assert _run(code).strip() == "child 0"


def test_the_plan_file_is_in_the_per_user_cache_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    one = _lazyexec._cache_path("mcp_types._types", "/venv-a/mcp_types/_types.py")
    other = _lazyexec._cache_path("mcp_types._types", "/venv-b/mcp_types/_types.py")
    assert one is not None and other is not None and one != other  # one per source path
    folder = tmp_path / "mcpsync" / "lazyplan"
    assert os.path.dirname(one) == str(folder)
    tag = sys.implementation.cache_tag
    assert os.path.basename(one).startswith(f"mcp_types._types.{tag}.")


def test_the_token_store_and_the_plans_share_one_cache_folder_rule(monkeypatch, tmp_path):
    from mcpsync._cachedir import user_cache_dir
    from mcpsync.auth.storage import default_store_path

    monkeypatch.delenv("MCPSYNC_TOKEN_STORE", raising=False)
    for platform, expected in [
        ("linux", str(tmp_path / "xdg" / "mcpsync")),
        ("darwin", os.path.expanduser("~/Library/Caches/mcpsync")),
        ("win32", str(tmp_path / "local" / "mcpsync" / "Cache")),
    ]:
        monkeypatch.setattr(sys, "platform", platform)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
        assert user_cache_dir() == expected
        assert str(default_store_path()) == os.path.join(expected, "tokens.json")
