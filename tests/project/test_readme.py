"""The README as a front page, and the facts the docs state about the repository.

- the two first commands (``bash scripts/demo``, ``bash scripts/test``) open the README and
  the scripts they name exist;
- the first Python example runs in this process and leaves nothing behind (every example of
  the README and the docs also runs as a script of its own: ``tests/docs/test_doc_examples.py``);
- the test files the README, ``docs/`` and ``notebooks/README.md`` name exist;
- the package tree drawn in the README's Architecture section (which ``docs/development.md``
  includes) is the package's tree.
"""

from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
PACKAGE = REPO / "mcpsync"

# Where the README, docs/ and notebooks/README.md send a reader for the tests of a feature.
TEST_PATH = re.compile(r"\btests/[\w/]*?test_\w+\.py")
DOCS = [REPO / "README.md", REPO / "notebooks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_the_two_first_commands_open_the_readme():
    first = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first and README.index(first.group(0)) < README.index("\n## "), "the commands come first"
    commands = [line.split("#")[0].split() for line in first.group(1).splitlines()]
    assert commands[0] == ["bash", "scripts/demo"], commands
    assert commands[1] == ["bash", "scripts/test"], commands
    for argv in commands:
        assert (REPO / argv[1]).is_file(), f"README's first commands name {argv[1]}, not there"


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


def _drawing() -> str:
    page = (REPO / "README.md").read_text(encoding="utf-8")
    included = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    assert '--8<-- "README.md:tree"' in included, "docs/development.md lost the tree drawing"
    section = page.split("## Architecture", 1)[1]
    drawing = re.search(r"```text\n(mcpsync/\n.*?)```", section, re.S)
    assert drawing, "the README lost the package tree drawing"
    return drawing.group(1)


def test_the_package_tree_drawing_matches_the_package():
    drawing = _drawing()
    names = set(re.findall(r"(?<![\w./])(\w+(?:\.py|/))(?!\w)", drawing))
    packages = {p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {
        p.name
        for p in PACKAGE.glob("*.py")
        if not p.name.startswith("_") or p.name == "__init__.py"
    }
    missing = sorted((packages | modules) - names)
    assert not missing, f"the README's tree drawing lacks {missing}"
    anywhere = {p.name + "/" for p in PACKAGE.rglob("*") if p.is_dir()} | {
        p.name for p in PACKAGE.rglob("*.py")
    }
    invented = sorted(n for n in names - anywhere if n != "mcpsync/")
    assert not invented, f"the README's tree drawing names what is not there: {invented}"
