"""What a user gets from ``pip install``: the built wheel and sdist hold every package, and
the declared dependencies are exactly the third-party imports of the package.

The wheel and sdist are built with ``python -m build`` (sdist first, the wheel from the
sdist, as pip does) from a copy of the checkout's ``mcpsync/`` and top-level files, in a
temporary directory. Installing the wheel outside the checkout and running it is
``scripts/test-wheel`` (the full ``scripts/test`` run).
"""

from __future__ import annotations

import ast
import configparser
import functools
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Imports that are not install_requires: imported lazily where a feature needs them, each
# with the extra that provides it, or None: whoever uses the feature has it already.
OPTIONAL_IMPORTS: dict[str, str | None] = {
    "IPython": None,  # display helpers: only inside a notebook / IPython, which has it
    "jwt": "jwt",  # private_key_jwt client authentication
    "cryptography": "jwt",  # DPoP key pairs and proofs (mcpsync.auth.dpop)
    "pytest": None,  # mcpsync.testing.pytest_plugin: loaded by pytest itself
    "mcp": None,  # mcpsync.testing.serve(app): the caller passes its own SDK server object
    "anyio": None,  # ... whose SDK brings anyio
    "fastmcp": None,  # ... or its own FastMCP server object
    "langchain_core": "langchain",  # mcpsync.adapters.langchain
    "distributed": "dask",  # mcpsync smoke --dask
    "anywidget": "apps",  # mcpsync.apps.AppView
    "traitlets": "apps",  # ... its synced state
    "ipywidgets": "notebook",  # mcpsync.elicitation.NotebookElicitation
    "keyring": "keyring",  # mcpsync.auth.keyring_store.KeyringTokenStore
    "opentelemetry": "otel",  # mcpsync.telemetry (the API; the SDK is the application's)
}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(line: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    assert match, line
    return _canonical(match.group(1))


def _setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _lines(value: str) -> list[str]:
    return [s.strip() for s in value.splitlines() if s.strip() and not s.strip().startswith("#")]


def install_requires() -> list[str]:
    return _lines(_setup_cfg()["options"]["install_requires"])


def source_packages(root: Path) -> dict[str, set[str]]:
    """Each folder under ``root/mcpsync`` that holds ``.py`` files -> those files (relative)."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / "mcpsync").rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root)
        found.setdefault(rel.parent.as_posix(), set()).add(rel.as_posix())
    return found


def missing_from(source: dict[str, set[str]], names: set[str]) -> list[str]:
    """Folders whose ``__init__.py`` or any ``.py`` file is not among ``names`` (archive paths)."""
    missing = []
    for folder, files in source.items():
        if f"{folder}/__init__.py" not in names or not files <= names:
            missing.append(
                f"{folder} (absent: {sorted(files | {f'{folder}/__init__.py'} - names)})"
            )
    return missing


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return set(zf.namelist())


def sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as tf:
        names = tf.getnames()
    top = names[0].split("/", 1)[0]  # mcpsync-<version>/...
    return {n.split("/", 1)[1] for n in names if n.startswith(top + "/") and "/" in n}


def copy_checkout(dest: Path) -> Path:
    """The files a build reads: every top-level file and the ``mcpsync`` folder."""
    dest.mkdir()
    for item in ROOT.iterdir():
        if item.is_file():
            shutil.copy2(item, dest / item.name)
    shutil.copytree(
        ROOT / "mcpsync", dest / "mcpsync", ignore=shutil.ignore_patterns("__pycache__")
    )
    return dest


def build(src: Path, out: Path, *only: str) -> tuple[Path, Path | None]:
    """``python -m build`` (sdist, then the wheel from it; or ``only="--wheel"``) into ``out``."""
    proc = subprocess.run(
        [sys.executable, "-m", "build", *only, "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"python -m build failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    (wheel,) = out.glob("*.whl")
    sdists = list(out.glob("*.tar.gz"))
    return wheel, (sdists[0] if sdists else None)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    base = tmp_path_factory.mktemp("packaging")
    src = copy_checkout(base / "src")
    wheel, sdist = build(src, base / "dist")
    assert sdist is not None
    return src, wheel, sdist


def test_every_folder_with_python_files_is_a_package_in_the_wheel(built):
    src, wheel, _ = built
    packages = source_packages(src)
    assert {"mcpsync", "mcpsync/transports", "mcpsync/auth"} <= set(packages)
    assert missing_from(packages, wheel_names(wheel)) == []


def test_every_folder_with_python_files_is_in_the_sdist(built):
    src, _, sdist = built
    names = sdist_names(sdist)
    assert missing_from(source_packages(src), names) == []
    assert {"setup.cfg", "pyproject.toml", "README.md"} <= names


def test_the_wheel_ships_py_typed_and_the_console_script(built):
    _, wheel, _ = built
    names = wheel_names(wheel)
    assert "mcpsync/py.typed" in names
    front_end = {"mcpsync/apps/app_view.js", "mcpsync/apps/app_view.css"}  # AppView
    assert front_end <= names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as zf:
        text = zf.read(entry_points).decode()
    assert re.search(r"^mcpsync = mcpsync\.cli:main$", text, re.M), text


def test_the_check_fails_for_a_folder_without_init(built, tmp_path):
    """The check above can fail: a copy without ``transports/__init__.py`` is caught."""
    src = copy_checkout(tmp_path / "src")
    (src / "mcpsync" / "transports" / "__init__.py").unlink()
    wheel, _ = build(src, tmp_path / "dist", "--wheel")
    missing = missing_from(source_packages(src), wheel_names(wheel))
    assert [m for m in missing if m.startswith("mcpsync/transports ")], missing


def test_the_wheel_requires_exactly_setup_cfg_install_requires(built):
    _, wheel, _ = built
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(meta).decode()
    required = {
        _requirement_name(line.split(":", 1)[1])
        for line in text.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    }
    assert required == {_requirement_name(r) for r in install_requires()}


# -- honest dependencies -------------------------------------------------------------------


def third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> files of ``mcpsync/`` importing it (not stdlib, not relative)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "mcpsync").rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".", 1)[0]
                if top != "mcpsync" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(path.relative_to(ROOT).as_posix())
    return found


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())  # scans every installed dist


def _distributions_of(module: str) -> set[str]:
    return {_canonical(d) for d in _packages_distributions().get(module, [])}


def test_every_third_party_import_is_declared():
    declared = {_requirement_name(r) for r in install_requires()}
    extras = _setup_cfg()["options.extras_require"]
    undeclared = {}
    for module, files in third_party_imports().items():
        if module in OPTIONAL_IMPORTS:
            extra = OPTIONAL_IMPORTS[module]
            if extra is not None:
                in_extra = {_requirement_name(r) for r in _lines(extras[extra])}
                assert _distributions_of(module) & in_extra, (module, extra)
            continue
        dists = _distributions_of(module)
        if not dists & declared:
            undeclared[module] = sorted(files)
    assert undeclared == {}, f"imported but not in install_requires: {undeclared}"


def test_every_install_requires_entry_is_imported_and_has_a_range():
    imported: set[str] = set()
    for module in third_party_imports():
        imported |= _distributions_of(module)
    for requirement in install_requires():
        name = _requirement_name(requirement)
        assert name in imported, f"{name} is declared but nothing in mcpsync/ imports it"
        assert ">=" in requirement and "<" in requirement.replace("<=", ""), (
            f"{requirement}: want a compatible range (a tested lower bound and a major cap)"
        )
        assert "==" not in requirement, f"{requirement}: an exact pin clashes with users' packages"


def test_the_lowest_setup_pins_every_lower_bound():
    """``scripts/lowest-requirements`` (what ``scripts/test-py310`` installs) pins each
    install_requires entry at its lower bound, and an mcp SDK that accepts that mcp-types."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lowest-requirements")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    pins = dict(line.split("==", 1) for line in proc.stdout.split())
    for requirement in install_requires():
        lower = re.search(r">=\s*([0-9][0-9.]*)", requirement)
        assert lower, requirement
        assert pins.get(_requirement_name(requirement)) == lower.group(1), (requirement, pins)
    assert "mcp" in pins and pins["mcp"].split(".")[0] == pins["mcp-types"].split(".")[0]
