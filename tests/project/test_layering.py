"""The package's shape, as ratchets: a README per package folder, a root of at most ten
modules. The layers and the absence of import cycles are import-linter contracts in
pyproject.toml (``lint-imports``, run by scripts/test); here, that they are declared and hold.

``KNOWN_NO_README`` lists what is still wrong today; it may only shrink. The check fails when
something new goes wrong, and also when an entry is no longer true (then delete it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIR = ROOT / "mcpsync"

# Package folders (relative to mcpsync/) without a README.md today.
KNOWN_NO_README: set[str] = set()


def test_the_import_contracts_declare_the_layers_and_forbid_cycles() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    kinds = {c["type"]: c for c in config["tool"]["importlinter"]["contracts"]}
    assert kinds["acyclic_siblings"]["ancestors"] == ["mcpsync"]
    declared = {
        name.strip().removeprefix("mcpsync.")
        for layer in kinds["layers"]["layers"]
        for name in layer.split("|")
    }
    top_level = {p.stem for p in PACKAGE_DIR.glob("*.py") if p.stem != "__init__"}
    top_level |= {p.parent.name for p in PACKAGE_DIR.glob("*/__init__.py")}
    top_level -= {"__main__"}
    assert top_level <= declared, f"not in any layer: {sorted(top_level - declared)}"


def test_lint_imports_finds_a_cycle_it_is_shown(tmp_path: Path) -> None:
    """The cycle contract can fail: a copy of the package with one import added."""
    lint = Path(sys.executable).parent / "lint-imports"
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    shutil.copytree(PACKAGE_DIR, tmp_path / "mcpsync", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with open(tmp_path / "mcpsync" / "auth" / "_util.py", "a", encoding="utf-8") as f:
        f.write("\nfrom . import oauth as _cycle  # noqa: E402\n")
    done = subprocess.run(
        [str(lint)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode != 0, done.stdout
    assert "No cycles are allowed in mcpsync.auth" in done.stdout, done.stdout


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


def test_the_package_root_holds_at_most_ten_modules() -> None:
    # issue 27: every other module lives in a subpackage named after its step of the journey
    modules = sorted(p.name for p in PACKAGE_DIR.glob("*.py"))
    assert len(modules) <= 10, f"{len(modules)} modules at the root: {modules}"
