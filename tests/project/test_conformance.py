"""The official conformance suite (npm @modelcontextprotocol/conformance, pinned) drives
tests/conformance/client.py, one scenario at a time; every scenario listed in
tests/conformance/expected-pass.txt must pass (checks and the client's exit code)."""

from __future__ import annotations

import pytest
from conformance.run import baseline, run_one

pytestmark = pytest.mark.real

CASES = baseline()


@pytest.mark.parametrize(("version", "scenario"), CASES, ids=[f"{v}:{s}" for v, s in CASES])
def test_conformance_scenario(version, scenario):
    outcome = run_one(scenario, version)
    assert outcome.passed, (
        f"{scenario} at {version}: exit {outcome.exit_code}, failing checks {outcome.bad}\n{outcome.output}"
    )
    assert outcome.ok_checks > 0 or scenario in {"initialize"}, (
        "the harness recorded no successful check"
    )
    if scenario.startswith("sep-2640-"):  # skills: the extension's own checks ran, none skipped
        own = [c for c in outcome.checks if c["id"].startswith("sep-2640-host-")]
        assert own and all(c["status"] == "SUCCESS" for c in own), own
