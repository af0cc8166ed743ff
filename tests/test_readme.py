"""The README's first Python example runs as written."""

from __future__ import annotations

import pathlib
import re


def test_readme_quickstart_runs(no_leaks, capsys):
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    first = re.findall(r"```python\n(.*?)```", readme, re.S)[0]
    exec(compile(first, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "echo" in out and "hi" in out
