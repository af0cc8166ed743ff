"""The README's examples run as written.

The first Python example runs in this process (and leaves nothing behind); every block the
README marks with ``<!-- runnable: ... -->`` on the line before its fence runs as a fresh
``python`` or ``bash -euo pipefail`` process, with this venv's ``bin`` first on ``PATH``
(what an activated venv gives a reader), from the repository root.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
MARKER = "<!-- runnable:"
BLOCK = re.compile(r"^(<!-- runnable:[^\n]*-->\n)?```(\w+)\n(.*?)^```", re.S | re.M)


# a failing line must not leave the example's detached server behind (it is killed by pid)
STOP_DETACHED = 'trap \'[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true\' EXIT\n'


def runnable_blocks() -> list[tuple[int, str, str]]:
    """(line, language, code) of every block marked runnable."""
    out = []
    for m in BLOCK.finditer(README):
        if m.group(1):
            out.append((README[: m.start()].count("\n") + 2, m.group(2), m.group(3)))
    return out


# Where the README, docs/ and notebooks/README.md send a reader for the tests of a feature.
TEST_PATH = re.compile(r"\btests/[\w/]*?test_\w+\.py")
DOCS = [REPO / "README.md", REPO / "notebooks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_the_test_files_the_docs_name_exist():
    cited = {
        (doc.relative_to(REPO).as_posix(), path)
        for doc in DOCS
        for path in TEST_PATH.findall(doc.read_text(encoding="utf-8"))
    }
    assert len(cited) >= 20, "the README and docs/ stopped naming test files?"
    missing = sorted((doc, path) for doc, path in cited if not (REPO / path).is_file())
    assert not missing, f"test files named but not there (moved? tests/README.md): {missing}"


def test_readme_quickstart_runs(no_leaks, capsys):
    first = re.findall(r"```python\n(.*?)```", README, re.S)[0]
    exec(compile(first, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "echo" in out and "hi" in out


def test_marked_blocks_are_found():
    blocks = runnable_blocks()
    assert len(blocks) >= 2, "the README's runnable markers went missing"
    assert all(lang in ("python", "bash") for _, lang, _ in blocks), blocks
    assert README.count(MARKER) == len(blocks), "a marker that is not right before a fence"


@pytest.mark.parametrize(
    "line,lang,code", runnable_blocks(), ids=[f"line{b[0]}" for b in runnable_blocks()]
)
def test_runnable_block(line: int, lang: str, code: str):
    env = {
        **os.environ,
        "PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
    }
    argv = (
        [sys.executable, "-c", code]
        if lang == "python"
        else ["bash", "-euo", "pipefail", "-c", STOP_DETACHED + code]
    )
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert p.returncode == 0, f"README.md line {line} ({lang}) failed:\n{p.stdout}\n{p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
