"""docs/telemetry.md: the example (a Host with two servers, one traced call) runs and prints
the span tree the page shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"


def test_the_example_prints_the_span_tree_shown():
    text = PAGE.read_text()
    example = text[text.index("## Example") :]
    code, shown = re.findall(r"```(?:python)?\n(.*?)```", example, re.S)[:2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == shown
