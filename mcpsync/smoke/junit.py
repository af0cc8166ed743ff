"""A :class:`~mcpsync.smoke.results.SmokeReport` as a JUnit XML file (one test suite per entry:
bring-up and each call as test cases), as CI systems read it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from xml.etree import ElementTree

if TYPE_CHECKING:
    from .results import SmokeReport

__all__ = ["write_junit_xml"]


# --------------------------------------------------------------------------- JUnit


def write_junit_xml(report: SmokeReport, path: str | os.PathLike[str]) -> None:
    """A JUnit XML file: one ``<testcase>`` per entry, one per ``--call`` on each entry.

    Failed bring-ups and calls are ``<failure type=CLASS message=...>`` with the whole
    error as text; disabled or refused entries and calls a server does not offer are
    ``<skipped>``.
    """
    suite = ElementTree.Element("testsuite", name="mcpsync smoke")
    tests = failures = skipped = 0
    for e in report.entries:
        cases: list[tuple[str, float | None, str | None, str | None, str | None]] = []
        skip = None
        if e.state == "disabled":
            skip = "disabled in the config"
        elif e.state == "refused":
            skip = e.error or "consent refused"
        cases.append(
            (
                "bring-up",
                e.seconds,
                e.failure,
                e.error if e.failure else None,
                skip,
            )
        )
        for c in e.calls:
            cases.append(
                (
                    f"call {c.tool}",
                    c.seconds,
                    c.failure,
                    c.error,
                    "the server offers no such tool" if c.skipped else None,
                )
            )
        for name, seconds, failure, error, skip_reason in cases:
            case = ElementTree.SubElement(
                suite,
                "testcase",
                name=name,
                classname=f"mcpsync.smoke.{e.name}",
                time=f"{seconds or 0.0:.3f}",
            )
            tests += 1
            if skip_reason is not None:
                ElementTree.SubElement(case, "skipped", message=skip_reason)
                skipped += 1
            elif failure is not None:
                text = error or failure
                el = ElementTree.SubElement(
                    case, "failure", type=failure, message=text.splitlines()[0] if text else failure
                )
                el.text = text
                failures += 1
            if e.stderr_tail and name == "bring-up":
                ElementTree.SubElement(case, "system-err").text = e.stderr_tail
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    suite.set("time", f"{report.seconds:.3f}")
    root = ElementTree.Element("testsuites")
    root.append(suite)
    ElementTree.indent(root)
    Path(path).write_bytes(ElementTree.tostring(root, encoding="utf-8", xml_declaration=True))
