"""The code blocks of the documentation: where they are and how each is marked.

Owns the reading of ``README.md`` and ``docs/*.md`` into blocks, for
``test_doc_examples.py`` (which runs them) and ``test_site.py`` (which checks the marks).

Every fenced ``python`` block runs, as a script of its own, in the test command. A block
that cannot run alone says so on the line before its fence, visibly in the page's source:

- ``<!-- example: pytest -->``: a test module; it runs under ``pytest --mcp-config mcp.json``
  beside an ``mcp.json`` holding the demo server;
- ``<!-- example: skip: REASON -->``: not run (rare: a server or service the test command
  does not have); the reason is required;
- ``<!-- example: run -->`` on a ``bash`` block: run it (other ``bash`` blocks are not run).
"""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARK = re.compile(r"^\s*<!-- example: (pytest|run|skip: (?P<reason>.+?)) -->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # repository-relative path
    line: int  # the line of the opening fence, 1-based
    lang: str
    code: str
    mark: str  # "", "pytest", "run" or "skip"
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        if self.mark == "skip":
            return False
        return self.lang == "python" or (self.lang == "bash" and self.mark == "run")


def blocks(page: pathlib.Path) -> list[Block]:
    """Every fenced block of ``page``, with the mark on the line before its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group("lang"):
            i += 1
            continue
        indent, start = m.group("indent"), i
        end = start + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [
            line[len(indent) :] if line.startswith(indent) else line
            for line in lines[start + 1 : end]
        ]
        prev = lines[start - 1] if start else ""
        mark = MARK.match(prev)
        kind, reason = "", ""
        if mark:
            kind = "skip" if mark.group("reason") else mark.group(1)
            reason = mark.group("reason") or ""
        out.append(
            Block(
                page=page.relative_to(REPO).as_posix(),
                line=start + 1,
                lang=m.group("lang"),
                code="\n".join(body) + "\n",
                mark=kind,
                reason=reason,
            )
        )
        i = end + 1
    return out


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


def marks_without_a_block() -> list[str]:
    """``page:line`` of every example mark not right before a fence (a mark that does nothing)."""
    stray = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if line.lstrip().startswith("<!-- example:"):
                nxt = lines[n + 1] if n + 1 < len(lines) else ""
                if not MARK.match(line) or not FENCE.match(nxt):
                    stray.append(f"{page.relative_to(REPO).as_posix()}:{n + 1}")
    return stray
