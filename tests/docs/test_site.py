"""The documentation site's promises (issue 30), checked on its sources and on a built copy.

- every name of ``mcpsync.__all__`` has an entry in the API reference (``docs/reference.md``),
  and the built reference page has its anchor;
- every typed error (``error_classes.py``) has an entry in ``docs/troubleshooting.md``;
- the example marks of ``doc_blocks.py`` are where they act, say why a block is skipped,
  and stay rare;
- every page is in the nav (``mkdocs build --strict`` refuses one that is not; checked here
  too so that the quick tier says it);
- the journey diagram's links reach anchors of the built reference page.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
from xml.etree import ElementTree

import pytest
from doc_blocks import REPO, all_blocks, marks_without_a_block
from error_classes import error_classes

import mcpsync

DOCS = REPO / "docs"
REFERENCE = (DOCS / "reference.md").read_text(encoding="utf-8")
ENTRY = re.compile(r"^::: (mcpsync(?:\.\w+)+)\s*$", re.M)


def reference_paths() -> dict[str, str]:
    """Name of ``__all__`` -> the dotted path its reference entry documents."""
    found: dict[str, str] = {}
    for path in ENTRY.findall(REFERENCE):
        found.setdefault(path.rsplit(".", 1)[1], path)
    return found


def resolve(dotted: str) -> object:
    """The object at ``dotted``: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def test_every_public_name_has_a_reference_entry():
    entries = reference_paths()
    missing = sorted(set(mcpsync.__all__) - set(entries))
    assert not missing, f"docs/reference.md has no `::: mcpsync....` entry for {missing}"
    for name in mcpsync.__all__:  # the entry documents that very object
        assert resolve(entries[name]) == getattr(mcpsync, name), (
            f"{entries[name]} is not mcpsync.{name}"
        )


def test_every_typed_error_has_a_troubleshooting_entry():
    page = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)$", page, re.M))
    errors = error_classes()
    assert len(errors) >= 40, "error_classes() stopped finding the errors?"
    missing = sorted(set(errors) - headings)
    assert not missing, f"docs/troubleshooting.md has no '### Name' entry for {missing}"
    for name in errors:
        entry = page.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert "**What to do:**" in entry, f"troubleshooting entry {name} says no 'What to do'"
    assert not headings - set(errors), f"entries for no error: {sorted(headings - set(errors))}"


def test_example_marks_act_and_stay_rare():
    blocks = all_blocks()
    assert not marks_without_a_block(), (
        f"an example mark not right before a fence: {marks_without_a_block()}"
    )
    python = [b for b in blocks if b.lang == "python"]
    skipped = [b for b in python if b.mark == "skip"]
    assert len(python) >= 20, "fewer Python examples than the pages had: a parsing problem?"
    assert all(len(b.reason) >= 10 for b in skipped), [b.id for b in skipped]
    assert len(skipped) <= max(3, len(python) // 10), (
        f"{len(skipped)} of {len(python)} Python examples are skipped: make them run "
        f"({[b.id for b in skipped]})"
    )
    assert not [b.id for b in blocks if "<!-- runnable" in b.code], "the old marks are gone"
    run_bash = [b for b in blocks if b.lang == "bash" and b.mark == "run"]
    assert run_bash, "the README's command-line example runs (<!-- example: run -->)"


def test_every_page_is_in_the_nav():
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r":\s*([\w-]+\.md)\s*$", config, re.M))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages == nav, (
        f"pages not in the nav: {pages - nav}; nav entries with no page: {nav - pages}"
    )


def test_readme_fits_on_a_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move what is more to docs/"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert p.returncode == 0, f"mkdocs build --strict failed:\n{p.stdout}\n{p.stderr}"
    return site


def test_the_built_site_has_every_reference_anchor(built_site: pathlib.Path):
    html = (built_site / "reference.html").read_text(encoding="utf-8")
    ids = set(re.findall(r'id="([^"]+)"', html))
    missing = sorted(
        p for n, p in reference_paths().items() if n in mcpsync.__all__ and p not in ids
    )
    assert not missing, f"the built reference page has no anchor for {missing}"


def test_the_built_site_journey_links_reach_the_reference(built_site: pathlib.Path):
    html = (built_site / "journey.html").read_text(encoding="utf-8")
    targets = re.findall(r'<a href="reference\.html#([\w.]+)"', html)
    assert len(targets) >= 4, "the journey diagram links each phase to its module"
    ids = set(
        re.findall(r'id="([^"]+)"', (built_site / "reference.html").read_text(encoding="utf-8"))
    )
    assert not [t for t in targets if t not in ids], [t for t in targets if t not in ids]


def test_the_benchmark_figure_is_drawn_by_the_benchmark_script(tmp_path: pathlib.Path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import plot
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    summary = {
        "bare": {"seq_rate": 100.0, "threads_rate": 200.0, "big1_mbps": 50.0},
        "mcpsync": {"seq_rate": 90.0, "threads_rate": 300.0, "big1_mbps": 60.0},
        "sdk": {"error": "not installed"},
    }
    out = tmp_path / "figure.svg"
    plot.write_svg({"stdio": {"summary": summary}}, str(out))
    svg = ElementTree.parse(out).getroot()
    labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "0.90x" in labels and "1.50x" in labels and "1.20x" in labels, labels
    assert labels.count("not run") == 3, labels
    shipped = ElementTree.parse(DOCS / "performance.svg").getroot()  # the page's figure
    assert "ratio to a bare loop" in (shipped.findtext("{http://www.w3.org/2000/svg}title") or "")
    assert "performance.svg" in (DOCS / "performance.md").read_text(encoding="utf-8")


def test_the_built_site_refuses_a_broken_link_or_anchor(tmp_path: pathlib.Path):
    """--strict means something: the same configuration over a copy of the pages with one
    broken anchor fails, naming it (so a setting that hides warnings would show here)."""
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    with (docs / "index.md").open("a", encoding="utf-8") as fh:
        fh.write("\n[a broken anchor](auth.md#no-such-section)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {REPO / 'mkdocs.yml'}\ndocs_dir: {docs}\n", encoding="utf-8")
    p = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert p.returncode != 0, "a broken anchor did not fail mkdocs build --strict"
    assert "no-such-section" in p.stderr, p.stderr
