"""The package's shape, as ratchets: no import cycle, a README per package.

The import graph comes from scripts/import-graph (every import in every module's AST: module
level, inside functions, under ``TYPE_CHECKING``, relative ones resolved). Each ``KNOWN_*`` set
lists what is still wrong today; it may only shrink. A check fails when something new goes
wrong, and also when a ``KNOWN_*`` entry is no longer true (then delete it from the set), so
the sets empty themselves as the layering work lands.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "mcpsync"

# Import cycles (strongly connected components) that exist today. Each entry is a cycle's
# exact set of modules: a cycle that grows, shrinks or appears fails the test.
KNOWN_CYCLES: set[frozenset[str]] = set()

# Package folders (relative to mcpsync/) without a README.md today.
KNOWN_NO_README: set[str] = set()


def _load_graph_tool() -> ModuleType:
    path = ROOT / "scripts" / "import-graph"
    loader = SourceFileLoader("mcpsync_import_graph", str(path))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(loader.name, module)
    loader.exec_module(module)
    return module


tool = _load_graph_tool()


def _describe(component: frozenset[str], edges: dict[str, set[str]]) -> str:
    return " -> ".join(tool.cycle_path(sorted(component), edges))


def test_no_new_import_cycle() -> None:
    edges = tool.graph(ROOT)
    found = {frozenset(c) for c in tool.cycles(edges)}
    new = found - KNOWN_CYCLES
    gone = KNOWN_CYCLES - found
    problems = [f"new import cycle: {_describe(c, edges)}" for c in sorted(new, key=sorted)]
    problems += [
        f"KNOWN_CYCLES entry no longer a cycle as listed (update or delete it): {sorted(c)}"
        for c in sorted(gone, key=sorted)
    ]
    assert not problems, "\n".join(problems)


def test_every_package_folder_has_a_readme() -> None:
    packages = {
        init.parent.relative_to(PACKAGE_DIR).as_posix() for init in PACKAGE_DIR.rglob("__init__.py")
    }
    missing = {p for p in packages if not (PACKAGE_DIR / p / "README.md").is_file()}
    problems = [
        f"{(Path('mcpsync') / p).as_posix()}/README.md missing: say what belongs there and what"
        " it may import"
        for p in sorted(missing - KNOWN_NO_README)
    ]
    problems += [
        f"KNOWN_NO_README entry {p!r} has a README.md now (or is gone): delete it"
        for p in sorted(KNOWN_NO_README - missing)
    ]
    assert not problems, "\n".join(problems)


# The checker itself: each rule must be able to fail.


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "mcpsync" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_graph_counts_lazy_type_checking_and_relative_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "from .a import A\n",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.b import B\n",
            "sub/__init__.py": "",
            "sub/b.py": "def f():\n    from ..c import C\n    import mcpsync.d\n",
            "c.py": "from . import d\n",
            "d.py": "from .. import nothing_outside\nimport json\n",
        },
    )
    edges = tool.graph(root)
    assert edges["mcpsync"] == {"mcpsync.a"}
    assert edges["mcpsync.a"] == {"mcpsync.sub.b"}
    assert edges["mcpsync.sub.b"] == {"mcpsync.c", "mcpsync.d"}
    assert edges["mcpsync.c"] == {"mcpsync.d"}
    assert edges["mcpsync.d"] == set()
    assert tool.cycles(edges) == []


def test_graph_finds_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "from ._version import v\n",
            "_version.py": "v = 1\n",
            "x.py": "from .y import Y\n",
            "y.py": "from .z import Z\n",
            "z.py": "def late():\n    from . import x\n",
        },
    )
    edges = tool.graph(root)
    assert tool.cycles(edges) == [["mcpsync.x", "mcpsync.y", "mcpsync.z"]]
    path = tool.cycle_path(["mcpsync.x", "mcpsync.y", "mcpsync.z"], edges)
    assert path == ["mcpsync.x", "mcpsync.y", "mcpsync.z", "mcpsync.x"]


def test_the_package_root_holds_at_most_ten_modules() -> None:
    # issue 27: every other module lives in a subpackage named after its step of the journey
    modules = sorted(p.name for p in PACKAGE_DIR.glob("*.py"))
    assert len(modules) <= 10, f"{len(modules)} modules at the root: {modules}"
