"""Every example of the documentation runs as written (issue 30).

Each fenced ``python`` block of ``README.md`` and ``docs/*.md`` (and each ``bash`` block marked
``<!-- example: run -->``) runs as a fresh process against the bundled demo server, in an empty
folder, with this venv's ``bin`` first on ``PATH`` (what an activated venv gives a reader)
and without ``CI`` in its environment (a reader's machine).
A block marked ``<!-- example: pytest -->`` is a test module: it runs under
``pytest --mcp-config mcp.json`` beside an ``mcp.json`` holding the demo server. The marks:
``doc_blocks.py``. A failure names the page and the line of the block.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from doc_blocks import Block, all_blocks

RUN = [b for b in all_blocks() if b.runs]

DEMO_ENTRY = {"command": sys.executable, "args": ["-m", "mcpsync.demo_server"]}

# a failing line must not leave the example's detached server behind (it is killed by pid)
STOP_DETACHED = 'trap \'[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true\' EXIT\n'


def _argv(block: Block, folder: pathlib.Path) -> list[str]:
    if block.lang == "bash":
        return ["bash", "-euo", "pipefail", "-c", STOP_DETACHED + block.code]
    if block.mark == "pytest":  # a test module, beside an mcp.json holding the demo server
        (folder / "test_example.py").write_text(block.code)
        (folder / "mcp.json").write_text(json.dumps({"mcpServers": {"demo": DEMO_ENTRY}}))
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "--mcp-config", "mcp.json", "test_example.py"]  # fmt: skip
    return [sys.executable, "-c", block.code]


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_example(block: Block, tmp_path: pathlib.Path):
    env = {
        **os.environ,
        "PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ["PATH"],
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    # a reader's machine, not CI: with CI set, the pytest plugin only replays cassettes, and
    # the recorded-sessions example records them (its page says CI replays what was committed)
    env.pop("CI", None)
    p = subprocess.run(
        _argv(block, tmp_path), capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    where = (
        f"{block.page} line {block.line} ({block.lang}{', ' + block.mark if block.mark else ''})"
    )
    assert p.returncode == 0, f"the example at {where} failed:\n{p.stdout}\n{p.stderr}"
    assert "Traceback" not in p.stderr, f"the example at {where} printed a traceback:\n{p.stderr}"
