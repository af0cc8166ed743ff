"""Run official conformance scenarios one by one against tests/conformance/client.py.

Each scenario runs on its own (``--scenario``), so the client's exit code counts: the
suite's summary modes ignore it. A scenario passes when the harness exits 0, which needs
no FAILURE/WARNING check, exit 0 from the client and no timeout; it is "empty" when the
harness recorded no SUCCESS/FAILURE/WARNING check at all.

    python tests/conformance/run.py --spec-version 2025-11-25 SCENARIO [...]
    python tests/conformance/run.py --baseline            # everything in expected-pass.txt
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE_BIN = ROOT / "tests" / "node" / "node_modules" / ".bin"
BASELINE = HERE / "expected-pass.txt"


@dataclass
class Outcome:
    scenario: str
    version: str
    exit_code: int
    checks: list[dict] = field(default_factory=list)
    output: str = ""

    @property
    def bad(self) -> list[str]:
        return [
            f"{c['id']}[{c['status']}]"
            for c in self.checks
            if c["status"] in ("FAILURE", "WARNING")
        ]

    @property
    def ok_checks(self) -> int:
        return sum(c["status"] == "SUCCESS" for c in self.checks)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.bad


def baseline() -> list[tuple[str, str]]:
    """(version, scenario) pairs that must pass; lines are `VERSION SCENARIO`."""
    pairs = []
    for line in BASELINE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            version, scenario = line.split()
            pairs.append((version, scenario))
    return pairs


def run_one(scenario: str, version: str, timeout_ms: int = 60000) -> Outcome:
    env = dict(os.environ, PATH=f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    command = f"{sys.executable} {HERE / 'client.py'}"
    with tempfile.TemporaryDirectory(prefix="conformance-") as out:
        args = [str(NODE_BIN / "conformance"), "client", "--command", command, "--scenario", scenario,
                "--timeout", str(timeout_ms), "-o", out]  # fmt: skip
        if version != "default":  # "X+force": extension scenarios are off the X timeline
            args += ["--spec-version", version.removesuffix("+force")]
            args += ["--force"] if version.endswith("+force") else []
        try:
            proc = subprocess.run(
                args, env=env, capture_output=True, text=True, timeout=timeout_ms / 1000 + 60
            )
            code, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, text = 124, f"harness timed out: {exc}"
        checks: list[dict] = []
        for path in glob.glob(os.path.join(out, "**", "checks.json"), recursive=True):
            checks.extend(json.loads(Path(path).read_text()))
    return Outcome(scenario, version, code, checks, text[-4000:])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="*")
    parser.add_argument("--spec-version", default="2025-11-25")
    parser.add_argument(
        "--baseline", action="store_true", help="run every scenario of expected-pass.txt"
    )
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    pairs = baseline() if args.baseline else [(args.spec_version, s) for s in args.scenarios]
    with ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(lambda p: run_one(p[1], p[0]), pairs))
    for o in outcomes:
        mark = "PASS " if o.passed else "FAIL "
        if o.passed and o.ok_checks == 0:
            mark = "EMPTY"
        print(f"{mark} {o.version} {o.scenario}: {o.ok_checks} ok, exit {o.exit_code}"
              + (f" -> {', '.join(o.bad)}" if o.bad else ""))  # fmt: skip
    failed = [o for o in outcomes if not o.passed]
    print(f"{len(outcomes) - len(failed)}/{len(outcomes)} scenarios passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
