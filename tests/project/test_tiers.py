"""The tier table (tests/tiers.py): its rules name files and tests that exist, its markers are
registered, and the conftest applies them before ``-m`` selects."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import tiers

pytest_plugins = ["pytester"]

TESTS = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = None


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("test_")
    }


def test_every_rule_names_a_file_and_tests_that_exist() -> None:
    names = {p.name: _test_names(p) for p in TESTS.rglob("test_*.py")}
    stale = tiers.unmatched(names, names)
    assert not stale, f"rules in tests/tiers.py that match no test (renamed or deleted?): {stale}"


def test_test_files_have_unique_names_in_folders_that_are_not_packages() -> None:
    # The rules name files by name alone, and pytest's default ("prepend") import mode imports
    # each test file as a top-level module named after it: two files of one name would clash.
    # An __init__.py in a test folder would change the module names (and the sys.path entries
    # the support modules are found through): tests/README.md.
    files = sorted(TESTS.rglob("test_*.py"))
    seen: dict[str, list[str]] = {}
    for path in files:
        seen.setdefault(path.name, []).append(path.relative_to(TESTS).as_posix())
    assert not {n: p for n, p in seen.items() if len(p) > 1}, "test files of one name"
    packages = sorted({p.parent.name for p in files if (p.parent / "__init__.py").exists()})
    assert not packages, f"test folders with an __init__.py: {packages}"
    assert all(p.parent != TESTS for p in files), (
        "a test file at tests/ top level (tests/README.md)"
    )


def test_a_stale_rule_is_reported() -> None:
    rules = (
        ("test_a.py", ("slow",)),
        ("test_a.py::test_gone*", ("timing",)),
        ("test_b.py", ("fork",)),
    )
    assert tiers.unmatched(["test_a.py"], {"test_a.py": {"test_here"}}, rules) == [
        "test_a.py::test_gone*",
        "test_b.py",
    ]


def test_markers_are_the_union_of_matching_rules_without_parameters() -> None:
    rules = (("test_a.py", ("real_server",)), ("test_a.py::test_bound_*", ("timing",)))
    assert tiers.markers_for("test_a.py", "test_bound_x[stdio-1]", rules) == {
        "real_server",
        "timing",
    }
    assert tiers.markers_for("test_a.py", "test_other", rules) == {"real_server"}
    assert tiers.markers_for("test_b.py", "test_bound_x", rules) == set()


@pytest.mark.skipif(tomllib is None, reason="tomllib: Python 3.11+")
def test_every_marker_the_table_gives_is_registered() -> None:
    config = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    registered = {m.split(":", 1)[0] for m in config["tool"]["pytest"]["ini_options"]["markers"]}
    used = {m for _, markers in tiers.RULES for m in markers} | set(tiers.SPAWNING)
    assert used <= registered, used - registered
    assert "--strict-markers" in config["tool"]["pytest"]["ini_options"]["addopts"]


def test_the_table_reaches_collected_items(request: pytest.FixtureRequest) -> None:
    # This very test is in no rule: it carries none of the tier markers.
    own = {m.name for m in request.node.iter_markers()}
    assert not own & {"real_server", "stress", "fork", "browser", "slow", "timing"}, own


def _inner_run(pytester: pytest.Pytester, files: dict[str, str], *args: str) -> pytest.RunResult:
    """An inner pytest run, in a fresh process, with this conftest and table (and no report
    file: the spawn check is what is tested)."""
    pytester.makeconftest((TESTS / "conftest.py").read_text(encoding="utf-8"))
    (pytester.path / "tiers.py").write_text((TESTS / "tiers.py").read_text(encoding="utf-8"))
    config = (TESTS.parent / "pyproject.toml").read_text(encoding="utf-8")
    pytester.makefile(".toml", pyproject=config[config.index("[tool.pytest.ini_options]") :])
    pytester.makepyfile(**files)
    with pytest.MonkeyPatch.context() as env:
        env.delenv("MCPSYNC_TIERS_REPORT", raising=False)
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:mcpsync", *args)


SPAWN = (
    "import subprocess, sys\ndef test_spawns():\n    subprocess.run([sys.executable, '-c', ''])\n"
)


def test_the_quick_tier_runs_unit_tests_and_no_server_test_subprocess(
    pytester: pytest.Pytester,
) -> None:
    files = {"test_unit_only": "def test_c():\n    pass\n", "test_cli": "def test_d():\n    pass\n"}
    result = _inner_run(pytester, files, "-m", tiers.QUICK, "-v")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*test_unit_only.py::test_c PASSED*"])


def test_a_test_that_starts_a_process_without_a_rule_fails_subprocess(
    pytester: pytest.Pytester,
) -> None:
    result = _inner_run(pytester, {"test_unit_only": SPAWN, "test_cli": SPAWN})
    result.assert_outcomes(passed=2, errors=1)  # the teardown report of the unmarked one fails
    result.stdout.fnmatch_lines(["*test_unit_only.py::test_spawns started a process but has none*"])
